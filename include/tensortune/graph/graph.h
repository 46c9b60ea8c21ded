/// \file
/// The graph IR: an immutable, typed dataflow graph of operator calls over
/// the model's inputs and constants (its weights). Every value knows its
/// shape and dtype, inferred from its operator when the call is made (and
/// checked again when a graph is loaded). Like every IR here it is made of
/// reflected nodes: one field list per node drives save, load, structural
/// equality, hash, deep copy and printing, and nothing can change a node
/// once made, so a pass returns a new graph and can never alter the user's.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "tensortune/te/ndarray.h"
#include "tensortune/te/operator.h"

namespace tensortune::graph {

/// Constant data: the bytes of a dense row-major array, shared, never
/// changed. Saved as its dtype, shape and bytes (base64).
class TensorData {
 public:
  static constexpr const char* kTypeName = "tensor data";
  TensorData() = default;
  explicit TensorData(te::NDArray array);
  const te::NDArray& array() const { return *array_; }
  bool defined() const { return static_cast<bool>(array_); }

  nlohmann::json to_json() const;
  static TensorData from_json(const nlohmann::json& j);
  uint64_t hash() const;
  std::string str() const;
  bool operator==(const TensorData& other) const;

 private:
  std::shared_ptr<const te::NDArray> array_;
};

/// A value of the graph: its shape and dtype.
struct ValueNode : Object {
  std::vector<int64_t> shape;
  ir::DataType dtype;
};
using Value = Ref<ValueNode>;

/// An input of the model, by name.
struct InputNode : ValueNode {
  std::string name;
  TT_NODE(InputNode, "graph.Input")
  static void declare(FieldList<InputNode>& f);
};

/// A constant (a weight, or anything folded to one).
struct ConstantNode : ValueNode {
  std::string name;  ///< where it came from, for messages
  TensorData data;
  TT_NODE(ConstantNode, "graph.Constant")
  static void declare(FieldList<ConstantNode>& f);
};

/// An operator applied to values: the only way values are computed.
struct CallNode : ValueNode {
  std::string op;  ///< a registered operator (op.h)
  std::vector<Value> args;
  te::Attrs attrs;   ///< the operator's attributes node, or null for none
  std::string name;  ///< the model's name for it (an ONNX node name), for messages
  TT_NODE(CallNode, "graph.Call")
  static void declare(FieldList<CallNode>& f);
};

/// A model: its inputs, and its named outputs.
struct GraphNode : Object {
  std::vector<Ref<InputNode>> inputs;
  std::vector<Value> outputs;
  std::vector<std::string> output_names;
  TT_NODE(GraphNode, "graph.Graph")
  static void declare(FieldList<GraphNode>& f);
};

class Graph : public Ref<GraphNode> {
 public:
  using Ref<GraphNode>::Ref;
  /// A graph; kInvalidArgument when a value the outputs use is an input not
  /// listed, names repeat, or the counts of outputs and names differ.
  static Graph make(std::vector<Ref<InputNode>> inputs, std::vector<Value> outputs,
                    std::vector<std::string> output_names);
  const std::vector<Ref<InputNode>>& inputs() const { return get()->inputs; }
  const std::vector<Value>& outputs() const { return get()->outputs; }
};

/// A new input.
Ref<InputNode> input(std::string name, std::vector<int64_t> shape, ir::DataType dtype);
/// A new constant holding `array`.
Value constant(te::NDArray array, std::string name = "");
/// A call of `op` (registered) on `args`; its type is inferred, and an
/// argument or attribute the operator does not accept is a kInvalidArgument
/// error naming the operator, the call's name and what is wrong.
Value call(const std::string& op, std::vector<Value> args, te::Attrs attrs = te::Attrs(),
           std::string name = "");

/// The calls of `graph`, producers before consumers, each once.
std::vector<Ref<CallNode>> calls_in_order(const Graph& graph);

/// A readable listing: one line per call, `%3 = nn.conv2d(%1, %w2) [1,64,56,56] float32`.
std::string to_string(const Graph& graph);

}  // namespace tensortune::graph
