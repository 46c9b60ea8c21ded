#include "tensortune/graph/compile.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <unordered_map>

#include "tensortune/codegen/backend.h"
#include "tensortune/lower/lower.h"
#include "tensortune/lower/pipeline.h"
#include "tensortune/object/serialize.h"
#include "tensortune/object/structural.h"
#include "tensortune/runtime/compiled_model.h"
#include "tensortune/search/default_schedule.h"
#include "tensortune/support/checked.h"
#include "tensortune/support/files.h"
#include "tensortune/support/strings.h"

namespace tensortune::graph {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

constexpr int64_t kAlign = 64;

int64_t aligned(int64_t n) {
  return checked_add(n, kAlign - 1, "a buffer's aligned size") / kAlign * kAlign;
}

runtime::PlanTensor plan_tensor(const std::string& name, const std::vector<int64_t>& shape,
                                ir::DataType dtype, int64_t buffer) {
  auto t = make_node<runtime::PlanTensorNode>();
  t->name = name;
  t->shape = shape;
  t->dtype = dtype;
  t->buffer = buffer;
  return runtime::PlanTensor(std::move(t));
}

/// First-fit allocation of intermediates in one arena: a buffer gets the
/// lowest offset free for its whole lifetime.
class ArenaPlanner {
 public:
  int64_t place(int64_t bytes, int first, int last) {
    bytes = aligned(std::max<int64_t>(bytes, 1));
    std::vector<std::pair<int64_t, int64_t>> busy;  // [begin, end) of overlapping lifetimes
    for (const auto& b : placed_) {
      if (b.first <= last && first <= b.last) busy.emplace_back(b.offset, b.offset + b.bytes);
    }
    std::sort(busy.begin(), busy.end());
    int64_t offset = 0;
    for (const auto& [begin, end] : busy) {
      if (offset + bytes <= begin) break;
      offset = std::max(offset, end);
    }
    placed_.push_back({offset, bytes, first, last});
    size_ = std::max(size_, offset + bytes);
    return offset;
  }
  int64_t size() const { return size_; }

