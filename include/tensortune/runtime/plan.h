/// \file
/// The plan of a compiled model: its buffers, the kernel calls in order and
/// its interface, as one reflected node. It is saved and read through the
/// object system's codec (plan.json), and check_plan() checks every index,
/// offset and size in it against every other, so that a plan that loads
/// cannot make the runtime read or write outside a buffer.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "tensortune/ir/dtype.h"
#include "tensortune/object/object.h"

namespace tensortune::runtime {

/// Where a buffer's memory comes from.
enum class BufferKind {
  kInput,     ///< the caller's input array
  kConstant,  ///< a weight, read from weights.bin at `offset`
  kPacked,    ///< a weight packed at load time by `packer` from buffer `source`
  kArena,     ///< an intermediate, at `offset` in the arena
  kOutput,    ///< the caller's output array
  kView,      ///< `bytes` at `offset` inside buffer `source` (an LSTM's time step)
};

}  // namespace tensortune::runtime

namespace tensortune {
template <>
struct EnumNames<runtime::BufferKind> {
  static constexpr std::array<std::string_view, 6> names = {"input", "constant", "packed",
                                                            "arena", "output",   "view"};
};
}  // namespace tensortune

namespace tensortune::runtime {

/// One buffer of the plan; the fields its kind does not use stay at their defaults.
struct PlanBufferNode : Object {
  BufferKind kind = BufferKind::kArena;
  int64_t bytes = 0;
  ir::DataType dtype = ir::DataType::uint(8);
  std::vector<int64_t> shape;  ///< input, constant, output
  int64_t offset = 0;   ///< constant: in weights.bin; arena: in the arena; view: in its source
  std::string name;     ///< constant: the weight's name
  int64_t source = -1;  ///< packed: the constant it is packed from; view: the buffer it lies in
  std::string packer;   ///< packed: the library function that packs it
  TT_NODE(PlanBufferNode, "runtime.PlanBuffer")
  static void declare(FieldList<PlanBufferNode>& f);
};
using PlanBuffer = Ref<PlanBufferNode>;

/// An input or output of the model, and the buffer that holds it.
struct PlanTensorNode : Object {
  std::string name;
  std::vector<int64_t> shape;
  ir::DataType dtype;
  int64_t buffer = -1;
  TT_NODE(PlanTensorNode, "runtime.PlanTensor")
  static void declare(FieldList<PlanTensorNode>& f);
};
using PlanTensor = Ref<PlanTensorNode>;

/// A function of the model's library and the bytes of each argument it
/// reads or writes (kernels: inputs then output; packers: source, packed).
struct PlanFunctionNode : Object {
  std::string name;
  std::vector<int64_t> arg_bytes;
  TT_NODE(PlanFunctionNode, "runtime.PlanFunction")
  static void declare(FieldList<PlanFunctionNode>& f);
};
using PlanFunction = Ref<PlanFunctionNode>;

/// A step: a kernel call on buffer ids, or (empty function) a copy.
struct PlanStepNode : Object {
  std::string function;
  std::vector<int64_t> args;
  int64_t copy_from = -1, copy_to = -1;
  TT_NODE(PlanStepNode, "runtime.PlanStep")
  static void declare(FieldList<PlanStepNode>& f);
  bool is_copy() const { return function.empty(); }
};
using PlanStep = Ref<PlanStepNode>;

/// The whole plan; see the file comment.
struct ModelPlanNode : Object {
  std::string target;  ///< the target string it was compiled for
  std::vector<PlanTensor> inputs, outputs;
  std::vector<PlanBuffer> buffers;
  std::vector<PlanFunction> functions;
  std::vector<PlanStep> steps;
  int64_t arena_bytes = 0;
  int64_t weights_bytes = 0;  ///< the size of weights.bin
  nlohmann::json report;      ///< compile's apply report (graph::CompileReport::to_json)
  TT_NODE(ModelPlanNode, "runtime.ModelPlan")
  static void declare(FieldList<ModelPlanNode>& f);
};
using ModelPlan = Ref<ModelPlanNode>;

/// Checks the plan whole (loading a plan runs it too): every buffer id in
/// range and of the kind its use needs, every size the product of its shape,
/// constants inside weights.bin, arena buffers inside the arena, each step's
/// arguments as many and as large as its function takes, each input and
/// output of its buffer's shape. A kInvalidArgument error names the field
/// and both values.
void check_plan(const ModelPlanNode& plan);

}  // namespace tensortune::runtime
