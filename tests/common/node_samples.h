/// \file
/// One representative instance of every node type, for registry-wide tests.
#pragma once

#include <functional>
#include <map>
#include <string>

#include "tensortune/object/object.h"

namespace tensortune::testing {

/// Type key -> a function building a sample node of that type.
const std::map<std::string, std::function<ObjectPtr()>>& node_samples();

}  // namespace tensortune::testing
