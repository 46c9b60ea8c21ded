#include "tensortune/search/default_schedule.h"

#include <algorithm>
#include <functional>
#include <map>
#include <optional>
#include <set>

#include "search/parallel_work.h"
#include "tensortune/ir/expr_functor.h"
#include "tensortune/lower/passes.h"
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
  } catch (const UserError& e) {
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

/// Bytes of a tensor.
double tensor_bytes(const ir::ProducerNode& t) {
  double n = t.dtype.bytes();
  for (int64_t e : t.shape) n *= static_cast<double>(e);
  return n;
}

/// What a tiled stage reads: the constant inputs (weights) and the rest, in
/// bytes, and which of its spatial axes index the weights.
struct Operands {
  double weight_bytes = 0, other_bytes = 0;
  std::vector<bool> indexes_weights;  ///< per spatial axis
};

Operands operands(const Stage& st, const schedule::ComputeDAG& dag) {
  Operands out;
  auto op = st.tensor.compute_op();
  if (!op) return out;
  std::set<const Object*> constants;
  for (int s = 0; s < dag.num_stages(); ++s) {
    if (dag.is_constant_input(s)) constants.insert(dag.stages()[static_cast<size_t>(s)].get());
  }
  out.indexes_weights.assign(op->axis.size(), false);
  std::set<const Object*> seen;
  ir::visit_pre_order(op->body, [&](const ir::Expr& e) {
    if (e->kind() != ir::ExprKind::kProducerLoad) return;
    const auto& load = static_cast<const ir::ProducerLoadNode&>(*e);
    bool weight = constants.count(load.producer.get()) > 0;
    if (seen.insert(load.producer.get()).second) {
      (weight ? out.weight_bytes : out.other_bytes) += tensor_bytes(*load.producer);
    }
    if (!weight) return;
    for (const auto& index : load.indices) {
      ir::visit_pre_order(index, [&](const ir::Expr& v) {
        for (size_t a = 0; a < op->axis.size(); ++a) {
          if (v.get() == op->axis[a]->var.get()) out.indexes_weights[a] = true;
        }
      });
    }
  });
  return out;
}

}  // namespace

/// A register tile of `rows` by `vectors` vectors for a stage whose vector
/// axis has `cols` elements and its row axis `rows_extent`:
/// at most `accumulators` of them, rows dividing their axis, vectors
/// filling theirs.
static std::pair<int64_t, int64_t> register_tile(int64_t rows_extent, int64_t cols, int64_t lanes,
                                                 int64_t accumulators) {
  const int64_t budget = std::max<int64_t>(accumulators, 1);
  std::pair<int64_t, int64_t> best{1, 1};
  // Whole powers of two of vectors: the vectorize pass makes vector code of
  // power-of-two lane counts only, and a 3-vector loop stays scalar.
  // A row axis of few divisors (an audio net's 61 frames) may instead take
  // up to 8 rows that do not divide it, the last tile guarded, where that
  // keeps half as many accumulators again busy on average.
  std::pair<int64_t, int64_t> ragged{1, 1};
  double ragged_busy = 0;
  for (int64_t v = 1; v <= 4; v *= 2) {
    if (cols % (v * lanes) != 0) continue;
    int64_t r = divisor_at_most(rows_extent, budget / v);
    if (r * v > best.first * best.second ||
        (r * v == best.first * best.second && v > best.second)) {
      best = {r, v};
    }
    const int64_t rows = std::max<int64_t>(std::min<int64_t>({rows_extent, budget / v, 8}), 1);
    const double busy =
        static_cast<double>(v * rows_extent) / static_cast<double>((rows_extent + rows - 1) / rows);
    if (rows > r && busy > ragged_busy) {
      ragged = {rows, v};
      ragged_busy = busy;
    }
  }
  return ragged_busy > 1.5 * static_cast<double>(best.first * best.second) ? ragged : best;
}

/// The stage at the root, read by `consumer` alone, that `is` accepts; -1
/// when there is none.
int root_producer(const LoopState& state, int consumer,
                  const std::function<bool(const Stage&, const te::ComputeOpNode&)>& is) {
  for (int p = 0; p < state.num_stages(); ++p) {
    const Stage& st = state.stage(p);
    auto op = st.tensor.compute_op();
    if (p != consumer && op && st.location == schedule::ComputeLocation::kRoot && is(st, *op) &&
        state.consumers(p) == std::vector<int>{consumer}) {
      return p;
    }
  }
  return -1;
}

