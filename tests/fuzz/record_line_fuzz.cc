// libFuzzer harness for one line of a record log: any bytes go through
// measure::record_from_line, which must give a record or throw a user error
// (every line of a log a tuner resumes from, or a merge reads, is outside
// data). A record that loads must write back to a line that loads to the
// same record. A crash, a sanitizer report, another exception type or an
// internal error is a finding.
//
//   scripts/fuzz.sh [seconds]
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "tensortune/measure/record.h"
#include "tensortune/object/structural.h"

namespace {

[[noreturn]] void finding(const char* what, const char* detail) {
  std::fprintf(stderr, "record_line_fuzz: %s: %s\n", what, detail);
  std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  namespace measure = tensortune::measure;
  std::string line(reinterpret_cast<const char*>(data), size);
  measure::Record record;
  try {
    record = measure::record_from_line(line);
  } catch (const tensortune::Error& e) {
    if (e.kind() == tensortune::ErrorKind::kInternal) finding("internal error", e.what());
    return 0;
  }
  try {
    measure::Record again = measure::record_from_line(measure::record_to_line(record));
    if (!tensortune::structural_equal(again.input.task, record.input.task) ||
        !tensortune::structural_equal(again.input.state, record.input.state) ||
        again.result.error_code != record.result.error_code) {
      finding("round trip", "a record written back reads differently");
    }
    (void)measure::task_key(record.input.task);
  } catch (const tensortune::Error& e) {
    // record_to_line refuses a result it could not read back; nothing internal.
    if (e.kind() == tensortune::ErrorKind::kInternal) finding("internal error", e.what());
  }
  return 0;
}
