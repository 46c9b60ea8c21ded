/// \file
/// Sizes computed with checked arithmetic: a product or sum of extents that
/// int64 cannot hold is a user error naming what was being sized, never a
/// wrapped value (docs/architecture.md invariant 10).
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

namespace tensortune {

/// The most bytes one buffer may hold: 2^47, the user address space of an
/// x86-64 or AArch64 process, so no machine could allocate more.
inline constexpr int64_t kMaxBufferBytes = int64_t{1} << 47;

/// a + b; a kInvalidArgument error naming `what` when int64 cannot hold it.
int64_t checked_add(int64_t a, int64_t b, std::string_view what);
/// a * b; a kInvalidArgument error naming `what` when int64 cannot hold it.
int64_t checked_mul(int64_t a, int64_t b, std::string_view what);

/// The number of elements of `shape` (1 for a scalar). A negative extent, or
/// a count int64 cannot hold, is a kInvalidArgument error naming `what` and
/// the shape.
int64_t checked_elements(const std::vector<int64_t>& shape, std::string_view what);

/// checked_elements(shape) * element_bytes; also an error naming `what`, the
/// shape and the size when it exceeds kMaxBufferBytes.
int64_t checked_bytes(const std::vector<int64_t>& shape, int64_t element_bytes,
                      std::string_view what);

}  // namespace tensortune
