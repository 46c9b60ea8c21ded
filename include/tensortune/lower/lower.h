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

/// How a layout-rewritten constant input is stored: each dimension of the
/// tensor cut into the parts its reader's loops split it into, all parts
/// ordered as the reader's loops are (outer to inner, fused loops counting
/// as the loops they fused), row-major. A dimension read at a constant index
/// is one part, outermost. Non-divisible splits pad the layout.
struct PackedLayout {
  struct Part {
    int dim = 0;         ///< the tensor dimension
    int64_t extent = 1;  ///< this part's extent
    int64_t inner = 1;   ///< the part's stride within its dimension's index
  };
  std::vector<Part> parts;  ///< outer to inner
  /// Elements of the packed buffer (at least the tensor's).
  int64_t elements() const;
  /// The packed flat index of the element at `indices` of the tensor.
  Expr index(const std::vector<Expr>& indices) const;
};

/// The layout of the layout-rewritten placeholder `stage` of `state`.
PackedLayout packed_layout(const schedule::LoopState& state, int stage);

/// The function that packs one rewritten input: called with (original,
/// packed), it writes the packed buffer (padding elements with 0).
struct Packer {
  int input = 0;  ///< index among the workload's inputs
  PrimFunc func;
  int64_t elements = 0;  ///< of the packed buffer
};

/// True if the layout-rewritten input `stage` is packed outside the kernel,
/// once (a constant input: a weight), rather than by the kernel itself at
/// its start, into a buffer of its own (any other input).
bool packed_outside(const schedule::LoopState& state, int stage);

/// A packer per input of `state` packed outside the kernel (packed_outside),
/// named `<name>_pack<input>` for the kernel lower(state, name). The kernel
/// takes each such input packed: a buffer of Packer::elements in place of
/// the tensor. Inputs the kernel packs itself it takes as they are.
std::vector<Packer> lower_packers(const schedule::LoopState& state, const std::string& name);

}  // namespace tensortune::lower
