// flop_count: the arithmetic a tensor program performs on data, as search and
// benchmarks report it (GFLOP/s). See tensor.h for the counting rules.
#include "tensortune/te/tensor.h"

namespace tensortune::te {
namespace {

struct Count {
  double ops = 0;
  bool on_data = false;  ///< depends on a tensor element (not only on loop indices)
};

// Counts the operations of one evaluation of `e`. Index arithmetic (inside a
// load's indices, or on loop variables and constants only) is addressing, not
// floating-point work, so it is not counted.
Count count_ops(const Expr& e) {
  auto op_over = [](std::initializer_list<Count> parts) {
    Count c;
    for (const Count& p : parts) {
      c.ops += p.ops;
      c.on_data = c.on_data || p.on_data;
    }
    if (c.on_data) c.ops += 1;
    return c;
  };
  return ir::dispatch(e, [&](const auto& node) -> Count {
    using Node = std::decay_t<decltype(node)>;
    if constexpr (std::is_same_v<Node, ir::IntImmNode> || std::is_same_v<Node, ir::FloatImmNode> ||
                  std::is_same_v<Node, ir::VarNode>) {
      return {};
    } else if constexpr (std::is_same_v<Node, ir::ProducerLoadNode>) {
      return {0, true};
    } else if constexpr (std::is_same_v<Node, ir::BinaryNode> ||
                         std::is_same_v<Node, ir::CompareNode> ||
                         std::is_same_v<Node, ir::LogicalNode>) {
      return op_over({count_ops(node.a), count_ops(node.b)});
    } else if constexpr (std::is_same_v<Node, ir::NotNode>) {
      return op_over({count_ops(node.a)});
    } else if constexpr (std::is_same_v<Node, ir::SelectNode>) {
      // Choosing a value moves data; the condition's own work is counted.
      Count c = count_ops(node.condition), t = count_ops(node.true_value),
            f = count_ops(node.false_value);
      return {c.ops + t.ops + f.ops, c.on_data || t.on_data || f.on_data};
    } else if constexpr (std::is_same_v<Node, ir::CastNode>) {
      return count_ops(node.value);
    } else if constexpr (std::is_same_v<Node, ir::CallNode>) {
      Count c;
      for (const Expr& arg : node.args) {
        Count a = count_ops(arg);
        c.ops += a.ops;
        c.on_data = c.on_data || a.on_data;
      }
      // dot4_u8s8 is four multiplies and three adds.
      if (c.on_data) c.ops += node.op == ir::Intrinsic::kDot4U8S8 ? 7 : 1;
      return c;
    } else if constexpr (std::is_same_v<Node, ir::BufferLoadNode> ||
                         std::is_same_v<Node, ir::RampNode> ||
                         std::is_same_v<Node, ir::BroadcastNode>) {
      fail(ErrorKind::kTypeMismatch, node.type_key(),
           " belongs to lowered code, not to a tensor expression");
      return {};
    } else {
      static_assert(std::is_same_v<Node, ir::ReduceNode>, "unhandled expression kind");
      // compute() allows a reduction only as a whole body; flop_count handles that case.
      TT_ICHECK(false, "reduction inside an expression: ", ir::to_string(e));
      return {};
    }
  });
}

double stage_flops(const ComputeOpNode& op) {
  double points = 1;
  for (const IterVar& iv : op.axis) points *= static_cast<double>(iv->extent);
  auto red = op.body.as<ir::ReduceNode>();
  if (!red) return points * count_ops(op.body).ops;
  double iterations = 1;
  for (const IterVar& iv : red->axis) iterations *= static_cast<double>(iv->extent);
  double per_iteration = count_ops(red->source).ops + 1;  // + the combine
  if (red->condition) per_iteration += count_ops(red->condition).ops;
  double per_point = iterations * per_iteration;
  if (red->init) per_point += count_ops(red->init).ops;
  return points * per_point;
}

}  // namespace

double flop_count(const std::vector<Tensor>& outputs) {
  double total = 0;
  for (const Tensor& t : post_order_tensors(outputs)) {
    if (auto op = t.compute_op()) total += stage_flops(*op);
  }
  return total;
}

}  // namespace tensortune::te
