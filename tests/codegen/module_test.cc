// Modules: building hand-written C, the cache, and compiler failures.
#include <gtest/gtest.h>

#include <filesystem>

#include "codegen/codegen_test_util.h"
#include "common/test_util.h"
#include "tensortune/codegen/c_codegen.h"

namespace tensortune::codegen {
namespace {

using testing::test_options;

const std::vector<std::string> kCompiler = {"cc"};
const std::vector<std::string> kFlags = {"-O1", "-fPIC", "-shared", "-lm"};

const char* kAddOne = R"(#include <stdint.h>
#include <math.h>
int32_t add_one(void** args) {
  float* x = (float*)args[0];
  for (int i = 0; i < 4; ++i) x[i] = x[i] + 1.0f;
  return 0;
}
int32_t use_libm(void** args) {
  float* x = (float*)args[0];
  x[0] = expf(x[0]);
  return 0;
}
)";

TEST(Module, CompilesLoadsAndCalls) {
  Module m = Module::compile(kAddOne, kCompiler, kFlags, test_options("basic"));
  ASSERT_TRUE(m.defined());
  float x[4] = {1, 2, 3, 4};
  void* args[] = {x};
  EXPECT_EQ(m.get("add_one")(args), 0);
  EXPECT_EQ(x[3], 5.0f);
  EXPECT_TRUE(std::filesystem::exists(m.source_path()));
  EXPECT_TT_ERROR(m.get("no_such_kernel"), kNotFound, "no function 'no_such_kernel'");
  // Found through the module's dependencies, but not a function of the module.
  EXPECT_TRUE(m.has("use_libm"));
  EXPECT_FALSE(m.has("expf"));
}

TEST(Module, CacheReusesTheLibrary) {
  ModuleOptions options = test_options("cache");
  Module first = Module::compile(kAddOne, kCompiler, kFlags, options);
  EXPECT_FALSE(first.from_cache());
  ASSERT_TRUE(std::filesystem::exists(first.library_path()));
  auto written = std::filesystem::last_write_time(first.library_path());

  Module second = Module::compile(kAddOne, kCompiler, kFlags, options);
  EXPECT_TRUE(second.from_cache());
  EXPECT_EQ(second.library_path(), first.library_path());
  EXPECT_EQ(std::filesystem::last_write_time(second.library_path()), written);

  // Another flag is another key.
  std::vector<std::string> flags = kFlags;
  flags.push_back("-DVARIANT=1");
  Module third = Module::compile(kAddOne, kCompiler, flags, options);
  EXPECT_FALSE(third.from_cache());
  EXPECT_NE(third.library_path(), first.library_path());

  // Only finished libraries and sources are left: no temporary files.
  int files = 0;
  for (const auto& entry : std::filesystem::directory_iterator(options.cache_dir)) {
    EXPECT_EQ(entry.path().string().find(".tmp."), std::string::npos) << entry.path();
    ++files;
  }
  EXPECT_EQ(files, 4);
}

TEST(Module, CompilerErrorQuotesDiagnosticsAndTheLine) {
  const std::string bad =
      "#include <stdint.h>\n"
      "int32_t broken(void** args) {\n"
      "  return undefined_identifier + 1;\n"
      "}\n";
  try {
    Module::compile(bad, kCompiler, kFlags, test_options("errors"));
    ADD_FAILURE() << "the compiler accepted undefined_identifier";
  } catch (const Error& e) {
    std::string what = e.what();
    EXPECT_EQ(e.kind(), ErrorKind::kRuntime);
    EXPECT_NE(what.find("failed (exit code"), std::string::npos) << what;
    // The compiler's own diagnostic, with its position...
    EXPECT_NE(what.find(".c:3:"), std::string::npos) << what;
    EXPECT_NE(what.find("undefined_identifier"), std::string::npos) << what;
    // ...and the generated line it names.
    EXPECT_NE(what.find("\n  3 |   return undefined_identifier + 1;"), std::string::npos) << what;
  }
  // The failure left no library behind, so it is not "cached".
  EXPECT_THROW(Module::compile(bad, kCompiler, kFlags, test_options("errors")), Error);
}

TEST(Module, MissingCompilerIsARuntimeError) {
  EXPECT_TT_ERROR(
      Module::compile(kAddOne, {"/nonexistent/tensortune-cc"}, kFlags, test_options("missing")),
      kRuntime, "cannot run the C compiler '/nonexistent/tensortune-cc'");
}

TEST(Module, LoadOfAMissingLibraryFails) {
  EXPECT_TT_ERROR(Module::load("/nonexistent/lib.so"), kRuntime,
                  "cannot load '/nonexistent/lib.so'");
}

}  // namespace
}  // namespace tensortune::codegen
