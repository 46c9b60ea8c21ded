#include "tensortune/lower/pipeline.h"

#include "tensortune/ir/pass_context.h"
#include "tensortune/lower/passes.h"

namespace tensortune::lower {
namespace {

struct PipelineStep {
  const char* name;
  PrimFunc (*pass)(const PrimFunc&);
};

// The order matters: conditions are removed before vectorizing (a guard the
// loop ranges prove redundant would otherwise block it), vectorizing comes
// before unrolling (an unrolled loop around a vectorized one replicates
// vector code), storage is rewritten once the loops have their final shape,
// and a last simplify folds the indices that vectorizing and unrolling made.
constexpr PipelineStep kPipeline[] = {
    {"simplify", simplify_pass},
    {"remove_redundant_conditions", remove_redundant_conditions},
    {"vectorize", vectorize_pass},
    {"unroll", unroll_pass},
    {"storage_rewrite", storage_rewrite_pass},
    {"simplify", simplify_pass},
};

}  // namespace

PrimFunc run_pipeline(const PrimFunc& f) {
  PrimFunc out = f;
  for (const auto& step : kPipeline) out = ir::run_pass(step.name, out, step.pass);
  return out;
}

std::vector<std::string> pipeline_pass_names() {
  std::vector<std::string> names;
  for (const auto& step : kPipeline) names.emplace_back(step.name);
  return names;
}

}  // namespace tensortune::lower
