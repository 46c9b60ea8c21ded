/// \file
/// The lowering pipeline: the passes of passes.h, in order, under the
/// PassContext in force.
#pragma once

#include <string>
#include <vector>

#include "tensortune/lower/stmt.h"

namespace tensortune::lower {

/// Runs the lowering passes on `f` under ir::PassContext::current(), each
/// through ir::run_pass (so disabled and required passes are honoured and
/// instruments see the IR before and after every pass). Every pass is an
/// optimisation, gated by opt_level: 0 runs none, 1 simplify,
/// remove_redundant_conditions and vectorize, 2 and 3 also unroll and
/// storage_rewrite (a required pass runs at any level). The input is not
/// changed. Tested by tests/lower/pipeline_test.cc.
PrimFunc run_pipeline(const PrimFunc& f);

/// The names of the pipeline's passes, in the order they run (a name may repeat).
std::vector<std::string> pipeline_pass_names();

/// The passes that fit a kernel to the target's vectors, run by a code
/// generator after run_pipeline, each through ir::run_pass:
/// vectorize_reductions (opt_level 2 and up: reductions folded into
/// register-wide vectors), then split_wide_vectors (1 and up: vectors wider
/// than the registers cut to their width), both for `vector_bytes`.
PrimFunc run_target_pipeline(const PrimFunc& f, int64_t vector_bytes);

/// The names of run_target_pipeline's passes, in the order they run.
std::vector<std::string> target_pipeline_pass_names();

}  // namespace tensortune::lower
