// Helpers for the code generation tests: a private module cache per test
// program, and kernels built by hand.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <string>

#include "common/module_cache.h"
#include "tensortune/codegen/module.h"
#include "tensortune/ir/target.h"

namespace tensortune::codegen::testing {

/// A fresh module cache directory for this test program, removed at exit, so
/// that tests neither read nor fill the user's cache.
inline const std::string& test_cache_dir() { return tensortune::testing::private_cache_dir(); }

/// Module options using test_cache_dir() (or a sub-directory of it).
inline ModuleOptions test_options(const std::string& sub = "") {
  return tensortune::testing::private_cache_options(sub);
}

/// Module options with a cache shared by every run of the test programs, for
/// kernels whose compilation is not under test: under ctest, each test runs
/// in its own process, and all but the first find the library built. (Keys
/// are hashes of the source and flags, so a stale entry is never used.)
inline ModuleOptions shared_cache_options() {
  ModuleOptions options;
  options.cache_dir = ::testing::TempDir() + "tt-codegen-test-shared-cache";
  return options;
}

/// The local CPU with two cores, so that parallel loops use OpenMP threads.
inline ir::Target test_target() { return ir::Target::parse("native -num-cores=2"); }

}  // namespace tensortune::codegen::testing
