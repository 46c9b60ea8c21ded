/// \file
/// Mutations and crossover of complete schedules, for evolutionary search.
/// Each rewrites the step list of a state and returns the result only if it
/// replays; nullopt when the state offers nothing to mutate that way or the
/// draw was invalid.
#pragma once

#include <optional>
#include <random>

#include "tensortune/schedule/state.h"
#include "tensortune/search/annotate.h"

namespace tensortune::search {

/// Moves a factor of one tile length of a split to another level of the
/// same split (the product, and so the loop extents, stay the same), the
/// innermost length within innermost_bound(). In a ragged tiling the
/// innermost length stays out of it, or half the time moves up or down by
/// its largest power-of-two factor with the other lengths drawn anew.
std::optional<schedule::State> mutate_tile_size(const schedule::ComputeDAG& dag,
                                                const schedule::State& state,
                                                const AnnotateOptions& options,
                                                std::mt19937_64& rng);

/// Draws another value for one auto_unroll_max_step pragma from `steps`.
std::optional<schedule::State> mutate_auto_unroll(const schedule::ComputeDAG& dag,
                                                  const schedule::State& state,
                                                  const std::vector<int64_t>& steps,
                                                  std::mt19937_64& rng);

/// Fuses one more or one fewer outer loop into a parallel loop.
std::optional<schedule::State> mutate_parallel(const schedule::ComputeDAG& dag,
                                               const schedule::State& state, std::mt19937_64& rng);

/// Moves a stage computed at a loop of its consumer (one not tiled: tiled
/// stages keep the place their sketch gave them) to another of that
/// consumer's loops.
std::optional<schedule::State> mutate_compute_location(const schedule::ComputeDAG& dag,
                                                       const schedule::State& state,
                                                       std::mt19937_64& rng);

/// A child of two states of the same structure (the same steps but for
/// their split lengths): each split's lengths from one parent or the other.
/// nullopt for parents of different structure.
std::optional<schedule::State> crossover(const schedule::ComputeDAG& dag, const schedule::State& a,
                                         const schedule::State& b, std::mt19937_64& rng);

}  // namespace tensortune::search
