/// \file
/// The wire format between a tuner and tensortune-worker: every request and
/// reply is one reflected node saved as one graph (object/serialize.h), so
/// its form comes from its field list like every other value that crosses a
/// process boundary, and a task's DAG arrives with its sharing intact. The
/// worker's side of the exchange is worker_service.h.
///
///   HelloRequest   -> WorkerInfo    sent by the pool to every new worker,
///                                   which is refused unless protocol version
///                                   and build identity match the tuner's
///   CheckRequest   -> CheckReply    before a run: can this worker take the
///                                   task and context (workload, its DAG,
///                                   instruments, options, target kinds,
///                                   back end)?
///   BuildRequest   -> BuildReply    states of one task built into one module
///   RunRequest     -> RunOutcome    a built kernel timed (and checked)
///   PrepareRequest -> RunOutcome    inputs drawn and reference outputs made
///                                   for a task, outside any candidate's timeout
///   ModelTimingRequest -> ModelTimingReply
///                                   a compiled model's candidate kernels timed
///                                   in place (model_timing.h)
/// A request the worker cannot read or serve as a whole is answered with a
/// RequestError. HelloRequest and WorkerInfo never change shape, so that
/// workers of any version can be told apart.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "tensortune/ir/pass_context.h"
#include "tensortune/measure/measure_result.h"

