#include "te/op_util.h"

#include <cmath>
#include <limits>

#include "tensortune/support/shape.h"
#include "tensortune/support/strings.h"

namespace tensortune::te::detail {

Expr index_const(int64_t value) {
  TT_ICHECK(
      value >= std::numeric_limits<int32_t>::min() && value <= std::numeric_limits<int32_t>::max(),
      "index constant ", value, " does not fit in int32");
  return ir::int_imm(value, DataType::int32());
}

Expr add_index(const Expr& e, int64_t c) {
  if (c == 0) return e;
  if (c < 0) return e - index_const(-c);
  return e + index_const(c);
}

Expr mul_index(const Expr& e, int64_t c) { return c == 1 ? e : e * index_const(c); }

Expr clamp_index(const Expr& e, int64_t low, int64_t high, bool clamp_low, bool clamp_high) {
  Expr out = e;
  if (clamp_high) out = ir::min(out, index_const(high));
  if (clamp_low) out = ir::max(out, index_const(low));
  return out;
}

Expr value_const(DataType dtype, double value) { return ir::make_const(dtype, value); }

DataType accumulation_type(DataType dtype) {
  bool half = dtype.is_float() && dtype.bits() == 16;
  return half ? DataType::float32(dtype.lanes()) : dtype;
}

Expr widen(const Expr& e) { return as_type(e, accumulation_type(e.dtype())); }

Expr as_type(const Expr& e, DataType dtype) { return e.dtype() == dtype ? e : ir::cast(dtype, e); }

std::string accumulator_name(const std::string& name, DataType dtype) {
  return accumulation_type(dtype) == dtype ? name : name + "_acc";
}

Tensor narrow(const Tensor& wide, DataType dtype, std::string name) {
  if (wide.dtype() == dtype) return wide;
  return compute(wide.shape(),
                 [&](const std::vector<Var>& v) { return ir::cast(dtype, wide(as_exprs(v))); },
                 std::move(name), "injective", {{"dtype", dtype.str()}, {"rounds", wide.name()}});
}

Tensor wide_source(const Tensor& t) {
  if (!t) return t;
  Ref<ComputeOpNode> op = t.compute_op();
  if (!op || !op->attrs.contains("rounds")) return t;
  std::vector<Tensor> inputs = input_tensors(t);
  return inputs.size() == 1 && inputs[0].name() == op->attrs["rounds"] ? inputs[0] : t;
}

std::vector<Expr> as_exprs(const std::vector<Var>& vars) {
  return std::vector<Expr>(vars.begin(), vars.end());
}

nlohmann::json json_number(double value) {
  if (std::isnan(value)) return "nan";
  if (std::isinf(value)) return value > 0 ? "inf" : "-inf";
  return value;
}

void check_defined(const Tensor& t, std::string_view op, std::string_view operand) {
  if (!t) fail(ErrorKind::kInvalidArgument, op, ": ", operand, " is null");
}

void check_rank(const Tensor& t, int rank, std::string_view op, std::string_view operand) {
  check_defined(t, op, operand);
  if (t.ndim() != rank) {
    fail(ErrorKind::kInvalidArgument, op, ": ", operand, " '", t.name(), "' must have ", rank,
         " dimensions, got shape ", shape_text(t.shape()));
  }
}

void check_same_dtype(const Tensor& a, const Tensor& b, std::string_view op) {
  if (a.dtype() != b.dtype()) {
    fail(ErrorKind::kTypeMismatch, op, ": operands '", a.name(), "' (", a.dtype().str(), ") and '",
         b.name(), "' (", b.dtype().str(), ") have different types");
  }
}

void check_float(const Tensor& t, std::string_view op) {
  if (!t.dtype().is_float()) {
    fail(ErrorKind::kTypeMismatch, op, ": operand '", t.name(), "' has type ", t.dtype().str(),
         "; a floating-point type is required");
  }
}

Tensor pad_stage(const Tensor& x, const std::vector<int64_t>& before,
                 const std::vector<int64_t>& after, const Expr& pad_value, std::string name,
                 const nlohmann::json& value_json) {
  const std::vector<int64_t>& in = x.shape();
  TT_ICHECK(before.size() == in.size() && after.size() == in.size(), "pad_stage: rank mismatch");
  bool any = false;
  std::vector<int64_t> shape(in.size());
  for (size_t d = 0; d < in.size(); ++d) {
    TT_ICHECK(before[d] >= 0 && after[d] >= 0, "pad_stage: negative padding");
    any = any || before[d] > 0 || after[d] > 0;
    shape[d] = before[d] + in[d] + after[d];
  }
  if (!any) return x;
  nlohmann::json attrs = {{"before", before}, {"after", after}, {"value", value_json}};
  return compute(
      shape,
      [&](const std::vector<Var>& v) {
        std::vector<Expr> index;
        Expr inside;
        auto both = [&](Expr c) { inside = inside ? ir::logical_and(inside, c) : c; };
        for (size_t d = 0; d < in.size(); ++d) {
          if (before[d] > 0) both(v[d] >= index_const(before[d]));
          if (after[d] > 0) both(v[d] < index_const(before[d] + in[d]));
          index.push_back(
              clamp_index(add_index(v[d], -before[d]), 0, in[d] - 1, before[d] > 0, after[d] > 0));
        }
        return ir::select(inside, x(index), pad_value);
      },
      std::move(name), "pad", std::move(attrs));
}

}  // namespace tensortune::te::detail
