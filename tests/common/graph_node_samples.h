/// \file
/// Sample instances of the graph layer's node types, for registry-wide tests
/// (tests/object/registry_test.cc merges them into node_samples()).
#pragma once

#include <functional>
#include <map>
#include <string>

#include "tensortune/object/object.h"

namespace tensortune::testing {

/// Adds a sample builder for every graph.* node type to `samples`: the
/// attribute nodes with every field away from its default, and a small
/// graph for graph.Input, graph.Constant, graph.Call and graph.Graph.
void add_graph_node_samples(std::map<std::string, std::function<ObjectPtr()>>& samples);

}  // namespace tensortune::testing
