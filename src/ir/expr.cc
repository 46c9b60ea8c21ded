#include "tensortune/ir/expr.h"

#include <cmath>
#include <limits>

namespace tensortune::ir {

namespace {

// A loaded node is valid if its factory, given the same operands, builds the
// same node: same type, and the very same children (no implicit conversion).
void expect_rebuilt(const ExprNode& loaded, const Expr& rebuilt) {
  TT_CHECK(rebuilt.dtype() == loaded.dtype, kTypeMismatch, "dtype is ", loaded.dtype.str(),
           " but the operands give ", rebuilt.dtype().str());
  std::vector<const Object*> a, b;
  for (const auto& f : loaded.type_info().fields) {
    f.children(loaded, [&](const ObjectPtr& c) { a.push_back(c.get()); });
    f.children(*rebuilt, [&](const ObjectPtr& c) { b.push_back(c.get()); });
  }
  TT_CHECK(a == b, kTypeMismatch, "operand types do not match");
}

}  // namespace

// ---- field declarations: the only place each node's fields are listed ----

void IntImmNode::declare(FieldList<IntImmNode>& f) {
  f.def("dtype", &IntImmNode::dtype)
      .def("value", &IntImmNode::value)
      .validate([](const IntImmNode& n) { expect_rebuilt(n, int_imm(n.value, n.dtype)); });
}
void FloatImmNode::declare(FieldList<FloatImmNode>& f) {
  f.def("dtype", &FloatImmNode::dtype)
      .def("value", &FloatImmNode::value)
      .validate([](const FloatImmNode& n) { expect_rebuilt(n, float_imm(n.value, n.dtype)); });
}
void VarNode::declare(FieldList<VarNode>& f) {
  f.def("dtype", &VarNode::dtype).def("name", &VarNode::name, kName).variable();
}
void BinaryNode::declare(FieldList<BinaryNode>& f) {
  f.def("dtype", &BinaryNode::dtype)
      .def("op", &BinaryNode::op)
      .def("a", &BinaryNode::a)
      .def("b", &BinaryNode::b)
      .validate([](const BinaryNode& n) { expect_rebuilt(n, binary(n.op, n.a, n.b)); });
}
void CompareNode::declare(FieldList<CompareNode>& f) {
  f.def("dtype", &CompareNode::dtype)
      .def("op", &CompareNode::op)
      .def("a", &CompareNode::a)
      .def("b", &CompareNode::b)
      .validate([](const CompareNode& n) { expect_rebuilt(n, compare(n.op, n.a, n.b)); });
}
void LogicalNode::declare(FieldList<LogicalNode>& f) {
  f.def("dtype", &LogicalNode::dtype)
      .def("op", &LogicalNode::op)
      .def("a", &LogicalNode::a)
      .def("b", &LogicalNode::b)
      .validate([](const LogicalNode& n) { expect_rebuilt(n, logical(n.op, n.a, n.b)); });
}
void NotNode::declare(FieldList<NotNode>& f) {
  f.def("dtype", &NotNode::dtype).def("a", &NotNode::a).validate([](const NotNode& n) {
    expect_rebuilt(n, logical_not(n.a));
  });
}
void SelectNode::declare(FieldList<SelectNode>& f) {
  f.def("dtype", &SelectNode::dtype)
      .def("condition", &SelectNode::condition)
      .def("true_value", &SelectNode::true_value)
      .def("false_value", &SelectNode::false_value)
      .validate([](const SelectNode& n) {
        expect_rebuilt(n, select(n.condition, n.true_value, n.false_value));
      });
}
void CastNode::declare(FieldList<CastNode>& f) {
  f.def("dtype", &CastNode::dtype).def("value", &CastNode::value).validate([](const CastNode& n) {
    expect_rebuilt(n, cast(n.dtype, n.value));
  });
}
void CallNode::declare(FieldList<CallNode>& f) {
  f.def("dtype", &CallNode::dtype)
      .def("op", &CallNode::op)
      .def("args", &CallNode::args)
      .validate([](const CallNode& n) { expect_rebuilt(n, call(n.op, n.args)); });
}
void IterVarNode::declare(FieldList<IterVarNode>& f) {
  f.def("var", &IterVarNode::var, kBinds)
      .def("extent", &IterVarNode::extent)
      .def("kind", &IterVarNode::kind)
      .validate([](const IterVarNode& n) {
        TT_CHECK(n.var, kInvalidArgument, "an iteration variable needs a variable");
        TT_CHECK(n.extent >= 0, kInvalidArgument, "iteration extent ", n.extent, " is negative");
      });
}
void ReduceNode::declare(FieldList<ReduceNode>& f) {
  f.def("dtype", &ReduceNode::dtype)
      .def("op", &ReduceNode::op)
      .def("axis", &ReduceNode::axis)
      .def("source", &ReduceNode::source)
      .def("condition", &ReduceNode::condition)
      .def("init", &ReduceNode::init)
      .validate([](const ReduceNode& n) {
        expect_rebuilt(n, reduce(n.op, n.source, n.axis, n.condition, n.init));
      });
}
void ProducerLoadNode::declare(FieldList<ProducerLoadNode>& f) {
  f.def("dtype", &ProducerLoadNode::dtype)
      .def("producer", &ProducerLoadNode::producer)
      .def("indices", &ProducerLoadNode::indices)
      .validate([](const ProducerLoadNode& n) {
        expect_rebuilt(n, producer_load(n.producer, n.indices));
      });
}

TT_REGISTER_NODE(IntImmNode);
TT_REGISTER_NODE(FloatImmNode);
TT_REGISTER_NODE(VarNode);
TT_REGISTER_NODE(BinaryNode);
TT_REGISTER_NODE(CompareNode);
TT_REGISTER_NODE(LogicalNode);
TT_REGISTER_NODE(NotNode);
TT_REGISTER_NODE(SelectNode);
TT_REGISTER_NODE(CastNode);
TT_REGISTER_NODE(CallNode);
TT_REGISTER_NODE(IterVarNode);
TT_REGISTER_NODE(ReduceNode);
void BufferLoadNode::declare(FieldList<BufferLoadNode>& f) {
  f.def("dtype", &BufferLoadNode::dtype)
      .def("buffer", &BufferLoadNode::buffer)
      .def("index", &BufferLoadNode::index)
      .validate([](const BufferLoadNode& n) { expect_rebuilt(n, buffer_load(n.buffer, n.index)); });
}
void RampNode::declare(FieldList<RampNode>& f) {
  f.def("dtype", &RampNode::dtype)
      .def("base", &RampNode::base)
      .def("stride", &RampNode::stride)
      .def("lanes", &RampNode::lanes)
      .validate([](const RampNode& n) { expect_rebuilt(n, ramp(n.base, n.stride, n.lanes)); });
}
void BroadcastNode::declare(FieldList<BroadcastNode>& f) {
  f.def("dtype", &BroadcastNode::dtype)
      .def("value", &BroadcastNode::value)
      .def("lanes", &BroadcastNode::lanes)
      .validate([](const BroadcastNode& n) { expect_rebuilt(n, broadcast(n.value, n.lanes)); });
}

TT_REGISTER_NODE(ProducerLoadNode);
TT_REGISTER_NODE(BufferLoadNode);
TT_REGISTER_NODE(RampNode);
TT_REGISTER_NODE(BroadcastNode);

// ---- names ----

std::string_view op_name(BinaryOp op) {
  switch (op) {
    case BinaryOp::kAdd: return "+";
    case BinaryOp::kSub: return "-";
    case BinaryOp::kMul: return "*";
    case BinaryOp::kDiv: return "/";
    case BinaryOp::kMod: return "%";
    case BinaryOp::kFloorDiv: return "floordiv";
    case BinaryOp::kFloorMod: return "floormod";
    case BinaryOp::kMin: return "min";
    case BinaryOp::kMax: return "max";
  }
  return "?";
}
std::string_view op_name(CompareOp op) {
  switch (op) {
    case CompareOp::kEQ: return "==";
    case CompareOp::kNE: return "!=";
    case CompareOp::kLT: return "<";
    case CompareOp::kLE: return "<=";
    case CompareOp::kGT: return ">";
    case CompareOp::kGE: return ">=";
  }
  return "?";
}
std::string_view op_name(Intrinsic op) {
  return EnumNames<Intrinsic>::names[static_cast<size_t>(op)];
}
std::string_view op_name(ReduceOp op) {
  return EnumNames<ReduceOp>::names[static_cast<size_t>(op)];
}

// ---- construction ----

namespace {

bool is_const(const Expr& e) {
  return e && (e->kind() == ExprKind::kIntImm || e->kind() == ExprKind::kFloatImm);
}

// Operands of a binary operator must agree in type. A constant operand adopts
// the other side's type, so `x + 1` works for any x.
void unify(std::string_view what, Expr& a, Expr& b) {
  TT_CHECK(a && b, kInvalidArgument, "operand of ", what, " is null");
  if (a.dtype() == b.dtype()) return;
  if (a.dtype().lanes() != b.dtype().lanes()) {
    if (a.dtype().lanes() == 1) {
      a = broadcast(a, b.dtype().lanes());
    } else if (b.dtype().lanes() == 1) {
      b = broadcast(b, a.dtype().lanes());
    } else {
      fail(ErrorKind::kTypeMismatch, "operands of ", what, " have ", a.dtype().lanes(), " and ",
           b.dtype().lanes(), " lanes");
    }
    if (a.dtype() == b.dtype()) return;
  }
  if (is_const(b) && !is_const(a)) {
    b = make_const(a.dtype(), *as_const_float(b));
  } else if (is_const(a) && !is_const(b)) {
    a = make_const(b.dtype(), *as_const_float(a));
  } else if (is_const(a) && is_const(b) && a.dtype().is_float() != b.dtype().is_float()) {
    // A float literal and an integer literal meet: the result is the float type.
    if (a.dtype().is_float()) {
      b = make_const(a.dtype(), *as_const_float(b));
    } else {
      a = make_const(b.dtype(), *as_const_float(a));
    }
  } else {
    fail(ErrorKind::kTypeMismatch, "operands of ", what, " have types ", a.dtype().str(), " and ",
         b.dtype().str(), "; cast one of them");
  }
}

template <class NodeT>
std::shared_ptr<NodeT> with_type(DataType dtype) {
  auto n = make_node<NodeT>();
  n->dtype = dtype;
  return n;
}

}  // namespace

Expr::Expr(int value) : Expr(int_imm(value, DataType::int32())) {}
Expr::Expr(int64_t value) : Expr(int_imm(value, DataType::int64())) {}
Expr::Expr(float value) : Expr(float_imm(value, DataType::float32())) {}
Expr::Expr(double value) : Expr(float_imm(value, DataType::float32())) {}

Var Var::make(std::string name, DataType dtype) {
  auto n = with_type<VarNode>(dtype);
  n->name = std::move(name);
  return Var(n);
}

IterVar IterVar::make(std::string name, int64_t extent, IterKind kind) {
  TT_CHECK(extent >= 0, kInvalidArgument, "iteration extent ", extent, " of '", name,
           "' is negative");
  auto n = make_node<IterVarNode>();
  n->var =
      Var::make(std::move(name), extent > std::numeric_limits<int32_t>::max() ? DataType::int64()
                                                                              : DataType::int32());
  n->extent = extent;
  n->kind = kind;
  return IterVar(n);
}

Expr int_imm(int64_t value, DataType dtype) {
  TT_CHECK(dtype.is_integer() || dtype.is_bool(), kTypeMismatch,
           "an integer constant cannot have type ", dtype.str());
  auto n = with_type<IntImmNode>(dtype);
  n->value = value;
  return Expr(n);
}

Expr float_imm(double value, DataType dtype) {
  TT_CHECK(dtype.is_float(), kTypeMismatch, "a float constant cannot have type ", dtype.str());
  auto n = with_type<FloatImmNode>(dtype);
  n->value = value;
  return Expr(n);
}

Expr make_const(DataType dtype, double value) {
  if (dtype.is_float()) return float_imm(value, dtype);
  if (dtype.is_bool()) return int_imm(value != 0, dtype);
  // Converting NaN, infinities or out-of-range values to an integer is
  // undefined in C++: reject them (a float literal meeting an int operand).
  TT_CHECK(std::isfinite(value) && value >= -9.2233720368547758e18 && value < 9.2233720368547758e18,
           kInvalidArgument, "the value ", value, " cannot be a constant of type ", dtype.str());
  return int_imm(static_cast<int64_t>(value), dtype);
}

Expr binary(BinaryOp op, Expr a, Expr b) {
  unify(op_name(op), a, b);
  TT_CHECK(!a.dtype().is_bool(), kTypeMismatch, "arithmetic '", op_name(op),
           "' on bool operands; use && and || or cast first");
  if (op == BinaryOp::kFloorDiv || op == BinaryOp::kFloorMod || op == BinaryOp::kMod) {
    TT_CHECK(a.dtype().is_integer(), kTypeMismatch, "'", op_name(op),
             "' needs integer operands, got ", a.dtype().str());
  }
  auto n = with_type<BinaryNode>(a.dtype());
  n->op = op;
  n->a = std::move(a);
  n->b = std::move(b);
  return Expr(n);
}

Expr compare(CompareOp op, Expr a, Expr b) {
  unify(op_name(op), a, b);
  auto n = with_type<CompareNode>(DataType::boolean(a.dtype().lanes()));
  n->op = op;
  n->a = std::move(a);
  n->b = std::move(b);
  return Expr(n);
}

Expr logical(LogicalOp op, Expr a, Expr b) {
  TT_CHECK(a && b, kInvalidArgument, "operand of a logical operator is null");
  if (a.dtype().lanes() != b.dtype().lanes()) unify("logical operator", a, b);
  TT_CHECK(a.dtype().is_bool() && b.dtype().is_bool(), kTypeMismatch,
           "logical operators need bool operands, got ", a.dtype().str(), " and ", b.dtype().str());
  auto n = with_type<LogicalNode>(a.dtype());
  n->op = op;
  n->a = std::move(a);
  n->b = std::move(b);
  return Expr(n);
}

Expr logical_not(Expr a) {
  TT_CHECK(a && a.dtype().is_bool(), kTypeMismatch, "'!' needs a bool operand");
  auto n = with_type<NotNode>(a.dtype());
  n->a = std::move(a);
  return Expr(n);
}

Expr select(Expr condition, Expr true_value, Expr false_value) {
  TT_CHECK(condition && condition.dtype().is_bool(), kTypeMismatch, "select needs a bool condition",
           condition ? ", got " + condition.dtype().str() : "");
  unify("select", true_value, false_value);
  if (condition.dtype().lanes() != true_value.dtype().lanes()) {
    TT_CHECK(condition.dtype().lanes() == 1, kTypeMismatch, "select condition has ",
             condition.dtype().lanes(), " lanes, values have ", true_value.dtype().lanes());
    condition = broadcast(condition, true_value.dtype().lanes());
  }
  auto n = with_type<SelectNode>(true_value.dtype());
  n->condition = std::move(condition);
  n->true_value = std::move(true_value);
  n->false_value = std::move(false_value);
  return Expr(n);
}

Expr cast(DataType dtype, Expr value) {
  TT_CHECK(value, kInvalidArgument, "cast of a null expression");
  TT_CHECK(value.dtype().lanes() == dtype.lanes(), kTypeMismatch, "cast from ", value.dtype().str(),
           " to ", dtype.str(), " changes the lane count");
  auto n = with_type<CastNode>(dtype);
  n->value = std::move(value);
  return Expr(n);
}

Expr call(Intrinsic op, std::vector<Expr> args) {
  size_t arity = op == Intrinsic::kPow || op == Intrinsic::kDot4U8S8 ? 2 : 1;
  TT_CHECK(args.size() == arity, kInvalidArgument, op_name(op), " takes ", arity,
           " argument(s), got ", args.size());
  if (arity == 2) unify(op_name(op), args[0], args[1]);
  if (op == Intrinsic::kDot4U8S8) {
    TT_CHECK(args[0].dtype().element_of() == DataType::int32(), kTypeMismatch, op_name(op),
             " needs int32 words, got ", args[0].dtype().str());
  } else {
    TT_CHECK(args[0] && args[0].dtype().is_float(), kTypeMismatch, op_name(op),
             " needs a float argument", args[0] ? ", got " + args[0].dtype().str() : "");
  }
  auto n = with_type<CallNode>(args[0].dtype());
  n->op = op;
  n->args = std::move(args);
  return Expr(n);
}

Expr reduce(ReduceOp op, Expr source, std::vector<IterVar> axis, Expr condition, Expr init) {
  TT_CHECK(source, kInvalidArgument, "reduction of a null expression");
  TT_CHECK(!axis.empty(), kInvalidArgument, "a reduction needs at least one axis");
  for (const auto& iv : axis) {
    TT_CHECK(iv && iv->kind == IterKind::kReduce, kInvalidArgument,
             "reduction axes must be reduce iteration variables (te::reduce_axis)");
  }
  if (condition) {
    TT_CHECK(condition.dtype().is_bool(), kTypeMismatch, "reduction condition must be bool, got ",
             condition.dtype().str());
  }
  if (init) {
    Expr s = source;
    unify("reduction init", s, init);
  }
  auto n = with_type<ReduceNode>(source.dtype());
  n->op = op;
  n->axis = std::move(axis);
  n->source = std::move(source);
  n->condition = std::move(condition);
  n->init = std::move(init);
  return Expr(n);
}

Expr producer_load(Ref<ProducerNode> producer, std::vector<Expr> indices) {
  TT_CHECK(producer, kInvalidArgument, "load from a null producer");
  TT_CHECK(indices.size() == producer->shape.size(), kInvalidArgument, "'", producer->name,
           "' has ", producer->shape.size(), " dimension(s) but is indexed with ", indices.size());
  for (size_t i = 0; i < indices.size(); ++i) {
    TT_CHECK(indices[i] && indices[i].dtype().is_integer(), kTypeMismatch, "index ", i, " of '",
             producer->name, "' must be an integer",
             indices[i] ? ", got " + indices[i].dtype().str() : "");
  }
  auto n = with_type<ProducerLoadNode>(producer->dtype);
  n->producer = std::move(producer);
  n->indices = std::move(indices);
  return Expr(n);
}

Expr buffer_load(Buffer buffer, Expr index) {
  TT_CHECK(buffer && index, kInvalidArgument, "a buffer load needs a buffer and an index");
  TT_CHECK(index.dtype().is_integer(), kTypeMismatch, "index into '", buffer->name,
           "' must be an integer, got ", index.dtype().str());
  auto n = with_type<BufferLoadNode>(buffer->dtype.with_lanes(index.dtype().lanes()));
  n->buffer = std::move(buffer);
  n->index = std::move(index);
  return Expr(n);
}

Expr ramp(Expr base, Expr stride, int lanes) {
  TT_CHECK(base && stride, kInvalidArgument, "a ramp needs a base and a stride");
  TT_CHECK(lanes > 1 && lanes <= 1024, kInvalidArgument, "a ramp needs 2..1024 lanes, got ", lanes);
  unify("ramp", base, stride);
  TT_CHECK(base.dtype().is_integer() && base.dtype().is_scalar(), kTypeMismatch,
           "a ramp needs scalar integer base and stride, got ", base.dtype().str());
  auto n = with_type<RampNode>(base.dtype().with_lanes(lanes));
  n->base = std::move(base);
  n->stride = std::move(stride);
  n->lanes = lanes;
  return Expr(n);
}

Expr broadcast(Expr value, int lanes) {
  TT_CHECK(value, kInvalidArgument, "broadcast of a null expression");
  TT_CHECK(value.dtype().is_scalar(), kTypeMismatch, "broadcast of a vector ", value.dtype().str());
  TT_CHECK(lanes > 1 && lanes <= 1024, kInvalidArgument, "a broadcast needs 2..1024 lanes, got ",
           lanes);
  auto n = with_type<BroadcastNode>(value.dtype().with_lanes(lanes));
  n->value = std::move(value);
  n->lanes = lanes;
  return Expr(n);
}

Expr operator+(Expr a, Expr b) { return binary(BinaryOp::kAdd, std::move(a), std::move(b)); }
Expr operator-(Expr a, Expr b) { return binary(BinaryOp::kSub, std::move(a), std::move(b)); }
Expr operator*(Expr a, Expr b) { return binary(BinaryOp::kMul, std::move(a), std::move(b)); }
Expr operator/(Expr a, Expr b) { return binary(BinaryOp::kDiv, std::move(a), std::move(b)); }
Expr operator%(Expr a, Expr b) { return binary(BinaryOp::kMod, std::move(a), std::move(b)); }
Expr operator-(Expr a) {
  DataType t = a.dtype();
  return binary(BinaryOp::kSub, make_const(t, 0), std::move(a));
}
Expr operator==(Expr a, Expr b) { return compare(CompareOp::kEQ, std::move(a), std::move(b)); }
Expr operator!=(Expr a, Expr b) { return compare(CompareOp::kNE, std::move(a), std::move(b)); }
Expr operator<(Expr a, Expr b) { return compare(CompareOp::kLT, std::move(a), std::move(b)); }
Expr operator<=(Expr a, Expr b) { return compare(CompareOp::kLE, std::move(a), std::move(b)); }
Expr operator>(Expr a, Expr b) { return compare(CompareOp::kGT, std::move(a), std::move(b)); }
Expr operator>=(Expr a, Expr b) { return compare(CompareOp::kGE, std::move(a), std::move(b)); }
Expr logical_and(Expr a, Expr b) { return logical(LogicalOp::kAnd, std::move(a), std::move(b)); }
Expr logical_or(Expr a, Expr b) { return logical(LogicalOp::kOr, std::move(a), std::move(b)); }
Expr floordiv(Expr a, Expr b) { return binary(BinaryOp::kFloorDiv, std::move(a), std::move(b)); }
Expr floormod(Expr a, Expr b) { return binary(BinaryOp::kFloorMod, std::move(a), std::move(b)); }
Expr min(Expr a, Expr b) { return binary(BinaryOp::kMin, std::move(a), std::move(b)); }
Expr max(Expr a, Expr b) { return binary(BinaryOp::kMax, std::move(a), std::move(b)); }
Expr exp(Expr x) { return call(Intrinsic::kExp, {std::move(x)}); }
Expr log(Expr x) { return call(Intrinsic::kLog, {std::move(x)}); }
Expr sqrt(Expr x) { return call(Intrinsic::kSqrt, {std::move(x)}); }
Expr rsqrt(Expr x) { return call(Intrinsic::kRsqrt, {std::move(x)}); }
Expr tanh(Expr x) { return call(Intrinsic::kTanh, {std::move(x)}); }
Expr erf(Expr x) { return call(Intrinsic::kErf, {std::move(x)}); }
Expr sigmoid(Expr x) { return call(Intrinsic::kSigmoid, {std::move(x)}); }
Expr pow(Expr x, Expr y) { return call(Intrinsic::kPow, {std::move(x), std::move(y)}); }
Expr dot4_u8s8(Expr a, Expr b) { return call(Intrinsic::kDot4U8S8, {std::move(a), std::move(b)}); }
Expr fabs(Expr x) { return call(Intrinsic::kFabs, {std::move(x)}); }
Expr floor(Expr x) { return call(Intrinsic::kFloor, {std::move(x)}); }
Expr ceil(Expr x) { return call(Intrinsic::kCeil, {std::move(x)}); }

Expr min_value(DataType dtype) {
  if (dtype.is_float()) return float_imm(-INFINITY, dtype);
  if (dtype.is_bool() || dtype.is_uint()) return int_imm(0, dtype);
  return int_imm(dtype.bits() == 64 ? std::numeric_limits<int64_t>::min()
                                    : -(int64_t{1} << (dtype.bits() - 1)),
                 dtype);
}

Expr max_value(DataType dtype) {
  if (dtype.is_float()) return float_imm(INFINITY, dtype);
  if (dtype.is_bool()) return int_imm(1, dtype);
  if (dtype.is_uint() && dtype.bits() == 64) return int_imm(-1, dtype);  // all ones
  int value_bits = dtype.is_uint() ? dtype.bits() : dtype.bits() - 1;
  return int_imm(
      value_bits == 63 ? std::numeric_limits<int64_t>::max() : (int64_t{1} << value_bits) - 1,
      dtype);
}

Expr reduce_identity(ReduceOp op, DataType dtype) {
  switch (op) {
    case ReduceOp::kSum: return make_const(dtype, 0);
    case ReduceOp::kProd: return make_const(dtype, 1);
    case ReduceOp::kMax: return min_value(dtype);
    case ReduceOp::kMin: return max_value(dtype);
  }
  TT_ICHECK(false, "bad reduce op");
  return Expr();
}

std::optional<int64_t> as_const_int(const Expr& e) {
  if (e && e->kind() == ExprKind::kIntImm) return static_cast<const IntImmNode&>(*e).value;
  return std::nullopt;
}

bool may_trap(const BinaryNode& b) {
  const bool divides = b.op == BinaryOp::kDiv || b.op == BinaryOp::kMod ||
                       b.op == BinaryOp::kFloorDiv || b.op == BinaryOp::kFloorMod;
  if (!divides || !b.dtype.is_integer()) return false;
  auto divisor = as_const_int(b.b);
  return !divisor || *divisor == 0;
}

std::optional<double> as_const_float(const Expr& e) {
  if (!e) return std::nullopt;
  if (e->kind() == ExprKind::kFloatImm) return static_cast<const FloatImmNode&>(*e).value;
  if (e->kind() == ExprKind::kIntImm) {
    return static_cast<double>(static_cast<const IntImmNode&>(*e).value);
  }
  return std::nullopt;
}

}  // namespace tensortune::ir
