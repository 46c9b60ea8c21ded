// libFuzzer harness for the ONNX importer: any bytes go through
// import_onnx_bytes, which must either give a graph or throw a
// tensortune::Error of a user kind (a malformed protobuf, an unsupported
// operator, a shape that does not fit). A crash, a sanitizer report, a hang,
// another exception type or an internal error is a finding. A graph that
// imports must also survive what every imported model meets: saving and
// loading to an equal graph, printing, and the graph passes.
//
//   scripts/fuzz.sh [seconds]
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string_view>

#include "tensortune/frontend/onnx.h"
#include "tensortune/graph/passes.h"
#include "tensortune/object/serialize.h"
#include "tensortune/object/structural.h"

namespace {

[[noreturn]] void finding(const char* what, const char* detail) {
  std::fprintf(stderr, "onnx_loader_fuzz: %s: %s\n", what, detail);
  std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view bytes(reinterpret_cast<const char*>(data), size);
  tensortune::graph::Graph graph;
  try {
    graph = tensortune::frontend::import_onnx_bytes(bytes);
  } catch (const tensortune::Error& e) {
    if (e.kind() == tensortune::ErrorKind::kInternal) finding("internal error", e.what());
    return 0;
  }
  try {
    std::string saved = tensortune::save_string(graph);
    tensortune::ObjectPtr again = tensortune::load_string(saved);
    if (!tensortune::structural_equal(again, tensortune::ObjectPtr(graph.ptr()))) {
      finding("round trip", "an imported graph loads back different");
    }
    (void)tensortune::graph::to_string(graph);
    (void)tensortune::graph::optimize(graph);
  } catch (const tensortune::Error& e) {
    // The passes may refuse a graph (a fold too large); anything internal is a bug.
    if (e.kind() == tensortune::ErrorKind::kInternal)
      finding("internal error after import", e.what());
  }
  return 0;
}
