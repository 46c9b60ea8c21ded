/// \file
/// What one measurement is about (a task and a schedule state) and what came
/// of it: costs, or one error code saying why there are none.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

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
  kRuntimeError,        ///< the kernel crashed, returned non-zero or ran out of memory
  kRunTimeout,
  kWrongAnswer,         ///< the output differs from the reference evaluator's
  kDeviceLost,          ///< the worker or device went away for reasons not tied to the candidate
  kUnknownError,
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

/// One candidate: a schedule state of a task.
struct MeasureInput {
  te::Task task;
  schedule::State state;
};

/// The outcome of building and running one candidate.
struct MeasureResult {
  ErrorCode error_code = ErrorCode::kNoError;
  /// Shortened to kMaxErrorMessageBytes (its head and tail kept).
  std::string error_message;
  /// Seconds per kernel call, one entry per repeat; empty unless kNoError.
  std::vector<double> costs;
  double build_seconds = 0;  ///< replay + lower + codegen + compile, in the worker
  double run_seconds = 0;    ///< the whole run request, in the worker
  double timestamp = 0;      ///< seconds since the Unix epoch when the result was made
  /// PassContext::hash() of the context the build worker had in force.
  uint64_t pass_context_hash = 0;
  /// Largest absolute difference from the reference, when the output was checked.
  std::optional<double> max_error;

  bool ok() const { return error_code == ErrorCode::kNoError; }
  /// Mean of costs (seconds per call); +infinity when there are none.
  double mean_cost() const;
};

/// How much of an error message a result keeps.
inline constexpr size_t kMaxErrorMessageBytes = 4096;

/// `message` cut to at most `limit` bytes, keeping its head and tail with a
/// note of how much was left out between them.
std::string shorten_message(std::string_view message, size_t limit = kMaxErrorMessageBytes);

/// A 64-bit hash as records and replies write it: 16 lowercase hex digits.
std::string hash_to_hex(uint64_t hash);
/// The hash hash_to_hex wrote; a kParse error naming `what` for anything but
/// 16 hexadecimal digits.
uint64_t hash_from_hex(std::string_view text, std::string_view what);

/// Seconds since the Unix epoch, now.
double unix_time_now();

}  // namespace tensortune::measure
