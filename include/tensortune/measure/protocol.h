/// \file
/// The requests a tuner sends to tensortune-worker and the replies it gets,
/// as JSON payloads of frames (support/subprocess.h). Each request carries
/// everything the worker needs; the worker keeps nothing between requests
/// that changes an answer (only caches of loaded libraries and reference
/// outputs, keyed by what they were made from).
///
///   build: {"type": "build", "task": graph, "states": [graph...],
///           "pass_context": graph, "cache_dir": str}
///     -> {"results": [{"error_code", "error_message", "library", "function",
///          "build_seconds"}...], "pass_context_hash": hex, "instruments": {...}}
///     All states of one request go into one C module and one compiler run;
///     when that fails, each state is built alone so the failure is pinned on
///     the candidates that cause it.
///   run:   {"type": "run", "task": graph, "library": str, "function": str,
///           "options": RunnerOptions}
///     -> {"error_code", "error_message", "costs": [s...], "run_seconds", "max_error"}
///   prepare: {"type": "prepare", "task": graph, "options": RunnerOptions}
///     -> {"error_code", "error_message", "run_seconds"}: inputs drawn and, for
///        check, reference outputs evaluated or loaded from the cache directory
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "tensortune/ir/pass_context.h"
#include "tensortune/measure/measure_result.h"

namespace tensortune::measure {

/// How candidates are timed (all of it travels in the run request).
struct RunnerOptions {
  int number = 1;          ///< kernel calls per measurement (raised to reach min_repeat_ms)
  int repeat = 3;          ///< measurements; one cost each
  int min_repeat_ms = 0;   ///< a measurement shorter than this is redone with more calls
  int cooldown_ms = 0;     ///< pause between measurements
  bool flush_cache = false;  ///< evict the kernel's buffers from the CPU caches before each measurement
  bool check = false;      ///< compare the output with the reference evaluator first
  uint64_t seed = 0;       ///< inputs are te::random_inputs(seed): the same for every candidate
  /// Where run workers keep reference outputs for check, so that a restarted
  /// worker reads them instead of evaluating again; "" for codegen::default_cache_dir().
  std::string cache_dir;
};

/// The JSON form of RunnerOptions, and back (unknown keys are an error naming them).
nlohmann::json runner_options_to_json(const RunnerOptions& options);
RunnerOptions runner_options_from_json(const nlohmann::json& doc);

/// What building one candidate gave.
struct BuildResult {
  ErrorCode error_code = ErrorCode::kNoError;
  std::string error_message;
  std::string library;   ///< the shared library holding the kernel
  std::string function;  ///< the kernel's name in it
  double build_seconds = 0;
  uint64_t pass_context_hash = 0;  ///< of the context the worker had in force
  nlohmann::json instruments = nlohmann::json::object();  ///< what the instruments saw, by name
};

/// What running one built candidate gave.
struct RunOutcome {
  ErrorCode error_code = ErrorCode::kNoError;
  std::string error_message;
  std::vector<double> costs;  ///< seconds per call, one per repeat
  double run_seconds = 0;
  std::optional<double> max_error;
};

/// A build request for `states` of `task`, to be lowered under `context`.
std::string make_build_request(const te::Task& task, const std::vector<schedule::State>& states,
                               const ir::PassContext& context, const std::string& cache_dir);
/// The per-state results of a build reply (one per state of the request).
std::vector<BuildResult> parse_build_reply(std::string_view reply, size_t expected_count);

/// A run request for a built kernel of `task`.
std::string make_run_request(const te::Task& task, const BuildResult& built,
                             const RunnerOptions& options);
/// The outcome in a run reply; one that says NO_ERROR without costs is a
/// kParse error unless `expect_costs` is false (a prepare reply).
RunOutcome parse_run_reply(std::string_view reply, bool expect_costs = true);

/// A request that makes a run worker draw the inputs of `task` and, with
/// options.check, evaluate (or load) its reference outputs, which can take
/// far longer than running a candidate (a 1024³ matmul: about 30 s). Sent
/// once per task before its candidates, with a timeout of its own; the
/// reply is a run reply without costs.
std::string make_prepare_request(const te::Task& task, const RunnerOptions& options);

/// The worker's side: the reply to one request. Never throws: a request that
/// cannot be read gets {"error_code": "UNKNOWN_ERROR", ...}. A candidate that
/// crashes takes the worker with it; the pool reports that.
std::string serve_request(std::string_view request);

}  // namespace tensortune::measure
