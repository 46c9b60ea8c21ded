#include "tensortune/runtime/plan.h"

#include <map>
#include <set>
#include <string>

#include "tensortune/support/checked.h"
#include "tensortune/support/error.h"
#include "tensortune/support/shape.h"
#include "tensortune/support/strings.h"

namespace tensortune::runtime {

void PlanBufferNode::declare(FieldList<PlanBufferNode>& f) {
  f.def("kind", &PlanBufferNode::kind)
      .def("bytes", &PlanBufferNode::bytes)
      .def("dtype", &PlanBufferNode::dtype)
      .def("shape", &PlanBufferNode::shape)
      .def("offset", &PlanBufferNode::offset)
      .def("name", &PlanBufferNode::name)
      .def("source", &PlanBufferNode::source)
      .def("packer", &PlanBufferNode::packer);
}

void PlanTensorNode::declare(FieldList<PlanTensorNode>& f) {
  f.def("name", &PlanTensorNode::name)
      .def("shape", &PlanTensorNode::shape)
      .def("dtype", &PlanTensorNode::dtype)
      .def("buffer", &PlanTensorNode::buffer);
}

void PlanFunctionNode::declare(FieldList<PlanFunctionNode>& f) {
  f.def("name", &PlanFunctionNode::name).def("arg_bytes", &PlanFunctionNode::arg_bytes);
}

void PlanStepNode::declare(FieldList<PlanStepNode>& f) {
  f.def("function", &PlanStepNode::function)
      .def("args", &PlanStepNode::args)
      .def("copy_from", &PlanStepNode::copy_from)
      .def("copy_to", &PlanStepNode::copy_to);
}

void ModelPlanNode::declare(FieldList<ModelPlanNode>& f) {
  f.def("target", &ModelPlanNode::target)
      .def("inputs", &ModelPlanNode::inputs)
      .def("outputs", &ModelPlanNode::outputs)
      .def("buffers", &ModelPlanNode::buffers)
      .def("functions", &ModelPlanNode::functions)
      .def("steps", &ModelPlanNode::steps)
      .def("arena_bytes", &ModelPlanNode::arena_bytes)
      .def("weights_bytes", &ModelPlanNode::weights_bytes)
      .def("report", &ModelPlanNode::report)
      .validate(check_plan);
}

TT_REGISTER_NODE(PlanBufferNode);
TT_REGISTER_NODE(PlanTensorNode);
TT_REGISTER_NODE(PlanFunctionNode);
TT_REGISTER_NODE(PlanStepNode);
TT_REGISTER_NODE(ModelPlanNode);

namespace {

const char* kind_name(BufferKind kind) {
  return EnumNames<BufferKind>::names[static_cast<size_t>(kind)].data();
}

/// [offset, offset + bytes) inside [0, limit), computed without overflow.
bool inside(int64_t offset, int64_t bytes, int64_t limit) {
  return offset >= 0 && bytes >= 0 && offset <= limit && bytes <= limit - offset;
}

}  // namespace

void check_plan(const ModelPlanNode& plan) {
  const int64_t n = static_cast<int64_t>(plan.buffers.size());
  TT_CHECK(plan.arena_bytes >= 0 && plan.arena_bytes <= kMaxBufferBytes, kInvalidArgument,
           "arena_bytes is ", plan.arena_bytes, ", not in [0, 2^47]");
  TT_CHECK(plan.weights_bytes >= 0 && plan.weights_bytes <= kMaxBufferBytes, kInvalidArgument,
           "weights_bytes is ", plan.weights_bytes, ", not in [0, 2^47]");
  auto buffer = [&](int64_t id, const std::string& field) -> const PlanBufferNode& {
    TT_CHECK(id >= 0 && id < n, kInvalidArgument, field, " is buffer ", id, ", but the plan has ",
             n, " buffers");
    const PlanBuffer& b = plan.buffers[static_cast<size_t>(id)];
    TT_CHECK(b, kInvalidArgument, "buffers[", id, "] is null");
    return *b;
  };

  std::map<std::string, const PlanFunctionNode*> functions;
  for (size_t i = 0; i < plan.functions.size(); ++i) {
    const PlanFunction& fn = plan.functions[i];
    TT_CHECK(fn && !fn->name.empty(), kInvalidArgument, "functions[", i, "] has no name");
    TT_CHECK(functions.emplace(fn->name, fn.get()).second, kInvalidArgument, "functions[", i,
             "] repeats the name '", fn->name, "'");
    for (int64_t b : fn->arg_bytes) {
      TT_CHECK(b >= 0 && b <= kMaxBufferBytes, kInvalidArgument, "function '", fn->name,
               "' takes an argument of ", b, " bytes");
    }
  }
  auto function = [&](const std::string& name, const std::string& field) {
    auto it = functions.find(name);
    TT_CHECK(it != functions.end(), kInvalidArgument, field, " names the function '", name,
             "', which the plan's functions do not list");
    return it->second;
  };

  for (int64_t id = 0; id < n; ++id) {
    const std::string where = "buffers[" + std::to_string(id) + "]";
    const PlanBufferNode& b = buffer(id, where);
    TT_CHECK(b.bytes >= 0 && b.bytes <= kMaxBufferBytes, kInvalidArgument, where, ".bytes is ",
             b.bytes, ", not in [0, 2^47]");
    TT_CHECK(b.dtype.is_scalar(), kInvalidArgument, where, ".dtype is ", b.dtype.str(),
             ", not a scalar type");
    switch (b.kind) {
      case BufferKind::kInput:
      case BufferKind::kConstant:
      case BufferKind::kOutput: {
        int64_t bytes = checked_bytes(b.shape, b.dtype.bytes(), where);
        TT_CHECK(bytes == b.bytes, kInvalidArgument, where, ".bytes is ", b.bytes, ", but ",
                 b.dtype.str(), shape_text(b.shape), " takes ", bytes);
        if (b.kind == BufferKind::kConstant) {
          TT_CHECK(inside(b.offset, b.bytes, plan.weights_bytes), kInvalidArgument, where,
                   ".offset is ", b.offset, " for ", b.bytes,
                   " bytes, outside weights.bin's weights_bytes ", plan.weights_bytes);
        }
        break;
      }
      case BufferKind::kPacked: {
        const std::string field = where + ".source";
        TT_CHECK(b.source >= 0 && b.source < id, kInvalidArgument, field, " is ", b.source,
                 ", not a buffer before it (0 to ", id - 1, ")");
        const PlanBufferNode& source = buffer(b.source, field);
        TT_CHECK(source.kind == BufferKind::kConstant, kInvalidArgument, field, " is buffer ",
                 b.source, ", a ", kind_name(source.kind), " buffer, not a constant");
        TT_CHECK(b.bytes % b.dtype.bytes() == 0, kInvalidArgument, where, ".bytes is ", b.bytes,
                 ", not whole elements of ", b.dtype.str());
        const PlanFunctionNode* packer = function(b.packer, where + ".packer");
        TT_CHECK(packer->arg_bytes.size() == 2, kInvalidArgument, "the packer '", b.packer,
                 "' takes ", packer->arg_bytes.size(), " arguments, not 2");
        TT_CHECK(packer->arg_bytes[0] == source.bytes && packer->arg_bytes[1] == b.bytes,
                 kInvalidArgument, "the packer '", b.packer, "' reads ", packer->arg_bytes[0],
                 " and writes ", packer->arg_bytes[1], " bytes, but ", field, " has ", source.bytes,
                 " and ", where, " ", b.bytes);
        break;
      }
      case BufferKind::kArena:
        TT_CHECK(inside(b.offset, b.bytes, plan.arena_bytes), kInvalidArgument, where,
                 ".offset is ", b.offset, " for ", b.bytes, " bytes, outside the arena_bytes ",
                 plan.arena_bytes);
        break;
      case BufferKind::kView: {
        const std::string field = where + ".source";
        TT_CHECK(b.source >= 0 && b.source < id, kInvalidArgument, field, " is ", b.source,
                 ", not a buffer before it (0 to ", id - 1, ")");
        const PlanBufferNode& source = buffer(b.source, field);
        TT_CHECK(source.kind != BufferKind::kView && source.kind != BufferKind::kPacked,
                 kInvalidArgument, field, " is buffer ", b.source, ", a ", kind_name(source.kind),
                 " buffer; a view lies in an input, constant, arena or output buffer");
        TT_CHECK(inside(b.offset, b.bytes, source.bytes), kInvalidArgument, where, ".offset is ",
                 b.offset, " for ", b.bytes, " bytes, outside its source's ", source.bytes);
        break;
      }
    }
  }

  // The interface: each tensor on a buffer of its own, of its kind and type.
  std::set<int64_t> interface_buffers;
  auto check_tensors = [&](const std::vector<PlanTensor>& list, const char* field,
                           BufferKind kind) {
    std::set<std::string> names;
    for (size_t i = 0; i < list.size(); ++i) {
      const std::string where = std::string(field) + "[" + std::to_string(i) + "]";
      TT_CHECK(list[i], kInvalidArgument, where, " is null");
      const PlanTensorNode& t = *list[i];
      TT_CHECK(names.insert(t.name).second, kInvalidArgument, where, " repeats the name '", t.name,
               "'");
      const PlanBufferNode& b = buffer(t.buffer, where + ".buffer");
      TT_CHECK(b.kind == kind, kInvalidArgument, where, ".buffer is buffer ", t.buffer, ", a ",
               kind_name(b.kind), " buffer, not an ", kind_name(kind), " one");
      TT_CHECK(b.shape == t.shape && b.dtype == t.dtype, kInvalidArgument, where, " is ",
               t.dtype.str(), shape_text(t.shape), ", but its buffer ", t.buffer, " is ",
               b.dtype.str(), shape_text(b.shape));
      TT_CHECK(interface_buffers.insert(t.buffer).second, kInvalidArgument, where,
               ".buffer is buffer ", t.buffer, ", which another input or output holds already");
    }
  };
  check_tensors(plan.inputs, "inputs", BufferKind::kInput);
  check_tensors(plan.outputs, "outputs", BufferKind::kOutput);
  for (int64_t id = 0; id < n; ++id) {
    BufferKind kind = plan.buffers[static_cast<size_t>(id)]->kind;
    TT_CHECK(
        (kind != BufferKind::kInput && kind != BufferKind::kOutput) || interface_buffers.count(id),
        kInvalidArgument, "buffers[", id, "] is an ", kind_name(kind),
        " buffer that no input or output holds");
  }

  for (size_t i = 0; i < plan.steps.size(); ++i) {
    const std::string where = "steps[" + std::to_string(i) + "]";
    TT_CHECK(plan.steps[i], kInvalidArgument, where, " is null");
    const PlanStepNode& s = *plan.steps[i];
    if (s.is_copy()) {
      TT_CHECK(s.args.empty(), kInvalidArgument, where, " is a copy with args");
      const PlanBufferNode& from = buffer(s.copy_from, where + ".copy_from");
      const PlanBufferNode& to = buffer(s.copy_to, where + ".copy_to");
      TT_CHECK(to.kind == BufferKind::kOutput, kInvalidArgument, where, ".copy_to is a ",
               kind_name(to.kind), " buffer, not an output");
      TT_CHECK(from.bytes == to.bytes, kInvalidArgument, where, " copies ", from.bytes,
               " bytes (buffer ", s.copy_from, ") into ", to.bytes, " (buffer ", s.copy_to, ")");
      continue;
    }
    TT_CHECK(s.copy_from == -1 && s.copy_to == -1, kInvalidArgument, where,
             " is a kernel call with copy_from or copy_to set");
    const PlanFunctionNode* fn = function(s.function, where + ".function");
    TT_CHECK(s.args.size() == fn->arg_bytes.size(), kInvalidArgument, where, " passes ",
             s.args.size(), " arguments to '", s.function, "', which takes ", fn->arg_bytes.size());
    for (size_t a = 0; a < s.args.size(); ++a) {
      const std::string field = where + ".args[" + std::to_string(a) + "]";
      const PlanBufferNode& b = buffer(s.args[a], field);
      TT_CHECK(b.bytes == fn->arg_bytes[a], kInvalidArgument, field, " is buffer ", s.args[a],
               " of ", b.bytes, " bytes, but '", s.function, "' takes ", fn->arg_bytes[a],
               " bytes there");
    }
  }
}

}  // namespace tensortune::runtime
