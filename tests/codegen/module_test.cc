// Modules: building hand-written C, the cache, and compiler failures.
#include <gtest/gtest.h>

#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "codegen/codegen_test_util.h"
#include "common/test_util.h"
#include "tensortune/codegen/c_codegen.h"
#include "tensortune/support/files.h"
#include "tensortune/support/hash.h"

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
  EXPECT_EQ(files, 6);  // each key's .c, .so and .so.sha256
}

const char* kTimesTwo = R"(#include <stdint.h>
extern int32_t tt_scale;
int32_t times_two(void** args) {
  float* x = (float*)args[0];
  for (int i = 0; i < 4; ++i) x[i] = x[i] * (float)tt_scale;
  return 0;
}
)";
const char* kScale = "#include <stdint.h>\nint32_t tt_scale = 2;\n";

TEST(Module, UnitsCompileApartLinkIntoOneLibraryAndAreCachedOneByOne) {
  ModuleOptions options = test_options("units");
  options.jobs = 2;
  Module m = Module::compile_units({kAddOne, kTimesTwo, kScale}, kCompiler, kFlags, options);
  EXPECT_FALSE(m.from_cache());
  float x[4] = {1, 2, 3, 4};
  void* args[] = {x};
  EXPECT_EQ(m.get("add_one")(args), 0);
  EXPECT_EQ(m.get("times_two")(args), 0);  // a variable of another unit
  EXPECT_EQ(x[3], 10.0f);
  EXPECT_TRUE(m.has("use_libm"));  // -lm comes after the objects
  auto count = [&](const std::string& suffix) {
    int n = 0;
    for (const auto& e : std::filesystem::directory_iterator(options.cache_dir)) {
      n += e.path().string().ends_with(suffix);
      EXPECT_EQ(e.path().string().find(".tmp."), std::string::npos) << e.path();
    }
    return n;
  };
  EXPECT_EQ(count(".o"), 3);
  EXPECT_EQ(count(".o.sha256"), 3);
  EXPECT_EQ(count(".so"), 1);
  // The same units: the linked library from the cache.
  EXPECT_TRUE(
      Module::compile_units({kAddOne, kTimesTwo, kScale}, kCompiler, kFlags, options).from_cache());
  // One unit changed: one object more, the others taken from the cache.
  std::string scale_three = "#include <stdint.h>\nint32_t tt_scale = 3;\n";
  Module changed =
      Module::compile_units({kAddOne, kTimesTwo, scale_three}, kCompiler, kFlags, options);
  EXPECT_FALSE(changed.from_cache());
  EXPECT_EQ(count(".o"), 4);
  EXPECT_EQ(count(".so"), 2);
  float y[4] = {1, 1, 1, 1};
  void* y_args[] = {y};
  EXPECT_EQ(changed.get("times_two")(y_args), 0);
  EXPECT_EQ(y[0], 3.0f);
  // A unit that does not compile is an error quoting its own lines.
  std::string bad = "int32_t broken(void** args) {\n  return undeclared;\n}\n";
  try {
    Module::compile_units({kAddOne, bad}, kCompiler, kFlags, options);
    FAIL() << "a unit with an error compiled";
  } catch (const UserError& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kRuntime);
    EXPECT_NE(std::string(e.what()).find("return undeclared;"), std::string::npos) << e.what();
  }
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

TEST(Module, LoadOfAMissingOrChangedLibraryFails) {
  EXPECT_TT_ERROR(Module::load_checked("/nonexistent/lib.so", std::string(64, '0')), kRuntime,
                  "cannot load '/nonexistent/lib.so'");
  Module m = Module::compile(kAddOne, kCompiler, kFlags, test_options("checked"));
  std::string bytes = *read_file_if_exists(m.library_path());
  EXPECT_TRUE(Module::load_checked(m.library_path(), sha256_hex(bytes)).has("add_one"));
  EXPECT_TT_ERROR(Module::load_checked(m.library_path(), std::string(64, '0')), kRuntime,
                  "not the 0000");
}

