#include "tensortune/search/sketch.h"

#include <algorithm>
#include <functional>
#include <set>
#include <unordered_set>

#include "search/parallel_work.h"
#include "tensortune/ir/arith.h"
#include "tensortune/ir/expr_functor.h"
#include "tensortune/lower/passes.h"
#include "tensortune/object/structural.h"
#include "tensortune/schedule/steps.h"
#include "tensortune/support/strings.h"

namespace tensortune::search {

using schedule::LoopState;
using schedule::Stage;

namespace {

const ir::Expr& body_of(const Stage& st) { return st.tensor.compute_op()->body; }

bool is_reduction(const Stage& st) {
  return !st.is_placeholder() && body_of(st)->kind() == ir::ExprKind::kReduce;
}

/// The positions of the stage's loops of `kind`, outer to inner.
std::vector<int> loop_positions(const Stage& st, ir::IterKind kind) {
  std::vector<int> out;
  for (size_t k = 0; k < st.leaves.size(); ++k) {
    if (st.iters[st.leaves[k]].kind == kind) out.push_back(static_cast<int>(k));
  }
  return out;
}

/// Applies `step` to a copy of `state`. Rules only build steps that are
/// valid for the state they look at, so a failure here is a bug.
void apply(SketchState& state, const schedule::Step& step) {
  try {
    state.loops.apply(step);
  } catch (const UserError& e) {
    TT_ICHECK(false, "sketch rule built an invalid step: ", e.what());
  }
}

/// True if `index` names the value of `axis` at every point of it: the axis
/// variable, or 0 on an axis of extent 1 (how a broadcasting op reads an
/// operand's dimension of extent 1, such as a batch of one).
bool indexes_axis(const ir::Expr& index, const ir::IterVar& axis) {
  if (index.get() == axis->var.get()) return true;
  return axis->extent == 1 && index->kind() == ir::ExprKind::kIntImm &&
         static_cast<const ir::IntImmNode&>(*index).value == 0;
}

/// True if every read of `producer` in `consumer`'s body is at the
/// consumer's own axes, in order, and the two have the same shape.
bool reads_elementwise(const te::Tensor& consumer, const te::Tensor& producer) {
  auto op = consumer.compute_op();
  if (!op || consumer.shape() != producer.shape()) return false;
  if (op->body->kind() == ir::ExprKind::kReduce) return false;
  bool ok = true;
  bool any = false;
  ir::visit_pre_order(op->body, [&](const ir::Expr& e) {
    if (e->kind() != ir::ExprKind::kProducerLoad) return;
    const auto& load = static_cast<const ir::ProducerLoadNode&>(*e);
    if (load.producer.get() != producer.get()) return;
    any = true;
    if (load.indices.size() != op->axis.size()) {
      ok = false;
      return;
    }
    for (size_t d = 0; d < op->axis.size(); ++d) {
      ok &= indexes_axis(load.indices[d], op->axis[d]);
    }
  });
  return ok && any;
}

/// True if every read of `producer` in `consumer`'s body takes one of the
/// consumer's axes at each index, each axis once (a transpose): each
/// element of the producer is read once.
bool reads_permuted(const te::Tensor& consumer, const te::Tensor& producer) {
  auto op = consumer.compute_op();
  if (!op || op->body->kind() == ir::ExprKind::kReduce) return false;
  bool ok = true, any = false;
  ir::visit_pre_order(op->body, [&](const ir::Expr& e) {
    if (e->kind() != ir::ExprKind::kProducerLoad) return;
    const auto& load = static_cast<const ir::ProducerLoadNode&>(*e);
    if (load.producer.get() != producer.get()) return;
    any = true;
    std::set<const Object*> used;
    ok &= load.indices.size() == op->axis.size();
    for (size_t d = 0; ok && d < load.indices.size(); ++d) {
      auto axis = std::find_if(op->axis.begin(), op->axis.end(), [&](const ir::IterVar& a) {
        return load.indices[d].get() == a->var.get();
      });
      ok &= axis != op->axis.end() && used.insert(load.indices[d].get()).second &&
            (*axis)->extent == producer.shape()[d];
    }
  });
  return ok && any;
}

/// True if `st` is a reduction that reads each of its inputs with its own
/// last axis as the last index (a channels-last pool or window sum): the
/// lanes of a vector are then that axis, never a sum across it.
bool reduces_along_last_axis(const Stage& st) {
  auto op = st.tensor.compute_op();
  if (!is_reduction(st) || op->axis.empty() || op->axis.back()->extent <= 1) return false;
  const Object* last = op->axis.back()->var.get();
  bool contiguous = true, any = false;
  const auto& red = static_cast<const ir::ReduceNode&>(*body_of(st));
  ir::visit_pre_order(red.source, [&](const ir::Expr& e) {
    if (e->kind() != ir::ExprKind::kProducerLoad) return;
    const auto& load = static_cast<const ir::ProducerLoadNode&>(*e);
    any = true;
    contiguous &= !load.indices.empty() && load.indices.back().get() == last;
  });
  return any && contiguous;
}

/// Lanes of a vector of the stage's type (0 when the options name no vector).
int64_t lanes_of(const Stage& st, const SketchOptions& options) {
  return options.vector_bytes / std::max(st.tensor.dtype().bytes(), 1);
}

/// Moves the vectors of the last spatial loop of a stage that reduces along
/// its last axis (reduces_along_last_axis) inside its reduction loops, where
/// they can be vectorized: rfactor puts the new stage's axes before its
/// reductions. With `lanes`, the loop is split at it (a length the search
/// tunes), and its outer part stays with the other spatial loops, to be
/// shared among the cores with them.
void last_axis_innermost(SketchState& state, int stage, int64_t lanes) {
  const Stage& st = state.loops.stage(stage);
  if (!reduces_along_last_axis(st)) return;
  std::vector<int> spatial = loop_positions(st, ir::IterKind::kSpatial);
  if (spatial.empty() || spatial.back() + 1 == static_cast<int>(st.leaves.size())) return;
  int last = spatial.back();
  const int64_t extent = st.iters[st.leaves[static_cast<size_t>(last)]].extent;
  if (lanes > 1 && extent > lanes && extent % lanes == 0) {
    apply(state, schedule::split(stage, last, {lanes}));
    ++last;  // the inner part
  }
  const int n = static_cast<int>(state.loops.stage(stage).leaves.size());
  std::vector<int> order;
  for (int k = 0; k < n; ++k) {
    if (k != last) order.push_back(k);
  }
  order.push_back(last);
  apply(state, schedule::reorder(stage, order));
}

// ---------------------------------------------------------------------------
// The rules

/// Inlines a strictly inlineable stage into its readers.
class AlwaysInline final : public SketchRule {
 public:
  std::string name() const override { return "always_inline"; }
  Condition condition(const SketchState& s, const SketchOptions&) const override {
    return is_strictly_inlineable(s.loops, s.stage) ? Condition::kApplyAndSkipRest
                                                    : Condition::kPass;
  }
  std::vector<SketchState> apply(const SketchState& s, const SketchOptions&) const override {
    SketchState next = s;
    search::apply(next, schedule::compute_inline(s.stage));
    next.applied.push_back(name() + "(" + s.loops.stage(s.stage).name() + ")");
    --next.stage;
    return {next};
  }
};

/// Factors a reduction whose spatial loops cannot keep the cores busy: the
/// reduction axis with the largest extent is split in two (its factor is a
/// tile size to fill) and one part becomes a spatial axis of a new stage.
/// Two sketches: the outer or the inner part factored.
class AddRfactor final : public SketchRule {
 public:
  std::string name() const override { return "add_rfactor"; }
  Condition condition(const SketchState& s, const SketchOptions& options) const override {
    const Stage& st = s.loops.stage(s.stage);
    if (!is_reduction(st) || st.is_transformed()) return Condition::kPass;
    // A local accumulator is there to be tiled into registers, not factored.
    if (st.name().ends_with(".local")) return Condition::kPass;
    int64_t space = 1, reduce = 1;
    for (int id : st.leaves) {
      (st.iters[id].kind == ir::IterKind::kSpatial ? space : reduce) *= st.iters[id].extent;
    }
    if (reduce <= 1) return Condition::kPass;
    // Lanes along the last axis are one piece of work: a global pool over
    // 32 channels has 2 AVX-512 vectors to share among the cores, not 32.
    // Only for a reduction worth threads at all: a small one factored
    // gains a stage and a buffer, and no core.
    const int64_t lanes = lanes_of(st, options);
    const int64_t last =
        st.tensor.compute_op()->axis.empty() ? 1 : st.tensor.compute_op()->axis.back()->extent;
    if (lanes > 1 && last % lanes == 0 && reduces_along_last_axis(st) &&
        space * reduce >= kMinParallelIterations) {
      space /= lanes;
    }
    bool needed = needs_multi_level_tiling(s.loops, s.stage)
                      ? space <= reduce && space <= options.num_cores * 16
                      : reduce > options.num_cores && space < options.num_cores * 16;
    return needed ? Condition::kApply : Condition::kPass;
  }
  std::vector<SketchState> apply(const SketchState& s,
                                 const SketchOptions& options) const override {
    const Stage& st = s.loops.stage(s.stage);
    std::vector<int> reduce = loop_positions(st, ir::IterKind::kReduce);
    int pos = reduce[0];
    for (int p : reduce) {
      if (st.iters[st.leaves[p]].extent > st.iters[st.leaves[pos]].extent) pos = p;
    }
    std::vector<SketchState> out;
    for (int factor_iter : {0, 1}) {
      SketchState next = s;
      search::apply(next, schedule::split(s.stage, pos, {1}));
      search::apply(next, schedule::rfactor(s.stage, pos + factor_iter, factor_iter));
      // The factored stage, and the one that sums its parts: a few rows of
      // the output, too little work to share among the cores.
      last_axis_innermost(next, s.stage, lanes_of(st, options));
      last_axis_innermost(next, s.stage + 1, 0);
      next.applied.push_back(name() + "(" + st.name() + (factor_iter ? ", inner" : ", outer") +
                             ")");
      // The factored stage (now at s.stage) is scheduled by annotation alone.
      next.stage = s.stage - 1;
      out.push_back(std::move(next));
    }
    return out;
  }
};

/// Gives a tiled stage without an elementwise consumer a local accumulator
/// stage, whose copy-out then is that consumer (tile_with_fusion takes it).
class AddCacheWrite final : public SketchRule {
 public:
  std::string name() const override { return "add_cache_write"; }
  Condition condition(const SketchState& s, const SketchOptions&) const override {
    const Stage& st = s.loops.stage(s.stage);
    if (st.is_transformed() || !needs_multi_level_tiling(s.loops, s.stage)) {
      return Condition::kPass;
    }
    return elementwise_consumer(s.loops, s.stage) < 0 ? Condition::kApply : Condition::kPass;
  }
  std::vector<SketchState> apply(const SketchState& s, const SketchOptions&) const override {
    SketchState next = s;
    search::apply(next, schedule::cache_write(s.stage, "local"));
    next.applied.push_back(name() + "(" + s.loops.stage(s.stage).name() + ")");
    // The local stage took the index; the copy-out after it is done.
    return {next};
  }
};

/// The stages of the inputs whose indices in `stage`'s body use its axis
/// `axis` (an index into the op's axes).
std::vector<int> inputs_indexed_by(const LoopState& loops, int stage, int axis) {
  const Stage& st = loops.stage(stage);
  const ir::Var& var = st.tensor.compute_op()->axis[static_cast<size_t>(axis)]->var;
  std::set<int> out;
  ir::visit_pre_order(body_of(st), [&](const ir::Expr& e) {
    if (e->kind() != ir::ExprKind::kProducerLoad) return;
    const auto& load = static_cast<const ir::ProducerLoadNode&>(*e);
    bool uses = false;
    for (const auto& index : load.indices) uses |= ir::uses_var(index, var.get());
    if (!uses) return;
    for (int s = 0; s < loops.num_stages(); ++s) {
      if (loops.stage(s).tensor.get() == load.producer.get()) out.insert(s);
    }
  });
  return {out.begin(), out.end()};
}

/// The spatial axis other than the last over which a stage's register tile
/// is better vectorized, or -1: one that is a whole number of vectors where
/// the last is not, and that only constant inputs are indexed by, which
/// packing lays out in the tile's order; the other inputs are broadcast
/// along it. An NCHW convolution's 64 output channels, say, rather than its
/// 56 or 7 columns, read at a window offset.
int vector_axis_instead_of_last(const LoopState& loops, int stage, const SketchOptions& options) {
  const Stage& st = loops.stage(stage);
  auto op = st.tensor.compute_op();
  if (!op || op->axis.size() < 2 || options.vector_bytes <= 0) return -1;
  const int64_t lanes = options.vector_bytes / std::max(st.tensor.dtype().bytes(), 1);
  if (lanes < 4 || op->axis.back()->extent % lanes == 0) return -1;
  for (int a = static_cast<int>(op->axis.size()) - 2; a >= 0; --a) {
    if (op->axis[static_cast<size_t>(a)]->extent % lanes != 0) continue;
    std::vector<int> inputs = inputs_indexed_by(loops, stage, a);
    if (!inputs.empty() && std::all_of(inputs.begin(), inputs.end(), [&](int s) {
          return loops.stage(s).is_placeholder() &&
                 loops.dag().is_constant_input(loops.dag().stage_of(loops.stage(s).tensor));
        })) {
      return a;
    }
  }
  return -1;
}

/// Splits every spatial loop into the structure's S levels and every
/// reduction loop into its R levels, all lengths still 1, and orders the
/// parts level by level, with the innermost part of spatial axis
/// `vector_axis` (when not -1) last. Returns, per axis (spatial then
/// reduction, in root order), the index in the history of the split that
/// tiled it.
std::vector<int> tile(SketchState& s, const std::string& structure, int vector_axis = -1) {
  const int n_s = static_cast<int>(std::count(structure.begin(), structure.end(), 'S'));
  const int n_r = static_cast<int>(std::count(structure.begin(), structure.end(), 'R'));
  const Stage before = s.loops.stage(s.stage);
  const int n = static_cast<int>(before.leaves.size());
  std::vector<int> parts(n);
  for (int k = 0; k < n; ++k) {
    parts[k] = before.iters[before.leaves[k]].kind == ir::IterKind::kSpatial ? n_s : n_r;
  }
  // Inner loops first, so that the positions of the outer ones stay put.
  std::vector<int> split_step(n, -1);
  for (int k = n - 1; k >= 0; --k) {
    if (parts[k] <= 1) continue;
    split_step[k] = static_cast<int>(s.loops.history().size());
    search::apply(s, schedule::split(s.stage, k, std::vector<int64_t>(parts[k] - 1, 1)));
  }
  // Where each part of each axis is now: axis k starts after the parts of
  // the axes before it.
  std::vector<int> first(n);
  for (int k = 0, at = 0; k < n; at += std::max(parts[k], 1), ++k) first[k] = at;
  std::vector<int> order;
  int level_s = 0, level_r = 0;
  for (char c : structure) {
    bool spatial = c == 'S';
    int level = spatial ? level_s++ : level_r++;
    const bool last = spatial && level == n_s - 1;
    for (int k = 0; k < n; ++k) {
      bool is_spatial = before.iters[before.leaves[k]].kind == ir::IterKind::kSpatial;
      if (is_spatial == spatial && !(last && k == vector_axis)) order.push_back(first[k] + level);
    }
    if (last && vector_axis >= 0) order.push_back(first[vector_axis] + level);
  }
  search::apply(s, schedule::reorder(s.stage, order));
  return split_step;
}

/// The producers that `stage` alone reads, computed at the root and not
/// inlined later (nor reductions, whose loops are more than their
/// dimensions), with the dimension of each that a reduction axis of `stage`
/// indexes alone (a convolution's input channels) where that is not
/// already the last.
std::vector<std::pair<int, int>> channels_last_producers(const LoopState& loops, int stage) {
  const Stage& st = loops.stage(stage);
  if (!is_reduction(st)) return {};
  std::set<const ir::VarNode*> reduced;
  for (const auto& iv : static_cast<const ir::ReduceNode&>(*body_of(st)).axis) {
    reduced.insert(iv->var.get());
  }
  std::vector<std::pair<int, int>> out;
  for (int p = 0; p < stage; ++p) {
    const Stage& producer = loops.stage(p);
    if (producer.is_placeholder() || producer.is_output || producer.is_transformed() ||
        is_reduction(producer) || producer.location != schedule::ComputeLocation::kRoot ||
        loops.consumers(p) != std::vector<int>{stage} || is_strictly_inlineable(loops, p)) {
      continue;
    }
    std::set<int> dims;  // over all of stage's reads of the producer
    ir::visit_pre_order(body_of(st), [&](const ir::Expr& e) {
      if (e->kind() != ir::ExprKind::kProducerLoad) return;
      const auto& load = static_cast<const ir::ProducerLoadNode&>(*e);
      if (load.producer.get() != producer.tensor.get()) return;
      for (size_t d = 0; d < load.indices.size(); ++d) {
        const ir::Expr& index = load.indices[d];
        if (index->kind() == ir::ExprKind::kVar &&
            reduced.count(static_cast<const ir::VarNode*>(index.get()))) {
          dims.insert(static_cast<int>(d));
        }
      }
    });
    const int rank = static_cast<int>(producer.tensor.shape().size());
    if (dims.size() == 1 && *dims.begin() != rank - 1) out.emplace_back(p, *dims.begin());
  }
  return out;
}

/// Stores the channels_last_producers of `stage` with that dimension last,
/// and computes each in that order too: its innermost loop then writes
/// whole vectors and gathers its reads, which ran a 56x56x64 padded copy 2-3x
/// faster than contiguous reads and scattered writes (1 core, AVX-512).
void store_channels_last(SketchState& state, int stage) {
  const std::vector<std::pair<int, int>> producers = channels_last_producers(state.loops, stage);
  if (producers.empty()) return;
  std::vector<std::string> names;
  for (auto [p, dim] : producers) {
    const int rank = static_cast<int>(state.loops.stage(p).tensor.shape().size());
    std::vector<int> storage;
    for (int d = 0; d < rank; ++d) {
      if (d != dim) storage.push_back(d);
    }
    storage.push_back(dim);
    search::apply(state, schedule::storage_order(p, storage));
    search::apply(state, schedule::reorder(p, storage));
    names.push_back(state.loops.stage(p).name());
  }
  state.applied.back() += " storage_order(" + join(names, ", ") + ", channels last)";
}

/// Tiles a stage with data reuse into the multi-level structure.
class MultiLevelTiling final : public SketchRule {
 public:
  std::string name() const override { return "multi_level_tiling"; }
  Condition condition(const SketchState& s, const SketchOptions&) const override {
    const Stage& st = s.loops.stage(s.stage);
    return !st.is_transformed() && needs_multi_level_tiling(s.loops, s.stage)
               ? Condition::kApplyAndSkipRest
               : Condition::kPass;
  }
  std::vector<SketchState> apply(const SketchState& s,
                                 const SketchOptions& options) const override {
    SketchState next = s;
    tile(next, options.structure);
    next.applied.push_back(name() + "(" + s.loops.stage(s.stage).name() + ")");
    --next.stage;
    return {next};
  }
};

/// Tiles a stage with data reuse and computes it inside its elementwise
/// consumer, whose loops follow the stage's tiles down to the fusion level:
/// one sketch per level of SketchOptions::fusion_levels.
class TileWithFusion final : public SketchRule {
 public:
  std::string name() const override { return "tile_with_fusion"; }
  Condition condition(const SketchState& s, const SketchOptions&) const override {
    const Stage& st = s.loops.stage(s.stage);
    if (st.is_transformed() || !needs_multi_level_tiling(s.loops, s.stage)) {
      return Condition::kPass;
    }
    int c = elementwise_consumer(s.loops, s.stage);
    if (c < 0 || s.loops.stage(c).is_transformed()) return Condition::kPass;
    // A local accumulator exists only to be fused: nothing else is tried.
    bool local = st.name() == s.loops.stage(c).name() + ".local";
    return local ? Condition::kApplyAndSkipRest : Condition::kApply;
  }
  std::vector<SketchState> apply(const SketchState& s,
                                 const SketchOptions& options) const override {
    const int n_s =
        static_cast<int>(std::count(options.structure.begin(), options.structure.end(), 'S'));
    // The tile may also be vectorized over an axis other than the last, its
    // constant inputs then packed (after the others, so that the default
    // schedule's first choice stays).
    std::vector<int> vector_axes = {-1};
    if (int other = vector_axis_instead_of_last(s.loops, s.stage, options); other >= 0) {
      vector_axes.push_back(other);
    }
    std::vector<SketchState> out;
    for (int vector_axis : vector_axes) {
      for (int level : options.fusion_levels) {
        if (level < 1 || level >= n_s) continue;
        out.push_back(tile_and_fuse(s, options, level, vector_axis));
        // Its inputs broadcast, such a tile walks the channels it reduces
        // over in its inner loops: in an NCHW padded copy that is one plane
        // per channel, in a channels-last one a contiguous run.
        if (vector_axis >= 0) store_channels_last(out.back(), s.stage);
      }
    }
    return out;
  }

