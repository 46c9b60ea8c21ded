// The PassContext travels (DESIGN invariant 6), through real workers: a
// LocalBuilder's context is saved into the build request, put in force in
// the worker, and everything it changes comes back: what its instruments
// saw there, the code it lowered to, and its hash.
#include <gtest/gtest.h>

#include <fstream>
#include <optional>
#include <sstream>

#include "measure/measure_test_util.h"
#include "tensortune/lower/pipeline.h"
#include "tensortune/measure/measurer.h"

namespace tensortune::measure {
namespace {

using namespace testing;

/// No vectorizing, and the names of the passes that ran.
ir::PassContext no_vectorize_context() {
  return ir::PassContext::make(ir::PassContextOptions()
                                   .with_config("tir.disable_vectorize", true)
                                   .with_instrument(ir::InstrumentSpec::make("pass_names")));
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

bool vectorized(const std::string& source) { return source.find("vector_size") != std::string::npos; }

TEST(PassContextTravels, InstrumentsConfigAndHashComeBackFromTheWorker) {
  te::Task task = small_task();
  ir::PassContext context = no_vectorize_context();
  ir::PassContext plain = ir::PassContext::make();
  ASSERT_NE(context.hash(), plain.hash());

  LocalBuilder builder(builder_options(1), context);
  BuildResult off = builder.build(task, {vectorized_state()})[0];
  ASSERT_EQ(off.error_code, ErrorCode::kNoError) << off.error_message;
  builder.set_pass_context(plain);
  BuildResult on = builder.build(task, {vectorized_state()})[0];
  ASSERT_EQ(on.error_code, ErrorCode::kNoError) << on.error_message;

  // The instrument ran where the passes ran, in the worker, and its findings
  // came back in the reply: every pass of the pipeline, in order, once (one
  // candidate was lowered).
  ASSERT_TRUE(off.instruments.contains("pass_names")) << off.instruments.dump();
  EXPECT_EQ(off.instruments["pass_names"].get<std::vector<std::string>>(),
            lower::pipeline_pass_names());
  // The default context has no instruments, so nothing is reported.
  EXPECT_FALSE(on.instruments.contains("pass_names")) << on.instruments.dump();

  // The config option reached the vectorize pass in the worker.
  EXPECT_NE(off.library, on.library);
  EXPECT_FALSE(vectorized(generated_source(off.library)));
  EXPECT_TRUE(vectorized(generated_source(on.library)));

  // The worker reports the hash of the context it had in force.
  EXPECT_EQ(off.pass_context_hash, context.hash());
  EXPECT_EQ(on.pass_context_hash, plain.hash());
}

TEST(PassContextTravels, BuilderKeepsTheContextCurrentAtConstruction) {
  te::Task task = small_task();
  ir::PassContext context = no_vectorize_context();
  std::optional<LocalBuilder> made_under_guard;
  {
    ir::PassContextGuard guard(context);
    made_under_guard.emplace(builder_options(1));
  }
  // The guard is gone; the builder still lowers under its context.
  ASSERT_EQ(ir::PassContext::current().hash(), ir::PassContext::make().hash());
  BuildResult kept = made_under_guard->build(task, {vectorized_state()})[0];
  ASSERT_EQ(kept.error_code, ErrorCode::kNoError) << kept.error_message;
  EXPECT_EQ(kept.pass_context_hash, context.hash());
  EXPECT_TRUE(kept.instruments.contains("pass_names")) << kept.instruments.dump();
  EXPECT_FALSE(vectorized(generated_source(kept.library)));

  // And the other way round: a context current when build() is called, but
  // not when the builder was made, does not apply.
  LocalBuilder made_plain(builder_options(1));
  ir::PassContextGuard guard(context);
  BuildResult plain = made_plain.build(task, {vectorized_state()})[0];
  ASSERT_EQ(plain.error_code, ErrorCode::kNoError) << plain.error_message;
  EXPECT_EQ(plain.pass_context_hash, ir::PassContext::make().hash());
  EXPECT_TRUE(vectorized(generated_source(plain.library)));
}

}  // namespace
}  // namespace tensortune::measure
