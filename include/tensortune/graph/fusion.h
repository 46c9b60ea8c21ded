/// \file
/// Fusion: a graph cut into groups of calls that run as one kernel (a conv,
/// dense or matmul with the elementwise operations that follow it, a
/// reduction with its elementwise followers, chains of injective
/// operations), and each group's workload: its calls as tensor expressions
/// over placeholders for what it reads, the model's constants marked as
/// constant inputs. partition_model() (partition.h) applies both to a model.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "tensortune/graph/graph.h"
#include "tensortune/te/task.h"

namespace tensortune::graph {

/// Calls of the graph fused into one kernel.
struct FusedGroup {
  std::vector<Ref<CallNode>> calls;  ///< producers first; the last is the group's output
  std::vector<Value> inputs;         ///< what it reads from outside, in first-use order
  /// The operators, e.g. "nn.conv2d+nn.bias_add+relu".
  std::string description() const;
  /// A call alone whose value is a contiguous part of its operand's memory
  /// (see view_offset): no kernel and no task.
  bool is_view() const;
};

/// Where `call`'s value lies in its operand's memory, in bytes, when it is
/// a contiguous part of it: a reshape (0), a packing of whole int8 words
/// (nn.pack_int8x4 of a multiple of 4 channels: 0), or a slice of consecutive rows
/// (a unit-stride slice of one axis, every axis before it of extent 1 and
/// every one after it whole: an LSTM's time step). nullopt otherwise.
std::optional<int64_t> view_offset(const CallNode& call);

/// The groups of `graph` in an order that runs producers first. A view
/// (see view_offset) is a group of its own. Another call joins
/// the group of the call it reads when that call has no other reader, is no
/// output of the graph, ends its group, and the two fit: elementwise
/// operations join any group, injective ones only groups without a
/// convolution, dense, matmul or reduction; groups stay under `max_calls`.
/// Elementwise calls that read a value on several branches join it when the
/// branches meet again in one call (GELU, SiLU). A convolution joins the
/// transpose to NHWC of an image of at most 4 channels that only it reads
/// (and the elementwise work around the transpose). 24 calls take in a QDQ
/// int8 layer's whole epilogue (17: dequantize, bias, quantize, a Clip
/// between a dequantize and a quantize, the next layer's centring).
std::vector<FusedGroup> fuse_groups(const Graph& graph, size_t max_calls = 24);

/// The workload of a group: placeholders "p0", "p1", ... for its inputs,
/// those that are constants of the model marked constant.
te::Workload group_workload(const FusedGroup& group);

}  // namespace tensortune::graph
