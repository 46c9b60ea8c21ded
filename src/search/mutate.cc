#include "tensortune/search/mutate.h"

#include <algorithm>

#include "tensortune/object/structural.h"
#include "tensortune/schedule/steps.h"
#include "tensortune/search/annotate.h"

namespace tensortune::search {

using schedule::LoopState;
using schedule::State;
using schedule::Step;

namespace {

int pick(std::mt19937_64& rng, size_t n) {
  return n <= 1 ? 0 : std::uniform_int_distribution<int>(0, static_cast<int>(n) - 1)(rng);
}

/// `steps` as a state, if it replays on `dag`.
std::optional<State> if_valid(const schedule::ComputeDAG& dag, std::vector<Step> steps) {
  State s = State::make(std::move(steps));
  try {
    schedule::replay(dag, s);
  } catch (const UserError& e) {
    return std::nullopt;
  }
  return s;
}

/// The loops after the first `n` steps.
LoopState replay_prefix(const schedule::ComputeDAG& dag, const std::vector<Step>& steps, size_t n) {
  LoopState state(dag);
  for (size_t i = 0; i < n; ++i) state.apply(steps[i]);
  return state;
}

template <class N>
std::vector<size_t> steps_of_kind(const State& state) {
  std::vector<size_t> out;
  for (size_t i = 0; i < state.steps().size(); ++i) {
    if (state.steps()[i].as<N>()) out.push_back(i);
  }
  return out;
}

std::vector<int64_t> divisors_above_one(int64_t n) {
  std::vector<int64_t> out;
  for (int64_t d = 2; d <= n; ++d) {
    if (n % d == 0) out.push_back(d);
  }
  return out;
}

/// `n` without its factors of two.
int64_t odd_part(int64_t n) { return n / (n & -n); }

}  // namespace

std::optional<State> mutate_tile_size(const schedule::ComputeDAG& dag, const State& state,
                                      const AnnotateOptions& options, std::mt19937_64& rng) {
  std::vector<size_t> splits = steps_of_kind<schedule::SplitStepNode>(state);
  if (splits.empty()) return std::nullopt;
  size_t at = splits[static_cast<size_t>(pick(rng, splits.size()))];
  auto split = state.steps()[at].as<schedule::SplitStepNode>();
  LoopState before = replay_prefix(dag, state.steps(), at);
  const auto& st = before.stage(split->stage);
  const auto& iter = st.iters[st.leaves.at(static_cast<size_t>(split->iter))];
  // Which axis the tile is vectorized over is up to the loop order, which
  // a sketch's reorder sets after its splits: so in the whole state (asked
  // only where it matters).
  auto is_vector_axis = [&] {
    const LoopState after = schedule::replay(dag, state);
    return vector_axis_iter(after.stage(after.stage_named(st.name()))) ==
           st.leaves.at(static_cast<size_t>(split->iter));
  };
  int64_t extent = iter.extent;
  const int64_t max_innermost = innermost_bound(iter.kind, options);
  int64_t product = 1;
  for (int64_t l : split->lengths) product *= l;
  if (product <= 0) return std::nullopt;
  std::vector<int64_t> lengths = split->lengths;
  auto with_lengths = [&](std::vector<int64_t> l) {
    std::vector<Step> steps = state.steps();
    steps[at] = schedule::split(split->stage, split->iter, std::move(l), split->inner_to_outer);
    return if_valid(dag, std::move(steps));
  };
  // A ragged tiling (annotate.h: random_ragged_factors) has a free innermost
  // length; the others factor the tiles it leaves.
  std::optional<int64_t> ragged;
  if (extent % product != 0) {
    if (!split->inner_to_outer) return std::nullopt;
    ragged = lengths.back();
    // With one length there is nothing else to move: the length moves.
    if (lengths.size() == 1 || pick(rng, 2) == 0) {
      // The innermost length moves by its largest power-of-two factor (a
      // multiple of the vector lanes stays one); the others are drawn anew.
      int64_t step = *ragged & -*ragged;
      int64_t next = pick(rng, 2) == 0 ? *ragged + step : *ragged - step;
      if (next < 1 || next > max_innermost || next > extent) return std::nullopt;
      int64_t tiles = (extent + next - 1) / next;
      std::vector<int64_t> redrawn =
          random_factors(tiles, static_cast<int>(lengths.size()) - 1, tiles, rng);
      redrawn.push_back(next);
      return with_lengths(std::move(redrawn));
    }
    extent = (extent + *ragged - 1) / *ragged;
    product /= *ragged;
    lengths.pop_back();
    if (extent % product != 0) return std::nullopt;
  }
  // All parts, the implied one included: outermost first for inner_to_outer.
  std::vector<int64_t> parts = lengths;
  if (split->inner_to_outer) {
    parts.insert(parts.begin(), extent / product);
  } else {
    parts.push_back(extent / product);
  }
  std::vector<size_t> sources;
  for (size_t k = 0; k < parts.size(); ++k) {
    if (parts[k] > 1) sources.push_back(k);
  }
  if (sources.empty() || parts.size() < 2) return std::nullopt;
  size_t src = sources[static_cast<size_t>(pick(rng, sources.size()))];
  std::vector<int64_t> factors = divisors_above_one(parts[src]);
  int64_t d = factors[static_cast<size_t>(pick(rng, factors.size()))];
  size_t dst = static_cast<size_t>(pick(rng, parts.size() - 1));
  if (dst >= src) ++dst;
  parts[src] /= d;
  parts[dst] *= d;
  lengths = parts;
  if (split->inner_to_outer) {
    lengths.erase(lengths.begin());
  } else {
    lengths.pop_back();
  }
  if (ragged) {
    lengths.push_back(*ragged);
  } else if (split->inner_to_outer && lengths.back() > max_innermost) {
    return std::nullopt;
  } else if (split->inner_to_outer && odd_part(lengths.back()) != odd_part(split->lengths.back()) &&
             is_vector_axis()) {
    // The vector tile gains or loses factors of two only: a power of two of
    // vectors (annotate.h: random_factors) stays one, which the vectorize
    // pass needs; 1 vector becoming 3 would be a scalar loop.
    return std::nullopt;
  }
  return with_lengths(std::move(lengths));
}

std::optional<State> mutate_auto_unroll(const schedule::ComputeDAG& dag, const State& state,
                                        const std::vector<int64_t>& values, std::mt19937_64& rng) {
  std::vector<size_t> pragmas = steps_of_kind<schedule::PragmaStepNode>(state);
  if (pragmas.empty() || values.size() < 2) return std::nullopt;
  size_t at = pragmas[static_cast<size_t>(pick(rng, pragmas.size()))];
  auto p = state.steps()[at].as<schedule::PragmaStepNode>();
  std::string text;
  do {
    text = "auto_unroll_max_step=" +
           std::to_string(values[static_cast<size_t>(pick(rng, values.size()))]);
  } while (text == p->pragma);
  std::vector<Step> steps = state.steps();
  steps[at] = schedule::pragma(p->stage, p->iter, text);
  return if_valid(dag, std::move(steps));
}

std::optional<State> mutate_parallel(const schedule::ComputeDAG& dag, const State& state,
                                     std::mt19937_64& rng) {
  std::vector<size_t> parallel;
  for (size_t i = 0; i < state.steps().size(); ++i) {
    auto a = state.steps()[i].as<schedule::AnnotationStepNode>();
    if (a && a->annotation == schedule::IterAnnotation::kParallel && a->iter == 0) {
      parallel.push_back(i);
    }
  }
  if (parallel.empty()) return std::nullopt;
  size_t at = parallel[static_cast<size_t>(pick(rng, parallel.size()))];
  int stage = state.steps()[at]->stage;
  // The fuse right before the annotation, if there is one, says how many
  // loops are parallel now.
  std::vector<Step> steps = state.steps();
  int count = 1;
  bool fused = false;
  if (at > 0) {
    auto f = steps[at - 1].as<schedule::FuseStepNode>();
    if (f && f->stage == stage && !f->iters.empty() && f->iters.front() == 0) {
      count = static_cast<int>(f->iters.size());
      fused = true;
    }
  }
  int next = count + (pick(rng, 2) == 0 ? -1 : 1);
  if (next < 1) next = count + 1;
  std::vector<int> iters;
  for (int k = 0; k < next; ++k) iters.push_back(k);
  if (fused) steps.erase(steps.begin() + static_cast<long>(at - 1));
  size_t annotate_at = fused ? at - 1 : at;
  if (next > 1)
    steps.insert(steps.begin() + static_cast<long>(annotate_at), schedule::fuse(stage, iters));
  return if_valid(dag, std::move(steps));
}

std::optional<State> mutate_compute_location(const schedule::ComputeDAG& dag, const State& state,
                                             std::mt19937_64& rng) {
  std::vector<size_t> candidates;
  LoopState final_state = schedule::replay(dag, state);
  for (size_t i = 0; i < state.steps().size(); ++i) {
    auto ca = state.steps()[i].as<schedule::ComputeAtStepNode>();
    if (ca && !final_state.stage(ca->stage).is_transformed()) candidates.push_back(i);
  }
  if (candidates.empty()) return std::nullopt;
  size_t at = candidates[static_cast<size_t>(pick(rng, candidates.size()))];
  auto ca = state.steps()[at].as<schedule::ComputeAtStepNode>();
  LoopState before = replay_prefix(dag, state.steps(), at);
  // Any other loop the sampler could have chosen.
  std::vector<int> loops = compute_at_loops(before, ca->stage, ca->target_stage);
  std::erase(loops, ca->target_iter);
  if (loops.empty()) return std::nullopt;
  int iter = loops[static_cast<size_t>(pick(rng, loops.size()))];
  std::vector<Step> steps = state.steps();
  steps[at] = schedule::compute_at(ca->stage, ca->target_stage, iter);
  return if_valid(dag, std::move(steps));
}

std::optional<State> crossover(const schedule::ComputeDAG& dag, const State& a, const State& b,
                               std::mt19937_64& rng) {
  if (a.steps().size() != b.steps().size()) return std::nullopt;
  std::vector<Step> steps = a.steps();
  bool mixed = false;
  for (size_t i = 0; i < steps.size(); ++i) {
    auto sa = a.steps()[i].as<schedule::SplitStepNode>();
    auto sb = b.steps()[i].as<schedule::SplitStepNode>();
    if (sa && sb) {
      if (sa->stage != sb->stage || sa->iter != sb->iter ||
          sa->lengths.size() != sb->lengths.size() || sa->inner_to_outer != sb->inner_to_outer) {
        return std::nullopt;
      }
      if (pick(rng, 2) == 1) {
        steps[i] = b.steps()[i];
        mixed = true;
      }
    } else if (!structural_equal(a.steps()[i], b.steps()[i])) {
      return std::nullopt;
    }
  }
  if (!mixed) return std::nullopt;
  return if_valid(dag, std::move(steps));
}

}  // namespace tensortune::search
