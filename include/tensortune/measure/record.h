/// \file
/// Measurement records: one self-contained line of a log per measurement.
///
/// A line is a measure.Record node saved as one graph (object/serialize.h),
/// the same codec as every other value: the task (workload, target with its
/// host, hardware parameters), the schedule state (its steps), the result
/// (error code, message, costs in seconds, build and run time, timestamp,
/// the hash of the PassContext the build used, what its instruments saw) and
/// the record format version. A DAG workload travels whole, its sharing
/// intact; a named one as its name and canonical arguments.
///
/// Format versions: 2 is this graph form; 3 adds the result's
/// kernel_seconds (version 2 lines read with 0). Version 1 lines (a JSON object
/// {"version": 1, "task": {...}, "state": graph, "result": {...}}, written by
/// tensortune before 0.2) are still read. A line of a newer version is
/// refused, never skipped: skipping it would silently lose data. Any change
/// to the shape of a node a record holds must raise kRecordVersion.
///
/// Writers append and flush one line per record, so a killed tuner loses at
/// most the records in flight. Readers skip a corrupt or truncated line with
/// a warning naming its line number and keep the rest.
#pragma once

#include <cstdint>
#include <cstdio>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "tensortune/ir/pass_context.h"
#include "tensortune/measure/measure_result.h"

namespace tensortune::measure {

/// The record format version this build writes (and the newest it reads).
inline constexpr int kRecordVersion = 3;

/// One measurement: what was measured and what came of it.
struct Record {
  MeasureInput input;
  MeasureResult result;
  size_t line = 0;  ///< its line in the log it was read from (0: not read from one); not saved
};

/// The record as one line (no trailing newline). A record that could not be
/// read back (no task or state, a result that fails check_measure_result) is
/// a kInvalidArgument error; invalid UTF-8 in the error message is replaced.
std::string record_to_line(const Record& record);
/// Parses one line of any version this build reads; a kParse error naming
/// what is wrong (not valid JSON, an unknown workload "...", a bad error
/// code listing the valid ones, a newer version: "written by format version
/// 3, this build reads up to 2").
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
/// kIO naming the path and the system's reason. Each line is written in one
/// call under an advisory lock (flock), which load_records takes shared:
/// several tuners may append to one log at once.
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
  int fd_ = -1;
};

/// The key records are grouped by: workload key and exact target string
/// (host included). Two tasks with the same key are the same tuning problem.
std::string task_key(const te::Task& task);

/// Which pass contexts a lookup accepts. By default only the one a run is
/// under: a log is resumed or applied only under the context it was tuned
/// with (docs/architecture.md invariant 6); any context only when asked for explicitly.
struct ContextMatch {
  std::optional<Hash64> hash;  ///< nullopt accepts any context

  /// Records built under `context` only.
  static ContextMatch only(const ir::PassContext& context);
  /// Records built under any context.
  static ContextMatch any() { return {}; }
  bool accepts(const MeasureResult& result) const {
    return !hash || result.pass_context_hash == *hash;
  }
};

/// How a lookup matches a record's target to the caller's.
enum class TargetMatch {
  kExact,       ///< the same target string, host included (the default)
  kCompatible,  ///< any target ir::compatible() accepts, asked for explicitly
};

/// What best_per_task and top_k_per_task group records by: the task_key
/// and the pass context the record was built under.
std::string group_key(const Record& record);

/// Per group_key, the best successful record as best_for picks it: a
/// schedule's records pooled, schedules measured again ranked first, the
/// lowest mean cost (the first of equals in log order).
std::map<std::string, Record> best_per_task(const std::vector<Record>& records);

/// The successful records of the k best schedules per group_key, ranked as
/// best_for ranks them (costs pooled, schedules measured again first), best
/// first, each schedule's records in log order: a log of them ranks the
/// schedules the same way again.
std::map<std::string, std::vector<Record>> top_k_per_task(const std::vector<Record>& records,
                                                          size_t k);

/// The best successful record for `task`'s workload on its target under an
/// accepted context; nullopt when there is none (why_no_record says why).
/// A schedule measured more than once is judged on all its costs (the
/// record returned holds them pooled), and such schedules, a tuning run's
/// finalists (tune --confirm), outrank those measured once: on a machine
/// whose speed drifts, one measurement in a fast moment is no evidence.
std::optional<Record> best_for(const std::vector<Record>& records, const te::Task& task,
                               const ContextMatch& context,
                               TargetMatch target = TargetMatch::kExact);

/// The `k` best schedules for `task` as best_for ranks them, best first,
/// each record holding its schedule's pooled costs; fewer when there are fewer.
std::vector<Record> best_k_for(const std::vector<Record>& records, const te::Task& task,
                               const ContextMatch& context, size_t k,
                               TargetMatch target = TargetMatch::kExact);

/// One record per schedule (state) of `records`, in order of its first
/// record, holding the costs of all that schedule's records: what best_for
/// judges schedules on. The records are taken to be of one task.
std::vector<Record> pool_by_schedule(const std::vector<Record>& records);

/// Why `records` hold no successful record that best_for would take, for an
/// error message: none of the workload, none on this target (naming those
/// there are), or only records under other pass contexts (naming their
/// hashes, and --any-pass-context); "" when there is one.
std::string why_no_record(const std::vector<Record>& records, const te::Task& task,
                          const ContextMatch& context, TargetMatch target = TargetMatch::kExact);

/// The records of a log a tuning run of `task` resumes from.
struct ResumeSet {
  /// Records of the task (exact task_key) under an accepted context, with any
  /// result but DEVICE_LOST (a failed candidate was measured too; a lost
  /// worker says nothing of the candidate), the first record of each state.
  std::vector<const Record*> records;
  /// Records of the task passed over because of their pass context, and
  /// those contexts' hashes.
  size_t other_context_records = 0;
  std::vector<Hash64> other_contexts;
};

/// The one resume helper: what a run of `task` under `context` takes from `records`.
ResumeSet resume_set(const std::vector<Record>& records, const te::Task& task,
                     const ContextMatch& context);

/// The records of several logs, in order, with exact duplicates (same task,
/// state and result, timestamp included: the same record_to_line) dropped.
std::vector<Record> merge_records(const std::vector<std::vector<Record>>& logs);

/// The records of the k best schedules per task of `records` (top_k_per_task),
/// tasks in the order of their first appearance in `records`; a task without
/// a success is left out.
std::vector<Record> distill_records(const std::vector<Record>& records, size_t k = 1);

}  // namespace tensortune::measure
