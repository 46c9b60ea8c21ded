/// \file
/// What one measurement is about (a task and a schedule state) and what came
/// of it: costs, or one error code saying why there are none. MeasureResult
/// is a reflected value: its field list is how it is saved in records and
/// worker replies (docs/architecture.md invariant 1).
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "tensortune/object/object.h"
#include "tensortune/schedule/state.h"
#include "tensortune/te/task.h"

namespace tensortune::measure {

/// Why a measurement has no costs; kNoError when it has. Records and --json
/// output name them as error_code_name() spells them.
enum class ErrorCode {
  kNoError,
  kInstantiationError,  ///< the state is invalid for its task (a step does not replay)
  kCompileError,        ///< lowering or the C compiler failed
  kBuildTimeout,
  kRuntimeError,  ///< the kernel crashed, returned non-zero or ran out of memory
  kRunTimeout,
  kWrongAnswer,   ///< the output differs from the reference evaluator's
  kDeviceLost,    ///< the worker or device went away for reasons not tied to the candidate
  kUnknownError,  ///< anything else, e.g. an internal error of tensortune (never the candidate's)
};

/// Every error code, in enum order.
inline constexpr ErrorCode kAllErrorCodes[] = {
    ErrorCode::kNoError,      ErrorCode::kInstantiationError, ErrorCode::kCompileError,
    ErrorCode::kBuildTimeout, ErrorCode::kRuntimeError,       ErrorCode::kRunTimeout,
    ErrorCode::kWrongAnswer,  ErrorCode::kDeviceLost,         ErrorCode::kUnknownError};

/// "NO_ERROR", "COMPILE_ERROR", ...
std::string_view error_code_name(ErrorCode code);
/// The code named `name`; a kParse error listing the valid names otherwise.
ErrorCode parse_error_code(std::string_view name);

/// A 64-bit hash (of a PassContext, a workload, a task) as records and
/// replies hold it: 16 lowercase hex digits, since a 64-bit integer does not
/// survive JSON readers that keep numbers as doubles.
struct Hash64 {
  static constexpr const char* kTypeName = "hash (16 hex digits)";
  uint64_t value = 0;

  Hash64() = default;
  explicit Hash64(uint64_t v) : value(v) {}
  nlohmann::json to_json() const { return str(); }
  /// A kParse error for anything but a string of 16 hexadecimal digits.
  static Hash64 from_json(const nlohmann::json& j);
  uint64_t hash() const { return value; }
  std::string str() const;
  bool operator==(const Hash64& other) const = default;
};

/// One candidate: a schedule state of a task.
struct MeasureInput {
  te::Task task;
  schedule::State state;
};

/// The outcome of building and running one candidate. Loading one checks
/// that it is consistent: a success has costs (finite, positive), a failure
/// none, and times are finite.
struct MeasureResult : Object {
  ErrorCode error_code = ErrorCode::kNoError;
  /// Shortened to kMaxErrorMessageBytes (its head and tail kept).
  std::string error_message;
  /// Seconds per kernel call, one entry per repeat; empty unless kNoError.
  std::vector<double> costs;
  double build_seconds = 0;   ///< replay + lower + codegen + compile, in the worker
  double run_seconds = 0;     ///< the whole run request, in the worker
  double kernel_seconds = 0;  ///< of run_seconds, inside the kernel (warm-up and timed calls)
  double timestamp = 0;       ///< seconds since the Unix epoch when the result was made
  /// PassContext::hash() of the context the build worker had in force.
  Hash64 pass_context_hash;
  /// Largest absolute difference from the reference, when the output was checked.
  std::optional<double> max_error;
  /// What the context's instruments saw while this candidate was lowered in
  /// the build worker: instrument name -> its results.
  nlohmann::json instruments = nlohmann::json::object();
  /// The machine that measured it (that built it, when it did not build),
  /// and its MPI rank: -1 outside an MPI job, and in records older than these fields ("").
  std::string host;
  int64_t rank = -1;
  TT_NODE(MeasureResult, "measure.MeasureResult")
  static void declare(FieldList<MeasureResult>& f);

  bool ok() const { return error_code == ErrorCode::kNoError; }
  /// Mean of costs (seconds per call); +infinity when there are none.
  double mean_cost() const;
  /// Median of costs, what schedules are ranked by: one disturbed repeat
  /// (another process on the core, a cold first call) does not move it.
  /// +infinity when there are none.
  double median_cost() const;
};

/// The checks loading a MeasureResult runs (see MeasureResult); a kParse
/// error naming the field. Writers call it too, so that nothing is written
/// that could not be read back.
void check_measure_result(const MeasureResult& r);

/// How much of an error message a result keeps.
inline constexpr size_t kMaxErrorMessageBytes = 4096;

/// `message` cut to at most `limit` bytes, keeping its head and tail with a
/// note of how much was left out between them.
std::string shorten_message(std::string_view message, size_t limit = kMaxErrorMessageBytes);

/// Seconds since the Unix epoch, now.
double unix_time_now();

}  // namespace tensortune::measure

namespace tensortune {
template <>
struct EnumNames<measure::ErrorCode> {
  static constexpr std::array<std::string_view, 9> names = {
      "NO_ERROR",    "INSTANTIATION_ERROR", "COMPILE_ERROR", "BUILD_TIMEOUT", "RUNTIME_ERROR",
      "RUN_TIMEOUT", "WRONG_ANSWER",        "DEVICE_LOST",   "UNKNOWN_ERROR"};
};
}  // namespace tensortune
