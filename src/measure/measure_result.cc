#include "tensortune/measure/measure_result.h"

#include <charconv>
#include <chrono>
#include <cstdio>
#include <limits>
#include <numeric>

#include "tensortune/support/error.h"

namespace tensortune::measure {

std::string_view error_code_name(ErrorCode code) {
  switch (code) {
    case ErrorCode::kNoError: return "NO_ERROR";
    case ErrorCode::kInstantiationError: return "INSTANTIATION_ERROR";
    case ErrorCode::kCompileError: return "COMPILE_ERROR";
    case ErrorCode::kBuildTimeout: return "BUILD_TIMEOUT";
    case ErrorCode::kRuntimeError: return "RUNTIME_ERROR";
    case ErrorCode::kRunTimeout: return "RUN_TIMEOUT";
    case ErrorCode::kWrongAnswer: return "WRONG_ANSWER";
    case ErrorCode::kDeviceLost: return "DEVICE_LOST";
    case ErrorCode::kUnknownError: return "UNKNOWN_ERROR";
  }
  return "UNKNOWN_ERROR";
}

ErrorCode parse_error_code(std::string_view name) {
  std::string valid;
  for (ErrorCode code : kAllErrorCodes) {
    if (error_code_name(code) == name) return code;
    valid += (valid.empty() ? "" : ", ") + std::string(error_code_name(code));
  }
  fail(ErrorKind::kParse, "unknown error code '", name, "' (valid: ", valid, ")");
}

double MeasureResult::mean_cost() const {
  if (costs.empty()) return std::numeric_limits<double>::infinity();
  return std::accumulate(costs.begin(), costs.end(), 0.0) / static_cast<double>(costs.size());
}

std::string shorten_message(std::string_view message, size_t limit) {
  if (message.size() <= limit) return std::string(message);
  std::string note = "\n[... " + std::to_string(message.size() - limit) + " bytes left out ...]\n";
  if (limit <= note.size()) return std::string(message.substr(0, limit));
  size_t keep = limit - note.size(), head = keep / 2, tail = keep - head;
  return std::string(message.substr(0, head)) + note +
         std::string(message.substr(message.size() - tail));
}

std::string hash_to_hex(uint64_t hash) {
  char text[17];
  std::snprintf(text, sizeof text, "%016llx", static_cast<unsigned long long>(hash));
  return text;
}

uint64_t hash_from_hex(std::string_view text, std::string_view what) {
  uint64_t value = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value, 16);
  TT_CHECK(text.size() == 16 && ec == std::errc() && end == text.data() + text.size(), kParse, what,
           " must be 16 hexadecimal digits, found \"", text, "\"");
  return value;
}

double unix_time_now() {
  using namespace std::chrono;
  return duration<double>(system_clock::now().time_since_epoch()).count();
}

}  // namespace tensortune::measure
