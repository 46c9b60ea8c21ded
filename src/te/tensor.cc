#include "tensortune/te/tensor.h"

#include <limits>
#include <unordered_set>

#include "tensortune/ir/expr_functor.h"
#include "tensortune/support/checked.h"
#include "tensortune/support/shape.h"
#include "tensortune/support/strings.h"

namespace tensortune::te {
namespace {

constexpr int64_t kMaxExtent = std::numeric_limits<int32_t>::max();

void check_shape(const std::vector<int64_t>& shape, std::string_view what) {
  for (size_t d = 0; d < shape.size(); ++d) {
    // Loop variables are int32, so every extent must fit in one.
    if (shape[d] < 1 || shape[d] > kMaxExtent) {
      fail(ErrorKind::kInvalidArgument, what, ": dimension ", d, " of shape ", shape_text(shape),
           " is ", shape[d], "; extents must be in [1, ", kMaxExtent, "]");
    }
  }
}

void check_element_type(DataType dtype, std::string_view what) {
  if (!dtype.is_scalar()) {
    fail(ErrorKind::kTypeMismatch, what, ": element type ", dtype.str(),
         " has vector lanes; tensors hold scalars");
  }
}

// The checks of the file comment of tensor.h; run by compute() and on load.
void validate_compute(const ComputeOpNode& op) {
  const std::string what = "compute '" + op.name + "'";
  if (!op.attrs.is_object()) {
    fail(ErrorKind::kInvalidArgument, what, ": attrs must be a JSON object, got ", op.attrs.dump());
  }
  std::unordered_set<const ir::VarNode*> bound;
  for (size_t d = 0; d < op.axis.size(); ++d) {
    const IterVar& iv = op.axis[d];
    if (!iv || !iv->var) fail(ErrorKind::kInvalidArgument, what, ": axis ", d, " is null");
    if (iv->kind != ir::IterKind::kSpatial) {
      fail(ErrorKind::kInvalidArgument, what, ": axis ", d, " ('", iv->var->name,
           "') is a reduction axis; a compute's axes are spatial");
    }
    if (iv->extent < 1 || iv->extent > kMaxExtent) {
      fail(ErrorKind::kInvalidArgument, what, ": axis ", d, " has extent ", iv->extent,
           "; extents must be in [1, ", kMaxExtent, "]");
    }
    if (!iv->var->dtype.is_integer() || !iv->var->dtype.is_scalar()) {
      fail(ErrorKind::kTypeMismatch, what, ": axis ", d, " variable has type ",
           iv->var->dtype.str(), "; loop variables are integers");
    }
    if (!bound.insert(iv->var.get()).second) {
      fail(ErrorKind::kInvalidArgument, what, ": axis variable '", iv->var->name,
           "' is used for two axes");
    }
  }
  if (!op.body) fail(ErrorKind::kInvalidArgument, what, ": the body is null");
  check_element_type(op.body.dtype(), what);

  // A top-level reduction binds its own axes; reductions anywhere else are rejected.
  std::vector<Expr> parts{op.body};
  if (const auto* red = op.body.as<ir::ReduceNode>().get()) {
    for (const IterVar& iv : red->axis) {
      if (!iv || !iv->var) fail(ErrorKind::kInvalidArgument, what, ": a reduction axis is null");
      if (iv->kind != ir::IterKind::kReduce) {
        fail(ErrorKind::kInvalidArgument, what, ": reduction axis '", iv->var->name,
             "' is not a reduction IterVar (make it with reduce_axis)");
      }
      if (iv->extent < 1 || iv->extent > kMaxExtent) {
        fail(ErrorKind::kInvalidArgument, what, ": reduction axis '", iv->var->name,
             "' has extent ", iv->extent, "; extents must be in [1, ", kMaxExtent, "]");
      }
      if (!bound.insert(iv->var.get()).second) {
        fail(ErrorKind::kInvalidArgument, what, ": variable '", iv->var->name,
             "' is bound twice (reused as an axis of the compute or of its reduction)");
      }
    }
    parts = {red->source};
    if (red->condition) parts.push_back(red->condition);
    if (red->init) parts.push_back(red->init);
  }
  for (const Expr& part : parts) {
    ir::visit_pre_order(part, [&](const Expr& e) {
      if (e.kind() == ir::ExprKind::kReduce) {
        fail(ErrorKind::kInvalidArgument, what,
             ": a reduction may only be the whole body of a compute, found one inside ",
             ir::to_string(op.body), "; compute it as a separate stage");
      }
      if (auto var = e.as<ir::VarNode>(); var && !bound.count(var.get())) {
        fail(ErrorKind::kInvalidArgument, what, ": the body uses variable '", var->name,
             "', which is neither an axis of this compute nor of its reduction");
      }
      if (auto load = e.as<ir::ProducerLoadNode>()) {
        auto tensor = load->producer.as<TensorNode>();
        if (!tensor) {
          fail(ErrorKind::kTypeMismatch, what, ": the body reads '",
               load->producer ? load->producer->name : std::string("null"),
               "', which is not a te tensor");
        }
        if (load->indices.size() != tensor->shape.size()) {
          fail(ErrorKind::kInvalidArgument, what, ": tensor '", tensor->name, "' has ",
               tensor->shape.size(), " dimensions but is read with ", load->indices.size(),
               " indices");
        }
      }
    });
  }
}

void validate_tensor(const TensorNode& t) {
  const std::string what = "tensor '" + t.name + "'";
  if (!t.op) fail(ErrorKind::kInvalidArgument, what, ": no producing operation");
  check_shape(t.shape, what);
  check_element_type(t.dtype, what);
  checked_bytes(t.shape, t.dtype.bytes(), what);
  if (auto ph = t.op.as<PlaceholderOpNode>()) {
    if (ph->shape != t.shape || ph->dtype != t.dtype) {
      fail(ErrorKind::kInvalidArgument, what, ": shape ", shape_text(t.shape), " and type ",
           t.dtype.str(), " differ from its placeholder's ", shape_text(ph->shape), " and ",
           ph->dtype.str());
    }
  } else if (auto c = t.op.as<ComputeOpNode>()) {
    std::vector<int64_t> extents;
    for (const IterVar& iv : c->axis) extents.push_back(iv->extent);
    if (extents != t.shape) {
      fail(ErrorKind::kInvalidArgument, what, ": shape ", shape_text(t.shape),
           " differs from the extents ", shape_text(extents), " of compute '", c->name, "'");
    }
    if (c->body.dtype() != t.dtype) {
      fail(ErrorKind::kTypeMismatch, what, ": type ", t.dtype.str(), " differs from the type ",
           c->body.dtype().str(), " of the body of compute '", c->name, "'");
    }
  } else {
    fail(ErrorKind::kTypeMismatch, what, ": unknown operation type ", t.op->type_key());
  }
}

std::string axis_name(size_t d, size_t ndim) {
  static constexpr const char* kShort[] = {"i", "j", "k", "l"};
  if (ndim <= 4) return kShort[d];
  return "i" + std::to_string(d);
}

}  // namespace

void PlaceholderOpNode::declare(FieldList<PlaceholderOpNode>& f) {
  f.def<std::string>("name", &PlaceholderOpNode::name)
      .def("shape", &PlaceholderOpNode::shape)
      .def("dtype", &PlaceholderOpNode::dtype)
      .validate([](const PlaceholderOpNode& n) {
        check_shape(n.shape, "placeholder '" + n.name + "'");
        check_element_type(n.dtype, "placeholder '" + n.name + "'");
      });
}

void ComputeOpNode::declare(FieldList<ComputeOpNode>& f) {
  // The axes come before the body: they bind the variables the body uses.
  f.def<std::string>("name", &ComputeOpNode::name)
      .def("tag", &ComputeOpNode::tag)
      .def("axis", &ComputeOpNode::axis)
      .def("body", &ComputeOpNode::body)
      .def("attrs", &ComputeOpNode::attrs)
      .validate(validate_compute);
}

void TensorNode::declare(FieldList<TensorNode>& f) {
  f.def<std::string>("name", &TensorNode::name)
      .def<std::vector<int64_t>>("shape", &TensorNode::shape)
      .def<DataType>("dtype", &TensorNode::dtype)
      .def("op", &TensorNode::op)
      .validate(validate_tensor);
}

TT_REGISTER_NODE(PlaceholderOpNode);
TT_REGISTER_NODE(ComputeOpNode);
TT_REGISTER_NODE(TensorNode);

int64_t Tensor::size() const { return checked_elements(shape(), "tensor '" + name() + "'"); }

Expr Tensor::operator()(std::vector<Expr> indices) const {
  TT_CHECK(get(), kInvalidArgument, "indexing a null tensor");
  if (indices.size() != shape().size()) {
    fail(ErrorKind::kInvalidArgument, "tensor '", name(), "' of shape ", shape_text(shape()),
         " has ", shape().size(), " dimensions but is indexed with ", indices.size(), " indices");
  }
  for (size_t d = 0; d < indices.size(); ++d) {
    if (!indices[d]) {
      fail(ErrorKind::kInvalidArgument, "index ", d, " of tensor '", name(), "' is null");
    }
    if (!indices[d].dtype().is_integer() || !indices[d].dtype().is_scalar()) {
      fail(ErrorKind::kTypeMismatch, "index ", d, " of tensor '", name(),
           "' must be a scalar integer, got ", indices[d].dtype().str(), " expression ",
           ir::to_string(indices[d]));
    }
  }
  return ir::producer_load(Ref<ir::ProducerNode>(*this), std::move(indices));
}

Tensor placeholder(std::vector<int64_t> shape, DataType dtype, std::string name) {
  check_shape(shape, "placeholder '" + name + "'");
  check_element_type(dtype, "placeholder '" + name + "'");
  checked_bytes(shape, dtype.bytes(), "placeholder '" + name + "'");
  auto op = make_node<PlaceholderOpNode>();
  op->name = name;
  op->shape = shape;
  op->dtype = dtype;
  auto t = make_node<TensorNode>();
  t->name = std::move(name);
  t->shape = std::move(shape);
  t->dtype = dtype;
  t->op = Operation(std::move(op));
  return Tensor(std::move(t));
}

Tensor compute(std::vector<int64_t> shape,
               const std::function<Expr(const std::vector<Var>&)>& fcompute, std::string name,
               std::string tag, nlohmann::json attrs) {
  check_shape(shape, "compute '" + name + "'");
  auto op = make_node<ComputeOpNode>();
  std::vector<Var> vars;
  for (size_t d = 0; d < shape.size(); ++d) {
    op->axis.push_back(IterVar::make(axis_name(d, shape.size()), shape[d], ir::IterKind::kSpatial));
    vars.push_back(op->axis.back()->var);
  }
  op->body = fcompute(vars);
  op->name = name;
  op->tag = std::move(tag);
  op->attrs = std::move(attrs);
  validate_compute(*op);
  auto t = make_node<TensorNode>();
  t->name = std::move(name);
  t->shape = std::move(shape);
  t->dtype = op->body.dtype();
  checked_bytes(t->shape, t->dtype.bytes(), "compute '" + t->name + "'");
  t->op = Operation(std::move(op));
  return Tensor(std::move(t));
}

IterVar reduce_axis(int64_t extent, std::string name) {
  if (extent < 1 || extent > kMaxExtent) {
    fail(ErrorKind::kInvalidArgument, "reduction axis '", name, "' has extent ", extent,
         "; extents must be in [1, ", kMaxExtent, "]");
  }
  return IterVar::make(std::move(name), extent, ir::IterKind::kReduce);
}

Expr sum(Expr source, std::vector<IterVar> axis, Expr condition) {
  return ir::reduce(ir::ReduceOp::kSum, std::move(source), std::move(axis), std::move(condition));
}
Expr max(Expr source, std::vector<IterVar> axis, Expr condition) {
  return ir::reduce(ir::ReduceOp::kMax, std::move(source), std::move(axis), std::move(condition));
}
Expr min(Expr source, std::vector<IterVar> axis, Expr condition) {
  return ir::reduce(ir::ReduceOp::kMin, std::move(source), std::move(axis), std::move(condition));
}
Expr prod(Expr source, std::vector<IterVar> axis, Expr condition) {
  return ir::reduce(ir::ReduceOp::kProd, std::move(source), std::move(axis), std::move(condition));
}

std::vector<Tensor> input_tensors(const Tensor& t) {
  std::vector<Tensor> out;
  auto op = t.compute_op();
  if (!op) return out;
  std::unordered_set<const TensorNode*> seen;  // membership only; order comes from the body
  ir::visit_pre_order(op->body, [&](const Expr& e) {
    if (e.kind() != ir::ExprKind::kProducerLoad) return;
    auto tensor = static_cast<const ir::ProducerLoadNode&>(*e).producer.as<TensorNode>();
    TT_ICHECK(tensor, "compute '", op->name, "' reads a producer that is not a tensor");
    if (seen.insert(tensor.get()).second) out.push_back(Tensor(tensor.ptr()));
  });
  return out;
}

std::vector<Tensor> post_order_tensors(const std::vector<Tensor>& outputs) {
  std::vector<Tensor> order;
  std::unordered_set<const TensorNode*> done;  // membership only; order comes from the DFS
  struct Frame {
    Tensor tensor;
    std::vector<Tensor> inputs;
    size_t next = 0;
  };
  // Iterative, so that a long chain of stages cannot overflow the stack.
  std::vector<Frame> stack;
  for (const Tensor& out : outputs) {
    TT_CHECK(out, kInvalidArgument, "an output tensor is null");
    if (done.count(out.get())) continue;
    stack.push_back({out, input_tensors(out), 0});
    while (!stack.empty()) {
      Frame& top = stack.back();
      if (top.next < top.inputs.size()) {
        Tensor next = top.inputs[top.next++];
        if (!done.count(next.get())) stack.push_back({next, input_tensors(next), 0});
        continue;
      }
      if (done.insert(top.tensor.get()).second) order.push_back(top.tensor);
      stack.pop_back();
    }
  }
  return order;
}

std::vector<Tensor> placeholder_inputs(const std::vector<Tensor>& outputs) {
  std::vector<Tensor> out;
  for (const Tensor& t : post_order_tensors(outputs)) {
    if (t.is_placeholder()) out.push_back(t);
  }
  return out;
}

}  // namespace tensortune::te
