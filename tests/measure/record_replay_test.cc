// A record is enough to rebuild what was measured: measure random states
// through real workers, log them, read the log back, and replay each
// record's state under the context its hash names. The C source must be the
// source of the library that was timed, byte for byte, and building it again
// must land on that very library in the module cache.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <optional>
#include <random>
#include <sstream>

#include "measure/measure_test_util.h"
#include "tensortune/codegen/backend.h"
#include "tensortune/codegen/c_codegen.h"
#include "tensortune/codegen/module.h"
#include "tensortune/lower/lower.h"
#include "tensortune/measure/measurer.h"
#include "tensortune/measure/record.h"
#include "tensortune/object/structural.h"
#include "tensortune/schedule/compute_dag.h"
#include "tensortune/schedule/random_schedule.h"

namespace tensortune::measure {
namespace {

using namespace testing;

/// Passes the calls on and keeps the build results, which measure_candidates
/// does not return (the library paths are not part of a record).
class KeepingBuilder final : public Builder {
 public:
  explicit KeepingBuilder(Builder& inner) : inner_(inner) {}
  void check(const te::Task& task, const ir::PassContext& context) override {
    inner_.check(task, context);
  }
  std::vector<BuildResult> build(const te::Task& task, const std::vector<schedule::State>& states,
                                 const ir::PassContext& context) override {
    last_ = inner_.build(task, states, context);
    return last_;
  }
  const std::vector<BuildResult>& last() const { return last_; }

 private:
  Builder& inner_;
  std::vector<BuildResult> last_;
};

std::string read_text(const std::string& path) {
  std::ifstream in(path);
  EXPECT_TRUE(in.good()) << "cannot read " << path;
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

/// The source the module cache keeps beside `library` (tt-<key>.c next to tt-<key>.so).
std::string source_of_library(const std::string& library) {
  EXPECT_TRUE(library.ends_with(".so")) << library;
  return read_text(library.substr(0, library.size() - 3) + ".c");
}

/// The C that `state` lowers to as kernel `name` under `context`, as a
/// build worker generates it; nullopt when the state does not replay.
std::optional<std::string> regenerate(const te::Task& task, const schedule::State& state,
                                      const std::string& name, const ir::PassContext& context) {
  ir::PassContextGuard guard(context);
  schedule::ComputeDAG dag(te::workload_tensors(task->workload));
  std::optional<schedule::LoopState> loops;
  try {
    loops.emplace(schedule::replay(dag, state));
  } catch (const Error&) {
    return std::nullopt;
  }
  return codegen::generate_c({lower::lower(*loops, name)}, task->target);
}

/// True when dropping any one step of `state` changes its C (or makes it
/// not replay): then a record that lost a step cannot pass for it.
bool every_step_shows(const te::Task& task, const schedule::State& state,
                      const ir::PassContext& context) {
  std::optional<std::string> full = regenerate(task, state, "k", context);
  for (size_t drop = 0; drop < state->steps.size(); ++drop) {
    std::vector<schedule::Step> steps = state->steps;
    steps.erase(steps.begin() + static_cast<std::ptrdiff_t>(drop));
    if (regenerate(task, schedule::State::make(steps), "k", context) == full) return false;
  }
  return true;
}

TEST(RecordReplay, ReplayedRecordsRegenerateTheMeasuredSource) {
  te::Task task = small_task();
  // Not the default context, so that replaying needs the recorded hash to
  // pick the right one.
  ir::PassContext context =
      ir::PassContext::make(ir::PassContextOptions().with_config("tir.max_unroll_step", 4));
  ir::PassContext plain = ir::PassContext::make();
  ASSERT_NE(context.hash(), plain.hash());

  // Random states in which every step changes the code, at least two steps each.
  schedule::ComputeDAG dag(te::workload_tensors(task->workload));
  std::mt19937_64 rng(7);
  schedule::RandomScheduleOptions random;
  random.max_steps = 8;
  std::vector<schedule::State> states;
  for (int tries = 0; states.size() < 5 && tries < 200; ++tries) {
    schedule::State s = schedule::random_state(dag, rng, random);
    if (s->steps.size() >= 2 && every_step_shows(task, s, context)) states.push_back(s);
  }
  ASSERT_EQ(states.size(), 5u) << "the seed gave too few states whose every step shows";

  // One candidate per request: each gets a library of its own, named candidate_0.
  LocalBuilderOptions build_options = builder_options(2);
  build_options.candidates_per_request = 1;
  LocalBuilder local(build_options);
  KeepingBuilder builder(local);
  LocalRunner runner(runner_options());

  std::string log = test_cache_dir() + "-replay.jsonl";
  std::filesystem::remove(log);
  std::vector<std::string> measured_sources;
  {
    RecordWriter writer(log);
    size_t next = 0;
    measure_candidates(task, states, context, builder, runner,
                       [&](const MeasureInput& input, const MeasureResult& result) {
                         // Before the record is written: the in-memory state
                         // regenerates what the worker compiled.
                         const BuildResult& built = builder.last().at(next++);
                         ASSERT_EQ(result.error_code, ErrorCode::kNoError) << result.error_message;
                         std::string measured = source_of_library(built.library);
                         EXPECT_EQ(regenerate(input.task, input.state, built.function, context),
                                   measured);
                         measured_sources.push_back(measured);
                         writer.write(Record{input, result});
                       });
  }
  ASSERT_EQ(measured_sources.size(), states.size());

  LogContents contents = load_records(log);
  EXPECT_TRUE(contents.warnings.empty());
  ASSERT_EQ(contents.records.size(), states.size());
  for (size_t i = 0; i < states.size(); ++i) {
    SCOPED_TRACE("record " + std::to_string(i));
    const Record& record = contents.records[i];
    const BuildResult& built = builder.last()[i];
    EXPECT_TRUE(structural_equal(record.input.state, states[i]));

    // The record names its context only by hash: pick the known one it names.
    ASSERT_EQ(record.result.pass_context_hash.value, context.hash());
    std::optional<ir::PassContext> recorded;
    for (const auto& candidate : {plain, context}) {
      if (candidate.hash() == record.result.pass_context_hash.value) recorded = candidate;
    }
    ASSERT_TRUE(recorded.has_value());

    std::optional<std::string> replayed =
        regenerate(record.input.task, record.input.state, built.function, *recorded);
    ASSERT_TRUE(replayed.has_value());
    EXPECT_EQ(*replayed, measured_sources[i]);

    // Built again, the replayed source is found in the cache as the very
    // library that was timed: its key hashes source, compiler and flags.
    codegen::ModuleOptions module_options;
    module_options.cache_dir = build_options.cache_dir;
    codegen::Module again =
        codegen::kernel_sources(record.input.task->target)->compile(*replayed, module_options);
    EXPECT_EQ(again.library_path(), built.library);
    EXPECT_TRUE(again.from_cache());

    // The comparison has teeth: the state without its last step gives other
    // code (every_step_shows chose the states so).
    std::vector<schedule::Step> fewer = record.input.state->steps;
    fewer.pop_back();
    EXPECT_NE(
        regenerate(record.input.task, schedule::State::make(fewer), built.function, *recorded),
        replayed);
  }
  std::filesystem::remove(log);
}

}  // namespace
}  // namespace tensortune::measure
