/// \file
/// Helpers shared by the test programs.
#pragma once

#include <gtest/gtest.h>

#include <string>

#include "tensortune/support/error.h"

namespace tensortune::testing {

/// Runs `body`, expecting a tensortune::Error of `kind` whose message contains `needle`.
template <class F>
::testing::AssertionResult throws_error(F&& body, ErrorKind kind, const std::string& needle) {
  try {
    body();
  } catch (const Error& e) {
    if (e.kind() != kind) {
      return ::testing::AssertionFailure()
             << "error of kind '" << error_kind_name(e.kind()) << "' instead of '"
             << error_kind_name(kind) << "': " << e.what();
    }
    if (std::string(e.what()).find(needle) == std::string::npos) {
      return ::testing::AssertionFailure() << "message lacks '" << needle << "': " << e.what();
    }
    return ::testing::AssertionSuccess();
  }
  return ::testing::AssertionFailure() << "no error thrown (expected '" << needle << "')";
}

}  // namespace tensortune::testing

/// Expects `stmt` to throw a user error of ErrorKind::kind containing `needle`.
#define EXPECT_TT_ERROR(stmt, kind, needle) \
  EXPECT_TRUE(                              \
      ::tensortune::testing::throws_error([&] { stmt; }, ::tensortune::ErrorKind::kind, needle))
