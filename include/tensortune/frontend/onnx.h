/// \file
/// ONNX import: a .onnx file (opsets 11 to 17) read into the graph IR with
/// Debian's protobuf and ONNX packages. Weights (initializers and Constant
/// nodes) become constants; subgraphs that compute shapes fold to constants
/// when the shapes are static; every other node maps onto graph operators
/// (supported_onnx_ops()). A malformed file, an unsupported operator or
/// attribute, or a dynamic input dimension without a shape for it is an
/// error that names the node, its op type and what is supported; never a
/// crash.
#pragma once

#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "tensortune/graph/graph.h"

namespace tensortune::frontend {

struct OnnxImportOptions {
  /// Shapes for inputs whose dimensions the model leaves open, by input name.
  std::map<std::string, std::vector<int64_t>> input_shapes;
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
