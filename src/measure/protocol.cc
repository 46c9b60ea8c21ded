#include "tensortune/measure/protocol.h"

#include "tensortune/measure/model_timing.h"
#include "tensortune/object/serialize.h"
#include "tensortune/te/workload.h"

namespace tensortune::measure {

void RunnerOptions::declare(FieldList<RunnerOptions>& f) {
  f.def("number", &RunnerOptions::number)
      .option("number", "kernel calls per measurement (raised to reach --min-repeat-ms)")
      .range(1, 1 << 30)
      .def("repeat", &RunnerOptions::repeat)
      .option("repeat", "measurements per candidate, one cost each")
      .range(1, 100000)
      .def("min_repeat_ms", &RunnerOptions::min_repeat_ms)
      .option("min-repeat-ms", "lengthen a measurement shorter than this with more calls")
      .range(0, 1000000)
      .def("cooldown_ms", &RunnerOptions::cooldown_ms)
      .option("cooldown-ms", "pause between measurements")
      .range(0, 1000000)
      .def("flush_cache", &RunnerOptions::flush_cache)
      .option("flush-cache", "evict the kernel's buffers from the caches before each measurement")
      .def("flush_weights", &RunnerOptions::flush_weights)
      .def("fresh_activations", &RunnerOptions::fresh_activations)
      .option("fresh-activations",
              "write the other inputs (activations) again before every call, a share on each of "
              "the kernel's threads, as the kernel before it leaves them in a compiled model "
              "(every input of a task without constant inputs)")
      .def("check", &RunnerOptions::check)
      .option("check", "compare each candidate's output with the reference evaluator")
      .def("seed", &RunnerOptions::seed)
      .def("cache_dir", &RunnerOptions::cache_dir)
      .def_added_later("simulate_ms", &RunnerOptions::simulate_ms)
      .range(-1, 3600 * 1000);
}

void HelloRequest::declare(FieldList<HelloRequest>& f) {
  f.def("protocol_version", &HelloRequest::protocol_version);
}

void WorkerInfo::declare(FieldList<WorkerInfo>& f) {
  f.def("protocol_version", &WorkerInfo::protocol_version)
      .def("build_id", &WorkerInfo::build_id)
      .def("pid", &WorkerInfo::pid);
}

void CheckRequest::declare(FieldList<CheckRequest>& f) {
  f.def("task", &CheckRequest::task)
      .def("pass_context", &CheckRequest::pass_context)
      .def("workload_hash", &CheckRequest::workload_hash)
      .def("build", &CheckRequest::build)
      .validate([](const CheckRequest& r) {
        TT_CHECK(r.task, kInvalidArgument, "a check request needs a task");
      });
}

void CheckReply::declare(FieldList<CheckReply>& f) { f.def("problems", &CheckReply::problems); }

void BuildRequest::declare(FieldList<BuildRequest>& f) {
  f.def("task", &BuildRequest::task)
      .def("states", &BuildRequest::states)
      .def("pass_context", &BuildRequest::pass_context)
      .def("cache_dir", &BuildRequest::cache_dir)
      .def("workload_hash", &BuildRequest::workload_hash)
      .def("simulate", &BuildRequest::simulate)
      .validate([](const BuildRequest& r) {
        TT_CHECK(r.task && r.pass_context, kInvalidArgument,
                 "a build request needs a task and a pass context");
        for (const auto& s : r.states)
          TT_CHECK(s, kInvalidArgument, "a build request holds a null state");
      });
}

void BuildResult::declare(FieldList<BuildResult>& f) {
  f.def("error_code", &BuildResult::error_code)
      .def("error_message", &BuildResult::error_message)
      .def("library", &BuildResult::library)
      .def("library_sha256", &BuildResult::library_sha256)
      .def("function", &BuildResult::function)
      .def("build_seconds", &BuildResult::build_seconds)
      .def("pass_context_hash", &BuildResult::pass_context_hash)
      .def("instruments", &BuildResult::instruments)
      .def("packed_inputs", &BuildResult::packed_inputs)
      .def("packers", &BuildResult::packers)
      .def("packed_elements", &BuildResult::packed_elements)
      .def("program_hash", &BuildResult::program_hash)
      .def("host", &BuildResult::host)
      .def("rank", &BuildResult::rank)
      .validate([](const BuildResult& r) {
        TT_CHECK(r.packers.size() == r.packed_inputs.size() &&
                     r.packed_elements.size() == r.packed_inputs.size(),
                 kInvalidArgument, "a build result needs one packer and size per packed input");
      });
}

void BuildReply::declare(FieldList<BuildReply>& f) {
  f.def("results", &BuildReply::results)
      .def("task_hash", &BuildReply::task_hash)
      .def("task_nodes", &BuildReply::task_nodes)
      .validate([](const BuildReply& r) {
        for (const auto& b : r.results)
          TT_CHECK(b, kInvalidArgument, "a build reply holds a null result");
      });
}

void RunRequest::declare(FieldList<RunRequest>& f) {
  f.def("task", &RunRequest::task)
      .def("library", &RunRequest::library)
      .def("library_sha256", &RunRequest::library_sha256)
      .def("function", &RunRequest::function)
      .def("packed_inputs", &RunRequest::packed_inputs)
      .def("packers", &RunRequest::packers)
      .def("packed_elements", &RunRequest::packed_elements)
      .def("options", &RunRequest::options)
      .def("workload_hash", &RunRequest::workload_hash)
      .def_added_later("abandon_above_s", &RunRequest::abandon_above_s)
      .def("program_hash", &RunRequest::program_hash)
      .validate([](const RunRequest& r) {
        TT_CHECK(r.task && r.options, kInvalidArgument, "a run request needs a task and options");
        TT_CHECK(r.packers.size() == r.packed_inputs.size() &&
                     r.packed_elements.size() == r.packed_inputs.size(),
                 kInvalidArgument, "a run request needs one packer and size per packed input");
      });
}

void PrepareRequest::declare(FieldList<PrepareRequest>& f) {
  f.def("task", &PrepareRequest::task)
      .def("options", &PrepareRequest::options)
      .def("workload_hash", &PrepareRequest::workload_hash)
      .validate([](const PrepareRequest& r) {
        TT_CHECK(r.task && r.options, kInvalidArgument,
                 "a prepare request needs a task and options");
      });
}

void RunOutcome::declare(FieldList<RunOutcome>& f) {
  f.def("error_code", &RunOutcome::error_code)
      .def("error_message", &RunOutcome::error_message)
      .def("costs", &RunOutcome::costs)
      .def("run_seconds", &RunOutcome::run_seconds)
      .def("max_error", &RunOutcome::max_error)
      .def_added_later("kernel_seconds", &RunOutcome::kernel_seconds)
      .def_added_later("host", &RunOutcome::host)
      .def_added_later("rank", &RunOutcome::rank);
}

void RequestError::declare(FieldList<RequestError>& f) {
  f.def("kind", &RequestError::kind).def("message", &RequestError::message);
}

TT_REGISTER_NODE(RunnerOptions);
TT_REGISTER_NODE(HelloRequest);
TT_REGISTER_NODE(WorkerInfo);
TT_REGISTER_NODE(CheckRequest);
TT_REGISTER_NODE(CheckReply);
TT_REGISTER_NODE(BuildRequest);
TT_REGISTER_NODE(BuildResult);
TT_REGISTER_NODE(BuildReply);
TT_REGISTER_NODE(RunRequest);
TT_REGISTER_NODE(PrepareRequest);
TT_REGISTER_NODE(RunOutcome);
TT_REGISTER_NODE(RequestError);

std::string encode(const Object& message) {
  // A non-owning handle: saving only reads the message and what it refers to.
  return save_string(ObjectPtr(ObjectPtr(), &message));
}

ObjectPtr decode_any(std::string_view payload, std::string_view what) {
  ObjectPtr node;
  try {
    node = load_string(payload);
  } catch (const UserError& e) {
    fail(ErrorKind::kParse, "unreadable ", what, ": ", e.what());
  }
  if (auto error = std::dynamic_pointer_cast<const RequestError>(node)) {
    // A bug on the worker's side is tensortune's, not the request's.
    if (error->kind == error_kind_name(ErrorKind::kInternal)) {
      throw InternalError("a worker's " + std::string(what) + " reports a bug: " + error->message);
    }
    fail(ErrorKind::kRuntime, "the worker refused the request (", error->kind,
         "): ", error->message);
  }
  TT_CHECK(node, kParse, "the ", what, " is a null graph");
  return node;
}

void wrong_message_type(const ObjectPtr& node, std::string_view what, std::string_view expected) {
  fail(ErrorKind::kParse, "the ", what, " is a ", node->type_key(), ", not a ", expected);
}

double simulated_cost(const Hash64& program_hash) {
  // Between 10 and 20 microseconds: spread enough for a search to prefer
  // some programs, and small enough that no time budget is spent on it.
  constexpr uint64_t kSteps = 1000003;
  return 1e-5 * (1.0 + static_cast<double>(program_hash.value % kSteps) / kSteps);
}

Hash64 workload_hash(const te::Task& task) { return Hash64(te::workload_dag_hash(task->workload)); }

}  // namespace tensortune::measure