 private:
  struct Placed {
    int64_t offset, bytes;
    int first, last;
  };
  std::vector<Placed> placed_;
  int64_t size_ = 0;
};

/// One schedule of a task, built into the model's library.
struct Variant {
  schedule::State state;
  std::string function;
  std::vector<lower::Packer> packers;
  double latency_s = 0;     ///< the log's median cost, when tuned
  size_t rank = 0;          ///< its place among the log's schedules for the task, from 0
  bool is_default = false;  ///< the task's default schedule
};

/// One distinct task of the model and how it is built.
struct Kernel {
  te::Task task;
  ApplyEntry entry;
  /// The log's best schedules, best first (or the default schedule alone).
  std::vector<Variant> variants;
  size_t chosen = 0;
  const Variant& variant() const { return variants[chosen]; }
};

/// A kernel step of a plan: its kernel, and its call (function, buffer ids)
/// under each variant of that kernel.
struct StepVariants {
  size_t kernel;
  std::vector<std::pair<std::string, std::vector<int64_t>>> calls;
};
using VariantCalls = std::vector<StepVariants>;

/// "best", "2nd best", "3rd best", ... for the variant ranked `n` (from 0).
std::string ordinal(size_t n) {
  if (n == 0) return "best";
  size_t rank = n + 1;
  const char* suffix = rank % 100 / 10 == 1 ? "th"
                       : rank % 10 == 1     ? "st"
                       : rank % 10 == 2     ? "nd"
                       : rank % 10 == 3     ? "rd"
                                            : "th";
  return std::to_string(rank) + suffix + " best";
}

/// Has a worker time each task's variants inside the model (the folder
/// `model_dir`, written with every variant in its library and the best in
/// place) and keeps, for each task, the variant it chose; see
/// measure/model_timing.h. Returns a summary. When the worker fails (a
/// kernel crashed or hung, no worker could start), every task keeps its
/// log's best and the summary and `warnings` say why.
json choose_in_model(std::vector<Kernel>& kernels, const VariantCalls& calls,
                     const std::string& model_dir, const CompileOptions& options,
                     std::vector<std::string>& warnings) {
  measure::ModelTimingRequest request;
  request.model_dir = std::filesystem::absolute(model_dir).string();
  request.timing =
      Ref<measure::RunnerOptions>(make_node<measure::RunnerOptions>(options.in_model.timing));
  for (size_t s = 0; s < calls.size(); ++s) {
    if (kernels[calls[s].kernel].variants.size() < 2) continue;
    auto step = make_node<measure::CandidateStepNode>();
    step->step = static_cast<int64_t>(s);
    step->task = static_cast<int64_t>(calls[s].kernel);
    for (const auto& [function, args] : calls[s].calls) {
      step->functions.push_back(function);
      step->args.push_back(args);
    }
    request.steps.emplace_back(std::move(step));
  }
  measure::ModelTimingOutcome outcome = measure::time_in_model_worker(request, options.in_model);
  if (outcome.error_code != measure::ErrorCode::kNoError) {
    std::string code(measure::error_code_name(outcome.error_code));
    warnings.push_back("timing the candidates in the model failed (" + code +
                       "): " + outcome.error_message + "; every task keeps its log's best");
    return {{"error_code", code}, {"error", outcome.error_message}};
  }
  const measure::ModelTimingReply& reply = outcome.reply;
  json tasks = json::array();
  int changed = 0;
  for (const auto& choice : reply.tasks) {
    TT_ICHECK(choice->task >= 0 && static_cast<size_t>(choice->task) < kernels.size() &&
                  static_cast<size_t>(choice->chosen) < kernels[choice->task].variants.size() &&
                  choice->judged_seconds.size() == kernels[choice->task].variants.size(),
              "the model timing worker answered for a task or candidate it was not asked about");
    Kernel& k = kernels[static_cast<size_t>(choice->task)];
    const auto best = static_cast<size_t>(choice->chosen);
    const std::vector<double>& score = choice->judged_seconds;
    k.chosen = best;
    if (best != 0) {
      ++changed;
      k.entry.function = k.variant().function;
      k.entry.tuned_latency_s = k.variant().latency_s;
      char why[200];
      std::snprintf(why, sizeof why,
                    "the log's %s of its records%s: in the model its calls and the calls after "
                    "them took %.3f ms, against %.3f with the best",
                    ordinal(k.variant().rank).c_str(),
                    k.variant().is_default ? " (the default schedule)" : "", score[best] * 1e3,
                    score[0] * 1e3);
      k.entry.why = why;
    }
    json ms = json::array(), ranks = json::array();
    for (double x : score) ms.push_back(x * 1e3);
    for (const Variant& v : k.variants) ranks.push_back(v.rank);
    tasks.push_back({{"function", k.entry.function},
                     {"description", k.entry.description},
                     {"chosen", best},
                     {"log_ranks", ranks},
                     {"judged_ms", ms}});
  }
  return {{"tasks_compared", reply.tasks.size()},
          {"tasks_changed", changed},
          {"evaluations", reply.evaluations},
          {"seconds", reply.seconds},
          {"tasks", tasks}};
}

}  // namespace

json CompileReport::to_json() const {
  json list = json::array();
  for (const auto& t : tasks) {
    list.push_back({{"workload_key", t.workload_key},
                    {"function", t.function},
                    {"description", t.description},
                    {"occurrences", t.occurrences},
                    {"tuned", t.tuned},
                    {"why", t.why},
                    {"tuned_latency_s", t.tuned ? json(t.tuned_latency_s) : json(nullptr)},
                    {"flops", t.flops}});
  }
  json out = {{"tasks", list},
              {"kernels", kernels},
              {"planned_bytes", planned_bytes},
              {"intermediate_bytes", intermediate_bytes},
              {"weight_bytes", weight_bytes},
              {"seconds", seconds}};
  if (!fallback_reason.empty()) out["fallback_reason"] = fallback_reason;
  if (!warnings.empty()) out["warnings"] = warnings;
  if (!in_model.is_null()) out["in_model"] = in_model;
  return out;
}