/// The rows stage (the transform along the height) of Winograd transform
/// stage `s`: its one producer of the same operator.
int winograd_rows(const LoopState& state, int s, const std::string& tag) {
  return root_producer(state, s, [&](const Stage& st, const te::ComputeOpNode& op) {
    return op.tag == tag && st.leaves.size() == 6;
  });
}

/// Winograd's input transform computes a row of tiles at a time: its rows
/// (the transform along the height) for the row of tiles into a local
/// buffer, then each eps's outputs along the row, with the loop over nu
/// unrolled so that its rows of constants fold and the six values it reads
/// are loaded once. The operator's own order, [eps, nu, tiles, C] outermost
/// first, read a sixth of the whole rows buffer for every (eps, nu): 28 MB
/// for a U-Net's 32-channel 128 x 128 input, whose rows are 4.7 MB. Writing
/// all alpha^2 outputs of one tile at once ran 4x slower in a model than
/// alone: their planes lie a power of two apart, so a tile's 36 stores
/// fall in one cache set; six at a time fit it (docs/winograd.md).
void winograd_input_per_tile(LoopState& state) {
  for (int s = 0; s < state.num_stages(); ++s) {
    const Stage& out = state.stage(s);
    auto op = out.tensor.compute_op();
    // The output stage carries the tile; its rows stage is its one producer
    // of the same operator.
    if (!op || op->tag != "winograd_input_transform" || !op->attrs.contains("tile") ||
        out.location != schedule::ComputeLocation::kRoot || out.leaves.size() != 6) {
      continue;
    }
    const int rows = winograd_rows(state, s, op->tag);
    // [eps, nu, n, y, x, c] -> [n, y, eps, x, nu, c], rows at y.
    if (rows < 0 || !try_apply(state, schedule::reorder(s, {2, 3, 0, 4, 1, 5}))) continue;
    if (!try_apply(state, schedule::compute_at(rows, s, 1))) continue;
    try_apply(state, schedule::annotate(s, 4, schedule::IterAnnotation::kUnroll));
    // The rows' [n, y, x, eps, b, c] -> [n, y, x, b, eps, c]: each of the
    // column's six inputs serves every eps.
    if (try_apply(state, schedule::reorder(rows, {0, 1, 2, 4, 3, 5}))) {
      try_apply(state, schedule::annotate(rows, 4, schedule::IterAnnotation::kUnroll));
    }
    // A concat (a U-Net's skip and upsampled maps) is read once, by the
    // padding: inlined, the padding copies each operand's channels (whole
    // vectors, after partition_loops) and the joined map is never written.
    const int pad = root_producer(
        state, rows, [](const Stage&, const te::ComputeOpNode& o) { return o.tag == "pad"; });
    const int joined =
        pad < 0 ? -1 : root_producer(state, pad, [](const Stage&, const te::ComputeOpNode& o) {
          return o.attrs.value("op", "") == "concat";
        });
    if (joined >= 0) try_apply(state, schedule::compute_inline(joined));
  }
}

