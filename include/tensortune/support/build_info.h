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

}  // namespace tensortune
