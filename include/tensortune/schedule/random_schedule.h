/// \file
/// Random valid schedules: for property tests (every schedule must compute
/// the reference answer) and for `tensortune states --random N`.
#pragma once

#include <random>

#include "tensortune/schedule/state.h"

namespace tensortune::schedule {

/// Knobs of the random schedule generator.
struct RandomScheduleOptions {
  int max_steps = 24;             ///< stop after this many applied steps
  bool allow_parallel = true;     ///< emit parallel annotations
  bool allow_dag_changes = true;  ///< emit cache_read, cache_write and rfactor
};

/// A random state of `dag`: every step in it applies cleanly (steps that would
/// be invalid are drawn, rejected and not kept). Deterministic for a given
/// generator state.
State random_state(const ComputeDAG& dag, std::mt19937_64& rng,
                   const RandomScheduleOptions& options = {});

}  // namespace tensortune::schedule
