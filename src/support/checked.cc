#include "tensortune/support/checked.h"

#include <string>

#include "tensortune/support/error.h"
#include "tensortune/support/shape.h"

namespace tensortune {
namespace {}  // namespace

int64_t checked_add(int64_t a, int64_t b, std::string_view what) {
  int64_t r;
  TT_CHECK(!__builtin_add_overflow(a, b, &r), kInvalidArgument, what, ": ", a, " + ", b,
           " does not fit in a 64-bit integer");
  return r;
}

int64_t checked_mul(int64_t a, int64_t b, std::string_view what) {
  int64_t r;
  TT_CHECK(!__builtin_mul_overflow(a, b, &r), kInvalidArgument, what, ": ", a, " * ", b,
           " does not fit in a 64-bit integer");
  return r;
}

int64_t checked_elements(const std::vector<int64_t>& shape, std::string_view what) {
  int64_t n = 1;
  for (int64_t d : shape) {
    TT_CHECK(d >= 0, kInvalidArgument, what, " of shape ", shape_text(shape),
             " has a negative extent");
    TT_CHECK(!__builtin_mul_overflow(n, d, &n), kInvalidArgument, what, " of shape ",
             shape_text(shape), " has more elements than a 64-bit integer can count");
  }
  return n;
}

int64_t checked_bytes(const std::vector<int64_t>& shape, int64_t element_bytes,
                      std::string_view what) {
  int64_t n = checked_elements(shape, what), bytes;
  TT_CHECK(!__builtin_mul_overflow(n, element_bytes, &bytes) && bytes <= kMaxBufferBytes,
           kInvalidArgument, what, " of shape ", shape_text(shape), " would take ",
           static_cast<double>(n) * static_cast<double>(element_bytes),
           " bytes, more than any machine can allocate (2^47 bytes)");
  return bytes;
}

}  // namespace tensortune
