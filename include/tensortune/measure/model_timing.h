/// \file
/// Timing a compiled model's candidate kernels where they run: inside the
/// model. `compile --in-model-candidates K` writes the model with each
/// task's K best schedules in its library and asks a worker (protocol.h) to
/// put each task's candidates in place in turn (tasks whose calls lie more
/// than two steps apart in the same runs), time the model, and keep
/// for each task the candidate under which its calls, and the calls right
/// after them, take least. Alone, a kernel is timed with its inputs warm in
/// its own caches; in the model they were just written by the kernel before
/// it, split between the cores as that kernel splits its loops.
///
/// The work runs in a worker of the measure layer, with the runner's
/// options, so a kernel that crashes or hangs there ends that worker, not
/// the compiler, and comes back as a typed error.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "tensortune/measure/protocol.h"
#include "tensortune/measure/worker_pool.h"

namespace tensortune::measure {

/// A kernel step of the plan and the calls it can make, best (the one in
/// the plan) first.
struct CandidateStepNode : Object {
  int64_t step = 0;                    ///< index in the plan's steps
  int64_t task = 0;                    ///< the task the kernel computes: its steps change together
  std::vector<std::string> functions;  ///< per candidate: its kernel in the library
  std::vector<std::vector<int64_t>> args;  ///< per candidate: the buffers it is called on
  TT_NODE(CandidateStepNode, "measure.CandidateStep")
  static void declare(FieldList<CandidateStepNode>& f);
};

/// Choose each task's candidate inside the compiled model at `model_dir`.
struct ModelTimingRequest : Object {
  std::string model_dir;  ///< a folder compile wrote; loaded with every check
  std::vector<Ref<CandidateStepNode>> steps;
  /// repeat: timed runs of the model per evaluation (their median per step);
  /// cooldown_ms: pause before each evaluation; flush_cache: evict the
  /// caches (twice the last level's size written) before each timed run;
  /// seed: the random inputs. The others do not apply to a whole model.
  Ref<RunnerOptions> timing;
  int rounds = 3;  ///< interleaved rounds over a task's candidates
  /// What a candidate must save, in the median over rounds, to replace the
  /// best; it must also be faster in every round: the machine's speed drifts
  /// between rounds, and noise must not pick.
  double margin = 0.03;
  /// Tasks whose calls take less than this share of the model are not
  /// compared: no gain there shows above noise.
  double min_share = 0.01;
  int threads = 0;  ///< of the parallel loops (0: the target's cores)
  TT_NODE(ModelTimingRequest, "measure.ModelTimingRequest")
  static void declare(FieldList<ModelTimingRequest>& f);
};

/// What timing one task's candidates in the model found.
struct TaskChoiceNode : Object {
  int64_t task = 0;
  int64_t chosen = 0;                  ///< index of the candidate kept (0: the best alone)
  std::vector<double> judged_seconds;  ///< per candidate: its calls and the next, median of rounds
  TT_NODE(TaskChoiceNode, "measure.TaskChoice")
  static void declare(FieldList<TaskChoiceNode>& f);
};

struct ModelTimingReply : Object {
  std::vector<Ref<TaskChoiceNode>> tasks;  ///< the tasks compared, largest share first
  int64_t evaluations = 0;                 ///< timed evaluations of the model
  double seconds = 0;
  TT_NODE(ModelTimingReply, "measure.ModelTimingReply")
  static void declare(FieldList<ModelTimingReply>& f);
};

/// The worker's side: loads the model and chooses. A request that does not
/// fit the model (a step, function or buffer it lacks) is a kInvalidArgument
/// error naming it.
ModelTimingReply time_candidates_in_model(const ModelTimingRequest& request);

/// How compile times candidates in the model; its option fields are flags of
/// compile (--in-model-*).
struct ModelTimingOptions : Object {
  /// Schedules per task taken from the log, best first: with more than one,
  /// a worker times the model on this machine with each in place and each
  /// task keeps the one fastest in the model.
  int64_t candidates = 1;
  /// repeat is timed runs per evaluation (see ModelTimingRequest::timing).
  RunnerOptions timing = default_timing();
  /// How long the worker may take for each evaluation the request can need
  /// (one, then rounds times candidates for every task), plus loading the
  /// model: one more.
  std::chrono::milliseconds per_evaluation{std::chrono::seconds(10)};
  WorkerPoolOptions pool;

  static RunnerOptions default_timing() {
    RunnerOptions o;
    o.repeat = 7;
    return o;
  }
  TT_NODE(ModelTimingOptions, "measure.ModelTimingOptions")
  static void declare(FieldList<ModelTimingOptions>& f);
};

/// The reply of a fresh worker (handshaken as every worker is), or why there
/// is none: RUN_TIMEOUT, RUNTIME_ERROR for a crash or a refused request,
/// DEVICE_LOST when no worker could be started.
struct ModelTimingOutcome {
  ModelTimingReply reply;
  ErrorCode error_code = ErrorCode::kNoError;
  std::string error_message;
};
ModelTimingOutcome time_in_model_worker(const ModelTimingRequest& request,
                                        const ModelTimingOptions& options);

}  // namespace tensortune::measure
