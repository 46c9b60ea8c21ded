/// \file
/// Measurement records: one self-contained JSON object per line of a log,
///   {"version": 1, "task": {...}, "state": {...}, "result": {...}}
/// with the task as its workload key (and the workload itself when it is not
/// registered by name), target, host and hardware parameters; the state as
/// its saved object graph (its steps); the result as error code name,
/// message, costs in seconds, build and run time, timestamp and the hash of
/// the PassContext the build used. Field by field:
///   task:   workload_key, target (Target::str(), host included), host (its
///           string, or null), hardware_params (the HardwareParams fields),
///           and workload (the saved graph) only when the workload is not a
///           registered NamedWorkload, which is re-created from its key;
///   state:  save_json(state);
///   result: error_code (error_code_name), error_message, costs (seconds),
///           build_seconds, run_seconds, timestamp, pass_context_hash (16 hex
///           digits: a 64-bit value does not survive JSON readers that hold
///           numbers as doubles), max_error (a number, null when not checked,
///           or "nan" / "inf" / "-inf").
///
/// Writers append and flush one line per record, so a killed tuner loses at
/// most the records in flight. Readers skip a corrupted or truncated line
/// with a warning naming its line number and keep the rest; a line written
/// by a newer format version is refused (a kParse error), since skipping it
/// would silently lose data.
#pragma once

#include <cstdint>
#include <cstdio>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "tensortune/measure/measure_result.h"

namespace tensortune::measure {

/// The record format version this build writes (and the newest it reads).
inline constexpr int kRecordVersion = 1;

/// One measurement: what was measured and what came of it.
struct Record {
  MeasureInput input;
  MeasureResult result;
};

/// The record as one line of JSON (no trailing newline). Invalid UTF-8 in the
/// error message is replaced; a non-finite cost, time or timestamp is a
/// kInvalidArgument error, since JSON could not hold it and the line would
/// not read back.
std::string record_to_line(const Record& record);
/// Parses one line; a kParse error naming what is wrong (not valid JSON, a
/// missing key "result", an unknown workload "...", a bad error code listing
/// the valid ones, a workload graph whose key is not workload_key, a newer
/// version: "written by format version 3, this build reads up to 1").
Record record_from_line(std::string_view line);

/// A problem met while reading a log: the 1-based line number and why it was skipped.
struct LogWarning {
  size_t line = 0;
  std::string message;
};

/// The records of a log and the lines that were skipped.
struct LogContents {
  std::vector<Record> records;
  std::vector<LogWarning> warnings;
};

/// Reads every record of `path`. Corrupt or truncated lines are skipped and
/// listed in warnings (each also printed to stderr when `print_warnings`, as
/// "warning: PATH:LINE: skipped: MESSAGE"); blank lines are ignored. A line of
/// a newer format version is a kParse error naming the file and line, and a
/// file that cannot be opened a kNotFound (missing) or kIO error. A missing
/// file is an empty log when `missing_ok`.
LogContents load_records(const std::string& path, bool print_warnings = true,
                         bool missing_ok = false);

/// Appends records to a log, one flushed line each; creates the file (and
/// does not truncate it). A truncated last line left by a killed writer is
/// ended first, so the new records start on a line of their own. Errors are
/// kIO naming the path and the system's reason. One writer per file: lines
/// of two concurrent writers may interleave.
class RecordWriter {
 public:
  explicit RecordWriter(const std::string& path);
  ~RecordWriter();
  RecordWriter(const RecordWriter&) = delete;
  RecordWriter& operator=(const RecordWriter&) = delete;

  /// Appends and flushes one record (fsync is not called: a killed process
  /// loses nothing that was written; a power cut may).
  void write(const Record& record);
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  std::FILE* file_ = nullptr;
};

/// The key records are grouped by: workload key and exact target string
/// (host included). Two tasks with the same key are the same tuning problem.
std::string task_key(const te::Task& task);

/// The successful record with the lowest mean cost per task_key (the first
/// of equals in log order).
std::map<std::string, Record> best_per_task(const std::vector<Record>& records);

/// The k successful records of lowest mean cost per task_key, best first.
std::map<std::string, std::vector<Record>> top_k_per_task(const std::vector<Record>& records,
                                                          size_t k);

/// How a lookup matches a record's target to the caller's.
enum class TargetMatch {
  kExact,       ///< the same target string, host included (the default)
  kCompatible,  ///< any target ir::compatible() accepts, asked for explicitly
};

/// The best successful record for `task`'s workload on its target (see
/// TargetMatch); nullopt when there is none.
std::optional<Record> best_for(const std::vector<Record>& records, const te::Task& task,
                               TargetMatch match = TargetMatch::kExact);

/// The records of several logs, in order, with exact duplicates (same task,
/// state and result, timestamp included: the same record_to_line) dropped.
std::vector<Record> merge_records(const std::vector<std::vector<Record>>& logs);

/// The k best successful records per task of `records` (k = 1: one per task),
/// best first within a task, tasks in the order of their first appearance in
/// `records`; a task without a success is left out.
std::vector<Record> distill_records(const std::vector<Record>& records, size_t k = 1);

/// The states of `task` (exact task_key) already measured in `records`, with
/// any result but DEVICE_LOST (a failed candidate was measured too; a lost
/// worker says nothing of the candidate), as structural hashes of the states,
/// each once, in order of first appearance, so a resumed search can skip them.
std::vector<uint64_t> measured_state_hashes(const std::vector<Record>& records,
                                            const te::Task& task);

}  // namespace tensortune::measure
