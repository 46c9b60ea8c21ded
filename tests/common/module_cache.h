/// \file
/// A module cache private to one test program, so that tests neither read
/// nor fill the user's cache (codegen::default_cache_dir()).
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

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

}  // namespace tensortune::testing
