#include "tensortune/runtime/compiled_model.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <map>
#include <optional>

namespace tensortune::runtime {
namespace {

using json = nlohmann::json;

/// The bytes each argument of `function` takes, from the plan.
const std::vector<int64_t>& arg_bytes_of(const ModelPlanNode& plan, const std::string& function) {
  for (const PlanFunction& fn : plan.functions) {
    if (fn->name == function) return fn->arg_bytes;
  }
  fail(ErrorKind::kInvalidArgument, "the plan lists no function '", function, "'");
}

std::string bytes_text(const std::vector<int64_t>& bytes) {
  std::string text = "[";
  for (size_t i = 0; i < bytes.size(); ++i) text += (i ? ", " : "") + std::to_string(bytes[i]);
  return text + "]";
}

}  // namespace

CompiledModel CompiledModel::load(const std::string& dir, const LoadOptions& options) {
  ModelFiles files = read_model_folder(dir, options.verify);
  try {
    return from_files(files);
  } catch (const UserError& e) {
    fail(e.kind(), dir, ": ", e.what());
  }
}

CompiledModel CompiledModel::from_files(const ModelFiles& files) {
  TT_CHECK(files.plan, kInvalidArgument, "a compiled model needs a plan");
  check_plan(*files.plan);
  const ModelPlanNode& plan = *files.plan;
  TT_CHECK(plan.weights_bytes == static_cast<int64_t>(files.weights.size()), kParse,
           "plan.json: weights_bytes is ", plan.weights_bytes, ", but weights.bin has ",
           files.weights.size(), " bytes");
  CompiledModel m;
  m.plan_ = files.plan;
  // Loaded from the bytes that were checked, not from the path again.
  m.module_ = codegen::Module::load_bytes(files.library, "model.so");
  // The plan's word for what each function takes must be the library's own.
  for (const PlanFunction& fn : plan.functions) {
    TT_CHECK(m.module_.has(fn->name), kParse, "plan.json names the function '", fn->name,
             "', which model.so does not define");
    std::optional<std::vector<int64_t>> stated = m.module_.argument_bytes(fn->name);
    TT_CHECK(stated, kParse, "model.so does not state the arguments of '", fn->name, "'");
    TT_CHECK(*stated == fn->arg_bytes, kParse, "plan.json says '", fn->name,
             "' takes arguments of ", bytes_text(fn->arg_bytes), " bytes, but model.so's takes ",
             bytes_text(*stated));
  }
  const size_t n = plan.buffers.size();
  m.constants_.resize(n);
  m.arena_offset_.assign(n, -1);
  m.view_of_.assign(n, {-1, 0});
  m.buffer_bytes_.resize(n);
  for (size_t id = 0; id < n; ++id) {
    const PlanBufferNode& b = *plan.buffers[id];
    m.buffer_bytes_[id] = static_cast<size_t>(b.bytes);
    if (b.kind == BufferKind::kConstant) {
      te::NDArray a(b.dtype, b.shape);
      std::memcpy(a.data(), files.weights.data() + b.offset, a.nbytes());
      m.constants_[id] = std::move(a);
    } else if (b.kind == BufferKind::kPacked) {
      // Packed once, at load time; check_plan matched the packer's argument
      // sizes with both buffers.
      te::NDArray a(b.dtype, {b.bytes / b.dtype.bytes()});
      void* args[] = {m.constants_[static_cast<size_t>(b.source)].data(), a.data()};
      int32_t rc = m.module_.get(b.packer)(args);
      TT_CHECK(rc == 0, kRuntime, "packing a weight failed (", rc, ")");
      m.constants_[id] = std::move(a);
    } else if (b.kind == BufferKind::kArena) {
      m.arena_offset_[id] = b.offset;
    } else if (b.kind == BufferKind::kView) {
      m.view_of_[id] = {b.source, b.offset};
    }
  }
  m.arena_ = te::NDArray(ir::DataType::uint(8), {std::max<int64_t>(plan.arena_bytes, 1)});
  auto infos = [](const std::vector<PlanTensor>& list, std::vector<TensorInfo>& out,
                  std::vector<int64_t>& ids) {
    for (const PlanTensor& t : list) {
      out.push_back({t->name, t->shape, t->dtype});
      ids.push_back(t->buffer);
    }
  };
  infos(plan.inputs, m.inputs_, m.input_buffers_);
  infos(plan.outputs, m.outputs_, m.output_buffers_);
  for (const PlanStep& s : plan.steps) {
    Step step;
    if (s->is_copy()) {
      step.copy_from = s->copy_from;
      step.copy_to = s->copy_to;
    } else {
      step.fn = m.module_.get(s->function);
      step.args = s->args;
    }
    m.steps_.push_back(std::move(step));
  }
  return m;
}

void CompiledModel::set_step(size_t i, const std::string& function,
                             const std::vector<int64_t>& args) {
  TT_CHECK(i < steps_.size() && steps_[i].fn, kInvalidArgument, "step ", i,
           " of the plan is no kernel call");
  const std::vector<int64_t>& bytes = arg_bytes_of(*plan_, function);
  TT_CHECK(args.size() == bytes.size(), kInvalidArgument, "'", function, "' takes ", bytes.size(),
           " arguments, not ", args.size());
  for (size_t a = 0; a < args.size(); ++a) {
    TT_CHECK(args[a] >= 0 && static_cast<size_t>(args[a]) < buffer_bytes_.size(), kInvalidArgument,
             "a step reads buffer ", args[a], ", which the plan lacks");
    TT_CHECK(static_cast<int64_t>(buffer_bytes_[static_cast<size_t>(args[a])]) == bytes[a],
             kInvalidArgument, "'", function, "' takes ", bytes[a], " bytes as argument ", a,
             ", but buffer ", args[a], " has ", buffer_bytes_[static_cast<size_t>(args[a])]);
  }
  steps_[i].fn = module_.get(function);
  steps_[i].args = args;
}

void CompiledModel::set_threads(int threads) {
  if (!module_.has("tt_set_num_threads")) return;
  // Not a kernel: the module's int32_t tt_set_num_threads(int32_t).
  using SetThreads = int32_t (*)(int32_t);
  SetThreads set =
      reinterpret_cast<SetThreads>(reinterpret_cast<void*>(module_.get("tt_set_num_threads")));
  set(threads);
}

std::vector<te::NDArray> CompiledModel::make_outputs() const {
  std::vector<te::NDArray> outputs;
  for (const TensorInfo& t : outputs_) outputs.emplace_back(t.dtype, t.shape);
  return outputs;
}

std::vector<te::NDArray> CompiledModel::run(const std::vector<te::NDArray>& inputs) {
  std::vector<te::NDArray> outputs = make_outputs();
  run_steps(inputs, outputs, nullptr);
  return outputs;
}

void CompiledModel::run_into(const std::vector<te::NDArray>& inputs,
                             std::vector<te::NDArray>& outputs) {
  run_steps(inputs, outputs, nullptr);
}

void CompiledModel::run_timed(const std::vector<te::NDArray>& inputs,
                              std::vector<te::NDArray>& outputs,
                              std::vector<double>& step_seconds) {
  step_seconds.assign(steps_.size(), 0.0);
  run_steps(inputs, outputs, &step_seconds);
}

std::vector<json> CompiledModel::step_tasks() const {
  std::map<std::string, json> task_of;
  const json& report = plan_->report;
  if (report.is_object() && report.contains("tasks") && report["tasks"].is_array()) {
    for (const auto& t : report["tasks"]) {
      if (t.is_object() && t.contains("function") && t["function"].is_string()) {
        task_of[t["function"].get<std::string>()] = t;
      }
    }
  }
  std::vector<json> tasks;
  for (const PlanStep& s : plan_->steps) {
    auto it = s->is_copy() ? task_of.end() : task_of.find(s->function);
    tasks.push_back(it == task_of.end() ? json() : it->second);
  }
  return tasks;
}

std::vector<std::string> CompiledModel::step_names() const {
  std::vector<std::string> names;
  for (const json& t : step_tasks()) {
    const json* d = t.is_object() && t.contains("description") ? &t["description"] : nullptr;
    names.push_back(t.is_null() ? "copy" : d && d->is_string() ? d->get<std::string>() : "");
  }
  return names;
}

void CompiledModel::run_steps(const std::vector<te::NDArray>& inputs,
                              std::vector<te::NDArray>& outputs,
                              std::vector<double>* step_seconds) {
  TT_CHECK(inputs.size() == inputs_.size(), kInvalidArgument, "the model takes ", inputs_.size(),
           " inputs, got ", inputs.size());
  std::vector<void*> pointer(buffer_bytes_.size(), nullptr);
  for (size_t i = 0; i < inputs.size(); ++i) {
    const TensorInfo& want = inputs_[i];
    TT_CHECK(inputs[i].shape() == want.shape && inputs[i].dtype() == want.dtype, kInvalidArgument,
             "input '", want.name, "' must be ", want.dtype.str(), " of shape ",
             te::NDArray(want.dtype, want.shape).describe(), ", got ", inputs[i].describe());
    pointer[static_cast<size_t>(input_buffers_[i])] = const_cast<void*>(inputs[i].data());
  }
  TT_CHECK(outputs.size() == outputs_.size(), kInvalidArgument, "the model has ", outputs_.size(),
           " outputs, got ", outputs.size(), " arrays for them");
  for (size_t i = 0; i < outputs_.size(); ++i) {
    const TensorInfo& want = outputs_[i];
    TT_CHECK(outputs[i].shape() == want.shape && outputs[i].dtype() == want.dtype, kInvalidArgument,
             "output '", want.name, "' must be ", want.dtype.str(), " of shape ",
             te::NDArray(want.dtype, want.shape).describe(), ", got ", outputs[i].describe());
    pointer[static_cast<size_t>(output_buffers_[i])] = outputs[i].data();
  }
  auto* arena = static_cast<char*>(arena_.data());
  // In id order: a view's source comes before it (check_plan).
  for (size_t id = 0; id < pointer.size(); ++id) {
    if (constants_[id].defined()) pointer[id] = constants_[id].data();
    if (arena_offset_[id] >= 0) pointer[id] = arena + arena_offset_[id];
    if (view_of_[id].first >= 0) {
      pointer[id] = static_cast<char*>(pointer[static_cast<size_t>(view_of_[id].first)]) +
                    view_of_[id].second;
    }
  }
  std::vector<void*> args;
  for (size_t i = 0; i < steps_.size(); ++i) {
    const Step& s = steps_[i];
    auto start = std::chrono::steady_clock::now();
    if (!s.fn) {
      std::memcpy(pointer[static_cast<size_t>(s.copy_to)],
                  pointer[static_cast<size_t>(s.copy_from)],
                  buffer_bytes_[static_cast<size_t>(s.copy_to)]);
    } else {
      args.clear();
      for (int64_t a : s.args) args.push_back(pointer[static_cast<size_t>(a)]);
      int32_t rc = s.fn(args.data());
      TT_CHECK(rc == 0, kRuntime, "a kernel of the model returned ", rc);
    }
    if (step_seconds) {
      (*step_seconds)[i] +=
          std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    }
  }
}

}  // namespace tensortune::runtime
