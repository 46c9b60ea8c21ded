#include "tensortune/search/annotate.h"
#include "search/parallel_work.h"

#include <algorithm>
#include <map>
#include <mutex>
#include <set>

#include "tensortune/ir/expr_functor.h"
#include "tensortune/schedule/steps.h"

namespace tensortune::search {

void AnnotateOptions::declare(FieldList<AnnotateOptions>& f) {
  f.def("auto_unroll_steps", &AnnotateOptions::auto_unroll_steps)
      .def("max_innermost_split", &AnnotateOptions::max_innermost_split)
      .range(1, 1e12)
      .def("max_innermost_reduction_split", &AnnotateOptions::max_innermost_reduction_split)
      .option("max-reduction-tile",
              "evolutionary search: longest innermost tile of a reduction axis")
      .range(1, 1e12)
      .def("max_vectors_per_loop", &AnnotateOptions::max_vectors_per_loop)
      .range(1, 1 << 20)
      .def("ragged_tile_prob", &AnnotateOptions::ragged_tile_prob)
      .range(0, 1)
      .def("tile_retries", &AnnotateOptions::tile_retries)
      .range(0, 1 << 20)
      .def("parallel_reorder_prob", &AnnotateOptions::parallel_reorder_prob)
      .range(0, 1);
}
TT_REGISTER_NODE(AnnotateOptions);

using schedule::ComputeLocation;
using schedule::IterAnnotation;
using schedule::LoopState;
using schedule::Stage;
using schedule::Step;

namespace {

int pick(std::mt19937_64& rng, size_t n) {
  return n <= 1 ? 0 : std::uniform_int_distribution<int>(0, static_cast<int>(n) - 1)(rng);
}

bool chance(std::mt19937_64& rng, double p) {
  return std::uniform_real_distribution<double>(0, 1)(rng) < p;
}

/// Applies `step` if it is valid for `state`; false (and `state` unchanged) if not.
bool try_apply(LoopState& state, const Step& step) {
  try {
    state.apply(step);
    return true;
  } catch (const UserError& e) {
    return false;
  }
}

std::vector<int64_t> divisors(int64_t n) {
  std::vector<int64_t> out;
  for (int64_t d = 1; d * d <= n; ++d) {
    if (n % d) continue;
    out.push_back(d);
    if (d * d != n) out.push_back(n / d);
  }
  std::sort(out.begin(), out.end());
  return out;
}

/// Every factorisation of `extent` into `parts` inner lengths (outer to
/// inner), innermost at most `max_innermost`. Memoised: the same extents
/// come back for every state of a task.
const std::vector<std::vector<int64_t>>& factorisations(int64_t extent, int parts,
                                                        int64_t max_innermost) {
  static std::mutex mutex;
  static std::map<std::tuple<int64_t, int, int64_t>, std::vector<std::vector<int64_t>>> memo;
  std::lock_guard<std::mutex> lock(mutex);
  auto key = std::make_tuple(extent, parts, max_innermost);
  auto it = memo.find(key);
  if (it != memo.end()) return it->second;
  std::vector<std::vector<int64_t>> out;
  std::vector<int64_t> current(static_cast<size_t>(parts), 1);
  // Fill from the innermost part outwards, each dividing what is left.
  auto fill = [&](auto&& self, int k, int64_t left) -> void {
    if (k < 0) {
      out.push_back(current);
      return;
    }
    for (int64_t d : divisors(left)) {
      if (k == parts - 1 && d > max_innermost) break;
      current[static_cast<size_t>(k)] = d;
      self(self, k - 1, left / d);
      // Keep the list of a huge extent bounded; the small factors come first.
      if (out.size() >= 20000) return;
    }
  };
  fill(fill, parts - 1, std::max<int64_t>(extent, 1));
  return memo.emplace(key, std::move(out)).first->second;
}

/// The extent of the root axis loop `id` of `st` comes from.
int64_t root_extent(const Stage& st, int id) {
  for (bool changed = true; changed;) {
    changed = false;
    for (const auto& rel : st.relations) {
      if (std::count(rel.outputs.begin(), rel.outputs.end(), id)) {
        id = rel.inputs.front();
        changed = true;
        break;
      }
    }
  }
  return st.iters[id].extent;
}

bool has_reduce_loop(const Stage& st) {
  for (int id : st.leaves) {
    if (st.iters[id].kind == ir::IterKind::kReduce) return true;
  }
  return false;
}

bool has_attached_at(const LoopState& state, int stage, int id) {
  for (int a : state.attached_to(stage)) {
    if (state.stage(a).attach_iter == id) return true;
  }
  return false;
}

bool tiles_fit(const LoopState& state, const ir::HardwareParamsNode& machine) {
  for (int s = 0; s < state.num_stages(); ++s) {
    const Stage& st = state.stage(s);
    if (st.is_placeholder() || !st.is_transformed() || !has_reduce_loop(st)) continue;
    RegisterTile tile = register_tile(state, s, machine);
    if (tile.vectors > ir::vector_registers(machine) * 3 / 4 || !tile.whole_vectors) return false;
  }
  return true;
}

/// An untiled stage's innermost loop too long to vectorize whole (a padding
/// stage's 64 channels, a row of 3072) is split, and its inner part of a
/// whole number of vectors, at most `limit` lanes, vectorized. Left as it
/// is, GCC sees a scalar loop, which an unroll pragma then replicates.
void split_and_vectorize_innermost(LoopState& state, int s, int64_t lanes, int64_t limit,
                                   std::mt19937_64& rng) {
  const Stage& st = state.stage(s);
  const int n = static_cast<int>(st.leaves.size());
  const auto& it = st.iters[st.leaves.back()];
  if (it.kind != ir::IterKind::kSpatial || it.annotation != IterAnnotation::kNone ||
      has_attached_at(state, s, st.leaves.back()) || it.extent <= limit) {
    return;
  }
  std::vector<int64_t> fits;  // powers of two of vectors: what the vectorize pass takes
  for (int64_t f = lanes; f <= limit; f *= 2) {
    if (it.extent % f == 0) fits.push_back(f);
  }
  if (fits.empty()) return;
  int64_t f = fits[static_cast<size_t>(pick(rng, fits.size()))];
  if (try_apply(state, schedule::split(s, n - 1, {f}))) {
    try_apply(state, schedule::annotate(s, n, IterAnnotation::kVectorize));
  }
}

}  // namespace

std::vector<int64_t> random_factors(int64_t extent, int parts, int64_t max_innermost,
                                    std::mt19937_64& rng, int64_t innermost_multiple) {
  if (parts <= 0) return {};
  const auto& all = factorisations(extent, parts, std::max<int64_t>(max_innermost, 1));
  if (all.empty()) return std::vector<int64_t>(static_cast<size_t>(parts), 1);
  if (innermost_multiple > 1) {
    std::vector<size_t> whole;
    for (size_t i = 0; i < all.size(); ++i) {
      // A power of two of vectors: the vectorize pass makes vector code of
      // power-of-two lane counts only (3 vectors would stay a scalar loop).
      int64_t n = all[i].back() / innermost_multiple;
      if (all[i].back() % innermost_multiple == 0 && (n & (n - 1)) == 0) whole.push_back(i);
    }
    if (!whole.empty()) return all[whole[static_cast<size_t>(pick(rng, whole.size()))]];
  }
  return all[static_cast<size_t>(pick(rng, all.size()))];
}

std::vector<int64_t> random_ragged_factors(int64_t extent, int parts, int64_t max_innermost,
                                           std::mt19937_64& rng, int64_t innermost_multiple) {
  if (parts <= 0) return {};
  const int64_t multiple = std::max<int64_t>(innermost_multiple, 1);
  const int64_t most = std::max<int64_t>(std::min(max_innermost, extent), 1);
  // Rows any number; vectors a power of two of them, which the vectorize
  // pass turns into vector code.
  std::vector<int64_t> choices;
  for (int64_t v = multiple; v <= most; v = multiple > 1 ? 2 * v : v + 1) choices.push_back(v);
  if (choices.empty()) choices.push_back(multiple);
  int64_t innermost = choices[static_cast<size_t>(pick(rng, choices.size()))];
  const int64_t tiles = (extent + innermost - 1) / innermost;
  std::vector<int64_t> out = random_factors(tiles, parts - 1, tiles, rng);
  out.push_back(innermost);
  return out;
}

RegisterTile register_tile(const LoopState& state, int stage,
                           const ir::HardwareParamsNode& machine) {
  const Stage& st = state.stage(stage);
  RegisterTile tile;
  size_t first = 0;
  for (size_t k = 0; k < st.leaves.size(); ++k) {
    if (st.iters[st.leaves[k]].kind == ir::IterKind::kReduce) first = k + 1;
  }
  if (first >= st.leaves.size()) {
    tile.vectors = 1;
    return tile;
  }
  const int64_t lanes = ir::vector_lanes(machine, st.tensor.dtype());
  int64_t rows = 1;
  for (size_t k = first; k + 1 < st.leaves.size(); ++k) rows *= st.iters[st.leaves[k]].extent;
  int innermost = st.leaves.back();
  int64_t e = st.iters[innermost].extent;
  tile.vectors = rows * ((e + lanes - 1) / lanes);
  // A whole number of vectors, unless the axis itself cannot give one.
  tile.whole_vectors = e % lanes == 0 || root_extent(st, innermost) % lanes != 0;
  return tile;
}

int vector_axis_iter(const Stage& stage) {
  auto op = stage.tensor.compute_op();
  if (!op || op->body->kind() != ir::ExprKind::kReduce || op->axis.empty()) return -1;
  return stage.innermost_spatial_root();
}

int64_t innermost_bound(ir::IterKind kind, const AnnotateOptions& options) {
  return kind == ir::IterKind::kReduce ? options.max_innermost_reduction_split
                                       : options.max_innermost_split;
}

LoopState replay_with_tile_sizes(
    const schedule::State& sketch, const schedule::ComputeDAG& dag,
    const std::function<std::vector<int64_t>(const Stage&, const schedule::SplitStepNode&, int)>&
        lengths_of) {
  LoopState state(dag);
  for (const Step& step : sketch.steps()) {
    auto split = step.as<schedule::SplitStepNode>();
    if (!split) {
      state.apply(step);
      continue;
    }
    const Stage& st = state.stage(split->stage);
    std::vector<int64_t> lengths =
        lengths_of(st, *split, st.leaves.at(static_cast<size_t>(split->iter)));
    state.apply(schedule::split(split->stage, split->iter, lengths, split->inner_to_outer));
  }
  return state;
}

namespace {

/// The names of the stages of `sketch` that read inputs, all of them packed.
std::set<std::string> stages_reading_only_packed_inputs(const schedule::State& sketch,
                                                        const schedule::ComputeDAG& dag) {
  LoopState state = schedule::replay(dag, sketch);
  std::set<std::string> out;
  for (int s = 0; s < state.num_stages(); ++s) {
    if (state.stage(s).is_placeholder()) continue;
    bool any = false, all = true;
    for (int p = 0; p < state.num_stages(); ++p) {
      const Stage& input = state.stage(p);
      if (!input.is_placeholder()) continue;
      std::vector<int> readers = state.consumers(p);
      if (std::find(readers.begin(), readers.end(), s) == readers.end()) continue;
      any = true;
      all = all && input.layout_rewrite;
    }
    if (any && all) out.insert(state.stage(s).name());
  }
  return out;
}

}  // namespace

schedule::State fill_tile_sizes(const schedule::State& sketch, const schedule::ComputeDAG& dag,
                                const ir::HardwareParamsNode& machine,
                                const AnnotateOptions& options, std::mt19937_64& rng) {
  // A stage whose inputs are all packed may take ragged tiles: the packed
  // layout pads them, and lowering computes the padding unguarded. So its
  // register tile may have 6 rows over 1024, the size 16 registers want.
  const std::set<std::string> padded = stages_reading_only_packed_inputs(sketch, dag);
  // A reduction's register tile is vectorized over the axis of its
  // innermost spatial loop (vector_axis_iter): that axis's innermost tile is
  // a whole number of vectors when the extent has such a factor. A sketch's
  // reorder may choose that loop after the splits, so a replay assumes the
  // order as it is at each split, and one whose final order says otherwise
  // is done again, knowing it (the order does not depend on tile sizes).
  std::map<std::string, int> vector_iters;
  auto replay_once = [&] {
    std::map<std::string, int> assumed;
    LoopState state = replay_with_tile_sizes(
        sketch, dag, [&](const Stage& st, const schedule::SplitStepNode& split, int id) {
          auto op = st.tensor.compute_op();
          const bool reduction = op && op->body->kind() == ir::ExprKind::kReduce;
          auto known = vector_iters.find(st.name());
          const int vector_iter =
              known != vector_iters.end() ? known->second : vector_axis_iter(st);
          assumed[st.name()] = vector_iter;
          const int64_t multiple =
              vector_iter == id ? ir::vector_lanes(machine, st.tensor.dtype()) : 1;
          const int parts = static_cast<int>(split.lengths.size());
          if (reduction && split.inner_to_outer && st.iters[id].kind == ir::IterKind::kSpatial &&
              padded.count(st.name()) && chance(rng, options.ragged_tile_prob)) {
            int64_t most =
                multiple > 1 ? multiple * options.max_vectors_per_loop
                             : std::min(options.max_innermost_split, ir::vector_registers(machine));
            return random_ragged_factors(st.iters[id].extent, parts, most, rng, multiple);
          }
          return random_factors(st.iters[id].extent, parts,
                                innermost_bound(st.iters[id].kind, options), rng, multiple);
        });
    bool stale = false;
    for (const auto& [name, iter] : assumed) {
      const int actual = vector_axis_iter(state.stage(state.stage_named(name)));
      stale |= actual != iter;
      vector_iters[name] = actual;
    }
    return std::make_pair(std::move(state), stale);
  };
  schedule::State last;
  for (int attempt = 0; attempt <= options.tile_retries; ++attempt) {
    auto [state, stale] = replay_once();
    if (stale) state = replay_once().first;
    last = schedule::State::make(state.history());
    if (tiles_fit(state, machine)) break;
  }
  return last;
}

namespace {

/// The tensors through which other stages read stage `producer`: its own,
/// and those of the inlined stages that read it, directly or not.
void read_through(const LoopState& state, int producer, std::set<const Object*>* out) {
  out->insert(state.stage(producer).tensor.get());
  for (int c : state.consumers(producer)) {
    if (state.stage(c).location == ComputeLocation::kInline) read_through(state, c, out);
  }
}

bool is_reduction(const Stage& st) {
  auto op = st.tensor.compute_op();
  return op && op->body->kind() == ir::ExprKind::kReduce;
}

}  // namespace

std::vector<int> compute_at_loops_without_recomputation(const LoopState& state, int producer,
                                                        int consumer) {
  const Stage& c = state.stage(consumer);
  auto op = c.tensor.compute_op();
  if (!op) return {};
  // The consumer's axis variables, in the order of its root iterators.
  std::vector<const ir::VarNode*> axis_vars;
  for (const auto& iv : op->axis) axis_vars.push_back(iv->var.get());
  if (op->body->kind() == ir::ExprKind::kReduce) {
    for (const auto& iv : static_cast<const ir::ReduceNode&>(*op->body).axis) {
      axis_vars.push_back(iv->var.get());
    }
  }
  std::set<const Object*> tensors;
  read_through(state, producer, &tensors);
  std::set<const ir::VarNode*> read_vars;
  ir::visit_pre_order(op->body, [&](const ir::Expr& e) {
    if (e->kind() != ir::ExprKind::kProducerLoad) return;
    const auto& load = static_cast<const ir::ProducerLoadNode&>(*e);
    if (!tensors.count(load.producer.get())) return;
    for (const auto& index : load.indices) {
      ir::visit_pre_order(index, [&](const ir::Expr& x) {
        if (x->kind() == ir::ExprKind::kVar)
          read_vars.insert(static_cast<const ir::VarNode*>(x.get()));
      });
    }
  });
  // Loops that change the part read: those derived from an axis the reads use.
  std::set<int> varying;
  for (size_t i = 0; i < c.root.size() && i < axis_vars.size(); ++i) {
    if (read_vars.count(axis_vars[i])) varying.insert(c.root[i]);
  }
  for (const auto& rel : c.relations) {
    bool any = false;
    for (int in : rel.inputs) any |= varying.count(in) > 0;
    if (any) varying.insert(rel.outputs.begin(), rel.outputs.end());
  }
  std::vector<int> out;
  for (size_t k = 0; k < c.leaves.size(); ++k) {
    int id = c.leaves[k];
    if (!varying.count(id) && c.iters[id].extent > 1) break;
    out.push_back(static_cast<int>(k));
  }
  return out;
}

std::vector<int> compute_at_loops(const LoopState& state, int producer, int consumer) {
  if (is_reduction(state.stage(producer))) {
    return compute_at_loops_without_recomputation(state, producer, consumer);
  }
  std::vector<int> all(state.stage(consumer).leaves.size());
  for (size_t k = 0; k < all.size(); ++k) all[k] = static_cast<int>(k);
  return all;
}

void change_compute_locations(LoopState& state, std::mt19937_64& rng) {
  for (int s = state.num_stages() - 1; s >= 0; --s) {
    const Stage& st = state.stage(s);
    // A stage stored in an order of its own (a padded input stored channels
    // last) is a transposing copy: made once, at the root, not again for
    // each tile that reads it.
    if (st.is_placeholder() || st.is_output || st.is_transformed() ||
        st.location != ComputeLocation::kRoot || !st.storage_order.empty()) {
      continue;
    }
    std::vector<int> consumers = state.effective_consumers(s);
    if (consumers.size() != 1) continue;
    // Choices: root, inline, or a loop of the consumer.
    std::vector<Step> choices = {Step()};
    if (!is_reduction(st)) choices.push_back(schedule::compute_inline(s));
    for (int k : compute_at_loops(state, s, consumers[0])) {
      choices.push_back(schedule::compute_at(s, consumers[0], k));
    }
    const Step& choice = choices[static_cast<size_t>(pick(rng, choices.size()))];
    if (choice) try_apply(state, choice);
  }
}

void vectorize_innermost(LoopState& state, const ir::HardwareParamsNode& machine,
                         const AnnotateOptions& options, std::mt19937_64& rng) {
  for (int s = 0; s < state.num_stages(); ++s) {
    const Stage& st = state.stage(s);
    if (st.is_placeholder() || st.location == ComputeLocation::kInline || st.leaves.empty()) {
      continue;
    }
    if (chance(rng, 0.1)) continue;  // sometimes leave it to the compiler
    const int64_t limit =
        ir::vector_lanes(machine, st.tensor.dtype()) * options.max_vectors_per_loop;
    // The innermost spatial, unannotated loops; a tiled stage's last one only.
    int n = static_cast<int>(st.leaves.size());
    int can = 0;
    int64_t product = 1;
    for (int k = n - 1; k >= 0; --k) {
      const auto& it = st.iters[st.leaves[k]];
      if (it.kind != ir::IterKind::kSpatial || it.annotation != IterAnnotation::kNone) break;
      if (has_attached_at(state, s, st.leaves[k])) break;
      if (product * it.extent > limit) break;
      product *= it.extent;
      ++can;
      if (st.is_transformed()) break;
    }
    if (can == 0 && !st.is_transformed()) {
      split_and_vectorize_innermost(state, s, ir::vector_lanes(machine, st.tensor.dtype()), limit,
                                    rng);
      continue;
    }
    if (can == 0 || product <= 1) continue;
    int fuse = 1 + pick(rng, static_cast<size_t>(can));
    int pos = n - fuse;
    if (fuse > 1) {
      std::vector<int> iters;
      for (int k = pos; k < n; ++k) iters.push_back(k);
      if (!try_apply(state, schedule::fuse(s, iters))) continue;
    }
    try_apply(state, schedule::annotate(s, pos, IterAnnotation::kVectorize));
  }
}

/// An untiled stage's outermost loop is the first axis of its output, and
/// its order may be the worst one to split between threads: a Winograd input
/// transform's [alpha, alpha, tiles, C] has the 6 rows of the transform
/// outside the tiles, so every thread reads the whole input once per row it
/// takes. Moving a tile axis outermost gives each thread its own part of the
/// input, read once, which measured faster on two threads. So some states
/// move a random inner spatial loop, long enough
/// for every core, outermost; parallelize_outer then splits it.
void parallelize_inner_loop(LoopState& state, const ir::HardwareParamsNode& machine,
                            const AnnotateOptions& options, std::mt19937_64& rng) {
  if (machine.num_cores <= 1) return;
  for (int s = 0; s < state.num_stages(); ++s) {
    const Stage& st = state.stage(s);
    if (st.is_placeholder() || st.is_transformed() || st.location != ComputeLocation::kRoot) {
      continue;
    }
    // The spatial loops before the first reduction, less the innermost loop
    // of the stage, which vectorize_innermost wants.
    std::vector<int> candidates;
    int n = static_cast<int>(st.leaves.size());
    for (int k = 1; k < n - 1; ++k) {
      const auto& it = st.iters[st.leaves[k]];
      if (it.kind != ir::IterKind::kSpatial) break;
      if (it.extent >= machine.num_cores) candidates.push_back(k);
    }
    if (candidates.empty() || !chance(rng, options.parallel_reorder_prob)) continue;
    int k = candidates[static_cast<size_t>(pick(rng, candidates.size()))];
    std::vector<int> order = {k};  // positions, as ReorderStep takes them
    for (int j = 0; j < n; ++j) {
      if (j != k) order.push_back(j);
    }
    try_apply(state, schedule::reorder(s, order));
  }
}

void parallelize_outer(LoopState& state, const ir::HardwareParamsNode& machine,
                       std::mt19937_64& rng) {
  if (machine.num_cores <= 1 || state_iterations(state) < kMinParallelIterations) return;
  for (int s = 0; s < state.num_stages(); ++s) {
    const Stage& st = state.stage(s);
    if (st.is_placeholder() || st.location != ComputeLocation::kRoot || st.leaves.empty()) {
      continue;
    }
    // The outer spatial loops that may be fused: unannotated, and at most
    // the innermost of them with a stage computed at it.
    std::vector<int64_t> extents;
    for (int id : st.leaves) {
      const auto& it = st.iters[id];
      if (it.kind != ir::IterKind::kSpatial || it.annotation != IterAnnotation::kNone) break;
      extents.push_back(it.extent);
      if (has_attached_at(state, s, id)) break;
    }
    if (extents.empty()) continue;
    // At least enough loops to give every core work, at most enough for 16
    // chunks per core (Ansor's bound), or all there are.
    int least = 0, most = 0;
    int64_t product = 1;
    for (size_t k = 0; k < extents.size(); ++k) {
      product *= extents[k];
      if (least == 0 && product >= machine.num_cores) least = static_cast<int>(k) + 1;
      most = static_cast<int>(k) + 1;
      if (product >= 16 * machine.num_cores) break;
    }
    if (least == 0) least = most;
    if (product <= 1) continue;
    int count = least + pick(rng, static_cast<size_t>(most - least + 1));
    if (count > 1) {
      std::vector<int> iters;
      for (int k = 0; k < count; ++k) iters.push_back(k);
      if (!try_apply(state, schedule::fuse(s, iters))) continue;
    }
    try_apply(state, schedule::annotate(s, 0, IterAnnotation::kParallel));
  }
}

void add_auto_unroll(LoopState& state, const AnnotateOptions& options, std::mt19937_64& rng) {
  for (int s = 0; s < state.num_stages(); ++s) {
    const Stage& st = state.stage(s);
    if (st.is_placeholder() || st.location == ComputeLocation::kInline || st.leaves.empty() ||
        st.tensor.compute_op()->body->kind() != ir::ExprKind::kReduce) {
      continue;
    }
    int64_t step =
        options.auto_unroll_steps[static_cast<size_t>(pick(rng, options.auto_unroll_steps.size()))];
    try_apply(state, schedule::pragma(s, 0, "auto_unroll_max_step=" + std::to_string(step)));
  }
}

schedule::State sample_state(const Sketch& sketch, const schedule::ComputeDAG& dag,
                             const ir::HardwareParamsNode& machine, const AnnotateOptions& options,
                             std::mt19937_64& rng) {
  schedule::State filled = fill_tile_sizes(sketch.state, dag, machine, options, rng);
  LoopState state = schedule::replay(dag, filled);
  parallelize_inner_loop(state, machine, options, rng);
  change_compute_locations(state, rng);
  vectorize_innermost(state, machine, options, rng);
  parallelize_outer(state, machine, rng);
  add_auto_unroll(state, options, rng);
  return schedule::State::make(state.history());
}

}  // namespace tensortune::search
