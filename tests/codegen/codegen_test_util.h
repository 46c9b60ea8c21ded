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

/// Module options with the cache shared by the test processes of a run, for
/// kernels whose compilation is not under test.
inline ModuleOptions shared_cache_options() { return tensortune::testing::shared_cache_options(); }

/// The local CPU with two cores, so that parallel loops use OpenMP threads.
inline ir::Target test_target() { return ir::Target::parse("native -num-cores=2"); }

}  // namespace tensortune::codegen::testing
