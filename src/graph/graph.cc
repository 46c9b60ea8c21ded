#include "tensortune/graph/graph.h"

#include <algorithm>
#include <cstring>
#include <map>
#include <set>
#include <sstream>
#include <unordered_map>
#include <unordered_set>

#include "tensortune/object/serialize.h"
#include "tensortune/object/structural.h"
#include "tensortune/support/checked.h"
#include "tensortune/support/hash.h"
#include "tensortune/support/shape.h"
#include "tensortune/support/strings.h"

namespace tensortune::graph {

// ---------------------------------------------------------------------------
// TensorData

TensorData::TensorData(te::NDArray array)
    : array_(std::make_shared<const te::NDArray>(std::move(array))) {}

nlohmann::json TensorData::to_json() const {
  if (!array_) return nullptr;
  const auto* bytes = static_cast<const char*>(array_->data());
  return {{"dtype", array_->dtype().str()},
          {"shape", array_->shape()},
          {"data", base64_encode(std::string_view(bytes, array_->nbytes()))}};
}

TensorData TensorData::from_json(const nlohmann::json& j) {
  if (j.is_null()) return TensorData();
  TT_CHECK(j.is_object() && j.contains("dtype") && j.contains("shape") && j.contains("data") &&
               j["dtype"].is_string() && j["shape"].is_array() && j["data"].is_string(),
           kParse, "tensor data must be {\"dtype\", \"shape\", \"data\" (base64)}");
  ir::DataType dtype = ir::DataType::parse(j["dtype"].get<std::string>());
  std::vector<int64_t> shape;
  for (const auto& d : j["shape"]) {
    TT_CHECK(d.is_number_integer() && d.get<int64_t>() >= 0, kParse,
             "tensor data: shape extents must be integers >= 0");
    shape.push_back(d.get<int64_t>());
  }
  te::NDArray array(dtype, shape);
  std::string bytes = base64_decode(j["data"].get<std::string>());
  TT_CHECK(bytes.size() == array.nbytes(), kParse, "tensor data ", array.describe(), " needs ",
           array.nbytes(), " bytes, has ", bytes.size());
  std::memcpy(array.data(), bytes.data(), bytes.size());
  return TensorData(std::move(array));
}

uint64_t TensorData::hash() const {
  if (!array_) return 0x6e756c6cULL;
  uint64_t h = hash_string(array_->dtype().str());
  for (int64_t d : array_->shape()) h = hash_combine(h, static_cast<uint64_t>(d));
  return hash_combine(
      h, hash_string(std::string_view(static_cast<const char*>(array_->data()), array_->nbytes())));
}

std::string TensorData::str() const { return array_ ? array_->describe() : "null"; }

bool TensorData::operator==(const TensorData& other) const {
  if (array_ == other.array_) return true;
  if (!array_ || !other.array_) return false;
  return array_->dtype() == other.array_->dtype() && array_->shape() == other.array_->shape() &&
         std::memcmp(array_->data(), other.array_->data(), array_->nbytes()) == 0;
}

// ---------------------------------------------------------------------------
// Nodes

namespace {

std::string type_text(const std::vector<int64_t>& shape, ir::DataType dtype) {
  return dtype.str() + shape_text(shape);
}

te::TensorType type_of(const Value& v) { return {v->shape, v->dtype}; }

/// A call's type, from its operator's computation; the error names the call.
te::TensorType infer(const te::OpInfo& op, const std::vector<Value>& args,
                     const te::AttrsNode* attrs, const std::string& name) {
  const std::string where = "'" + op.name + "'" + (name.empty() ? "" : " (" + name + ")");
  std::vector<te::TensorType> types;
  for (const auto& a : args) {
    TT_CHECK(a, kInvalidArgument, where, ": a null argument");
    // A value of no elements is known, nothing: no kernel reads it.
    TT_CHECK(std::count(a->shape.begin(), a->shape.end(), 0) == 0, kInvalidArgument, where,
             ": an argument of no elements, ", type_text(a->shape, a->dtype));
    types.push_back(type_of(a));
  }
  try {
    return te::infer_type(op, types, attrs);
  } catch (const UserError& e) {
    fail(e.kind(), where, ": ", e.what());
  }
}

// Inputs and constants may hold no elements (a decoder's empty cache, a
// slice past the end): their data is known, nothing, and no kernel is made
// for them. A call's value is a kernel's output, at least one element.
void check_type(const ValueNode& v, std::string_view name, bool may_be_empty = false) {
  const int64_t least = may_be_empty ? 0 : 1;
  for (int64_t d : v.shape) {
    TT_CHECK(d >= least && d <= (int64_t{1} << 31) - 1, kInvalidArgument,
             "a graph value's extents must lie in [", least,
             ", 2^31 - 1]: ", type_text(v.shape, v.dtype));
  }
  TT_CHECK(v.dtype.lanes() == 1, kInvalidArgument, "graph values are of scalar types, not ",
           v.dtype.str());
  // Every later size (buffers, strides, loop bounds, FLOPs) derives from
  // these: a value too large to allocate is refused where it is made.
  checked_bytes(v.shape, v.dtype.bytes(),
                "the graph value '" + std::string(name.empty() ? "(unnamed)" : name) + "'");
}

}  // namespace

void InputNode::declare(FieldList<InputNode>& f) {
  f.def("name", &InputNode::name)
      .def("shape", &InputNode::shape)
      .def("dtype", &InputNode::dtype)
      .validate([](const InputNode& n) {
        TT_CHECK(!n.name.empty(), kInvalidArgument, "a graph input needs a name");
        check_type(n, n.name, true);
      });
}

void ConstantNode::declare(FieldList<ConstantNode>& f) {
  f.def("name", &ConstantNode::name)
      .def("shape", &ConstantNode::shape)
      .def("dtype", &ConstantNode::dtype)
      .def("data", &ConstantNode::data)
      .validate([](const ConstantNode& n) {
        TT_CHECK(n.data.defined(), kInvalidArgument, "constant '", n.name, "' has no data");
        TT_CHECK(n.data.array().shape() == n.shape && n.data.array().dtype() == n.dtype,
                 kInvalidArgument, "constant '", n.name, "' is ", type_text(n.shape, n.dtype),
                 " but holds ", n.data.str());
        check_type(n, n.name, true);
      });
}

void CallNode::declare(FieldList<CallNode>& f) {
  f.def("op", &CallNode::op)
      .def("args", &CallNode::args)
      .def("attrs", &CallNode::attrs)
      .def("name", &CallNode::name, kIgnoredByEquality)
      .def("shape", &CallNode::shape)
      .def("dtype", &CallNode::dtype)
      .validate([](const CallNode& n) {
        // A loaded call is checked as a new one is: its type must be what
        // its operator infers from its arguments.
        te::TensorType t = infer(te::find_op(n.op), n.args, n.attrs.get(), n.name);
        TT_CHECK(t.shape == n.shape && t.dtype == n.dtype, kInvalidArgument, "'", n.op, "' (",
                 n.name, ") is saved as ", type_text(n.shape, n.dtype), " but its arguments give ",
                 type_text(t.shape, t.dtype));
      });
}

void GraphNode::declare(FieldList<GraphNode>& f) {
  f.def("inputs", &GraphNode::inputs)
      .def("outputs", &GraphNode::outputs)
      .def("output_names", &GraphNode::output_names)
      .validate([](const GraphNode& g) {
        TT_CHECK(!g.outputs.empty() && g.outputs.size() == g.output_names.size(), kInvalidArgument,
                 "a graph needs outputs, one name each (has ", g.outputs.size(), " outputs and ",
                 g.output_names.size(), " names)");
        std::set<std::string> names;
        std::unordered_set<const Object*> inputs;
        for (const auto& in : g.inputs) {
          TT_CHECK(in, kInvalidArgument, "a graph input is null");
          TT_CHECK(names.insert(in->name).second, kInvalidArgument, "graph input name '", in->name,
                   "' is used twice");
          inputs.insert(in.get());
        }
        for (const auto& n : g.output_names) {
          TT_CHECK(names.insert(n).second, kInvalidArgument, "graph output name '", n,
                   "' is used twice (or is an input's)");
        }
        for (const auto& out : g.outputs) TT_CHECK(out, kInvalidArgument, "a graph output is null");
        // Every input a value depends on must be one of the graph's.
        std::vector<const ValueNode*> stack;
        std::unordered_set<const Object*> seen;
        for (const auto& out : g.outputs) stack.push_back(out.get());
        while (!stack.empty()) {
          const ValueNode* v = stack.back();
          stack.pop_back();
          if (!seen.insert(v).second) continue;
          if (auto in = dynamic_cast<const InputNode*>(v)) {
            TT_CHECK(inputs.count(in), kInvalidArgument, "the outputs use input '", in->name,
                     "', which is not among the graph's inputs");
          } else if (auto c = dynamic_cast<const CallNode*>(v)) {
            for (const auto& a : c->args) stack.push_back(a.get());
          }
        }
      });
}

TT_REGISTER_NODE(InputNode);
TT_REGISTER_NODE(ConstantNode);
TT_REGISTER_NODE(CallNode);
TT_REGISTER_NODE(GraphNode);

Graph Graph::make(std::vector<Ref<InputNode>> inputs, std::vector<Value> outputs,
                  std::vector<std::string> output_names) {
  auto n = make_node<GraphNode>();
  n->inputs = std::move(inputs);
  n->outputs = std::move(outputs);
  n->output_names = std::move(output_names);
  if (const auto& check = n->type_info().validate) check(*n);
  return Graph(std::move(n));
}

Ref<InputNode> input(std::string name, std::vector<int64_t> shape, ir::DataType dtype) {
  auto n = make_node<InputNode>();
  n->name = std::move(name);
  n->shape = std::move(shape);
  n->dtype = dtype;
  if (const auto& check = n->type_info().validate) check(*n);
  return Ref<InputNode>(std::move(n));
}

Value constant(te::NDArray array, std::string name) {
  auto n = make_node<ConstantNode>();
  n->name = std::move(name);
  n->shape = array.shape();
  n->dtype = array.dtype();
  n->data = TensorData(std::move(array));
  if (const auto& check = n->type_info().validate) check(*n);
  return Value(std::move(n));
}

Value call(const std::string& op, std::vector<Value> args, te::Attrs attrs, std::string name) {
  const te::OpInfo& info = te::find_op(op);
  te::TensorType t = infer(info, args, attrs.get(), name);
  auto n = make_node<CallNode>();
  n->op = op;
  n->args = std::move(args);
  n->attrs = std::move(attrs);
  n->name = std::move(name);
  n->shape = std::move(t.shape);
  n->dtype = t.dtype;
  check_type(*n, n->name);
  return Value(std::move(n));
}

std::vector<Ref<CallNode>> calls_in_order(const Graph& graph) {
  std::vector<Ref<CallNode>> out;
  for (const ObjectPtr& n : post_order(ObjectPtr(graph.ptr()))) {
    if (auto c = std::dynamic_pointer_cast<const CallNode>(n)) out.emplace_back(c);
  }
  return out;
}

std::string to_string(const Graph& graph) {
  std::ostringstream os;
  std::unordered_map<const Object*, std::string> names;
  auto name_of = [&](const ValueNode* v) -> std::string {
    auto it = names.find(v);
    if (it != names.end()) return it->second;
    if (auto in = dynamic_cast<const InputNode*>(v)) return "%" + in->name;
    if (auto c = dynamic_cast<const ConstantNode*>(v)) {
      return "$" + (c->name.empty() ? std::string("const") : c->name) + ":" +
             type_text(c->shape, c->dtype);
    }
    return "?";
  };
  os << "graph(";
  for (size_t i = 0; i < graph->inputs.size(); ++i) {
    const auto& in = graph->inputs[i];
    os << (i ? ", " : "") << "%" << in->name << ": " << type_text(in->shape, in->dtype);
  }
  os << ") {\n";
  int k = 0;
  for (const auto& c : calls_in_order(graph)) {
    std::string id = "%" + std::to_string(k++);
    std::vector<std::string> args;
    for (const auto& a : c->args) args.push_back(name_of(a.get()));
    os << "  " << id << " = " << c->op << "(" << join(args, ", ") << ")";
    if (c->attrs) os << " " << field_values(*c->attrs).dump();
    os << " -> " << type_text(c->shape, c->dtype);
    if (!c->name.empty()) os << "  # " << c->name;
    os << "\n";
    names[c.get()] = id;
  }
  for (size_t i = 0; i < graph->outputs.size(); ++i) {
    os << "  output " << graph->output_names[i] << " = " << name_of(graph->outputs[i].get())
       << "\n";
  }
  os << "}\n";
  return os.str();
}

}  // namespace tensortune::graph
