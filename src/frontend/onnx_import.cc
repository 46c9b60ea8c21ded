#include <onnx/onnx_pb.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <limits>
#include <map>
#include <numbers>
#include <numeric>
#include <optional>
#include <queue>
#include <set>
#include <tuple>

#include "tensortune/frontend/onnx.h"
#include "tensortune/graph/passes.h"
#include "tensortune/support/checked.h"
#include "tensortune/support/files.h"
#include "tensortune/support/shape.h"
#include "tensortune/support/strings.h"
#include "tensortune/te/npy.h"
#include "tensortune/te/ops.h"

namespace tensortune::frontend {
namespace {

using graph::Value;
using ir::DataType;
using te::Attrs;

// Every opset ONNX Runtime loads; the handlers follow each operator's
// versions within it.
constexpr int64_t kMinOpset = 1, kMaxOpset = 21;
/// A Loop or Scan runs at most this many iterations: each is unrolled.
constexpr int64_t kMaxIterations = 4096;

/// The ONNX name of an element type ("BFLOAT16"), or its number.
std::string onnx_type_name(int32_t elem_type) {
  if (onnx::TensorProto_DataType_IsValid(elem_type)) {
    return onnx::TensorProto_DataType_Name(static_cast<onnx::TensorProto_DataType>(elem_type));
  }
  return "number " + std::to_string(elem_type);
}

/// The element types the importer reads, with ours; one table for the
/// check, the conversion and the error's list.
constexpr std::pair<int32_t, DataType (*)()> kTypes[] = {
    {onnx::TensorProto::FLOAT, [] { return DataType::float32(); }},
    {onnx::TensorProto::DOUBLE, [] { return DataType::float64(); }},
    {onnx::TensorProto::FLOAT16, [] { return DataType::float16(); }},
    {onnx::TensorProto::BFLOAT16, [] { return DataType::bfloat16(); }},
    {onnx::TensorProto::INT64, [] { return DataType::int64(); }},
    {onnx::TensorProto::INT32, [] { return DataType::int32(); }},
    {onnx::TensorProto::INT16, [] { return DataType::int_(16); }},
    {onnx::TensorProto::INT8, [] { return DataType::int_(8); }},
    {onnx::TensorProto::UINT64, [] { return DataType::uint(64); }},
    {onnx::TensorProto::UINT32, [] { return DataType::uint(32); }},
    {onnx::TensorProto::UINT16, [] { return DataType::uint(16); }},
    {onnx::TensorProto::UINT8, [] { return DataType::uint(8); }},
    {onnx::TensorProto::BOOL, [] { return DataType::boolean(); }},
};

bool supported_type(int32_t elem_type) {
  return std::any_of(std::begin(kTypes), std::end(kTypes),
                     [&](const auto& t) { return t.first == elem_type; });
}

std::string supported_types_text() {
  std::vector<std::string> names;
  for (const auto& t : kTypes) names.push_back(onnx_type_name(t.first));
  return join(names, ", ");
}

DataType dtype_of(int32_t elem_type, const std::string& what) {
  for (const auto& t : kTypes) {
    if (t.first == elem_type) return t.second();
  }
  fail(ErrorKind::kInvalidArgument, what, " has element type ", onnx_type_name(elem_type),
       ", not supported (", supported_types_text(), ")");
}

/// The `nbytes` bytes of a tensor kept in a file beside the model (ONNX's
/// external data: a location relative to the model's folder, an offset and
/// a length). The location is data from the file: it must name a file
/// inside `model_dir`, and the bytes must be there.
std::string external_bytes(const onnx::TensorProto& t, const std::string& what,
                           const std::string& model_dir, size_t nbytes) {
  std::map<std::string, std::string> entry;
  for (const auto& kv : t.external_data()) entry[kv.key()] = kv.value();
  const std::string location = entry["location"];
  TT_CHECK(!location.empty(), kParse, what, " keeps its data in an external file but names none");
  TT_CHECK(!model_dir.empty(), kInvalidArgument, what, " keeps its data in the file '", location,
           "' beside the model, which can only be read when the model is read from its file");
  // An absolute location replaces model_dir in the join; ".." and links
  // are resolved by path_is_within.
  const std::string file = (std::filesystem::path(model_dir) / location).string();
  TT_CHECK(path_is_within(file, model_dir), kInvalidArgument, what, " keeps its data in '",
           location, "', which is not a relative path inside the model's folder");
  auto number = [&](const char* key, int64_t fallback) {
    long long v = fallback;
    if (entry.count(key)) {
      TT_CHECK(parse_int(entry[key], &v) && v >= 0, kParse, what, ": external data ", key, " '",
               entry[key], "' is not a size");
    }
    return static_cast<uint64_t>(v);
  };
  uint64_t offset = number("offset", 0), length = number("length", static_cast<int64_t>(nbytes));
  TT_CHECK(length == nbytes, kParse, what, " needs ", nbytes, " bytes but its external data has ",
           length);
  std::ifstream in(file, std::ios::binary);
  TT_CHECK(in, kNotFound, what, " keeps its data in '", location, "', which cannot be read");
  in.seekg(0, std::ios::end);
  const auto size = static_cast<uint64_t>(in.tellg());
  TT_CHECK(offset <= size && nbytes <= size - offset, kParse, what, ": '", location, "' holds ",
           size, " bytes, fewer than offset ", offset, " + ", nbytes);
  std::string bytes(nbytes, '\0');
  in.seekg(static_cast<std::streamoff>(offset));
  in.read(bytes.data(), static_cast<std::streamsize>(nbytes));
  TT_CHECK(in, kParse, what, ": reading '", location, "' failed");
  return bytes;
}

/// The array a TensorProto holds; external data is read from `model_dir`.
te::NDArray to_array(const onnx::TensorProto& t, const std::string& model_dir = "") {
  std::string what = "tensor '" + t.name() + "'";
  DataType dtype = dtype_of(t.data_type(), what);
  std::vector<int64_t> shape(t.dims().begin(), t.dims().end());
  for (int64_t d : shape) TT_CHECK(d >= 0, kParse, what, " has a negative dimension");
  te::NDArray a(dtype, shape);
  if (t.data_location() == onnx::TensorProto::EXTERNAL) {
    std::string bytes = external_bytes(t, what, model_dir, a.nbytes());
    std::memcpy(a.data(), bytes.data(), a.nbytes());
    return a;
  }
  const size_t n = static_cast<size_t>(a.size());
  if (t.has_raw_data()) {
    TT_CHECK(t.raw_data().size() == a.nbytes(), kParse, what, " is ", a.describe(), " (",
             a.nbytes(), " bytes) but holds ", t.raw_data().size(), " bytes");
    std::memcpy(a.data(), t.raw_data().data(), a.nbytes());
    return a;
  }
  auto expect = [&](size_t have) {
    TT_CHECK(have == n, kParse, what, " is ", a.describe(), " but holds ", have, " values");
  };
  switch (t.data_type()) {
    case onnx::TensorProto::FLOAT:
      expect(static_cast<size_t>(t.float_data_size()));
      std::memcpy(a.data(), t.float_data().data(), a.nbytes());
      break;
    case onnx::TensorProto::DOUBLE:
      expect(static_cast<size_t>(t.double_data_size()));
      std::memcpy(a.data(), t.double_data().data(), a.nbytes());
      break;
    case onnx::TensorProto::INT64:
      expect(static_cast<size_t>(t.int64_data_size()));
      std::memcpy(a.data(), t.int64_data().data(), a.nbytes());
      break;
    case onnx::TensorProto::UINT32:
    case onnx::TensorProto::UINT64:
      expect(static_cast<size_t>(t.uint64_data_size()));
      for (size_t i = 0; i < n; ++i) {
        a.set_int(static_cast<int64_t>(i),
                  static_cast<int64_t>(t.uint64_data(static_cast<int>(i))));
      }
      break;
    case onnx::TensorProto::FLOAT16:  // its bits, in int32_data
    case onnx::TensorProto::BFLOAT16: {
      expect(static_cast<size_t>(t.int32_data_size()));
      auto* out = static_cast<uint16_t*>(a.data());
      for (size_t i = 0; i < n; ++i)
        out[i] = static_cast<uint16_t>(t.int32_data(static_cast<int>(i)));
      break;
    }
    default:  // int32, int16, uint16, int8, uint8, bool: in int32_data
      expect(static_cast<size_t>(t.int32_data_size()));
      for (size_t i = 0; i < n; ++i)
        a.set_int(static_cast<int64_t>(i), t.int32_data(static_cast<int>(i)));
      break;
  }
  return a;
}

/// An int64 vector as a constant array.
te::NDArray int64_array(const std::vector<int64_t>& v) {
  te::NDArray a(DataType::int64(), {static_cast<int64_t>(v.size())});
  for (size_t i = 0; i < v.size(); ++i) a.set_int(static_cast<int64_t>(i), v[i]);
  return a;
}

std::vector<int64_t> ints_of(const te::NDArray& a) {
  std::vector<int64_t> out;
  for (int64_t i = 0; i < a.size(); ++i) {
    out.push_back(a.dtype().is_float() ? static_cast<int64_t>(a.get(i)) : a.get_int(i));
  }
  return out;
}

te::Attrs reshape_attrs(std::vector<int64_t> shape);

template <class T>
Ref<T> attrs(std::shared_ptr<T> n) {
  if (const auto& check = n->type_info().validate) check(*n);
  return Ref<T>(std::move(n));
}

/// Attribute `name` of `n`: `count` integers, or `count` times `fallback`
/// when it is absent.
std::vector<int64_t> sized_ints(const onnx::NodeProto& n, const char* name, int64_t fallback,
                                size_t count) {
  std::vector<int64_t> v;
  for (const auto& a : n.attribute()) {
    if (a.name() == name) v.assign(a.ints().begin(), a.ints().end());
  }
  if (v.empty()) v.assign(count, fallback);
  TT_CHECK(v.size() == count, kInvalidArgument, name, " has ", v.size(), " values, not ", count);
  return v;
}

std::vector<int64_t> window_pads(const std::string& auto_pad, std::vector<int64_t> pads,
                                 const std::vector<int64_t>& in, const std::vector<int64_t>& kernel,
                                 const std::vector<int64_t>& strides,
                                 const std::vector<int64_t>& dilations);

/// The extents of a pool's or convolution's window over `in`: pads from
/// auto_pad or explicit (all begins, then all ends), and the output extents.
struct Window {
  std::vector<int64_t> kernel, strides, dilations, begin, end, out;
};

Window window_of(const onnx::NodeProto& n, const std::vector<int64_t>& in,
                 std::vector<int64_t> kernel, bool ceil_mode) {
  const size_t k = in.size();
  Window w;
  w.kernel = std::move(kernel);
  TT_CHECK(w.kernel.size() == k, kInvalidArgument, "kernel_shape has ", w.kernel.size(),
           " values for a ", k, "-D window");
  w.strides = sized_ints(n, "strides", 1, k);
  w.dilations = sized_ints(n, "dilations", 1, k);
  std::string auto_pad = "NOTSET";
  for (const auto& a : n.attribute()) {
    if (a.name() == "auto_pad") auto_pad = a.s();
  }
  for (size_t d = 0; d < k; ++d) {
    TT_CHECK(w.strides[d] >= 1 && w.dilations[d] >= 1 && w.kernel[d] >= 1, kInvalidArgument,
             "strides, dilations and kernel_shape must be positive");
  }
  const std::vector<int64_t> pads =
      window_pads(auto_pad, sized_ints(n, "pads", 0, 2 * k), in, w.kernel, w.strides, w.dilations);
  for (size_t d = 0; d < k; ++d) {
    const int64_t span = (w.kernel[d] - 1) * w.dilations[d] + 1;
    const int64_t b = pads[d], e = pads[d + k];
    TT_CHECK(b >= 0 && e >= 0, kInvalidArgument, "negative pads are not supported");
    const int64_t room = in[d] + b + e - span;
    TT_CHECK(room >= 0, kInvalidArgument, "a window spanning ", span, " does not fit an extent of ",
             in[d], " padded by ", b, " and ", e);
    int64_t o = (ceil_mode ? (room + w.strides[d] - 1) / w.strides[d] : room / w.strides[d]) + 1;
    if (ceil_mode && (o - 1) * w.strides[d] >= in[d] + b) --o;  // starts past the input
    w.begin.push_back(b);
    w.end.push_back(e);
    w.out.push_back(o);
  }
  return w;
}

class Importer {
 public:
  /// `model_dir`: the folder of the model's file, where external data is; "" for none.
  Importer(const OnnxImportOptions& options, std::string model_dir)
      : options_(options), model_dir_(std::move(model_dir)) {}

  graph::Graph run(const onnx::ModelProto& model) {
    for (const auto& o : model.opset_import()) {
      if (o.domain().empty() || o.domain() == "ai.onnx") opset_ = o.version();
    }
    TT_CHECK(model.has_graph(), kParse, "not an ONNX model: it has no graph");
    if (opset_ == 0) {
      // Only other domains (ONNX's training operators): each of its
      // operators is then a gap of its own.
      add_gap("opset", "the model declares no ai.onnx opset", "", "");
      opset_ = kMaxOpset;
    } else if (opset_ < kMinOpset || opset_ > kMaxOpset) {
      add_gap("opset",
              "the model uses ONNX opset " + std::to_string(opset_) + "; supported are opsets " +
                  std::to_string(kMinOpset) + " to " + std::to_string(kMaxOpset),
              "", "");
    }
    const onnx::GraphProto& g = model.graph();
    check_names_are_utf8(g);
    for (const auto& f : model.functions()) {
      TT_CHECK(functions_.emplace(std::pair(f.domain(), f.name()), &f).second, kParse,
               "the model defines function '", f.name(), "' of domain '", f.domain(), "' twice");
    }
    for (const auto& init : g.initializer()) import_initializer(init);
    std::set<std::string> given;
    for (const auto& [name, shape] : options_.input_shapes) given.insert(name);
    std::set<std::string> fixed;
    for (const auto& [name, value] : options_.input_values) fixed.insert(name);
    for (const auto& in : g.input()) {
      if (values_.count(in.name()) || failed_.count(in.name())) continue;  // an initializer
      given.erase(in.name());
      if (auto it = options_.input_values.find(in.name()); it != options_.input_values.end()) {
        fixed.erase(in.name());
        values_[in.name()] = fixed_input(in, it->second);
        continue;
      }
      int32_t type = in.type().tensor_type().elem_type();
      if (in.type().has_tensor_type() && !supported_type(type)) {
        add_gap("dtype", onnx_type_name(type), "", in.name());
        failed_.insert(in.name());
        continue;
      }
      try {
        inputs_.push_back(make_input(in));
      } catch (const UserError& e) {
        add_gap("input", e.what(), "", in.name());
        failed_.insert(in.name());
        continue;
      }
      values_[in.name()] = Value(inputs_.back());
    }
    TT_CHECK(given.empty(), kInvalidArgument, "--input-shape names '", *given.begin(),
             "', which is not an input of the model");
    TT_CHECK(fixed.empty(), kInvalidArgument, "--input-value names '", *fixed.begin(),
             "', which is not an input of the model");
    for (int i : topological_order(g)) import_node(g.node(i), i);
    std::vector<Value> outputs;
    std::vector<std::string> names;
    for (const auto& out : g.output()) {
      if (failed_.count(out.name())) continue;  // computed from a gap
      if (unavailable_.count(out.name())) {
        add_unavailable_gap(out.name());
        continue;
      }
      auto it = values_.find(out.name());
      TT_CHECK(it != values_.end(), kParse, "graph output '", out.name(),
               "' is computed by no node");
      TT_CHECK(it->second, kParse, "graph output '", out.name(), "' is an empty tensor");
      check_declared_shape(out, it->second);
      outputs.push_back(it->second);
      names.push_back(out.name());
    }
    if (!gaps_.empty()) throw OnnxUnsupportedError(gaps_);
    TT_CHECK(!outputs.empty(), kParse, "the model has no outputs");
    return graph::Graph::make(inputs_, outputs, names);
  }

  /// The ONNX op types it maps, sorted.
  std::vector<std::string> handled_ops() {
    std::vector<std::string> out;
    for (const auto& [name, h] : handlers()) out.push_back(name);
    return out;
  }

 private:
  using Handler =
      std::function<std::vector<Value>(const onnx::NodeProto&, const std::vector<Value>&)>;

  /// The nodes of `g` in an order where each comes after the nodes whose
  /// outputs it reads: the file's own order wherever that is one (exporters
  /// write files whose nodes are not sorted; ONNX Runtime loads them). A
  /// cycle is a kParse error naming its nodes.
  static std::vector<int> topological_order(const onnx::GraphProto& g) {
    const int count = g.node_size();
    std::map<std::string, int> producer;
    for (int i = 0; i < count; ++i) {
      for (const auto& out : g.node(i).output()) {
        if (!out.empty()) producer.emplace(out, i);  // a second producer is refused on import
      }
    }
    std::vector<int> waiting(static_cast<size_t>(count), 0);
    std::vector<std::vector<int>> readers(static_cast<size_t>(count));
    for (int i = 0; i < count; ++i) {
      for (const auto& in : g.node(i).input()) {
        auto it = producer.find(in);
        if (in.empty() || it == producer.end()) continue;
        ++waiting[static_cast<size_t>(i)];
        readers[static_cast<size_t>(it->second)].push_back(i);
      }
    }
    // The smallest ready index first, so that a sorted file keeps its order.
    std::priority_queue<int, std::vector<int>, std::greater<>> ready;
    for (int i = 0; i < count; ++i) {
      if (waiting[static_cast<size_t>(i)] == 0) ready.push(i);
    }
    std::vector<int> order;
    while (!ready.empty()) {
      int i = ready.top();
      ready.pop();
      order.push_back(i);
      for (int r : readers[static_cast<size_t>(i)]) {
        if (--waiting[static_cast<size_t>(r)] == 0) ready.push(r);
      }
    }
    if (static_cast<int>(order.size()) < count) {
      // The nodes left wait on a cycle. Those only downstream of it are
      // peeled off (last readers first), leaving the cycle to name.
      std::vector<bool> left(static_cast<size_t>(count), false);
      for (int i = 0; i < count; ++i)
        left[static_cast<size_t>(i)] = waiting[static_cast<size_t>(i)] > 0;
      for (bool peeled = true; peeled;) {
        peeled = false;
        for (int i = 0; i < count; ++i) {
          const auto& rs = readers[static_cast<size_t>(i)];
          if (left[static_cast<size_t>(i)] && std::none_of(rs.begin(), rs.end(), [&](int r) {
                return left[static_cast<size_t>(r)];
              })) {
            left[static_cast<size_t>(i)] = false;
            peeled = true;
          }
        }
      }
      std::vector<std::string> cycle;
      for (int i = 0; i < count; ++i) {
        if (left[static_cast<size_t>(i)]) cycle.push_back("'" + node_label(g.node(i), i) + "'");
      }
      fail(ErrorKind::kParse, "the nodes ", join(cycle, ", "),
           " read each other's outputs in a cycle");
    }
    return order;
  }

  static std::string node_label(const onnx::NodeProto& n, int index) {
    return n.name().empty() ? n.op_type() + " #" + std::to_string(index) : n.name();
  }

  /// A weight as a constant value; an element type or a storage that is
  /// not supported is a gap, and the value is left uncomputed.
  void import_initializer(const onnx::TensorProto& init) {
    if (!supported_type(init.data_type())) {
      add_gap("dtype", onnx_type_name(init.data_type()), "", init.name());
      failed_.insert(init.name());
      return;
    }
    te::NDArray a;
    try {
      a = to_array(init, model_dir_);
    } catch (const UserError& e) {
      if (e.kind() == ErrorKind::kParse) throw;
      add_gap("tensor", e.what(), "", init.name());
      failed_.insert(init.name());
      return;
    }
    // An empty tensor (Resize's roi, an unused scales) holds nothing; most
    // operators read it as an omitted input (import_node).
    values_[init.name()] = graph::constant(std::move(a), init.name());
  }

  /// Notes a gap at `where`: one entry per kind, what and operator.
  void add_gap(const std::string& kind, const std::string& what, const std::string& op_type,
               const std::string& where) {
    auto it = std::find_if(gaps_.begin(), gaps_.end(), [&](const OnnxGap& g) {
      return g.kind == kind && g.what == what && g.op_type == op_type;
    });
    if (it == gaps_.end()) {
      gaps_.push_back({kind, what, op_type, {}});
      it = gaps_.end() - 1;
    }
    if (!where.empty()) it->where.push_back(where);
  }

  /// The gap of reading `name`, an output the importer does not compute.
  void add_unavailable_gap(const std::string& name) {
    const auto& [label, op_type] = unavailable_.at(name);
    add_gap("output",
            "the output '" + name + "' of " + op_type +
                " is not computed (only its inference outputs are)",
            op_type, label);
  }

  /// Every name and string attribute of `g` is well-formed UTF-8, as ONNX
  /// requires: the graph's saved form (JSON) cannot hold anything else.
  static void check_names_are_utf8(const onnx::GraphProto& g) {
    auto check = [](const std::string& text, const char* what) {
      TT_CHECK(valid_utf8(text) == text, kParse, what, " '", valid_utf8(text),
               "' is not valid UTF-8");
    };
    for (const auto& v : g.input()) check(v.name(), "the graph input");
    for (const auto& v : g.output()) check(v.name(), "the graph output");
    for (const auto& t : g.initializer()) check(t.name(), "the initializer");
    for (const auto& n : g.node()) {
      check(n.name(), "the node name");
      check(n.op_type(), "the operator");
      check(n.domain(), "the operator domain");
      for (const auto& x : n.input()) check(x, "the node input");
      for (const auto& x : n.output()) check(x, "the node output");
      for (const auto& a : n.attribute()) {
        check(a.name(), "the attribute name");
        check(a.s(), "the string attribute");
        for (const auto& x : a.strings()) check(x, "the string attribute");
        if (a.has_g()) check_names_are_utf8(a.g());  // If's branches, Loop's body
        for (const auto& sub : a.graphs()) check_names_are_utf8(sub);
      }
    }
  }

  /// A graph output whose declared shape is fully static must be the shape
  /// inferred for it: a disagreement means the importer and the exporter
  /// read the model differently. (Not checked when --input-shape changes
  /// the inputs, which changes the outputs the file declares.)
  void check_declared_shape(const onnx::ValueInfoProto& out, const Value& v) {
    if (!options_.input_shapes.empty() || !out.type().has_tensor_type() ||
        !out.type().tensor_type().has_shape()) {
      return;
    }
    std::vector<int64_t> declared;
    for (const auto& d : out.type().tensor_type().shape().dim()) {
      if (!d.has_dim_value()) return;  // symbolic: nothing to compare
      declared.push_back(d.dim_value());
    }
    // A scalar output is a [1] value here.
    std::vector<int64_t> inferred = v->shape;
    if (declared.empty() && inferred == std::vector<int64_t>{1}) return;
    if (declared == inferred) return;
    auto text = [](const std::vector<int64_t>& shape) {
      std::vector<std::string> parts;
      for (int64_t d : shape) parts.push_back(std::to_string(d));
      return "[" + join(parts, ", ") + "]";
    };
    fail(ErrorKind::kParse, "graph output '", out.name(), "' is declared ", text(declared),
         " but computes ", text(inferred));
  }

  /// Input `in` fixed to `value` (--input-value): a constant, of the type
  /// and the shape the model declares for it.
  Value fixed_input(const onnx::ValueInfoProto& in, const te::NDArray& given) {
    const std::string what = "--input-value for input '" + in.name() + "'";
    TT_CHECK(in.type().has_tensor_type(), kInvalidArgument, what, ": the input is not a tensor");
    const auto& tt = in.type().tensor_type();
    DataType dtype = dtype_of(tt.elem_type(), "input '" + in.name() + "'");
    // NumPy has no bfloat16: such a value comes as float32 or as its bits.
    const te::NDArray value = te::as_npy_holds(given, dtype);
    TT_CHECK(value.dtype() == dtype, kInvalidArgument, what, " is ", value.describe(),
             "; the model declares ", dtype.str());
    if (tt.has_shape()) {
      bool fits = tt.shape().dim_size() == static_cast<int>(value.shape().size());
      for (int d = 0; fits && d < tt.shape().dim_size(); ++d) {
        const auto& dim = tt.shape().dim(d);
        fits = !dim.has_dim_value() || dim.dim_value() == value.shape()[static_cast<size_t>(d)];
      }
      TT_CHECK(fits, kInvalidArgument, what, " is ", value.describe(),
               ", not of the shape the model declares");
    }
    // Empty, it holds nothing, as an empty initializer does.
    return graph::constant(value, in.name());
  }

  Ref<graph::InputNode> make_input(const onnx::ValueInfoProto& in) {
    TT_CHECK(in.type().has_tensor_type(), kInvalidArgument, "input '", in.name(),
             "' is not a tensor");
    const auto& tt = in.type().tensor_type();
    DataType dtype = dtype_of(tt.elem_type(), "input '" + in.name() + "'");
    auto it = options_.input_shapes.find(in.name());
    std::vector<int64_t> shape;
    if (it != options_.input_shapes.end()) {
      shape = it->second;
      TT_CHECK(!tt.has_shape() || tt.shape().dim_size() == static_cast<int>(shape.size()),
               kInvalidArgument, "--input-shape gives input '", in.name(), "' ", shape.size(),
               " dimensions; the model says ", tt.shape().dim_size());
      for (int d = 0; tt.has_shape() && d < tt.shape().dim_size(); ++d) {
        const auto& dim = tt.shape().dim(d);
        TT_CHECK(!dim.has_dim_value() || dim.dim_value() == shape[static_cast<size_t>(d)],
                 kInvalidArgument, "--input-shape gives input '", in.name(), "' extent ",
                 shape[static_cast<size_t>(d)], " for dimension ", d, ", fixed at ",
                 dim.dim_value(), " in the model");
      }
    } else {
      TT_CHECK(tt.has_shape(), kInvalidArgument, "input '", in.name(),
               "' has no shape; give one with --input-shape ", in.name(), "=D0,D1,...");
      for (const auto& dim : tt.shape().dim()) {
        TT_CHECK(dim.has_dim_value() && dim.dim_value() >= 0, kInvalidArgument, "input '",
                 in.name(), "' has a dynamic dimension",
                 dim.has_dim_param() ? " '" + dim.dim_param() + "'" : std::string(),
                 "; give its shape with --input-shape ", in.name(), "=D0,D1,...");
        shape.push_back(dim.dim_value());
      }
    }
    return graph::input(in.name(), shape, dtype);
  }

  const onnx::AttributeProto* attr(const onnx::NodeProto& n, const char* name) const {
    for (const auto& a : n.attribute()) {
      if (a.name() == name) return &a;
    }
    return nullptr;
  }
  int64_t attr_int(const onnx::NodeProto& n, const char* name, int64_t fallback) const {
    const auto* a = attr(n, name);
    return a ? a->i() : fallback;
  }
  double attr_float(const onnx::NodeProto& n, const char* name, double fallback) const {
    const auto* a = attr(n, name);
    return a ? a->f() : fallback;
  }
  std::string attr_string(const onnx::NodeProto& n, const char* name, std::string fallback) const {
    const auto* a = attr(n, name);
    return a ? a->s() : fallback;
  }
  std::vector<int64_t> attr_ints(const onnx::NodeProto& n, const char* name,
                                 std::vector<int64_t> fallback) const {
    const auto* a = attr(n, name);
    return a ? std::vector<int64_t>(a->ints().begin(), a->ints().end()) : fallback;
  }

  static const graph::ConstantNode* constant_of(const Value& v) {
    return dynamic_cast<const graph::ConstantNode*>(v.get());
  }
  /// Whether `v` is a tensor of no elements (a decoder's empty cache, a
  /// slice past the end): its value is known, nothing, and no kernel makes
  /// or reads it.
  static bool no_elements(const std::vector<int64_t>& shape) {
    return std::count(shape.begin(), shape.end(), 0) > 0;
  }
  static bool holds_nothing(const Value& v) { return v && no_elements(v->shape); }
  static Value nothing(std::vector<int64_t> shape, DataType dtype, const std::string& name) {
    return graph::constant(te::NDArray(dtype, std::move(shape)), name);
  }
  /// Reduction `onnx_op` of `x`, which holds no elements, over `axes`
  /// (normalised; none: all): the reduction's identity where an output
  /// reduces only nothing, as ONNX Runtime gives (a mean too is 0).
  static Value reduction_of_nothing(const std::string& onnx_op, const Value& x,
                                    const std::vector<int64_t>& axes, bool keepdims,
                                    const onnx::NodeProto& n) {
    for (int64_t axis : axes) {
      TT_CHECK(std::count(axes.begin(), axes.end(), axis) == 1, kInvalidArgument, "axis ", axis,
               " is listed twice");
    }
    std::vector<int64_t> shape;
    for (int64_t d = 0; d < static_cast<int64_t>(x->shape.size()); ++d) {
      const bool reduced = axes.empty() || std::count(axes.begin(), axes.end(), d) > 0;
      if (!reduced) shape.push_back(x->shape[static_cast<size_t>(d)]);
      if (reduced && keepdims) shape.push_back(1);
    }
    // The log of a sum of nothing is a maximum's identity, -inf.
    const ir::ReduceOp op =
        onnx_op == "ReduceProd"  ? ir::ReduceOp::kProd
        : onnx_op == "ReduceMin" ? ir::ReduceOp::kMin
        : onnx_op == "ReduceMax" || onnx_op == "ReduceLogSum" || onnx_op == "ReduceLogSumExp"
            ? ir::ReduceOp::kMax
            : ir::ReduceOp::kSum;
    const ir::Expr identity = ir::reduce_identity(op, x->dtype);
    te::NDArray out(x->dtype, shape);
    for (int64_t i = 0; i < out.size(); ++i) {
      // An integer as its bits (set_int keeps the low bytes: uint64's highest is -1).
      if (auto k = ir::as_const_int(identity)) {
        out.set_int(i, *k);
      } else {
        out.set(i, ir::as_const_float(identity).value());
      }
    }
    return graph::constant(std::move(out), n.output(0));
  }

  /// MatMul of `a` and `b`, one of which holds no elements: zeros where the
  /// shared extent is 0, else an output of no elements.
  static Value matmul_of_nothing(const Value& a, const Value& b, const onnx::NodeProto& n) {
    std::vector<int64_t> sa = a->shape, sb = b->shape;
    TT_CHECK(!sa.empty() && !sb.empty(), kInvalidArgument, "needs operands of rank 1 or more, got ",
             shape_text(sa), " and ", shape_text(sb));
    TT_CHECK(a->dtype == b->dtype, kTypeMismatch, "A (", a->dtype.str(), ") and B (",
             b->dtype.str(), ") differ in type");
    // 1-D operands as numpy treats them: a row, or a column, then dropped.
    if (a->shape.size() == 1) sa.insert(sa.begin(), 1);
    if (b->shape.size() == 1) sb.push_back(1);
    TT_CHECK(sa.back() == sb[sb.size() - 2], kInvalidArgument, "A ", shape_text(a->shape),
             " and B ", shape_text(b->shape), " differ in the extent they share");
    std::vector<int64_t> shape =
        te::broadcast_shape({sa.begin(), sa.end() - 2}, {sb.begin(), sb.end() - 2});
    if (a->shape.size() > 1) shape.push_back(sa[sa.size() - 2]);
    if (b->shape.size() > 1) shape.push_back(sb.back());
    return graph::constant(te::NDArray(a->dtype, shape), n.output(0));  // zeros, or nothing
  }
  /// The constant input `i` of `n` as integers; an error naming it when it is not one.
  std::vector<int64_t> const_ints(const onnx::NodeProto& n, const std::vector<Value>& in, size_t i,
                                  const char* what) const {
    TT_CHECK(i < in.size() && in[i], kInvalidArgument, "needs its ", what, " input");
    const auto* c = constant_of(in[i]);
    TT_CHECK(c, kInvalidArgument, "its ", what,
             " must be a constant (or computed from static shapes)");
    return ints_of(c->data.array());
  }

  Value make(const std::string& op, std::vector<Value> args, te::Attrs a,
             const onnx::NodeProto& n) {
    // Calls on constants fold at once: later nodes may need their values
    // (a reshape's target shape computed from a Shape).
    return graph::fold_call(graph::call(op, std::move(args), std::move(a), n.name()));
  }

  /// The inputs of `n` as its handler (written for opset 7 on) reads them,
  /// for a model below opset 7. Binary operators broadcast there only with
  /// `broadcast` 1, lining B up with A from `axis` on; Reshape's shape was
  /// an attribute. What has no opset-7 reading (Tile's tiles and axis
  /// inputs, the experimental Upsample, training with `is_test` 0) is refused.
  std::vector<Value> before_opset7(const onnx::NodeProto& n, std::vector<Value> in) {
    static const std::set<std::string> binary = {"Add",     "Sub",  "Mul", "Div", "Pow", "Equal",
                                                 "Greater", "Less", "And", "Or",  "Xor"};
    const std::string& op = n.op_type();
    if (binary.count(op) && in.size() == 2 && in[0] && in[1]) {
      const std::vector<int64_t>&a = in[0]->shape, &b = in[1]->shape;
      if (attr_int(n, "broadcast", 0) == 0) {
        TT_CHECK(a == b, kInvalidArgument, "A ", shape_text(a), " and B ", shape_text(b),
                 " differ in shape without broadcast = 1 (before opset 7)");
      } else if (const auto* axis_attr = attr(n, "axis")) {
        const auto rank = static_cast<int64_t>(a.size());
        int64_t axis = axis_attr->i() < 0 ? axis_attr->i() + rank : axis_attr->i();
        TT_CHECK(axis >= 0 && axis + static_cast<int64_t>(b.size()) <= rank, kInvalidArgument, "B ",
                 shape_text(b), " does not fit A ", shape_text(a), " from axis ", axis_attr->i());
        std::vector<int64_t> aligned = b;
        aligned.resize(static_cast<size_t>(rank - axis), 1);
        in[1] = make("reshape", {in[1]}, reshape_attrs(aligned), n);
      }
    }
    if (op == "Reshape" && in.size() == 1) {
      in.push_back(graph::constant(int64_array(attr_ints(n, "shape", {})), n.name() + ".shape"));
    }
    TT_CHECK(!(op == "Tile" && opset_ < 6), kInvalidArgument,
             "Tile before opset 6 (tiles and axis inputs) is not supported");
    TT_CHECK(op != "Upsample", kInvalidArgument,
             "Upsample before opset 7 (experimental, with height_scale and width_scale) is not "
             "supported");
    TT_CHECK(!(op == "Pad" && opset_ < 2), kInvalidArgument,
             "Pad before opset 2 (paddings) is not supported");
    TT_CHECK(!(op == "Split" && opset_ < 2 && in.size() > 1), kInvalidArgument,
             "Split before opset 2 with split as an input is not supported");
    TT_CHECK(!((op == "Dropout" || op == "BatchNormalization") && attr_int(n, "is_test", 0) == 0),
             kInvalidArgument, "is_test 0 (training, before opset 7) is not supported");
    return in;
  }

  /// An elementwise node (arithmetic, comparisons, activations, Cast, Where)
  /// with an input of no elements: its output holds none either, in the
  /// broadcast shape (an extent of 0 meets only 0 or 1). Its type is what
  /// the handler gives for inputs of one element. Returns whether `n` was
  /// such a node, its output then in `out`.
  bool elementwise_on_nothing(const onnx::NodeProto& n, const std::vector<Value>& in,
                              const Handler& handler, std::vector<Value>* out) {
    // clang-format off
    static const std::set<std::string> elementwise = {
        "Add", "Sub", "Mul", "Div", "Pow", "Mod", "Relu", "Sigmoid", "Tanh", "Erf", "Sqrt", "Exp",
        "Log", "Abs", "Neg", "Floor", "Ceil", "Reciprocal", "Sin", "Cos", "Sign", "Softplus",
        "Softsign", "Mish", "Not", "Round", "Equal", "Greater", "GreaterOrEqual", "Less",
        "LessOrEqual", "And", "Or", "Xor", "Where", "Max", "Min", "Sum", "Mean", "Elu", "Selu",
        "Celu", "Gelu", "HardSwish", "LeakyRelu", "HardSigmoid", "ThresholdedRelu", "Cast",
        "IsNaN", "IsInf", "Shrink", "BitShift"};
    // clang-format on
    // Variadic Max, Min, Sum and Mean broadcast from opset 8 on.
    static const std::set<std::string> variadic = {"Max", "Min", "Sum", "Mean"};
    if (!elementwise.count(n.op_type()) || n.output_size() != 1 ||
        (variadic.count(n.op_type()) && opset_ < 8) ||
        std::none_of(in.begin(), in.end(), holds_nothing)) {
      return false;
    }
    std::vector<std::string> shapes;
    for (const auto& v : in) {
      if (v) shapes.push_back(shape_text(v->shape));
    }
    std::vector<int64_t> shape;
    std::vector<Value> probe;
    for (const auto& v : in) {
      if (!v) {
        probe.emplace_back();
        continue;
      }
      try {
        shape = te::broadcast_shape(shape, v->shape);
      } catch (const UserError&) {
        fail(ErrorKind::kInvalidArgument, "cannot broadcast ", join(shapes, " and "), " together");
      }
      te::NDArray one(v->dtype, std::vector<int64_t>(v->shape.size(), 1));
      one.set(0, 1);
      probe.push_back(graph::constant(std::move(one), n.name() + ".probe"));
    }
    std::vector<Value> typed = handler(n, probe);
    TT_ICHECK(!typed.empty() && typed[0], "an elementwise handler gave no output");
    *out = {nothing(shape, typed[0]->dtype, n.output(0))};
    return true;
  }

