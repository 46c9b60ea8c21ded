#include <sstream>

#include "tensortune/ir/expr.h"
#include "tensortune/support/strings.h"

namespace tensortune::ir {
namespace {

void print(std::ostream& os, const Expr& e);

void print_list(std::ostream& os, const std::vector<Expr>& items) {
  for (size_t i = 0; i < items.size(); ++i) {
    if (i) os << ", ";
    print(os, items[i]);
  }
}

void print(std::ostream& os, const Expr& e) {
  if (!e) {
    os << "null";
    return;
  }
  dispatch(e, [&](const auto& n) {
    using N = std::decay_t<decltype(n)>;
    if constexpr (std::is_same_v<N, IntImmNode>) {
      if (n.dtype.is_bool()) {
        os << (n.value ? "true" : "false");
      } else {
        os << n.value;
        if (n.dtype != DataType::int32()) os << "_" << n.dtype.str();
      }
    } else if constexpr (std::is_same_v<N, FloatImmNode>) {
      os << format_double(n.value);
      if (n.dtype != DataType::float32()) os << "_" << n.dtype.str();
    } else if constexpr (std::is_same_v<N, VarNode>) {
      os << n.name;
    } else if constexpr (std::is_same_v<N, BinaryNode>) {
      if (n.op == BinaryOp::kFloorDiv || n.op == BinaryOp::kFloorMod || n.op == BinaryOp::kMin ||
          n.op == BinaryOp::kMax) {
        os << op_name(n.op) << "(";
        print(os, n.a);
        os << ", ";
        print(os, n.b);
        os << ")";
      } else {
        os << "(";
        print(os, n.a);
        os << " " << op_name(n.op) << " ";
        print(os, n.b);
        os << ")";
      }
    } else if constexpr (std::is_same_v<N, CompareNode>) {
      os << "(";
      print(os, n.a);
      os << " " << op_name(n.op) << " ";
      print(os, n.b);
      os << ")";
    } else if constexpr (std::is_same_v<N, LogicalNode>) {
      os << "(";
      print(os, n.a);
      os << (n.op == LogicalOp::kAnd ? " && " : " || ");
      print(os, n.b);
      os << ")";
    } else if constexpr (std::is_same_v<N, NotNode>) {
      os << "!";
      print(os, n.a);
    } else if constexpr (std::is_same_v<N, SelectNode>) {
      os << "select(";
      print_list(os, {n.condition, n.true_value, n.false_value});
      os << ")";
    } else if constexpr (std::is_same_v<N, CastNode>) {
      os << n.dtype.str() << "(";
      print(os, n.value);
      os << ")";
    } else if constexpr (std::is_same_v<N, CallNode>) {
      os << op_name(n.op) << "(";
      print_list(os, n.args);
      os << ")";
    } else if constexpr (std::is_same_v<N, ReduceNode>) {
      os << op_name(n.op) << "(";
      print(os, n.source);
      os << ", axis=[";
      for (size_t i = 0; i < n.axis.size(); ++i) {
        if (i) os << ", ";
        os << n.axis[i]->var->name << ":" << n.axis[i]->extent;
      }
      os << "]";
      if (n.condition) {
        os << ", where=";
        print(os, n.condition);
      }
      if (n.init) {
        os << ", init=";
        print(os, n.init);
      }
      os << ")";
    } else if constexpr (std::is_same_v<N, ProducerLoadNode>) {
      os << n.producer->name << "[";
      print_list(os, n.indices);
      os << "]";
    } else if constexpr (std::is_same_v<N, BufferLoadNode>) {
      os << n.buffer->name << "[";
      print(os, n.index);
      os << "]";
    } else if constexpr (std::is_same_v<N, RampNode>) {
      os << "ramp(";
      print_list(os, {n.base, n.stride});
      os << ", " << n.lanes << ")";
    } else if constexpr (std::is_same_v<N, BroadcastNode>) {
      os << "broadcast(";
      print(os, n.value);
      os << ", " << n.lanes << ")";
    }
  });
}

}  // namespace

std::string to_string(const Expr& e) {
  std::ostringstream os;
  print(os, e);
  return os.str();
}

std::ostream& operator<<(std::ostream& os, const Expr& e) {
  print(os, e);
  return os;
}

}  // namespace tensortune::ir
