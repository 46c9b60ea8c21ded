// A task (workload, target with host) and a PassContext cross a real process
// boundary: tensortune-worker, started with posix_spawn, reads them from a
// pipe, re-creates them and writes them back.
#include <gtest/gtest.h>

#include <chrono>

#include "tensortune/ir/pass_context.h"
#include "tensortune/object/serialize.h"
#include "tensortune/object/structural.h"
#include "tensortune/support/subprocess.h"
#include "tensortune/te/task.h"

namespace tensortune {
namespace {

using namespace std::chrono_literals;

ObjectPtr through_worker(Subprocess& worker, const ObjectPtr& value) {
  worker.write_frame(save_string(value), 60s);
  auto reply = worker.read_frame(60s);
  if (!reply) {
    ADD_FAILURE() << "worker closed its stdout; stderr: " << worker.stderr_text();
    return nullptr;
  }
  nlohmann::json doc = parse_json_text(*reply, "worker reply");
  if (doc.contains("error")) {
    ADD_FAILURE() << "worker error: " << doc.dump();
    return nullptr;
  }
  return load_json(doc);
}

TEST(TaskRoundTrip, TaskAndPassContextSurviveAChildProcess) {
  ir::Target host = ir::Target::parse("c -mattr=avx2,fma");
  ir::Target target = ir::Target::parse("c -num-cores=2 -mattr=avx2,fma").with_host(host);
  te::Task task =
      te::Task::make(te::make_named_workload_from_text("conv2d_nchw", "1,8,9,9,4,3,3,2,1"), target);
  ir::PassContext context =
      ir::PassContext::make(ir::PassContextOptions()
                                .with_opt_level(3)
                                .with_config("tir.max_unroll_step", 8)
                                .with_config("tir.disable_vectorize", true)
                                .with_disabled("storage_rewrite")
                                .with_instrument(ir::InstrumentSpec::make("pass_names"))
                                .with_instrument(ir::InstrumentSpec::make("pass_timing")));

  Subprocess worker = Subprocess::spawn({TT_WORKER_PATH, "--roundtrip"});
  auto task_back =
      std::dynamic_pointer_cast<const te::TaskNode>(through_worker(worker, ObjectPtr(task.ptr())));
  auto context_back = std::dynamic_pointer_cast<const ir::PassContextNode>(
      through_worker(worker, ObjectPtr(context.ptr())));
  ASSERT_TRUE(task_back && context_back);

  te::Task t(task_back);
  EXPECT_FALSE(first_difference(task, t)) << *first_difference(task, t);
  EXPECT_EQ(structural_hash(task), structural_hash(t));
  EXPECT_EQ(task.workload_key(), t.workload_key());
  EXPECT_TRUE(t->target == target);
  // The target came back with a host equal to, but not the same object as,
  // ours: combining it with our host again must work.
  EXPECT_FALSE(t->target.host().same_as(host));
  EXPECT_TRUE(t->target.with_host(host) == target);
  EXPECT_TRUE(t->target.with_host(ir::Target::parse("c -mattr=avx2,fma")) == target);
  // The workload re-creates its tensors from the registry in this process too.
  EXPECT_EQ(te::workload_tensors(t->workload).outputs.size(), 1u);

  ir::PassContext c(context_back);
  EXPECT_TRUE(c == context);
  EXPECT_EQ(c.hash(), context.hash());
  EXPECT_TRUE(c->get_config<bool>("tir.disable_vectorize"));
  EXPECT_TRUE(c->is_disabled("storage_rewrite"));
  // The instruments named in the returned context work here.
  ir::PassContextGuard guard(c);
  ir::run_pass("demo", ObjectPtr(task.ptr()), [](const ObjectPtr& x) { return x; });
  ir::run_pass("storage_rewrite", ObjectPtr(task.ptr()), [](const ObjectPtr& x) { return x; });
  auto results = guard.instrument_results();
  ASSERT_TRUE(results.contains("pass_names")) << results.dump();
  EXPECT_NE(results["pass_names"].dump().find("demo"), std::string::npos) << results.dump();
  EXPECT_EQ(results["pass_names"].dump().find("storage_rewrite"), std::string::npos)
      << results.dump();
}

}  // namespace
}  // namespace tensortune
