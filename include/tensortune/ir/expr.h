/// \file
/// Scalar expressions.
///
/// Semantics: integer arithmetic wraps around in the width of its type (two's
/// complement); `/` and `%` on integers truncate toward zero as in C, while
/// floordiv/floormod round toward negative infinity (index arithmetic uses
/// these). Float arithmetic is IEEE in the type's precision; float16 and
/// bfloat16 round to nearest-even after every operation. Comparisons and
/// logical operators yield bool. Evaluation order of operands is unspecified:
/// expressions have no side effects.
///
/// Every node kind is listed once in TT_EXPR_NODES; switches over ExprKind have
/// no default, so adding a kind fails to compile wherever it is not handled.
#pragma once

#include <array>
#include <cstdint>
#include <ostream>
#include <string>
#include <string_view>
#include <vector>

#include "tensortune/ir/buffer.h"
#include "tensortune/ir/dtype.h"
#include "tensortune/object/object.h"

namespace tensortune::ir {

#define TT_EXPR_NODES(X) \
  X(IntImm)              \
  X(FloatImm)            \
  X(Var)                 \
  X(Binary)              \
  X(Compare)             \
  X(Logical)             \
  X(Not)                 \
  X(Select)              \
  X(Cast)                \
  X(Call)                \
  X(Reduce)              \
  X(ProducerLoad)        \
  X(BufferLoad)          \
  X(Ramp)                \
  X(Broadcast)

enum class ExprKind {
#define TT_ENUM_ENTRY(name) k##name,
  TT_EXPR_NODES(TT_ENUM_ENTRY)
#undef TT_ENUM_ENTRY
};

/// Base of all scalar expression nodes.
struct ExprNode : Object {
  DataType dtype;
  virtual ExprKind kind() const = 0;
};

/// A handle to an expression; numbers convert to constants implicitly.
class Expr : public Ref<ExprNode> {
 public:
  using Ref<ExprNode>::Ref;
  Expr(int value);      // NOLINT: int32 constant
  Expr(int64_t value);  // NOLINT: int64 constant
  Expr(float value);    // NOLINT: float32 constant
  Expr(double value);   // NOLINT: float32 constant (the library's default float type)
  DataType dtype() const { return get()->dtype; }
  ExprKind kind() const { return get()->kind(); }
};

#define TT_EXPR_NODE(Name, key)                        \
  TT_NODE(Name##Node, key)                             \
  static constexpr ExprKind kKind = ExprKind::k##Name; \
  ExprKind kind() const override { return kKind; }

enum class BinaryOp { kAdd, kSub, kMul, kDiv, kMod, kFloorDiv, kFloorMod, kMin, kMax };
enum class CompareOp { kEQ, kNE, kLT, kLE, kGT, kGE };
enum class LogicalOp { kAnd, kOr };
enum class ReduceOp { kSum, kMax, kMin, kProd };
enum class IterKind { kSpatial, kReduce };

/// Math intrinsics; arity is 2 for pow and dot4_u8s8, 1 for the others.
/// dot4_u8s8(a, b) takes two int32 words of four bytes each and gives the
/// int32 sum of the four products of a's bytes (unsigned) with b's (signed):
/// the x86 VNNI instruction's step, written out where the target lacks it.
enum class Intrinsic {
  kExp,
  kLog,
  kSqrt,
  kRsqrt,
  kTanh,
  kErf,
  kSigmoid,
  kPow,
  kFabs,
  kFloor,
  kCeil,
  kRound,
  kTrunc,
  kSin,
  kCos,
  kExp2,
  kLog2,
  kAtan,
  kDot4U8S8
};

/// Operator spelling for printing, e.g. "+" or "floordiv".
std::string_view op_name(BinaryOp op);
std::string_view op_name(CompareOp op);
std::string_view op_name(Intrinsic op);
std::string_view op_name(ReduceOp op);

struct IntImmNode : ExprNode {
  int64_t value = 0;
  TT_EXPR_NODE(IntImm, "ir.IntImm")
  static void declare(FieldList<IntImmNode>& f);
};

struct FloatImmNode : ExprNode {
  double value = 0;
  TT_EXPR_NODE(FloatImm, "ir.FloatImm")
  static void declare(FieldList<FloatImmNode>& f);
};

/// A variable. Bound ones are matched up to renaming; free ones by name and type.
struct VarNode : ExprNode {
  std::string name;
  TT_EXPR_NODE(Var, "ir.Var")
  static void declare(FieldList<VarNode>& f);
};

class Var : public Ref<VarNode> {
 public:
  using Ref<VarNode>::Ref;
  /// A new variable (a distinct node even if the name is reused).
  static Var make(std::string name, DataType dtype = DataType::int32());
  operator Expr() const { return Expr(ptr()); }  // NOLINT: a variable is an expression
};

struct BinaryNode : ExprNode {
  BinaryOp op = BinaryOp::kAdd;
  Expr a, b;
  TT_EXPR_NODE(Binary, "ir.Binary")
  static void declare(FieldList<BinaryNode>& f);
};

struct CompareNode : ExprNode {
  CompareOp op = CompareOp::kEQ;
  Expr a, b;
  TT_EXPR_NODE(Compare, "ir.Compare")
  static void declare(FieldList<CompareNode>& f);
};

struct LogicalNode : ExprNode {
  LogicalOp op = LogicalOp::kAnd;
  Expr a, b;
  TT_EXPR_NODE(Logical, "ir.Logical")
  static void declare(FieldList<LogicalNode>& f);
};

struct NotNode : ExprNode {
  Expr a;
  TT_EXPR_NODE(Not, "ir.Not")
  static void declare(FieldList<NotNode>& f);
};

struct SelectNode : ExprNode {
  Expr condition, true_value, false_value;
  TT_EXPR_NODE(Select, "ir.Select")
  static void declare(FieldList<SelectNode>& f);
};

struct CastNode : ExprNode {
  Expr value;
  TT_EXPR_NODE(Cast, "ir.Cast")
  static void declare(FieldList<CastNode>& f);
};

struct CallNode : ExprNode {
  Intrinsic op = Intrinsic::kExp;
  std::vector<Expr> args;
  TT_EXPR_NODE(Call, "ir.Call")
  static void declare(FieldList<CallNode>& f);
};

/// An iteration variable over [0, extent): a loop axis of a compute or a reduction.
struct IterVarNode : Object {
  Var var;
  int64_t extent = 0;
  IterKind kind = IterKind::kSpatial;
  TT_NODE(IterVarNode, "ir.IterVar")
  static void declare(FieldList<IterVarNode>& f);
};

class IterVar : public Ref<IterVarNode> {
 public:
  using Ref<IterVarNode>::Ref;
  static IterVar make(std::string name, int64_t extent, IterKind kind);
  /// The variable as an expression.
  Expr expr() const { return get()->var; }
  int64_t extent() const { return get()->extent; }
};

/// A reduction of `source` over `axis`, combining only where `condition`
/// holds (null: always), starting from `init` (null: the combiner's identity).
struct ReduceNode : ExprNode {
  ReduceOp op = ReduceOp::kSum;
  std::vector<IterVar> axis;
  Expr source;
  Expr condition;
  Expr init;
  TT_EXPR_NODE(Reduce, "ir.Reduce")
  static void declare(FieldList<ReduceNode>& f);
};

/// Something expressions can read from by index: a tensor (te layer) or a buffer.
struct ProducerNode : Object {
  std::string name;
  std::vector<int64_t> shape;
  DataType dtype;
};

/// Reads element `indices` of a producer.
struct ProducerLoadNode : ExprNode {
  Ref<ProducerNode> producer;
  std::vector<Expr> indices;
  TT_EXPR_NODE(ProducerLoad, "ir.ProducerLoad")
  static void declare(FieldList<ProducerLoadNode>& f);
};

/// Reads a buffer at a flat element index; a vector index (a Ramp) reads that many lanes.
struct BufferLoadNode : ExprNode {
  Buffer buffer;
  Expr index;
  TT_EXPR_NODE(BufferLoad, "ir.BufferLoad")
  static void declare(FieldList<BufferLoadNode>& f);
};

/// The vector base, base + stride, ..., base + (lanes-1)*stride.
struct RampNode : ExprNode {
  Expr base;
  Expr stride;
  int lanes = 1;
  TT_EXPR_NODE(Ramp, "ir.Ramp")
  static void declare(FieldList<RampNode>& f);
};

/// A scalar replicated into every lane of a vector.
struct BroadcastNode : ExprNode {
  Expr value;
  int lanes = 1;
  TT_EXPR_NODE(Broadcast, "ir.Broadcast")
  static void declare(FieldList<BroadcastNode>& f);
};

// ---- construction (each validates its operands and throws kTypeMismatch) ----
// Operands of an operator agree in lanes; a scalar meeting a vector is
// broadcast to it.

Expr int_imm(int64_t value, DataType dtype = DataType::int32());
Expr float_imm(double value, DataType dtype = DataType::float32());
/// A constant of any type (bool, integer or float) with `value` converted to it.
Expr make_const(DataType dtype, double value);
Expr binary(BinaryOp op, Expr a, Expr b);
Expr compare(CompareOp op, Expr a, Expr b);
Expr logical(LogicalOp op, Expr a, Expr b);
Expr logical_not(Expr a);
Expr select(Expr condition, Expr true_value, Expr false_value);
Expr cast(DataType dtype, Expr value);
Expr call(Intrinsic op, std::vector<Expr> args);
Expr reduce(ReduceOp op, Expr source, std::vector<IterVar> axis, Expr condition = Expr(),
            Expr init = Expr());
Expr producer_load(Ref<ProducerNode> producer, std::vector<Expr> indices);
Expr buffer_load(Buffer buffer, Expr index);
Expr ramp(Expr base, Expr stride, int lanes);
Expr broadcast(Expr value, int lanes);

Expr operator+(Expr a, Expr b);
Expr operator-(Expr a, Expr b);
Expr operator*(Expr a, Expr b);
Expr operator/(Expr a, Expr b);
Expr operator%(Expr a, Expr b);
Expr operator-(Expr a);
Expr operator==(Expr a, Expr b);
Expr operator!=(Expr a, Expr b);
Expr operator<(Expr a, Expr b);
Expr operator<=(Expr a, Expr b);
Expr operator>(Expr a, Expr b);
Expr operator>=(Expr a, Expr b);
// && || ! are named functions: overloading them would make `if (!e)` and
// `e && cond` on handles ambiguous.
Expr logical_and(Expr a, Expr b);
Expr logical_or(Expr a, Expr b);
Expr floordiv(Expr a, Expr b);
Expr floormod(Expr a, Expr b);
Expr min(Expr a, Expr b);
Expr max(Expr a, Expr b);
Expr exp(Expr x);
Expr log(Expr x);
Expr sqrt(Expr x);
Expr rsqrt(Expr x);
Expr tanh(Expr x);
Expr erf(Expr x);
Expr sigmoid(Expr x);
Expr pow(Expr x, Expr y);
/// dot4_u8s8 of two int32 words (see Intrinsic).
Expr dot4_u8s8(Expr a, Expr b);
Expr fabs(Expr x);
Expr floor(Expr x);
Expr ceil(Expr x);

/// The smallest / largest value of a type (-inf / +inf for floats).
Expr min_value(DataType dtype);
Expr max_value(DataType dtype);
/// The identity of a reduction in `dtype`: 0 for sum, 1 for prod, -inf for max, +inf for min.
Expr reduce_identity(ReduceOp op, DataType dtype);

/// The constant value if `e` is an integer constant.
std::optional<int64_t> as_const_int(const Expr& e);
/// Whether evaluating `b` itself may trap: an integer division or modulo
/// whose divisor is not a nonzero constant.
bool may_trap(const BinaryNode& b);
/// The constant value if `e` is a float or integer constant.
std::optional<double> as_const_float(const Expr& e);

/// Infix rendering, e.g. "((i*16) + j)"; also used by operator<<.
std::string to_string(const Expr& e);
std::ostream& operator<<(std::ostream& os, const Expr& e);

/// Calls `f(const XNode&)` with the concrete node of `e`.
template <class F>
decltype(auto) dispatch(const Expr& e, F&& f) {
  switch (e->kind()) {
#define TT_DISPATCH_CASE(name) \
  case ExprKind::k##name: return f(static_cast<const name##Node&>(*e));
    TT_EXPR_NODES(TT_DISPATCH_CASE)
#undef TT_DISPATCH_CASE
  }
  TT_ICHECK(false, "bad expression kind");
  return f(static_cast<const IntImmNode&>(*e));
}

}  // namespace tensortune::ir

namespace tensortune {
template <>
struct EnumNames<ir::BinaryOp> {
  static constexpr std::array<std::string_view, 9> names = {
      "add", "sub", "mul", "div", "mod", "floordiv", "floormod", "min", "max"};
};
template <>
struct EnumNames<ir::CompareOp> {
  static constexpr std::array<std::string_view, 6> names = {"eq", "ne", "lt", "le", "gt", "ge"};
};
template <>
struct EnumNames<ir::LogicalOp> {
  static constexpr std::array<std::string_view, 2> names = {"and", "or"};
};
template <>
struct EnumNames<ir::ReduceOp> {
  static constexpr std::array<std::string_view, 4> names = {"sum", "max", "min", "prod"};
};
template <>
struct EnumNames<ir::IterKind> {
  static constexpr std::array<std::string_view, 2> names = {"spatial", "reduce"};
};
template <>
struct EnumNames<ir::Intrinsic> {
  static constexpr std::array<std::string_view, 19> names = {
      "exp",  "log",   "sqrt",  "rsqrt", "tanh", "erf",  "sigmoid", "pow",  "fabs",     "floor",
      "ceil", "round", "trunc", "sin",   "cos",  "exp2", "log2",    "atan", "dot4_u8s8"};
};
}  // namespace tensortune
