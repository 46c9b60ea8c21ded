/// \file
/// The two things every layer does with a shape: write it in a message, and
/// turn a numpy-style axis (negative counts from the end) into a position.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace tensortune {

/// "[1, 3, 224, 224]": how every message writes a shape.
std::string shape_text(const std::vector<int64_t>& shape);

/// `axis` in [-rank, rank) as a position in [0, rank); a kInvalidArgument
/// error naming `what` (the operator or attribute) and the valid range
/// otherwise.
int64_t normalize_axis(int64_t axis, int64_t rank, std::string_view what);

}  // namespace tensortune
