// libFuzzer harness for the JSON graph loader: any bytes go through
// load_string, which must either load a graph or throw a tensortune::Error of
// a user kind. A crash, a sanitizer report, a hang, another exception type or
// an internal error is a finding. A graph that loads must also survive the
// operations every loaded value meets: save/load again to an equal graph,
// hashing, printing and deep copy.
//
//   scripts/fuzz.sh [seconds]
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string_view>

#include "tensortune/object/serialize.h"
#include "tensortune/object/structural.h"

namespace {

[[noreturn]] void finding(const char* what, const char* detail) {
  std::fprintf(stderr, "json_loader_fuzz: %s: %s\n", what, detail);
  std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  tensortune::ObjectPtr graph;
  try {
    graph = tensortune::load_string(text);
  } catch (const tensortune::Error& e) {
    if (e.kind() == tensortune::ErrorKind::kInternal) finding("internal error", e.what());
    return 0;
  }
  // Not caught on purpose: anything else escaping load_string is a finding
  // (libFuzzer reports the uncaught exception as a crash with its input).
  try {
    std::string saved = tensortune::save_string(graph);
    tensortune::ObjectPtr again = tensortune::load_string(saved);
    if (!tensortune::structural_equal(graph, again)) {
      finding("reloaded graph differs",
              tensortune::first_difference(graph, again).value_or("?").c_str());
    }
    if (tensortune::structural_hash(graph) != tensortune::structural_hash(again)) {
      finding("reloaded graph hashes differently", saved.c_str());
    }
    if (!tensortune::structural_equal(graph, tensortune::deep_copy(graph))) {
      finding("deep copy differs", saved.c_str());
    }
    (void)tensortune::print_graph(graph);
  } catch (const tensortune::Error& e) {
    finding("a loaded graph failed to save, reload, hash or print", e.what());
  }
  return 0;
}
