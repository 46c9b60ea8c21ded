/// \file
/// The reference evaluator: interprets a tensor expression DAG on given input
/// arrays, stage by stage, with the semantics of ir/expr.h. It is the oracle
/// every schedule, lowering and code generator is checked against, so it
/// aims at being obviously right and reasonably fast, not at being fast.
///
/// Semantics, precisely. Scalar arithmetic is ir/scalar_semantics.h's, the
/// same functions the simplifier folds constants with, so the two agree bit
/// for bit; in short:
///  - Every compute stage is evaluated in post order into its own array; each
///    output element is evaluated independently, in row-major order.
///  - Integers wrap around in their width; `/` and `%` truncate toward zero,
///    floordiv/floormod round toward negative infinity; an integer division
///    or modulo by zero is a kRuntime error naming the stage and element.
///  - Floats are computed in double and rounded to nearest-even in their own
///    precision after every operation (float32, float16, bfloat16); min/max
///    are fmin/fmax (a NaN operand loses).
///  - Intrinsics are evaluated in double from the rounded operands and the
///    result rounded once; round is to nearest-even (nearbyint); sigmoid is
///    1 / (1 + exp(-x)), rsqrt 1 / sqrt(x).
///  - Casts: float to integer truncates toward zero, then wraps (NaN and
///    values beyond 64 bits: see ir::convert_scalar); integer to integer wraps
///    exactly in 64 bits; anything to bool is `!= 0`.
///  - select evaluates both of its operands, as a vector blend would, so both
///    must be safe: an out-of-bounds read or a division by zero in the arm not
///    taken is still an error. (The operator library clamps the indices of
///    its padded reads for this reason.)
///  - A reduction starts from its init (or the combiner's identity: 0, 1,
///    -inf/+inf, or the integer type's min/max), visits its axes in order with
///    the first outermost, and combines the source only where the condition
///    holds; the source is not evaluated where it does not.
///  - A read outside a tensor's bounds is a kRuntime error naming the stage,
///    the tensor, the index and the output element being computed.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "tensortune/te/ndarray.h"
#include "tensortune/te/tensor.h"

namespace tensortune::te {

/// Evaluates `outputs` with `values[i]` as the contents of placeholder
/// `inputs[i]`. Every placeholder the outputs depend on must be given, with
/// its exact dtype and shape; inputs the outputs do not read are allowed.
/// Returns one array per output (an output that is itself an input is copied).
std::vector<NDArray> evaluate(const std::vector<Tensor>& outputs, const std::vector<Tensor>& inputs,
                              const std::vector<NDArray>& values);

/// As above, with the inputs given by placeholder name; the placeholders the
/// outputs depend on must have distinct names. Unused names are allowed.
std::vector<NDArray> evaluate(const std::vector<Tensor>& outputs,
                              const std::map<std::string, NDArray>& inputs);

/// One random array per input (fill_random with seed `seed + i` and the
/// default range [-1, 1), integers in [-8, 8]), for tests and correctness checks.
std::vector<NDArray> random_inputs(const std::vector<Tensor>& inputs, uint64_t seed);

}  // namespace tensortune::te