/// Winograd's output transform likewise, by rows of tiles: the output (its
/// epilogue, bias and relu, with the transform inlined into it) split into
/// tiles, the rows (the transform along the height) of one row of tiles
/// computed inside it nu by nu, which reads six planes of products at a
/// time (not 36, which collide in one cache set), and the loops over a
/// tile's rows and columns unrolled so that the transform's rows of
/// constants fold. The operator's own order computed every stage over the
/// whole image, a select over the transform's rows per vector.
void winograd_output_per_tile(LoopState& state) {
  for (int s = 0; s < state.num_stages(); ++s) {
    auto op = state.stage(s).tensor.compute_op();
    if (!op || op->tag != "winograd_output_transform" || !op->attrs.contains("tile") ||
        state.stage(s).location != schedule::ComputeLocation::kRoot) {
      continue;
    }
    const int64_t tile = op->attrs.at("tile").get<int64_t>();
    const int rows = winograd_rows(state, s, op->tag);
    if (rows < 0) continue;
    // The stage that writes [N, H, W, K]: the transform, or the one
    // elementwise epilogue of its shape it is inlined into. Everything is
    // checked before the inlining, which is no use without the tiles.
    int out = s;
    if (!state.stage(s).is_output) {
      const std::vector<int> readers = state.effective_consumers(s);
      if (readers.size() != 1 || !state.stage(readers[0]).is_output ||
          op_has_reduction(state.stage(readers[0])) ||
          state.stage(readers[0]).tensor.shape() != state.stage(s).tensor.shape()) {
        continue;
      }
      out = readers[0];
    }
    const Stage& o = state.stage(out);
    if (o.location != schedule::ComputeLocation::kRoot || o.leaves.size() != 4 ||
        o.iters[o.leaves[1]].extent < tile || o.iters[o.leaves[2]].extent < tile ||
        (out != s && !try_apply(state, schedule::compute_inline(s)))) {
      continue;
    }
    // [n, h, w, k] -> [n, ho, hi, wo, wi, k], rows at ho.
    if (!try_apply(state, schedule::split(out, 1, {tile})) ||
        !try_apply(state, schedule::split(out, 3, {tile})) ||
        !try_apply(state, schedule::compute_at(rows, out, 1))) {
      continue;
    }
    try_apply(state, schedule::annotate(out, 4, schedule::IterAnnotation::kUnroll));
    // The rows' [n, y, x, i, nu, k] -> [n, y, nu, x, i, k].
    if (try_apply(state, schedule::reorder(rows, {0, 1, 4, 2, 3, 5}))) {
      try_apply(state, schedule::annotate(rows, 4, schedule::IterAnnotation::kUnroll));
    }
  }
}

