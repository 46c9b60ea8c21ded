/// \file
/// From a schedule to a loop-nest kernel.
///
/// lower_schedule() translates a LoopState directly: every stage becomes a
/// loop nest over its scheduled loops; inlined stages are substituted into
/// their readers; a stage computed at a loop of its consumer gets the region
/// the consumer needs there (bound inference over the consumer's reads), a
/// buffer of that region's size allocated at that loop, and loops recomputed
/// for that region; reductions get an initialising nest placed just outside
/// their first reduction loop; non-divisible splits and regions that overhang
/// a tensor are guarded by conditions. lower() then runs the lowering passes
/// (pipeline.h) under the current PassContext.
#pragma once

#include <string>

#include "tensortune/lower/stmt.h"
#include "tensortune/schedule/loop_state.h"

namespace tensortune::lower {

/// The kernel for `state`, before any lowering pass. Parameters are the
/// workload's inputs, then its outputs, in the workload's order.
PrimFunc lower_schedule(const schedule::LoopState& state, const std::string& name);

/// lower_schedule() followed by the pass pipeline under PassContext::current().
PrimFunc lower(const schedule::LoopState& state, const std::string& name);

}  // namespace tensortune::lower
