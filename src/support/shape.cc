#include "tensortune/support/shape.h"

#include "tensortune/support/error.h"

namespace tensortune {

std::string shape_text(const std::vector<int64_t>& shape) {
  std::string out = "[";
  for (size_t i = 0; i < shape.size(); ++i) out += (i ? ", " : "") + std::to_string(shape[i]);
  return out + "]";
}

int64_t normalize_axis(int64_t axis, int64_t rank, std::string_view what) {
  TT_CHECK(axis >= -rank && axis < rank, kInvalidArgument, what, what.empty() ? "" : ": ", "axis ",
           axis, " is out of range for rank ", rank, " (valid: ", -rank, " to ", rank - 1, ")");
  return axis < 0 ? axis + rank : axis;
}

}  // namespace tensortune
