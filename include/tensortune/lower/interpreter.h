/// \file
/// A reference interpreter for the loop-nest IR: runs a kernel on arrays
/// without compiling it, checking every access against its buffer's bounds.
/// Tests use it to check lowering apart from code generation.
#pragma once

#include <vector>

#include "tensortune/lower/stmt.h"
#include "tensortune/te/ndarray.h"

namespace tensortune::lower {

/// Runs `f` with `args[i]` bound to f's params[i] (shapes and dtypes must
/// match). An out-of-bounds access or an integer division by zero is a
/// kRuntime error naming the buffer and index.
void interpret(const PrimFunc& f, const std::vector<te::NDArray*>& args);

}  // namespace tensortune::lower