 private:
  SketchState tile_and_fuse(const SketchState& s, const SketchOptions& options, int level,
                            int vector_axis) const {
    SketchState next = s;
    std::vector<int> split_step = tile(next, options.structure, vector_axis);
    int c = elementwise_consumer(next.loops, s.stage);
    TT_ICHECK(c >= 0, "tiling lost the elementwise consumer");
    const Stage& consumer = next.loops.stage(c);
    const int n = static_cast<int>(consumer.leaves.size());
    // The consumer's axis k is the stage's spatial axis k.
    for (int k = n - 1; k >= 0; --k) {
      if (split_step[k] < 0) continue;
      search::apply(next, schedule::follow_split(c, k, split_step[k], level));
    }
    // Each consumer axis now has level + 1 parts (or 1 when not split).
    std::vector<int> first(n);
    std::vector<int> count(n);
    for (int k = 0, at = 0; k < n; ++k) {
      count[k] = split_step[k] < 0 ? 1 : level + 1;
      first[k] = at;
      at += count[k];
    }
    std::vector<int> order;
    for (int l = 0; l <= level; ++l) {
      for (int k = 0; k < n; ++k) {
        if (count[k] == 1) {
          if (l == level) order.push_back(first[k]);
        } else {
          order.push_back(first[k] + l);
        }
      }
    }
    search::apply(next, schedule::reorder(c, order));
    int attach = 0;
    for (int k = 0; k < n; ++k) attach += count[k] == 1 ? 0 : level;
    search::apply(next, schedule::compute_at(s.stage, c, attach - 1));
    std::string vectorized;
    if (vector_axis >= 0) {
      vectorized = ", vectorized over " +
                   s.loops.stage(s.stage).tensor.compute_op()->axis[vector_axis]->var->name;
      for (int input : inputs_indexed_by(next.loops, s.stage, vector_axis)) {
        next.packed_inputs.insert(next.loops.stage(input).name());
      }
    }
    next.applied.push_back(name() + "(" + s.loops.stage(s.stage).name() + ", level " +
                           std::to_string(level) + vectorized + ")");
    --next.stage;
    return next;
  }
};

/// Tiles a reduction without data reuse whose reads all take their last
/// index from the stage's last spatial axis (a pooling window over
/// channels-last data, a mean over rows): as "SRS", so that the reduction
/// loops run outside an inner part of that axis, which can then be
/// vectorized over contiguous elements instead of reducing one at a time.
/// Elementwise producers only it reads (the padding of a pool) are inlined:
/// a padding stage would otherwise write, and its consumer read, a padded
/// copy of the data, which costs more than the pool itself; inlined, its
/// bounds check depends on the window position only, not on the lanes.
class TileWindowReduction final : public SketchRule {
 public:
  std::string name() const override { return "tile_window_reduction"; }
  Condition condition(const SketchState& s, const SketchOptions&) const override {
    const Stage& st = s.loops.stage(s.stage);
    if (st.is_transformed() || needs_multi_level_tiling(s.loops, s.stage)) {
      return Condition::kPass;
    }
    return reduces_along_last_axis(st) ? Condition::kApply : Condition::kPass;
  }
  std::vector<SketchState> apply(const SketchState& s, const SketchOptions&) const override {
    SketchState next = s;
    for (int p = 0; p < s.stage; ++p) {
      const Stage& producer = s.loops.stage(p);
      if (producer.is_placeholder() || is_reduction(producer) ||
          producer.location != schedule::ComputeLocation::kRoot ||
          s.loops.consumers(p) != std::vector<int>{s.stage}) {
        continue;
      }
      search::apply(next, schedule::compute_inline(p));
    }
    tile(next, "SRS");
    next.applied.push_back(name() + "(" + s.loops.stage(s.stage).name() + ")");
    --next.stage;
    return {next};
  }
};

/// Leaves the stage to annotation and goes on to the one before it.
class SkipStage final : public SketchRule {
 public:
  std::string name() const override { return "skip_stage"; }
  Condition condition(const SketchState&, const SketchOptions&) const override {
    return Condition::kApply;
  }
  std::vector<SketchState> apply(const SketchState& s, const SketchOptions&) const override {
    SketchState next = s;
    --next.stage;
    return {next};
  }
};

}  // namespace

SketchOptions sketch_options(const te::Task& task) {
  SketchOptions options;
  options.num_cores = std::max<int64_t>(task->hardware_params->num_cores, 1);
  options.vector_bytes = task->hardware_params->vector_bytes;
  return options;
}

const std::vector<std::unique_ptr<SketchRule>>& cpu_sketch_rules() {
  static const std::vector<std::unique_ptr<SketchRule>> rules = [] {
    std::vector<std::unique_ptr<SketchRule>> r;
    r.push_back(std::make_unique<AlwaysInline>());
    r.push_back(std::make_unique<AddRfactor>());
    r.push_back(std::make_unique<AddCacheWrite>());
    r.push_back(std::make_unique<TileWithFusion>());
    r.push_back(std::make_unique<MultiLevelTiling>());
    r.push_back(std::make_unique<TileWindowReduction>());
    r.push_back(std::make_unique<SkipStage>());
    return r;
  }();
  return rules;
}

const SketchRule& sketch_rule(std::string_view name) {
  std::vector<std::string> names;
  for (const auto& r : cpu_sketch_rules()) {
    if (r->name() == name) return *r;
    names.push_back(r->name());
  }
  fail(ErrorKind::kNotFound, "no sketch rule '", name, "'; the rules are: ", join(names, ", "));
}

namespace {

/// The inputs that tiled stages of `loops` read at their own axes: the ones
/// layout_rewrite may pack (the constant ones only, or all).
std::vector<int> rewritable_inputs(const LoopState& loops, bool constants_only) {
  std::vector<int> out;
  for (int s = 0; s < loops.num_stages(); ++s) {
    if (!loops.stage(s).is_placeholder() ||
        (constants_only &&
         !loops.dag().is_constant_input(loops.dag().stage_of(loops.stage(s).tensor)))) {
      continue;
    }
    std::vector<int> readers = loops.consumers(s);
    if (readers.size() != 1 || !loops.stage(readers[0]).is_transformed() ||
        !needs_multi_level_tiling(loops, readers[0])) {
      continue;
    }
    LoopState probe = loops;
    try {
      probe.apply(schedule::layout_rewrite(s));
    } catch (const UserError& e) {
      continue;
    }
    out.push_back(s);
  }
  return out;
}

}  // namespace

std::vector<Sketch> generate_sketches(const schedule::ComputeDAG& dag,
                                      const SketchOptions& options) {
  std::vector<SketchState> now = {SketchState{LoopState(dag), dag.num_stages() - 1, {}, {}}};
  std::vector<Sketch> out;
  std::unordered_set<uint64_t> seen;
  while (!now.empty()) {
    std::vector<SketchState> next;
    for (const SketchState& s : now) {
      if (s.stage < 0) {
        schedule::State state = schedule::State::make(s.loops.history());
        std::string description = s.applied.empty() ? "naive" : join(s.applied, " ");
        if (s.packed_inputs.empty() && seen.insert(structural_hash(state)).second) {
          out.push_back({state, description});
        }
        // The same sketch with the weights its tiles read pre-packed in
        // their order, and with every input they read packed (the other
        // inputs by the kernel itself, as a GEMM library packs its
        // operands); which is fastest is for measurement to tell.
        if (!options.layout_rewrite) continue;
        for (bool constants_only : {true, false}) {
          if (!constants_only && !options.pack_non_constant_inputs) continue;
          std::vector<int> packed = rewritable_inputs(s.loops, constants_only);
          std::set<std::string> names;
          for (int w : packed) names.insert(s.loops.stage(w).name());
          if (packed.empty() || !std::includes(names.begin(), names.end(), s.packed_inputs.begin(),
                                               s.packed_inputs.end())) {
            continue;
          }
          std::vector<schedule::Step> steps = s.loops.history();
          std::string text = description;
          for (int w : packed) {
            steps.push_back(schedule::layout_rewrite(w));
            text += " layout_rewrite(" + s.loops.stage(w).name() + ")";
          }
          schedule::State rewritten = schedule::State::make(steps);
          if (seen.insert(structural_hash(rewritten)).second) out.push_back({rewritten, text});
        }
        continue;
      }
      for (const auto& rule : cpu_sketch_rules()) {
        SketchRule::Condition c = rule->condition(s, options);
        if (c == SketchRule::Condition::kPass) continue;
        for (auto& r : rule->apply(s, options)) next.push_back(std::move(r));
        if (c == SketchRule::Condition::kApplyAndSkipRest) break;
      }
    }
    now = std::move(next);
  }
  return out;
}

namespace {

/// Every path from a stage through the inlined stages after it, to the
/// stages that are not inlined.
struct InlinedPaths {
  bool elementwise = true;  ///< every hop reads its producer elementwise or transposed
  int64_t evaluations = 0;  ///< of an element of the stage, per element of the ends
  std::set<int> ends;       ///< the stages that are not inlined
};

InlinedPaths paths_through_inlining(const LoopState& state, int stage) {
  InlinedPaths out;
  std::function<int64_t(int)> evaluations = [&](int producer) {
    const te::Tensor& tensor = state.stage(producer).tensor;
    int64_t n = 0;
    for (int c : state.consumers(producer)) {
      const Stage& consumer = state.stage(c);
      out.elementwise &=
          reads_elementwise(consumer.tensor, tensor) || reads_permuted(consumer.tensor, tensor);
      int64_t loads = 0;
      ir::visit_pre_order(body_of(consumer), [&](const ir::Expr& e) {
        loads += e->kind() == ir::ExprKind::kProducerLoad &&
                 static_cast<const ir::ProducerLoadNode&>(*e).producer.get() == tensor.get();
      });
      bool inlined = consumer.location == schedule::ComputeLocation::kInline;
      if (!inlined) out.ends.insert(c);
      n += loads * (inlined ? evaluations(c) : 1);
    }
    return n;
  };
  out.evaluations = evaluations(stage);
  return out;
}

/// Whether `stage` (a padding) chooses by position but not by its last
/// axis, and every consumer reads it with its own last spatial axis as the
/// last index (a channels-last depthwise convolution or pool, with no sum
/// across that axis): then each vector of the consumer's lanes makes one
/// choice. (A concatenation along the last axis chooses per lane.)
bool read_along_last_axis(const LoopState& state, int stage) {
  const te::Tensor& tensor = state.stage(stage).tensor;
  auto own = tensor.compute_op();
  if (!own || own->axis.empty()) return false;
  bool per_lane = false;
  ir::visit_pre_order(body_of(state.stage(stage)), [&](const ir::Expr& e) {
    if (e->kind() != ir::ExprKind::kSelect) return;
    ir::visit_pre_order(static_cast<const ir::SelectNode&>(*e).condition, [&](const ir::Expr& v) {
      per_lane |= v.get() == own->axis.back()->var.get();
    });
  });
  if (per_lane) return false;
  std::vector<int> consumers = state.consumers(stage);
  return !consumers.empty() && std::all_of(consumers.begin(), consumers.end(), [&](int c) {
    auto op = state.stage(c).tensor.compute_op();
    if (!op || op->axis.empty()) return false;
    // Convolutions and pools only. A Winograd input transform reads the
    // same way, but each element up to (tile + 2)^2 / tile^2 times in an
    // unrolled product of coefficients: with its padding inlined, random
    // schedules of it compiled 20 times slower, and a U-Net layer ran slower.
    if (!op->tag.starts_with("conv2d") && !op->tag.starts_with("pool")) return false;
    const Object* last = op->axis.back()->var.get();
    bool along = true;
    ir::visit_pre_order(body_of(state.stage(c)), [&](const ir::Expr& e) {
      if (e->kind() != ir::ExprKind::kProducerLoad) return;
      const auto& load = static_cast<const ir::ProducerLoadNode&>(*e);
      if (load.producer.get() != tensor.get()) return;
      along &= !load.indices.empty() && load.indices.back().get() == last;
    });
    return along;
  });
}

}  // namespace

bool is_strictly_inlineable(const LoopState& state, int stage) {
  const Stage& st = state.stage(stage);
  if (st.is_placeholder() || st.is_output || is_reduction(st)) return false;
  if (st.location == schedule::ComputeLocation::kInline) return false;
  if (state.consumers(stage).empty()) return false;
  bool select = false, call = false, scalar_call = false;
  ir::visit_pre_order(body_of(st), [&](const ir::Expr& e) {
    select |= e->kind() == ir::ExprKind::kSelect;
    if (e->kind() != ir::ExprKind::kCall) return;
    const auto& c = static_cast<const ir::CallNode&>(*e);
    call = true;
    scalar_call |= !lower::has_vector_form(c.op, c.dtype);
  });
  // A call (exp, erf, ...) is worth a stage of its own where inlining would
  // evaluate it more than once per element, or where it has no vector form
  // (pow, log: a library call per lane would keep the whole loop it joins
  // scalar). GELU's erf, read once by the output, inlines and vectorizes
  // with it.
  // A select (a padding) inlines where its consumers read it along their
  // own last axis: its condition then depends on the window position, not
  // on the vector lanes, and no padded copy of the data is written and
  // read back (which costs a depthwise convolution more than its sums).
  if (!call) return !select || read_along_last_axis(state, stage);
  // Each element evaluated once: one load in all, and elementwise on every
  // path (a broadcast or a reduction's window would evaluate it many times).
  InlinedPaths paths = paths_through_inlining(state, stage);
  return !select && !scalar_call && paths.elementwise && paths.evaluations == 1;
}

bool needs_multi_level_tiling(const LoopState& state, int stage) {
  const Stage& st = state.stage(stage);
  if (!is_reduction(st)) return false;
  const auto& red = static_cast<const ir::ReduceNode&>(*body_of(st));
  std::set<const Object*> tensors;
  bool reuse = false;
  auto op = st.tensor.compute_op();
  ir::visit_pre_order(red.source, [&](const ir::Expr& e) {
    if (e->kind() != ir::ExprKind::kProducerLoad) return;
    const auto& load = static_cast<const ir::ProducerLoadNode&>(*e);
    tensors.insert(load.producer.get());
    std::set<const Object*> vars;
    for (const auto& index : load.indices) {
      ir::visit_pre_order(index, [&](const ir::Expr& v) {
        if (v->kind() == ir::ExprKind::kVar) vars.insert(v.get());
      });
    }
    for (const auto& iv : op->axis) reuse |= iv->extent > 1 && !vars.count(iv->var.get());
  });
  return tensors.size() >= 2 && reuse;
}

int elementwise_consumer(const LoopState& state, int stage) {
  const Stage& st = state.stage(stage);
  if (st.is_placeholder()) return -1;
  std::vector<int> consumers = state.effective_consumers(stage);
  if (consumers.size() != 1) return -1;
  // Through inlined stages, which may read the stage on several paths (GELU
  // reads x twice): each hop must read elementwise, and every path end in
  // the one consumer.
  InlinedPaths paths = paths_through_inlining(state, stage);
  return paths.elementwise && paths.ends == std::set<int>{consumers[0]} ? consumers[0] : -1;
}

}  // namespace tensortune::search
