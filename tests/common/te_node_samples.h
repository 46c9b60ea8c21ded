/// \file
/// Sample instances of the te layer's node types, for registry-wide tests
/// (tests/object/registry_test.cc merges them into node_samples()).
#pragma once

#include <functional>
#include <map>
#include <string>

#include "tensortune/object/object.h"

namespace tensortune::testing {

/// Adds a sample builder for te.PlaceholderOp, te.ComputeOp, te.Tensor,
/// te.NamedWorkload and te.DagWorkload to `samples`.
void add_te_node_samples(std::map<std::string, std::function<ObjectPtr()>>& samples);

}  // namespace tensortune::testing
