/// \file
/// Test helpers for tensor programs: tolerant array comparison and loops over
/// every index of a shape (for hand-written reference implementations).
#pragma once

#include <gtest/gtest.h>

#include <functional>
#include <vector>

#include "tensortune/te/evaluator.h"

namespace tensortune::testing {

/// Success if `actual` matches `expected` within `tol` (default: the dtype's
/// tolerance); otherwise the first mismatching index, both values and counts.
inline ::testing::AssertionResult arrays_close(const te::NDArray& actual,
                                               const te::NDArray& expected,
                                               std::optional<te::Tolerance> tol = std::nullopt) {
  auto diff =
      te::compare_arrays(actual, expected, tol.value_or(te::default_tolerance(expected.dtype())));
  if (!diff) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << *diff;
}

/// Calls `body(index)` for every index of `shape` in row-major order.
inline void for_each_index(const std::vector<int64_t>& shape,
                           const std::function<void(const std::vector<int64_t>&)>& body) {
  int64_t size = 1;
  for (int64_t d : shape) size *= d;
  std::vector<int64_t> index(shape.size(), 0);
  for (int64_t flat = 0; flat < size; ++flat) {
    body(index);
    for (size_t d = shape.size(); d-- > 0;) {
      if (++index[d] < shape[d]) break;
      index[d] = 0;
    }
  }
}

/// An array of `dtype` and `shape` whose element at each index is `f(index)`.
inline te::NDArray make_array(ir::DataType dtype, const std::vector<int64_t>& shape,
                              const std::function<double(const std::vector<int64_t>&)>& f) {
  te::NDArray out(dtype, shape);
  int64_t flat = 0;
  for_each_index(shape, [&](const std::vector<int64_t>& index) { out.set(flat++, f(index)); });
  return out;
}

}  // namespace tensortune::testing

/// Expects two NDArrays to be close within the expected array's dtype tolerance.
#define EXPECT_ALLCLOSE(actual, expected) \
  EXPECT_TRUE(::tensortune::testing::arrays_close((actual), (expected)))
