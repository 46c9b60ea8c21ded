/// \file
/// Helpers shared by the operator library's source files (private to src/te).
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "tensortune/te/tensor.h"

namespace tensortune::te::detail {

/// An int32 index constant (loop variables are int32, so index math is too).
Expr index_const(int64_t value);

/// `e + c`, or `e` itself when c is 0 (keeps index expressions readable).
Expr add_index(const Expr& e, int64_t c);

/// `e * c`, or `e` itself when c is 1.
Expr mul_index(const Expr& e, int64_t c);

/// `e` clamped into [low, high]; the bounds a caller knows cannot be crossed
/// may be skipped with `clamp_low` / `clamp_high` false.
Expr clamp_index(const Expr& e, int64_t low, int64_t high, bool clamp_low = true,
                 bool clamp_high = true);

/// A constant of `dtype` (the element type of the tensors an op works on).
Expr value_const(DataType dtype, double value);

/// The loop variables of a compute as expressions.
std::vector<Expr> as_exprs(const std::vector<Var>& vars);

/// `value` as JSON; non-finite values as the strings "inf", "-inf", "nan"
/// (JSON has no such numbers, and attrs must survive a text round trip).
nlohmann::json json_number(double value);

/// Fails unless `t` is non-null and has `rank` dimensions.
void check_rank(const Tensor& t, int rank, std::string_view op, std::string_view operand);

/// Fails unless `t` is non-null.
void check_defined(const Tensor& t, std::string_view op, std::string_view operand);

/// Fails unless `a` and `b` have the same dtype.
void check_same_dtype(const Tensor& a, const Tensor& b, std::string_view op);

/// Fails unless `t` has a floating-point dtype.
void check_float(const Tensor& t, std::string_view op);

/// The type a sum over `dtype` values accumulates in: float32 for float16
/// and bfloat16, as production runtimes do (a dot product rounded to 11 or 8
/// bits after every add loses most of its digits); `dtype` otherwise.
DataType accumulation_type(DataType dtype);

/// `e` in its accumulation type (itself when that is its own type).
Expr widen(const Expr& e);

/// `e` converted to `dtype` (itself when it has that type already).
Expr as_type(const Expr& e, DataType dtype);

/// The name of a stage that accumulates in the accumulation type of `dtype`:
/// `name` itself, or `name + "_acc"` when `narrow` will round it back.
std::string accumulator_name(const std::string& name, DataType dtype);

/// `wide` rounded to `dtype` as its own stage named `name` (tag "cast");
/// `wide` itself when it already has `dtype`.
Tensor narrow(const Tensor& wide, DataType dtype, std::string name);

/// What an operator working in the wider type reads in place of `t`: when
/// `t` only rounds a wider sum (a `narrow` stage), that sum, so a chain
/// after a convolution or matmul (bias, activation, residual add, a cast,
/// a softmax) rounds once, at its end, as ONNX Runtime does (it runs
/// float16 operators without a half kernel in float32, dropping the casts
/// between them); `t` itself otherwise. (A matmul, softmax or layer norm
/// reads through it too, so that a float16 graph evaluated whole gives the
/// values of its float16_ops_in_float32 rewrite; compiled, they start their
/// kernels.)
Tensor wide_source(const Tensor& t);

/// `x` padded by `before`/`after` (one entry per dimension) with `pad_value`
/// (an expression of x's dtype), as its own stage with tag "pad"; `x` itself
/// when nothing is padded. Reads clamp their index, so the select never
/// reads out of bounds.
Tensor pad_stage(const Tensor& x, const std::vector<int64_t>& before,
                 const std::vector<int64_t>& after, const Expr& pad_value, std::string name,
                 const nlohmann::json& value_json);

}  // namespace tensortune::te::detail
