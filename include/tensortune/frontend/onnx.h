/// \file
/// ONNX import: a .onnx file read into the graph IR with Debian's protobuf
/// and ONNX packages. Nodes may come in any order (they are sorted). Weights
/// (initializers and Constant nodes) become constants; subgraphs that
/// compute shapes fold to constants when the shapes are static; every other
/// node maps onto graph operators (supported_onnx_ops()). A malformed file
/// is an error at the first problem; a model that uses what is not
/// supported (operators, attributes, element types, a dynamic input
/// dimension without a shape) is one OnnxUnsupportedError listing every
/// such gap with the nodes where it occurs; never a crash.
#pragma once

#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "tensortune/graph/graph.h"
#include "tensortune/support/error.h"

namespace tensortune::frontend {

struct OnnxImportOptions {
  /// Shapes for inputs whose dimensions the model leaves open, by input name.
  std::map<std::string, std::vector<int64_t>> input_shapes;
  /// Inputs fixed to a value, by name: each becomes a constant (so a shape
  /// or axes given as an input folds) and the imported model no longer takes it.
  std::map<std::string, te::NDArray> input_values;
};

/// One thing a model uses that the importer does not support, and where.
struct OnnxGap {
  /// "opset", "operator" (no mapping for it), "dtype" (an element type), or
  /// "node" (a mapped operator whose node needs what is not supported: an
  /// attribute value, a dynamic input, ...).
  std::string kind;
  std::string what;                ///< the operator, type, or what the node needs
  std::string op_type;             ///< the operator of a "node" gap
  std::vector<std::string> where;  ///< names of the nodes (or tensors) where it occurs
  nlohmann::json to_json() const;
};

/// A model that uses what is not supported: every gap found in one pass.
class OnnxUnsupportedError : public UserError {
 public:
  /// `context` goes before the message (the file's name).
  explicit OnnxUnsupportedError(std::vector<OnnxGap> gaps, const std::string& context = "");
  const std::vector<OnnxGap>& gaps() const { return gaps_; }

 private:
  std::vector<OnnxGap> gaps_;
};

/// The model in `path`; errors name the file.
graph::Graph import_onnx(const std::string& path, const OnnxImportOptions& options = {});

/// The model serialised in `bytes` (for tests and fuzzing).
graph::Graph import_onnx_bytes(std::string_view bytes, const OnnxImportOptions& options = {});

/// The ONNX operators the importer maps, sorted.
std::vector<std::string> supported_onnx_ops();

/// A tensor stored as a serialised ONNX TensorProto (.pb, as in ONNX's test
/// data sets); errors name the file.
te::NDArray read_tensor_proto(const std::string& path);
/// The same from the file's bytes; `what` names them in errors.
te::NDArray read_tensor_proto_bytes(std::string_view bytes, const std::string& what);

}  // namespace tensortune::frontend
