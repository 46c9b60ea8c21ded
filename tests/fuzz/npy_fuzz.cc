// libFuzzer harness for the readers of `tensortune run --input`: any bytes
// go through te::parse_npy and frontend::read_tensor_proto_bytes, which must
// give an array of the shape and size they declare or throw a user error.
// A crash, a sanitizer report, another exception type or an internal error
// is a finding; so is an array that does not round-trip through npy_bytes.
//
//   scripts/fuzz.sh [seconds]
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string_view>

#include "tensortune/frontend/onnx.h"
#include "tensortune/te/npy.h"

namespace {

[[noreturn]] void finding(const char* what, const char* detail) {
  std::fprintf(stderr, "npy_fuzz: %s: %s\n", what, detail);
  std::abort();
}

void check_array(const tensortune::te::NDArray& a) {
  // Every element is there: reading the last one must be in bounds.
  if (a.size() > 0) (void)a.get(a.size() - 1);
  std::string again = tensortune::te::npy_bytes(a);
  tensortune::te::NDArray b = tensortune::te::parse_npy(again, "round trip");
  if (b.shape() != a.shape() || b.dtype() != a.dtype() ||
      std::memcmp(a.data(), b.data(), a.nbytes()) != 0) {
    finding("round trip", "an array read back differs");
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view bytes(reinterpret_cast<const char*>(data), size);
  for (int reader = 0; reader < 2; ++reader) {
    try {
      check_array(reader == 0 ? tensortune::te::parse_npy(bytes, "fuzz.npy")
                              : tensortune::frontend::read_tensor_proto_bytes(bytes, "fuzz.pb"));
    } catch (const tensortune::Error& e) {
      if (e.kind() == tensortune::ErrorKind::kInternal) finding("internal error", e.what());
    }
  }
  return 0;
}