// A library planted in the cache under a key's name (here: one whose
// constructor leaves a mark) is not loaded: it does not match the hash the
// entry was written with, so the module is built again.
TEST(Module, ACachedLibraryThatChangedIsBuiltAgainNotLoaded) {
  ModuleOptions options = test_options("planted");
  Module first = Module::compile(kAddOne, kCompiler, kFlags, options);
  const std::string mark = options.cache_dir + "/constructor-ran";
  const std::string planted_source =
      "#include <stdio.h>\n"
      "__attribute__((constructor)) static void plant(void) {\n"
      "  FILE* f = fopen(\"" +
      mark +
      "\", \"w\"); if (f) fclose(f);\n"
      "}\n"
      "int add_one(void** args) { return 7; }\n";
  Module planted = Module::compile(planted_source, kCompiler, kFlags, test_options("planter"));
  std::filesystem::remove(mark);
  std::filesystem::copy_file(planted.library_path(), first.library_path(),
                             std::filesystem::copy_options::overwrite_existing);
  Module again = Module::compile(kAddOne, kCompiler, kFlags, options);
  EXPECT_FALSE(again.from_cache());
  EXPECT_FALSE(std::filesystem::exists(mark));
  float x[4] = {1, 2, 3, 4};
  void* args[] = {x};
  EXPECT_EQ(again.get("add_one")(args), 0);
  // And the entry was written anew: the next compile takes it.
  EXPECT_TRUE(Module::compile(kAddOne, kCompiler, kFlags, options).from_cache());
}

