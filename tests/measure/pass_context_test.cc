// The PassContext travels (DESIGN invariant 6), through real workers, and is
// applied there, not only carried: each part of it (opt level, a disabled
// pass, a required pass, each config option that changes code) changes the
// code the build worker generates, what its instruments saw comes back per
// candidate, and the one who measures decides the context, whatever is
// current in the calling thread.
#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <optional>
#include <sstream>

#include "measure/measure_test_util.h"
#include "tensortune/codegen/c_codegen.h"
#include "tensortune/lower/pipeline.h"
#include "tensortune/measure/measurer.h"
#include "tensortune/search/tuner.h"

namespace tensortune::measure {
namespace {

using namespace testing;
using Options = ir::PassContextOptions;
using schedule::IterAnnotation;

/// The passes a C build runs: the lowering pipeline, then the back end's.
std::vector<std::string> all_pass_names() {
  std::vector<std::string> names = lower::pipeline_pass_names();
  for (auto& name : lower::target_pipeline_pass_names()) names.push_back(name);
  return names;
}

/// The C source the module cache keeps next to `library` (codegen/module.h:
/// tt-<key>.so beside tt-<key>.c).
std::string generated_source(const std::string& library) {
  const std::string so = ".so";
  EXPECT_TRUE(library.size() > so.size() && library.ends_with(so)) << library;
  std::string path = library.substr(0, library.size() - so.size()) + ".c";
  std::ifstream in(path);
  EXPECT_TRUE(in.good()) << "no generated source at " << path;
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

bool vectorized(const std::string& source) {
  return source.find("vector_size") != std::string::npos;
}
bool unroll_pragma(const std::string& source) {
  return source.find("#pragma GCC unroll") != std::string::npos;
}

/// matmul 12x16x6: j split by 8 and its inner loop vectorized; i split by 4
/// and its inner loop marked for unrolling; a local accumulator computed at
/// a serial tile loop (an allocation storage_rewrite hoists).
te::Task rich_task() {
  return te::Task::make(te::make_named_workload_from_text("matmul", "12,16,6"),
                        ir::Target::parse("c"));
}
schedule::State rich_state() {
  using namespace schedule;
  return State::make({cache_write(2, "local"), split(3, 0, {4}), split(3, 2, {8}),
                      reorder(3, {0, 2, 1, 3}), compute_at(2, 3, 1),
                      annotate(3, 3, IterAnnotation::kVectorize),
                      annotate(2, 0, IterAnnotation::kUnroll)});
}

/// What the build worker made of rich_state() under `context`.
BuildResult build_under(LocalBuilder& builder, const ir::PassContext& context) {
  BuildResult b = builder.build(rich_task(), {rich_state()}, context)[0];
  EXPECT_EQ(b.error_code, ErrorCode::kNoError) << b.error_message;
  EXPECT_EQ(b.pass_context_hash.value, context.hash());
  return b;
}

std::vector<std::string> passes_run(const BuildResult& b) {
  return b.instruments.at("pass_names").get<std::vector<std::string>>();
}

ir::PassContext with_names(Options o) {
  return ir::PassContext::make(o.with_instrument(ir::InstrumentSpec::make("pass_names")));
}

TEST(PassContextApplied, EveryPartChangesWhatTheWorkerBuilds) {
  LocalBuilder builder(builder_options(1));
  BuildResult plain = build_under(builder, with_names(Options()));
  std::string plain_c = generated_source(plain.library);
  EXPECT_TRUE(vectorized(plain_c));
  EXPECT_FALSE(unroll_pragma(plain_c));  // the unroll pass unrolled the loop itself
  EXPECT_EQ(passes_run(plain), all_pass_names());

  // opt_level 0: no optimising pass ran, so no vector code and no unrolling.
  BuildResult o0 = build_under(builder, with_names(Options().with_opt_level(0)));
  EXPECT_TRUE(passes_run(o0).empty()) << o0.instruments.dump();
  EXPECT_FALSE(vectorized(generated_source(o0.library)));
  EXPECT_TRUE(unroll_pragma(generated_source(o0.library)));

  // A disabled pass does not run.
  BuildResult no_vec = build_under(builder, with_names(Options().with_disabled("vectorize")));
  auto names = passes_run(no_vec);
  EXPECT_EQ(std::count(names.begin(), names.end(), "vectorize"), 0);
  EXPECT_FALSE(vectorized(generated_source(no_vec.library)));

  // A required pass runs even where the opt level would skip it.
  BuildResult required =
      build_under(builder, with_names(Options().with_opt_level(0).with_required("vectorize")));
  EXPECT_EQ(passes_run(required), std::vector<std::string>{"vectorize"});
  EXPECT_TRUE(vectorized(generated_source(required.library)));

  // Each config option that changes the code.
  BuildResult serial = build_under(
      builder, ir::PassContext::make(Options().with_config("tir.disable_vectorize", true)));
  EXPECT_FALSE(vectorized(generated_source(serial.library)));
  std::string plain_no_instruments =
      generated_source(build_under(builder, ir::PassContext::make()).library);
  // max_unroll_step 0: the unroll-annotated loop over i (extent 4) stays a
  // plain loop, where the default replicates its body four times.
  std::string no_unroll = generated_source(
      build_under(builder, ir::PassContext::make(Options().with_config("tir.max_unroll_step", 0)))
          .library);
  EXPECT_FALSE(unroll_pragma(no_unroll));
  EXPECT_NE(no_unroll.find("i < 4;"), std::string::npos) << no_unroll;
  EXPECT_EQ(plain_no_instruments.find("i < 4;"), std::string::npos) << plain_no_instruments;
  BuildResult kept = build_under(
      builder, ir::PassContext::make(Options().with_config("tir.disable_storage_rewrite", true)));
  EXPECT_NE(generated_source(kept.library), plain_no_instruments);
  BuildResult fault = build_under(
      builder, ir::PassContext::make(Options().with_config("testing.inject_fault", "abort")));
  EXPECT_NE(generated_source(fault.library).find("testing.inject_fault=abort"), std::string::npos);
}

TEST(PassContextApplied, InstrumentsComeBackPerCandidate) {
  // Three candidates of one request, the second of which does not replay:
  // each that lowered saw the pipeline once (not the request's passes three
  // times over), and the one that never lowered saw nothing.
  LocalBuilderOptions options = builder_options(1);
  options.candidates_per_request = 8;
  LocalBuilder builder(options);
  schedule::State bad = schedule::State::make({schedule::split(7, 0, {2})});
  ir::PassContext context = with_names(Options());
  std::vector<BuildResult> built =
      builder.build(small_task(), {vectorized_state(), bad, schedule::State::make()}, context);
  ASSERT_EQ(built.size(), 3u);
  EXPECT_EQ(built[0].error_code, ErrorCode::kNoError) << built[0].error_message;
  EXPECT_EQ(built[1].error_code, ErrorCode::kInstantiationError) << built[1].error_message;
  EXPECT_EQ(built[2].error_code, ErrorCode::kNoError) << built[2].error_message;
  EXPECT_EQ(passes_run(built[0]), all_pass_names());
  EXPECT_FALSE(built[1].instruments.contains("pass_names")) << built[1].instruments.dump();
  EXPECT_EQ(passes_run(built[2]), all_pass_names());

  // And they reach the MeasureResult, hence the record.
  LocalRunner runner(runner_options());
  MeasureResult r =
      measure_candidates(small_task(), {vectorized_state()}, context, builder, runner)[0];
  ASSERT_TRUE(r.ok()) << r.error_message;
  EXPECT_EQ(r.instruments.at("pass_names").get<std::vector<std::string>>(), all_pass_names());
}

TEST(PassContextApplied, TheTuningRunOwnsTheContext) {
  // A context put in force around tune() is the one every candidate is built
  // under: the builder holds none of its own that could disagree.
  te::Task task = small_task();
  ir::PassContext context =
      ir::PassContext::make(Options().with_config("tir.disable_vectorize", true));
  LocalBuilder builder(builder_options(1));
  LocalRunner runner(runner_options());
  search::TuneOptions options;
  options.trials = 3;
  options.batch_size = 3;
  std::vector<MeasureResult> results;
  search::TuneHooks hooks;
  hooks.result = [&](const MeasureInput&, const MeasureResult& r) { results.push_back(r); };
  auto policy = [](const te::Task& t, uint64_t seed) {
    return std::make_unique<search::RandomSearchPolicy>(t, seed);
  };
  {
    ir::PassContextGuard guard(context);
    search::TuneReport report = search::tune({task}, policy, builder, runner, options, hooks);
    EXPECT_EQ(report.pass_context.hash(), context.hash());
  }
  ASSERT_EQ(results.size(), 3u);
  for (const auto& r : results) EXPECT_EQ(r.pass_context_hash.value, context.hash());

  // An explicit context wins over the one in force.
  options.pass_context = ir::PassContext::make();
  results.clear();
  ir::PassContextGuard guard(context);
  search::tune({task}, policy, builder, runner, options, hooks);
  for (const auto& r : results)
    EXPECT_EQ(r.pass_context_hash.value, ir::PassContext::make().hash());
}

}  // namespace
}  // namespace tensortune::measure
