/// \file
/// Module caches for tests, so that tests neither read nor fill the user's
/// cache (codegen::default_cache_dir()): one private to a test program, for
/// tests of the cache itself, and one shared by the test processes of a
/// ctest run, so that the suite compiles each kernel once.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <string>

#include "tensortune/codegen/module.h"

namespace tensortune::testing {

/// A fresh directory for this test program, removed at exit.
inline const std::string& private_cache_dir() {
  struct Dir {
    std::string path;
    Dir() {
      path = ::testing::TempDir() + "tt-test-cache-" + std::to_string(::getpid());
      std::filesystem::remove_all(path);
    }
    ~Dir() {
      std::error_code ignored;
      std::filesystem::remove_all(path, ignored);
    }
  };
  static Dir dir;
  return dir.path;
}

/// Module options that compile into private_cache_dir() (or a sub-directory).
inline codegen::ModuleOptions private_cache_options(const std::string& sub = "") {
  codegen::ModuleOptions options;
  options.cache_dir = private_cache_dir() + (sub.empty() ? "" : "/" + sub);
  return options;
}

/// Module options with the cache of this ctest run (TT_TEST_DATA_DIR, set
/// by tests/CMakeLists.txt and emptied when the run starts), for kernels
/// whose compilation is not under test; private_cache_options(sub) when run
/// outside ctest. Keys hash the source and flags, so sharing never mixes
/// two kernels up.
inline codegen::ModuleOptions shared_cache_options() {
  const char* shared = std::getenv("TT_TEST_DATA_DIR");
  if (!shared || !*shared) return private_cache_options();
  codegen::ModuleOptions options;
  options.cache_dir = std::string(shared) + "/module-cache";
  return options;
}

}  // namespace tensortune::testing