schedule::State default_schedule(const te::Task& task) {
  schedule::ComputeDAG dag(te::workload_tensors(task->workload));
  // Weights are packed once, outside the kernel; other inputs stay as they
  // are, so the untuned kernel copies nothing per call.
  SketchOptions options = sketch_options(task);
  options.pack_non_constant_inputs = false;
  std::vector<Sketch> sketches = generate_sketches(dag, options);
  const ir::HardwareParamsNode& machine = *task->hardware_params;
  // The first sketch whose tiles accumulate in a local stage (a fused
  // consumer's or a cache write's), else the first, with its constant
  // operands pre-packed when there is such a variant (the one after it):
  // tiles then read weights in order. Accumulating into the output buffer
  // keeps the register tile in memory (a Winograd product 4.5x slower).
  // Where the output's last axis is no whole number of vectors and the
  // sketches also vectorize the tile over another axis (an NCHW
  // convolution's output channels, its input stored channels last), the
  // first of those: the 64-channel 56x56 3x3 convolution in NCHW ran at
  // 63-67 GFLOP/s vectorized over its 56 columns, 247-250 so (2 threads).
  auto first_with = [&](const char* text) -> std::optional<size_t> {
    for (size_t i = 0; i < sketches.size(); ++i) {
      if (sketches[i].description.find(text) != std::string::npos) return i;
    }
    return std::nullopt;
  };
  const size_t first =
      first_with(", vectorized over ").value_or(first_with("tile_with_fusion").value_or(0));
  const Sketch* sketch = &sketches[first];
  if (first + 1 < sketches.size() &&
      sketches[first + 1].description.rfind(sketch->description + " layout_rewrite", 0) == 0) {
    sketch = &sketches[first + 1];
  }
  // The axis each tiled stage's register tile is vectorized over: the one
  // its innermost spatial loop comes from in the sketch (the last, or the
  // one the sketch chose instead).
  std::map<std::string, size_t> vector_axis;
  const LoopState sketched = schedule::replay(dag, sketch->state);
  for (int s = 0; s < sketched.num_stages(); ++s) {
    const Stage& st = sketched.stage(s);
    const int id = st.is_placeholder() ? -1 : st.innermost_spatial_root();
    const auto root = std::find(st.root.begin(), st.root.end(), id);
    if (id >= 0 && root != st.root.end()) vector_axis[st.name()] = root - st.root.begin();
  }
  // Per tiled stage, decided once: the innermost tile of each spatial axis,
  // a register tile of a few rows by a few vectors (register_tile()) on the
  // last two and 1 on the others; and whether the outer (parallel) tiles run
  // over the weights' blocks with every other spatial axis whole inside them,
  // rather than over its rows. Re-reading weights that do not fit in L2 for
  // every outer row tile (ResNet's 512-channel 3x3 convs read 9.4 MB of
  // weights for each of 7 rows) can move more bytes than re-reading the
  // other operands for each weight block; that way is taken when it moves
  // fewer and gives every core enough blocks.
  struct Tiling {
    std::vector<int64_t> inner;
    std::vector<bool> indexes_weights;
    bool weights_outer = false;
  };
  const double l2_bytes = static_cast<double>(task->hardware_params->l2_cache_bytes);
  auto plan = [&](const Stage& st, size_t spatial) {
    Tiling t;
    const int64_t lanes = ir::vector_lanes(machine, st.tensor.dtype());
    Operands ops = operands(st, dag);
    // As many accumulators as leave 4 registers for the operands. A
    // depthwise convolution sums over its window only, so each of its
    // accumulators needs its own weight vector at each window position and
    // a wide tile reuses nothing: tiles of at most 8 accumulators ran the
    // generated MobileNetV2's ten depthwise layers in 25% less time than
    // the 28 of AVX-512's registers (2 threads, Zen 5).
    const bool window_sum_only = ops.weight_bytes > 0 && st.root.size() == spatial + 2;
    const int64_t accumulators = window_sum_only
                                     ? std::min<int64_t>(ir::vector_registers(machine) - 4, 8)
                                     : ir::vector_registers(machine) - 4;
    auto root_extent = [&](size_t a) { return st.iters[st.root[a]].extent; };
    // The register tile's vectors along the vector axis, its rows along the
    // last other spatial axis.
    auto it = vector_axis.find(st.name());
    const size_t vectors_axis =
        it != vector_axis.end() && it->second < spatial ? it->second : spatial - 1;
    const size_t rows_axis = spatial < 2                   ? spatial
                             : vectors_axis + 1 == spatial ? spatial - 2
                                                           : spatial - 1;
    for (size_t a = 0; a < spatial; ++a) {
      int64_t extent = root_extent(a), inner = 1;
      if (a == vectors_axis) {
        int64_t rows = rows_axis < spatial ? root_extent(rows_axis) : 1;
        int64_t vectors = register_tile(rows, extent, lanes, accumulators).second;
        inner = extent % lanes == 0 ? vectors * lanes : divisor_at_most(extent, 2 * lanes, lanes);
      } else if (a == rows_axis) {
        inner = register_tile(extent, root_extent(vectors_axis), lanes, accumulators).first;
      }
      t.inner.push_back(inner);
    }
    t.indexes_weights = ops.indexes_weights;
    if (ops.weight_bytes == 0) return t;
    double weight_blocks = 1, row_tiles = 1;
    for (size_t a = 0; a < spatial; ++a) {
      // A ragged register tile (register_tile) counts its last, part-empty tile.
      double tiles = static_cast<double>((root_extent(a) + t.inner[a] - 1) / t.inner[a]);
      (ops.indexes_weights[a] ? weight_blocks : row_tiles) *= tiles;
    }
    auto traffic = [&](double bytes, double times) {
      return bytes > l2_bytes / 2 ? bytes * times : bytes;
    };
    double rows_outer = traffic(ops.weight_bytes, row_tiles) + ops.other_bytes;
    double blocks_outer = ops.weight_bytes + traffic(ops.other_bytes, weight_blocks);
    t.weights_outer =
        blocks_outer < rows_outer && weight_blocks >= 4 * static_cast<double>(machine.num_cores);
    return t;
  };
  std::map<std::string, Tiling> tilings;
  // Tiles: the plan's innermost parts, the last reduction axis's up to 16,
  // the other parts 1, or the rest of a row axis at the second level when
  // the weights' blocks go outside.
  LoopState state = replay_with_tile_sizes(
      sketch->state, dag, [&](const Stage& st, const schedule::SplitStepNode& split, int id) {
        int64_t extent = st.iters[id].extent;
        std::vector<int64_t> lengths(split.lengths.size(), 1);
        auto op = st.tensor.compute_op();
        size_t spatial = op ? op->axis.size() : 0;
        auto root =
            static_cast<size_t>(std::find(st.root.begin(), st.root.end(), id) - st.root.begin());
        if (root < spatial) {
          auto it = tilings.find(st.name());
          if (it == tilings.end()) it = tilings.emplace(st.name(), plan(st, spatial)).first;
          const Tiling& t = it->second;
          lengths.back() = t.inner[root];
          if (lengths.size() >= 2 && t.weights_outer && !t.indexes_weights[root]) {
            lengths.front() = (extent + lengths.back() - 1) / lengths.back();
          }
        } else if (root + 1 == st.root.size() && st.iters[id].kind == ir::IterKind::kReduce) {
          lengths.back() = divisor_at_most(extent, 16);
        }
        return lengths;
      });
  winograd_input_per_tile(state);
  winograd_output_per_tile(state);
  // Splits leave the stages' extents as they are: decided once.
  const bool worth_threads = state_iterations(state) >= kMinParallelIterations;
  for (int s = 0; s < state.num_stages(); ++s) {
    const Stage& st = state.stage(s);
    if (st.is_placeholder() || st.location == schedule::ComputeLocation::kInline ||
        st.leaves.empty()) {
      continue;
    }
    // An innermost loop of one iteration (the one word of a 3-channel
    // image's bytes) moves outermost: the loop it hid is the row. Only in
    // an untiled stage without a reduction, whose loops are its axes.
    if (st.leaves.size() > 1 && st.iters[st.leaves.back()].extent == 1 && !op_has_reduction(st) &&
        !attached_at(state, s, st.leaves.back())) {
      std::vector<int> order(st.leaves.size());
      order[0] = static_cast<int>(st.leaves.size()) - 1;
      for (size_t i = 1; i < order.size(); ++i) order[i] = static_cast<int>(i) - 1;
      try_apply(state, schedule::reorder(s, order));
    }
    // The innermost loop vectorized, when it is spatial and a few vectors
    // long, or made so by splitting off two vectors (an untiled elementwise
    // stage over a long row).
    const Stage& row = state.stage(s);
    int last = static_cast<int>(row.leaves.size()) - 1;
    // Bytes have 64 lanes to an AVX-512 register: a few vectors of them may
    // be more lanes than the vectorize pass takes.
    int64_t lanes = ir::vector_lanes(machine, row.tensor.dtype());
    const int64_t longest = std::min(4 * lanes, lower::kMaxVectorLanes);
    if (const auto& inner = row.iters[row.leaves.back()];
        inner.kind == ir::IterKind::kSpatial && !attached_at(state, s, row.leaves.back())) {
      const int64_t n = inner.extent;
      // A long row: two vectors, or one where two do not divide it (144
      // channels), or its largest power-of-two part. A short row of other
      // than a power of two lanes (24 channels), which the vectorize pass
      // does not take: its largest power-of-two part.
      int64_t piece = 0;
      if (n > longest) {
        piece = std::min(2 * lanes, lower::kMaxVectorLanes);
        if (n % piece != 0) piece = std::min(lanes, lower::kMaxVectorLanes);
        if (n % piece != 0) piece = std::min(n & -n, piece);  // 96 bytes: 3 x 32
      } else if ((n & (n - 1)) != 0) {
        piece = n & -n;
      }
      if (piece < 4) piece = 0;
      if (piece && n % piece == 0 && try_apply(state, schedule::split(s, last, {piece}))) ++last;
    }
    const Stage& split = state.stage(s);
    const auto& it = split.iters[split.leaves.back()];
    if (it.kind == ir::IterKind::kSpatial && it.extent > 1 && it.extent <= longest &&
        !attached_at(state, s, split.leaves.back())) {
      try_apply(state, schedule::annotate(s, last, schedule::IterAnnotation::kVectorize));
    }
    const Stage& now = state.stage(s);
    // Enough outer loops fused for every core to have work, when there is
    // enough work to pay for the threads.
    if (machine.num_cores > 1 && now.location == schedule::ComputeLocation::kRoot &&
        worth_threads) {
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
