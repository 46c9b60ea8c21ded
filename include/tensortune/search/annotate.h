/// \file
/// From a sketch to complete schedules: the initial-population rules of
/// Ansor (OSDI '20 section 4.2), each a function that appends to or fills in
/// a state, and sample_state() that runs them in order. Everything that
/// depends on the machine comes from the task's hardware parameters: vector
/// lanes (vector bytes over the element size), the number of vector
/// registers a register tile may take, and the cores to parallelise for.
#pragma once

#include <cstdint>
#include <functional>
#include <random>
#include <vector>

#include "tensortune/search/sketch.h"

namespace tensortune::search {

/// What annotation may choose from.
/// How sketches are annotated (a reflected node: see search::TuneOptions).
struct AnnotateOptions : Object {
  /// auto_unroll_max_step values on the stages with a reduction.
  std::vector<int64_t> auto_unroll_steps = {0, 16, 64, 512};
  /// Largest innermost tile length of a spatial axis.
  int64_t max_innermost_split = 64;
  /// Largest innermost tile length of a reduction axis. A register tile
  /// stays in registers however long its reduction runs, but a longer bound
  /// found no faster kernels (docs/search.md), so it stays the spatial one.
  int64_t max_innermost_reduction_split = 64;
  /// Largest extent of a vectorized loop, in vectors of the target's width.
  int64_t max_vectors_per_loop = 4;
  /// The chance that a spatial axis of a stage whose inputs are all packed
  /// gets a ragged tiling (random_ragged_factors).
  double ragged_tile_prob = 0.5;
  /// How often a tile-size draw whose register tile does not fit the
  /// register file, or whose vector axis is not a multiple of the lanes, is
  /// drawn again before it is kept anyway.
  int tile_retries = 8;
  /// The chance that an untiled stage's parallel loop is one of its inner
  /// spatial loops, moved outermost (parallelize_inner_loop).
  double parallel_reorder_prob = 0.5;
  TT_NODE(AnnotateOptions, "search.AnnotateOptions")
  static void declare(FieldList<AnnotateOptions>& f);
};

/// The largest innermost tile length `options` allow on an axis of `kind`.
int64_t innermost_bound(ir::IterKind kind, const AnnotateOptions& options);

/// The root iterator a reduction's register tile is vectorized over: the
/// axis of its innermost spatial loop (the last axis, unless a sketch put
/// another innermost); -1 for other stages.
int vector_axis_iter(const schedule::Stage& stage);

/// Draws a random factorisation of `extent` into `parts` inner lengths
/// (outer to inner; the outermost part is implied), each dividing what is
/// left, the innermost at most `max_innermost`; uniform over all such
/// factorisations, or over those whose innermost length is
/// `innermost_multiple` times a power of two when there are any.
std::vector<int64_t> random_factors(int64_t extent, int parts, int64_t max_innermost,
                                    std::mt19937_64& rng, int64_t innermost_multiple = 1);

/// Draws a ragged tiling of `extent` into `parts` inner lengths (outer to
/// inner): the innermost up to `max_innermost` and the extent, any length
/// (or, with `innermost_multiple` > 1, that multiple times a power of two),
/// whether or not it divides the extent; the others a random_factors draw
/// over the ceil(extent / innermost) tiles that leaves. The tiles then cover
/// at most innermost - 1 points past the extent.
std::vector<int64_t> random_ragged_factors(int64_t extent, int parts, int64_t max_innermost,
                                           std::mt19937_64& rng, int64_t innermost_multiple = 1);

/// Replays `sketch` on `dag` with each SplitStep's lengths replaced by what
/// `lengths_of` gives for it: the stage and the id of the loop it splits,
/// as they are when the split applies.
schedule::LoopState replay_with_tile_sizes(
    const schedule::State& sketch, const schedule::ComputeDAG& dag,
    const std::function<std::vector<int64_t>(const schedule::Stage&, const schedule::SplitStepNode&,
                                             int loop_id)>& lengths_of);

/// Fills every SplitStep of `sketch` with random factors of its loop's
/// extent, or, for the spatial axes of a reduction whose inputs the sketch
/// packs (layout_rewrite), sometimes a ragged tiling. A tiled stage's
/// register tile (its loops after the last reduction loop) is drawn again,
/// up to tile_retries times, when it needs more vector registers than the
/// machine has or its innermost loop is not a whole number of vectors.
schedule::State fill_tile_sizes(const schedule::State& sketch, const schedule::ComputeDAG& dag,
                                const ir::HardwareParamsNode& machine,
                                const AnnotateOptions& options, std::mt19937_64& rng);

/// The loops of stage `consumer` (positions in its loop order) at which stage
/// `producer` can be computed without computing any of it twice: every loop
/// around the place with more than one iteration changes which part of the
/// producer the consumer reads. (Computed inside a row's column loop, a row
/// maximum would be computed again, whole, for every column.)
std::vector<int> compute_at_loops_without_recomputation(const schedule::LoopState& state,
                                                        int producer, int consumer);

/// The loops of stage `consumer` at which the search may compute stage
/// `producer`: every one, or for a reduction only those of
/// compute_at_loops_without_recomputation (a reduction computed again is its
/// whole work again; a tile of cheap padding computed again can pay for
/// itself by staying in cache).
std::vector<int> compute_at_loops(const schedule::LoopState& state, int producer, int consumer);

/// Places each untiled, non-inlined stage with one consumer at random: at
/// the root, inlined (when it may be), or at one of compute_at_loops.
void change_compute_locations(schedule::LoopState& state, std::mt19937_64& rng);

/// Vectorizes each stage's innermost spatial loop (fusing a random number
/// of innermost spatial loops first for untiled stages), within
/// max_vectors_per_loop vectors; an untiled stage's innermost loop longer
/// than that is split first, its inner part a whole number of vectors.
void vectorize_innermost(schedule::LoopState& state, const ir::HardwareParamsNode& machine,
                         const AnnotateOptions& options, std::mt19937_64& rng);

/// With options.parallel_reorder_prob, moves an inner spatial loop of each
/// untiled root stage (one long enough for every core) outermost, where
/// parallelize_outer splits it between the threads.
void parallelize_inner_loop(schedule::LoopState& state, const ir::HardwareParamsNode& machine,
                            const AnnotateOptions& options, std::mt19937_64& rng);

/// Fuses a random number of each root stage's outer spatial loops (at least
/// enough to give every core work, where there are that many) and
/// parallelises the fused loop. Nothing on a one-core machine.
void parallelize_outer(schedule::LoopState& state, const ir::HardwareParamsNode& machine,
                       std::mt19937_64& rng);

/// Puts a random auto_unroll_max_step pragma on every stage with a reduction.
void add_auto_unroll(schedule::LoopState& state, const AnnotateOptions& options,
                     std::mt19937_64& rng);

/// A complete random schedule from `sketch`: the tile sizes filled, then
/// compute locations, vectorization, parallelisation and unrolling. Every
/// state it returns replays on `dag`.
schedule::State sample_state(const Sketch& sketch, const schedule::ComputeDAG& dag,
                             const ir::HardwareParamsNode& machine, const AnnotateOptions& options,
                             std::mt19937_64& rng);

/// How many vector registers the register tile of `stage` takes in `state`
/// (its loops after the last reduction loop), and whether its innermost
/// loop is a whole number of vectors; for tests and the tile-size rule.
struct RegisterTile {
  int64_t vectors = 0;
  bool whole_vectors = true;
};
RegisterTile register_tile(const schedule::LoopState& state, int stage,
                           const ir::HardwareParamsNode& machine);

}  // namespace tensortune::search
