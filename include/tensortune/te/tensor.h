/// \file
/// Tensor expressions: placeholders and computes, the DAG they form, and the
/// reduction helpers. A Tensor is an ir::ProducerNode, so `A(i, j)` is an
/// ir::ProducerLoad that keeps the producing operation alive: the tensors of a
/// workload form one node graph that saves and loads as a DAG.
///
/// Rules every compute obeys (checked by compute() and again when a graph is
/// loaded), because the schedule and lowering layers rely on them:
///  - every dimension has an extent in [1, 2^31 - 1]; a 0-d tensor (shape {})
///    has one element;
///  - element types are scalar (no vector lanes);
///  - a reduction may only be the whole body (`C(i, j) = sum(...)`), never a
///    sub-expression: a computation like `sum(...) / n` takes two stages;
///  - the body uses no variables other than the compute's axes and the axes
///    of its own reduction, and reads only te tensors, with one integer index
///    per dimension.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "tensortune/ir/expr.h"

namespace tensortune::te {

using ir::DataType;
using ir::Expr;
using ir::IterVar;
using ir::Var;

/// Base of the operations that produce tensors.
struct OperationNode : Object {
  std::string name;
};

/// An input: a tensor whose values come from outside.
struct PlaceholderOpNode : OperationNode {
  std::vector<int64_t> shape;
  DataType dtype;
  TT_NODE(PlaceholderOpNode, "te.PlaceholderOp")
  static void declare(FieldList<PlaceholderOpNode>& f);
};

/// out[axis...] = body, over the iteration space `axis` (one spatial IterVar per
/// output dimension). `tag` names the op family ("matmul", "conv2d_nchw",
/// "elemwise", ...), which schedule rules may use. `attrs` holds the op's
/// parameters (strides, padding, ...) as data.
struct ComputeOpNode : OperationNode {
  std::string tag;
  std::vector<IterVar> axis;
  Expr body;
  nlohmann::json attrs = nlohmann::json::object();
  TT_NODE(ComputeOpNode, "te.ComputeOp")
  static void declare(FieldList<ComputeOpNode>& f);
};

using Operation = Ref<OperationNode>;

/// The output of an operation.
struct TensorNode : ir::ProducerNode {
  Operation op;
  TT_NODE(TensorNode, "te.Tensor")
  static void declare(FieldList<TensorNode>& f);
};

class Tensor : public Ref<TensorNode> {
 public:
  using Ref<TensorNode>::Ref;
  const std::vector<int64_t>& shape() const { return get()->shape; }
  DataType dtype() const { return get()->dtype; }
  const std::string& name() const { return get()->name; }
  int ndim() const { return static_cast<int>(get()->shape.size()); }
  /// Reads element `indices` (one per dimension; a wrong count is a user error).
  Expr operator()(std::vector<Expr> indices) const;
  template <class... Index>
  Expr operator()(Index... index) const {
    return (*this)(std::vector<Expr>{Expr(index)...});
  }
  /// The producing operation if it is a compute, else null.
  Ref<ComputeOpNode> compute_op() const { return get()->op.as<ComputeOpNode>(); }
  bool is_placeholder() const { return static_cast<bool>(get()->op.as<PlaceholderOpNode>()); }
  /// Number of elements (the product of the shape; 1 for a 0-d tensor).
  int64_t size() const;
};

/// A new input tensor.
Tensor placeholder(std::vector<int64_t> shape, DataType dtype = DataType::float32(),
                   std::string name = "placeholder");

/// A new computed tensor: `fcompute` receives one int32 variable per dimension
/// (named i, j, k, l for up to four dimensions, else i0, i1, ...). The tensor's
/// dtype is the body's. Breaking a rule of the file comment is a user error.
Tensor compute(std::vector<int64_t> shape,
               const std::function<Expr(const std::vector<Var>&)>& fcompute,
               std::string name = "compute", std::string tag = "",
               nlohmann::json attrs = nlohmann::json::object());

/// A new reduction axis over [0, extent).
IterVar reduce_axis(int64_t extent, std::string name = "k");

/// Reductions over `axis`, optionally only where `condition` holds.
Expr sum(Expr source, std::vector<IterVar> axis, Expr condition = Expr());
Expr max(Expr source, std::vector<IterVar> axis, Expr condition = Expr());
Expr min(Expr source, std::vector<IterVar> axis, Expr condition = Expr());
Expr prod(Expr source, std::vector<IterVar> axis, Expr condition = Expr());

/// The tensors a compute reads directly, in first-use order, each once.
std::vector<Tensor> input_tensors(const Tensor& t);

/// Every tensor `outputs` depend on (themselves included), producers first,
/// each once; deterministic (no pointer-keyed ordering).
std::vector<Tensor> post_order_tensors(const std::vector<Tensor>& outputs);

/// The placeholders `outputs` depend on, in post order, each once.
std::vector<Tensor> placeholder_inputs(const std::vector<Tensor>& outputs);

/// Floating-point operation count of computing `outputs` (every compute stage
/// they depend on, each once). Per stage: the arithmetic, comparison and
/// intrinsic operations on data values in the body (operations whose operands
/// depend on a tensor element; index arithmetic and select/cast/load count 0),
/// times the number of points of its iteration space, reduction axes included;
/// a reduction's combine counts one operation per iteration and its init one
/// evaluation per output element. A matmul of M x K by K x N counts 2*M*N*K;
/// pad, reshape, transpose and the like count 0.
double flop_count(const std::vector<Tensor>& outputs);

}  // namespace tensortune::te
