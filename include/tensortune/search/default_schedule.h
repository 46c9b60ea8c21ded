/// \file
/// The schedule a task gets when no log has one for it: deterministic,
/// made from the task's first sketch with tile sizes a register tile of a
/// few rows by two vectors suggests, the innermost loops vectorized, the
/// outer ones parallel (over weight blocks when re-reading weights larger
/// than L2 for each row tile would cost more) and the reduction loops
/// unrolled. Not tuned, but never the naive loops.
#pragma once

#include "tensortune/schedule/state.h"
#include "tensortune/te/task.h"

namespace tensortune::search {

/// The default schedule of `task`; it replays on the task's DAG.
schedule::State default_schedule(const te::Task& task);

}  // namespace tensortune::search