  /// Imports node `n` (the file's node `index`). What it needs that is not
  /// supported is a gap, and its outputs are not computed: nodes that read
  /// them are passed over, to report every gap of the model in one run.
  void import_node(const onnx::NodeProto& n, int index) {
    const std::string label = node_label(n, index);
    std::string where = "node '" + label + "' (" + n.op_type() + ")";
    auto give_up = [&] {
      for (const auto& out : n.output()) {
        if (!out.empty()) failed_.insert(out);
      }
    };
    for (const auto& name : n.input()) {
      if (failed_.count(name)) return give_up();
      if (unavailable_.count(name)) {
        add_unavailable_gap(name);
        return give_up();
      }
    }
    // Operators of other domains (ONNX Runtime's com.microsoft) are keyed
    // "DOMAIN.OP".
    const bool standard = n.domain().empty() || n.domain() == "ai.onnx";
    const auto& table = handlers();
    auto h = table.find(standard ? n.op_type() : n.domain() + "." + n.op_type());
    const onnx::FunctionProto* function = function_of(n);
    if (!function && h == table.end()) {
      add_gap("operator", standard ? n.op_type() : n.op_type() + " (domain " + n.domain() + ")", "",
              label);
      return give_up();
    }
    std::vector<Value> in;
    for (const auto& name : n.input()) {
      if (name.empty()) {
        in.emplace_back();  // an optional input left out
        continue;
      }
      auto it = values_.find(name);
      TT_CHECK(it != values_.end(), kParse, where, ": input '", name,
               "' is produced by no node, initializer or graph input");
      in.push_back(it->second);
    }
    // Empty tensors pass through the operators that move or join data, and
    // give shapes; elementwise operators make empty outputs of them, and
    // reductions and MatMul their identities. Any other reads one as an
    // omitted input, as it reads an empty initializer (empty axes are the
    // default axes).
    // clang-format off
    static const std::set<std::string> reads_nothing = {
        "Concat", "Reshape", "Slice", "Split", "Trilu", "Identity", "Shape", "Size", "MatMul", "NonZero",
        "ReduceMean", "ReduceSum", "ReduceMax", "ReduceMin", "ReduceProd", "ReduceSumSquare",
        "ReduceL1", "ReduceL2", "ReduceLogSum", "ReduceLogSumExp"};
    // clang-format on
    std::vector<std::string> omitted;
    std::vector<Value> out;
    try {
      if (function) {
        out = inline_function(*function, n, std::move(in));
      } else if (!(standard && opset_ >= 7 && elementwise_on_nothing(n, in, h->second, &out))) {
        for (int i = 0; i < n.input_size(); ++i) {
          Value& v = in[static_cast<size_t>(i)];
          if (holds_nothing(v) && !(standard && reads_nothing.count(n.op_type()))) {
            omitted.push_back("'" + n.input(i) + "' " + shape_text(v->shape));
            v = Value();
          }
        }
        if (standard && opset_ < 7) in = before_opset7(n, std::move(in));
        out = h->second(n, in);
      }
    } catch (const GapsInside&) {
      return give_up();
    } catch (const UserError& e) {
      if (e.kind() == ErrorKind::kParse) fail(e.kind(), where, ": ", e.what());
      add_gap("node",
              omitted.empty()
                  ? std::string(e.what())
                  : std::string(e.what()) +
                        " (inputs of no elements, read as omitted: " + join(omitted, ", ") + ")",
              n.op_type(), label);
      return give_up();
    }
    for (int k = 0; k < n.output_size(); ++k) {
      if (n.output(k).empty()) continue;
      // A value has one producer: a second would silently replace the first
      // for every later reader.
      TT_CHECK(!values_.count(n.output(k)) && !unavailable_.count(n.output(k)), kParse, where,
               ": output '", n.output(k),
               "' is already produced by another node, an initializer or a graph input");
      // An empty tensor (a Constant of no elements, a shape's empty slice
      // and what is joined of such), read as an omitted input.
      static const std::set<std::string> may_be_empty = {"Constant", "Slice", "Concat"};
      if (may_be_empty.count(n.op_type()) && k == 0 && !out.empty() && !out[0]) {
        values_[n.output(k)] = Value();
        continue;
      }
      if (static_cast<size_t>(k) >= out.size() || !out[static_cast<size_t>(k)]) {
        // Outputs the importer does not compute (BatchNorm's training
        // statistics, MaxPool's indices): an error if anything reads them.
        unavailable_[n.output(k)] = {label, n.op_type()};
        continue;
      }
      values_[n.output(k)] = out[static_cast<size_t>(k)];
    }
  }

  const std::map<std::string, Handler>& handlers();

  /// The outputs of subgraph `g` (an If's branch, a Loop's or Scan's body,
  /// a model-local function) imported in a scope of its own: its inputs are
  /// bound to `bound`, and the names it defines are forgotten after, so the
  /// same body imports again for the next iteration or call. It reads the
  /// outer graph's values by name. A gap inside is reported as any other,
  /// and the node that holds it then fails as a whole (GapsInside), without
  /// a gap of its own.
  std::vector<Value> import_scoped(const onnx::GraphProto& g, const std::vector<Value>& bound,
                                   const char* what) {
    TT_CHECK(static_cast<int>(bound.size()) == g.input_size(), kParse, "its ", what, " has ",
             g.input_size(), " inputs, where ", bound.size(), " are given");
    struct Scope {
      Importer& self;
      std::map<std::string, Value> values;
      std::map<std::string, std::pair<std::string, std::string>> unavailable;
      std::set<std::string> failed;
      ~Scope() {
        self.values_ = std::move(values);
        self.unavailable_ = std::move(unavailable);
        self.failed_ = std::move(failed);
        --self.scope_depth_;
      }
    } scope{*this, values_, unavailable_, failed_};
    TT_CHECK(++scope_depth_ <= kMaxScopeDepth, kInvalidArgument, "nests ", what, "s more than ",
             kMaxScopeDepth, " deep");
    const size_t gaps_before = gaps_.size();
    for (int i = 0; i < g.input_size(); ++i) {
      const std::string& name = g.input(i).name();
      values_[name] = bound[static_cast<size_t>(i)];
      failed_.erase(name);
      unavailable_.erase(name);
    }
    std::set<std::string> input_names;
    for (const auto& v : g.input()) input_names.insert(v.name());
    for (const auto& init : g.initializer()) {
      TT_CHECK(!input_names.count(init.name()), kParse, "its ", what, "'s initializer '",
               init.name(), "' repeats the name of one of its inputs");
      values_.erase(init.name());  // a name of the outer graph, shadowed here
      import_initializer(init);
    }
    for (int i : topological_order(g)) import_node(g.node(i), i);
    if (gaps_.size() != gaps_before) throw GapsInside{};
    std::vector<Value> out;
    for (const auto& o : g.output()) {
      auto it = values_.find(o.name());
      TT_CHECK(it != values_.end() && it->second, kParse, "its ", what, "'s output '", o.name(),
               "' is computed by no node of it");
      out.push_back(it->second);
    }
    return out;
  }

  /// The model-local function node `n` calls, or null.
  const onnx::FunctionProto* function_of(const onnx::NodeProto& n) const {
    auto it = functions_.find({n.domain(), n.op_type()});
    return it == functions_.end() ? nullptr : it->second;
  }

  /// The call `n` of model-local function `f`, inlined: its nodes, with the
  /// attributes that refer to the caller's (`ref_attr_name`) taken from `n`,
  /// import in a scope of their own at the function's opset.
  std::vector<Value> inline_function(const onnx::FunctionProto& f, const onnx::NodeProto& n,
                                     std::vector<Value> in) {
    TT_CHECK(!calling_.count(&f), kInvalidArgument, "function '", f.name(), "' of domain '",
             f.domain(), "' calls itself, which cannot be inlined");
    TT_CHECK(in.size() <= static_cast<size_t>(f.input_size()), kInvalidArgument, "passes ",
             in.size(), " inputs to function '", f.name(), "', which takes ", f.input_size());
    in.resize(static_cast<size_t>(f.input_size()));  // optional inputs left out
    onnx::GraphProto body;
    for (const auto& name : f.input()) body.add_input()->set_name(name);
    for (const auto& name : f.output()) body.add_output()->set_name(name);
    for (const auto& node : f.node()) {
      onnx::NodeProto* copy = body.add_node();
      *copy = node;
      copy->clear_attribute();
      for (const auto& a : node.attribute()) {
        if (a.ref_attr_name().empty()) {
          *copy->add_attribute() = a;
          continue;
        }
        // A reference the caller does not set leaves the attribute out (its
        // operator's default applies).
        if (const auto* given = attr(n, a.ref_attr_name().c_str())) {
          onnx::AttributeProto* set = copy->add_attribute();
          *set = *given;
          set->set_name(a.name());
        }
      }
    }
    const int64_t outer_opset = opset_;
    for (const auto& o : f.opset_import()) {
      if (o.domain().empty() || o.domain() == "ai.onnx") opset_ = o.version();
    }
    struct RestoreOpset {
      int64_t& opset;
      int64_t value;
      ~RestoreOpset() { opset = value; }
    } restore{opset_, outer_opset};
    calling_.insert(&f);
    struct Return {
      std::set<const onnx::FunctionProto*>& calling;
      const onnx::FunctionProto* f;
      ~Return() { calling.erase(f); }
    } on_return{calling_, &f};
    return import_scoped(body, in, "function");
  }

  /// A pool of any rank as the maximum or sum of its window's taps: each tap
  /// a strided slice of the padded data (defined below). For 3-D pools,
  /// dilations and MaxPool's indices, which the 2-D pool operators lack.
  std::vector<Value> pool_by_taps(const onnx::NodeProto& n, const Value& x, bool is_max,
                                  const std::vector<int64_t>& kernel);
  /// A 3-D convolution as one 2-D convolution per kernel depth, with the
  /// output depths folded into the batch (defined below).
  /// `v` - `zero_point` (none: 0) in int32: an integer product's operand
  /// (defined below).
  Value centred(const Value& v, const Value& zero_point, const onnx::NodeProto& n);
  Value conv3d_by_slices(const onnx::NodeProto& n, Value x, const Value& w, const Window& win,
                         int64_t groups);
  /// A 3-D transposed convolution as a 3-D convolution of the data spread
  /// out by the strides, with the kernel flipped (defined below).
  Value conv_transpose3d(const onnx::NodeProto& n, const Value& x, const Value& w);

  enum class Recurrent { kRnn, kGru, kLstm };
  /// com.microsoft's DynamicQuantizeLSTM: int8 W and R stored transposed
  /// ([dirs, K, G * H]), with scales and zero points per direction ([dirs])
  /// or per column ([dirs, G * H]).
  struct QuantizedRecurrence {
    Value w_scale, w_zero_point, r_scale, r_zero_point;
  };
  /// An RNN, GRU or LSTM node unrolled over its sequence (defined below).
  std::vector<Value> recurrent(const onnx::NodeProto& n, const std::vector<Value>& in,
                               Recurrent kind, const QuantizedRecurrence* quantized = nullptr);

  /// A Conv of dequantized operands (the QDQ form of an int8 convolution,
  /// 2-D, grouped or not): the integer convolution of ConvInteger, times the
  /// product of the scales, plus the bias; what ONNX Runtime computes for
  /// it. Null when the operands are not so (defined below).
  Value integer_qdq_conv(const onnx::NodeProto& n, const std::vector<Value>& in);
  /// The same for a MatMul of dequantized data (one scale and zero point)
  /// and a dequantized constant matrix (one scale, or one per column): as
  /// MatMulInteger computes it, times the product of the scales, as ONNX
  /// Runtime's fused QDQ kernels do (null where the pattern does not hold).
  Value integer_qdq_matmul(const onnx::NodeProto& n, const std::vector<Value>& in);

  /// GridSample of a 4-D `x` at `grid`'s points: each tap of the
  /// interpolation gathered from x by a computed index and weighted, as
  /// PyTorch's grid_sample and ONNX Runtime compute it (defined below).
  Value grid_sample(const onnx::NodeProto& n, const Value& x, const Value& grid);
  /// RoiAlign of a 4-D `x` over the boxes `rois` [R, 4] of the images
  /// `batch_indices` [R]: each bin's samples bilinearly interpolated by four
  /// gathers, averaged or maxed, as ONNX Runtime computes it (defined below).
  Value roi_align(const onnx::NodeProto& n, const Value& x, const Value& rois,
                  const Value& batch_indices);

  /// What DequantizeLinear computed a value from, by the value: the QDQ
  /// form's Conv and MatMul compute on the integers (integer_qdq_conv,
  /// integer_qdq_matmul).
  struct Dequantization {
    Value result, q, scale, zero_point;
    int64_t axis = 1;  ///< of a per-axis scale
  };
  std::map<const Object*, Dequantization> dequantized_;
  /// The dequantizations of a QDQ product's data in[0] and constant weight
  /// in[1] where the product can compute on their bytes: one scale and zero
  /// point for the data; one, or one per `channels` along `axis`, for the
  /// weight (null otherwise).
  std::optional<std::pair<Dequantization, Dequantization>> integer_operands(
      const std::vector<Value>& in, int64_t channels, int64_t axis) const;
  /// The data's scale times the weight's (one per channel, or one).
  Value scales_product(const Dequantization& data, const Dequantization& weight,
                       const onnx::NodeProto& n);

