#include "tensortune/lower/pipeline.h"

#include "tensortune/ir/pass_context.h"
#include "tensortune/lower/passes.h"

namespace tensortune::lower {
namespace {

struct PipelineStep {
  const char* name;
  PrimFunc (*pass)(const PrimFunc&);
  int64_t min_opt_level;  ///< the pass is skipped below this PassContext opt_level
};

// The order matters: loops are partitioned where guards hold on part of
// their range once the conditions the ranges settle are gone (their folded
// divisions and loops of extent 1 leave the guards affine in fewer
// variables), then conditions are removed again (the whole tiles' guards are
// now provably redundant); conditions are removed before vectorizing (a guard the
// loop ranges prove redundant would otherwise block it), vectorizing comes
// before unrolling (an unrolled loop around a vectorized one replicates
// vector code), storage is rewritten once the loops have their final shape,
// and a last simplify folds the indices that vectorizing and unrolling made.
//
// Every pass is an optimisation: the code generator handles loops the passes
// left alone (a vectorized loop becomes `omp simd`, an unrolled one gets an
// unroll pragma). So opt_level 0 runs none of them, 1 the ones that make
// straight-line and vector code, 2 (the default) and 3 all of them.
constexpr PipelineStep kPipeline[] = {
    {"simplify", simplify_pass, 1},
    {"remove_redundant_conditions", remove_redundant_conditions, 1},
    {"partition_loops", partition_loops, 2},
    {"remove_redundant_conditions", remove_redundant_conditions, 2},
    {"vectorize", vectorize_pass, 1},
    {"unroll", unroll_pass, 2},
    {"storage_rewrite", storage_rewrite_pass, 2},
    {"simplify", simplify_pass, 1},
};

}  // namespace

PrimFunc run_pipeline(const PrimFunc& f) {
  PrimFunc out = f;
  for (const auto& step : kPipeline) {
    out = ir::run_pass(step.name, out, step.pass, step.min_opt_level);
  }
  return out;
}

std::vector<std::string> pipeline_pass_names() {
  std::vector<std::string> names;
  for (const auto& step : kPipeline) names.emplace_back(step.name);
  return names;
}

namespace {

struct TargetStep {
  const char* name;
  PrimFunc (*pass)(const PrimFunc&, int64_t vector_bytes);
  int64_t min_opt_level;
};

// Reductions are folded into register-wide vectors first; the vectors that
// are still wider than the registers are then cut to their width (passes.h
// says why). A code generator keeps its lane loops for when either is off.
constexpr TargetStep kTargetPipeline[] = {
    {"vectorize_reductions", vectorize_reductions, 2},
    {"split_wide_vectors", split_wide_vectors, 1},
};

}  // namespace

PrimFunc run_target_pipeline(const PrimFunc& f, int64_t vector_bytes) {
  PrimFunc out = f;
  for (const auto& step : kTargetPipeline) {
    out = ir::run_pass(
        step.name, out, [&](const PrimFunc& g) { return step.pass(g, vector_bytes); },
        step.min_opt_level);
  }
  return out;
}

std::vector<std::string> target_pipeline_pass_names() {
  std::vector<std::string> names;
  for (const auto& step : kTargetPipeline) names.emplace_back(step.name);
  return names;
}

}  // namespace tensortune::lower