namespace {

/// The options a compile is refused for, checked before any work: no target,
/// an output folder that is not ours to replace, no schedules to time.
void check_compile_options(const CompileOptions& options, const std::string& out_dir) {
  TT_CHECK(options.target, kInvalidArgument, "compiling needs a target");
  runtime::check_model_destination(out_dir, options.protect);
  try {
    validate(options.in_model);
  } catch (const UserError& e) {
    fail(e.kind(), "timing in the model: ", e.what());
  }
}

/// compile_model() once its options are checked; `start` is when the
/// compile began (partitioning included).
CompileReport compile_partition(const Partition& partition, const CompileOptions& options,
                                const std::string& out_dir,
                                std::chrono::steady_clock::time_point start) {
  TT_CHECK(partition.target.str() == options.target.str(), kInvalidArgument,
           "the model was partitioned for '", partition.target.str(), "', not for the target '",
           options.target.str(), "' it is compiled for");
  CompileReport report;
  report.fallback_reason = partition.fallback_reason;
  const Graph& g = partition.graph;
  const std::vector<FusedGroup>& groups = partition.groups;
  const ir::PassContext context = ir::PassContext::current();
  measure::ContextMatch match = options.any_pass_context ? measure::ContextMatch::any()
                                                         : measure::ContextMatch::only(context);

  // The partition's tasks, each with its schedules; a kernel's index is its task's.
  std::vector<Kernel> kernels;
  std::set<std::string> keys;
  std::vector<std::string> missing;
  for (const PartitionTask& t : partition.tasks) {
    const std::string& key = t.workload_key;
    keys.insert(key);
    Kernel k;
    k.task = t.task;
    k.entry.workload_key = key;
    k.entry.description = t.description;
    k.entry.occurrences = t.occurrences;
    k.entry.flops = t.flops;
    const std::string function = "k" + std::to_string(kernels.size());
    // Every schedule of the log, best first: one that no longer replays
    // (the log is older than this build's schedule rules) gives way to the
    // next, with a warning, rather than to the default schedule.
    std::vector<measure::Record> best =
        measure::best_k_for(options.records, k.task, match, SIZE_MAX);
    schedule::ComputeDAG dag(te::workload_tensors(k.task->workload));
    size_t skipped = 0;
    const auto candidates = static_cast<size_t>(options.in_model.candidates);
    // The default schedule, worked out when it is needed: for timing in the
    // model, or for a task the log has nothing for.
    std::optional<schedule::State> fallback;
    if (candidates > 1) fallback = search::default_schedule(k.task);
    auto add_variant = [&](const measure::Record& r, size_t rank) {
      std::string name =
          k.variants.empty() ? function : function + "v" + std::to_string(k.variants.size());
      k.variants.push_back({r.input.state,
                            name,
                            {},
                            r.result.median_cost(),
                            rank,
                            fallback && structural_equal(r.input.state, *fallback)});
    };
    for (size_t rank = 0; rank < best.size(); ++rank) {
      const measure::Record& r = best[rank];
      if (k.variants.size() == candidates) break;
      try {
        schedule::replay(dag, r.input.state);
      } catch (const UserError& e) {
        skipped += k.variants.empty();
        report.warnings.push_back("the record" +
                                  (r.line ? " on line " + std::to_string(r.line) : std::string()) +
                                  " of the log for " + key + " (" + k.entry.description +
                                  ") does not replay here, skipped: " + e.what());
        continue;
      }
      add_variant(r, rank);
    }
    // Timed in the model, the default schedule (which tune measures first)
    // is always among the candidates: measured alone, with its weights
    // evicted, a schedule can rank below ones that are slower where its
    // inputs arrive warm from the kernel before, and a tuned model must not
    // end slower than the untuned one.
    if (candidates > 1 && !k.variants.empty()) {
      if (std::none_of(k.variants.begin(), k.variants.end(),
                       [](const Variant& v) { return v.is_default; })) {
        for (size_t rank = 0; rank < best.size(); ++rank) {
          if (!structural_equal(best[rank].input.state, *fallback)) continue;
          if (k.variants.size() == candidates) k.variants.pop_back();
          add_variant(best[rank], rank);
          break;
        }
      }
    }
    if (!k.variants.empty()) {
      k.entry.tuned = true;
      k.entry.tuned_latency_s = k.variants[0].latency_s;
      k.entry.why = skipped ? "the log's best of its records that replays here (" +
                                  std::to_string(skipped) + " better ones do not)"
                            : "the log's best of its records";
    } else if (!best.empty()) {
      k.entry.why = "none of the log's " + std::to_string(best.size()) +
                    " schedules for it replays here (see the warnings)";
    } else {
      k.entry.why = options.records.empty()
                        ? "no log given"
                        : measure::why_no_record(options.records, k.task, match);
    }
    if (!k.entry.tuned) {
      missing.push_back(key + " (" + k.entry.description + "): " + k.entry.why);
      if (!fallback) fallback = search::default_schedule(k.task);
      k.variants.push_back({*fallback, function, {}, 0, 0, true});
    }
    k.entry.function = function;
    kernels.push_back(std::move(k));
  }
  // A log whose records of this model's tasks are all for another target
  // is the wrong log or the wrong --target, not a reason for default schedules.
  if (!options.records.empty() && missing.size() == kernels.size()) {
    std::set<std::string> others;
    for (const measure::Record& r : options.records) {
      if (r.result.ok() && keys.count(r.input.task.workload_key()) &&
          r.input.task->target.str() != options.target.str()) {
        others.insert(r.input.task->target.str());
      }
    }
    if (!others.empty()) {
      fail(ErrorKind::kInvalidArgument, "the log's records of this model's tasks are for ",
           others.size() == 1 ? "another target, " : "other targets: ",
           join({others.begin(), others.end()}, "; "), ", not '", options.target.str(),
           "': compile with that --target, or give a log tuned for this one");
    }
  }
  if (options.fail_on_default && !missing.empty()) {
    fail(ErrorKind::kNotFound, missing.size(), " of ", kernels.size(),
         " tasks have no tuned schedule (--fail-on-default): ", missing.front(),
         missing.size() > 1 ? " (and " + std::to_string(missing.size() - 1) + " more)" : "");
  }

  // One module: every kernel and its packers, and the bytes of each one's
  // arguments; built as units compiled in parallel.
  std::unique_ptr<codegen::KernelSources> sources = codegen::kernel_sources(options.target);
  std::vector<size_t> all;
  std::vector<runtime::PlanFunction> functions;
  auto add_function = [&](const lower::PrimFunc& f) {
    auto fn = make_node<runtime::PlanFunctionNode>();
    fn->name = f->name;
    fn->arg_bytes = lower::argument_bytes(f);
    functions.emplace_back(std::move(fn));
    all.push_back(sources->add(f));
  };
  for (Kernel& k : kernels) {
    schedule::ComputeDAG dag(te::workload_tensors(k.task->workload));
    for (Variant& v : k.variants) {
      schedule::LoopState loops = schedule::replay(dag, v.state);
      add_function(lower::lower(loops, v.function));
      v.packers = lower::lower_packers(loops, v.function);
      for (const auto& p : v.packers) add_function(lower::run_pipeline(p.func));
    }
  }
  codegen::Module module = codegen::build_in_units(*sources, all, options.module_options);
  std::optional<std::string> library = read_file_if_exists(module.library_path());
  TT_CHECK(library, kIO, "the built library ", module.library_path(), " cannot be read");

  // The plan for the variants chosen now: buffers (inputs, constants, packed
  // constants, intermediates, outputs) and steps.
  std::string weights;
  // With all_variants, the plan also holds every variant's packed weights,
  // and variant_calls gets each kernel step's call under each variant.
  auto make_plan = [&](bool all_variants, VariantCalls* variant_calls) -> runtime::ModelPlan {
    weights.clear();
    auto plan = make_node<runtime::ModelPlanNode>();
    plan->target = options.target.str();
    plan->functions = functions;

    std::vector<runtime::PlanBuffer>& buffers = plan->buffers;
    std::unordered_map<const Object*, int64_t> buffer_of;
    auto add_buffer = [&](runtime::BufferKind kind, int64_t bytes, ir::DataType dtype,
                          std::vector<int64_t> shape = {}) {
      auto b = make_node<runtime::PlanBufferNode>();
      b->kind = kind;
      b->bytes = bytes;
      b->dtype = dtype;
      b->shape = std::move(shape);
      buffers.emplace_back(b);
      return std::make_pair(static_cast<int64_t>(buffers.size()) - 1, b);
    };
    for (const auto& in : g->inputs) {
      int64_t id =
          add_buffer(runtime::BufferKind::kInput,
                     checked_bytes(in->shape, in->dtype.bytes(), "input '" + in->name + "'"),
                     in->dtype, in->shape)
              .first;
      buffer_of[in.get()] = id;
      plan->inputs.push_back(plan_tensor(in->name, in->shape, in->dtype, id));
    }
    auto constant_buffer = [&](const Value& v) {
      auto it = buffer_of.find(v.get());
      if (it != buffer_of.end()) return it->second;
      const auto* c = dynamic_cast<const ConstantNode*>(v.get());
      TT_ICHECK(c, "a value read by a kernel has no buffer");
      const te::NDArray& a = c->data.array();
      int64_t offset = aligned(static_cast<int64_t>(weights.size()));
      weights.resize(static_cast<size_t>(offset), '\0');
      weights.append(static_cast<const char*>(a.data()), a.nbytes());
      auto [id, b] = add_buffer(runtime::BufferKind::kConstant, static_cast<int64_t>(a.nbytes()),
                                a.dtype(), a.shape());
      b->offset = offset;
      b->name = c->name;
      buffer_of[v.get()] = id;
      return id;
    };
    // Lifetimes of the intermediates, in group order.
    std::unordered_map<const Object*, int> output_index;
    for (size_t i = 0; i < g->outputs.size(); ++i)
      output_index.emplace(g->outputs[i].get(), static_cast<int>(i));
    // A view's memory is its operand's: uses of the view are uses of the
    // value it views (through chains of views).
    std::unordered_map<const Object*, const Object*> viewed;
    for (const FusedGroup& group : groups) {
      if (!group.is_view()) continue;
      const Object* in = group.inputs[0].get();
      auto it = viewed.find(in);
      viewed[group.calls[0].get()] = it == viewed.end() ? in : it->second;
    }
    auto root_of = [&](const Object* v) {
      auto it = viewed.find(v);
      return it == viewed.end() ? v : it->second;
    };
    std::unordered_map<const Object*, int> last_use;
    for (size_t gi = 0; gi < groups.size(); ++gi) {
      for (const auto& v : groups[gi].inputs) last_use[root_of(v.get())] = static_cast<int>(gi);
    }
    // A graph output that is a view keeps what it views alive to the end.
    for (const auto& o : g->outputs) {
      if (viewed.count(o.get())) last_use[root_of(o.get())] = static_cast<int>(groups.size());
    }
    ArenaPlanner arena;
    int64_t intermediate_bytes = 0;
    std::map<std::pair<int64_t, std::string>, int64_t> packed_of;
    auto add_step = [&](std::string function, std::vector<int64_t> args, int64_t from = -1,
                        int64_t to = -1) {
      auto step = make_node<runtime::PlanStepNode>();
      step->function = std::move(function);
      step->args = std::move(args);
      step->copy_from = from;
      step->copy_to = to;
      plan->steps.emplace_back(std::move(step));
    };
    for (size_t gi = 0; gi < groups.size(); ++gi) {
      const FusedGroup& group = groups[gi];
      if (group.is_view()) {
        const Value& in = group.inputs[0];
        const Ref<CallNode>& view = group.calls[0];
        int64_t source = buffer_of.count(in.get()) ? buffer_of.at(in.get()) : constant_buffer(in);
        int64_t offset = *view_offset(*view);
        int64_t bytes =
            checked_bytes(view->shape, view->dtype.bytes(), "the view '" + view->name + "'");
        if (offset == 0 && bytes == buffers[static_cast<size_t>(source)]->bytes) {
          buffer_of[view.get()] = source;  // all of it: the same buffer
          continue;
        }
        // A part of it: a view buffer, into the buffer that holds the memory.
        if (buffers[static_cast<size_t>(source)]->kind == runtime::BufferKind::kView) {
          offset += buffers[static_cast<size_t>(source)]->offset;
          source = buffers[static_cast<size_t>(source)]->source;
        }
        auto [id, b] = add_buffer(runtime::BufferKind::kView, bytes, view->dtype);
        b->source = source;
        b->offset = offset;
        buffer_of[view.get()] = id;
        continue;
      }
      const Kernel& kernel = kernels[static_cast<size_t>(partition.task_of_group[gi])];
      std::vector<int64_t> inputs_of_group;
      for (const auto& v : group.inputs) {
        inputs_of_group.push_back(buffer_of.count(v.get()) ? buffer_of.at(v.get())
                                                           : constant_buffer(v));
      }
      // Each variant's arguments: its packed weights in place of the weights.
      std::vector<std::vector<int64_t>> args_of(kernel.variants.size());
      std::vector<bool> planned(kernel.variants.size(), false);
      for (size_t vi = 0; vi < kernel.variants.size(); ++vi) {
        if (!all_variants && vi != kernel.chosen) continue;
        planned[vi] = true;
        args_of[vi] = inputs_of_group;
        for (const auto& p : kernel.variants[vi].packers) {
          int64_t source = inputs_of_group[static_cast<size_t>(p.input)];
          int64_t& packed = packed_of[{source, p.func->name}];
          if (!packed) {
            const Value& v = group.inputs[static_cast<size_t>(p.input)];
            auto [id, b] = add_buffer(
                runtime::BufferKind::kPacked,
                checked_mul(p.elements, v->dtype.bytes(), "a packed weight of " + p.func->name),
                v->dtype);
            b->source = source;
            b->packer = p.func->name;
            packed = id;
          }
          args_of[vi][static_cast<size_t>(p.input)] = packed;
        }
      }
      const Ref<CallNode>& out = group.calls.back();
      int64_t bytes =
          checked_bytes(out->shape, out->dtype.bytes(), "the value '" + out->name + "'");
      int64_t id;
      if (output_index.count(out.get()) && !buffer_of.count(out.get())) {
        id = add_buffer(runtime::BufferKind::kOutput, bytes, out->dtype, out->shape).first;
      } else {
        auto lu = last_use.find(out.get());
        int last = lu == last_use.end() ? static_cast<int>(gi) : lu->second;
        int64_t offset = arena.place(bytes, static_cast<int>(gi), last);
        auto [arena_id, b] = add_buffer(runtime::BufferKind::kArena, bytes, out->dtype);
        b->offset = offset;
        id = arena_id;
        intermediate_bytes = checked_add(intermediate_bytes, aligned(bytes), "the intermediates");
      }
      buffer_of[out.get()] = id;
      for (size_t vi = 0; vi < args_of.size(); ++vi) {
        if (planned[vi]) args_of[vi].push_back(id);
      }
      add_step(kernel.variant().function, args_of[kernel.chosen]);
      if (variant_calls) {
        StepVariants step{static_cast<size_t>(partition.task_of_group[gi]), {}};
        for (size_t vi = 0; vi < kernel.variants.size(); ++vi) {
          step.calls.emplace_back(kernel.variants[vi].function, args_of[vi]);
        }
        variant_calls->push_back(std::move(step));
      }
    }
    // Graph outputs: the buffer a group wrote, or a copy of an input, a
    // constant or another output.
    std::set<int64_t> used_outputs;
    for (size_t i = 0; i < g->outputs.size(); ++i) {
      const Value& v = g->outputs[i];
      int64_t id = buffer_of.count(v.get()) ? buffer_of.at(v.get()) : constant_buffer(v);
      if (buffers[static_cast<size_t>(id)]->kind != runtime::BufferKind::kOutput ||
          !used_outputs.insert(id).second) {
        int64_t copy = add_buffer(runtime::BufferKind::kOutput,
                                  checked_bytes(v->shape, v->dtype.bytes(),
                                                "output '" + g->output_names[i] + "'"),
                                  v->dtype, v->shape)
                           .first;
        add_step("", {}, id, copy);
        id = copy;
        used_outputs.insert(id);
      }
      plan->outputs.push_back(plan_tensor(g->output_names[i], v->shape, v->dtype, id));
    }
    plan->arena_bytes = arena.size();
    plan->weights_bytes = static_cast<int64_t>(weights.size());
    report.kernels = static_cast<int64_t>(plan->steps.size());
    report.planned_bytes = arena.size();
    report.intermediate_bytes = intermediate_bytes;
    report.weight_bytes = static_cast<int64_t>(weights.size());
    // Checked where it is used: write_model_folder and CompiledModel::from_files.
    return runtime::ModelPlan(plan);
  };

  runtime::ModelPlan plan = make_plan(false, nullptr);
  bool candidates = std::any_of(kernels.begin(), kernels.end(),
                                [](const Kernel& k) { return k.variants.size() > 1; });
  if (candidates) {
    // The model with every variant (and its packed weights), the best in
    // place, written where the result goes: the worker loads it from there,
    // checked as any compiled model is, and the final model replaces it.
    VariantCalls calls;
    runtime::ModelPlan all_variants = make_plan(true, &calls);
    runtime::write_model_folder(out_dir, {all_variants, *library, weights}, options.protect);
    report.in_model = choose_in_model(kernels, calls, out_dir, options, report.warnings);
    report.in_model["candidates_per_task"] = options.in_model.candidates;
    plan = make_plan(false, nullptr);
  }
  report.tasks.clear();
  for (const auto& k : kernels) report.tasks.push_back(k.entry);
  report.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  auto with_report = make_node<runtime::ModelPlanNode>(*plan);
  with_report->report = report.to_json();
  runtime::write_model_folder(out_dir, {runtime::ModelPlan(with_report), *library, weights},
                              options.protect);
  return report;
}

}  // namespace

CompileReport compile_model(const Partition& partition, const CompileOptions& options,
                            const std::string& out_dir) {
  auto start = std::chrono::steady_clock::now();
  check_compile_options(options, out_dir);
  return compile_partition(partition, options, out_dir, start);
}

CompileReport compile_model(const Graph& model, const CompileOptions& options,
                            const std::string& out_dir) {
  auto start = std::chrono::steady_clock::now();
  check_compile_options(options, out_dir);
  return compile_partition(partition_model(model, options.target), options, out_dir, start);
}

}  // namespace tensortune::graph
