/// \file
/// The arithmetic semantics of ir expressions (see expr.h), in one place, so the
/// simplifier's constant folding and the reference evaluator agree exactly.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <vector>

#include "tensortune/ir/expr.h"

namespace tensortune::ir {

/// `value` rounded to the precision of float type `dtype` (float16/bfloat16:
/// nearest-even; float32: IEEE single; float64: unchanged).
double round_to_float(DataType dtype, double value);

/// `value` wrapped to the width and signedness of integer type `dtype`
/// (bool: 0 or 1).
int64_t wrap_to_int(DataType dtype, int64_t value);

/// `value` converted to `dtype` as a cast does (floats to ints truncate toward
/// zero; out-of-range and NaN give the type's minimum, like x86 conversion).
double convert_scalar(DataType from, DataType to, double value);

/// a op b for integers of `dtype`; nullopt on division by zero.
std::optional<int64_t> apply_int(BinaryOp op, DataType dtype, int64_t a, int64_t b);

/// a op b for floats of `dtype` (result rounded to its precision).
double apply_float(BinaryOp op, DataType dtype, double a, double b);

/// a op b compared as values of `dtype` (unsigned types compare unsigned).
bool apply_compare(CompareOp op, DataType dtype, double a, double b);

/// Intrinsic::kDot4U8S8 of two words.
int32_t dot4_u8s8(int32_t a, int32_t b);

/// The intrinsic applied to arguments of `dtype` (float results rounded).
double apply_intrinsic(Intrinsic op, DataType dtype, double x, double y = 0);

/// Reads a variable's value during evaluate_scalar.
using VarValueFn = std::function<double(const VarNode&)>;
/// Reads a producer's element during evaluate_scalar.
using LoadValueFn = std::function<double(const ProducerNode&, const std::vector<int64_t>&)>;

/// The value of `e` (integers and bools exactly representable as doubles up to
/// 2^53), with every operation following the semantics above. Reductions loop
/// over their axes; integer division by zero is a kRuntime error.
double evaluate_scalar(const Expr& e, const VarValueFn& var_value,
                       const LoadValueFn& load_value = nullptr);

}  // namespace tensortune::ir
