/// \file
/// The identity of this build, which a tuner and its workers compare before
/// any work is sent: a worker built from other sources could build or time
/// something other than what the tuner asked for.
#pragma once

#include <string_view>

namespace tensortune {

/// "tensortune <version> sources <16 hex digits>": the version and a hash of
/// every library source this program was built from (cmake/build_id.cmake).
std::string_view build_id();

/// True in a build with AddressSanitizer, which reserves terabytes of
/// address space for its shadow memory: there an address-space limit
/// (RLIMIT_AS) would stop every process, so workers cap memory by the
/// sanitizer's soft RSS limit instead (scripts/test.sh sets it).
#if defined(__SANITIZE_ADDRESS__)
inline constexpr bool kAddressSanitizer = true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
inline constexpr bool kAddressSanitizer = true;
#else
inline constexpr bool kAddressSanitizer = false;
#endif
#else
inline constexpr bool kAddressSanitizer = false;
#endif

}  // namespace tensortune