namespace tensortune::measure {

/// The version of this protocol; a worker of another version is refused.
inline constexpr int64_t kProtocolVersion = 9;

/// How candidates are timed (all of it travels in the run request).
struct RunnerOptions : Object {
  int number = 1;         ///< kernel calls per measurement (raised to reach min_repeat_ms)
  int repeat = 3;         ///< measurements; one cost each
  int min_repeat_ms = 0;  ///< a measurement shorter than this is redone with more calls
  int cooldown_ms = 0;    ///< pause between measurements
  bool flush_cache =
      false;  ///< evict the kernel's buffers from the CPU caches before each measurement
  /// Evict the constant inputs (a model's weights) from the CPU caches before
  /// every call, and time the calls alone: a compiled model reads each
  /// kernel's weights once per run, from memory.
  bool flush_weights = false;
  /// Write the other inputs (a model's activations) again before every call,
  /// split across the kernel's threads, and time the calls alone: in a
  /// compiled model a kernel's activations were just written by the kernel
  /// before it, part of them in each core's cache.
  bool fresh_activations = false;
  bool check = false;  ///< compare the output with the reference evaluator first
  uint64_t seed = 0;   ///< inputs are te::random_inputs(seed): the same for every candidate
  /// Where run workers keep reference outputs for check, so that a restarted
  /// worker reads them instead of evaluating again; "" for codegen::default_cache_dir().
  std::string cache_dir;
  /// For testing a tuner without timing anything (tensortune tune
  /// --simulate-measure): -1 times kernels; otherwise a run waits this many
  /// milliseconds and returns simulated_cost(BuildResult::program_hash).
  int simulate_ms = -1;
  TT_NODE(RunnerOptions, "measure.RunnerOptions")
  static void declare(FieldList<RunnerOptions>& f);
};

/// Asks a new worker who it is.
struct HelloRequest : Object {
  int64_t protocol_version = kProtocolVersion;
  TT_NODE(HelloRequest, "measure.HelloRequest")
  static void declare(FieldList<HelloRequest>& f);
};

/// Who a worker is.
struct WorkerInfo : Object {
  int64_t protocol_version = 0;
  std::string build_id;  ///< support/build_info.h
  int64_t pid = 0;
  TT_NODE(WorkerInfo, "measure.WorkerInfo")
  static void declare(FieldList<WorkerInfo>& f);
};

/// Can the worker take `task` (and, for builds, lower under `pass_context`)?
struct CheckRequest : Object {
  te::Task task;
  ir::PassContext pass_context;  ///< null for a run worker
  Hash64 workload_hash;          ///< te::workload_hash(task->workload) in the tuner
  bool build = false;            ///< a back end for the target kind is needed too
  TT_NODE(CheckRequest, "measure.CheckRequest")
  static void declare(FieldList<CheckRequest>& f);
};

/// Every reason the worker cannot take the task; none when it can.
struct CheckReply : Object {
  std::vector<std::string> problems;
  TT_NODE(CheckReply, "measure.CheckReply")
  static void declare(FieldList<CheckReply>& f);
};

/// Build `states` of `task` under `pass_context` into one module.
struct BuildRequest : Object {
  te::Task task;
  std::vector<schedule::State> states;
  ir::PassContext pass_context;
  std::string cache_dir;  ///< the module cache; "" for codegen::default_cache_dir()
  Hash64 workload_hash;   ///< a worker whose workload hashes otherwise refuses the request
  /// Replay and lower each state but compile nothing: its result holds only
  /// program_hash (RunnerOptions::simulate_ms).
  bool simulate = false;
  TT_NODE(BuildRequest, "measure.BuildRequest")
  static void declare(FieldList<BuildRequest>& f);
};

/// What building one candidate gave.
struct BuildResult : Object {
  ErrorCode error_code = ErrorCode::kNoError;
  std::string error_message;
  std::string library;         ///< the shared library holding the kernel
  std::string library_sha256;  ///< its bytes' hash, checked before a runner loads it
  std::string function;        ///< the kernel's name in it
  double build_seconds = 0;
  Hash64 pass_context_hash;  ///< of the context the worker had in force
  /// The layout-rewritten inputs: their indices, packing functions (in the
  /// same library) and packed sizes. The runner packs them before timing.
  std::vector<int64_t> packed_inputs;
  std::vector<std::string> packers;
  std::vector<int64_t> packed_elements;
  /// What the instruments saw while this candidate was lowered, by name.
  nlohmann::json instruments = nlohmann::json::object();
  /// structural_hash of the lowered kernel, in a simulated build.
  Hash64 program_hash;
  std::string host;   ///< the machine that built it
  int64_t rank = -1;  ///< the MPI rank that built it; -1 outside an MPI job
  TT_NODE(BuildResult, "measure.BuildResult")
  static void declare(FieldList<BuildResult>& f);
};

/// One result per state of the request, in order.
struct BuildReply : Object {
  std::vector<Ref<BuildResult>> results;
  /// structural_hash of the task the worker loaded: equal to the tuner's
  /// unless something (a target's host, a workload) changed on the way.
  Hash64 task_hash;
  /// The number of distinct nodes of that task: a node shared in the tuner's
  /// graph but duplicated in the worker's (a DAG that fell apart on the way)
  /// shows here, where structural equality cannot see it.
  int64_t task_nodes = 0;
  TT_NODE(BuildReply, "measure.BuildReply")
  static void declare(FieldList<BuildReply>& f);
};

/// Time (and with options.check, check) one built kernel of `task`.
struct RunRequest : Object {
  te::Task task;
  std::string library;
  std::string library_sha256;  ///< the runner loads the library only if it matches
  std::string function;
  /// As BuildResult: inputs to pack with these functions before the kernel runs.
  std::vector<int64_t> packed_inputs;
  std::vector<std::string> packers;
  std::vector<int64_t> packed_elements;
  Ref<RunnerOptions> options;
  Hash64 workload_hash;
  /// When one call in the first measurement takes longer than this (0:
  /// never), the candidate is timed no further: that measurement is its one
  /// cost. A tuner sets it a few times its best time so far, so a hopeless
  /// candidate costs one measurement instead of `repeat`.
  double abandon_above_s = 0;
  Hash64 program_hash;  ///< BuildResult::program_hash, for a simulated run
  TT_NODE(RunRequest, "measure.RunRequest")
  static void declare(FieldList<RunRequest>& f);
};

/// Draw the inputs of `task` and, with options.check, evaluate (or load) its
/// reference outputs, which can take far longer than running a candidate (a
/// 1024^3 matmul: about 30 s). Sent once per task before its candidates, with
/// a timeout of its own; the reply is a RunOutcome without costs.
struct PrepareRequest : Object {
  te::Task task;
  Ref<RunnerOptions> options;
  Hash64 workload_hash;
  TT_NODE(PrepareRequest, "measure.PrepareRequest")
  static void declare(FieldList<PrepareRequest>& f);
};

/// What running one built candidate gave.
struct RunOutcome : Object {
  ErrorCode error_code = ErrorCode::kNoError;
  std::string error_message;
  std::vector<double> costs;  ///< seconds per call, one per repeat
  double run_seconds = 0;
  double kernel_seconds = 0;  ///< of run_seconds, inside the kernel's warm-up and timed calls
  std::optional<double> max_error;
  std::string host;   ///< the machine that ran it
  int64_t rank = -1;  ///< the MPI rank that ran it; -1 outside an MPI job
  TT_NODE(RunOutcome, "measure.RunOutcome")
  static void declare(FieldList<RunOutcome>& f);
};

/// The answer to a request the worker could not read or serve as a whole.
struct RequestError : Object {
  std::string kind;  ///< the ErrorKind's name; "internal" for a bug of tensortune
  std::string message;
  TT_NODE(RequestError, "measure.RequestError")
  static void declare(FieldList<RequestError>& f);
};

/// `message` as one frame's payload.
std::string encode(const Object& message);

/// The reply in `payload`, which must be a T; a RequestError becomes an error
/// of kRuntime quoting it (what = "build reply", "run reply", ...), or an
/// InternalError when the worker reported one, and anything else a kParse
/// error naming `what`.
template <class T>
T decode(std::string_view payload, std::string_view what);

/// decode without the type check: the node `payload` holds.
ObjectPtr decode_any(std::string_view payload, std::string_view what);
/// The kParse error of decode for a node of another type.
[[noreturn]] void wrong_message_type(const ObjectPtr& node, std::string_view what,
                                     std::string_view expected);

template <class T>
T decode(std::string_view payload, std::string_view what) {
  ObjectPtr node = decode_any(payload, what);
  auto typed = std::dynamic_pointer_cast<const T>(node);
  if (!typed) wrong_message_type(node, what, T::kTypeKey);
  return *typed;
}

/// The cost in seconds a simulated run (RunnerOptions::simulate_ms) reports
/// for a program: a function of its hash alone, so that equal programs cost
/// the same wherever and however often they are "measured".
double simulated_cost(const Hash64& program_hash);

/// workload_hash of `task`'s workload as CheckRequest and friends carry it.
Hash64 workload_hash(const te::Task& task);

}  // namespace tensortune::measure