  const OnnxImportOptions& options_;
  const std::string model_dir_;
  int64_t opset_ = 0;
  std::map<std::string, Value> values_;
  /// Outputs the importer does not compute, with the node and operator
  /// that would have: a gap where something reads one.
  std::map<std::string, std::pair<std::string, std::string>> unavailable_;
  std::set<std::string> failed_;  ///< values a gap left uncomputed
  std::vector<OnnxGap> gaps_;
  std::vector<Ref<graph::InputNode>> inputs_;
  std::map<std::string, Handler> handlers_;
  /// The model's local functions by (domain, name).
  std::map<std::pair<std::string, std::string>, const onnx::FunctionProto*> functions_;
  std::set<const onnx::FunctionProto*> calling_;  ///< the functions being inlined
  static constexpr int kMaxScopeDepth = 64;
  int scope_depth_ = 0;  ///< nested bodies and function calls being imported
  /// Thrown where a subgraph had gaps: they are reported, the node that
  /// holds the subgraph fails.
  struct GapsInside {};
};

te::Attrs axis_attrs(int64_t axis) {
  auto a = make_node<te::AxisAttrsNode>();
  a->axis = axis;
  return te::Attrs(attrs(std::move(a)));
}
te::Attrs reshape_attrs(std::vector<int64_t> shape) {
  auto a = make_node<te::ReshapeAttrsNode>();
  a->shape = std::move(shape);
  return te::Attrs(attrs(std::move(a)));
}
te::Attrs transpose_attrs(std::vector<int64_t> perm) {
  auto a = make_node<te::TransposeAttrsNode>();
  a->perm = std::move(perm);
  return te::Attrs(attrs(std::move(a)));
}
te::Attrs cast_attrs(DataType dtype) {
  auto a = make_node<te::CastAttrsNode>();
  a->dtype = dtype;
  return te::Attrs(attrs(std::move(a)));
}
/// A scalar constant of `dtype` (an integer type takes `value` exactly up to 2^53).
Value scalar_constant(DataType dtype, double value, std::string name) {
  te::NDArray a(dtype, {});
  a.set(0, value);
  return graph::constant(std::move(a), std::move(name));
}

/// cos and sin of the Fourier angle 2 pi j k / n, with j k taken mod n so
/// the angle stays exact for long signals.
std::pair<double, double> fourier_cos_sin(int64_t j, int64_t k, int64_t n) {
  const double theta =
      2 * std::numbers::pi * static_cast<double>((j * k) % n) / static_cast<double>(n);
  return {std::cos(theta), std::sin(theta)};
}

/// A reduction's attributes over every axis of a rank-`rank` value, dropped.
te::Attrs whole_reduce_attrs(size_t rank) {
  auto r = make_node<te::ReduceAttrsNode>();
  r->keepdims = false;
  for (size_t d = 0; d < rank; ++d) r->axes.push_back(static_cast<int64_t>(d));
  return te::Attrs(attrs(std::move(r)));
}

/// A slice's attributes taking [begin, end) of `axis` and all of every other axis of `shape`.
te::Attrs slice_along(const std::vector<int64_t>& shape, size_t axis, int64_t begin, int64_t end) {
  auto a = make_node<te::SliceAttrsNode>();
  a->begin.assign(shape.size(), 0);
  a->end = shape;
  a->strides.assign(shape.size(), 1);
  a->begin[axis] = begin;
  a->end[axis] = end;
  return te::Attrs(attrs(std::move(a)));
}

te::Attrs scalar_attrs(double alpha, double beta = 0) {
  auto a = make_node<te::ScalarAttrsNode>();
  a->alpha = alpha;
  a->beta = beta;
  return te::Attrs(attrs(std::move(a)));
}

/// An ONNX axis as a position; the node's error names the node.
int64_t normalise(int64_t axis, size_t rank) {
  return normalize_axis(axis, static_cast<int64_t>(rank), "");
}

/// Pads of a window op over `in` (any number of axes): explicit (ONNX's
/// order, every axis's begin then every axis's end, as ours), or from
/// auto_pad for the input extents.
std::vector<int64_t> window_pads(const std::string& auto_pad, std::vector<int64_t> pads,
                                 const std::vector<int64_t>& in, const std::vector<int64_t>& kernel,
                                 const std::vector<int64_t>& strides,
                                 const std::vector<int64_t>& dilations) {
  const size_t k = in.size();
  if (auto_pad.empty() || auto_pad == "NOTSET") {
    if (pads.empty()) pads.assign(2 * k, 0);
    TT_CHECK(pads.size() == 2 * k, kInvalidArgument, "pads needs ", 2 * k, " values for a ", k,
             "-D window, got ", pads.size());
    return pads;
  }
  if (auto_pad == "VALID") return std::vector<int64_t>(2 * k, 0);
  TT_CHECK(auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER", kInvalidArgument, "auto_pad '",
           auto_pad, "' (NOTSET, VALID, SAME_UPPER, SAME_LOWER)");
  std::vector<int64_t> out(2 * k);
  for (size_t d = 0; d < k; ++d) {
    int64_t o = (in[d] + strides[d] - 1) / strides[d];
    int64_t total =
        std::max<int64_t>(0, (o - 1) * strides[d] + (kernel[d] - 1) * dilations[d] + 1 - in[d]);
    int64_t small = total / 2, big = total - small;
    out[d] = auto_pad == "SAME_UPPER" ? small : big;
    out[d + k] = auto_pad == "SAME_UPPER" ? big : small;
  }
  return out;
}

/// How ONNX's Resize maps an output position to input positions and weights.
struct ResizeRule {
  std::string mode, coord, nearest_mode;
  double cubic_a = -0.75, extrapolation = 0;
  bool exclude_outside = false;
  /// Linear weights worked out in float32, as ONNX Runtime's resize of
  /// integers does before it truncates: a last bit of a weight moves a
  /// truncated value by one.
  bool single_precision = false;
};

void check_resize_rule(const ResizeRule& r) {
  static const std::set<std::string> coords = {
      "half_pixel", "half_pixel_symmetric", "pytorch_half_pixel", "align_corners",
      "asymmetric", "tf_half_pixel_for_nn", "tf_crop_and_resize"};
  static const std::set<std::string> nearest = {"round_prefer_floor", "round_prefer_ceil", "floor",
                                                "ceil"};
  TT_CHECK(r.mode == "nearest" || r.mode == "linear" || r.mode == "cubic", kInvalidArgument,
           "mode '", r.mode, "' (nearest, linear or cubic)");
  TT_CHECK(coords.count(r.coord), kInvalidArgument, "coordinate_transformation_mode '", r.coord,
           "' (", join(std::vector<std::string>(coords.begin(), coords.end()), ", "), ")");
  TT_CHECK(r.mode != "nearest" || nearest.count(r.nearest_mode), kInvalidArgument, "nearest_mode '",
           r.nearest_mode, "' (",
           join(std::vector<std::string>(nearest.begin(), nearest.end()), ", "), ")");
}

/// The coordinate mode of the resize2d operator that computes `r` on these
/// extents, or none where only taps can: resize2d maps coordinates by the
/// extents' ratio, right only where the scale is that ratio.
std::optional<std::string> simple_resize(const ResizeRule& r, int64_t in_h, int64_t out_h,
                                         double scale_h, int64_t in_w, int64_t out_w,
                                         double scale_w) {
  if (static_cast<double>(out_h) != static_cast<double>(in_h) * scale_h ||
      static_cast<double>(out_w) != static_cast<double>(in_w) * scale_w) {
    return std::nullopt;
  }
  std::string coord = r.coord;
  // pytorch_half_pixel is half_pixel except to an extent of 1.
  if (coord == "pytorch_half_pixel" && out_h > 1 && out_w > 1) coord = "half_pixel";
  if (coord != "half_pixel" && coord != "asymmetric" && coord != "align_corners") {
    return std::nullopt;
  }
  if (r.mode == "linear") return coord;
  if (r.mode != "nearest") return std::nullopt;
  const char* rounding = coord == "asymmetric" ? "floor" : "round_prefer_floor";
  return r.nearest_mode == rounding ? std::optional<std::string>(coord) : std::nullopt;
}

/// One axis of a resize as taps: for each output position, the input
/// positions it reads ([out, taps] int32) and their weights (float32).
struct ResizeTaps {
  te::NDArray index, weight;
};

/// The taps of `r` from `in` to `out` positions at `scale` (ONNX's scale,
/// which need not be out / in), with roi [roi_start, roi_end] for
/// tf_crop_and_resize. A position mapped outside the input there reads
/// position `in`, the extrapolation border, and sets *border.
ResizeTaps resize_taps(const ResizeRule& r, int64_t in, int64_t out, double scale, double roi_start,
                       double roi_end, bool* border) {
  const int64_t count = r.mode == "nearest" ? 1 : r.mode == "linear" ? 2 : 4;
  ResizeTaps t{te::NDArray(DataType::int32(), {out, count}),
               te::NDArray(DataType::float32(), {out, count})};
  const auto fin = static_cast<double>(in), fout = static_cast<double>(out);
  auto source = [&](double o) {
    if (r.coord == "asymmetric") return o / scale;
    if (r.coord == "tf_half_pixel_for_nn") return (o + 0.5) / scale;
    if (r.coord == "align_corners") return out == 1 ? 0.0 : o * (fin - 1) / (fout - 1);
    if (r.coord == "pytorch_half_pixel") return out > 1 ? (o + 0.5) / scale - 0.5 : 0.0;
    if (r.coord == "tf_crop_and_resize") {
      return out > 1 ? roi_start * (fin - 1) + o * (roi_end - roi_start) * (fin - 1) / (fout - 1)
                     : 0.5 * (roi_start + roi_end) * (fin - 1);
    }
    if (r.coord == "half_pixel_symmetric") {
      const double adjustment = fout / (scale * fin), center = fin / 2;
      return center * (1 - adjustment) + (o + 0.5) / scale - 0.5;
    }
    return (o + 0.5) / scale - 0.5;  // half_pixel
  };
  auto clamp = [&](int64_t i) { return std::clamp<int64_t>(i, 0, in - 1); };
  for (int64_t o = 0; o < out; ++o) {
    const double x = source(static_cast<double>(o));
    std::vector<int64_t> index;
    std::vector<double> weight;
    if (r.coord == "tf_crop_and_resize" && (x < 0 || x > fin - 1)) {
      index.assign(static_cast<size_t>(count), in);  // the border
      weight.assign(static_cast<size_t>(count), 0.0);
      weight[0] = 1;
      *border = true;
    } else if (r.mode == "nearest") {
      const double low = std::floor(x);
      double pick = std::round(x);  // halves: by the rule
      if (x - low == 0.5) {
        pick = r.nearest_mode == "round_prefer_ceil" ? low + 1 : low;
      }
      if (r.nearest_mode == "floor") pick = low;
      if (r.nearest_mode == "ceil") pick = std::ceil(x);
      index = {clamp(static_cast<int64_t>(pick))};
      weight = {1.0};
    } else if (r.mode == "linear" && r.single_precision) {
      // ONNX Runtime's arithmetic: (o + 0.5f) / scale - 0.5f for the half
      // pixel rules, clamped, and its fraction, all in float32.
      const auto f = static_cast<float>(o), fs = static_cast<float>(scale);
      float xf = r.coord == "asymmetric" ? f / fs
                 : r.coord == "half_pixel" || r.coord == "pytorch_half_pixel"
                     ? (out > 1 || r.coord == "half_pixel" ? (f + 0.5f) / fs - 0.5f : 0.0f)
                     : static_cast<float>(x);
      xf = std::clamp(xf, 0.0f, static_cast<float>(in - 1));
      const auto low = static_cast<int64_t>(xf);
      const float fraction = xf - static_cast<float>(low);
      index = {clamp(low), clamp(low + 1)};
      weight = {1.0f - fraction, fraction};
    } else if (r.mode == "linear") {
      const double c = std::clamp(x, 0.0, fin - 1), low = std::floor(c);
      index = {clamp(static_cast<int64_t>(low)), clamp(static_cast<int64_t>(low) + 1)};
      weight = {1 - (c - low), c - low};
    } else {  // cubic, Keys' kernel with coefficient a
      const double low = std::floor(x), f = x - low, a = r.cubic_a;
      auto far = [&](double d) { return ((a * d - 5 * a) * d + 8 * a) * d - 4 * a; };  // 1 < d < 2
      auto near = [&](double d) { return ((a + 2) * d - (a + 3)) * d * d + 1; };       // d <= 1
      weight = {far(1 + f), near(f), near(1 - f), far(2 - f)};
      double total = 0;
      for (int k = 0; k < 4; ++k) {
        const auto i = static_cast<int64_t>(low) - 1 + k;
        if (r.exclude_outside && (i < 0 || i >= in)) weight[static_cast<size_t>(k)] = 0;
        total += weight[static_cast<size_t>(k)];
        index.push_back(clamp(i));
      }
      if (r.exclude_outside && total != 0) {
        for (double& w : weight) w /= total;
      }
    }
    for (int64_t k = 0; k < count; ++k) {
      t.index.set_int(o * count + k, index[static_cast<size_t>(k)]);
      t.weight.set(o * count + k, weight[static_cast<size_t>(k)]);
    }
  }
  return t;
}

/// The output of an Einsum's implicit form: the letters of `lhs` used
/// once, in alphabetical order, less those in `skip`.
std::string implicit_output(const std::string& lhs, const std::string& skip) {
  std::map<char, int> uses;
  for (char ch : lhs) {
    if (std::isalpha(static_cast<unsigned char>(ch))) ++uses[ch];
  }
  std::string out;
  for (const auto& [ch, count] : uses) {
    if (count == 1 && skip.find(ch) == std::string::npos) out += ch;
  }
  return out;
}

/// `equation` with each "..." spelled out as letters it does not use: an
/// operand's ellipsis stands for its axes beyond its letters, lined up from
/// the right as numpy broadcasts them. An implicit output gets the
/// ellipsis's letters first, then the letters used once, in order.
std::string spell_out_ellipses(const std::string& equation, const std::vector<Value>& in) {
  const size_t arrow = equation.find("->");
  std::vector<std::string> terms = split(equation.substr(0, arrow), ',');
  TT_CHECK(terms.size() == in.size(), kInvalidArgument, "equation '", equation, "' has ",
           terms.size(), " operands for ", in.size(), " inputs");
  std::string spare;
  for (char c = 'A'; c <= 'Z'; ++c) {
    if (equation.find(c) == std::string::npos) spare += c;
  }
  std::vector<int64_t> hidden(terms.size(), 0);
  int64_t most = 0;
  for (size_t k = 0; k < terms.size(); ++k) {
    if (terms[k].find("...") == std::string::npos) continue;
    TT_CHECK(in[k], kInvalidArgument, "operand ", k, " is missing");
    hidden[k] =
        static_cast<int64_t>(in[k]->shape.size()) - static_cast<int64_t>(terms[k].size() - 3);
    TT_CHECK(hidden[k] >= 0, kInvalidArgument, "operand ", k, " '", terms[k],
             "' has more letters than its rank ", in[k]->shape.size());
    most = std::max(most, hidden[k]);
  }
  TT_CHECK(most <= static_cast<int64_t>(spare.size()), kInvalidArgument, "equation '", equation,
           "' leaves too few letters for its ellipsis");
  const std::string letters = spare.substr(0, static_cast<size_t>(most));
  std::string lhs;
  for (size_t k = 0; k < terms.size(); ++k) {
    if (size_t at = terms[k].find("..."); at != std::string::npos) {
      terms[k].replace(at, 3, letters.substr(static_cast<size_t>(most - hidden[k])));
    }
    lhs += (k ? "," : "") + terms[k];
  }
  if (arrow != std::string::npos) {
    std::string out = equation.substr(arrow + 2);
    if (size_t at = out.find("..."); at != std::string::npos) out.replace(at, 3, letters);
    return lhs + "->" + out;
  }
  return lhs + "->" + letters + implicit_output(lhs, letters);
}

const std::map<std::string, Importer::Handler>& Importer::handlers() {
  if (!handlers_.empty()) return handlers_;
  auto& h = handlers_;
  auto one = [](Value v) { return std::vector<Value>{std::move(v)}; };
  auto need = [](const std::vector<Value>& in, size_t k, const char* what) -> const Value& {
    TT_CHECK(k < in.size() && in[k], kInvalidArgument, "needs its ", what, " input");
    return in[k];
  };

  // ---- shapes and constants ----
  h["Constant"] = [this, one](const onnx::NodeProto& n, const std::vector<Value>&) {
    if (const auto* v = attr(n, "value")) {
      te::NDArray a = to_array(v->t(), model_dir_);
      return one(graph::constant(std::move(a), n.output(0)));
    }
    if (const auto* v = attr(n, "value_float")) {
      te::NDArray a(DataType::float32(), {});
      a.set(0, v->f());
      return one(graph::constant(std::move(a), n.output(0)));
    }
    if (const auto* v = attr(n, "value_floats")) {
      te::NDArray a(DataType::float32(), {v->floats_size()});
      for (int i = 0; i < v->floats_size(); ++i) a.set(i, v->floats(i));
      return one(graph::constant(std::move(a), n.output(0)));
    }
    if (const auto* v = attr(n, "value_int")) {
      te::NDArray a(DataType::int64(), {});
      a.set_int(0, v->i());
      return one(graph::constant(std::move(a), n.output(0)));
    }
    if (const auto* v = attr(n, "value_ints")) {
      return one(graph::constant(int64_array({v->ints().begin(), v->ints().end()}), n.output(0)));
    }
    fail(ErrorKind::kInvalidArgument,
         "needs a value, value_float(s) or value_int(s) attribute (sparse values are not "
         "supported)");
  };
  // If: the branch its condition picks, when the condition is constant once
  // the input shapes are known (a sample rate, a shape test), imported in
  // place. Otherwise both branches are computed and each output chosen at
  // run time, which needs them to agree in shape and type. A branch reads
  // the outer graph's values by name.
  h["If"] = [this, need](const onnx::NodeProto& n, const std::vector<Value>& in) {
    const Value& cond = need(in, 0, "cond");
    const int64_t count = checked_elements(cond->shape, "its condition");
    TT_CHECK(count == 1, kInvalidArgument, "its condition ", shape_text(cond->shape), " has ",
             count, " elements, not 1");
    auto branch = [&](const char* name) {
      const auto* b = attr(n, name);
      TT_CHECK(b && b->has_g(), kParse, "has no ", name);
      std::vector<Value> out = import_scoped(b->g(), {}, "branch");
      TT_CHECK(out.size() == static_cast<size_t>(n.output_size()), kParse, "its ", name, " has ",
               out.size(), " outputs, the node ", n.output_size());
      return out;
    };
    if (const auto* c = constant_of(cond)) {
      return branch(c->data.array().get_int(0) != 0 ? "then_branch" : "else_branch");
    }
    std::vector<Value> then = branch("then_branch"), otherwise = branch("else_branch");
    Value pick = make("reshape", {cond}, reshape_attrs({}), n);
    std::vector<Value> out;
    for (size_t k = 0; k < then.size(); ++k) {
      TT_CHECK(then[k]->shape == otherwise[k]->shape && then[k]->dtype == otherwise[k]->dtype,
               kInvalidArgument, "its condition is known only at run time, and its output ", k,
               " is ", then[k]->dtype.str(), shape_text(then[k]->shape), " in then_branch but ",
               otherwise[k]->dtype.str(), shape_text(otherwise[k]->shape),
               " in else_branch: both branches must give the same shapes and types");
      out.push_back(make("where", {pick, then[k], otherwise[k]}, te::Attrs(), n));
    }
    return out;
  };
  // Loop and Scan unroll at import: each iteration imports the body anew,
  // with its iteration's values. The trip count must be known at compile time.
  // The per-iteration values `parts` stacked along a new axis `axis`
  // (reversed first when `reverse`).
  auto stack = [this](std::vector<Value> parts, int64_t axis, bool reverse,
                      const onnx::NodeProto& n) {
    if (reverse) std::reverse(parts.begin(), parts.end());
    const std::vector<int64_t> shape = parts[0]->shape;  // a copy: parts[0] is replaced below
    const size_t at = static_cast<size_t>(normalise(axis, shape.size() + 1));
    std::vector<int64_t> lifted = shape;
    lifted.insert(lifted.begin() + static_cast<std::ptrdiff_t>(at), 1);
    for (auto& p : parts) {
      TT_CHECK(p->shape == shape, kInvalidArgument, "its scan output changes shape from ",
               shape_text(shape), " to ", shape_text(p->shape), " between iterations");
      p = make("reshape", {p}, reshape_attrs(lifted), n);
    }
    return parts.size() == 1 ? parts[0]
                             : make("concat", parts, axis_attrs(static_cast<int64_t>(at)), n);
  };
  h["Loop"] = [this, stack](const onnx::NodeProto& n, const std::vector<Value>& in) {
    const auto* body = attr(n, "body");
    TT_CHECK(body && body->has_g(), kParse, "has no body");
    auto known = [&](size_t k, const char* what) -> const te::NDArray* {
      if (k >= in.size() || !in[k]) return nullptr;
      const auto* c = constant_of(in[k]);
      TT_CHECK(c, kInvalidArgument, "its ", what,
               " is known only at run time; a Loop is supported when its trip count and "
               "condition are constant for the given input shapes (it is unrolled)");
      return &c->data.array();
    };
    const te::NDArray* trips_given = known(0, "trip count M");
    const te::NDArray* cond_given = known(1, "condition");
    TT_CHECK(trips_given || cond_given, kInvalidArgument,
             "has neither a trip count nor a condition: it would never end");
    const int64_t trips = trips_given ? trips_given->get_int(0) : -1;
    bool go = cond_given ? cond_given->get_int(0) != 0 : true;
    std::vector<Value> carried(in.begin() + std::min<std::ptrdiff_t>(2, in.size()), in.end());
    const size_t n_carried = carried.size();
    const onnx::GraphProto& g = body->g();
    TT_CHECK(static_cast<size_t>(g.output_size()) >= 1 + n_carried, kParse, "its body has ",
             g.output_size(), " outputs, fewer than 1 + its ", n_carried, " loop-carried values");
    std::vector<std::vector<Value>> scans(static_cast<size_t>(g.output_size()) - 1 - n_carried);
    for (int64_t i = 0; go && (trips < 0 || i < trips); ++i) {
      TT_CHECK(i < kMaxIterations, kInvalidArgument, "runs more than ", kMaxIterations,
               " iterations, each of which is unrolled");
      std::vector<Value> bound = {
          scalar_constant(DataType::int64(), static_cast<double>(i), n.name() + ".iteration"),
          scalar_constant(DataType::boolean(), 1, n.name() + ".cond")};
      bound.insert(bound.end(), carried.begin(), carried.end());
      std::vector<Value> out = import_scoped(g, bound, "body");
      const auto* cond_out = constant_of(out[0]);
      TT_CHECK(cond_out, kInvalidArgument,
               "its body's condition output is known only at run time; a Loop is supported "
               "when it is constant for the given input shapes (it is unrolled)");
      go = cond_out->data.array().get_int(0) != 0;
      std::copy(out.begin() + 1, out.begin() + 1 + static_cast<std::ptrdiff_t>(n_carried),
                carried.begin());
      for (size_t k = 0; k < scans.size(); ++k) scans[k].push_back(out[1 + n_carried + k]);
    }
    std::vector<Value> results = carried;
    for (auto& parts : scans) {
      TT_CHECK(!parts.empty(), kInvalidArgument,
               "runs no iteration, so its scan outputs are empty (zero-size tensors are not "
               "supported)");
      results.push_back(stack(std::move(parts), 0, false, n));
    }
    return results;
  };
  // One scan over `sequences` (each along its axis, reversed where its
  // direction is 1) from `state`: the final states, then each scan output
  // stacked along its axis.
  auto scan = [this, stack](
                  const onnx::NodeProto& n, const onnx::GraphProto& g, std::vector<Value> state,
                  const std::vector<Value>& sequences, const std::vector<int64_t>& in_axes,
                  const std::vector<int64_t>& in_reverse, const std::vector<int64_t>& out_axes,
                  const std::vector<int64_t>& out_reverse) {
    const size_t n_state = state.size();
    TT_CHECK(static_cast<size_t>(g.output_size()) >= n_state, kParse, "its body has ",
             g.output_size(), " outputs, fewer than its ", n_state, " state variables");
    const size_t n_scan_out = static_cast<size_t>(g.output_size()) - n_state;
    TT_CHECK(out_axes.size() == n_scan_out && out_reverse.size() == n_scan_out, kInvalidArgument,
             "scan_output_axes and scan_output_directions need ", n_scan_out, " values");
    std::vector<size_t> seq_axes;
    int64_t steps = -1;
    for (size_t j = 0; j < sequences.size(); ++j) {
      const Value& x = sequences[j];
      TT_CHECK(x, kInvalidArgument, "its scan input ", j, " is left out");
      const size_t axis = static_cast<size_t>(normalise(in_axes[j], x->shape.size()));
      TT_CHECK(steps < 0 || x->shape[axis] == steps, kInvalidArgument,
               "its scan inputs differ in length along their scan axes: ", steps, " and ",
               x->shape[axis]);
      steps = x->shape[axis];
      seq_axes.push_back(axis);
    }
    TT_CHECK(steps > 0, kInvalidArgument, "scans a sequence of length 0");
    TT_CHECK(steps <= kMaxIterations, kInvalidArgument, "scans ", steps, " steps, more than ",
             kMaxIterations, ", each of which is unrolled");
    std::vector<std::vector<Value>> scans(n_scan_out);
    for (int64_t t = 0; t < steps; ++t) {
      std::vector<Value> bound = state;
      for (size_t j = 0; j < sequences.size(); ++j) {
        const Value& x = sequences[j];
        const int64_t at = in_reverse[j] != 0 ? steps - 1 - t : t;
        Value step = make("slice", {x}, slice_along(x->shape, seq_axes[j], at, at + 1), n);
        std::vector<int64_t> shape = x->shape;
        shape.erase(shape.begin() + static_cast<std::ptrdiff_t>(seq_axes[j]));
        bound.push_back(make("reshape", {step}, reshape_attrs(shape), n));
      }
      std::vector<Value> out = import_scoped(g, bound, "body");
      std::copy(out.begin(), out.begin() + static_cast<std::ptrdiff_t>(n_state), state.begin());
      for (size_t k = 0; k < n_scan_out; ++k) scans[k].push_back(out[n_state + k]);
    }
    std::vector<Value> results = state;
    for (size_t k = 0; k < n_scan_out; ++k) {
      results.push_back(stack(std::move(scans[k]), out_axes[k], out_reverse[k] != 0, n));
    }
    return results;
  };
  h["Scan"] = [this, scan, stack](const onnx::NodeProto& n, const std::vector<Value>& in) {
    const auto* body = attr(n, "body");
    TT_CHECK(body && body->has_g(), kParse, "has no body");
    const onnx::GraphProto& g = body->g();
    // Before opset 9 a first input, sequence_lens, comes before the states.
    const size_t first = opset_ < 9 ? 1 : 0;
    const int64_t n_scan_in = attr_int(n, "num_scan_inputs", -1);
    TT_CHECK(n_scan_in >= 1 && first + static_cast<size_t>(n_scan_in) <= in.size(),
             kInvalidArgument, "num_scan_inputs ", n_scan_in, " does not fit its ", in.size(),
             " inputs");
    const size_t n_state = in.size() - first - static_cast<size_t>(n_scan_in);
    const size_t n_scan_out =
        static_cast<size_t>(std::max<int64_t>(0, g.output_size() - static_cast<int64_t>(n_state)));
    auto per = [&](const char* name, size_t count) { return sized_ints(n, name, 0, count); };
    std::vector<Value> state(in.begin() + static_cast<std::ptrdiff_t>(first),
                             in.begin() + static_cast<std::ptrdiff_t>(first + n_state));
    std::vector<Value> sequences(in.begin() + static_cast<std::ptrdiff_t>(first + n_state),
                                 in.end());
    if (opset_ >= 9) {
      return scan(n, g, state, sequences, per("scan_input_axes", n_scan_in),
                  per("scan_input_directions", n_scan_in), per("scan_output_axes", n_scan_out),
                  per("scan_output_directions", n_scan_out));
    }
    // Opset 8: every state and scan input has a batch axis first, the scan
    // inputs their sequence axis second; each batch entry scans on its own.
    TT_CHECK(sequences[0], kInvalidArgument, "its scan input 0 is left out");
    const int64_t batch = sequences[0]->shape[0], steps = sequences[0]->shape.at(1);
    if (!in.empty() && in[0]) {
      const auto* lens = constant_of(in[0]);
      TT_CHECK(lens, kInvalidArgument, "its sequence_lens must be a constant");
      for (int64_t v : ints_of(lens->data.array())) {
        TT_CHECK(v == steps, kInvalidArgument, "sequence_lens ", v,
                 " differs from the sequence's length ", steps,
                 " (shorter sequences are not supported)");
      }
    }
    auto entry = [&](const Value& v, int64_t b) {
      TT_CHECK(v && !v->shape.empty() && v->shape[0] == batch, kInvalidArgument,
               "its inputs differ in batch size");
      std::vector<int64_t> shape(v->shape.begin() + 1, v->shape.end());
      return make("reshape", {make("slice", {v}, slice_along(v->shape, 0, b, b + 1), n)},
                  reshape_attrs(shape), n);
    };
    std::vector<std::vector<Value>> per_entry;
    for (int64_t b = 0; b < batch; ++b) {
      std::vector<Value> s, q;
      for (const auto& v : state) s.push_back(entry(v, b));
      for (const auto& v : sequences) q.push_back(entry(v, b));
      per_entry.push_back(scan(n, g, s, q, std::vector<int64_t>(q.size(), 0),
                               per("directions", q.size()), std::vector<int64_t>(n_scan_out, 0),
                               std::vector<int64_t>(n_scan_out, 0)));
    }
    std::vector<Value> results;
    for (size_t k = 0; k < per_entry[0].size(); ++k) {
      std::vector<Value> parts;
      for (const auto& r : per_entry) parts.push_back(r[k]);
      results.push_back(stack(std::move(parts), 0, false, n));
    }
    return results;
  };
  h["Identity"] = [need, one](const onnx::NodeProto&, const std::vector<Value>& in) {
    return one(need(in, 0, "data"));
  };
  h["Dropout"] = [this, need](const onnx::NodeProto& n, const std::vector<Value>& in) {
    Value x = need(in, 0, "data");
    // In inference nothing is dropped: the data passes and the mask is all
    // true. So in training at ratio 0 (the scale 1 / (1 - 0) is 1). Training
    // at another ratio (a random mask) is a gap.
    if (in.size() > 2 && in[2]) {
      const auto* training = constant_of(in[2]);
      TT_CHECK(training, kInvalidArgument,
               "its training_mode must be a constant (inference: false)");
      if (training->data.array().get(0) != 0) {
        const auto* ratio = in.size() > 1 && in[1] ? constant_of(in[1]) : nullptr;
        TT_CHECK(ratio && ratio->data.array().get(0) == 0, kInvalidArgument,
                 "training_mode = true (a random mask) is supported only at a constant ratio "
                 "of 0, which drops nothing");
      }
    }
    if (n.output_size() < 2 || n.output(1).empty()) return std::vector<Value>{x};
    te::NDArray mask(DataType::boolean(), x->shape);
    for (int64_t i = 0; i < mask.size(); ++i) mask.set(i, 1);
    return std::vector<Value>{x, graph::constant(std::move(mask), n.name() + ".mask")};
  };
  h["Shape"] = [this, need, one](const onnx::NodeProto& n, const std::vector<Value>& in) {
    std::vector<int64_t> shape = need(in, 0, "data")->shape;
    int64_t rank = static_cast<int64_t>(shape.size());
    int64_t start = attr_int(n, "start", 0), end = attr_int(n, "end", rank);
    if (start < 0) start += rank;
    if (end < 0) end += rank;
    start = std::clamp<int64_t>(start, 0, rank);
    end = std::clamp<int64_t>(end, start, rank);
    return one(
        graph::constant(int64_array({shape.begin() + start, shape.begin() + end}), n.output(0)));
  };
  h["Size"] = [this, need, one](const onnx::NodeProto& n, const std::vector<Value>& in) {
    const Value& x = need(in, 0, "data");
    te::NDArray size(DataType::int64(), {});
    size.set_int(
        0, std::accumulate(x->shape.begin(), x->shape.end(), int64_t{1}, std::multiplies<>()));
    return one(graph::constant(std::move(size), n.output(0)));
  };
  h["GridSample"] = [this, need, one](const onnx::NodeProto& n, const std::vector<Value>& in) {
    return one(grid_sample(n, need(in, 0, "X"), need(in, 1, "grid")));
  };
  h["RoiAlign"] = [this, need, one](const onnx::NodeProto& n, const std::vector<Value>& in) {
    return one(roi_align(n, need(in, 0, "X"), need(in, 1, "rois"), need(in, 2, "batch_indices")));
  };
  h["GatherElements"] = [this, need, one](const onnx::NodeProto& n, const std::vector<Value>& in) {
    const Value& data = need(in, 0, "data");
    int64_t axis = normalise(attr_int(n, "axis", 0), data->shape.size());
    return one(make("gather_elements", {data, need(in, 1, "indices")}, axis_attrs(axis), n));
  };
  // NegativeLogLikelihoodLoss, and SoftmaxCrossEntropyLoss as it on the
  // log-softmax: loss[n, d...] = -input[n, target[n, d...], d...] * weight[target],
  // 0 where the target is ignore_index; reduced by "none", "sum" or "mean"
  // (divided by the weights taken, or the targets counted without weights).
  auto log_likelihood_loss = [this](const onnx::NodeProto& n, const Value& input,
                                    const Value& target, const Value& weight) {
    TT_CHECK(input->shape.size() >= 2 && target->shape.size() + 1 == input->shape.size(),
             kInvalidArgument, "needs input [N, C, ...] and target [N, ...], got ",
             shape_text(input->shape), " and ", shape_text(target->shape));
    TT_CHECK(target->dtype.is_integer(), kInvalidArgument, "its target is ", target->dtype.str(),
             ", not an integer type");
    const std::string reduction = attr_string(n, "reduction", "mean");
    TT_CHECK(reduction == "none" || reduction == "sum" || reduction == "mean", kInvalidArgument,
             "reduction '", reduction, "' (none, sum, mean)");
    auto op = [&](const char* name, std::vector<Value> args, te::Attrs a = te::Attrs()) {
      return make(name, std::move(args), std::move(a), n);
    };
    std::vector<int64_t> picked_shape = input->shape;
    picked_shape[1] = 1;
    Value picked = op("gather_elements",
                      {input, op("reshape", {target}, reshape_attrs(picked_shape))}, axis_attrs(1));
    picked = op("reshape", {picked}, reshape_attrs(target->shape));
    // The weight each position takes: weight[target], or 1; 0 where ignored.
    Value taken;
    if (weight) {
      TT_CHECK(weight->shape == std::vector<int64_t>{input->shape[1]}, kInvalidArgument,
               "its weight ", shape_text(weight->shape), " must be [C] = [", input->shape[1], "]");
      taken = op("take", {weight, target}, axis_attrs(0));
    }
    if (const auto* ignore = attr(n, "ignore_index")) {
      Value index =
          scalar_constant(target->dtype, static_cast<double>(ignore->i()), n.name() + ".ignore");
      Value kept = op("logical_not", {op("equal", {target, index})});
      taken =
          op("where", {kept, taken ? taken : scalar_constant(input->dtype, 1, n.name() + ".one"),
                       scalar_constant(input->dtype, 0, n.name() + ".zero")});
    }
    Value loss = op("negative", {taken ? op("multiply", {picked, taken}) : picked});
    if (reduction == "none") return loss;
    auto whole = [&](const Value& v) {
      return op("reduce_sum", {v}, whole_reduce_attrs(v->shape.size()));
    };
    Value total = whole(loss);
    if (reduction == "sum") return total;
    if (taken) {
      // ONNX Runtime divides by the weights as broadcast over the positions.
      if (taken->shape != loss->shape) taken = op("expand", {taken}, reshape_attrs(loss->shape));
      return op("divide", {total, whole(taken)});
    }
    const int64_t count = checked_elements(loss->shape, "the loss");
    return op("divide", {total, scalar_constant(input->dtype, static_cast<double>(count),
                                                n.name() + ".count")});
  };
  h["NegativeLogLikelihoodLoss"] = [need, one, log_likelihood_loss](const onnx::NodeProto& n,
                                                                    const std::vector<Value>& in) {
    return one(log_likelihood_loss(n, need(in, 0, "input"), need(in, 1, "target"),
                                   in.size() > 2 ? in[2] : Value()));
  };
  h["SoftmaxCrossEntropyLoss"] = [this, need, log_likelihood_loss](const onnx::NodeProto& n,
                                                                   const std::vector<Value>& in) {
    Value scores = need(in, 0, "scores");
    TT_CHECK(scores->dtype.is_float(), kInvalidArgument, "its scores are ", scores->dtype.str(),
             ", not a float type");
    Value log_prob = make("nn.log_softmax", {scores}, axis_attrs(1), n);
    return std::vector<Value>{
        log_likelihood_loss(n, log_prob, need(in, 1, "labels"), in.size() > 2 ? in[2] : Value()),
        log_prob};
  };
  h["Tile"] = [this, need, one](const onnx::NodeProto& n, const std::vector<Value>& in) {
    auto a = make_node<te::TileAttrsNode>();
    a->repeats = const_ints(n, in, 1, "repeats");
    return one(make("tile", {need(in, 0, "input")}, te::Attrs(attrs(std::move(a))), n));
  };
  h["CumSum"] = [this, need, one](const onnx::NodeProto& n, const std::vector<Value>& in) {
    const Value& x = need(in, 0, "x");
    std::vector<int64_t> axis = const_ints(n, in, 1, "axis");
    TT_CHECK(axis.size() == 1, kInvalidArgument, "axis must hold one value");
    auto a = make_node<te::CumSumAttrsNode>();
    a->axis = normalise(axis[0], x->shape.size());
    a->exclusive = attr_int(n, "exclusive", 0) != 0;
    a->reverse = attr_int(n, "reverse", 0) != 0;
    return one(make("cumsum", {x}, te::Attrs(attrs(std::move(a))), n));
  };
  h["OneHot"] = [this, need, one](const onnx::NodeProto& n, const std::vector<Value>& in) {
    Value indices = need(in, 0, "indices");
    // Float indices count by their integer part.
    if (indices->dtype.is_float())
      indices = make("cast", {indices}, cast_attrs(DataType::int64()), n);
    std::vector<int64_t> depth = const_ints(n, in, 1, "depth");
    TT_CHECK(depth.size() == 1, kInvalidArgument, "depth must hold one value");
    const auto* values = constant_of(need(in, 2, "values"));
    TT_CHECK(values && values->data.array().size() == 2, kInvalidArgument,
             "values must be a constant [off_value, on_value]");
    auto a = make_node<te::OneHotAttrsNode>();
    a->depth = depth[0];
    a->off_value = values->data.array().get(0);
    a->on_value = values->data.array().get(1);
    a->dtype = values->data.array().dtype();
    a->axis = attr_int(n, "axis", -1);
    return one(make("one_hot", {indices}, te::Attrs(attrs(std::move(a))), n));
  };
  h["Range"] = [this, one](const onnx::NodeProto& n, const std::vector<Value>& in) {
    // Constant bounds (every exporter's case with static shapes): a constant.
    auto scalar = [&](size_t k, const char* what) {
      TT_CHECK(k < in.size() && in[k] && constant_of(in[k]), kInvalidArgument, "its ", what,
               " must be a constant (or computed from static shapes)");
      return constant_of(in[k])->data.array();
    };
    te::NDArray start = scalar(0, "start"), limit = scalar(1, "limit"), delta = scalar(2, "delta");
    TT_CHECK(delta.get(0) != 0, kInvalidArgument, "delta must not be 0");
    double count = std::ceil((limit.get(0) - start.get(0)) / delta.get(0));
    TT_CHECK(count >= 1 && count < 1e9, kInvalidArgument, "the range [", start.get(0), ", ",
             limit.get(0), ") by ", delta.get(0), " has ", std::max(count, 0.0),
             " elements; at least 1 is needed");
    te::NDArray out(start.dtype(), {static_cast<int64_t>(count)});
    for (int64_t i = 0; i < out.size(); ++i) {
      if (out.dtype().is_float()) {
        out.set(i, start.get(0) + static_cast<double>(i) * delta.get(0));
      } else {
        out.set_int(i, start.get_int(0) + i * delta.get_int(0));
      }
    }
    return one(graph::constant(std::move(out), n.output(0)));
  };
  // NonZero's output shape is its input's count of non-zero values: known
  // at compile time only for a constant input (a mask computed from static
  // shapes, or one fixed with --input-value), which it folds.
  h["NonZero"] = [this, need, one](const onnx::NodeProto& n, const std::vector<Value>& in) {
    const Value& x = need(in, 0, "X");
    if (holds_nothing(x)) {
      return one(
          nothing({static_cast<int64_t>(x->shape.size()), 0}, DataType::int64(), n.output(0)));
    }
    const graph::ConstantNode* k = constant_of(x);
    TT_CHECK(
        k, kInvalidArgument,
        "its output's shape is the count of its input's non-zero values, so the input must "
        "be a constant (or computed from static shapes; fix a model input with --input-value)");
    const te::NDArray& a = k->data.array();
    // A scalar as ONNX Runtime takes it: one axis of extent 1.
    const std::vector<int64_t> shape = a.shape().empty() ? std::vector<int64_t>{1} : a.shape();
    std::vector<int64_t> found;
    for (int64_t i = 0; i < a.size(); ++i) {
      if (a.get(i) != 0) found.push_back(i);
    }
    const auto rank = static_cast<int64_t>(shape.size());
    const auto count = static_cast<int64_t>(found.size());
    te::NDArray out(DataType::int64(), {rank, count});
    for (int64_t j = 0; j < count; ++j) {
      const std::vector<int64_t> index =
          a.shape().empty() ? std::vector<int64_t>{0} : a.unflatten(found[static_cast<size_t>(j)]);
      for (int64_t d = 0; d < rank; ++d) out.set_int(d * count + j, index[static_cast<size_t>(d)]);
    }
    return one(graph::constant(std::move(out), n.output(0)));
  };
  // DepthToSpace and SpaceToDepth: a reshape, a transpose and a reshape.
  for (const char* op : {"DepthToSpace", "SpaceToDepth"}) {
    bool to_space = std::string(op) == "DepthToSpace";
    h[op] = [this, need, one, to_space](const onnx::NodeProto& n, const std::vector<Value>& in) {
      const Value& x = need(in, 0, "input");
      TT_CHECK(x->shape.size() == 4, kInvalidArgument, "needs 4-D data, got ",
               shape_text(x->shape));
      int64_t b = attr_int(n, "blocksize", 0);
      TT_CHECK(b >= 1, kInvalidArgument, "needs a blocksize >= 1");
      int64_t c = x->shape[1], hh = x->shape[2], w = x->shape[3], nn = x->shape[0];
      std::vector<int64_t> split, perm, out;
      if (to_space) {
        TT_CHECK(c % (b * b) == 0, kInvalidArgument, "the channels (", c,
                 ") are not a multiple of blocksize^2 (", b * b, ")");
        std::string mode = attr_string(n, "mode", "DCR");
        TT_CHECK(mode == "DCR" || mode == "CRD", kInvalidArgument, "mode '", mode,
                 "' is not supported (DCR or CRD)");
        if (mode == "DCR") {
          split = {nn, b, b, c / (b * b), hh, w};
          perm = {0, 3, 4, 1, 5, 2};
        } else {
          split = {nn, c / (b * b), b, b, hh, w};
          perm = {0, 1, 4, 2, 5, 3};
        }
        out = {nn, c / (b * b), hh * b, w * b};
      } else {
        TT_CHECK(hh % b == 0 && w % b == 0, kInvalidArgument, "the spatial extents ", hh, "x", w,
                 " are not multiples of the blocksize ", b);
        split = {nn, c, hh / b, b, w / b, b};
        perm = {0, 3, 5, 1, 2, 4};
        out = {nn, c * b * b, hh / b, w / b};
      }
      Value v = make("reshape", {x}, reshape_attrs(split), n);
      v = make("transpose", {v}, transpose_attrs(perm), n);
      return one(make("reshape", {v}, reshape_attrs(out), n));
    };
  }
  h["Expand"] = [this, need, one](const onnx::NodeProto& n, const std::vector<Value>& in) {
    return one(
        make("expand", {need(in, 0, "input")}, reshape_attrs(const_ints(n, in, 1, "shape")), n));
  };
  h["ConstantOfShape"] = [this, one](const onnx::NodeProto& n, const std::vector<Value>& in) {
    std::vector<int64_t> shape = const_ints(n, in, 0, "shape");
    te::NDArray fill_value(DataType::float32(), {1});
    if (const auto* v = attr(n, "value")) fill_value = to_array(v->t(), model_dir_);
    te::NDArray a(fill_value.dtype(), shape);
    for (int64_t i = 0; i < a.size(); ++i) {
      a.dtype().is_float() ? a.set(i, fill_value.get(0)) : a.set_int(i, fill_value.get_int(0));
    }
    return one(graph::constant(std::move(a), n.output(0)));
  };
  h["Gather"] = [this, need, one](const onnx::NodeProto& n, const std::vector<Value>& in) {
    const Value& data = need(in, 0, "data");
    int64_t axis = normalise(attr_int(n, "axis", 0), data->shape.size());
    if (!constant_of(need(in, 1, "indices"))) {
      // Indices known at run time only (an embedding lookup).
      return one(make("take", {data, in[1]}, axis_attrs(axis), n));
    }
    std::vector<int64_t> indices = const_ints(n, in, 1, "indices");
    const auto* index_const = constant_of(in[1]);
    int64_t extent = data->shape[axis];
    for (auto& i : indices) {
      if (i < 0) i += extent;
      TT_CHECK(i >= 0 && i < extent, kInvalidArgument, "index ", i, " is out of range for extent ",
               extent);
    }
    // One slice per index, joined along the axis; a scalar index drops it.
    std::vector<Value> parts;
    for (int64_t i : indices) {
      auto s = make_node<te::SliceAttrsNode>();
      s->begin.assign(data->shape.size(), 0);
      s->end = data->shape;
      s->strides.assign(data->shape.size(), 1);
      s->begin[axis] = i;
      s->end[axis] = i + 1;
      parts.push_back(make("slice", {data}, te::Attrs(attrs(std::move(s))), n));
    }
    Value joined = parts.size() == 1 ? parts[0] : make("concat", parts, axis_attrs(axis), n);
    std::vector<int64_t> shape(data->shape.begin(), data->shape.begin() + axis);
    for (int64_t d : index_const->shape) shape.push_back(d);
    shape.insert(shape.end(), data->shape.begin() + axis + 1, data->shape.end());
    return one(make("reshape", {joined}, reshape_attrs(shape), n));
  };

  // ---- convolution, dense, matmul ----
  // 1-D windows (audio: an STFT as a strided Conv, 1-D pools) run as 2-D
  // ones of height 1: the data and weight get a unit axis before the last,
  // the window attributes a leading 1 (pads: 0 above and below).
  auto lift_1d = [this](const onnx::NodeProto& n, const Value& v) {
    std::vector<int64_t> shape = v->shape;
    shape.insert(shape.end() - 1, 1);
    return make("reshape", {v}, reshape_attrs(shape), n);
  };
  auto window_ints = [this](const onnx::NodeProto& n, const char* name, bool one_d,
                            std::vector<int64_t> fallback) {
    std::vector<int64_t> v = attr_ints(n, name, {});
    if (v.empty()) return fallback;
    TT_CHECK(v.size() == (one_d ? 1u : 2u) * (std::string(name) == "pads" ? 2 : 1),
             kInvalidArgument, name, " has ", v.size(), " values for a ", one_d ? "1" : "2",
             "-D window");
    if (!one_d) return v;
    if (std::string(name) == "pads") return std::vector<int64_t>{0, v[0], 0, v[1]};
    return std::vector<int64_t>{1, v[0]};
  };
  auto check_window_rank = [](const Value& x, const char* what) {
    TT_CHECK(x->shape.size() == 3 || x->shape.size() == 4, kInvalidArgument, "only 1-D and 2-D ",
             what, " (3-D or 4-D data) are supported, got data ", shape_text(x->shape));
    return x->shape.size() == 3;
  };
  auto unlift_1d = [this](const onnx::NodeProto& n, const Value& v) {
    std::vector<int64_t> shape = v->shape;
    shape.erase(shape.end() - 2);
    return make("reshape", {v}, reshape_attrs(shape), n);
  };
  h["Conv"] = [this, need, one, lift_1d, window_ints, check_window_rank, unlift_1d](
                  const onnx::NodeProto& n, const std::vector<Value>& in) {
    if (Value integer = integer_qdq_conv(n, in)) return one(integer);
    Value x = need(in, 0, "data");
    Value w = need(in, 1, "weight");
    if (x->shape.size() == 5) {
      TT_CHECK(w->shape.size() == 5, kInvalidArgument, "the weight ", shape_text(w->shape),
               " and the data ", shape_text(x->shape), " differ in rank");
      std::vector<int64_t> kernel = attr_ints(n, "kernel_shape", {});
      if (kernel.empty()) kernel.assign(w->shape.begin() + 2, w->shape.end());
      const Window win = window_of(n, {x->shape.begin() + 2, x->shape.end()}, kernel, false);
      Value out = conv3d_by_slices(n, x, w, win, attr_int(n, "group", 1));
      if (in.size() > 2 && in[2]) out = make("nn.bias_add", {out, in[2]}, axis_attrs(1), n);
      return one(out);
    }
    const bool one_d = check_window_rank(x, "convolutions");
    TT_CHECK(w->shape.size() == x->shape.size(), kInvalidArgument, "the weight ",
             shape_text(w->shape), " and the data ", shape_text(x->shape), " differ in rank");
    if (one_d) {
      x = lift_1d(n, x);
      w = lift_1d(n, w);
    }
    auto a = make_node<te::Conv2dAttrsNode>();
    std::vector<int64_t> kernel = window_ints(n, "kernel_shape", one_d, {w->shape[2], w->shape[3]});
    a->strides = window_ints(n, "strides", one_d, {1, 1});
    a->dilation = window_ints(n, "dilations", one_d, {1, 1});
    a->groups = attr_int(n, "group", 1);
    a->padding =
        window_pads(attr_string(n, "auto_pad", "NOTSET"), window_ints(n, "pads", one_d, {}),
                    {x->shape[2], x->shape[3]}, kernel, a->strides, a->dilation);
    Value out = make("nn.conv2d", {x, w}, te::Attrs(attrs(std::move(a))), n);
    if (in.size() > 2 && in[2]) out = make("nn.bias_add", {out, in[2]}, axis_attrs(1), n);
    return one(one_d ? unlift_1d(n, out) : out);
  };
  // ---- quantization: int8 and uint8 as ONNX Runtime's quantizer writes it ----
  // The integer products run in int32 (exact, as ONNX Runtime's); scales
  // apply in float32 and a result rounds half to even and saturates.
  auto cast_to = [this](const Value& v, DataType t, const onnx::NodeProto& n) {
    if (v->dtype == t) return v;
    return make("cast", {v}, cast_attrs(t), n);
  };
  // A scale or zero point against data `x`: per tensor (a scalar or [1]) as
  // it is; per axis ([C]) reshaped to C along `axis` and 1 elsewhere.
  auto along = [this](const Value& v, const Value& x, int64_t axis, const char* what,
                      const onnx::NodeProto& n) {
    if (checked_elements(v->shape, what) == 1) return make("reshape", {v}, reshape_attrs({}), n);
    size_t a = static_cast<size_t>(normalise(axis, x->shape.size()));
    TT_CHECK(v->shape.size() == 1 && v->shape[0] == x->shape[a], kInvalidArgument, "its ", what,
             " ", shape_text(v->shape), " is neither one value nor one per element of axis ", a,
             " of ", shape_text(x->shape));
    std::vector<int64_t> shape(x->shape.size(), 1);
    shape[a] = v->shape[0];
    return make("reshape", {v}, reshape_attrs(shape), n);
  };
  auto integer_type = [](const Value& v, const char* what) {
    TT_CHECK(v->dtype == DataType::int_(8) || v->dtype == DataType::uint(8), kInvalidArgument,
             "its ", what, " is ", v->dtype.str(), "; int8 and uint8 are supported");
  };
  // round(value) + zero point, saturated to `t`'s range and stored as `t`.
  auto saturate = [this, cast_to](Value value, const Value& zero_point, DataType t,
                                  const onnx::NodeProto& n) {
    Value q = make("round", {value}, te::Attrs(), n);
    if (zero_point)
      q = make("add", {q, cast_to(zero_point, DataType::float32(), n)}, te::Attrs(), n);
    const bool is_signed = t == DataType::int_(8);
    q = make("clip", {q}, scalar_attrs(is_signed ? -128 : 0, is_signed ? 127 : 255), n);
    return cast_to(q, t, n);
  };
  auto optional_input = [](const std::vector<Value>& in, size_t k) {
    return k < in.size() ? in[k] : Value();
  };
  h["QuantizeLinear"] = [this, need, one, along, saturate, optional_input](
                            const onnx::NodeProto& n, const std::vector<Value>& in) {
    Value x = need(in, 0, "x"), zp = optional_input(in, 2);
    TT_CHECK(x->dtype == DataType::float32(), kInvalidArgument, "quantizes ", x->dtype.str(),
             "; float32 is supported");
    const int64_t axis = attr_int(n, "axis", 1);
    TT_CHECK(attr_int(n, "block_size", 0) == 0, kInvalidArgument,
             "blocked quantization (block_size) is not supported");
    DataType t = zp ? zp->dtype : DataType::uint(8);
    TT_CHECK(t == DataType::int_(8) || t == DataType::uint(8), kInvalidArgument, "quantizes to ",
             t.str(), "; int8 and uint8 are supported");
    Value scaled =
        make("divide", {x, along(need(in, 1, "y_scale"), x, axis, "y_scale", n)}, te::Attrs(), n);
    return one(saturate(scaled, zp ? along(zp, x, axis, "y_zero_point", n) : Value(), t, n));
  };
  h["DequantizeLinear"] = [this, need, one, along, cast_to, optional_input](
                              const onnx::NodeProto& n, const std::vector<Value>& in) {
    Value x = need(in, 0, "x"), zp = optional_input(in, 2);
    TT_CHECK(x->dtype == DataType::int_(8) || x->dtype == DataType::uint(8) ||
                 x->dtype == DataType::int32(),
             kInvalidArgument, "dequantizes ", x->dtype.str(),
             "; int8, uint8 and int32 are supported");
    TT_CHECK(attr_int(n, "block_size", 0) == 0, kInvalidArgument,
             "blocked quantization (block_size) is not supported");
    const int64_t axis = attr_int(n, "axis", 1);
    Value v = cast_to(x, DataType::float32(), n);
    if (zp) {
      v = make("subtract",
               {v, cast_to(along(zp, x, axis, "x_zero_point", n), DataType::float32(), n)},
               te::Attrs(), n);
    }
    Value result =
        make("multiply", {v, along(need(in, 1, "x_scale"), x, axis, "x_scale", n)}, te::Attrs(), n);
    // The axis means something only to a per-axis scale (a 1-D tensor's
    // per-tensor scale leaves the default axis 1 out of its range).
    const bool per_axis = in[1]->shape.size() == 1 && in[1]->shape[0] > 1;
    dequantized_[result.get()] = {result, x, in[1], zp,
                                  per_axis ? normalise(axis, x->shape.size()) : 1};
    return one(result);
  };
  h["DynamicQuantizeLinear"] = [this, need, saturate](const onnx::NodeProto& n,
                                                      const std::vector<Value>& in) {
    Value x = need(in, 0, "x");
    TT_CHECK(x->dtype == DataType::float32(), kInvalidArgument, "quantizes ", x->dtype.str(),
             "; float32 is supported");
    auto whole = [&](const char* op) {
      return make(op, {x}, whole_reduce_attrs(x->shape.size()), n);
    };
    auto scalar = [&](double v, const char* what) {
      return scalar_constant(DataType::float32(), v, n.name() + what);
    };
    // The range always holds 0, so that 0 quantizes exactly.
    Value high = make("maximum", {whole("reduce_max"), scalar(0, ".zero")}, te::Attrs(), n);
    Value low = make("minimum", {whole("reduce_min"), scalar(0, ".zero")}, te::Attrs(), n);
    Value scale =
        make("divide", {make("subtract", {high, low}, te::Attrs(), n), scalar(255, ".levels")},
             te::Attrs(), n);
    // All zeros: ONNX Runtime takes scale 1 (zero point 0), not 0 and NaNs.
    scale =
        make("where", {make("equal", {high, low}, te::Attrs(), n), scalar(1, ".unit_scale"), scale},
             te::Attrs(), n);
    Value zero_point =
        saturate(make("negative", {make("divide", {low, scale}, te::Attrs(), n)}, te::Attrs(), n),
                 Value(), DataType::uint(8), n);
    Value y =
        saturate(make("divide", {x, scale}, te::Attrs(), n), zero_point, DataType::uint(8), n);
    return std::vector<Value>{y, scale, zero_point};
  };
  h["MatMulInteger"] = [this, need, one, integer_type, optional_input](
                           const onnx::NodeProto& n, const std::vector<Value>& in) {
    Value a = need(in, 0, "A"), b = need(in, 1, "B");
    integer_type(a, "A");
    integer_type(b, "B");
    Value azp = optional_input(in, 2), bzp = optional_input(in, 3);
    // A's zero point per row ([M]) or one; B's per column ([N]) or one.
    if (azp && azp->shape.size() == 1 && azp->shape[0] > 1) {
      azp = make("reshape", {azp}, reshape_attrs({azp->shape[0], 1}), n);
    }
    TT_CHECK(a->shape.size() >= 2 && b->shape.size() >= 2, kInvalidArgument,
             "needs A and B of rank 2 or more, got ", shape_text(a->shape), " and ",
             shape_text(b->shape));
    return one(make("nn.matmul", {centred(a, azp, n), centred(b, bzp, n)}, te::Attrs(), n));
  };
  h["ConvInteger"] = [this, need, integer_type, optional_input, along](
                         const onnx::NodeProto& n, const std::vector<Value>& in) {
    Value x = need(in, 0, "x"), w = need(in, 1, "w");
    integer_type(x, "x");
    integer_type(w, "w");
    Value xzp = optional_input(in, 2), wzp = optional_input(in, 3);
    // Padding with the zero point is padding the centred data with 0.
    if (wzp) wzp = along(wzp, w, 0, "w_zero_point", n);
    return handlers_.at("Conv")(n, {centred(x, xzp, n), centred(w, wzp, n)});
  };
  // QLinearConv and QLinearMatMul: the int32 product, scaled by
  // a_scale * b_scale / y_scale (per output channel for a per-channel weight)
  // in float32, rounded and saturated with y's zero point.
  h["QLinearConv"] = [this, need, one, integer_type, optional_input, along, saturate, cast_to](
                         const onnx::NodeProto& n, const std::vector<Value>& in) {
    Value x = need(in, 0, "x"), w = need(in, 3, "w"), yzp = optional_input(in, 7);
    integer_type(x, "x");
    integer_type(w, "w");
    Value wzp = optional_input(in, 5);
    if (wzp) wzp = along(wzp, w, 0, "w_zero_point", n);
    std::vector<Value> conv_in{centred(x, optional_input(in, 2), n), centred(w, wzp, n)};
    if (Value bias = optional_input(in, 8)) conv_in.push_back(bias);
    Value acc = handlers_.at("Conv")(n, conv_in)[0];
    Value w_scale = need(in, 4, "w_scale");
    w_scale = make("reshape", {w_scale},
                   reshape_attrs({w_scale->shape.empty() ? 1 : w_scale->shape[0]}), n);
    Value multiplier =
        make("divide",
             {make("multiply",
                   {make("reshape", {need(in, 1, "x_scale")}, reshape_attrs({}), n), w_scale},
                   te::Attrs(), n),
              make("reshape", {need(in, 6, "y_scale")}, reshape_attrs({}), n)},
             te::Attrs(), n);
    multiplier = along(multiplier, acc, 1, "w_scale", n);
    Value scaled =
        make("multiply", {cast_to(acc, DataType::float32(), n), multiplier}, te::Attrs(), n);
    DataType t = yzp ? yzp->dtype : DataType::uint(8);
    return one(
        saturate(scaled, yzp ? make("reshape", {yzp}, reshape_attrs({}), n) : Value(), t, n));
  };
  h["QLinearMatMul"] = [this, need, one, integer_type, saturate, cast_to](
                           const onnx::NodeProto& n, const std::vector<Value>& in) {
    Value a = need(in, 0, "a"), b = need(in, 3, "b"), yzp = need(in, 7, "y_zero_point");
    integer_type(a, "a");
    integer_type(b, "b");
    auto per_tensor = [&](size_t k, const char* what) {
      Value v = need(in, k, what);
      TT_CHECK(checked_elements(v->shape, what) == 1, kInvalidArgument, "its ", what, " ",
               shape_text(v->shape), " is not one value; per-axis QLinearMatMul is not supported");
      return make("reshape", {v}, reshape_attrs({}), n);
    };
    Value acc = make("nn.matmul",
                     {centred(a, per_tensor(2, "a_zero_point"), n),
                      centred(b, per_tensor(5, "b_zero_point"), n)},
                     te::Attrs(), n);
    Value multiplier = make(
        "divide",
        {make("multiply", {per_tensor(1, "a_scale"), per_tensor(4, "b_scale")}, te::Attrs(), n),
         per_tensor(6, "y_scale")},
        te::Attrs(), n);
    Value scaled =
        make("multiply", {cast_to(acc, DataType::float32(), n), multiplier}, te::Attrs(), n);
    return one(saturate(scaled, per_tensor(7, "y_zero_point"), yzp->dtype, n));
  };
  h["ConvTranspose"] = [this, need, one, lift_1d, window_ints, check_window_rank, unlift_1d](
                           const onnx::NodeProto& n, const std::vector<Value>& in) {
    Value x = need(in, 0, "data");
    Value w = need(in, 1, "weight");
    if (x->shape.size() == 5) {
      Value out = conv_transpose3d(n, x, w);
      if (in.size() > 2 && in[2]) out = make("nn.bias_add", {out, in[2]}, axis_attrs(1), n);
      return one(out);
    }
    const bool one_d = check_window_rank(x, "transposed convolutions");
    if (one_d) {
      x = lift_1d(n, x);
      w = lift_1d(n, w);
    }
    TT_CHECK(x->shape[1] == w->shape[0], kInvalidArgument, "the weight ", shape_text(w->shape),
             " does not take the ", x->shape[1], " channels of the data");
    const int64_t group = attr_int(n, "group", 1);
    TT_CHECK(group >= 1 && x->shape[1] % group == 0, kInvalidArgument, "group ", group,
             " does not divide the ", x->shape[1], " input channels");
    std::vector<int64_t> dilations = window_ints(n, "dilations", one_d, {1, 1});
    if (dilations != std::vector<int64_t>{1, 1}) {
      // A dilated kernel is the kernel with zeros between its taps.
      const auto* c = constant_of(w);
      TT_CHECK(c, kInvalidArgument, "its weight must be a constant for dilations other than 1");
      const te::NDArray& k = c->data.array();
      const int64_t rows = k.shape()[2], cols = k.shape()[3];
      const int64_t dr = (rows - 1) * dilations[0] + 1, dc = (cols - 1) * dilations[1] + 1;
      te::NDArray spread(k.dtype(), {k.shape()[0], k.shape()[1], dr, dc});
      for (int64_t plane = 0; plane < k.shape()[0] * k.shape()[1]; ++plane) {
        for (int64_t i = 0; i < rows; ++i) {
          for (int64_t j = 0; j < cols; ++j) {
            spread.set((plane * dr + i * dilations[0]) * dc + j * dilations[1],
                       k.get((plane * rows + i) * cols + j));
          }
        }
      }
      w = graph::constant(std::move(spread), n.name() + ".dilated");
    }
    const std::vector<int64_t> strides = window_ints(n, "strides", one_d, {1, 1});
    std::vector<int64_t> extra = attr_ints(n, "output_padding", {});
    if (one_d && extra.size() == 1) extra.insert(extra.begin(), 0);
    if (extra.empty()) extra = {0, 0};
    TT_CHECK(extra.size() == 2, kInvalidArgument, "output_padding has ", extra.size(), " values");
    // The padding before and after each spatial axis and the output's
    // extents: from pads and output_padding, or from output_shape (or
    // auto_pad's input x stride), splitting the padding as ONNX Runtime does.
    std::vector<int64_t> pads = window_ints(n, "pads", one_d, {0, 0, 0, 0});
    std::vector<int64_t> out_extent(2);
    const std::string auto_pad = attr_string(n, "auto_pad", "NOTSET");
    TT_CHECK(auto_pad == "NOTSET" || auto_pad == "VALID" || auto_pad == "SAME_UPPER" ||
                 auto_pad == "SAME_LOWER",
             kInvalidArgument, "auto_pad '", auto_pad,
             "' (NOTSET, VALID, SAME_UPPER or SAME_LOWER)");
    std::vector<int64_t> given = attr_ints(n, "output_shape", {});
    if (given.size() > 2 || (one_d && given.size() == 1)) {
      given.erase(given.begin(), given.end() - (one_d ? 1 : 2));  // only the spatial extents
    }
    if (one_d && given.size() == 1) given.insert(given.begin(), 1);
    for (size_t d = 0; d < 2; ++d) {
      const int64_t in_extent = x->shape[2 + d], kernel = w->shape[2 + d];
      const int64_t natural = strides[d] * (in_extent - 1) + extra[d] + kernel;
      int64_t wanted = -1;
      if (!given.empty()) {
        TT_CHECK(given.size() == 2, kInvalidArgument, "output_shape has ", given.size(),
                 " spatial values");
        wanted = given[d];
      } else if (auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER") {
        wanted = in_extent * strides[d];
      }
      if (auto_pad == "VALID") pads[d] = pads[d + 2] = 0;
      if (wanted < 0) {
        out_extent[d] = natural - pads[d] - pads[d + 2];
        continue;
      }
      const int64_t total = std::max<int64_t>(0, natural - wanted);
      const bool upper = auto_pad == "SAME_UPPER";
      pads[d] = upper ? total / 2 : total - total / 2;
      pads[d + 2] = total - pads[d];
      out_extent[d] = wanted;
    }
    TT_CHECK(out_extent[0] >= 1 && out_extent[1] >= 1, kInvalidArgument,
             "the output would be empty");
    // The operator computes rows [p', full - p'') of the full output
    // (stride * (in - 1) + kernel rows), with p' and p'' at most the
    // kernel's extent - 1. The rows wanted, [pad before, + extent), are
    // cropped from it, and those past the full output (no input reaches
    // them) filled with zeros.
    auto a = make_node<te::Conv2dTransposeAttrsNode>();
    a->strides = strides;
    a->output_padding = {0, 0};
    a->padding.assign(4, 0);
    std::vector<int64_t> begin(4, 0), end(4), fill(4, 0);
    bool crop = false, pad = false;
    for (size_t d = 0; d < 2; ++d) {
      const int64_t kernel = w->shape[2 + d];
      const int64_t full = strides[d] * (x->shape[2 + d] - 1) + kernel;
      const int64_t want_begin = pads[d], want_end = pads[d] + out_extent[d];
      const int64_t head = std::min(want_begin, kernel - 1);
      const int64_t tail = std::clamp<int64_t>(full - want_end, 0, kernel - 1);
      a->padding[d] = head;
      a->padding[d + 2] = tail;
      begin[2 + d] = want_begin - head;
      end[2 + d] = std::min(full - tail, want_end) - head;
      fill[2 + d] = want_end - std::min(full - tail, want_end);
      crop |= begin[2 + d] > 0 || end[2 + d] < full - tail - head;
      pad |= fill[2 + d] > 0;
    }
    const te::Attrs conv(attrs(std::move(a)));
    Value out;
    if (group == 1) {
      out = make("nn.conv2d_transpose", {x, w}, conv, n);
    } else {
      // One transposed convolution per group, joined on the channels.
      std::vector<Value> parts;
      const int64_t per_group = x->shape[1] / group;
      for (int64_t g = 0; g < group; ++g) {
        Value xs =
            make("slice", {x}, slice_along(x->shape, 1, g * per_group, (g + 1) * per_group), n);
        Value ws =
            make("slice", {w}, slice_along(w->shape, 0, g * per_group, (g + 1) * per_group), n);
        parts.push_back(make("nn.conv2d_transpose", {xs, ws}, conv, n));
      }
      out = make("concat", parts, axis_attrs(1), n);
    }
    end[0] = out->shape[0];
    end[1] = out->shape[1];
    if (crop) {
      auto sl = make_node<te::SliceAttrsNode>();
      sl->begin = begin;
      sl->end = end;
      sl->strides.assign(4, 1);
      out = make("slice", {out}, te::Attrs(attrs(std::move(sl))), n);
    }
    if (pad) {
      auto p = make_node<te::PadAttrsNode>();
      p->before.assign(4, 0);
      p->after = fill;
      out = make("pad", {out}, te::Attrs(attrs(std::move(p))), n);
    }
    if (in.size() > 2 && in[2]) out = make("nn.bias_add", {out, in[2]}, axis_attrs(1), n);
    return one(one_d ? unlift_1d(n, out) : out);
  };
  h["Gemm"] = [this, need, one](const onnx::NodeProto& n, const std::vector<Value>& in) {
    Value a = need(in, 0, "A"), b = need(in, 1, "B");
    TT_CHECK(a->shape.size() == 2 && b->shape.size() == 2, kInvalidArgument,
             "A and B must be 2-D, got ", shape_text(a->shape), " and ", shape_text(b->shape));
    if (attr_int(n, "transA", 0)) a = make("transpose", {a}, transpose_attrs({1, 0}), n);
    // nn.dense wants the weight as [N, K]: that is B transposed, or B with transB.
    if (!attr_int(n, "transB", 0)) b = make("transpose", {b}, transpose_attrs({1, 0}), n);
    Value out = make("nn.dense", {a, b}, te::Attrs(), n);
    double alpha = attr_float(n, "alpha", 1.0), beta = attr_float(n, "beta", 1.0);
    auto scalar = [&](double v) { return scalar_constant(out->dtype, v, n.name() + ".scalar"); };
    if (alpha != 1.0) out = make("multiply", {out, scalar(alpha)}, te::Attrs(), n);
    if (in.size() > 2 && in[2]) {
      Value c = in[2];
      if (beta != 1.0) c = make("multiply", {c, scalar(beta)}, te::Attrs(), n);
      out = make("add", {out, c}, te::Attrs(), n);
    }
    return one(out);
  };
  h["MatMul"] = [this, need, one](const onnx::NodeProto& n, const std::vector<Value>& in) {
    if (Value integer = integer_qdq_matmul(n, in)) return one(integer);
    Value a = need(in, 0, "A"), b = need(in, 1, "B");
    if (holds_nothing(a) || holds_nothing(b)) return one(matmul_of_nothing(a, b, n));
    // 1-D operands as numpy treats them: a row, or a column, then dropped.
    bool a_vector = a->shape.size() == 1, b_vector = b->shape.size() == 1;
    if (a_vector) a = make("reshape", {a}, reshape_attrs({1, a->shape[0]}), n);
    if (b_vector) b = make("reshape", {b}, reshape_attrs({b->shape[0], 1}), n);
    Value out;
    if (constant_of(b) && b->shape.size() == 2 && a->shape.size() >= 2 &&
        a->shape.back() == b->shape[0]) {
      // A weight: dense on the rows of A, with the weight as [N, K].
      int64_t k = b->shape[0], rows = 1;
      for (size_t d = 0; d + 1 < a->shape.size(); ++d) rows *= a->shape[d];
      Value flat = a->shape.size() == 2 ? a : make("reshape", {a}, reshape_attrs({rows, k}), n);
      Value weight = make("transpose", {b}, transpose_attrs({1, 0}), n);
      out = make("nn.dense", {flat, weight}, te::Attrs(), n);
      std::vector<int64_t> shape(a->shape.begin(), a->shape.end() - 1);
      shape.push_back(b->shape[1]);
      if (a->shape.size() != 2) out = make("reshape", {out}, reshape_attrs(shape), n);
    } else {
      out = make("nn.matmul", {a, b}, te::Attrs(), n);
    }
    if (a_vector || b_vector) {
      std::vector<int64_t> shape = out->shape;
      if (b_vector) shape.pop_back();
      if (a_vector) shape.erase(shape.end() - (b_vector ? 1 : 2));
      out = make("reshape", {out}, reshape_attrs(shape), n);  // a scalar for two vectors
    }
    return one(out);
  };

  // ---- elementwise ----
  for (const char* op : {"Add", "Sub", "Mul", "Div", "Pow"}) {
    static const std::map<std::string, std::string> ours = {{"Add", "add"},
                                                            {"Sub", "subtract"},
                                                            {"Mul", "multiply"},
                                                            {"Div", "divide"},
                                                            {"Pow", "power"}};
    std::string name = ours.at(op);
    h[op] = [this, need, one, name, cast_to](const onnx::NodeProto& n,
                                             const std::vector<Value>& in) {
      Value a = need(in, 0, "A"), b = need(in, 1, "B");
      if (name == "power" && !a->dtype.is_float()) {
        // An integer base: raised in float64 (exact to 2^53) and truncated
        // back to its type, as ONNX Runtime's static_cast<T>(pow(x, y)).
        const DataType wide = DataType::float64();
        Value raised = make("power", {cast_to(a, wide, n), cast_to(b, wide, n)}, te::Attrs(), n);
        return one(cast_to(raised, a->dtype, n));
      }
      // The result has the base's type, whatever the exponent's.
      if (name == "power") b = cast_to(b, a->dtype, n);
      return one(make(name, {a, b}, te::Attrs(), n));
    };
  }
  static const std::map<std::string, std::string> unary_ops = {
      {"Relu", "relu"},         {"Sigmoid", "sigmoid"},   {"Tanh", "tanh"},
      {"Erf", "erf"},           {"Sqrt", "sqrt"},         {"Exp", "exp"},
      {"Log", "log"},           {"Abs", "abs"},           {"Neg", "negative"},
      {"Floor", "floor"},       {"Ceil", "ceil"},         {"Reciprocal", "reciprocal"},
      {"Sin", "sin"},           {"Cos", "cos"},           {"Sign", "sign"},
      {"Softplus", "softplus"}, {"Softsign", "softsign"}, {"Mish", "mish"},
      {"Not", "logical_not"},   {"Round", "round"}};
  for (const auto& [op, ours] : unary_ops) {
    std::string name = ours;
    h[op] = [this, need, one, name](const onnx::NodeProto& n, const std::vector<Value>& in) {
      return one(make(name, {need(in, 0, "X")}, te::Attrs(), n));
    };
  }
  static const std::map<std::string, std::string> binary_ops = {
      {"Equal", "equal"},   {"Greater", "greater"},        {"GreaterOrEqual", "greater_equal"},
      {"Less", "less"},     {"LessOrEqual", "less_equal"}, {"And", "logical_and"},
      {"Or", "logical_or"}, {"Xor", "logical_xor"}};
  for (const auto& [op, ours] : binary_ops) {
    std::string name = ours;
    h[op] = [this, need, one, name](const onnx::NodeProto& n, const std::vector<Value>& in) {
      return one(make(name, {need(in, 0, "A"), need(in, 1, "B")}, te::Attrs(), n));
    };
  }
  h["Where"] = [this, need, one](const onnx::NodeProto& n, const std::vector<Value>& in) {
    return one(make("where", {need(in, 0, "condition"), need(in, 1, "X"), need(in, 2, "Y")},
                    te::Attrs(), n));
  };
  // Variadic: a chain of the binary operator, broadcast at each step; Mean
  // divides the sum by the count.
  for (const char* op : {"Max", "Min", "Sum", "Mean"}) {
    std::string onnx_op = op;
    h[op] = [this, one, onnx_op](const onnx::NodeProto& n, const std::vector<Value>& in) {
      TT_CHECK(!in.empty(), kInvalidArgument, "needs at least one input");
      const char* ours = onnx_op == "Max" ? "maximum" : onnx_op == "Min" ? "minimum" : "add";
      Value out = in[0];
      for (size_t k = 0; k < in.size(); ++k) {
        TT_CHECK(in[k], kInvalidArgument, "input ", k, " is empty");
        if (k > 0) out = make(ours, {out, in[k]}, te::Attrs(), n);
      }
      if (onnx_op == "Mean" && in.size() > 1) {
        Value count =
            scalar_constant(out->dtype, 1.0 / static_cast<double>(in.size()), n.name() + ".count");
        out = make("multiply", {out, count}, te::Attrs(), n);
      }
      return one(out);
    };
  }
  h["Elu"] = [this, need, one](const onnx::NodeProto& n, const std::vector<Value>& in) {
    return one(make("elu", {need(in, 0, "X")}, scalar_attrs(attr_float(n, "alpha", 1.0)), n));
  };
  h["Selu"] = [this, need, one](const onnx::NodeProto& n, const std::vector<Value>& in) {
    return one(make("selu", {need(in, 0, "X")},
                    scalar_attrs(attr_float(n, "alpha", 1.67326319217681884765625),
                                 attr_float(n, "gamma", 1.05070102214813232421875)),
                    n));
  };
  h["Celu"] = [this, need, one](const onnx::NodeProto& n, const std::vector<Value>& in) {
    double alpha = attr_float(n, "alpha", 1.0);
    TT_CHECK(alpha != 0, kInvalidArgument, "alpha must not be 0");
    return one(make("celu", {need(in, 0, "X")}, scalar_attrs(alpha), n));
  };
  h["ThresholdedRelu"] = [this, need, one](const onnx::NodeProto& n, const std::vector<Value>& in) {
    return one(
        make("thresholded_relu", {need(in, 0, "X")}, scalar_attrs(attr_float(n, "alpha", 1.0)), n));
  };
  h["Gelu"] = [this, need, one](const onnx::NodeProto& n, const std::vector<Value>& in) {
    std::string approximate = attr_string(n, "approximate", "none");
    TT_CHECK(approximate == "none" || approximate == "tanh", kInvalidArgument, "approximate '",
             approximate, "' is not supported (none or tanh)");
    return one(
        make(approximate == "none" ? "gelu" : "gelu_tanh", {need(in, 0, "X")}, te::Attrs(), n));
  };
  h["HardSwish"] = [this, need, one](const onnx::NodeProto& n, const std::vector<Value>& in) {
    return one(make("hard_swish", {need(in, 0, "X")}, te::Attrs(), n));
  };
  h["LeakyRelu"] = [this, need, one](const onnx::NodeProto& n, const std::vector<Value>& in) {
    return one(
        make("leaky_relu", {need(in, 0, "X")}, scalar_attrs(attr_float(n, "alpha", 0.01)), n));
  };
  h["HardSigmoid"] = [this, need, one](const onnx::NodeProto& n, const std::vector<Value>& in) {
    return one(make("hard_sigmoid", {need(in, 0, "X")},
                    scalar_attrs(attr_float(n, "alpha", 0.2), attr_float(n, "beta", 0.5)), n));
  };
  h["PRelu"] = [this, need, one](const onnx::NodeProto& n, const std::vector<Value>& in) {
    Value x = need(in, 0, "X"), slope = need(in, 1, "slope");
    // A slope of [C] is per channel (axis 1) for data of rank > 2.
    if (slope->shape.size() == 1 && x->shape.size() > 2 && slope->shape[0] == x->shape[1] &&
        slope->shape[0] != x->shape.back()) {
      std::vector<int64_t> s(x->shape.size() - 1, 1);
      s[0] = slope->shape[0];
      slope = make("reshape", {slope}, reshape_attrs(s), n);
    }
    return one(make("prelu", {x, slope}, te::Attrs(), n));
  };
  h["Clip"] = [this, need, one](const onnx::NodeProto& n, const std::vector<Value>& in) {
    double low = -3.4028234663852886e38, high = 3.4028234663852886e38;
    auto bound = [&](size_t k, double& v, const char* what) {
      if (k >= in.size() || !in[k]) return;
      const auto* c = constant_of(in[k]);
      TT_CHECK(c, kInvalidArgument, "its ", what, " must be a constant");
      v = c->data.array().get(0);
    };
    if (opset_ < 11) {
      low = attr_float(n, "min", low);
      high = attr_float(n, "max", high);
    }
    bound(1, low, "min");
    bound(2, high, "max");
    const Value& x = need(in, 0, "X");
    if (x->dtype.is_float()) return one(make("clip", {x}, scalar_attrs(low, high), n));
    // Integers: the bounds given, as the operand's type.
    Value out = x;
    if (in.size() > 1 && in[1]) {
      out =
          make("maximum", {out, scalar_constant(x->dtype, low, n.name() + ".min")}, te::Attrs(), n);
    }
    if (in.size() > 2 && in[2]) {
      out = make("minimum", {out, scalar_constant(x->dtype, high, n.name() + ".max")}, te::Attrs(),
                 n);
    }
    return one(out);
  };
  h["Cast"] = [this, need, one](const onnx::NodeProto& n, const std::vector<Value>& in) {
    const auto* to = attr(n, "to");
    TT_CHECK(to, kParse, "has no 'to' attribute");
    int32_t type = static_cast<int32_t>(to->i());
    // Before opset 6 the type was a string ("FLOAT").
    if (to->type() == onnx::AttributeProto::STRING) {
      onnx::TensorProto_DataType named;
      TT_CHECK(onnx::TensorProto_DataType_Parse(to->s(), &named), kParse, "the target type '",
               to->s(), "' is not an ONNX element type");
      type = named;
    }
    return one(
        make("cast", {need(in, 0, "input")}, cast_attrs(dtype_of(type, "the target type")), n));
  };

  // ---- normalisation, pooling, softmax, reductions ----
  h["BatchNormalization"] = [this, need, one](const onnx::NodeProto& n,
                                              const std::vector<Value>& in) {
    TT_CHECK(attr_int(n, "training_mode", 0) == 0, kInvalidArgument,
             "training_mode is not supported");
    TT_CHECK(attr_int(n, "spatial", 1) == 1, kInvalidArgument,
             "spatial 0 (statistics per element, before opset 9) is not supported");
    auto a = make_node<te::NormAttrsNode>();
    a->axis = 1;
    a->epsilon = attr_float(n, "epsilon", 1e-5);
    return one(make("nn.batch_norm",
                    {need(in, 0, "X"), need(in, 1, "scale"), need(in, 2, "B"), need(in, 3, "mean"),
                     need(in, 4, "var")},
                    te::Attrs(attrs(std::move(a))), n));
  };
  h["LayerNormalization"] = [this, need, one](const onnx::NodeProto& n,
                                              const std::vector<Value>& in) {
    Value x = need(in, 0, "X");
    int64_t axis = normalise(attr_int(n, "axis", -1), x->shape.size());
    // Normalised over every axis from `axis` on: as one axis of their
    // product, the scale and bias flattened to match, the result reshaped back.
    int64_t inner = 1, outer = 1;
    for (size_t d = 0; d < x->shape.size(); ++d) {
      (static_cast<int64_t>(d) < axis ? outer : inner) *= x->shape[d];
    }
    Value scale = need(in, 1, "Scale"), bias;
    if (in.size() > 2 && in[2]) {
      bias = in[2];
    } else {
      te::NDArray zeros(x->dtype, {inner});
      bias = graph::constant(std::move(zeros), n.name() + ".bias");
    }
    auto a = make_node<te::NormAttrsNode>();
    a->axis = -1;
    // ONNX Runtime's own layer norms (Skip-, EmbedLayerNormalization) default to 1e-12.
    a->epsilon = attr_float(n, "epsilon", n.domain() == "com.microsoft" ? 1e-12 : 1e-5);
    const double epsilon = a->epsilon;
    Value y;
    if (axis + 1 == static_cast<int64_t>(x->shape.size())) {
      y = make("nn.layer_norm", {x, scale, bias}, te::Attrs(attrs(std::move(a))), n);
    } else {
      auto flat = [&](const Value& v) {
        return v->shape.size() == 1 ? v : make("reshape", {v}, reshape_attrs({inner}), n);
      };
      TT_CHECK(scale->shape.size() == x->shape.size() - static_cast<size_t>(axis) ||
                   scale->shape.size() == 1,
               kInvalidArgument, "Scale must have the shape of the normalised axes");
      y = make("nn.layer_norm",
               {make("reshape", {x}, reshape_attrs({outer, inner}), n), flat(scale), flat(bias)},
               te::Attrs(attrs(std::move(a))), n);
      y = make("reshape", {y}, reshape_attrs(x->shape), n);
    }
    if (n.output_size() < 2) return one(y);
    // The training outputs Mean and InvStdDev, when asked for: over the
    // normalised axes, kept with extent 1.
    auto r = make_node<te::ReduceAttrsNode>();
    for (int64_t d = axis; d < static_cast<int64_t>(x->shape.size()); ++d) r->axes.push_back(d);
    te::Attrs reduce(attrs(std::move(r)));
    Value mean = make("reduce_mean", {x}, reduce, n);
    Value dev = make("subtract", {x, mean}, te::Attrs(), n);
    Value var = make("reduce_mean", {make("multiply", {dev, dev}, te::Attrs(), n)}, reduce, n);
    Value eps = scalar_constant(x->dtype, epsilon, n.name() + ".epsilon");
    Value inv_std = make("reciprocal",
                         {make("sqrt", {make("add", {var, eps}, te::Attrs(), n)}, te::Attrs(), n)},
                         te::Attrs(), n);
    return std::vector<Value>{y, mean, inv_std};
  };
  // GroupNormalization: a layer norm over each group's channels and
  // positions (data as [N * G, C / G * spatial]), then the scale and bias
  // per channel (opset 21) or per group (opset 18, spread over its channels).
  h["RNN"] = [this](const onnx::NodeProto& n, const std::vector<Value>& in) {
    return recurrent(n, in, Recurrent::kRnn);
  };
  h["GRU"] = [this](const onnx::NodeProto& n, const std::vector<Value>& in) {
    return recurrent(n, in, Recurrent::kGru);
  };
  h["LSTM"] = [this](const onnx::NodeProto& n, const std::vector<Value>& in) {
    return recurrent(n, in, Recurrent::kLstm);
  };
  h["GroupNormalization"] = [this, need, one](const onnx::NodeProto& n,
                                              const std::vector<Value>& in) {
    Value x = need(in, 0, "X"), scale = need(in, 1, "scale"), bias = need(in, 2, "bias");
    TT_CHECK(x->shape.size() >= 3, kInvalidArgument, "needs data of rank 3 or more, got ",
             shape_text(x->shape));
    const int64_t groups = attr_int(n, "num_groups", 0), c = x->shape[1];
    TT_CHECK(groups >= 1 && c % groups == 0, kInvalidArgument, "num_groups ", groups,
             " must divide the ", c, " channels");
    int64_t spatial = 1;
    for (size_t d = 2; d < x->shape.size(); ++d) spatial *= x->shape[d];
    const int64_t rows = x->shape[0] * groups, row = c / groups * spatial;
    auto filled = [&](double v, const char* what) {
      te::NDArray a(x->dtype, {row});
      for (int64_t i = 0; i < row; ++i) a.set(i, v);
      return graph::constant(std::move(a), n.name() + what);
    };
    auto a = make_node<te::NormAttrsNode>();
    a->axis = -1;
    a->epsilon = attr_float(n, "epsilon", 1e-5);
    Value y = make("nn.layer_norm",
                   {make("reshape", {x}, reshape_attrs({rows, row}), n), filled(1, ".ones"),
                    filled(0, ".zeros")},
                   te::Attrs(attrs(std::move(a))), n);
    y = make("reshape", {y}, reshape_attrs(x->shape), n);
    auto per_channel = [&](Value v, const char* what) {
      TT_CHECK(v->shape.size() == 1 && (v->shape[0] == c || v->shape[0] == groups),
               kInvalidArgument, "its ", what, " ", shape_text(v->shape),
               " is neither per channel (", c, ") nor per group (", groups, ")");
      if (v->shape[0] != c) {  // per group: each value over its group's channels
        v = make("reshape", {v}, reshape_attrs({groups, 1}), n);
        v = make("expand", {v}, reshape_attrs({groups, c / groups}), n);
      }
      std::vector<int64_t> shape(x->shape.size() - 1, 1);
      shape[0] = c;
      return make("reshape", {v}, reshape_attrs(shape), n);
    };
    y = make("multiply", {y, per_channel(scale, "scale")}, te::Attrs(), n);
    return one(make("add", {y, per_channel(bias, "bias")}, te::Attrs(), n));
  };
  h["InstanceNormalization"] = [this, need, one](const onnx::NodeProto& n,
                                                 const std::vector<Value>& in) {
    auto a = make_node<te::NormAttrsNode>();
    a->epsilon = attr_float(n, "epsilon", 1e-5);
    return one(make("nn.instance_norm",
                    {need(in, 0, "input"), need(in, 1, "scale"), need(in, 2, "B")},
                    te::Attrs(attrs(std::move(a))), n));
  };
  for (const char* op : {"MaxPool", "AveragePool"}) {
    bool is_max = std::string(op) == "MaxPool";
    h[op] = [this, need, one, is_max, lift_1d, window_ints, check_window_rank, unlift_1d](
                const onnx::NodeProto& n, const std::vector<Value>& in) {
      Value x = need(in, 0, "X");
      // 3-D pools, dilations and MaxPool's indices: as the taps of the window.
      bool taps = x->shape.size() == 5 || (is_max && n.output_size() > 1 && !n.output(1).empty());
      for (int64_t d : attr_ints(n, "dilations", {})) taps = taps || d != 1;
      if (taps) {
        TT_CHECK(x->shape.size() >= 3 && x->shape.size() <= 5, kInvalidArgument,
                 "only 1-D, 2-D and 3-D pools (3-D to 5-D data) are supported, got data ",
                 shape_text(x->shape));
        return pool_by_taps(n, x, is_max, attr_ints(n, "kernel_shape", {}));
      }
      const bool one_d = check_window_rank(x, "pools");
      if (one_d) x = lift_1d(n, x);
      auto a = make_node<te::Pool2dAttrsNode>();
      a->kernel = window_ints(n, "kernel_shape", one_d, {});
      TT_CHECK(a->kernel.size() == 2, kInvalidArgument, "needs kernel_shape");
      a->strides = window_ints(n, "strides", one_d, {1, 1});
      a->padding =
          window_pads(attr_string(n, "auto_pad", "NOTSET"), window_ints(n, "pads", one_d, {}),
                      {x->shape[2], x->shape[3]}, a->kernel, a->strides, {1, 1});
      a->ceil_mode = attr_int(n, "ceil_mode", 0) != 0;
      a->count_include_pad = attr_int(n, "count_include_pad", 0) != 0;
      Value out =
          make(is_max ? "nn.max_pool2d" : "nn.avg_pool2d", {x}, te::Attrs(attrs(std::move(a))), n);
      return one(one_d ? unlift_1d(n, out) : out);
    };
  }
  for (const char* op : {"ArgMax", "ArgMin"}) {
    std::string ours = std::string(op) == "ArgMax" ? "argmax" : "argmin";
    h[op] = [this, need, one, ours](const onnx::NodeProto& n, const std::vector<Value>& in) {
      const Value& x = need(in, 0, "data");
      auto a = make_node<te::ArgReduceAttrsNode>();
      a->axis = normalise(attr_int(n, "axis", 0), x->shape.size());
      a->keepdims = attr_int(n, "keepdims", 1) != 0;
      a->select_last = attr_int(n, "select_last_index", 0) != 0;
      return one(make(ours, {x}, te::Attrs(attrs(std::move(a))), n));
    };
  }
  h["Hardmax"] = [this, need, one](const onnx::NodeProto& n, const std::vector<Value>& in) {
    // 1 at the first largest element along the axis, 0 elsewhere: a one-hot
    // of the argmax (opset 13: one axis; before it, the rows of a 2-D view).
    Value x = need(in, 0, "input");
    const int64_t rank = static_cast<int64_t>(x->shape.size());
    int64_t axis = normalise(attr_int(n, "axis", opset_ >= 13 ? -1 : 1), x->shape.size());
    Value data = x;
    if (opset_ < 13) {
      int64_t outer = 1, inner = 1;
      for (int64_t d = 0; d < rank; ++d) (d < axis ? outer : inner) *= x->shape[d];
      data = make("reshape", {x}, reshape_attrs({outer, inner}), n);
      axis = 1;
    }
    auto a = make_node<te::ArgReduceAttrsNode>();
    a->axis = axis;
    a->keepdims = false;
    Value index = make("argmax", {data}, te::Attrs(attrs(std::move(a))), n);
    auto h1 = make_node<te::OneHotAttrsNode>();
    h1->depth = data->shape[static_cast<size_t>(axis)];
    h1->on_value = 1;
    h1->off_value = 0;
    h1->dtype = x->dtype;
    h1->axis = axis;
    Value out = make("one_hot", {index}, te::Attrs(attrs(std::move(h1))), n);
    return one(opset_ < 13 ? make("reshape", {out}, reshape_attrs(x->shape), n) : out);
  };
  h["Mod"] = [this, need, one](const onnx::NodeProto& n, const std::vector<Value>& in) {
    Value a = need(in, 0, "A"), b = need(in, 1, "B");
    const bool fmod = attr_int(n, "fmod", 0) != 0;
    TT_CHECK(fmod || !a->dtype.is_float(), kInvalidArgument,
             "fmod = 0 on floats (ONNX requires fmod = 1 for them)");
    return one(make(fmod ? "trunc_mod" : "floor_mod", {a, b}, te::Attrs(), n));
  };
  h["CastLike"] = [this, need, one](const onnx::NodeProto& n, const std::vector<Value>& in) {
    return one(
        make("cast", {need(in, 0, "input")}, cast_attrs(need(in, 1, "target_type")->dtype), n));
  };
  // ScatterElements, and Scatter (its name before opset 11).
  for (const char* op : {"ScatterElements", "Scatter"}) {
    h[op] = [this, need, one](const onnx::NodeProto& n, const std::vector<Value>& in) {
      const Value& data = need(in, 0, "data");
      auto s = make_node<te::ScatterAttrsNode>();
      s->axis = normalise(attr_int(n, "axis", 0), data->shape.size());
      s->reduction = attr_string(n, "reduction", "none");
      return one(make("scatter_elements", {data, need(in, 1, "indices"), need(in, 2, "updates")},
                      te::Attrs(attrs(std::move(s))), n));
    };
  }
  // MaxUnpool: each value scattered into zeros at the flat index MaxPool
  // gave it (the scatter searches the values for each output element, so it
  // costs outputs x inputs).
  h["MaxUnpool"] = [this, need, one](const onnx::NodeProto& n, const std::vector<Value>& in) {
    const Value &x = need(in, 0, "X"), &indices = need(in, 1, "I");
    TT_CHECK(indices->shape == x->shape, kInvalidArgument, "its indices ",
             shape_text(indices->shape), " and X ", shape_text(x->shape), " differ in shape");
    TT_CHECK(x->shape.size() >= 3, kInvalidArgument, "needs data of rank 3 or more, got ",
             shape_text(x->shape));
    const size_t k = x->shape.size() - 2;
    std::vector<int64_t> shape;
    if (in.size() > 2 && in[2]) {
      const auto* given = constant_of(in[2]);
      TT_CHECK(given, kInvalidArgument, "its output_shape must be a constant");
      shape = ints_of(given->data.array());
      TT_CHECK(
          shape.size() == x->shape.size() && shape[0] == x->shape[0] && shape[1] == x->shape[1],
          kInvalidArgument, "its output_shape ", shape_text(shape), " does not fit X ",
          shape_text(x->shape));
    } else {
      const std::vector<int64_t> kernel = attr_ints(n, "kernel_shape", {});
      TT_CHECK(kernel.size() == k, kInvalidArgument, "needs a kernel_shape of ", k, " values");
      const std::vector<int64_t> strides = sized_ints(n, "strides", 1, k),
                                 pads = sized_ints(n, "pads", 0, 2 * k);
      shape = {x->shape[0], x->shape[1]};
      for (size_t d = 0; d < k; ++d) {
        shape.push_back((x->shape[d + 2] - 1) * strides[d] + kernel[d] - pads[d] - pads[d + k]);
      }
    }
    int64_t total = 1, count = 1;
    for (int64_t d : shape) total *= d;
    for (int64_t d : x->shape) count *= d;
    te::NDArray zeros(x->dtype, {total});
    auto flat = [&](const Value& v) { return make("reshape", {v}, reshape_attrs({count}), n); };
    auto s = make_node<te::ScatterAttrsNode>();
    s->axis = 0;
    s->reduction = "none";
    Value out =
        make("scatter_elements",
             {graph::constant(std::move(zeros), n.name() + ".zeros"), flat(indices), flat(x)},
             te::Attrs(attrs(std::move(s))), n);
    return one(make("reshape", {out}, reshape_attrs(shape), n));
  };
  h["ScatterND"] = [this, need, one](const onnx::NodeProto& n, const std::vector<Value>& in) {
    const Value &data = need(in, 0, "data"), &indices = need(in, 1, "indices");
    const Value& updates = need(in, 2, "updates");
    // As [Q, m] index tuples and [Q, rest...] updates.
    const int64_t depth = indices->shape.back();
    const int64_t count = std::accumulate(indices->shape.begin(), indices->shape.end() - 1,
                                          int64_t{1}, std::multiplies<>());
    TT_CHECK(depth >= 1 && depth <= static_cast<int64_t>(data->shape.size()), kInvalidArgument,
             "index tuples of ", depth, " values do not fit data ", shape_text(data->shape));
    std::vector<int64_t> rows = {count};
    rows.insert(rows.end(), data->shape.begin() + depth, data->shape.end());
    auto s = make_node<te::ScatterAttrsNode>();
    s->reduction = attr_string(n, "reduction", "none");
    return one(make("scatter_nd",
                    {data, make("reshape", {indices}, reshape_attrs({count, depth}), n),
                     make("reshape", {updates}, reshape_attrs(rows), n)},
                    te::Attrs(attrs(std::move(s))), n));
  };
  h["TopK"] = [this, need](const onnx::NodeProto& n, const std::vector<Value>& in) {
    const Value& x = need(in, 0, "X");
    auto t = make_node<te::TopKAttrsNode>();
    if (opset_ < 10) {
      t->k = attr_int(n, "k", 0);
    } else {
      std::vector<int64_t> k = const_ints(n, in, 1, "K");
      TT_CHECK(k.size() == 1, kInvalidArgument, "K must hold one value");
      t->k = k[0];
    }
    t->axis = normalise(attr_int(n, "axis", -1), x->shape.size());
    t->largest = attr_int(n, "largest", 1) != 0;
    // sorted = 0 allows any order; the best-first order is one.
    const int64_t axis = t->axis;
    Value indices = make("topk_indices", {x}, te::Attrs(attrs(std::move(t))), n);
    Value values = make("gather_elements", {x, indices}, axis_attrs(axis), n);
    return std::vector<Value>{values, indices};
  };
  h["IsNaN"] = [this, need, one](const onnx::NodeProto& n, const std::vector<Value>& in) {
    const Value& x = need(in, 0, "X");
    TT_CHECK(x->dtype.is_float(), kInvalidArgument, "needs a float type, got ", x->dtype.str());
    // NaN is the one value unequal to itself (the kernels keep IEEE compares).
    return one(make("logical_not", {make("equal", {x, x}, te::Attrs(), n)}, te::Attrs(), n));
  };
  h["IsInf"] = [this, need, one](const onnx::NodeProto& n, const std::vector<Value>& in) {
    const Value& x = need(in, 0, "X");
    TT_CHECK(x->dtype.is_float(), kInvalidArgument, "needs a float type, got ", x->dtype.str());
    const bool positive = attr_int(n, "detect_positive", 1) != 0;
    const bool negative = attr_int(n, "detect_negative", 1) != 0;
    auto is = [&](const Value& v, double inf) {
      return make("equal", {v, scalar_constant(x->dtype, inf, n.name() + ".inf")}, te::Attrs(), n);
    };
    if (positive && negative) return one(is(make("abs", {x}, te::Attrs(), n), INFINITY));
    if (positive || negative) return one(is(x, positive ? INFINITY : -INFINITY));
    return one(graph::constant(te::NDArray(DataType::boolean(), x->shape), n.output(0)));
  };
  h["Shrink"] = [this, need, one](const onnx::NodeProto& n, const std::vector<Value>& in) {
    const Value& x = need(in, 0, "input");
    const double lambd = attr_float(n, "lambd", 0.5), bias = attr_float(n, "bias", 0.0);
    auto call = [&](const char* f, std::vector<Value> args) {
      return make(f, std::move(args), te::Attrs(), n);
    };
    auto constant = [&](double v) { return scalar_constant(x->dtype, v, n.name() + ".c"); };
    // x + bias below -lambd, x - bias above lambd, 0 between.
    Value above = call("where", {call("greater", {x, constant(lambd)}),
                                 call("subtract", {x, constant(bias)}), constant(0)});
    return one(call(
        "where", {call("less", {x, constant(-lambd)}), call("add", {x, constant(bias)}), above}));
  };
  h["BitShift"] = [this, need, one](const onnx::NodeProto& n, const std::vector<Value>& in) {
    const Value &x = need(in, 0, "X"), &y = need(in, 1, "Y");
    TT_CHECK(x->dtype.code() == DataType::Code::kUInt, kInvalidArgument,
             "shifts unsigned integers, got ", x->dtype.str());
    const std::string direction = attr_string(n, "direction", "");
    TT_CHECK(direction == "LEFT" || direction == "RIGHT", kInvalidArgument, "direction '",
             direction, "' (LEFT or RIGHT)");
    // A shift by y is a product or (unsigned, flooring) quotient by 2^y,
    // which float64 holds exactly for every y below 64.
    const auto wide = cast_attrs(DataType::float64());
    Value two = scalar_constant(DataType::float64(), 2, n.name() + ".two");
    Value factor = make("cast", {make("power", {two, make("cast", {y}, wide, n)}, te::Attrs(), n)},
                        cast_attrs(x->dtype), n);
    return one(make(direction == "LEFT" ? "multiply" : "divide", {x, factor}, te::Attrs(), n));
  };
  // The windows of a spectrogram: constants of the given size.
  for (const char* op : {"HannWindow", "HammingWindow", "BlackmanWindow"}) {
    std::string name = op;
    h[op] = [this, one, name](const onnx::NodeProto& n, const std::vector<Value>& in) {
      std::vector<int64_t> size = const_ints(n, in, 0, "size");
      TT_CHECK(size.size() == 1 && size[0] >= 1, kInvalidArgument,
               "size must be one positive value");
      const DataType dtype =
          dtype_of(static_cast<int32_t>(attr_int(n, "output_datatype", onnx::TensorProto::FLOAT)),
                   "output_datatype");
      // Periodic windows (the default) repeat after `size` samples; symmetric
      // ones end where they began.
      const double period =
          static_cast<double>(attr_int(n, "periodic", 1) != 0 ? size[0] : size[0] - 1);
      te::NDArray w(dtype, {size[0]});
      for (int64_t i = 0; i < size[0]; ++i) {
        const double phase =
            period > 0 ? 2 * std::numbers::pi * static_cast<double>(i) / period : 0;
        double v = 0;
        if (name == "HannWindow") v = 0.5 - 0.5 * std::cos(phase);
        if (name == "HammingWindow") v = 25.0 / 46 - (21.0 / 46) * std::cos(phase);
        if (name == "BlackmanWindow") v = 0.42 - 0.5 * std::cos(phase) + 0.08 * std::cos(2 * phase);
        w.set(i, v);
      }
      return one(graph::constant(std::move(w), n.output(0)));
    };
  }
  // DFT along one axis of [..., n, 1 or 2 (real, imaginary)], as one
  // matmul with a constant matrix of cosines and sines: the signal moved to
  // the second-last axis and flattened with its parts, [.., n * parts]
  // times [n * parts, bins * 2] gives each bin's real and imaginary part.
  h["DFT"] = [this, need, one](const onnx::NodeProto& n, const std::vector<Value>& in) {
    Value x = need(in, 0, "input");
    const size_t rank = x->shape.size();
    TT_CHECK(rank >= 3 && (x->shape.back() == 1 || x->shape.back() == 2), kInvalidArgument,
             "its input ", shape_text(x->shape),
             " must be [batch, ..., signal, 1 or 2] (real, or real and imaginary)");
    TT_CHECK(x->dtype == DataType::float32() || x->dtype == DataType::float64(), kInvalidArgument,
             "transforms ", x->dtype.str(), "; float32 and float64 are supported");
    const int64_t axis = normalise(attr_int(n, "axis", 1), rank);
    TT_CHECK(axis >= 1 && axis + 1 < static_cast<int64_t>(rank), kInvalidArgument, "axis ",
             attr_int(n, "axis", 1), " must name a signal axis, not the batch or the last one");
    const bool inverse = attr_int(n, "inverse", 0) != 0, onesided = attr_int(n, "onesided", 0) != 0;
    const int64_t parts = x->shape.back();
    TT_CHECK(!(onesided && (inverse || parts == 2)), kInvalidArgument,
             "onesided needs a real input and a forward transform");
    std::vector<int64_t> perm(rank);
    std::iota(perm.begin(), perm.end(), 0);
    std::swap(perm[static_cast<size_t>(axis)], perm[rank - 2]);
    if (axis + 2 != static_cast<int64_t>(rank))
      x = make("transpose", {x}, transpose_attrs(perm), n);
    const int64_t length = x->shape[rank - 2];
    int64_t points = length;
    if (in.size() > 1 && in[1]) {
      std::vector<int64_t> given = const_ints(n, in, 1, "dft_length");
      TT_CHECK(given.size() == 1 && given[0] >= 1, kInvalidArgument,
               "dft_length must be one positive value");
      points = given[0];
    }
    if (points < length) x = make("slice", {x}, slice_along(x->shape, rank - 2, 0, points), n);
    if (points > length) {
      auto p = make_node<te::PadAttrsNode>();
      p->before.assign(rank, 0);
      p->after.assign(rank, 0);
      p->after[rank - 2] = points - length;
      x = make("pad", {x}, te::Attrs(attrs(std::move(p))), n);
    }
    const int64_t bins = onesided ? points / 2 + 1 : points;
    // The matrix is dense (no FFT): bounded so that a long signal fails
    // here, by name, not by exhausting memory.
    constexpr int64_t kMaxMatrix = int64_t{1} << 25;
    TT_CHECK(points * parts * bins * 2 <= kMaxMatrix, kInvalidArgument, "a ", points,
             "-point DFT would need a ", points * parts, " x ", bins * 2,
             " matrix; at most 2^25 entries (a 4096-point real transform) are supported");
    // Forward: X[k] = sum x[j] e^(-i theta); inverse: e^(+i theta) / n.
    const double sign = inverse ? 1 : -1, scale = inverse ? 1.0 / static_cast<double>(points) : 1;
    te::NDArray w(x->dtype, {points * parts, bins * 2});
    for (int64_t j = 0; j < points; ++j) {
      for (int64_t k = 0; k < bins; ++k) {
        const auto [cos, sin] = fourier_cos_sin(j, k, points);
        const double c = scale * cos, sn = scale * sign * sin;
        w.set((j * parts) * bins * 2 + 2 * k, c);       // real part -> real
        w.set((j * parts) * bins * 2 + 2 * k + 1, sn);  // real part -> imaginary
        if (parts == 2) {
          w.set((j * parts + 1) * bins * 2 + 2 * k, -sn);    // imaginary -> real
          w.set((j * parts + 1) * bins * 2 + 2 * k + 1, c);  // imaginary -> imaginary
        }
      }
    }
    std::vector<int64_t> flat(x->shape.begin(), x->shape.end() - 2);
    flat.push_back(points * parts);
    Value product =
        handlers_.at("MatMul")(n, {make("reshape", {x}, reshape_attrs(flat), n),
                                   graph::constant(std::move(w), n.name() + ".dft_matrix")})[0];
    std::vector<int64_t> shape(flat.begin(), flat.end() - 1);
    shape.push_back(bins);
    shape.push_back(2);
    Value out = make("reshape", {product}, reshape_attrs(shape), n);
    if (axis + 2 != static_cast<int64_t>(rank))
      out = make("transpose", {out}, transpose_attrs(perm), n);
    return one(out);
  };
  // STFT of [batch, length, 1 or 2] as a strided 1-D convolution whose
  // kernels are the window times the cosines and sines of each bin, as an
  // audio front end would export it: [batch, frames, bins, 2].
  h["STFT"] = [this, need, one](const onnx::NodeProto& n, const std::vector<Value>& in) {
    Value x = need(in, 0, "signal");
    TT_CHECK(x->shape.size() == 3 && (x->shape[2] == 1 || x->shape[2] == 2), kInvalidArgument,
             "its signal ", shape_text(x->shape), " must be [batch, length, 1 or 2]");
    TT_CHECK(x->dtype == DataType::float32() || x->dtype == DataType::float64(), kInvalidArgument,
             "transforms ", x->dtype.str(), "; float32 and float64 are supported");
    std::vector<int64_t> step = const_ints(n, in, 1, "frame_step");
    TT_CHECK(step.size() == 1 && step[0] >= 1, kInvalidArgument,
             "frame_step must be one positive value");
    std::vector<double> window;
    if (in.size() > 2 && in[2]) {
      const auto* c = constant_of(in[2]);
      TT_CHECK(c && in[2]->shape.size() == 1, kInvalidArgument,
               "its window must be a constant vector (fix it with --input-value)");
      for (int64_t i = 0; i < c->data.array().size(); ++i) window.push_back(c->data.array().get(i));
    }
    int64_t frame = window.empty() ? -1 : static_cast<int64_t>(window.size());
    if (in.size() > 3 && in[3]) {
      std::vector<int64_t> given = const_ints(n, in, 3, "frame_length");
      TT_CHECK(given.size() == 1 && given[0] >= 1, kInvalidArgument,
               "frame_length must be one positive value");
      TT_CHECK(frame < 0 || frame == given[0], kInvalidArgument, "frame_length ", given[0],
               " is not the window's length ", frame);
      frame = given[0];
    }
    TT_CHECK(frame >= 1, kInvalidArgument, "needs a window or a frame_length");
    const int64_t batch = x->shape[0], length = x->shape[1], parts = x->shape[2];
    TT_CHECK(frame <= length, kInvalidArgument, "frames of ", frame, " do not fit a signal of ",
             length);
    const bool onesided = attr_int(n, "onesided", 1) != 0;
    TT_CHECK(!(onesided && parts == 2), kInvalidArgument, "onesided needs a real signal");
    if (window.empty()) window.assign(static_cast<size_t>(frame), 1.0);
    const int64_t bins = onesided ? frame / 2 + 1 : frame;
    // Kernel [bins * 2, parts, 1, frame]: output channel 2k is bin k's
    // real part, 2k + 1 its imaginary part.
    te::NDArray w(x->dtype, {bins * 2, parts, 1, frame});
    for (int64_t k = 0; k < bins; ++k) {
      for (int64_t j = 0; j < frame; ++j) {
        const auto [cos, sin] = fourier_cos_sin(j, k, frame);
        const double c = window[static_cast<size_t>(j)] * cos,
                     sn = -window[static_cast<size_t>(j)] * sin;
        w.set(((2 * k) * parts) * frame + j, c);
        w.set(((2 * k + 1) * parts) * frame + j, sn);
        if (parts == 2) {
          w.set(((2 * k) * parts + 1) * frame + j, -sn);
          w.set(((2 * k + 1) * parts + 1) * frame + j, c);
        }
      }
    }
    Value signal = make("reshape", {make("transpose", {x}, transpose_attrs({0, 2, 1}), n)},
                        reshape_attrs({batch, parts, 1, length}), n);
    auto a = make_node<te::Conv2dAttrsNode>();
    a->strides = {1, step[0]};
    Value spectrum =
        make("nn.conv2d", {signal, graph::constant(std::move(w), n.name() + ".stft_kernels")},
             te::Attrs(attrs(std::move(a))), n);
    const int64_t frames = spectrum->shape[3];
    spectrum = make("reshape", {spectrum}, reshape_attrs({batch, bins, 2, frames}), n);
    return one(make("transpose", {spectrum}, transpose_attrs({0, 3, 1, 2}), n));
  };
  // Det of [..., M, M] for M <= 5 by the Leibniz formula: a signed sum of
  // products over the permutations (120 at most), with no division, so a
  // singular matrix gives 0 exactly as it would without pivoting trouble.
  h["Det"] = [this, need, one](const onnx::NodeProto& n, const std::vector<Value>& in) {
    Value x = need(in, 0, "X");
    const size_t rank = x->shape.size();
    TT_CHECK(rank >= 2 && x->shape[rank - 1] == x->shape[rank - 2], kInvalidArgument,
             "needs square matrices [..., M, M], got ", shape_text(x->shape));
    TT_CHECK(x->dtype.is_float(), kInvalidArgument, "takes ", x->dtype.str(),
             "; floating-point types are supported");
    const int64_t m = x->shape[rank - 1];
    TT_CHECK(m <= 5, kInvalidArgument, "a determinant of ", m, " x ", m,
             " matrices is not supported; at most 5 x 5");
    std::vector<int64_t> batch(x->shape.begin(), x->shape.end() - 2);
    std::vector<std::vector<Value>> element(static_cast<size_t>(m));
    for (int64_t i = 0; i < m; ++i) {
      Value row = make("slice", {x}, slice_along(x->shape, rank - 2, i, i + 1), n);
      for (int64_t j = 0; j < m; ++j) {
        Value e = make("slice", {row}, slice_along(row->shape, rank - 1, j, j + 1), n);
        element[static_cast<size_t>(i)].push_back(make("reshape", {e}, reshape_attrs(batch), n));
      }
    }
    std::vector<int64_t> perm(static_cast<size_t>(m));
    std::iota(perm.begin(), perm.end(), 0);
    Value sum;
    do {
      int64_t inversions = 0;
      for (size_t a = 0; a < perm.size(); ++a) {
        for (size_t b = a + 1; b < perm.size(); ++b) inversions += perm[a] > perm[b];
      }
      Value product = element[0][static_cast<size_t>(perm[0])];
      for (size_t i = 1; i < perm.size(); ++i) {
        product =
            make("multiply", {product, element[i][static_cast<size_t>(perm[i])]}, te::Attrs(), n);
      }
      if (!sum) {
        sum = inversions % 2 ? make("negative", {product}, te::Attrs(), n) : product;
      } else {
        sum = make(inversions % 2 ? "subtract" : "add", {sum, product}, te::Attrs(), n);
      }
    } while (std::next_permutation(perm.begin(), perm.end()));
    return one(sum);
  };
  // The mel filter bank of a spectrogram: a constant [dft_length / 2 + 1,
  // num_mel_bins] of triangles, computed in float32 as ONNX Runtime does
  // (the band edges' bins rounded down, so a bin on an edge is exact).
  h["MelWeightMatrix"] = [this, one](const onnx::NodeProto& n, const std::vector<Value>& in) {
    auto integer = [&](size_t k, const char* what) {
      std::vector<int64_t> v = const_ints(n, in, k, what);
      TT_CHECK(v.size() == 1, kInvalidArgument, "its ", what, " must be one value");
      return v[0];
    };
    auto real = [&](size_t k, const char* what) {
      const auto* c = k < in.size() && in[k] ? constant_of(in[k]) : nullptr;
      TT_CHECK(c && c->data.array().size() == 1, kInvalidArgument, "its ", what,
               " must be one constant value");
      return static_cast<float>(c->data.array().get(0));
    };
    const int64_t mel_bins = integer(0, "num_mel_bins"), dft_length = integer(1, "dft_length"),
                  sample_rate = integer(2, "sample_rate");
    const float low = real(3, "lower_edge_hertz"), high = real(4, "upper_edge_hertz");
    TT_CHECK(mel_bins >= 1 && dft_length >= 1 && sample_rate >= 1, kInvalidArgument,
             "num_mel_bins, dft_length and sample_rate must be positive, got ", mel_bins, ", ",
             dft_length, " and ", sample_rate);
    const DataType dtype =
        dtype_of(static_cast<int32_t>(attr_int(n, "output_datatype", onnx::TensorProto::FLOAT)),
                 "output_datatype");
    TT_CHECK(dtype.is_float(), kInvalidArgument, "output_datatype ", dtype.str(),
             " is not supported; a floating-point type is");
    const int64_t bins = dft_length / 2 + 1;
    auto bin_of = [&](float hz) {
      return std::floor(static_cast<float>(dft_length + 1) * hz / static_cast<float>(sample_rate));
    };
    for (auto [hz, what] : {std::pair{low, "lower_edge_hertz"}, {high, "upper_edge_hertz"}}) {
      TT_CHECK(bin_of(hz) >= 0 && bin_of(hz) < static_cast<float>(bins), kInvalidArgument, what,
               " ", hz, " falls outside the ", bins, " bins of a ", dft_length,
               "-point DFT at sample rate ", sample_rate);
    }
    auto mel = [](float hz) { return 2595.0f * std::log10(1.0f + hz / 700.0f); };
    const float low_mel = mel(low), step = (mel(high) - low_mel) / static_cast<float>(mel_bins + 2);
    std::vector<int64_t> edge(static_cast<size_t>(mel_bins + 2));
    for (size_t i = 0; i < edge.size(); ++i) {
      const float m = low_mel + step * static_cast<float>(i);
      const float hz = 700.0f * (std::pow(10.0f, m / 2595.0f) - 1.0f);
      edge[i] = std::clamp<int64_t>(static_cast<int64_t>(bin_of(hz)), 0, bins - 1);
    }
    te::NDArray w(dtype, {bins, mel_bins});
    for (int64_t i = 0; i < mel_bins; ++i) {
      const auto u = static_cast<size_t>(i);
      const int64_t left = edge[u], centre = edge[u + 1], right = edge[u + 2];
      if (centre == left) {
        w.set(centre * mel_bins + i, 1);
      } else {
        for (int64_t j = left; j <= centre; ++j) {
          w.set(j * mel_bins + i, static_cast<float>(j - left) / static_cast<float>(centre - left));
        }
      }
      for (int64_t j = centre; j < right; ++j) {
        w.set(j * mel_bins + i, static_cast<float>(right - j) / static_cast<float>(right - centre));
      }
    }
    return one(graph::constant(std::move(w), n.output(0)));
  };
  h["EyeLike"] = [this, need, one](const onnx::NodeProto& n, const std::vector<Value>& in) {
    const Value& x = need(in, 0, "input");
    TT_CHECK(x->shape.size() == 2, kInvalidArgument, "needs a matrix, got ", shape_text(x->shape));
    const DataType dtype = attr(n, "dtype")
                               ? dtype_of(static_cast<int32_t>(attr_int(n, "dtype", 0)), "dtype")
                               : x->dtype;
    const int64_t k = attr_int(n, "k", 0);
    te::NDArray eye(dtype, x->shape);
    for (int64_t i = 0; i < x->shape[0]; ++i) {
      const int64_t j = i + k;
      if (j >= 0 && j < x->shape[1]) eye.set(i * x->shape[1] + j, 1);
    }
    return one(graph::constant(std::move(eye), n.output(0)));
  };
  h["MeanVarianceNormalization"] = [this, need, one](const onnx::NodeProto& n,
                                                     const std::vector<Value>& in) {
    const Value& x = need(in, 0, "X");
    auto r = make_node<te::ReduceAttrsNode>();
    r->keepdims = true;
    for (int64_t axis : attr_ints(n, "axes", {0, 2, 3})) {
      r->axes.push_back(normalise(axis, x->shape.size()));
    }
    const te::Attrs over(attrs(std::move(r)));
    auto call = [&](const char* f, std::vector<Value> args, te::Attrs a = te::Attrs()) {
      return make(f, std::move(args), std::move(a), n);
    };
    // ONNX's definition: (x - E[x]) / (sqrt(E[x^2] - E[x]^2) + 1e-9).
    Value mean = call("reduce_mean", {x}, over);
    Value mean_square = call("reduce_mean", {call("multiply", {x, x})}, over);
    Value deviation =
        call("sqrt", {call("subtract", {mean_square, call("multiply", {mean, mean})})});
    Value denominator =
        call("add", {deviation, scalar_constant(x->dtype, 1e-9, n.name() + ".epsilon")});
    return one(call("divide", {call("subtract", {x, mean}), denominator}));
  };
  // ReverseSequence with constant lengths: each batch entry's first
  // length steps reversed (a slice of stride -1), the rest as they are.
  h["ReverseSequence"] = [this, need, one](const onnx::NodeProto& n, const std::vector<Value>& in) {
    const Value& x = need(in, 0, "input");
    const auto* lens = constant_of(need(in, 1, "sequence_lens"));
    TT_CHECK(lens, kInvalidArgument, "its sequence_lens must be a constant");
    TT_CHECK(x->shape.size() >= 2, kInvalidArgument, "needs data of rank 2 or more, got ",
             shape_text(x->shape));
    const auto batch_axis = static_cast<size_t>(normalise(attr_int(n, "batch_axis", 1), 2));
    const auto time_axis = static_cast<size_t>(normalise(attr_int(n, "time_axis", 0), 2));
    TT_CHECK(batch_axis != time_axis, kInvalidArgument, "batch_axis and time_axis are both ",
             batch_axis);
    const std::vector<int64_t> lengths = ints_of(lens->data.array());
    const int64_t batch = x->shape[batch_axis], steps = x->shape[time_axis];
    TT_CHECK(static_cast<int64_t>(lengths.size()) == batch, kInvalidArgument, "has ",
             lengths.size(), " sequence lengths for a batch of ", batch);
    std::vector<Value> entries;
    for (int64_t b = 0; b < batch; ++b) {
      const int64_t length = lengths[static_cast<size_t>(b)];
      TT_CHECK(length >= 1 && length <= steps, kInvalidArgument, "sequence length ", length,
               " is outside 1 to ", steps);
      Value entry = make("slice", {x}, slice_along(x->shape, batch_axis, b, b + 1), n);
      auto r = make_node<te::SliceAttrsNode>();
      r->begin.assign(entry->shape.size(), 0);
      r->end = entry->shape;
      r->strides.assign(entry->shape.size(), 1);
      r->begin[time_axis] = length - 1;
      r->end[time_axis] = -steps - 1;  // past the first step, backwards
      r->strides[time_axis] = -1;
      std::vector<Value> parts = {make("slice", {entry}, te::Attrs(attrs(std::move(r))), n)};
      if (length < steps) {
        parts.push_back(
            make("slice", {entry}, slice_along(entry->shape, time_axis, length, steps), n));
      }
      entries.push_back(parts.size() == 1 ? parts[0]
                                          : make("concat", parts,
                                                 axis_attrs(static_cast<int64_t>(time_axis)), n));
    }
    return one(entries.size() == 1
                   ? entries[0]
                   : make("concat", entries, axis_attrs(static_cast<int64_t>(batch_axis)), n));
  };
  h["Compress"] = [this, need, one](const onnx::NodeProto& n, const std::vector<Value>& in) {
    Value x = need(in, 0, "input");
    const auto* condition = constant_of(need(in, 1, "condition"));
    TT_CHECK(condition, kInvalidArgument,
             "its condition must be a constant (the output's extent depends on it)");
    const te::NDArray& keep = condition->data.array();
    int64_t axis = 0;
    if (const auto* a = attr(n, "axis")) {
      axis = normalise(a->i(), x->shape.size());
    } else {  // over the flattened input
      const int64_t total =
          std::accumulate(x->shape.begin(), x->shape.end(), int64_t{1}, std::multiplies<>());
      x = make("reshape", {x}, reshape_attrs({total}), n);
    }
    std::vector<int64_t> kept;
    for (int64_t i = 0; i < std::min(keep.size(), x->shape[static_cast<size_t>(axis)]); ++i) {
      if (keep.get(i) != 0) kept.push_back(i);
    }
    TT_CHECK(!kept.empty(), kInvalidArgument,
             "its condition keeps nothing (an empty output is not supported)");
    return one(make("take", {x, graph::constant(int64_array(kept), n.name() + ".kept")},
                    axis_attrs(axis), n));
  };
  h["GatherND"] = [this, need, one](const onnx::NodeProto& n, const std::vector<Value>& in) {
    const Value &data = need(in, 0, "data"), &indices = need(in, 1, "indices");
    const auto rank = static_cast<int64_t>(data->shape.size());
    const auto index_rank = static_cast<int64_t>(indices->shape.size());
    const int64_t batch = attr_int(n, "batch_dims", 0), depth = indices->shape.back();
    TT_CHECK(batch >= 0 && batch < index_rank && batch + depth <= rank, kInvalidArgument,
             "indices ", shape_text(indices->shape), " with batch_dims ", batch,
             " do not fit data ", shape_text(data->shape));
    for (int64_t d = 0; d < batch; ++d) {
      TT_CHECK(data->shape[d] == indices->shape[d], kInvalidArgument, "the batch extents of data ",
               shape_text(data->shape), " and indices ", shape_text(indices->shape), " differ");
    }
    auto call = [&](const char* f, std::vector<Value> args, te::Attrs a = te::Attrs()) {
      return make(f, std::move(args), std::move(a), n);
    };
    // Each index tuple as one row number of data with its batch and indexed
    // axes merged: sum of index_k (wrapped when negative) * stride_k, plus
    // the row's batch number * the batch stride.
    std::vector<int64_t> tuple_shape(indices->shape.begin(), indices->shape.end() - 1);
    const bool one_tuple = tuple_shape.empty();  // indices [depth]: the result is one slice
    if (one_tuple) tuple_shape = {1};
    Value wide = call("cast", {indices}, cast_attrs(DataType::int64()));
    Value row;
    int64_t stride = 1;
    for (int64_t k = depth - 1; k >= 0; --k) {
      const int64_t extent = data->shape[batch + k];
      Value index = call(
          "reshape", {call("slice", {wide}, slice_along(indices->shape, index_rank - 1, k, k + 1))},
          reshape_attrs(tuple_shape));
      index = call("floor_mod",
                   {index, scalar_constant(DataType::int64(), extent, n.name() + ".extent")});
      Value term = call("multiply",
                        {index, scalar_constant(DataType::int64(), stride, n.name() + ".stride")});
      row = row ? call("add", {row, term}) : term;
      stride *= extent;
    }
    int64_t batches = 1;
    for (int64_t d = 0; d < batch; ++d) batches *= data->shape[d];
    if (batch > 0) {
      // The batch number of every tuple: a constant over the tuples' shape.
      te::NDArray number(DataType::int64(), tuple_shape);
      const int64_t per_batch = number.size() / batches;
      for (int64_t i = 0; i < number.size(); ++i) number.set_int(i, (i / per_batch) * stride);
      Value numbers = graph::constant(std::move(number), n.name() + ".batch");
      row = row ? call("add", {row, numbers}) : numbers;
    }
    if (!row) row = graph::constant(te::NDArray(DataType::int64(), tuple_shape), n.name() + ".row");
    std::vector<int64_t> rows = {batches * stride};
    const std::vector<int64_t> slice(data->shape.begin() + batch + depth, data->shape.end());
    rows.insert(rows.end(), slice.begin(), slice.end());
    Value out = call("take", {call("reshape", {data}, reshape_attrs(rows)), row}, axis_attrs(0));
    if (!one_tuple) return one(out);
    return one(
        call("reshape", {out}, reshape_attrs(slice.empty() ? std::vector<int64_t>{1} : slice)));
  };
  // Hyperbolic and trigonometric functions, from exp, log, sqrt, sin, cos and atan.
  for (const char* op :
       {"Sinh", "Cosh", "Tan", "Asinh", "Acosh", "Atanh", "Atan", "Asin", "Acos"}) {
    std::string name = op;
    h[op] = [this, need, one, name](const onnx::NodeProto& n, const std::vector<Value>& in) {
      Value x = need(in, 0, "input");
      TT_CHECK(x->dtype.is_float(), kInvalidArgument, "needs a float type, got ", x->dtype.str());
      auto call = [&](const char* f, std::vector<Value> args) {
        return make(f, std::move(args), te::Attrs(), n);
      };
      auto constant = [&](double v) { return scalar_constant(x->dtype, v, n.name() + ".c"); };
      if (name == "Tan") return one(call("divide", {call("sin", {x}), call("cos", {x})}));
      if (name == "Atan") return one(call("atan", {x}));
      if (name == "Asin" || name == "Acos") {
        // asin x = atan(x / sqrt((1 - x)(1 + x))), acos x = 2 atan(sqrt((1 - x) / (1 + x))):
        // (1 - x)(1 + x) keeps its digits near |x| = 1, a division by 0 there
        // gives atan(+-inf), and outside [-1, 1] the root is NaN, as it should be.
        Value below = call("subtract", {constant(1), x}), above = call("add", {constant(1), x});
        if (name == "Asin") {
          Value root = call("sqrt", {call("multiply", {below, above})});
          return one(call("atan", {call("divide", {x, root})}));
        }
        Value half = call("atan", {call("sqrt", {call("divide", {below, above})})});
        return one(call("multiply", {constant(2), half}));
      }
      if (name == "Sinh" || name == "Cosh") {
        Value e = call("exp", {x}), inv = call("exp", {call("negative", {x})});
        Value both = call(name == "Sinh" ? "subtract" : "add", {e, inv});
        return one(call("multiply", {both, constant(0.5)}));
      }
      if (name == "Atanh") {  // log((1 + x) / (1 - x)) / 2
        Value ratio =
            call("divide", {call("add", {constant(1), x}), call("subtract", {constant(1), x})});
        return one(call("multiply", {call("log", {ratio}), constant(0.5)}));
      }
      // Asinh: log(x + sqrt(x^2 + 1)); Acosh: log(x + sqrt(x^2 - 1)).
      Value square = call("multiply", {x, x});
      Value root =
          call("sqrt", {call(name == "Asinh" ? "add" : "subtract", {square, constant(1)})});
      return one(call("log", {call("add", {x, root})}));
    };
  }
  h["LRN"] = [this, need, one](const onnx::NodeProto& n, const std::vector<Value>& in) {
    auto a = make_node<te::LrnAttrsNode>();
    a->size = attr_int(n, "size", 0);
    a->alpha = attr_float(n, "alpha", 1e-4);
    a->beta = attr_float(n, "beta", 0.75);
    a->bias = attr_float(n, "bias", 1.0);
    return one(make("nn.lrn", {need(in, 0, "X")}, te::Attrs(attrs(std::move(a))), n));
  };
  // Global pools: the 2-D operators, or a reduction over every spatial axis
  // for data of another rank.
  for (const char* op : {"GlobalMaxPool", "GlobalAveragePool"}) {
    const bool is_max = std::string(op) == "GlobalMaxPool";
    h[op] = [this, need, one, is_max](const onnx::NodeProto& n, const std::vector<Value>& in) {
      const Value& x = need(in, 0, "X");
      if (x->shape.size() == 4) {
        auto a = make_node<te::LayoutAttrsNode>();
        return one(make(is_max ? "nn.global_max_pool2d" : "nn.global_avg_pool2d", {x},
                        te::Attrs(attrs(std::move(a))), n));
      }
      TT_CHECK(x->shape.size() >= 3, kInvalidArgument, "needs data of rank 3 or more, got ",
               shape_text(x->shape));
      auto r = make_node<te::ReduceAttrsNode>();
      for (size_t d = 2; d < x->shape.size(); ++d) r->axes.push_back(static_cast<int64_t>(d));
      r->keepdims = true;
      return one(
          make(is_max ? "reduce_max" : "reduce_mean", {x}, te::Attrs(attrs(std::move(r))), n));
    };
  }
  // Softmax as ONNX defines it at `opset` (QLinearSoftmax names its own).
  auto softmax = [this](const onnx::NodeProto& n, const Value& x, int64_t opset, bool log) {
    int64_t rank = static_cast<int64_t>(x->shape.size());
    int64_t axis = normalise(attr_int(n, "axis", opset >= 13 ? -1 : 1), x->shape.size());
    const char* ours = log ? "nn.log_softmax" : "nn.softmax";
    if (opset >= 13 || axis == rank - 1) return make(ours, {x}, axis_attrs(axis), n);
    // Before opset 13: the input as 2-D at `axis`, normalised over the second part.
    int64_t outer = 1, inner = 1;
    for (int64_t d = 0; d < rank; ++d) (d < axis ? outer : inner) *= x->shape[d];
    Value flat = make("reshape", {x}, reshape_attrs({outer, inner}), n);
    Value s = make(ours, {flat}, axis_attrs(1), n);
    return make("reshape", {s}, reshape_attrs(x->shape), n);
  };
  for (const char* op : {"Softmax", "LogSoftmax"}) {
    bool log = std::string(op) == "LogSoftmax";
    h[op] = [this, need, one, log, softmax](const onnx::NodeProto& n,
                                            const std::vector<Value>& in) {
      return one(softmax(n, need(in, 0, "input"), opset_, log));
    };
  }
  // The reductions, and those ONNX defines as one of them between
  // elementwise steps (ReduceL2 = sqrt(sum(x * x)), ...).
  for (const char* op :
       {"ReduceMean", "ReduceSum", "ReduceMax", "ReduceMin", "ReduceProd", "ReduceSumSquare",
        "ReduceL1", "ReduceL2", "ReduceLogSum", "ReduceLogSumExp"}) {
    std::string onnx_op = op;
    h[op] = [this, need, one, onnx_op](const onnx::NodeProto& n, const std::vector<Value>& in) {
      Value x = need(in, 0, "data");
      auto a = make_node<te::ReduceAttrsNode>();
      const bool keepdims = attr_int(n, "keepdims", 1) != 0;
      if (opset_ >= (onnx_op == "ReduceSum" ? 13 : 18)) {
        if (in.size() > 1 && in[1] && !holds_nothing(in[1])) a->axes = const_ints(n, in, 1, "axes");
        if (a->axes.empty() && attr_int(n, "noop_with_empty_axes", 0)) return one(x);
      } else {
        a->axes = attr_ints(n, "axes", {});
      }
      for (auto& axis : a->axes) axis = normalise(axis, x->shape.size());
      if (holds_nothing(x)) return one(reduction_of_nothing(onnx_op, x, a->axes, keepdims, n));
      auto unary = [&](const char* name, const Value& v) {
        return make(name, {v}, te::Attrs(), n);
      };
      auto reduce = [&](const char* name, const Value& v, bool keep) {
        auto r = make_node<te::ReduceAttrsNode>(*a);
        r->keepdims = keep;
        return make(name, {v}, te::Attrs(attrs(std::move(r))), n);
      };
      static const std::map<std::string, const char*> direct = {{"ReduceMean", "reduce_mean"},
                                                                {"ReduceSum", "reduce_sum"},
                                                                {"ReduceMax", "reduce_max"},
                                                                {"ReduceMin", "reduce_min"},
                                                                {"ReduceProd", "reduce_prod"}};
      if (auto it = direct.find(onnx_op); it != direct.end()) {
        return one(reduce(it->second, x, keepdims));
      }
      Value square = make("multiply", {x, x}, te::Attrs(), n);
      if (onnx_op == "ReduceSumSquare") return one(reduce("reduce_sum", square, keepdims));
      if (onnx_op == "ReduceL1") return one(reduce("reduce_sum", unary("abs", x), keepdims));
      if (onnx_op == "ReduceL2") return one(unary("sqrt", reduce("reduce_sum", square, keepdims)));
      if (onnx_op == "ReduceLogSum") return one(unary("log", reduce("reduce_sum", x, keepdims)));
      // ReduceLogSumExp: max + log(sum(exp(x - max))), which overflows only
      // where the result does.
      Value high = reduce("reduce_max", x, true);
      Value shifted = unary("exp", make("subtract", {x, high}, te::Attrs(), n));
      Value out =
          make("add", {unary("log", reduce("reduce_sum", shifted, true)), high}, te::Attrs(), n);
      if (keepdims) return one(out);
      return one(reduce("reduce_max", out, false));  // drops the axes, each of extent 1
    };
  }

  // ---- data movement ----
  h["Trilu"] = [this, need, one](const onnx::NodeProto& n, const std::vector<Value>& in) {
    Value x = need(in, 0, "input");
    TT_CHECK(x->shape.size() >= 2, kInvalidArgument, "needs a matrix or a batch of them, got ",
             shape_text(x->shape));
    if (holds_nothing(x)) return one(x);
    const int64_t k =
        in.size() > 1 && in[1] && !holds_nothing(in[1]) ? const_ints(n, in, 1, "k").at(0) : 0;
    const bool upper = attr_int(n, "upper", 1) != 0;
    // Kept where column - row >= k (upper) or <= k (lower): a constant mask
    // over the last two axes.
    const int64_t rows = x->shape[x->shape.size() - 2], cols = x->shape.back();
    te::NDArray keep(DataType::boolean(), {rows, cols});
    for (int64_t i = 0; i < rows; ++i) {
      for (int64_t j = 0; j < cols; ++j) keep.set(i * cols + j, upper ? j - i >= k : j - i <= k);
    }
    return one(make("where",
                    {graph::constant(std::move(keep), n.name() + ".mask"), x,
                     scalar_constant(x->dtype, 0, n.name() + ".zero")},
                    te::Attrs(), n));
  };
  h["Flatten"] = [this, need, one](const onnx::NodeProto& n, const std::vector<Value>& in) {
    Value x = need(in, 0, "input");
    int64_t rank = static_cast<int64_t>(x->shape.size());
    int64_t axis = attr_int(n, "axis", 1);
    if (axis < 0) axis += rank;
    TT_CHECK(axis >= 0 && axis <= rank, kInvalidArgument, "axis ", attr_int(n, "axis", 1),
             " is out of range for rank ", rank);
    int64_t outer = 1, inner = 1;
    for (int64_t d = 0; d < rank; ++d) (d < axis ? outer : inner) *= x->shape[d];
    return one(make("reshape", {x}, reshape_attrs({outer, inner}), n));
  };
  h["Reshape"] = [this, need, one](const onnx::NodeProto& n, const std::vector<Value>& in) {
    Value x = need(in, 0, "data");
    std::vector<int64_t> shape = const_ints(n, in, 1, "shape");
    bool allow_zero = attr_int(n, "allowzero", 0) != 0;
    int64_t known = 1, total = 1;
    int inferred = -1;
    for (int64_t d : x->shape) total *= d;
    for (size_t d = 0; d < shape.size(); ++d) {
      const bool copied = shape[d] == 0 && !allow_zero;
      if (copied) {
        TT_CHECK(d < x->shape.size(), kInvalidArgument, "0 at dimension ", d,
                 " copies an input dimension that does not exist");
        shape[d] = x->shape[d];
      }
      if (shape[d] == -1) {
        TT_CHECK(inferred < 0, kInvalidArgument, "the shape has two -1 entries");
        inferred = static_cast<int>(d);
      } else {
        // With allowzero, a 0 is an extent of 0, and a copied extent may be
        // one: the data then holds nothing.
        TT_CHECK(shape[d] >= (allow_zero || copied ? 0 : 1), kInvalidArgument, "the shape ",
                 shape_text(shape), " has an extent below ", allow_zero || copied ? 0 : 1);
        known *= shape[d];
      }
    }
    if (inferred >= 0) {
      TT_CHECK(known > 0 && total % known == 0, kInvalidArgument, "cannot infer the -1 of ",
               shape_text(shape), " for ", total, " elements");
      shape[static_cast<size_t>(inferred)] = total / known;
    }
    if (holds_nothing(x)) {
      TT_CHECK(no_elements(shape), kInvalidArgument, "the shape ", shape_text(shape),
               " holds elements, the data ", shape_text(x->shape), " none");
      return one(nothing(shape, x->dtype, n.output(0)));
    }
    return one(make("reshape", {x}, reshape_attrs(shape), n));
  };
  h["Transpose"] = [this, need, one](const onnx::NodeProto& n, const std::vector<Value>& in) {
    Value x = need(in, 0, "data");
    std::vector<int64_t> perm(x->shape.size());
    std::iota(perm.rbegin(), perm.rend(), 0);
    perm = attr_ints(n, "perm", perm);
    return one(make("transpose", {x}, transpose_attrs(perm), n));
  };
  h["Concat"] = [this, one](const onnx::NodeProto& n, const std::vector<Value>& in) {
    TT_CHECK(!in.empty(), kInvalidArgument, "needs inputs");
    // Empty tensors (an empty slice of a shape, a decoder's empty cache)
    // add nothing.
    std::vector<Value> parts;
    Value empty;
    for (const auto& v : in) {
      if (holds_nothing(v)) {
        empty = v;
      } else if (v) {
        parts.push_back(v);
      }
    }
    if (parts.empty() && !empty) return std::vector<Value>{Value()};
    const Value& first = parts.empty() ? empty : parts[0];
    // The axis was optional, 1 by default, before opset 4.
    int64_t axis = normalise(attr_int(n, "axis", opset_ < 4 ? 1 : 0), first->shape.size());
    // Every part, empty or not, must fit the first but for the axis; all
    // empty, they join to nothing of the summed extent.
    std::vector<int64_t> joined = first->shape;
    joined[static_cast<size_t>(axis)] = 0;
    for (const auto& v : in) {
      if (!v) continue;
      std::vector<int64_t> a = v->shape;
      TT_CHECK(a.size() == joined.size(), kInvalidArgument, "joins ", shape_text(a), " and ",
               shape_text(first->shape), " of different ranks");
      const int64_t along = a[static_cast<size_t>(axis)];
      a[static_cast<size_t>(axis)] = joined[static_cast<size_t>(axis)];
      TT_CHECK(a == joined, kInvalidArgument, "joins ", shape_text(v->shape), " to ",
               shape_text(first->shape), " along axis ", axis);
      joined[static_cast<size_t>(axis)] += along;
    }
    if (parts.empty()) return one(nothing(joined, first->dtype, n.output(0)));
    return one(parts.size() == 1 ? parts[0] : make("concat", parts, axis_attrs(axis), n));
  };
  h["Split"] = [this, need](const onnx::NodeProto& n, const std::vector<Value>& in) {
    Value x = need(in, 0, "input");
    int64_t axis = normalise(attr_int(n, "axis", 0), x->shape.size());
    std::vector<int64_t> sizes;
    if (opset_ >= 13) {
      if (in.size() > 1 && in[1]) sizes = const_ints(n, in, 1, "split");
    } else {
      sizes = attr_ints(n, "split", {});
    }
    int64_t parts = n.output_size(), extent = x->shape[axis];
    if (sizes.empty() && attr(n, "num_outputs")) {
      // Opset 18: equal parts of ceil(extent / parts), the last one smaller.
      TT_CHECK(attr_int(n, "num_outputs", 0) == parts, kInvalidArgument, "num_outputs is ",
               attr_int(n, "num_outputs", 0), " but the node has ", parts, " outputs");
      int64_t part = (extent + parts - 1) / parts;
      for (int64_t at = 0; at < extent; at += part) sizes.push_back(std::min(part, extent - at));
      TT_CHECK(static_cast<int64_t>(sizes.size()) == parts, kInvalidArgument, "extent ", extent,
               " does not split into ", parts, " parts of ", part);
    }
    if (sizes.empty()) {
      TT_CHECK(parts >= 1 && extent % parts == 0, kInvalidArgument, "extent ", extent,
               " does not split evenly into ", parts, " outputs");
      sizes.assign(static_cast<size_t>(parts), extent / parts);
    }
    TT_CHECK(static_cast<int64_t>(sizes.size()) == parts &&
                 std::accumulate(sizes.begin(), sizes.end(), int64_t{0}) == extent,
             kInvalidArgument, "split sizes ", shape_text(sizes), " do not cover extent ", extent,
             " in ", parts, " outputs");
    std::vector<Value> out;
    int64_t at = 0;
    for (size_t k = 0; k < sizes.size(); ++k) {
      const int64_t s = sizes[k];
      std::vector<int64_t> part = x->shape;
      part[static_cast<size_t>(axis)] = s;
      out.push_back(no_elements(part)
                        ? nothing(part, x->dtype, n.output(static_cast<int>(k)))
                        : make("slice", {x},
                               slice_along(x->shape, static_cast<size_t>(axis), at, at + s), n));
      at += s;
    }
    return out;
  };
  h["Slice"] = [this, need, one](const onnx::NodeProto& n, const std::vector<Value>& in) {
    Value x = need(in, 0, "data");
    std::vector<int64_t> starts, ends, axes, steps;
    if (opset_ < 10) {  // attributes, without steps
      starts = attr_ints(n, "starts", {});
      ends = attr_ints(n, "ends", {});
      axes = attr_ints(n, "axes", {});
    } else {
      starts = const_ints(n, in, 1, "starts");
      ends = const_ints(n, in, 2, "ends");
      if (in.size() > 3 && in[3]) axes = const_ints(n, in, 3, "axes");
      if (in.size() > 4 && in[4]) steps = const_ints(n, in, 4, "steps");
    }
    if (axes.empty()) {
      for (size_t i = 0; i < starts.size(); ++i) axes.push_back(static_cast<int64_t>(i));
    }
    steps.resize(starts.size(), 1);
    TT_CHECK(starts.size() == ends.size() && axes.size() == starts.size(), kInvalidArgument,
             "starts, ends and axes differ in length");
    auto a = make_node<te::SliceAttrsNode>();
    size_t rank = x->shape.size();
    a->begin.assign(rank, 0);
    a->end = x->shape;
    a->strides.assign(rank, 1);
    for (size_t i = 0; i < axes.size(); ++i) {
      int64_t d = normalise(axes[i], rank), extent = x->shape[static_cast<size_t>(d)];
      // INT64_MAX / INT64_MIN ends mean "to the end": clamp to what slice takes.
      auto clampv = [&](int64_t v) { return std::clamp<int64_t>(v, -extent - 1, extent); };
      a->begin[static_cast<size_t>(d)] = clampv(starts[i]);
      a->end[static_cast<size_t>(d)] = clampv(ends[i]);
      a->strides[static_cast<size_t>(d)] = steps[i];
      if (steps[i] < 0 && ends[i] < -extent) a->end[static_cast<size_t>(d)] = -extent - 1;
      // ONNX clamps a backward walk's start into [0, extent - 1], as ONNX
      // Runtime does: one before the first element starts at the first.
      if (steps[i] < 0 && starts[i] < -extent) a->begin[static_cast<size_t>(d)] = 0;
    }
    // Past the end, or ending before it starts (the prefix of a shape
    // before axis 0, which shape arithmetic joins to others): a tensor of
    // no elements. Positions as `slice` takes them.
    std::vector<int64_t> shape(rank);
    for (size_t d = 0; d < rank; ++d) {
      const int64_t extent = x->shape[d], step = a->strides[d];
      TT_CHECK(step != 0, kInvalidArgument, "a step of 0");
      auto place = [&](int64_t pos) {
        if (pos < 0) pos = pos < -extent ? -1 : pos + extent;
        return step > 0 ? std::clamp<int64_t>(pos, 0, extent)
                        : std::clamp<int64_t>(pos, -1, extent - 1);
      };
      const int64_t begin = place(a->begin[d]), end = place(a->end[d]);
      shape[d] = std::max<int64_t>(
          0, step > 0 ? (end - begin + step - 1) / step : (begin - end - step - 1) / -step);
    }
    if (holds_nothing(x) || no_elements(shape)) {
      return one(nothing(shape, x->dtype, n.output(0)));
    }
    return one(make("slice", {x}, te::Attrs(attrs(std::move(a))), n));
  };
  for (const char* op : {"Squeeze", "Unsqueeze"}) {
    bool squeeze = std::string(op) == "Squeeze";
    h[op] = [this, need, one, squeeze](const onnx::NodeProto& n, const std::vector<Value>& in) {
      Value x = need(in, 0, "data");
      std::vector<int64_t> axes =
          opset_ >= 13
              ? (in.size() > 1 && in[1] ? const_ints(n, in, 1, "axes") : std::vector<int64_t>{})
              : attr_ints(n, "axes", {});
      std::vector<int64_t> shape;
      if (squeeze) {
        std::set<int64_t> drop;
        for (int64_t a : axes) drop.insert(normalise(a, x->shape.size()));
        for (size_t d = 0; d < x->shape.size(); ++d) {
          bool gone = axes.empty() ? x->shape[d] == 1 : drop.count(static_cast<int64_t>(d)) > 0;
          if (gone) {
            TT_CHECK(x->shape[d] == 1, kInvalidArgument, "dimension ", d, " has extent ",
                     x->shape[d], ", not 1");
          } else {
            shape.push_back(x->shape[d]);
          }
        }
      } else {
        size_t rank = x->shape.size() + axes.size();
        std::set<int64_t> add;
        for (int64_t a : axes) add.insert(normalise(a, rank));
        size_t k = 0;
        for (size_t d = 0; d < rank; ++d) {
          shape.push_back(add.count(static_cast<int64_t>(d)) ? 1 : x->shape[k++]);
        }
      }
      if (shape.empty()) shape = {1};
      return one(make("reshape", {x}, reshape_attrs(shape), n));
    };
  }
  h["Pad"] = [this, need, one](const onnx::NodeProto& n, const std::vector<Value>& in) {
    Value x = need(in, 0, "data");
    const std::string mode = attr_string(n, "mode", "constant");
    TT_CHECK(mode == "constant" || mode == "edge" || mode == "reflect" || mode == "wrap",
             kInvalidArgument, "mode '", mode, "' (constant, edge, reflect or wrap)");
    size_t rank = x->shape.size();
    std::vector<int64_t> pads;
    double value = 0;
    if (opset_ < 11) {  // attributes
      pads = attr_ints(n, "pads", {});
      value = attr_float(n, "value", 0.0);
    } else {
      pads = const_ints(n, in, 1, "pads");
      if (in.size() > 2 && in[2]) {
        const auto* c = constant_of(in[2]);
        TT_CHECK(c, kInvalidArgument, "its constant_value must be a constant");
        value = c->data.array().get(0);
      }
    }
    if (in.size() > 3 && in[3]) {
      // Opset 18: pads for the given axes only (begins, then ends).
      std::vector<int64_t> axes = const_ints(n, in, 3, "axes");
      TT_CHECK(pads.size() == 2 * axes.size(), kInvalidArgument, "pads needs ", 2 * axes.size(),
               " values for ", axes.size(), " axes, got ", pads.size());
      std::vector<int64_t> all(2 * rank, 0);
      for (size_t i = 0; i < axes.size(); ++i) {
        auto d = static_cast<size_t>(normalise(axes[i], rank));
        all[d] = pads[i];
        all[d + rank] = pads[i + axes.size()];
      }
      pads = all;
    }
    TT_CHECK(pads.size() == 2 * rank, kInvalidArgument, "pads needs ", 2 * rank, " values, got ",
             pads.size());
    if (mode != "constant") {
      // Axis by axis, the borders are slices of the data joined to it: its
      // first or last element repeated (edge), its elements mirrored about
      // the first or last (reflect), or the other end's (wrap).
      Value out = x;
      for (size_t d = 0; d < rank; ++d) {
        const int64_t before = pads[d], after = pads[d + rank], extent = out->shape[d];
        if (before == 0 && after == 0) continue;
        TT_CHECK(before >= 0 && after >= 0, kInvalidArgument, "negative pads with mode '", mode,
                 "' are not supported");
        TT_CHECK(mode != "reflect" || (before < extent && after < extent), kInvalidArgument,
                 "reflect pads (", before, ", ", after, ") must be below the extent ", extent,
                 " of axis ", d);
        TT_CHECK(mode != "wrap" || (before <= extent && after <= extent), kInvalidArgument,
                 "wrap pads (", before, ", ", after, ") must be at most the extent ", extent,
                 " of axis ", d);
        auto part = [&](int64_t begin, int64_t end, int64_t stride) {
          auto s = make_node<te::SliceAttrsNode>();
          s->begin.assign(rank, 0);
          s->end = out->shape;
          s->strides.assign(rank, 1);
          s->begin[d] = begin;
          s->end[d] = end;
          s->strides[d] = stride;
          return make("slice", {out}, te::Attrs(attrs(std::move(s))), n);
        };
        auto repeated = [&](int64_t at, int64_t times) {
          auto t = make_node<te::TileAttrsNode>();
          t->repeats.assign(rank, 1);
          t->repeats[d] = times;
          return make("tile", {part(at, at + 1, 1)}, te::Attrs(attrs(std::move(t))), n);
        };
        std::vector<Value> parts;
        if (before > 0) {
          parts.push_back(mode == "edge"      ? repeated(0, before)
                          : mode == "reflect" ? part(before, 0, -1)
                                              : part(extent - before, extent, 1));
        }
        parts.push_back(out);
        if (after > 0) {
          parts.push_back(
              mode == "edge" ? repeated(extent - 1, after)
              : mode == "reflect"
                  // (numpy's slices: an end before the first element is -extent - 1)
                  ? part(extent - 2, after == extent - 1 ? -extent - 1 : extent - 2 - after, -1)
                  : part(0, after, 1));
        }
        out = make("concat", parts, axis_attrs(static_cast<int64_t>(d)), n);
      }
      return one(out);
    }
    // Positive pads pad; negative ones crop, as a slice after the pad.
    auto a = make_node<te::PadAttrsNode>();
    bool crops = false;
    for (size_t d = 0; d < rank; ++d) {
      a->before.push_back(std::max<int64_t>(pads[d], 0));
      a->after.push_back(std::max<int64_t>(pads[d + rank], 0));
      crops |= pads[d] < 0 || pads[d + rank] < 0;
    }
    a->value = value;
    bool pads_any = std::any_of(pads.begin(), pads.end(), [](int64_t p) { return p > 0; });
    Value padded = pads_any ? make("pad", {x}, te::Attrs(attrs(std::move(a))), n) : x;
    if (!crops) return one(padded);
    auto s = make_node<te::SliceAttrsNode>();
    for (size_t d = 0; d < rank; ++d) {
      s->begin.push_back(std::max<int64_t>(-pads[d], 0));
      s->end.push_back(padded->shape[d] - std::max<int64_t>(-pads[d + rank], 0));
      s->strides.push_back(1);
      TT_CHECK(s->end.back() > s->begin.back(), kInvalidArgument, "pads ", shape_text(pads),
               " crop dimension ", d, " of ", x->shape[d], " to nothing");
    }
    return one(make("slice", {padded}, te::Attrs(attrs(std::move(s))), n));
  };
  // Resize, and Upsample (opsets 7 to 9) as Resize was before opset 11:
  // scales only, asymmetric coordinates, nearest rounding down.
  auto resize = [this, need, one](const onnx::NodeProto& n, const std::vector<Value>& in) {
    Value x = need(in, 0, "X");
    const size_t rank = x->shape.size();
    const bool upsample = n.op_type() == "Upsample", before_11 = upsample || opset_ < 11;
    ResizeRule rule;
    rule.mode = attr_string(n, "mode", "nearest");
    if (rule.mode == "bilinear") rule.mode = "linear";
    rule.coord =
        before_11 ? "asymmetric" : attr_string(n, "coordinate_transformation_mode", "half_pixel");
    rule.nearest_mode = before_11 ? "floor" : attr_string(n, "nearest_mode", "round_prefer_floor");
    rule.cubic_a = attr_float(n, "cubic_coeff_a", -0.75);
    rule.exclude_outside = attr_int(n, "exclude_outside", 0) != 0;
    rule.extrapolation = attr_float(n, "extrapolation_value", 0.0);
    check_resize_rule(rule);
    TT_CHECK(attr_int(n, "antialias", 0) == 0, kInvalidArgument, "antialias is not supported");
    std::string policy = attr_string(n, "keep_aspect_ratio_policy", "stretch");
    TT_CHECK(policy == "stretch", kInvalidArgument, "keep_aspect_ratio_policy '", policy,
             "' is not supported (stretch)");
    // Scales and sizes, for every axis or for `axes` (opset 18).
    std::vector<int64_t> every(rank);
    std::iota(every.begin(), every.end(), 0);
    std::vector<int64_t> axes = attr_ints(n, "axes", every);
    for (auto& a : axes) a = normalise(a, rank);
    std::vector<int64_t> size = x->shape;
    std::vector<double> scale(rank, 1.0);
    size_t scales_input = before_11 ? 1 : 2;
    const bool sized = !before_11 && in.size() > 3 && in[3];
    if (sized) {
      std::vector<int64_t> given = const_ints(n, in, 3, "sizes");
      TT_CHECK(given.size() == axes.size(), kInvalidArgument, "sizes needs ", axes.size(),
               " values, got ", given.size());
      for (size_t i = 0; i < axes.size(); ++i) {
        auto d = static_cast<size_t>(axes[i]);
        size[d] = given[i];
        scale[d] = static_cast<double>(given[i]) / static_cast<double>(x->shape[d]);
      }
    } else {
      std::vector<double> scales;
      if (upsample && opset_ < 9) {
        if (const auto* given = attr(n, "scales")) {
          scales.assign(given->floats().begin(), given->floats().end());
        }
      } else {
        TT_CHECK(in.size() > scales_input && in[scales_input] && constant_of(in[scales_input]),
                 kInvalidArgument,
                 before_11 ? "needs constant scales" : "needs constant scales or sizes");
        const te::NDArray& s = constant_of(in[scales_input])->data.array();
        for (int64_t i = 0; i < s.size(); ++i) scales.push_back(s.get(i));
      }
      TT_CHECK(scales.size() == axes.size(), kInvalidArgument, "scales needs ", axes.size(),
               " values, got ", scales.size());
      for (size_t i = 0; i < axes.size(); ++i) {
        auto d = static_cast<size_t>(axes[i]);
        TT_CHECK(scales[i] > 0, kInvalidArgument, "scale ", scales[i], " is not positive");
        scale[d] = scales[i];
        size[d] = static_cast<int64_t>(std::floor(static_cast<double>(x->shape[d]) * scales[i]));
        TT_CHECK(size[d] >= 1, kInvalidArgument, "scale ", scales[i], " leaves no element of ",
                 x->shape[d]);
        if (before_11 && rule.mode == "nearest") {
          // ONNX Runtime rounds a shrinking nearest resize up before opset 11.
          TT_CHECK(scales[i] >= 1, kInvalidArgument, "a nearest resize that shrinks (scale ",
                   scales[i], ") before opset 11 is not supported");
        }
      }
    }
    for (size_t d = 0; d + 2 < rank; ++d) {
      TT_CHECK(size[d] == x->shape[d], kInvalidArgument,
               "only the two last axes may be resized, not axis ", d);
    }
    // The region of interest (tf_crop_and_resize): starts, then ends, per axis given.
    std::vector<double> roi_start(rank, 0.0), roi_end(rank, 1.0);
    if (rule.coord == "tf_crop_and_resize") {
      const auto* roi = in.size() > 1 && in[1] ? constant_of(in[1]) : nullptr;
      TT_CHECK(roi && roi->data.array().size() == static_cast<int64_t>(2 * axes.size()),
               kInvalidArgument, "tf_crop_and_resize needs a constant roi of ", 2 * axes.size(),
               " values");
      for (size_t i = 0; i < axes.size(); ++i) {
        roi_start[static_cast<size_t>(axes[i])] = roi->data.array().get(static_cast<int64_t>(i));
        roi_end[static_cast<size_t>(axes[i])] =
            roi->data.array().get(static_cast<int64_t>(i + axes.size()));
      }
    }
    // As NCHW: the leading axes merged into the channels.
    const int64_t in_h = rank >= 2 ? x->shape[rank - 2] : 1, in_w = x->shape[rank - 1];
    const int64_t out_h = rank >= 2 ? size[rank - 2] : 1, out_w = size[rank - 1];
    const double scale_h = rank >= 2 ? scale[rank - 2] : 1, scale_w = scale[rank - 1];
    const int64_t channels =
        std::accumulate(x->shape.begin(), x->shape.end(), int64_t{1}, std::multiplies<>()) /
        (in_h * in_w);
    Value data = rank == 4 ? x : make("reshape", {x}, reshape_attrs({1, channels, in_h, in_w}), n);
    Value out;
    std::optional<std::string> coord =
        simple_resize(rule, in_h, out_h, scale_h, in_w, out_w, scale_w);
    // Integers (the QOperator form resizes bytes): nearest copies them; any
    // other rule computes in float32 by taps, in ONNX Runtime's order, and
    // truncates back as its static_cast does.
    const bool widened = !x->dtype.is_float() && !(coord && rule.mode == "nearest");
    if (widened) {
      TT_CHECK(x->dtype.bits() <= 16, kInvalidArgument, "a ", rule.mode, " resize of ",
               x->dtype.str(),
               " data is not supported (of floats, and of integers of up to 16 "
               "bits, which float32 holds exactly)");
      data = make("cast", {data}, cast_attrs(DataType::float32()), n);
      rule.single_precision = true;
      coord.reset();
    }
    if (coord) {
      auto a = make_node<te::ResizeAttrsNode>();
      a->size = {out_h, out_w};
      a->method = rule.mode;
      a->coordinate_mode = *coord;
      out = make("resize2d", {data}, te::Attrs(attrs(std::move(a))), n);
    } else {
      // Any other rule: per-axis taps, with the extrapolation value as a
      // border past the end of each axis that a tap may point at.
      bool border = false;
      auto taps = [&](int64_t extent, int64_t out_extent, double s, size_t d, const char* what) {
        ResizeTaps t = resize_taps(rule, extent, out_extent, s, roi_start[d], roi_end[d], &border);
        return std::pair{graph::constant(std::move(t.index), n.name() + "." + what),
                         graph::constant(std::move(t.weight), n.name() + "." + what + "_weights")};
      };
      auto [rows, row_weights] = taps(in_h, out_h, scale_h, rank >= 2 ? rank - 2 : 0, "rows");
      auto [cols, col_weights] = taps(in_w, out_w, scale_w, rank - 1, "cols");
      if (border) {
        auto p = make_node<te::PadAttrsNode>();
        p->before = {0, 0, 0, 0};
        p->after = {0, 0, 1, 1};
        p->value = rule.extrapolation;
        data = make("pad", {data}, te::Attrs(attrs(std::move(p))), n);
      }
      out = make("resample2d", {data, rows, row_weights, cols, col_weights}, te::Attrs(), n);
    }
    if (widened) out = make("cast", {out}, cast_attrs(x->dtype), n);
    return one(rank == 4 ? out : make("reshape", {out}, reshape_attrs(size), n));
  };
  h["Resize"] = resize;
  h["Upsample"] = resize;

  // Einsum of one operand (a transpose with sums) or two (a batched matmul
  // between transposes and reshapes). No ellipsis, no letter repeated
  // within an operand (a diagonal).
  h["Einsum"] = [this, one](const onnx::NodeProto& n, const std::vector<Value>& given) {
    std::vector<Value> in = given;  // operands whose diagonals are taken below
    std::string eq;
    for (char ch : attr_string(n, "equation", "")) {
      if (ch != ' ') eq += ch;
    }
    if (eq.find("...") != std::string::npos) eq = spell_out_ellipses(eq, in);
    size_t arrow = eq.find("->");
    if (arrow == std::string::npos) {
      arrow = eq.size();
      eq += "->" + implicit_output(eq.substr(0, arrow), "");
    }
    std::vector<std::string> terms = split(eq.substr(0, arrow), ',');
    const std::string out_term = eq.substr(arrow + 2);
    TT_CHECK(terms.size() == in.size() && (in.size() == 1 || in.size() == 2), kInvalidArgument,
             "equation '", eq, "' for ", in.size(), " inputs: one or two operands are supported");
    std::map<char, int64_t> extent;
    for (size_t k = 0; k < terms.size(); ++k) {
      TT_CHECK(in[k] && terms[k].size() == in[k]->shape.size(), kInvalidArgument, "operand ", k,
               " '", terms[k], "' does not match its rank");
      // A letter an operand repeats (ii) takes its diagonal: the operand
      // times an identity on those two axes, summed over the second.
      for (size_t p = 0; p < terms[k].size(); ++p) {
        for (size_t q = terms[k].size(); q-- > p + 1;) {
          if (terms[k][q] != terms[k][p]) continue;
          const int64_t size = in[k]->shape[p];
          TT_CHECK(in[k]->shape[q] == size, kInvalidArgument, "operand ", k, " repeats '",
                   terms[k][p], "' over extents ", size, " and ", in[k]->shape[q]);
          std::vector<int64_t> shape(in[k]->shape.size(), 1);
          shape[p] = shape[q] = size;
          te::NDArray eye(in[k]->dtype, shape);
          for (int64_t i = 0; i < size; ++i) eye.set(i * size + i, 1);
          Value masked =
              make("multiply", {in[k], graph::constant(std::move(eye), n.name() + ".diagonal")},
                   te::Attrs(), n);
          auto r = make_node<te::ReduceAttrsNode>();
          r->axes = {static_cast<int64_t>(q)};
          r->keepdims = false;
          in[k] = make("reduce_sum", {masked}, te::Attrs(attrs(std::move(r))), n);
          terms[k].erase(q, 1);
        }
      }
      for (size_t d = 0; d < terms[k].size(); ++d) {
        char ch = terms[k][d];
        auto [it, fresh] = extent.emplace(ch, in[k]->shape[d]);
        TT_CHECK(fresh || it->second == in[k]->shape[d], kInvalidArgument, "'", ch,
                 "' has extents ", it->second, " and ", in[k]->shape[d]);
      }
    }
    auto has = [](const std::string& t, char ch) { return t.find(ch) != std::string::npos; };
    // One operand's letters in `order`, its others summed away first.
    auto arrange = [&](Value v, std::string term, const std::string& order) {
      std::vector<int64_t> summed;
      for (size_t d = 0; d < term.size(); ++d) {
        if (!has(order, term[d])) summed.push_back(static_cast<int64_t>(d));
      }
      if (!summed.empty()) {
        auto r = make_node<te::ReduceAttrsNode>();
        r->axes = summed;
        r->keepdims = false;
        v = make("reduce_sum", {v}, te::Attrs(attrs(std::move(r))), n);
        std::string kept;
        for (char ch : term) {
          if (has(order, ch)) kept += ch;
        }
        term = kept;
      }
      std::vector<int64_t> perm;
      for (char ch : order) perm.push_back(static_cast<int64_t>(term.find(ch)));
      bool moved = false;
      for (size_t d = 0; d < perm.size(); ++d) moved |= perm[d] != static_cast<int64_t>(d);
      return moved ? make("transpose", {v}, transpose_attrs(perm), n) : v;
    };
    auto extents = [&](const std::string& letters) {
      int64_t e = 1;
      for (char ch : letters) e *= extent.at(ch);
      return e;
    };
    for (char ch : out_term) {
      TT_CHECK(extent.count(ch), kInvalidArgument, "the output's '", ch, "' is in no operand");
    }
    if (in.size() == 1) return one(arrange(in[0], terms[0], out_term));
    const std::string &a = terms[0], &b = terms[1];
    std::string batch, left, right, contracted;
    for (char ch : out_term) {
      (has(a, ch) && has(b, ch) ? batch : has(a, ch) ? left : right) += ch;
    }
    for (char ch : a) {
      if (has(b, ch) && !has(out_term, ch)) contracted += ch;
    }
    Value x = arrange(in[0], a, batch + left + contracted);
    Value y = arrange(in[1], b, batch + contracted + right);
    const int64_t nb = extents(batch), m = extents(left), k = extents(contracted),
                  nn = extents(right);
    x = make("reshape", {x}, reshape_attrs({nb, m, k}), n);
    y = make("reshape", {y}, reshape_attrs({nb, k, nn}), n);
    Value out = make("nn.matmul", {x, y}, te::Attrs(), n);
    std::vector<int64_t> shape;
    for (char ch : batch + left + right) shape.push_back(extent.at(ch));  // {}: a scalar
    out = make("reshape", {out}, reshape_attrs(shape), n);
    return one(arrange(out, batch + left + right, out_term));
  };

  // What ONNX Runtime's quantize_dynamic writes for an LSTM.
  h["com.microsoft.DynamicQuantizeLSTM"] =
      [this, need, integer_type](const onnx::NodeProto& n, const std::vector<Value>& in) {
        integer_type(need(in, 1, "W"), "W");
        integer_type(need(in, 2, "R"), "R");
        QuantizedRecurrence q{need(in, 8, "W_scale"), need(in, 9, "W_zero_point"),
                              need(in, 10, "R_scale"), need(in, 11, "R_zero_point")};
        return recurrent(n, in, Recurrent::kLstm, &q);
      };

  // What ONNX Runtime's optimizer makes of quantize_dynamic's MatMuls when it
  // saves the model: the integer product scaled back, and the same after a
  // DynamicQuantizeLinear of A.
  h["com.microsoft.MatMulIntegerToFloat"] = [this, need, one, optional_input](
                                                const onnx::NodeProto& n,
                                                const std::vector<Value>& in) {
    Value a = need(in, 0, "A"), b = need(in, 1, "B");
    const int64_t columns = b->shape.empty() ? 0 : b->shape.back();
    // A's scale and zero point one value; B's one value or one per column;
    // the bias one per column; float32 (ONNX Runtime's CPU kernel).
    auto check = [&](size_t k, const char* what, bool per_column, bool is_scale) {
      Value v = optional_input(in, k);
      if (!v) return v;
      const int64_t count = checked_elements(v->shape, what);
      TT_CHECK(count == 1 || (per_column && v->shape == std::vector<int64_t>{columns}),
               kInvalidArgument, "its ", what, " is ", shape_text(v->shape),
               "; it must be one value",
               per_column ? " or one per column of B ([" + std::to_string(columns) + "])" : "");
      TT_CHECK(!is_scale || v->dtype == DataType::float32(), kInvalidArgument, "its ", what, " is ",
               v->dtype.str(), "; float32 is supported");
      return count == 1 && v->shape.size() > 0 ? make("reshape", {v}, reshape_attrs({}), n) : v;
    };
    need(in, 2, "a_scale");
    need(in, 3, "b_scale");
    Value a_scale = check(2, "a_scale", false, true), b_scale = check(3, "b_scale", true, true);
    Value acc = handlers_.at("MatMulInteger")(n, {a, b, check(4, "a_zero_point", false, false),
                                                  check(5, "b_zero_point", true, false)})[0];
    Value scales = make("multiply", {a_scale, b_scale}, te::Attrs(), n);
    Value y = make("multiply", {make("cast", {acc}, cast_attrs(DataType::float32()), n), scales},
                   te::Attrs(), n);
    if (Value bias = optional_input(in, 6)) {
      TT_CHECK(bias->shape == std::vector<int64_t>{columns} && bias->dtype == DataType::float32(),
               kInvalidArgument, "its bias is ", bias->dtype.str(), " ", shape_text(bias->shape),
               "; it must be float32 [", columns, "]");
      y = make("add", {y, bias}, te::Attrs(), n);
    }
    return one(y);
  };
  h["com.microsoft.DynamicQuantizeMatMul"] =
      [this, need, optional_input](const onnx::NodeProto& n, const std::vector<Value>& in) {
        std::vector<Value> a = handlers_.at("DynamicQuantizeLinear")(n, {need(in, 0, "A")});
        return handlers_.at("com.microsoft.MatMulIntegerToFloat")(
            n, {a[0], need(in, 1, "B"), a[1], need(in, 2, "b_scale"), a[2], optional_input(in, 3),
                optional_input(in, 4)});
      };

  // ---- com.microsoft: the rest of the QOperator form of ONNX Runtime's quantizer ----
  // As ONNX Runtime's CPU kernels compute them, in their order of float32
  // operations (a last bit moves a rounded value by a step): mostly on the
  // dequantized values, requantized to the output's scale, rounded half to
  // even and saturated. Scales and zero points are one value each; a zero
  // point left out is 0.
  struct Quantized {
    Value q, scale, zero_point;  ///< data, float32 scale, zero point (or none)
  };
  // The scale (or zero point) in[k] of data `q`, as a scalar.
  auto parameter = [this](const std::vector<Value>& in, size_t k, const char* what, const Value& q,
                          bool is_scale, const onnx::NodeProto& n) -> Value {
    Value v = k < in.size() ? in[k] : Value();
    if (!v) {
      TT_CHECK(!is_scale, kInvalidArgument, "needs its ", what, " input");
      return v;
    }
    TT_CHECK(checked_elements(v->shape, what) == 1, kInvalidArgument, "its ", what, " ",
             shape_text(v->shape), " is not one value; per-axis ", n.op_type(),
             " is not supported");
    DataType want = is_scale ? DataType::float32() : q->dtype;
    TT_CHECK(v->dtype == want, kInvalidArgument, "its ", what, " is ", v->dtype.str(),
             "; it must be ", want.str());
    return v->shape.empty() ? v : make("reshape", {v}, reshape_attrs({}), n);
  };
  // Data in[k] with its scale in[k + 1] and zero point in[k + 2].
  auto quantized = [need, integer_type, parameter](const std::vector<Value>& in, size_t k,
                                                   const char* what, const onnx::NodeProto& n) {
    Value q = need(in, k, what);
    integer_type(q, what);
    const std::string name = what;
    return Quantized{q, parameter(in, k + 1, (name + "_scale").c_str(), q, true, n),
                     parameter(in, k + 2, (name + "_zero_point").c_str(), q, false, n)};
  };
  auto dequantize = [this](const Quantized& x, const onnx::NodeProto& n) {
    return handlers_.at("DequantizeLinear")(n, {x.q, x.scale, x.zero_point})[0];
  };
  // `value` (float32) quantized to `y` (whose q gives the type) as MLAS's
  // QuantizeLinear does: rounded, then the zero point added.
  auto requantize = [this, saturate](Value value, const Quantized& y, const onnx::NodeProto& n) {
    return saturate(make("divide", {value, y.scale}, te::Attrs(), n), y.zero_point, y.q->dtype, n);
  };
  // The output's scale in[k] and zero point in[k + 1], of the type of `x`.
  auto output = [parameter](const std::vector<Value>& in, size_t k, const Value& x,
                            const onnx::NodeProto& n, const std::string& name = "y") {
    return Quantized{x, parameter(in, k, (name + "_scale").c_str(), x, true, n),
                     parameter(in, k + 1, (name + "_zero_point").c_str(), x, false, n)};
  };
  auto same_type = [](const Quantized& a, const Quantized& b) {
    TT_CHECK(a.q->dtype == b.q->dtype, kInvalidArgument, "mixes ", a.q->dtype.str(), " and ",
             b.q->dtype.str(), "; its inputs must have one type");
  };
  h["com.microsoft.QLinearAdd"] = [this, one, cast_to, saturate, quantized, output, same_type](
                                      const onnx::NodeProto& n, const std::vector<Value>& in) {
    Quantized a = quantized(in, 0, "A", n), b = quantized(in, 3, "B", n);
    same_type(a, b);
    Quantized c = output(in, 6, a.q, n, "C");
    // MLAS (AVX2): fma(A, A_scale / C_scale, fma(B, B_scale / C_scale, a
    // constant holding the three zero points)). Written in that order, the
    // C compiler fuses the same pairs (-ffp-contract=fast); taking the
    // products in float64 to fix the rounding points made the int8 models
    // with residual adds 1.5-2 times slower.
    auto f32 = [&](const Value& v) { return cast_to(v, DataType::float32(), n); };
    auto op = [&](const char* name, Value x, Value y) {
      return make(name, {x, y}, te::Attrs(), n);
    };
    Value ra = op("divide", a.scale, c.scale), rb = op("divide", b.scale, c.scale);
    Value shift;
    auto take = [&](const Value& zp, const Value& ratio) {
      if (!zp) return;
      Value part = op("multiply", ratio, f32(zp));
      shift = shift ? op("add", shift, part) : part;
    };
    take(a.zero_point, ra);
    take(b.zero_point, rb);
    if (c.zero_point)
      shift = shift ? op("subtract", f32(c.zero_point), shift) : f32(c.zero_point);
    else if (shift)
      shift = make("negative", {shift}, te::Attrs(), n);
    Value value = op("multiply", f32(b.q), rb);
    if (shift) value = op("add", value, shift);
    value = op("add", op("multiply", f32(a.q), ra), value);
    return one(saturate(value, Value(), a.q->dtype, n));
  };
  h["com.microsoft.QLinearMul"] = [this, one, cast_to, saturate, quantized, output, same_type](
                                      const onnx::NodeProto& n, const std::vector<Value>& in) {
    Quantized a = quantized(in, 0, "A", n), b = quantized(in, 3, "B", n);
    same_type(a, b);
    Quantized c = output(in, 6, a.q, n, "C");
    // The product of the centred values, exact in int32, times
    // A_scale * B_scale / C_scale, plus the zero point.
    Value product = make("multiply", {centred(a.q, a.zero_point, n), centred(b.q, b.zero_point, n)},
                         te::Attrs(), n);
    Value ratio = make("divide", {make("multiply", {a.scale, b.scale}, te::Attrs(), n), c.scale},
                       te::Attrs(), n);
    Value value =
        make("multiply", {cast_to(product, DataType::float32(), n), ratio}, te::Attrs(), n);
    if (c.zero_point) {
      value = make("add", {value, cast_to(c.zero_point, DataType::float32(), n)}, te::Attrs(), n);
    }
    return one(saturate(value, Value(), a.q->dtype, n));
  };
  h["com.microsoft.QLinearLeakyRelu"] = [this, one, quantized, output, dequantize, requantize](
                                            const onnx::NodeProto& n,
                                            const std::vector<Value>& in) {
    Quantized x = quantized(in, 0, "X", n);
    Value v = make("leaky_relu", {dequantize(x, n)}, scalar_attrs(attr_float(n, "alpha", 0.01)), n);
    return one(requantize(v, output(in, 3, x.q, n), n));
  };
  h["com.microsoft.QLinearSigmoid"] = [this, one, quantized, output, dequantize, requantize](
                                          const onnx::NodeProto& n, const std::vector<Value>& in) {
    Quantized x = quantized(in, 0, "X", n);
    Value v = make("sigmoid", {dequantize(x, n)}, te::Attrs(), n);
    return one(requantize(v, output(in, 3, x.q, n), n));
  };
  // The integer sum of each channel's image, less its zero point's share,
  // times x_scale / (y_scale * image size).
  auto global_average = [this, cast_to, saturate](const Quantized& x, const Quantized& y,
                                                  bool channels_last, const onnx::NodeProto& n) {
    const size_t rank = x.q->shape.size();
    TT_CHECK(rank >= 3, kInvalidArgument, "needs data of rank 3 or more, got ",
             shape_text(x.q->shape));
    auto r = make_node<te::ReduceAttrsNode>();
    int64_t image = 1;
    for (size_t d = channels_last ? 1 : 2; d < (channels_last ? rank - 1 : rank); ++d) {
      r->axes.push_back(static_cast<int64_t>(d));
      image *= x.q->shape[d];
    }
    r->keepdims = true;
    Value acc =
        make("reduce_sum", {cast_to(x.q, DataType::int32(), n)}, te::Attrs(attrs(std::move(r))), n);
    if (x.zero_point) {
      Value share = make("multiply",
                         {cast_to(x.zero_point, DataType::int32(), n),
                          scalar_constant(DataType::int32(), static_cast<double>(image),
                                          n.name() + ".image_size")},
                         te::Attrs(), n);
      acc = make("subtract", {acc, share}, te::Attrs(), n);
    }
    Value scale = make(
        "divide",
        {x.scale, make("multiply",
                       {y.scale, scalar_constant(DataType::float32(), static_cast<double>(image),
                                                 n.name() + ".image_size_f")},
                       te::Attrs(), n)},
        te::Attrs(), n);
    Value value = make("multiply", {cast_to(acc, DataType::float32(), n), scale}, te::Attrs(), n);
    return saturate(value, y.zero_point, x.q->dtype, n);
  };
  h["com.microsoft.QLinearGlobalAveragePool"] = [this, one, quantized, output, global_average](
                                                    const onnx::NodeProto& n,
                                                    const std::vector<Value>& in) {
    Quantized x = quantized(in, 0, "X", n);
    return one(global_average(x, output(in, 3, x.q, n), attr_int(n, "channels_last", 0) != 0, n));
  };
  h["com.microsoft.QLinearAveragePool"] = [this, one, quantized, output, dequantize, cast_to,
                                           saturate, global_average](const onnx::NodeProto& n,
                                                                     const std::vector<Value>& in) {
    Quantized x = quantized(in, 0, "X", n);
    Quantized y = output(in, 3, x.q, n);
    const bool channels_last = attr_int(n, "channels_last", 0) != 0;
    const size_t rank = x.q->shape.size();
    TT_CHECK(rank >= 3, kInvalidArgument, "needs data of rank 3 or more, got ",
             shape_text(x.q->shape));
    // A window over the whole image without padding is ONNX Runtime's
    // integer global average.
    std::vector<int64_t> image(x.q->shape.begin() + (channels_last ? 1 : 2),
                               x.q->shape.end() - (channels_last ? 1 : 0));
    std::vector<int64_t> pads = attr_ints(n, "pads", {});
    const std::string auto_pad = attr_string(n, "auto_pad", "NOTSET");
    if (attr_ints(n, "kernel_shape", {}) == image &&
        (auto_pad == "NOTSET" || auto_pad == "VALID") &&
        std::all_of(pads.begin(), pads.end(), [](int64_t p) { return p == 0; })) {
      return one(global_average(x, y, channels_last, n));
    }
    std::vector<int64_t> to_first(rank), to_last(rank);
    to_first[0] = to_last[0] = 0;
    for (size_t d = 1; d < rank; ++d) {
      to_first[d] = d == 1 ? static_cast<int64_t>(rank) - 1 : static_cast<int64_t>(d) - 1;
      to_last[d] = d == rank - 1 ? 1 : static_cast<int64_t>(d) + 1;
    }
    Value v = dequantize(x, n);
    if (channels_last) v = make("transpose", {v}, transpose_attrs(to_first), n);
    v = handlers_.at("AveragePool")(n, {v})[0];
    // Counting the padding, ONNX Runtime divides by the whole window even
    // where ceil_mode lets it reach past the padding (AveragePool by the
    // part within it): a factor per position of each axis.
    if (attr_int(n, "count_include_pad", 0) && attr_int(n, "ceil_mode", 0) &&
        auto_pad == "NOTSET") {
      const size_t axes = image.size();
      std::vector<int64_t> kernel = attr_ints(n, "kernel_shape", {}),
                           strides = attr_ints(n, "strides", std::vector<int64_t>(axes, 1));
      pads.resize(2 * axes, 0);
      for (size_t i = 0; i < axes && i < kernel.size() && i < strides.size(); ++i) {
        const int64_t out = v->shape[2 + i];
        te::NDArray factor(DataType::float32(), {out});
        bool whole = true;
        for (int64_t o = 0; o < out; ++o) {
          const int64_t start = o * strides[i] - pads[i];
          const int64_t end = std::min(start + kernel[i], image[i] + pads[i + axes]);
          factor.set(o, static_cast<double>(end - start) / static_cast<double>(kernel[i]));
          whole = whole && end - start == kernel[i];
        }
        if (whole) continue;
        std::vector<int64_t> shape(rank, 1);
        shape[2 + i] = out;
        Value f =
            graph::constant(std::move(factor), n.name() + ".window_share" + std::to_string(i));
        v = make("multiply", {v, make("reshape", {f}, reshape_attrs(shape), n)}, te::Attrs(), n);
      }
    }
    if (channels_last) v = make("transpose", {v}, transpose_attrs(to_last), n);
    // The zero point added before rounding, here.
    v = make("divide", {v, y.scale}, te::Attrs(), n);
    if (y.zero_point) {
      v = make("add", {v, cast_to(y.zero_point, DataType::float32(), n)}, te::Attrs(), n);
    }
    return one(saturate(v, Value(), x.q->dtype, n));
  };
  h["com.microsoft.QLinearConcat"] = [this, one, quantized, parameter, dequantize, requantize](
                                         const onnx::NodeProto& n, const std::vector<Value>& in) {
    TT_CHECK(in.size() >= 5 && (in.size() - 2) % 3 == 0, kInvalidArgument,
             "needs Y_scale, Y_zero_point and then (data, scale, zero point) triples, got ",
             in.size(), " inputs");
    std::vector<Value> parts;
    Quantized y;
    for (size_t k = 2; k < in.size(); k += 3) {
      Quantized x = quantized(in, k, ("input " + std::to_string((k - 2) / 3)).c_str(), n);
      if (!y.q) {
        y = {x.q, parameter(in, 0, "Y_scale", x.q, true, n),
             parameter(in, 1, "Y_zero_point", x.q, false, n)};
      }
      TT_CHECK(x.q->dtype == y.q->dtype, kInvalidArgument, "concatenates ", x.q->dtype.str(),
               " with ", y.q->dtype.str(), "; its inputs must have one type");
      parts.push_back(requantize(dequantize(x, n), y, n));
    }
    return handlers_.at("Concat")(n, parts);
  };
  h["com.microsoft.QLinearWhere"] = [this, one, need, quantized, parameter, dequantize, requantize](
                                        const onnx::NodeProto& n, const std::vector<Value>& in) {
    Quantized x = quantized(in, 1, "X", n), y = quantized(in, 4, "Y", n);
    TT_CHECK(x.q->dtype == y.q->dtype, kInvalidArgument, "mixes ", x.q->dtype.str(), " and ",
             y.q->dtype.str(), "; X and Y must have one type");
    Quantized z{x.q, parameter(in, 7, "z_scale", x.q, true, n),
                parameter(in, 8, "z_zero_point", x.q, false, n)};
    return one(make("where",
                    {need(in, 0, "condition"), requantize(dequantize(x, n), z, n),
                     requantize(dequantize(y, n), z, n)},
                    te::Attrs(), n));
  };
  h["com.microsoft.QLinearSoftmax"] = [this, one, quantized, output, dequantize, softmax, saturate](
                                          const onnx::NodeProto& n, const std::vector<Value>& in) {
    Quantized x = quantized(in, 0, "X", n);
    Quantized y = output(in, 3, x.q, n);
    TT_CHECK(attr(n, "opset"), kInvalidArgument,
             "needs its opset attribute (which Softmax it quantizes)");
    Value p = softmax(n, dequantize(x, n), attr_int(n, "opset", 13), false);
    // ONNX Runtime scales the probabilities by floor(1 / y_scale) (256 for
    // the quantizer's 1/256) and rounds before adding the zero point.
    Value levels =
        make("floor",
             {make("divide", {scalar_constant(DataType::float32(), 1, n.name() + ".one"), y.scale},
                   te::Attrs(), n)},
             te::Attrs(), n);
    return one(
        saturate(make("multiply", {p, levels}, te::Attrs(), n), y.zero_point, x.q->dtype, n));
  };
  h["com.microsoft.QGemm"] = [this, one, need, integer_type, parameter, cast_to, saturate](
                                 const onnx::NodeProto& n, const std::vector<Value>& in) {
    Value a = need(in, 0, "A"), b = need(in, 3, "B");
    integer_type(a, "A");
    integer_type(b, "B");
    // ONNX Runtime's kernels: uint8 A by uint8 or int8 B, int8 A by int8 B.
    TT_CHECK(a->dtype == DataType::uint(8) || b->dtype == DataType::int_(8), kInvalidArgument,
             "multiplies ", a->dtype.str(), " A by ", b->dtype.str(),
             " B; uint8 by uint8 or int8, and int8 by int8, are supported");
    TT_CHECK(a->shape.size() == 2 && b->shape.size() == 2, kInvalidArgument,
             "A and B must be 2-D, got ", shape_text(a->shape), " and ", shape_text(b->shape));
    if (attr_int(n, "transA", 0)) a = make("transpose", {a}, transpose_attrs({1, 0}), n);
    if (attr_int(n, "transB", 0)) b = make("transpose", {b}, transpose_attrs({1, 0}), n);
    const int64_t rows = a->shape[0], columns = b->shape[1];
    Value a_scale = parameter(in, 1, "a_scale", a, true, n);
    Value a_zp = parameter(in, 2, "a_zero_point", a, false, n);
    // B's scale and zero point: one value or one per column.
    auto per_column = [&](size_t k, const char* what, DataType t) {
      Value v = need(in, k, what);
      TT_CHECK(v->dtype == t, kInvalidArgument, "its ", what, " is ", v->dtype.str(),
               "; it must be ", t.str());
      const int64_t count = checked_elements(v->shape, what);
      TT_CHECK(count == 1 || v->shape == std::vector<int64_t>{columns}, kInvalidArgument, "its ",
               what, " is ", shape_text(v->shape), "; it must be one value or one per column [",
               columns, "]");
      return count == 1 ? make("reshape", {v}, reshape_attrs({}), n) : v;
    };
    Value b_scale = per_column(4, "b_scale", DataType::float32());
    Value acc =
        handlers_.at("MatMulInteger")(n, {a, b, a_zp, per_column(5, "b_zero_point", b->dtype)})[0];
    if (in.size() > 6 && in[6]) {
      const Value& c = in[6];
      const std::vector<std::vector<int64_t>> shapes = {
          {}, {1}, {columns}, {1, columns}, {rows, 1}, {rows, columns}, {1, 1}};
      TT_CHECK(c->dtype == DataType::int32() &&
                   std::find(shapes.begin(), shapes.end(), c->shape) != shapes.end(),
               kInvalidArgument, "its C is ", c->dtype.str(), " ", shape_text(c->shape),
               "; it must be int32 and broadcast to the output [", rows, ", ", columns, "]");
      acc = make("add", {acc, c}, te::Attrs(), n);
    }
    // (alpha * a_scale) * b_scale, in ONNX Runtime's order.
    const double alpha = attr_float(n, "alpha", 1.0);
    if (alpha != 1.0) {
      a_scale = make("multiply",
                     {scalar_constant(DataType::float32(), alpha, n.name() + ".alpha"), a_scale},
                     te::Attrs(), n);
    }
    Value scale = make("multiply", {a_scale, b_scale}, te::Attrs(), n);
    Value y_scale = in.size() > 7 && in[7] ? parameter(in, 7, "y_scale", a, true, n) : Value();
    Value y_zp = in.size() > 8 ? in[8] : Value();
    // Without y_scale the output is float32, ONNX Runtime's dequantized product.
    if (!y_scale) {
      TT_CHECK(!y_zp, kInvalidArgument, "has a y_zero_point without a y_scale");
      return one(make("multiply", {cast_to(acc, DataType::float32(), n), scale}, te::Attrs(), n));
    }
    TT_CHECK(y_zp, kInvalidArgument,
             "has a y_scale without a y_zero_point (whose type is the output's)");
    y_zp = parameter(in, 8, "y_zero_point", a, false, n);
    scale = make("divide", {scale, y_scale}, te::Attrs(), n);
    return one(
        saturate(make("multiply", {cast_to(acc, DataType::float32(), n), scale}, te::Attrs(), n),
                 y_zp, y_zp->dtype, n));
  };

  // ---- com.microsoft: what ONNX Runtime's transformer optimizer writes ----
  h["com.microsoft.Gelu"] = [this, need, one](const onnx::NodeProto& n,
                                              const std::vector<Value>& in) {
    return one(make("gelu", {need(in, 0, "X")}, te::Attrs(), n));
  };
  h["com.microsoft.BiasGelu"] = [this, need, one](const onnx::NodeProto& n,
                                                  const std::vector<Value>& in) {
    Value sum = make("add", {need(in, 0, "A"), need(in, 1, "B")}, te::Attrs(), n);
    return one(make("gelu", {sum}, te::Attrs(), n));
  };
  h["com.microsoft.FastGelu"] = [this, need, one](const onnx::NodeProto& n,
                                                  const std::vector<Value>& in) {
    Value x = need(in, 0, "X");
    if (in.size() > 1 && in[1]) x = make("add", {x, in[1]}, te::Attrs(), n);
    return one(make("gelu_tanh", {x}, te::Attrs(), n));
  };
  h["com.microsoft.FusedMatMul"] = [this, need, one](const onnx::NodeProto& n,
                                                     const std::vector<Value>& in) {
    TT_CHECK(attr_int(n, "transBatchA", 0) == 0 && attr_int(n, "transBatchB", 0) == 0,
             kInvalidArgument, "transBatchA and transBatchB are not supported");
    auto transposed = [&](Value v) {
      TT_CHECK(v->shape.size() >= 2, kInvalidArgument, "a transposed operand needs rank >= 2");
      std::vector<int64_t> perm(v->shape.size());
      std::iota(perm.begin(), perm.end(), 0);
      std::swap(perm[perm.size() - 1], perm[perm.size() - 2]);
      return make("transpose", {v}, transpose_attrs(perm), n);
    };
    Value a = need(in, 0, "A"), b = need(in, 1, "B");
    if (attr_int(n, "transA", 0)) a = transposed(a);
    if (attr_int(n, "transB", 0)) b = transposed(b);
    Value out = handlers_.at("MatMul")(n, {a, b})[0];
    double alpha = attr_float(n, "alpha", 1.0);
    if (alpha != 1.0) {
      out = make("multiply", {out, scalar_constant(out->dtype, alpha, n.name() + ".alpha")},
                 te::Attrs(), n);
    }
    return one(out);
  };

  // Outputs: the normalised sum, its mean and inverse deviation (not
  // computed), and the sum itself.
  h["com.microsoft.SkipLayerNormalization"] = [this, need](const onnx::NodeProto& n,
                                                           const std::vector<Value>& in) {
    Value sum = make("add", {need(in, 0, "input"), need(in, 1, "skip")}, te::Attrs(), n);
    if (in.size() > 4 && in[4]) sum = make("add", {sum, in[4]}, te::Attrs(), n);
    std::vector<Value> norm_in = {sum, need(in, 2, "gamma")};
    if (in.size() > 3 && in[3]) norm_in.push_back(in[3]);
    return std::vector<Value>{handlers_.at("LayerNormalization")(n, norm_in)[0], Value(), Value(),
                              sum};
  };
  // A BERT's embeddings: word + position (+ segment) embeddings, layer
  // normalised; the mask's count of ones per row (the lengths Attention
  // reads for right padding); the sum before the norm.
  h["com.microsoft.EmbedLayerNormalization"] = [this, need, optional_input](
                                                   const onnx::NodeProto& n,
                                                   const std::vector<Value>& in) {
    auto optional = [&](size_t k) { return optional_input(in, k); };
    Value ids = need(in, 0, "input_ids");
    TT_CHECK(ids->shape.size() == 2, kInvalidArgument, "needs input_ids of rank 2, got ",
             shape_text(ids->shape));
    const int64_t seq = ids->shape[1];
    Value gamma = need(in, 5, "gamma"), beta = need(in, 6, "beta");
    TT_CHECK(gamma->shape.size() == 1 && beta->shape == gamma->shape, kInvalidArgument,
             "its gamma ", shape_text(gamma->shape), " and beta ", shape_text(beta->shape),
             " must be vectors of one size");
    const int64_t hidden = gamma->shape[0];
    // Each table float32 [rows, hidden]; each id tensor integers of the ids' shape.
    auto check_table = [&](const Value& t, const char* what) {
      TT_CHECK(t->shape.size() == 2 && t->shape[1] == hidden && t->dtype == DataType::float32(),
               kInvalidArgument, "its ", what, " is ", t->dtype.str(), " ", shape_text(t->shape),
               "; it must be float32 [rows, ", hidden, "] (gamma's size)");
    };
    auto check_ids = [&](const Value& v, const char* what, bool one_row_allowed) {
      const bool fits =
          v->shape == ids->shape || (one_row_allowed && v->shape == (std::vector<int64_t>{1, seq}));
      TT_CHECK(fits && v->dtype.is_integer(), kInvalidArgument, "its ", what, " is ",
               v->dtype.str(), " ", shape_text(v->shape), "; it must be integers of shape ",
               shape_text(ids->shape), one_row_allowed ? " or [1, S]" : "");
    };
    check_ids(ids, "input_ids", false);
    auto gather = [&](const Value& table, const Value& indices) {
      return handlers_.at("Gather")(n, {table, indices})[0];
    };
    Value words = need(in, 2, "word_embedding"), positions = need(in, 3, "position_embedding");
    check_table(words, "word_embedding");
    check_table(positions, "position_embedding");
    Value sum = gather(words, ids), position;
    if (Value given = optional(8)) {
      check_ids(given, "position_ids", true);
      position = gather(positions, given);
    } else {
      TT_CHECK(positions->shape[0] >= seq, kInvalidArgument, "its position_embedding ",
               shape_text(positions->shape), " has fewer rows than the sequence's ", seq);
      position = make("slice", {positions}, slice_along(positions->shape, 0, 0, seq), n);
    }
    sum = make("add", {sum, position}, te::Attrs(), n);
    if (Value segments = optional(4)) {
      // Without segment ids, ONNX Runtime adds the table's first row.
      check_table(segments, "segment_embedding");
      Value segment = optional(1);
      if (segment) check_ids(segment, "segment_ids", false);
      segment = segment ? gather(segments, segment)
                        : make("slice", {segments}, slice_along(segments->shape, 0, 0, 1), n);
      sum = make("add", {sum, segment}, te::Attrs(), n);
    } else {
      TT_CHECK(!optional(1), kInvalidArgument,
               "has segment_ids but no segment_embedding to look them up in");
    }
    Value out = handlers_.at("LayerNormalization")(n, {sum, gamma, beta})[0];
    Value lengths;
    if (Value mask = optional(7)) {
      check_ids(mask, "mask", false);
      auto r = make_node<te::ReduceAttrsNode>();
      r->axes = {1};
      r->keepdims = false;
      // ONNX Runtime counts the entries equal to 1.
      Value ones =
          make("equal", {mask, scalar_constant(mask->dtype, 1, n.name() + ".one")}, te::Attrs(), n);
      lengths = make("reduce_sum", {make("cast", {ones}, cast_attrs(DataType::int32()), n)},
                     te::Attrs(attrs(std::move(r))), n);
    } else {
      te::NDArray zeros(DataType::int32(), {ids->shape[0]});
      lengths = graph::constant(std::move(zeros), n.name() + ".lengths");
    }
    return std::vector<Value>{out, lengths, sum};
  };
  // Self-attention as ONNX Runtime's CPU kernel computes it: Q, K and V
  // from one projection (with its bias), per head scale * Q K^T plus the
  // mask's bias (mask_filter_value where a key is masked; the lowest float
  // after the query, causal), softmax, times V, the heads joined again.
  h["com.microsoft.Attention"] = [this, need, one, optional_input](const onnx::NodeProto& n,
                                                                   const std::vector<Value>& in) {
    auto optional = [&](size_t k) { return optional_input(in, k); };
    auto call = [&](const std::string& op, std::vector<Value> args, te::Attrs a = te::Attrs()) {
      return make(op, std::move(args), std::move(a), n);
    };
    Value x = need(in, 0, "input"), w = need(in, 1, "weights");
    TT_CHECK(!optional(4) && !optional(5) && !optional(6), kInvalidArgument,
             "past states and attention biases (inputs past, attention_bias, "
             "past_sequence_length) are not supported");
    TT_CHECK(attr_int(n, "do_rotary", 0) == 0, kInvalidArgument, "do_rotary is not supported");
    TT_CHECK(x->shape.size() == 3 && x->dtype == DataType::float32(), kInvalidArgument,
             "needs float32 input of rank 3 (as ONNX Runtime's CPU kernel), got ", x->dtype.str(),
             " ", shape_text(x->shape));
    const int64_t batch = x->shape[0], seq = x->shape[1], heads = attr_int(n, "num_heads", 0);
    std::vector<int64_t> sizes = attr_ints(n, "qkv_hidden_sizes", {});
    if (sizes.empty() && w->shape.size() == 2) sizes.assign(3, w->shape[1] / 3);
    TT_CHECK(sizes.size() == 3 && sizes[0] == sizes[1] && heads > 0 && sizes[0] % heads == 0 &&
                 sizes[2] % heads == 0,
             kInvalidArgument, "num_heads ", heads, " must divide the Q, K and V sizes ",
             shape_text(sizes), ", and Q and K must be the same size");
    TT_CHECK(w->shape == (std::vector<int64_t>{x->shape[2], sizes[0] + sizes[1] + sizes[2]}),
             kInvalidArgument, "its weights are ", shape_text(w->shape), "; they must be ",
             shape_text({x->shape[2], sizes[0] + sizes[1] + sizes[2]}));
    Value qkv = handlers_.at("MatMul")(n, {x, w})[0];
    if (Value bias = optional(2)) {
      TT_CHECK(bias->shape == std::vector<int64_t>{w->shape[1]}, kInvalidArgument, "its bias is ",
               shape_text(bias->shape), "; it must be ", shape_text({w->shape[1]}));
      qkv = call("add", {qkv, bias});
    }
    // [B, heads, S, size / heads], or K transposed: [B, heads, size / heads, S].
    auto per_head = [&](int64_t begin, int64_t size, bool transposed) {
      Value part = call("slice", {qkv}, slice_along(qkv->shape, 2, begin, begin + size));
      part = call("reshape", {part}, reshape_attrs({batch, seq, heads, size / heads}));
      return call("transpose", {part},
                  transpose_attrs(transposed ? std::vector<int64_t>{0, 2, 3, 1}
                                             : std::vector<int64_t>{0, 2, 1, 3}));
    };
    Value q = per_head(0, sizes[0], false), kt = per_head(sizes[0], sizes[1], true),
          v = per_head(sizes[0] + sizes[1], sizes[2], false);
    const double scale =
        attr_float(n, "scale", 0) != 0
            ? attr_float(n, "scale", 0)
            : static_cast<double>(1.0F / std::sqrt(static_cast<float>(sizes[0] / heads)));
    Value scores = call("multiply", {call("nn.matmul", {q, kt}),
                                     scalar_constant(x->dtype, scale, n.name() + ".scale")});
    // The keys the mask leaves open ([B, 1, S or 1, S], bool).
    Value keep;
    auto both = [&](const Value& k) { keep = keep ? call("logical_and", {keep, k}) : k; };
    auto iota = [&](std::vector<int64_t> shape, bool rows) {  // each position's row or column
      te::NDArray a(DataType::int32(), shape);
      for (int64_t i = 0; i < a.size(); ++i) {
        a.set(i, static_cast<double>(rows ? i / shape.back() % seq : i % shape.back()));
      }
      return graph::constant(std::move(a), n.name() + (rows ? ".rows" : ".columns"));
    };
    if (Value mask = optional(3)) {
      TT_CHECK(mask->dtype == DataType::int32(), kInvalidArgument, "its mask_index is ",
               mask->dtype.str(), "; it must be int32");
      auto open_above_zero = [&](std::vector<int64_t> shape) {  // a raw mask's keys
        return call("greater", {call("reshape", {mask}, reshape_attrs(std::move(shape))),
                                scalar_constant(DataType::int32(), 0, n.name() + ".zero")});
      };
      if (mask->shape == std::vector<int64_t>{batch}) {  // lengths: right padding
        both(call("less", {iota({1, 1, 1, seq}, false),
                           call("reshape", {mask}, reshape_attrs({batch, 1, 1, 1}))}));
      } else if (mask->shape == std::vector<int64_t>{2 * batch}) {  // ends, then starts
        auto half = [&](int64_t k) {
          return call(
              "reshape",
              {call("slice", {mask}, slice_along(mask->shape, 0, k * batch, (k + 1) * batch))},
              reshape_attrs({batch, 1, 1, 1}));
        };
        Value column = iota({1, 1, 1, seq}, false);
        both(call("less", {column, half(0)}));
        both(call("greater_equal", {column, half(1)}));
      } else if (mask->shape == (std::vector<int64_t>{batch, seq})) {  // raw: open where > 0
        both(open_above_zero({batch, 1, 1, seq}));
      } else if (mask->shape == (std::vector<int64_t>{batch, seq, seq})) {
        both(open_above_zero({batch, 1, seq, seq}));
      } else if (mask->shape == (std::vector<int64_t>{batch, 1}) ||
                 mask->shape == (std::vector<int64_t>{1, 1})) {
        // ONNX Runtime reads these as no mask.
      } else {
        fail(ErrorKind::kInvalidArgument, "its mask_index is ", shape_text(mask->shape),
             "; supported are [B] (lengths), [2B] (ends and starts), [B, S] and [B, S, S] (0/1) "
             "with B = ",
             batch, " and S = ", seq);
      }
    }
    Value mask_bias;
    if (keep) {
      mask_bias =
          call("where", {keep, scalar_constant(x->dtype, 0, n.name() + ".open"),
                         scalar_constant(x->dtype, attr_float(n, "mask_filter_value", -10000.0),
                                         n.name() + ".filter")});
    }
    if (attr_int(n, "unidirectional", 0) != 0 && seq > 1) {  // causal: no key after the query
      Value causal = call("less_equal", {iota({1, 1, 1, seq}, false), iota({1, 1, seq, 1}, true)});
      Value lowest =
          scalar_constant(x->dtype, std::numeric_limits<float>::lowest(), n.name() + ".lowest");
      mask_bias =
          call("where",
               {causal, mask_bias ? mask_bias : scalar_constant(x->dtype, 0, n.name() + ".open"),
                lowest});
    }
    if (mask_bias) scores = call("add", {scores, mask_bias});
    Value probs = call("nn.softmax", {scores}, axis_attrs(3));
    Value out = call("transpose", {call("nn.matmul", {probs, v})}, transpose_attrs({0, 2, 1, 3}));
    return one(call("reshape", {out}, reshape_attrs({batch, seq, sizes[2]})));
  };
  return handlers_;
}

/// "'a', 'b' and 3 more": the first few of `names`, quoted.
std::string some_names(const std::vector<std::string>& names) {
  constexpr size_t kShown = 6;
  std::vector<std::string> shown;
  for (size_t i = 0; i < names.size() && i < kShown; ++i) shown.push_back("'" + names[i] + "'");
  std::string text = join(shown, ", ");
  if (names.size() > kShown) text += " and " + std::to_string(names.size() - kShown) + " more";
  return text;
}

std::string gap_text(const OnnxGap& g) {
  const size_t n = g.where.size();
  const std::string nodes = std::to_string(n) + (n == 1 ? " node: " : " nodes: ");
  if (g.kind == "operator") {
    return "operator " + g.what + " is not supported (" + nodes + some_names(g.where) + ")";
  }
  if (g.kind == "dtype") {
    return "element type " + g.what + " is not supported (" + supported_types_text() +
           "): " + (n == 1 ? "tensor " : "tensors ") + some_names(g.where);
  }
  if (g.kind == "node") {
    return (n == 1 ? "node " : std::to_string(n) + " nodes ") + some_names(g.where) + " (" +
           g.op_type + "): " + g.what;
  }
  return g.what;  // opset, input, tensor: the message names what it is about
}

std::string gaps_text(const std::vector<OnnxGap>& gaps) {
  std::string text;
  if (gaps.size() == 1) {
    text = gap_text(gaps[0]);
  } else {
    text = "the model uses " + std::to_string(gaps.size()) + " things tensortune does not support:";
    for (const OnnxGap& g : gaps) text += "\n  - " + gap_text(g);
  }
  bool operators =
      std::any_of(gaps.begin(), gaps.end(), [](const OnnxGap& g) { return g.kind == "operator"; });
  if (operators) text += "\nthe supported operators are: " + join(supported_onnx_ops(), ", ");
  return text;
}

std::vector<Value> Importer::pool_by_taps(const onnx::NodeProto& n, const Value& x, bool is_max,
                                          const std::vector<int64_t>& kernel) {
  const size_t rank = x->shape.size(), k = rank - 2;
  const std::vector<int64_t> in(x->shape.begin() + 2, x->shape.end());
  const bool ceil_mode = attr_int(n, "ceil_mode", 0) != 0;
  const Window w = window_of(n, in, kernel, ceil_mode);
  // Half data sums in float32, as every other sum of a half model does.
  const bool half = x->dtype.is_float() && x->dtype.bits() == 16;
  const DataType t = half && !is_max ? DataType::float32() : x->dtype;
  Value data = t == x->dtype ? x : make("cast", {x}, cast_attrs(t), n);
  // Padding a max pool never picks: the type's lowest value.
  double lowest = 0;
  if (is_max) {
    if (t.is_float()) {
      lowest = t == DataType::float16()    ? -65504.0
               : t == DataType::bfloat16() ? -0x1.fep127  // bits 0xff7f
               : t == DataType::float64()  ? std::numeric_limits<double>::lowest()
                                           : std::numeric_limits<float>::lowest();
    } else if (t.is_int()) {
      lowest = -std::ldexp(1.0, t.bits() - 1);
    }
  }
  auto p = make_node<te::PadAttrsNode>();
  p->before.assign(rank, 0);
  p->after.assign(rank, 0);
  p->value = lowest;
  bool padded = false;
  for (size_t d = 0; d < k; ++d) {
    const int64_t needed = (w.out[d] - 1) * w.strides[d] + (w.kernel[d] - 1) * w.dilations[d] + 1;
    p->before[d + 2] = w.begin[d];
    p->after[d + 2] = std::max<int64_t>(0, needed - in[d] - w.begin[d]);
    padded = padded || p->before[d + 2] > 0 || p->after[d + 2] > 0;
  }
  if (padded) data = make("pad", {data}, te::Attrs(attrs(std::move(p))), n);
  const bool want_indices = is_max && n.output_size() > 1 && !n.output(1).empty();
  const bool column_major = attr_int(n, "storage_order", 0) != 0;
  int64_t taps = 1, out_count = 1;
  for (size_t d = 0; d < k; ++d) {
    taps *= w.kernel[d];
    out_count *= w.out[d];
  }
  TT_CHECK(taps <= 1024, kInvalidArgument, "a window of ", taps,
           " elements is too large for a pool of this kind (at most 1024)");
  // Where in its channel's data tap `at` reads, for each output position
  // (row-major, or column-major with storage_order 1); padding gets 0, which
  // never wins. Ties go to the first tap, as in ONNX Runtime.
  auto tap_index = [&](const std::vector<int64_t>& at, int64_t tap) {
    te::NDArray where(DataType::int64(), w.out);
    for (int64_t o = 0; o < out_count; ++o) {
      int64_t flat = 0, stride = 1, rest = o;
      std::vector<int64_t> pos(k);
      bool inside = true;
      for (int64_t d = static_cast<int64_t>(k) - 1; d >= 0; --d) {
        const auto u = static_cast<size_t>(d);
        pos[u] = (rest % w.out[u]) * w.strides[u] - w.begin[u] + at[u] * w.dilations[u];
        rest /= w.out[u];
        inside = inside && pos[u] >= 0 && pos[u] < in[u];
      }
      for (size_t e = 0; e < k; ++e) {
        const size_t d = column_major ? e : k - 1 - e;
        flat += pos[d] * stride;
        stride *= in[d];
      }
      where.set_int(o, inside ? flat : 0);
    }
    return graph::constant(std::move(where), n.name() + ".tap" + std::to_string(tap));
  };
  Value best, best_index;
  for (int64_t tap = 0; tap < taps; ++tap) {
    std::vector<int64_t> at(k);
    for (int64_t rest = tap, d = static_cast<int64_t>(k) - 1; d >= 0; --d) {
      at[static_cast<size_t>(d)] = rest % w.kernel[static_cast<size_t>(d)];
      rest /= w.kernel[static_cast<size_t>(d)];
    }
    auto sl = make_node<te::SliceAttrsNode>();
    sl->begin.assign(rank, 0);
    sl->end = data->shape;
    sl->strides.assign(rank, 1);
    for (size_t d = 0; d < k; ++d) {
      sl->begin[d + 2] = at[d] * w.dilations[d];
      sl->end[d + 2] = sl->begin[d + 2] + (w.out[d] - 1) * w.strides[d] + 1;
      sl->strides[d + 2] = w.strides[d];
    }
    Value v = make("slice", {data}, te::Attrs(attrs(std::move(sl))), n);
    if (want_indices) {
      Value index = tap_index(at, tap);
      best_index =
          !best ? index
                : make("where", {make("greater", {v, best}, te::Attrs(), n), index, best_index},
                       te::Attrs(), n);
    }
    if (!best) {
      best = v;
    } else {
      best = make(is_max ? "maximum" : "add", {best, v}, te::Attrs(), n);
    }
  }
  std::vector<Value> out;
  if (is_max) {
    out.push_back(best);
  } else {
    // Divide by the positions each window covers: inside the data, or also
    // inside the declared padding with count_include_pad (never the part a
    // ceil_mode window hangs over).
    const bool include_pad = attr_int(n, "count_include_pad", 0) != 0;
    te::NDArray count(t, w.out);
    for (int64_t o = 0; o < out_count; ++o) {
      double c = 1;
      for (int64_t rest = o, d = static_cast<int64_t>(k) - 1; d >= 0; --d) {
        const auto u = static_cast<size_t>(d);
        const int64_t start = (rest % w.out[u]) * w.strides[u] - w.begin[u];
        rest /= w.out[u];
        const int64_t low = include_pad ? -w.begin[u] : 0;
        const int64_t high = include_pad ? in[u] + w.end[u] : in[u];
        int64_t covered = 0;
        for (int64_t j = 0; j < w.kernel[u]; ++j) {
          const int64_t q = start + j * w.dilations[u];
          covered += q >= low && q < high;
        }
        c *= static_cast<double>(covered);
      }
      count.set(o, c);
    }
    Value mean = make("divide", {best, graph::constant(std::move(count), n.name() + ".count")},
                      te::Attrs(), n);
    out.push_back(mean->dtype == x->dtype ? mean : make("cast", {mean}, cast_attrs(x->dtype), n));
  }
  if (want_indices) {
    // Each channel's data starts (n * C + c) * (its extent) into the input.
    int64_t channel = 1;
    for (int64_t d : in) channel *= d;
    std::vector<int64_t> base_shape(rank, 1);
    base_shape[0] = x->shape[0];
    base_shape[1] = x->shape[1];
    te::NDArray base(DataType::int64(), base_shape);
    for (int64_t c = 0; c < x->shape[0] * x->shape[1]; ++c) base.set_int(c, c * channel);
    out.push_back(make("add", {best_index, graph::constant(std::move(base), n.name() + ".base")},
                       te::Attrs(), n));
  }
  return out;
}

Value Importer::conv3d_by_slices(const onnx::NodeProto& n, Value x, const Value& w,
                                 const Window& win, int64_t groups) {
  const int64_t batch = x->shape[0], depth = win.out[0];
  // Depth padding first (zeros); height and width pad in each 2-D convolution.
  if (win.begin[0] > 0 || win.end[0] > 0) {
    auto p = make_node<te::PadAttrsNode>();
    p->before = {0, 0, win.begin[0], 0, 0};
    p->after = {0, 0, win.end[0], 0, 0};
    x = make("pad", {x}, te::Attrs(attrs(std::move(p))), n);
  }
  Value sum;
  for (int64_t kd = 0; kd < win.kernel[0]; ++kd) {
    // The input depths this kernel depth reads, one per output depth,
    // moved next to the batch and folded into it.
    auto sl = make_node<te::SliceAttrsNode>();
    sl->begin = {0, 0, kd * win.dilations[0], 0, 0};
    sl->end = x->shape;
    sl->end[2] = sl->begin[2] + (depth - 1) * win.strides[0] + 1;
    sl->strides = {1, 1, win.strides[0], 1, 1};
    Value planes = make("slice", {x}, te::Attrs(attrs(std::move(sl))), n);
    planes = make("transpose", {planes}, transpose_attrs({0, 2, 1, 3, 4}), n);
    planes = make("reshape", {planes},
                  reshape_attrs({batch * depth, x->shape[1], x->shape[3], x->shape[4]}), n);
    Value wk = make("slice", {w}, slice_along(w->shape, 2, kd, kd + 1), n);
    wk = make("reshape", {wk}, reshape_attrs({w->shape[0], w->shape[1], w->shape[3], w->shape[4]}),
              n);
    auto a = make_node<te::Conv2dAttrsNode>();
    a->strides = {win.strides[1], win.strides[2]};
    a->dilation = {win.dilations[1], win.dilations[2]};
    a->groups = groups;
    a->padding = {win.begin[1], win.begin[2], win.end[1], win.end[2]};
    Value part = make("nn.conv2d", {planes, wk}, te::Attrs(attrs(std::move(a))), n);
    sum = sum ? make("add", {sum, part}, te::Attrs(), n) : part;
  }
  // [batch * depth, O, H, W] back to [batch, O, depth, H, W].
  const std::vector<int64_t>& s = sum->shape;
  Value out = make("reshape", {sum}, reshape_attrs({batch, depth, s[1], s[2], s[3]}), n);
  return make("transpose", {out}, transpose_attrs({0, 2, 1, 3, 4}), n);
}

Value Importer::grid_sample(const onnx::NodeProto& n, const Value& x, const Value& grid) {
  TT_CHECK(x->shape.size() == 4, kInvalidArgument, "samples a ", shape_text(x->shape),
           " input; only 4-D inputs (N, C, H, W) are supported");
  const int64_t batch = x->shape[0], channels = x->shape[1], h = x->shape[2], w = x->shape[3];
  TT_CHECK(grid->shape.size() == 4 && grid->shape[0] == batch && grid->shape[3] == 2,
           kInvalidArgument, "its grid ", shape_text(grid->shape), " must be (", batch,
           ", H_out, W_out, 2) for the input ", shape_text(x->shape));
  TT_CHECK(x->dtype.is_float() && grid->dtype.is_float(), kInvalidArgument, "samples ",
           x->dtype.str(), " at a ", grid->dtype.str(),
           " grid; floating-point types are supported");
  // Opset 20 renamed bilinear and bicubic.
  std::string mode = attr_string(n, "mode", "bilinear");
  if (mode == "linear") mode = "bilinear";
  if (mode == "cubic") mode = "bicubic";
  const std::string padding = attr_string(n, "padding_mode", "zeros");
  const bool align_corners = attr_int(n, "align_corners", 0) != 0;
  TT_CHECK(mode == "bilinear" || mode == "nearest" || mode == "bicubic", kInvalidArgument, "mode '",
           mode, "' is not one of bilinear (linear), nearest, bicubic (cubic)");
  TT_CHECK(padding == "zeros" || padding == "border" || padding == "reflection", kInvalidArgument,
           "padding_mode '", padding, "' is not one of zeros, border, reflection");
  const int64_t out_h = grid->shape[1], out_w = grid->shape[2];
  const DataType f32 = DataType::float32();
  auto k = [&](double v) { return scalar_constant(f32, v, n.name() + ".k"); };
  auto op = [&](const char* name, std::vector<Value> args) {
    return make(name, std::move(args), te::Attrs(), n);
  };
  auto clip = [&](const Value& v, double low, double high) {
    return make("clip", {v}, scalar_attrs(low, high), n);
  };
  Value g = grid->dtype == f32 ? grid : make("cast", {grid}, cast_attrs(f32), n);
  Value data = x->dtype == f32 ? x : make("cast", {x}, cast_attrs(f32), n);
  data = make("reshape", {data}, reshape_attrs({batch, channels, h * w}), n);
  // The grid's x (0) or y (1) in pixels: -1 and 1 are the corner pixels'
  // centres with align_corners, else their outer edges.
  auto unnormalized = [&](int64_t axis, int64_t size) {
    Value c = make("reshape", {make("slice", {g}, slice_along(g->shape, 3, axis, axis + 1), n)},
                   reshape_attrs({batch, out_h, out_w}), n);
    Value scaled =
        op("multiply", {op("add", {c, k(1)}), k(align_corners ? (size - 1) / 2.0 : size / 2.0)});
    return align_corners ? scaled : op("subtract", {scaled, k(0.5)});
  };
  // Reflected at the bounds (the corner centres with align_corners, else
  // the edges) as a triangle wave, then clipped into the image.
  auto reflected = [&](const Value& c, int64_t size) {
    const double low = align_corners ? 0 : -0.5, span = align_corners ? size - 1 : size;
    if (span <= 0) return clip(c, 0, 0);
    Value d = op("abs", {op("subtract", {c, k(low)})});
    Value period = op("floor", {op("divide", {d, k(2 * span)})});
    Value y = op("subtract", {d, op("multiply", {period, k(2 * span)})});
    y = op("where", {op("greater", {y, k(span)}), op("subtract", {k(2 * span), y}), y});
    return clip(op("add", {y, k(low)}), 0, static_cast<double>(size - 1));
  };
  // A coordinate as the padding mode places it before the taps (bilinear,
  // nearest) or each tap's (bicubic).
  auto padded = [&](const Value& c, int64_t size) {
    if (padding == "border") return clip(c, 0, static_cast<double>(size - 1));
    if (padding == "reflection") return reflected(c, size);
    return c;
  };
  // The input at integral coordinates (xi, yi), times `weight`; 0 outside
  // the image.
  auto tap = [&](const Value& xi, const Value& yi, Value weight) {
    Value inside = op("logical_and",
                      {op("logical_and", {op("greater_equal", {xi, k(0)}),
                                          op("less_equal", {xi, k(static_cast<double>(w - 1))})}),
                       op("logical_and", {op("greater_equal", {yi, k(0)}),
                                          op("less_equal", {yi, k(static_cast<double>(h - 1))})})});
    weight = op("where", {inside, weight, k(0)});
    Value index =
        op("add",
           {op("multiply", {clip(yi, 0, static_cast<double>(h - 1)), k(static_cast<double>(w))}),
            clip(xi, 0, static_cast<double>(w - 1))});
    index = make("cast", {index}, cast_attrs(DataType::int64()), n);
    index = make("reshape", {index}, reshape_attrs({batch, 1, out_h * out_w}), n);
    index = make("expand", {index}, reshape_attrs({batch, channels, out_h * out_w}), n);
    Value picked = make("reshape", {make("gather_elements", {data, index}, axis_attrs(2), n)},
                        reshape_attrs({batch, channels, out_h, out_w}), n);
    return op("multiply",
              {picked, make("reshape", {weight}, reshape_attrs({batch, 1, out_h, out_w}), n)});
  };
  Value ix = unnormalized(0, w), iy = unnormalized(1, h);
  Value sum;
  auto add = [&](Value v) { sum = sum ? op("add", {sum, v}) : v; };
  if (mode == "nearest") {
    // Ties to even, as std::nearbyint.
    add(tap(op("round", {padded(ix, w)}), op("round", {padded(iy, h)}), k(1)));
  } else if (mode == "bilinear") {
    ix = padded(ix, w);
    iy = padded(iy, h);
    Value x0 = op("floor", {ix}), y0 = op("floor", {iy});
    Value fx = op("subtract", {ix, x0}), fy = op("subtract", {iy, y0});
    Value gx = op("subtract", {k(1), fx}), gy = op("subtract", {k(1), fy});
    Value x1 = op("add", {x0, k(1)}), y1 = op("add", {y0, k(1)});
    add(tap(x0, y0, op("multiply", {gx, gy})));
    add(tap(x1, y0, op("multiply", {fx, gy})));
    add(tap(x0, y1, op("multiply", {gx, fy})));
    add(tap(x1, y1, op("multiply", {fx, fy})));
  } else {
    // Keys' cubic convolution with A = -0.75 over the 4 x 4 taps around
    // the point; each tap placed by the padding mode.
    auto weights = [&](const Value& t) {
      const double a = -0.75;
      auto near = [&](const Value& d) {  // |d| <= 1
        return op(
            "add",
            {op("multiply",
                {op("multiply", {op("subtract", {op("multiply", {k(a + 2), d}), k(a + 3)}), d}),
                 d}),
             k(1)});
      };
      auto far = [&](const Value& d) {  // 1 < |d| < 2
        Value p = op(
            "add",
            {op("multiply", {op("subtract", {op("multiply", {k(a), d}), k(5 * a)}), d}), k(8 * a)});
        return op("subtract", {op("multiply", {p, d}), k(4 * a)});
      };
      return std::vector<Value>{far(op("add", {t, k(1)})), near(t), near(op("subtract", {k(1), t})),
                                far(op("subtract", {k(2), t}))};
    };
    Value x0 = op("floor", {ix}), y0 = op("floor", {iy});
    std::vector<Value> wx = weights(op("subtract", {ix, x0})),
                       wy = weights(op("subtract", {iy, y0}));
    for (int dy = 0; dy < 4; ++dy) {
      Value yi = padded(op("add", {y0, k(dy - 1)}), h);
      for (int dx = 0; dx < 4; ++dx) {
        Value xi = padded(op("add", {x0, k(dx - 1)}), w);
        add(tap(xi, yi,
                op("multiply", {wx[static_cast<size_t>(dx)], wy[static_cast<size_t>(dy)]})));
      }
    }
  }
  return x->dtype == f32 ? sum : make("cast", {sum}, cast_attrs(x->dtype), n);
}

Value Importer::roi_align(const onnx::NodeProto& n, const Value& x, const Value& rois,
                          const Value& batch_indices) {
  TT_CHECK(x->shape.size() == 4, kInvalidArgument, "pools a ", shape_text(x->shape),
           " input; only 4-D inputs (N, C, H, W) are supported");
  TT_CHECK(x->dtype.is_float() && rois->dtype.is_float(), kInvalidArgument, "pools ",
           x->dtype.str(), " over ", rois->dtype.str(),
           " boxes; floating-point types are supported");
  TT_CHECK(rois->shape.size() == 2 && rois->shape[1] == 4, kInvalidArgument, "its rois ",
           shape_text(rois->shape), " must be (num_rois, 4)");
  const int64_t num_rois = rois->shape[0];
  TT_CHECK(
      batch_indices->shape == std::vector<int64_t>{num_rois} && batch_indices->dtype.is_integer(),
      kInvalidArgument, "its batch_indices ", shape_text(batch_indices->shape), " ",
      batch_indices->dtype.str(), " must be integers of shape (", num_rois, ")");
  const std::string mode = attr_string(n, "mode", "avg");
  TT_CHECK(mode == "avg" || mode == "max", kInvalidArgument, "mode '", mode,
           "' is not one of avg, max");
  // Opset 10's RoiAlign had no coordinate_transformation_mode and behaved
  // as output_half_pixel; opset 16 made half_pixel the default.
  const std::string coord = attr_string(n, "coordinate_transformation_mode",
                                        opset_ >= 16 ? "half_pixel" : "output_half_pixel");
  TT_CHECK(coord == "half_pixel" || coord == "output_half_pixel", kInvalidArgument,
           "coordinate_transformation_mode '", coord,
           "' is not one of half_pixel, output_half_pixel");
  const int64_t out_h = attr_int(n, "output_height", 1), out_w = attr_int(n, "output_width", 1);
  TT_CHECK(out_h > 0 && out_w > 0, kInvalidArgument, "output_height ", out_h, " and output_width ",
           out_w, " must be positive");
  const int64_t ratio = attr_int(n, "sampling_ratio", 0);
  // The adaptive grid, ceil(box size / output size) samples per bin, is a
  // shape that depends on the boxes' values.
  TT_CHECK(ratio > 0, kInvalidArgument,
           "sampling_ratio 0 (a grid that adapts to each box's size) is not supported; "
           "give a positive sampling_ratio");
  const double scale = attr_float(n, "spatial_scale", 1.0);
  const bool half_pixel = coord == "half_pixel";
  const int64_t batch = x->shape[0], channels = x->shape[1], h = x->shape[2], w = x->shape[3];
  const DataType f32 = DataType::float32();
  auto k = [&](double v) { return scalar_constant(f32, v, n.name() + ".k"); };
  auto op = [&](const char* name, std::vector<Value> args) {
    return make(name, std::move(args), te::Attrs(), n);
  };
  auto reshape = [&](const Value& v, std::vector<int64_t> shape) {
    return make("reshape", {v}, reshape_attrs(std::move(shape)), n);
  };
  Value boxes = rois->dtype == f32 ? rois : make("cast", {rois}, cast_attrs(f32), n);
  // Sample coordinates along one axis of every box: [R, bins, samples] for
  // the box corners in columns `begin` and `begin + 2` of rois.
  auto samples = [&](int64_t begin, int64_t bins) {
    auto corner = [&](int64_t column) {
      Value c = reshape(make("slice", {boxes}, slice_along(boxes->shape, 1, column, column + 1), n),
                        {num_rois, 1, 1});
      c = op("multiply", {c, k(scale)});
      return half_pixel ? op("subtract", {c, k(0.5)}) : c;
    };
    Value start = corner(begin), extent = op("subtract", {corner(begin + 2), start});
    if (!half_pixel) extent = op("maximum", {extent, k(1)});
    Value bin = op("divide", {extent, k(static_cast<double>(bins))});
    te::NDArray bin_index(f32, {1, bins, 1}), sample_offset(f32, {1, 1, ratio});
    for (int64_t i = 0; i < bins; ++i) bin_index.set(i, static_cast<double>(i));
    for (int64_t i = 0; i < ratio; ++i) sample_offset.set(i, static_cast<double>(i) + 0.5);
    Value first = op(
        "add",
        {start, op("multiply", {graph::constant(std::move(bin_index), n.name() + ".bins"), bin})});
    return op(
        "add",
        {first,
         op("divide", {op("multiply",
                          {graph::constant(std::move(sample_offset), n.name() + ".samples"), bin}),
                       k(static_cast<double>(ratio))})});
  };
  // One axis's interpolation: whether a sample counts (a sample more than
  // one pixel outside contributes 0), the low and high pixel, and the
  // high pixel's weight, with the sample clamped into the image as ORT does.
  struct Axis {
    Value inside, low, high, frac;
  };
  auto axis = [&](const Value& c, int64_t size) {
    Value inside = op("logical_and", {op("greater_equal", {c, k(-1)}),
                                      op("less_equal", {c, k(static_cast<double>(size))})});
    Value clamped = make("clip", {c}, scalar_attrs(0, static_cast<double>(size - 1)), n);
    Value low = op("floor", {clamped});
    Value high = op("minimum", {op("add", {low, k(1)}), k(static_cast<double>(size - 1))});
    return Axis{inside, low, high, op("subtract", {clamped, low})};
  };
  // [R, out_h, 1, ratio, 1] and [R, 1, out_w, 1, ratio]: they broadcast to
  // every sample of every bin.
  Axis ys = axis(reshape(samples(1, out_h), {num_rois, out_h, 1, ratio, 1}), h);
  Axis xs = axis(reshape(samples(0, out_w), {num_rois, 1, out_w, 1, ratio}), w);
  Value inside = make("cast", {op("logical_and", {ys.inside, xs.inside})}, cast_attrs(f32), n);
  // The pixels as rows of [N * H * W, C], so each tap gathers whole rows.
  Value data = x->dtype == f32 ? x : make("cast", {x}, cast_attrs(f32), n);
  data = reshape(make("transpose", {data}, transpose_attrs({0, 2, 3, 1}), n),
                 {batch * h * w, channels});
  Value image = make("cast", {batch_indices}, cast_attrs(DataType::int64()), n);
  image = op("multiply",
             {reshape(image, {num_rois, 1, 1, 1, 1}),
              scalar_constant(DataType::int64(), static_cast<double>(h * w), n.name() + ".image")});
  auto tap = [&](const Value& yi, const Value& xi, const Value& weight) {
    Value pixel = op("add", {op("multiply", {yi, k(static_cast<double>(w))}), xi});
    pixel = op("add", {image, make("cast", {pixel}, cast_attrs(DataType::int64()), n)});
    Value rows = make("take", {data, pixel}, axis_attrs(0), n);  // [R, oh, ow, ry, rx, C]
    return op("multiply", {rows, reshape(op("multiply", {weight, inside}),
                                         {num_rois, out_h, out_w, ratio, ratio, 1})});
  };
  Value ly = ys.frac, lx = xs.frac;
  Value hy = op("subtract", {k(1), ly}), hx = op("subtract", {k(1), lx});
  std::vector<Value> taps = {tap(ys.low, xs.low, op("multiply", {hy, hx})),
                             tap(ys.low, xs.high, op("multiply", {hy, lx})),
                             tap(ys.high, xs.low, op("multiply", {ly, hx})),
                             tap(ys.high, xs.high, op("multiply", {ly, lx}))};
  const char* combine = mode == "avg" ? "add" : "maximum";
  Value value = op(combine, {op(combine, {taps[0], taps[1]}), op(combine, {taps[2], taps[3]})});
  auto r = make_node<te::ReduceAttrsNode>();
  r->axes = {3, 4};
  r->keepdims = false;
  value = make(mode == "avg" ? "reduce_mean" : "reduce_max", {value},
               te::Attrs(attrs(std::move(r))), n);  // [R, oh, ow, C]
  value = make("transpose", {value}, transpose_attrs({0, 3, 1, 2}), n);
  return x->dtype == f32 ? value : make("cast", {value}, cast_attrs(x->dtype), n);
}

namespace {

/// Whether `v` holds int8 or uint8 values: what the integer products take
/// (DequantizeLinear also takes int32, a bias).
bool holds_bytes(const Value& v) {
  return v->dtype == DataType::int_(8) || v->dtype == DataType::uint(8);
}

}  // namespace

std::optional<std::pair<Importer::Dequantization, Importer::Dequantization>>
Importer::integer_operands(const std::vector<Value>& in, int64_t channels, int64_t axis) const {
  auto x = dequantized_.find(in[0].get()), w = dequantized_.find(in[1].get());
  if (x == dequantized_.end() || w == dequantized_.end() || !holds_bytes(x->second.q) ||
      !holds_bytes(w->second.q) || !constant_of(w->second.q)) {
    return std::nullopt;
  }
  auto elements = [](const Value& v) {
    return checked_elements(v->shape, "a scale or zero point");
  };
  auto per_channel = [&](const Value& v) {
    return elements(v) == 1 || (elements(v) == channels && w->second.axis == axis);
  };
  const Dequantization &data = x->second, &weight = w->second;
  if (!data.scale || !weight.scale || elements(data.scale) != 1 ||
      (data.zero_point && elements(data.zero_point) != 1) || !per_channel(weight.scale) ||
      (weight.zero_point && !per_channel(weight.zero_point))) {
    return std::nullopt;
  }
  return std::pair{data, weight};
}

Value Importer::scales_product(const Dequantization& data, const Dequantization& weight,
                               const onnx::NodeProto& n) {
  const int64_t channels = checked_elements(weight.scale->shape, "a scale");
  return make("multiply",
              {make("reshape", {data.scale}, reshape_attrs({}), n),
               make("reshape", {weight.scale}, reshape_attrs({channels}), n)},
              te::Attrs(), n);
}

Value Importer::integer_qdq_conv(const onnx::NodeProto& n, const std::vector<Value>& in) {
  if (in.size() < 2 || !in[0] || !in[1] || in[0]->shape.size() != 4) return Value();
  auto operands = integer_operands(in, in[1]->shape[0], 0);
  if (!operands) return Value();
  const auto& [x, w] = *operands;
  Value acc = handlers_.at("ConvInteger")(n, {x.q, w.q, x.zero_point, w.zero_point})[0];
  Value scale = scales_product(x, w, n);
  Value out = make("multiply",
                   {make("cast", {acc}, cast_attrs(DataType::float32()), n),
                    make("reshape", {scale}, reshape_attrs({1, scale->shape[0], 1, 1}), n)},
                   te::Attrs(), n);
  if (in.size() > 2 && in[2]) out = make("nn.bias_add", {out, in[2]}, axis_attrs(1), n);
  return out;
}

Value Importer::integer_qdq_matmul(const onnx::NodeProto& n, const std::vector<Value>& in) {
  if (in.size() < 2 || !in[0] || !in[1] || in[0]->shape.size() < 2 || in[1]->shape.size() != 2 ||
      holds_nothing(in[0]) || holds_nothing(in[1])) {
    return Value();
  }
  auto operands = integer_operands(in, in[1]->shape[1], 1);
  if (!operands) return Value();
  const auto& [x, w] = *operands;
  // MatMulInteger takes A's zero point as one value, B's per column or one.
  auto flat = [&](const Value& v, bool scalar) {
    if (!v) return Value();
    std::vector<int64_t> shape;
    if (!scalar) shape.push_back(checked_elements(v->shape, "a zero point"));
    return make("reshape", {v}, reshape_attrs(std::move(shape)), n);
  };
  Value acc = handlers_.at("MatMulInteger")(
      n, {x.q, w.q, flat(x.zero_point, true), flat(w.zero_point, false)})[0];
  return make("multiply",
              {make("cast", {acc}, cast_attrs(DataType::float32()), n), scales_product(x, w, n)},
              te::Attrs(), n);
}

Value Importer::conv_transpose3d(const onnx::NodeProto& n, const Value& x, const Value& w) {
  TT_CHECK(w->shape.size() == 5 && w->shape[0] == x->shape[1], kInvalidArgument, "the weight ",
           shape_text(w->shape), " does not take the data ", shape_text(x->shape));
  const auto* c = constant_of(w);
  TT_CHECK(c, kInvalidArgument, "its weight must be a constant for a 3-D transposed convolution");
  const int64_t groups = attr_int(n, "group", 1);
  TT_CHECK(groups >= 1 && x->shape[1] % groups == 0, kInvalidArgument, "group ", groups,
           " does not divide the ", x->shape[1], " input channels");
  const std::vector<int64_t> strides = sized_ints(n, "strides", 1, 3),
                             dilations = sized_ints(n, "dilations", 1, 3),
                             extra = sized_ints(n, "output_padding", 0, 3);
  std::vector<int64_t> pads = sized_ints(n, "pads", 0, 6);
  std::vector<int64_t> given = attr_ints(n, "output_shape", {});
  if (given.size() > 3) given.erase(given.begin(), given.end() - 3);
  TT_CHECK(given.empty() || given.size() == 3, kInvalidArgument, "output_shape has ", given.size(),
           " spatial values");
  const std::string auto_pad = attr_string(n, "auto_pad", "NOTSET");
  Window win;
  for (size_t d = 0; d < 3; ++d) {
    const int64_t in = x->shape[2 + d], span = (w->shape[2 + d] - 1) * dilations[d] + 1;
    const int64_t natural = strides[d] * (in - 1) + extra[d] + span;
    int64_t wanted = !given.empty()                                         ? given[d]
                     : auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER" ? in * strides[d]
                                                                            : -1;
    if (auto_pad == "VALID") pads[d] = pads[d + 3] = 0;
    if (wanted >= 0) {
      const int64_t total = std::max<int64_t>(0, natural - wanted);
      pads[d] = auto_pad == "SAME_UPPER" ? total / 2 : total - total / 2;
      pads[d + 3] = total - pads[d];
    } else {
      wanted = natural - pads[d] - pads[d + 3];
    }
    TT_CHECK(wanted >= 1, kInvalidArgument, "the output would be empty");
    // The data spread out by the stride is convolved with the flipped
    // kernel, padded by span - 1 - pad before and by what the output's
    // extent needs after (negative: cropped).
    win.kernel.push_back(w->shape[2 + d]);
    win.strides.push_back(1);
    win.dilations.push_back(dilations[d]);
    win.begin.push_back(span - 1 - pads[d]);
    win.end.push_back(0);  // once the spread extent is known, below
    win.out.push_back(wanted);
  }
  // Spread: a unit axis after each spatial axis, padded to the stride,
  // merged back, the trailing zeros cut.
  Value spread = x;
  for (size_t d = 0; d < 3; ++d) {
    if (strides[d] == 1) continue;
    const size_t axis = 2 + d;
    std::vector<int64_t> shape = spread->shape;
    shape.insert(shape.begin() + static_cast<std::ptrdiff_t>(axis) + 1, 1);
    Value v = make("reshape", {spread}, reshape_attrs(shape), n);
    auto p = make_node<te::PadAttrsNode>();
    p->before.assign(shape.size(), 0);
    p->after.assign(shape.size(), 0);
    p->after[axis + 1] = strides[d] - 1;
    v = make("pad", {v}, te::Attrs(attrs(std::move(p))), n);
    std::vector<int64_t> merged = spread->shape;
    merged[axis] *= strides[d];
    v = make("reshape", {v}, reshape_attrs(merged), n);
    spread = make("slice", {v}, slice_along(merged, axis, 0, merged[axis] - strides[d] + 1), n);
  }
  // Padding below zero is a crop, done first; what is left pads in the
  // convolution.
  auto cut = make_node<te::SliceAttrsNode>();
  cut->begin.assign(5, 0);
  cut->end = spread->shape;
  cut->strides.assign(5, 1);
  bool crop = false;
  for (size_t d = 0; d < 3; ++d) {
    // The padded extent the output needs: (out - 1) + span.
    const int64_t span = (win.kernel[d] - 1) * win.dilations[d] + 1;
    const int64_t after = win.out[d] - 1 + span - win.begin[d] - spread->shape[2 + d];
    win.end[d] = after;
    if (win.begin[d] < 0) {
      cut->begin[2 + d] = -win.begin[d];
      win.begin[d] = 0;
      crop = true;
    }
    if (win.end[d] < 0) {
      cut->end[2 + d] += win.end[d];
      win.end[d] = 0;
      crop = true;
    }
  }
  if (crop) spread = make("slice", {spread}, te::Attrs(attrs(std::move(cut))), n);
  // The kernel [C, O/g, k...] as a convolution's [O, C/g, k...], flipped.
  const te::NDArray& k = c->data.array();
  const int64_t in_c = w->shape[0], per_out = w->shape[1], per_in = in_c / groups;
  const int64_t kd = w->shape[2], kh = w->shape[3], kw = w->shape[4], taps = kd * kh * kw;
  te::NDArray flipped(k.dtype(), {per_out * groups, per_in, kd, kh, kw});
  for (int64_t ci = 0; ci < in_c; ++ci) {
    const int64_t g = ci / per_in;
    for (int64_t o = 0; o < per_out; ++o) {
      for (int64_t t = 0; t < taps; ++t) {
        flipped.set(((g * per_out + o) * per_in + ci % per_in) * taps + (taps - 1 - t),
                    k.get((ci * per_out + o) * taps + t));
      }
    }
  }
  return conv3d_by_slices(n, spread, graph::constant(std::move(flipped), n.name() + ".flipped"),
                          win, groups);
}

Value Importer::centred(const Value& v, const Value& zero_point, const onnx::NodeProto& n) {
  auto wide = [&](const Value& u) {
    return u->dtype == DataType::int32() ? u : make("cast", {u}, cast_attrs(DataType::int32()), n);
  };
  return zero_point ? make("subtract", {wide(v), wide(zero_point)}, te::Attrs(), n) : wide(v);
}

/// The recurrent operators unrolled: the input projection of every time step
/// is one matmul over the whole sequence ([seq * batch, I] x [I, G * H], G
/// gates), and each step adds its state's projection ([batch, H] x [H, G * H])
/// and applies the gates. Steps of equal shape are one tuning task. A
/// sequence length shorter than the sequence holds the state and writes
/// zeros past it, as ONNX says. An LSTM's bias is added to each step's
/// gates after the state's product, in ONNX Runtime's order. Quantized
/// (DynamicQuantizeLSTM), the input and each state are quantized to uint8
/// at run time and each product is in int32, scaled back.
std::vector<Value> Importer::recurrent(const onnx::NodeProto& n, const std::vector<Value>& in,
                                       Recurrent kind, const QuantizedRecurrence* quantized) {
  const int gates = kind == Recurrent::kLstm ? 4 : kind == Recurrent::kGru ? 3 : 1;
  const int acts_per_dir = kind == Recurrent::kLstm ? 3 : kind == Recurrent::kGru ? 2 : 1;
  auto call = [&](const std::string& op, std::vector<Value> args, te::Attrs a = te::Attrs()) {
    return make(op, std::move(args), std::move(a), n);
  };
  auto input = [&](size_t k, const char* what) -> Value {
    TT_CHECK(k < in.size() && in[k], kInvalidArgument, "needs its ", what, " input");
    return in[k];
  };
  auto optional = [&](size_t k) { return k < in.size() ? in[k] : Value(); };
  Value x = input(0, "X"), w = input(1, "W"), r = input(2, "R");
  const std::string direction = attr_string(n, "direction", "forward");
  TT_CHECK(direction == "forward" || direction == "reverse" || direction == "bidirectional",
           kInvalidArgument, "direction '", direction, "' (forward, reverse, bidirectional)");
  const int64_t dirs = direction == "bidirectional" ? 2 : 1;
  const bool batch_first = attr_int(n, "layout", 0) == 1;
  TT_CHECK(x->shape.size() == 3, kInvalidArgument, "needs X of rank 3, got ", shape_text(x->shape));
  if (batch_first) x = call("transpose", {x}, transpose_attrs({1, 0, 2}));
  const int64_t seq = x->shape[0], batch = x->shape[1], isize = x->shape[2];
  const size_t gate_axis = quantized ? 2 : 1;  // W: [dirs, G * H, K], or quantized [dirs, K, G * H]
  const int64_t hidden =
      attr_int(n, "hidden_size", w->shape.size() == 3 ? w->shape[gate_axis] / gates : 0);
  const int64_t gh = gates * hidden;
  TT_CHECK(hidden > 0, kInvalidArgument, "needs hidden_size");
  auto check_shape = [&](const Value& v, std::vector<int64_t> want, const char* what) {
    TT_CHECK(v->shape == want, kInvalidArgument, "its ", what, " is ", shape_text(v->shape),
             "; it must be ", shape_text(want));
  };
  if (quantized) {
    TT_CHECK(!batch_first, kInvalidArgument,
             "DynamicQuantizeLSTM has no layout 1 (its X is [seq, batch, input])");
    check_shape(w, {dirs, isize, gh}, "W");
    check_shape(r, {dirs, hidden, gh}, "R");
    // Each scale is float32; each zero point of its weights' type.
    const std::tuple<const char*, Value, DataType> params[] = {
        {"W_scale", quantized->w_scale, DataType::float32()},
        {"W_zero_point", quantized->w_zero_point, w->dtype},
        {"R_scale", quantized->r_scale, DataType::float32()},
        {"R_zero_point", quantized->r_zero_point, r->dtype}};
    for (const auto& [what, v, type] : params) {
      TT_CHECK(
          v->shape == std::vector<int64_t>{dirs} || v->shape == (std::vector<int64_t>{dirs, gh}),
          kInvalidArgument, "its ", what, " is ", shape_text(v->shape),
          "; it must be per direction (", shape_text({dirs}), ") or per column (",
          shape_text({dirs, gh}), ")");
      TT_CHECK(v->dtype == type, kInvalidArgument, "its ", what, " is ", v->dtype.str(),
               "; it must be ", type.str());
    }
  } else {
    check_shape(w, {dirs, gh, isize}, "W");
    check_shape(r, {dirs, gh, hidden}, "R");
  }
  const bool input_forget = attr_int(n, "input_forget", 0) != 0;
  const double clip = attr_float(n, "clip", 0);
  const int64_t linear_before_reset = attr_int(n, "linear_before_reset", 0);

  // The activations, per direction: f for the gates, g and h for the
  // candidate and the output (LSTM), as names with their alpha and beta.
  std::vector<std::string> acts;
  if (const auto* a = attr(n, "activations")) {
    for (const auto& name : a->strings()) acts.push_back(name);
  }
  const std::vector<std::string> fallback =
      kind == Recurrent::kRnn   ? std::vector<std::string>{"Tanh"}
      : kind == Recurrent::kGru ? std::vector<std::string>{"Sigmoid", "Tanh"}
                                : std::vector<std::string>{"Sigmoid", "Tanh", "Tanh"};
  if (acts.empty()) {
    for (int64_t d = 0; d < dirs; ++d) acts.insert(acts.end(), fallback.begin(), fallback.end());
  }
  TT_CHECK(static_cast<int64_t>(acts.size()) == acts_per_dir * dirs, kInvalidArgument, "has ",
           acts.size(), " activations; it needs ", acts_per_dir * dirs);
  std::vector<float> alphas, betas;
  if (const auto* a = attr(n, "activation_alpha"))
    alphas.assign(a->floats().begin(), a->floats().end());
  if (const auto* a = attr(n, "activation_beta"))
    betas.assign(a->floats().begin(), a->floats().end());
  auto activate = [&](size_t k, Value v) {
    const std::string& name = acts[k];
    // alpha and beta are listed for the activations that take them, in order.
    auto param = [&](const std::vector<float>& list, double fallback_value) {
      size_t taking = 0;
      for (size_t j = 0; j < k; ++j) {
        taking += acts[j] == "LeakyRelu" || acts[j] == "HardSigmoid" || acts[j] == "Affine";
      }
      return taking < list.size() ? static_cast<double>(list[taking]) : fallback_value;
    };
    if (name == "Sigmoid") return call("sigmoid", {v});
    if (name == "Tanh") return call("tanh", {v});
    if (name == "Relu") return call("relu", {v});
    if (name == "LeakyRelu") return call("leaky_relu", {v}, scalar_attrs(param(alphas, 0.01)));
    if (name == "HardSigmoid") {
      return call("hard_sigmoid", {v}, scalar_attrs(param(alphas, 0.2), param(betas, 0.5)));
    }
    fail(ErrorKind::kInvalidArgument, "activation '", name,
         "' is not supported (Sigmoid, Tanh, Relu, LeakyRelu, HardSigmoid)");
  };
  auto clipped = [&](Value v) {
    return clip > 0 ? call("clip", {v}, scalar_attrs(-clip, clip)) : v;
  };
  auto slice = [&](const Value& v, size_t axis, int64_t begin, int64_t end) {
    return call("slice", {v}, slice_along(v->shape, axis, begin, end));
  };
  auto reshape = [&](const Value& v, std::vector<int64_t> shape) {
    return call("reshape", {v}, reshape_attrs(std::move(shape)));
  };
  auto filled = [&](std::vector<int64_t> shape, double value, const char* what) {
    te::NDArray a(x->dtype, std::move(shape));
    for (int64_t i = 0; i < a.size(); ++i) a.set(i, value);
    return graph::constant(std::move(a), n.name() + what);
  };
  // Direction d's slice of a [dirs, ...] input (batch first: [batch, dirs, ...]).
  auto of_direction = [&](const Value& v, int64_t d, bool state) {
    Value t = state && batch_first ? call("transpose", {v}, transpose_attrs({1, 0, 2})) : v;
    std::vector<int64_t> rest(t->shape.begin() + 1, t->shape.end());
    return reshape(slice(t, 0, d, d + 1), rest);
  };
  // Direction d's input (W) or state (R) weights, made once for every
  // step to read: as they are, or quantized ones in int32 less their zero
  // point, with their scale.
  struct Weights {
    Value matrix, scale;
  };
  auto weights_of = [&](int64_t d, bool state) {
    Value matrix = of_direction(state ? r : w, d, false);
    if (!quantized) return Weights{matrix, Value()};
    auto of = [&](const Value& v) { return of_direction(v, d, false); };
    return Weights{
        centred(matrix, of(state ? quantized->r_zero_point : quantized->w_zero_point), n),
        of(state ? quantized->r_scale : quantized->w_scale)};
  };
  // A product's left operand: as it is, or, quantized as ONNX Runtime
  // quantizes it, to uint8 over its whole range (centred, with its scale).
  struct Operand {
    Value data, scale;
  };
  auto operand = [&](const Value& a) {
    if (!quantized) return Operand{a, Value()};
    std::vector<Value> q = handlers_.at("DynamicQuantizeLinear")(n, {a});
    return Operand{centred(q[0], q[2], n), q[1]};
  };
  // `a` times `weights`: [rows, G * H]; quantized, the int32 product scaled back.
  auto product = [&](const Operand& a, const Weights& weights) {
    if (!quantized) return call("nn.dense", {a.data, weights.matrix});
    Value acc = call("nn.matmul", {a.data, weights.matrix});
    return call("multiply", {call("cast", {acc}, cast_attrs(x->dtype)),
                             call("multiply", {a.scale, weights.scale})});
  };

  Value b = optional(3), lengths = optional(4), h0 = optional(5), c0 = optional(6), p = optional(7);
  if (b) check_shape(b, {dirs, 2 * gh}, "B");
  std::vector<int64_t> state_shape = batch_first ? std::vector<int64_t>{batch, dirs, hidden}
                                                 : std::vector<int64_t>{dirs, batch, hidden};
  if (h0) check_shape(h0, state_shape, "initial_h");
  if (kind == Recurrent::kLstm && c0) check_shape(c0, state_shape, "initial_c");
  if (kind == Recurrent::kLstm && p) check_shape(p, {dirs, 3 * hidden}, "P");
  Value mask_zero;
  if (lengths) {
    check_shape(lengths, {batch}, "sequence_lens");
    lengths = reshape(lengths, {batch, 1});
  }

  std::vector<std::vector<Value>> ys(static_cast<size_t>(seq));  // [t][d]: [batch, hidden]
  std::vector<Value> last_h, last_c;
  Value xs = reshape(x, {seq * batch, isize});
  if (quantized && lengths) {
    // ONNX Runtime quantizes the steps up to the longest length only: the
    // rows after it are zeros (which the range holds anyway).
    te::NDArray step_of_row(lengths->dtype, {seq * batch, 1});
    for (int64_t row = 0; row < seq * batch; ++row) {
      step_of_row.set(row, static_cast<double>(row / batch));
    }
    Value longest = call("reduce_max", {lengths}, whole_reduce_attrs(2));
    Value live =
        call("less", {graph::constant(std::move(step_of_row), n.name() + ".row_step"), longest});
    xs = call("where", {live, xs, scalar_constant(x->dtype, 0, n.name() + ".zero")});
  }
  const Operand xs_operand = operand(xs);   // quantized once for both directions
  auto part = [&](const Value& v, int k) {  // gate k's columns
    return slice(v, v->shape.size() - 1, k * hidden, (k + 1) * hidden);
  };
  for (int64_t d = 0; d < dirs; ++d) {
    const bool reverse = direction == "reverse" || d == 1;
    const size_t act0 = static_cast<size_t>(d * acts_per_dir);
    // Every step's input projection at once, with the biases that add to
    // it (LSTM: added to each step's gates, in ONNX Runtime's order).
    Value xw = product(xs_operand, weights_of(d, false));
    const Weights state_weights = kind == Recurrent::kGru ? Weights() : weights_of(d, true);
    Value recurrent_bias_h;        // GRU with linear_before_reset: Rb_h stays inside r * (...)
    std::vector<Value> lstm_bias;  // per gate
    if (b && kind == Recurrent::kLstm) {
      Value bd = of_direction(b, d, false);
      Value sum = call("add", {slice(bd, 0, 0, gh), slice(bd, 0, gh, 2 * gh)});
      for (int k = 0; k < 4; ++k) lstm_bias.push_back(part(sum, k));
    } else if (b) {
      Value bd = of_direction(b, d, false);
      Value wb = slice(bd, 0, 0, gh), rb = slice(bd, 0, gh, 2 * gh);
      if (kind == Recurrent::kGru && linear_before_reset) {
        recurrent_bias_h = slice(rb, 0, 2 * hidden, gh);
        rb = call("concat", {slice(rb, 0, 0, 2 * hidden), filled({hidden}, 0, ".no_rbh")},
                  axis_attrs(0));
      }
      xw = call("add", {xw, call("add", {wb, rb})});
    }
    Value h = h0 ? of_direction(h0, d, true) : filled({batch, hidden}, 0, ".h0");
    Value c;
    if (kind == Recurrent::kLstm)
      c = c0 ? of_direction(c0, d, true) : filled({batch, hidden}, 0, ".c0");
    std::vector<Value> peepholes;  // input, output, forget
    if (kind == Recurrent::kLstm && p) {
      Value pd = of_direction(p, d, false);
      for (int k = 0; k < 3; ++k) peepholes.push_back(part(pd, k));
    }
    Value one = input_forget ? scalar_constant(x->dtype, 1, n.name() + ".one") : Value();
    // GRU: the update and reset gates' state weights, and the candidate's.
    Value rd = kind == Recurrent::kGru ? of_direction(r, d, false) : Value();
    Value r_zr = kind == Recurrent::kGru ? slice(rd, 0, 0, 2 * hidden) : Value();
    Value r_h = kind == Recurrent::kGru ? slice(rd, 0, 2 * hidden, gh) : Value();
    for (int64_t step = 0; step < seq; ++step) {
      const int64_t t = reverse ? seq - 1 - step : step;
      // Rows t * batch ... of [seq * batch, G * H]: a view, no copy.
      Value xt = slice(xw, 0, t * batch, (t + 1) * batch);
      Value next_h, next_c;
      if (kind == Recurrent::kRnn) {
        next_h = activate(act0, clipped(call("add", {xt, product(operand(h), state_weights)})));
      } else if (kind == Recurrent::kLstm) {
        Value gates_t = call("add", {xt, product(operand(h), state_weights)});
        // Each gate's sum, peephole, then bias, as ONNX Runtime adds them.
        auto gate = [&](int k, const Value& state) {
          Value v = part(gates_t, k);
          if (state && !peepholes.empty())
            v = call("add", {v, call("multiply", {peepholes[static_cast<size_t>(k)], state})});
          return clipped(lstm_bias.empty() ? v
                                           : call("add", {v, lstm_bias[static_cast<size_t>(k)]}));
        };
        // ONNX's gate order: input, output, forget, cell; peepholes input, output, forget.
        Value i = activate(act0, gate(0, c));
        // input_forget couples the gates: f = 1 - i.
        Value f = input_forget ? call("subtract", {one, i}) : activate(act0, gate(2, c));
        Value candidate = activate(act0 + 1, gate(3, Value()));
        next_c = call("add", {call("multiply", {f, c}), call("multiply", {i, candidate})});
        Value o = activate(act0, gate(1, next_c));
        next_h = call("multiply", {o, activate(act0 + 2, next_c)});
      } else {
        Value zr = call("add", {slice(xt, 1, 0, 2 * hidden), call("nn.dense", {h, r_zr})});
        Value z = activate(act0, clipped(slice(zr, 1, 0, hidden)));
        Value reset = activate(act0, clipped(slice(zr, 1, hidden, 2 * hidden)));
        Value xh = slice(xt, 1, 2 * hidden, gh), hh;
        if (linear_before_reset) {
          Value rh = call("nn.dense", {h, r_h});
          if (recurrent_bias_h) rh = call("add", {rh, recurrent_bias_h});
          hh = call("add", {xh, call("multiply", {reset, rh})});
        } else {
          hh = call("add", {xh, call("nn.dense", {call("multiply", {reset, h}), r_h})});
        }
        Value candidate = activate(act0 + 1, clipped(hh));
        // (1 - z) * candidate + z * h
        next_h = call("add", {candidate, call("multiply", {z, call("subtract", {h, candidate})})});
      }
      Value y = next_h;
      if (lengths) {
        // Past a batch entry's length the state holds and the output is zero.
        Value step = scalar_constant(lengths->dtype, static_cast<double>(t), n.name() + ".t");
        Value live = call("less", {step, lengths});
        if (!mask_zero) mask_zero = scalar_constant(x->dtype, 0, n.name() + ".zero");
        y = call("where", {live, next_h, mask_zero});
        next_h = call("where", {live, next_h, h});
        if (next_c) next_c = call("where", {live, next_c, c});
      }
      h = next_h;
      c = next_c;
      ys[static_cast<size_t>(t)].push_back(y);
    }
    last_h.push_back(reshape(h, {1, batch, hidden}));
    if (c) last_c.push_back(reshape(c, {1, batch, hidden}));
  }
  // Y [seq, dirs, batch, hidden]; Y_h and Y_c [dirs, batch, hidden]; batch
  // first: [batch, seq, dirs, hidden] and [batch, dirs, hidden].
  auto joined = [&](std::vector<Value> parts, int64_t axis) {
    return parts.size() == 1 ? parts[0] : call("concat", std::move(parts), axis_attrs(axis));
  };
  std::vector<Value> steps;
  for (auto& per_dir : ys) {
    std::vector<Value> parts;
    for (auto& y : per_dir) parts.push_back(reshape(y, {1, 1, batch, hidden}));
    steps.push_back(joined(std::move(parts), 1));
  }
  Value y_all = joined(std::move(steps), 0);
  Value y_h = joined(last_h, 0), y_c = last_c.empty() ? Value() : joined(last_c, 0);
  if (batch_first) {
    y_all = call("transpose", {y_all}, transpose_attrs({2, 0, 1, 3}));
    y_h = call("transpose", {y_h}, transpose_attrs({1, 0, 2}));
    if (y_c) y_c = call("transpose", {y_c}, transpose_attrs({1, 0, 2}));
  }
  std::vector<Value> out{y_all, y_h};
  if (y_c) out.push_back(y_c);
  return out;
}

}  // namespace

nlohmann::json OnnxGap::to_json() const {
  nlohmann::json j = {{"kind", kind}, {"what", what}, {"count", where.size()}, {"where", where}};
  if (!op_type.empty()) j["op_type"] = op_type;
  return j;
}

OnnxUnsupportedError::OnnxUnsupportedError(std::vector<OnnxGap> gaps, const std::string& context)
    : UserError(ErrorKind::kInvalidArgument, context + gaps_text(gaps)), gaps_(std::move(gaps)) {}

std::vector<std::string> supported_onnx_ops() {
  OnnxImportOptions none;
  Importer importer(none, "");
  return importer.handled_ops();
}

namespace {

graph::Graph import_model(std::string_view bytes, const OnnxImportOptions& options,
                          const std::string& model_dir) {
  onnx::ModelProto model;
  TT_CHECK(bytes.size() < (size_t{1} << 31) &&
               model.ParseFromArray(bytes.data(), static_cast<int>(bytes.size())),
           kParse, "not a valid ONNX model (the protobuf does not parse; is the file truncated?)");
  Importer importer(options, model_dir);
  return importer.run(model);
}

}  // namespace

graph::Graph import_onnx_bytes(std::string_view bytes, const OnnxImportOptions& options) {
  return import_model(bytes, options, "");
}

graph::Graph import_onnx(const std::string& path, const OnnxImportOptions& options) {
  std::optional<std::string> bytes = read_file_if_exists(path);
  TT_CHECK(bytes, kNotFound, "cannot read the model file '", path, "'");
  try {
    std::string dir = std::filesystem::absolute(path).parent_path().string();
    return import_model(*bytes, options, dir);
  } catch (const OnnxUnsupportedError& e) {
    throw OnnxUnsupportedError(e.gaps(), path + ": ");
  } catch (const UserError& e) {
    fail(e.kind(), path, ": ", e.what());
  }
}

te::NDArray read_tensor_proto(const std::string& path) {
  std::optional<std::string> bytes = read_file_if_exists(path);
  TT_CHECK(bytes, kNotFound, "cannot read the tensor file '", path, "'");
  return read_tensor_proto_bytes(*bytes, path);
}

te::NDArray read_tensor_proto_bytes(std::string_view bytes, const std::string& what) {
  onnx::TensorProto t;
  TT_CHECK(bytes.size() < (size_t{1} << 31) &&
               t.ParseFromArray(bytes.data(), static_cast<int>(bytes.size())),
           kParse, what, ": not a serialised ONNX TensorProto");
  try {
    return to_array(t);
  } catch (const UserError& e) {
    fail(e.kind(), what, ": ", e.what());
  }
}

}  // namespace tensortune::frontend
