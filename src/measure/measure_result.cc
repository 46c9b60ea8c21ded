#include "tensortune/measure/measure_result.h"

#include <algorithm>
#include <charconv>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <limits>
#include <numeric>

#include "tensortune/support/error.h"
#include "tensortune/support/strings.h"

namespace tensortune::measure {

std::string_view error_code_name(ErrorCode code) {
  auto i = static_cast<size_t>(code);
  const auto& names = EnumNames<ErrorCode>::names;
  return i < names.size() ? names[i] : "UNKNOWN_ERROR";
}

ErrorCode parse_error_code(std::string_view name) {
  std::string valid;
  for (ErrorCode code : kAllErrorCodes) {
    if (error_code_name(code) == name) return code;
    valid += (valid.empty() ? "" : ", ") + std::string(error_code_name(code));
  }
  fail(ErrorKind::kParse, "unknown error code '", name, "' (valid: ", valid, ")");
}

Hash64 Hash64::from_json(const nlohmann::json& j) {
  const std::string* text = j.is_string() ? j.get_ptr<const std::string*>() : nullptr;
  uint64_t value = 0;
  bool ok = false;
  if (text && text->size() == 16) {
    auto [end, ec] = std::from_chars(text->data(), text->data() + 16, value, 16);
    ok = ec == std::errc() && end == text->data() + 16;
  }
  TT_CHECK(ok, kParse, "a hash must be a string of 16 hexadecimal digits, found ",
           j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
  return Hash64(value);
}

std::string Hash64::str() const {
  char text[17];
  std::snprintf(text, sizeof text, "%016llx", static_cast<unsigned long long>(value));
  return text;
}

void MeasureResult::declare(FieldList<MeasureResult>& f) {
  f.def("error_code", &MeasureResult::error_code)
      .def("error_message", &MeasureResult::error_message)
      .def("costs", &MeasureResult::costs)
      .def("build_seconds", &MeasureResult::build_seconds)
      .def("run_seconds", &MeasureResult::run_seconds)
      .def("timestamp", &MeasureResult::timestamp)
      .def("pass_context_hash", &MeasureResult::pass_context_hash)
      .def("max_error", &MeasureResult::max_error)
      .def("instruments", &MeasureResult::instruments)
      .def_added_later("kernel_seconds", &MeasureResult::kernel_seconds)
      .def_added_later("host", &MeasureResult::host)
      .def_added_later("rank", &MeasureResult::rank)
      .validate(check_measure_result);
}

TT_REGISTER_NODE(MeasureResult);

void check_measure_result(const MeasureResult& r) {
  // A success needs costs that can be compared; a failure has none.
  TT_CHECK(r.ok() == !r.costs.empty(), kParse, "the result says ", error_code_name(r.error_code),
           " with ", r.costs.size(), " costs (",
           r.ok() ? "a success needs at least one" : "a failure has none", ")");
  for (double c : r.costs) {
    TT_CHECK(std::isfinite(c) && c > 0, kParse, "costs must be positive seconds, found ", c);
  }
  for (auto [name, value] :
       {std::pair{"build_seconds", r.build_seconds}, std::pair{"run_seconds", r.run_seconds},
        std::pair{"kernel_seconds", r.kernel_seconds}, std::pair{"timestamp", r.timestamp}}) {
    TT_CHECK(std::isfinite(value), kParse, name, " must be a finite number, found ", value);
  }
  TT_CHECK(r.instruments.is_object(), kParse, "instruments must be an object (name -> results)");
}

double MeasureResult::mean_cost() const {
  if (costs.empty()) return std::numeric_limits<double>::infinity();
  return std::accumulate(costs.begin(), costs.end(), 0.0) / static_cast<double>(costs.size());
}

double MeasureResult::median_cost() const {
  if (costs.empty()) return std::numeric_limits<double>::infinity();
  std::vector<double> sorted = costs;
  std::sort(sorted.begin(), sorted.end());
  size_t half = sorted.size() / 2;
  return sorted.size() % 2 ? sorted[half] : (sorted[half - 1] + sorted[half]) / 2;
}

std::string shorten_message(std::string_view message, size_t limit) {
  // Valid UTF-8 in any case: compiler output may quote anything, and a cut
  // may split a character; a result that could not be saved would be lost.
  if (message.size() <= limit) return valid_utf8(message);
  std::string note = "\n[... " + std::to_string(message.size() - limit) + " bytes left out ...]\n";
  if (limit <= note.size()) return valid_utf8(message.substr(0, limit));
  size_t keep = limit - note.size(), head = keep / 2, tail = keep - head;
  return valid_utf8(message.substr(0, head)) + note +
         valid_utf8(message.substr(message.size() - tail));
}

double unix_time_now() {
  using namespace std::chrono;
  return duration<double>(system_clock::now().time_since_epoch()).count();
}

}  // namespace tensortune::measure
