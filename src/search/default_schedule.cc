#include "tensortune/search/default_schedule.h"

#include <algorithm>

#include "tensortune/schedule/steps.h"
#include "tensortune/search/annotate.h"
#include "tensortune/search/sketch.h"

namespace tensortune::search {
namespace {

using schedule::LoopState;
using schedule::Stage;

/// The largest divisor of `n` at most `limit`, preferring multiples of `multiple`.
int64_t divisor_at_most(int64_t n, int64_t limit, int64_t multiple = 1) {
  int64_t best = 1, best_multiple = 0;
  for (int64_t d = 1; d <= std::min(n, limit); ++d) {
    if (n % d) continue;
    best = d;
    if (multiple > 1 && d % multiple == 0) best_multiple = d;
  }
  return best_multiple ? best_multiple : best;
}

bool try_apply(LoopState& state, const schedule::Step& step) {
  try {
    state.apply(step);
    return true;
  } catch (const Error& e) {
    if (e.kind() == ErrorKind::kInternal) throw;
    return false;
  }
}

bool attached_at(const LoopState& state, int stage, int id) {
  for (int a : state.attached_to(stage)) {
    if (state.stage(a).attach_iter == id) return true;
  }
  return false;
}

bool op_has_reduction(const Stage& st) {
  auto op = st.tensor.compute_op();
  return op && op->body->kind() == ir::ExprKind::kReduce;
}

}  // namespace

/// A register tile of `rows` by `vectors` vectors for a stage whose last
/// spatial axis has `cols` elements and the one before it `rows_extent`:
/// the most accumulators that leave registers for the operands, rows
/// dividing their axis, vectors filling theirs.
static std::pair<int64_t, int64_t> register_tile(int64_t rows_extent, int64_t cols, int64_t lanes,
                                                 int64_t registers) {
  const int64_t budget = std::max<int64_t>(registers - 4, 1);
  std::pair<int64_t, int64_t> best{1, 1};
  for (int64_t v = 1; v <= 4; ++v) {
    if (cols % (v * lanes) != 0) continue;
    int64_t r = divisor_at_most(rows_extent, budget / v);
    if (r * v > best.first * best.second ||
        (r * v == best.first * best.second && v > best.second)) {
      best = {r, v};
    }
  }
  return best;
}

schedule::State default_schedule(const te::Task& task) {
  schedule::ComputeDAG dag(te::workload_tensors(task->workload));
  // Weights are packed once, outside the kernel; other inputs stay as they
  // are, so the untuned kernel copies nothing per call.
  SketchOptions options = sketch_options(task);
  options.pack_non_constant_inputs = false;
  std::vector<Sketch> sketches = generate_sketches(dag, options);
  MachineModel machine = machine_model(task);
  // The first sketch, with its constant operands pre-packed when there is
  // such a variant (the one after it): tiles then read weights in order.
  const Sketch* sketch = &sketches.front();
  if (sketches.size() > 1 &&
      sketches[1].description.rfind(sketch->description + " layout_rewrite", 0) == 0) {
    sketch = &sketches[1];
  }
  // Tiles: the innermost part of the last spatial axis a few vectors wide
  // and of the one before it a few rows (a register tile, register_tile()),
  // of the last reduction axis up to 16; the other parts 1.
  LoopState state = replay_with_tile_sizes(
      sketch->state, dag, [&](const Stage& st, const schedule::SplitStepNode& split, int id) {
        int64_t extent = st.iters[id].extent;
        std::vector<int64_t> lengths(split.lengths.size(), 1);
        auto op = st.tensor.compute_op();
        size_t spatial = op ? op->axis.size() : 0;
        auto root =
            static_cast<size_t>(std::find(st.root.begin(), st.root.end(), id) - st.root.begin());
        int64_t lanes = machine.lanes(st.tensor.dtype());
        auto root_extent = [&](size_t axis) { return st.iters[st.root[axis]].extent; };
        int64_t inner = 1;
        if (root + 1 == spatial) {
          int64_t rows = spatial >= 2 ? root_extent(spatial - 2) : 1;
          int64_t vectors = register_tile(rows, extent, lanes, machine.vector_registers).second;
          inner = extent % lanes == 0 ? vectors * lanes : divisor_at_most(extent, 2 * lanes, lanes);
        } else if (root + 2 == spatial) {
          int64_t cols = root_extent(spatial - 1);
          inner = register_tile(extent, cols, lanes, machine.vector_registers).first;
        } else if (root + 1 == st.root.size() && st.iters[id].kind == ir::IterKind::kReduce) {
          inner = divisor_at_most(extent, 16);
        }
        lengths.back() = inner;
        return lengths;
      });
  for (int s = 0; s < state.num_stages(); ++s) {
    const Stage& st = state.stage(s);
    if (st.is_placeholder() || st.location == schedule::ComputeLocation::kInline ||
        st.leaves.empty()) {
      continue;
    }
    // The innermost loop vectorized, when it is spatial and a few vectors
    // long, or made so by splitting off two vectors (an untiled elementwise
    // stage over a long row).
    int last = static_cast<int>(st.leaves.size()) - 1;
    int64_t lanes = machine.lanes(st.tensor.dtype());
    if (const auto& inner = st.iters[st.leaves.back()];
        inner.kind == ir::IterKind::kSpatial && inner.extent > 4 * lanes &&
        inner.extent % (2 * lanes) == 0 && !attached_at(state, s, st.leaves.back())) {
      if (try_apply(state, schedule::split(s, last, {2 * lanes}))) ++last;
    }
    const Stage& split = state.stage(s);
    const auto& it = split.iters[split.leaves.back()];
    if (it.kind == ir::IterKind::kSpatial && it.extent > 1 && it.extent <= 4 * lanes &&
        !attached_at(state, s, split.leaves.back())) {
      try_apply(state, schedule::annotate(s, last, schedule::IterAnnotation::kVectorize));
    }
    const Stage& now = state.stage(s);
    // Enough outer loops fused for every core to have work.
    if (machine.num_cores > 1 && now.location == schedule::ComputeLocation::kRoot) {
      int count = 0;
      int64_t product = 1;
      for (int id : now.leaves) {
        const auto& loop = now.iters[id];
        if (loop.kind != ir::IterKind::kSpatial ||
            loop.annotation != schedule::IterAnnotation::kNone)
          break;
        product *= loop.extent;
        ++count;
        if (product >= 4 * machine.num_cores || attached_at(state, s, id)) break;
      }
      if (product > 1) {
        std::vector<int> iters;
        for (int k = 0; k < count; ++k) iters.push_back(k);
        if (count == 1 || try_apply(state, schedule::fuse(s, iters))) {
          try_apply(state, schedule::annotate(s, 0, schedule::IterAnnotation::kParallel));
        }
      }
    }
    if (op_has_reduction(state.stage(s))) {
      try_apply(state, schedule::pragma(s, 0, "auto_unroll_max_step=64"));
    }
  }
  return schedule::State::make(state.history());
}

}  // namespace tensortune::search
