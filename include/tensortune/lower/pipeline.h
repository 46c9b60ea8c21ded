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
/// instruments see the IR before and after every pass). The input is not
/// changed. Tested by tests/lower/pipeline_test.cc.
PrimFunc run_pipeline(const PrimFunc& f);

/// The names of the pipeline's passes, in the order they run (a name may repeat).
std::vector<std::string> pipeline_pass_names();

}  // namespace tensortune::lower