TEST(Module, ACacheDirectoryOthersMayWriteIsRefused) {
  ModuleOptions options = test_options("shared");
  std::filesystem::create_directories(options.cache_dir);
  ::chmod(options.cache_dir.c_str(), 0777);
  EXPECT_TT_ERROR(Module::compile(kAddOne, kCompiler, kFlags, options), kIO, "with mode 0777");
  ::chmod(options.cache_dir.c_str(), 0700);
  EXPECT_TRUE(Module::compile(kAddOne, kCompiler, kFlags, options).defined());
  if (::geteuid() == 0) {
    // Root can give it away: another user's directory is refused too.
    ASSERT_EQ(::chown(options.cache_dir.c_str(), 65534, 65534), 0);
    EXPECT_TT_ERROR(Module::compile(kAddOne, kCompiler, kFlags, options), kIO, "is owned by ");
    ASSERT_EQ(::chown(options.cache_dir.c_str(), 0, 0), 0);
  }
  // A new cache directory is private.
  ModuleOptions fresh = test_options("fresh/nested");
  Module::compile(kAddOne, kCompiler, kFlags, fresh);
  struct stat st {};
  ASSERT_EQ(::stat(fresh.cache_dir.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0700u);
}

TEST(Module, TemporaryFilesOfAKilledBuildAreRemoved) {
  ModuleOptions options = test_options("stale");
  std::filesystem::create_directories(options.cache_dir);
  ::chmod(options.cache_dir.c_str(), 0700);
  // A process id that runs no process (pid_max is below 2^22).
  const std::string stale = options.cache_dir + "/tt-0123.so.tmp.4194303.0";
  const std::string live =
      options.cache_dir + "/tt-0123.so.tmp." + std::to_string(::getpid()) + ".99";
  write_file_atomically(stale, "half a library");
  write_file_atomically(live, "being written");
  // A killed compiler's scratch directory, with the temporary it left (a
  // process id above pid_max, which is at most 2^22).
  const std::string stale_scratch = options.cache_dir + "/cc.tmp.999999999.1";
  std::filesystem::create_directory(stale_scratch);
  write_file_atomically(stale_scratch + "/ccAbCdEf.s", "half an assembly");
  Module::compile(kAddOne, kCompiler, kFlags, options);
  EXPECT_FALSE(std::filesystem::exists(stale));
  EXPECT_TRUE(std::filesystem::exists(live));
  EXPECT_FALSE(std::filesystem::exists(stale_scratch));
}

TEST(Module, ANameAnotherProcessOfTheSameIdLeftIsPassedOver) {
  // In a container every run may be process 1: a killed one's directory or
  // file has the name this process's next one would have, and the sweep
  // keeps it (that id runs). It is left alone and the next name taken.
  ModuleOptions options = test_options("scratch-reuse");
  std::filesystem::create_directories(options.cache_dir);
  std::string first;
  { first = ScratchDir(options.cache_dir, "cc").path(); }
  EXPECT_FALSE(std::filesystem::exists(first));
  auto after = [](const std::string& name, int k) {
    const size_t dot = name.rfind('.');
    return name.substr(0, dot + 1) + std::to_string(std::stoll(name.substr(dot + 1)) + k);
  };
  const std::string taken = after(first, 1);
  std::filesystem::create_directory(taken);
  std::ofstream(taken + "/ccAbCdEf.o") << "another's";  // takes no temp suffix
  ScratchDir again(options.cache_dir, "cc");
  EXPECT_EQ(again.path(), after(first, 2));
  EXPECT_TRUE(std::filesystem::exists(taken + "/ccAbCdEf.o"));
  // The same for a file being written.
  const std::string target = options.cache_dir + "/entry";
  const std::string stem = target + ".tmp." + std::to_string(::getpid()) + ".";
  std::string probe = ScratchDir(options.cache_dir, "probe").path();
  const std::string next_file =
      stem + std::to_string(std::stoll(probe.substr(probe.rfind('.') + 1)) + 1);
  std::ofstream(next_file) << "another's";
  write_file_atomically(target, "mine");
  EXPECT_EQ(read_file_if_exists(target), "mine");
  EXPECT_EQ(read_file_if_exists(next_file), "another's");
}

TEST(Module, TheCompilersTemporaryFilesStayInThePrivateCache) {
  ModuleOptions options = test_options("scratch");
  // A "compiler" that reports its TMPDIR in the library it writes and
  // leaves a temporary there, as a killed cc1 would.
  const std::string tools = test_options("scratch-tools").cache_dir;
  std::filesystem::create_directories(tools);
  const std::string fake = tools + "/cc";
  write_file_atomically(fake,
                        "#!/bin/sh\n"
                        "while [ \"$1\" != -o ]; do shift; done\n"
                        "touch \"$TMPDIR/ccXXXXXX.s\" && printf %s \"$TMPDIR\" > \"$2\"\n");
  std::filesystem::permissions(fake, std::filesystem::perms::owner_all);
  try {
    Module::compile(kAddOne, {fake}, kFlags, options);
    ADD_FAILURE() << "a text file loaded as a library";
  } catch (const UserError&) {
  }
  std::filesystem::path library;
  for (const auto& entry : std::filesystem::directory_iterator(options.cache_dir)) {
    if (entry.path().extension() == ".so") library = entry.path();
  }
  ASSERT_FALSE(library.empty());
  std::optional<std::string> tmpdir = read_file_if_exists(library.string());
  ASSERT_TRUE(tmpdir);
  EXPECT_EQ(tmpdir->rfind(options.cache_dir + "/cc.tmp.", 0), 0u) << *tmpdir;
  EXPECT_FALSE(std::filesystem::exists(*tmpdir));
}

TEST(Module, TheDefaultCacheIsUnderTheUsersHomeNeverATemporaryDirectory) {
  const char* xdg = std::getenv("XDG_CACHE_HOME");
  std::string saved = xdg ? xdg : "";
  ::unsetenv("XDG_CACHE_HOME");
  ::setenv("HOME", "/home/someone", 1);
  EXPECT_EQ(default_cache_dir(), "/home/someone/.cache/tensortune");
  ::setenv("XDG_CACHE_HOME", "/var/cache/me", 1);
  EXPECT_EQ(default_cache_dir(), "/var/cache/me/tensortune");
  if (xdg)
    ::setenv("XDG_CACHE_HOME", saved.c_str(), 1);
  else
    ::unsetenv("XDG_CACHE_HOME");
}

}  // namespace
}  // namespace tensortune::codegen
