/// \file
/// What the cost model sees of a schedule: one row of features per buffer
/// store of the lowered loop nest (Ansor's per-statement features, OSDI '20
/// appendix B), taken from the kernel as lowering builds it, before the
/// passes (so that thousands of candidates can be featurised per second;
/// loop kinds already say what will be vectorized, unrolled and run in
/// parallel). Every value is log2(1 + x) of a count, an extent or a size.
///
/// Per store: arithmetic by kind (times the iterations that run it), loop
/// structure (count, trip product, innermost extent, vectorized, unrolled
/// and parallel extents, guards, reduction loops), five buffer slots (the
/// buffers touched most, each: read/write, element size, strides, bytes and
/// cache lines touched over the innermost 1, 2, 3 and all loops, reuse
/// count and distance, local or not), an arithmetic-intensity curve over
/// ten loop levels, and allocation sizes.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "tensortune/lower/stmt.h"
#include "tensortune/schedule/state.h"

namespace tensortune::search {

/// Features of one store statement.
inline constexpr int kFeaturesPerStore = 113;

/// The features of a program: `rows` stores of kFeaturesPerStore values.
struct ProgramFeatures {
  std::vector<float> values;  ///< row-major
  int rows = 0;
  const float* row(int r) const {
    return values.data() + static_cast<size_t>(r) * kFeaturesPerStore;
  }
};

/// The name of each feature, in order ("float_add_sub", "buf0.stride", ...).
const std::vector<std::string>& feature_names();

/// The features of a lowered kernel (lower::lower_schedule's output).
ProgramFeatures extract_features(const lower::PrimFunc& f);

/// A schedule state's program: its kernel before the passes, that kernel's
/// structural hash (equal for states that lower to the same loops, whatever
/// their steps), and its features.
struct LoweredState {
  lower::PrimFunc func;
  uint64_t program_hash = 0;
  ProgramFeatures features;
};

/// Replays `state` on `dag`, lowers it and extracts its features; a state
/// that does not replay is a kInvalidArgument error, as replay() gives it.
LoweredState lower_for_search(const schedule::ComputeDAG& dag, const schedule::State& state);

}  // namespace tensortune::search
