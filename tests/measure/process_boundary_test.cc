// What crosses the process boundary survives it, through real workers:
// DAG workloads whose placeholder or intermediate is shared build, run,
// check and replay from a log with their sharing intact; a worker that
// defines a workload differently, lacks something registered only in the
// tuner, is stale or foreign, is refused before any candidate is charged;
// targets with hosts (a CUDA one included) arrive whole.
#include <gtest/gtest.h>

#include <filesystem>
#include <random>

#include "common/test_util.h"
#include "measure/measure_test_util.h"
#include "tensortune/ir/pass_context.h"
#include "tensortune/measure/measurer.h"
#include "tensortune/measure/protocol.h"
#include "tensortune/object/structural.h"
#include "tensortune/schedule/random_schedule.h"
#include "tensortune/te/ops.h"

namespace tensortune::measure {
namespace {

using namespace testing;

// Registered in this test program only, never in tensortune-worker.
bool register_tuner_only() {
  te::register_workload({"tuner_only_workload",
                         "registered in the test program only",
                         {{"N", te::ArgType::kInt, nullptr}},
                         [](const nlohmann::json& a) -> te::WorkloadTensors {
                           te::Tensor x = te::placeholder({a.at(0).get<int64_t>()});
                           return {{x}, {te::relu(x)}};
                         },
                         "4"});
  return true;
}
const bool registered = register_tuner_only();
TT_REGISTER_CONFIG_OPTION("tuner_only.option", ir::ConfigType::kBool, false,
                          "registered in the test program only");
class Silent final : public ir::Instrument {
 public:
  nlohmann::json results() const override { return nullptr; }
};
TT_REGISTER_INSTRUMENT("tuner_only_instrument", "registered in the test program only",
                       [](const nlohmann::json&) -> std::unique_ptr<ir::Instrument> {
                         return std::make_unique<Silent>();
                       });
TT_REGISTER_TARGET_KIND(([] {
  ir::TargetKindInfo k;
  k.name = "tuner_only_kind";
  k.doc = "registered in the test program only";
  k.hardware_params = [](const ir::TargetNode&) {
    return ir::HardwareParams(make_node<ir::HardwareParamsNode>());
  };
  return k;
}()));

/// C = A . A^T: the placeholder A is read by both operands.
te::Task shared_placeholder_task() {
  te::Tensor a = te::placeholder({6, 5}, ir::DataType::float32(), "A");
  return te::Task::make(te::make_dag_workload({a}, {te::dense(a, a)}), ir::Target::parse("c"));
}

/// T = relu(A); C = T . T^T: the intermediate T is read by both operands.
te::Task shared_intermediate_task() {
  te::Tensor a = te::placeholder({7, 4}, ir::DataType::float32(), "A");
  te::Tensor t = te::relu(a);
  return te::Task::make(te::make_dag_workload({a}, {te::dense(t, t)}), ir::Target::parse("c"));
}

/// The naive schedule and a few random ones.
std::vector<schedule::State> some_states(const te::Task& task) {
  schedule::ComputeDAG dag(te::workload_tensors(task->workload));
  std::mt19937_64 rng(5);
  std::vector<schedule::State> states = {schedule::State::make()};
  for (int i = 0; i < 3; ++i) states.push_back(schedule::random_state(dag, rng));
  return states;
}

class ProcessBoundary : public ::testing::Test {
 protected:
  void SetUp() override {
    log_ = test_cache_dir() + "-" +
           ::testing::UnitTest::GetInstance()->current_test_info()->name() + ".jsonl";
    std::filesystem::remove(log_);
  }
  void TearDown() override { std::filesystem::remove(log_); }
  std::string log_;
};

void expect_measures_logs_and_replays(const te::Task& task, const std::string& log) {
  ASSERT_TRUE(registered);
  LocalBuilder builder(builder_options(1));
  LocalRunner runner(runner_options());  // with check: wrong sharing would compute wrong answers
  ir::PassContext context = ir::PassContext::make();
  std::vector<schedule::State> states = some_states(task);
  {
    RecordWriter writer(log);
    auto results = measure_candidates(task, states, context, builder, runner,
                                      [&](const MeasureInput& in, const MeasureResult& r) {
                                        writer.write(Record{in, r});
                                      });
    for (const auto& r : results)
      EXPECT_TRUE(r.ok()) << error_code_name(r.error_code) << ": " << r.error_message;
  }
  LogContents logged = load_records(log);
  ASSERT_EQ(logged.records.size(), states.size());
  for (const Record& r : logged.records) {
    // Equal, and shared alike: one node where the tuner had one.
    EXPECT_TRUE(structural_equal(r.input.task, task));
    EXPECT_TRUE(same_sharing(r.input.task, task));
    EXPECT_EQ(post_order(r.input.task).size(), post_order(task).size());
    EXPECT_EQ(r.input.task.workload_key(), task.workload_key());
  }
  // Replayed from the log, through the workers again.
  std::vector<schedule::State> replayed;
  for (const Record& r : logged.records) replayed.push_back(r.input.state);
  for (const auto& r :
       measure_candidates(logged.records[0].input.task, replayed, context, builder, runner)) {
    EXPECT_TRUE(r.ok()) << error_code_name(r.error_code) << ": " << r.error_message;
  }
}

TEST_F(ProcessBoundary, DagWithASharedPlaceholderBuildsRunsChecksAndReplays) {
  te::Task task = shared_placeholder_task();
  ASSERT_EQ(te::workload_tensors(task->workload).inputs.size(), 1u);
  // A copy that lost the sharing is equal but not shared alike, and the
  // check of the build reply would see its extra node.
  te::Tensor a1 = te::placeholder({6, 5}, ir::DataType::float32(), "A");
  te::Tensor a2 = te::placeholder({6, 5}, ir::DataType::float32(), "A");
  te::Workload apart = te::make_dag_workload({a1, a2}, {te::dense(a1, a2)});
  EXPECT_FALSE(same_sharing(apart, task->workload));
  expect_measures_logs_and_replays(task, log_);
}

TEST_F(ProcessBoundary, DagWithASharedIntermediateBuildsRunsChecksAndReplays) {
  expect_measures_logs_and_replays(shared_intermediate_task(), log_);
}

TEST_F(ProcessBoundary, WorkerRefusesAWorkloadItDefinesDifferently) {
  // As if the tuner's registry built another DAG from the same key.
  te::Task task = small_task();
  WorkerPool pool(pool_options(), hello_handshake());
  CheckRequest check;
  check.task = task;
  check.workload_hash = Hash64(workload_hash(task).value + 1);
  CheckReply answer =
      decode<CheckReply>(pool.run({encode(check)}, std::chrono::seconds(30))[0].payload, "reply");
  ASSERT_EQ(answer.problems.size(), 1u);
  EXPECT_NE(answer.problems[0].find("built from different definitions"), std::string::npos)
      << answer.problems[0];

  BuildRequest build;
  build.task = task;
  build.states = {schedule::State::make()};
  build.pass_context = ir::PassContext::make();
  build.workload_hash = check.workload_hash;
  WorkerReply reply = pool.run({encode(build)}, std::chrono::seconds(30))[0];
  EXPECT_TT_ERROR(decode<BuildReply>(reply.payload, "build reply"), kRuntime, "has DAG hash");
}

TEST_F(ProcessBoundary, WhatOnlyTheTunerRegisteredIsRefusedBeforeTheRunNamingIt) {
  LocalBuilder builder(builder_options(1));
  LocalRunner runner(runner_options());
  ir::PassContext plain = ir::PassContext::make();

  te::Task workload = te::Task::make(te::make_named_workload_from_text("tuner_only_workload", "4"),
                                     ir::Target::parse("c"));
  EXPECT_TT_ERROR(builder.check(workload, plain), kRuntime,
                  "unknown workload 'tuner_only_workload'");
  EXPECT_TT_ERROR(runner.check(workload), kRuntime, "unknown workload 'tuner_only_workload'");

  ir::PassContext with_option =
      ir::PassContext::make(ir::PassContextOptions().with_config("tuner_only.option", true));
  EXPECT_TT_ERROR(builder.check(small_task(), with_option), kRuntime, "tuner_only.option");
  ir::PassContext with_instrument = ir::PassContext::make(
      ir::PassContextOptions().with_instrument(ir::InstrumentSpec::make("tuner_only_instrument")));
  EXPECT_TT_ERROR(builder.check(small_task(), with_instrument), kRuntime, "tuner_only_instrument");

  te::Task kind = te::Task::make(small_task()->workload, ir::Target::parse("tuner_only_kind"));
  EXPECT_TT_ERROR(builder.check(kind, plain), kRuntime, "tuner_only_kind");

  // Measuring checks first: an error that says what to do, and no result.
  std::string err;
  try {
    measure_candidates(workload, {schedule::State::make()}, plain, builder, runner);
  } catch (const Error& e) {
    err = e.what();
  }
  EXPECT_NE(err.find("registered only in this program"), std::string::npos) << err;
}

TEST_F(ProcessBoundary, TargetsWithHostsCrossABuildWorkerWhole) {
  // A C target with a host builds, and the worker's task hashes as the tuner's.
  te::Task hosted = te::Task::make(
      small_task()->workload,
      ir::Target::parse("c -num-cores=2").with_host(ir::Target::parse("c -mattr=avx2")));
  LocalBuilder builder(builder_options(1));
  BuildResult built = builder.build(hosted, {vectorized_state()}, ir::PassContext::make())[0];
  EXPECT_EQ(built.error_code, ErrorCode::kNoError) << built.error_message;

  // A CUDA target with a host crosses too: the worker loads it whole (its
  // hash and node count are the tuner's) and says it has no back end for it.
  te::Task cuda = te::Task::make(small_task()->workload,
                                 ir::Target::parse("cuda -arch=sm_86 -host=\"c -mattr=avx2\""));
  WorkerPool pool(pool_options(), hello_handshake());
  BuildRequest request;
  request.task = cuda;
  request.states = {schedule::State::make()};
  request.pass_context = ir::PassContext::make();
  request.workload_hash = workload_hash(cuda);
  WorkerReply reply = pool.run({encode(request)}, std::chrono::seconds(30))[0];
  ASSERT_EQ(reply.status, WorkerReply::Status::kOk) << reply.message;
  BuildReply answer = decode<BuildReply>(reply.payload, "build reply");
  EXPECT_EQ(answer.task_hash.value, structural_hash(cuda));
  EXPECT_EQ(answer.task_nodes, static_cast<int64_t>(post_order(cuda).size()));
  ASSERT_EQ(answer.results.size(), 1u);
  EXPECT_EQ(answer.results[0]->error_code, ErrorCode::kCompileError);
  EXPECT_NE(answer.results[0]->error_message.find("no code generator for target kind 'cuda'"),
            std::string::npos)
      << answer.results[0]->error_message;
  // The builder refuses it before the run instead.
  EXPECT_TT_ERROR(builder.check(cuda, ir::PassContext::make()), kRuntime,
                  "no code generator for target kind 'cuda'");
}

TEST(Handshake, ForeignAndStaleWorkersAreRefusedBeforeAnyCandidate) {
  struct Case {
    std::string program;
    std::vector<std::pair<std::string, std::string>> env;
    std::string why;
  };
  std::string fake = std::string(TT_SOURCE_DIR) + "/tests/measure/fake_worker.py";
  const Case cases[] = {
      // It exits at once, complaining: whether the pool sees the exit or the
      // closed pipe first, its stderr is quoted.
      {"/bin/cat", {}, "unrecognized option '--serve'"},
      {fake, {{"TT_FAKE_GARBAGE", "1"}}, "not one this tensortune understands"},
      {fake, {{"TT_FAKE_PROTOCOL", std::to_string(kProtocolVersion)}}, "built from other sources"},
      {fake, {{"TT_FAKE_PROTOCOL", "1"}}, "speaks protocol version 1"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.program);
    LocalBuilderOptions options = builder_options(1);
    options.pool.worker_path = c.program;
    options.pool.env = c.env;
    LocalBuilder builder(options);
    std::string err;
    try {
      builder.build(small_task(), {schedule::State::make()}, ir::PassContext::make());
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::kRuntime);
      err = e.what();
    }
    EXPECT_NE(err.find("refused"), std::string::npos) << err;
    EXPECT_NE(err.find(c.why), std::string::npos) << err;
    EXPECT_NE(err.find(c.program), std::string::npos) << err;
  }
}

}  // namespace
}  // namespace tensortune::measure
