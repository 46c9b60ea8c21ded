/// \file
/// Checks a schedule against the reference evaluator through the IR interpreter.
#pragma once

#include <gtest/gtest.h>

#include "tensortune/schedule/state.h"
#include "tensortune/te/workload.h"

namespace tensortune::testing {

/// Replays `state`, lowers it (without passes), interprets the kernel on
/// random inputs (seed `seed`) and compares every output with te::evaluate.
::testing::AssertionResult schedule_matches_reference(const te::WorkloadTensors& tensors,
                                                      const schedule::State& state,
                                                      uint64_t seed = 1);

}  // namespace tensortune::testing
