/// \file
/// When a task is worth splitting between threads: the search and the
/// default schedules ask the same question.
#pragma once

#include <cstdint>

#include "tensortune/schedule/loop_state.h"

namespace tensortune::search {

/// Loop iterations (state_iterations) below which a task runs on one
/// thread: handing a loop to other threads and waiting for them costs about
/// a microsecond, what a few thousand vector multiply-adds take. A recurrent cell's per-step gates
/// (a few hundred elements) and its hidden-state matmul ran slower on two threads than on one.
inline constexpr int64_t kMinParallelIterations = int64_t{1} << 16;

/// The loop iterations of all of `state`'s computed stages: the product of
/// each one's loop extents, reductions included, summed. A stage's own
/// nest can be small where the work is in a stage computed inside it.
inline int64_t state_iterations(const schedule::LoopState& state) {
  int64_t total = 0;
  for (int s = 0; s < state.num_stages(); ++s) {
    const schedule::Stage& st = state.stage(s);
    if (st.is_placeholder() || st.location == schedule::ComputeLocation::kInline) continue;
    int64_t product = 1;
    for (int id : st.root) product *= st.iters[id].extent;
    total += product;
  }
  return total;
}

}  // namespace tensortune::search
