#include "tensortune/measure/record.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <iostream>
#include <set>
#include <sstream>
#include <unordered_map>
#include <unordered_set>

#include "measure/record_v1.h"
#include "tensortune/object/serialize.h"
#include "tensortune/object/structural.h"
#include "tensortune/support/error.h"
#include "tensortune/support/files.h"
#include "tensortune/support/strings.h"
#include "tensortune/support/subprocess.h"

namespace tensortune::measure {
namespace {

/// A record as a line holds it.
struct RecordNode : Object {
  int64_t version = kRecordVersion;
  te::Task task;
  schedule::State state;
  Ref<MeasureResult> result;
  TT_NODE(RecordNode, "measure.Record")
  static void declare(FieldList<RecordNode>& f) {
    f.def("version", &RecordNode::version)
        .def("task", &RecordNode::task)
        .def("state", &RecordNode::state)
        .def("result", &RecordNode::result)
        .validate([](const RecordNode& r) {
          TT_CHECK(r.task && r.state && r.result, kParse,
                   "a record needs a task, a state and a result");
        });
  }
};

TT_REGISTER_NODE(RecordNode);

// Graph lines start with the graph's format key; anything else that parses
// is an older layout.
constexpr std::string_view kGraphPrefix = "{\"format\":\"tensortune.graph\"";

[[noreturn]] void fail_newer(int64_t version) {
  fail(ErrorKind::kParse, "written by format version ", version, ", this build reads up to ",
       kRecordVersion);
}

/// The record format version a line that failed to load claims, if it says.
/// Only on the error path: a line that loads needs no second parse.
std::optional<int64_t> claimed_version(const nlohmann::json& doc) {
  if (!doc.is_object()) return std::nullopt;
  auto nodes = doc.find("nodes");
  if (nodes != doc.end() && nodes->is_array()) {
    for (const auto& n : *nodes) {
      if (n.is_object() && n.value("type", "") == RecordNode::kTypeKey) {
        auto v = n.find("version");
        if (v != n.end() && v->is_number_integer()) return v->get<int64_t>();
      }
    }
    return std::nullopt;
  }
  auto v = doc.find("version");
  if (v != doc.end() && v->is_number_integer()) return v->get<int64_t>();
  return std::nullopt;
}

/// One line to a record. Throws a kParse error for a bad line; a line of a
/// newer version is reported as such (the caller refuses rather than skips it).
Record read_line(std::string_view line, bool* newer) {
  *newer = false;
  if (line.substr(0, kGraphPrefix.size()) == kGraphPrefix) {
    ObjectPtr node;
    std::optional<Error> error;
    try {
      node = load_string(line);
    } catch (const UserError& e) {
      error = e;
    }
    auto record = std::dynamic_pointer_cast<const RecordNode>(node);
    if (record && record->version <= kRecordVersion) {
      TT_CHECK(record->version >= 2, kParse, "a saved graph of record format version ",
               record->version, " (graph records start at version 2)");
      return Record{MeasureInput{record->task, record->state}, *record->result};
    }
    // Does the line say it is newer? A newer node shape fails to load, so
    // look at the raw text.
    nlohmann::json doc;
    try {
      doc = parse_json_text(line, "record line");
    } catch (const UserError&) {
    }
    if (auto v = claimed_version(doc); v && *v > kRecordVersion) {
      *newer = true;
      fail_newer(*v);
    }
    // A newer graph format is as unreadable as a newer record: refused too.
    if (doc.is_object() && doc.contains("version") && doc["version"].is_number_integer() &&
        doc["version"].get<int64_t>() > kGraphFormatVersion) {
      *newer = true;
      fail(ErrorKind::kParse, "written in saved-graph format version ",
           doc["version"].get<int64_t>(), ", this build reads ", kGraphFormatVersion);
    }
    if (error) fail(ErrorKind::kParse, error->what());
    fail(ErrorKind::kParse, "the line's graph is a ", node ? node->type_key() : "null graph",
         ", not a ", RecordNode::kTypeKey);
  }
  nlohmann::json doc;
  try {
    doc = parse_json_text(line, "record line");
  } catch (const UserError& e) {
    fail(ErrorKind::kParse, "not valid JSON: ", e.what());
  }
  TT_CHECK(doc.is_object(), kParse, "a record must be a JSON object, found ", doc.type_name());
  std::optional<int64_t> version = claimed_version(doc);
  TT_CHECK(version, kParse, "missing integer \"version\"");
  if (*version > kRecordVersion) {
    *newer = true;
    fail_newer(*version);
  }
  TT_CHECK(*version == 1, kParse, "format version ", *version,
           " lines are saved graphs; this one is not (versions start at 1; this build reads up to ",
           kRecordVersion, ")");
  auto [task, state, result] = detail::record_v1_from_json(doc);
  return Record{MeasureInput{std::move(task), std::move(state)}, std::move(result)};
}

[[noreturn]] void fail_io(std::string_view what, const std::string& path, int err) {
  fail(ErrorKind::kIO, what, " '", path, "': ", std::strerror(err));
}

// Records of successful measurements, grouped by group_key, each group in log order.
std::map<std::string, std::vector<const Record*>> ok_by_group(const std::vector<Record>& records) {
  std::map<std::string, std::vector<const Record*>> groups;
  for (const Record& r : records) {
    if (r.result.ok()) groups[group_key(r)].push_back(&r);
  }
  return groups;
}

// One record per schedule (state), in log order of its first, holding the
// costs of all of that schedule's records; `sources` are those records.
struct PooledRecord {
  Record record;
  std::vector<const Record*> sources;
  double median = 0;  ///< of all the costs: worked out once, ranking compares it often
};
std::vector<PooledRecord> pool_by_state(const std::vector<const Record*>& group) {
  std::vector<PooledRecord> pooled;
  std::unordered_map<uint64_t, size_t> of_state;
  for (const Record* r : group) {
    auto [it, fresh] = of_state.emplace(structural_hash(r->input.state), pooled.size());
    if (fresh) pooled.push_back({*r, {}});
    PooledRecord& p = pooled[it->second];
    if (!fresh) {
      std::vector<double>& costs = p.record.result.costs;
      costs.insert(costs.end(), r->result.costs.begin(), r->result.costs.end());
    }
    p.sources.push_back(r);
  }
  for (PooledRecord& p : pooled) p.median = p.record.result.median_cost();
  return pooled;
}

// Whether pooled schedule `a` ranks before `b`: by lowest median cost, those
// measured more than once ahead of the rest. A schedule is measured again
// only as a finalist (tune --confirm times a run's best few back to back),
// and one timed once in a fast moment must not outrank the finalists that
// were compared under one condition.
bool ranks_before(const PooledRecord& a, const PooledRecord& b) {
  bool again_a = a.sources.size() > 1, again_b = b.sources.size() > 1;
  if (again_a != again_b) return again_a;
  return a.median < b.median;
}

// The pooled schedules best first (equals in log order).
std::vector<const PooledRecord*> ranked(const std::vector<PooledRecord>& pooled) {
  std::vector<const PooledRecord*> order;
  for (const PooledRecord& p : pooled) order.push_back(&p);
  std::stable_sort(order.begin(), order.end(), [](const PooledRecord* a, const PooledRecord* b) {
    return ranks_before(*a, *b);
  });
  return order;
}

// The first of ranked(pooled), without sorting; null if none.
const Record* lowest_cost(const std::vector<PooledRecord>& pooled) {
  auto best = std::min_element(pooled.begin(), pooled.end(), ranks_before);
  return best == pooled.end() ? nullptr : &best->record;
}

bool target_matches(const Record& r, const te::Task& task, TargetMatch match) {
  switch (match) {
    case TargetMatch::kExact: return r.input.task->target == task->target;
    case TargetMatch::kCompatible: return ir::compatible(r.input.task->target, task->target);
  }
  return false;
}

}  // namespace

// ---------------------------------------------------------------------------

std::string record_to_line(const Record& record) {
  TT_CHECK(record.input.task && record.input.state, kInvalidArgument,
           "cannot write a record without a task and a state");
  // What could not be read back is not written: the reader runs the same check.
  try {
    check_measure_result(record.result);
  } catch (const UserError& e) {
    fail(ErrorKind::kInvalidArgument, "cannot write this record: ", e.what());
  }
  RecordNode node;
  node.task = record.input.task;
  node.state = record.input.state;
  auto result = make_node<MeasureResult>(record.result);
  result->error_message = valid_utf8(result->error_message);
  node.result = Ref<MeasureResult>(std::move(result));
  return save_string(ObjectPtr(ObjectPtr(), &node));
}

Record record_from_line(std::string_view line) {
  bool newer = false;
  return read_line(line, &newer);
}

LogContents load_records(const std::string& path, bool print_warnings, bool missing_ok) {
  LogContents contents;
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    int err = errno;
    if (err == ENOENT && missing_ok) return contents;
    if (err == ENOENT) fail(ErrorKind::kNotFound, "record log '", path, "' does not exist");
    fail_io("cannot open record log", path, err);
  }
  std::string text;
  {
    // A shared lock: writers append whole lines under an exclusive one.
    FileDescriptor owned(fd);
    FileLock lock(fd, FileLock::kShared, path);
    if (!read_all(fd, text)) fail_io("cannot read record log", path, errno);
  }
  std::istringstream in(std::move(text));
  std::string line;
  for (size_t number = 1; std::getline(in, line); ++number) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (trim(line).empty()) continue;
    bool newer = false;
    try {
      contents.records.push_back(read_line(line, &newer));
      contents.records.back().line = number;
    } catch (const UserError& e) {
      if (newer) {
        // Refused, not skipped: a tuner resuming from this log would
        // re-measure, and a merge or distill would silently drop, what this
        // build cannot read.
        fail(ErrorKind::kParse, path, ":", number, ": ", e.what(),
             " (a newer tensortune wrote this log)");
      }
      if (e.kind() != ErrorKind::kParse && e.kind() != ErrorKind::kNotFound &&
          e.kind() != ErrorKind::kInvalidArgument && e.kind() != ErrorKind::kTypeMismatch) {
        throw;
      }
      if (print_warnings) {
        std::cerr << "warning: " << path << ":" << number << ": skipped: " << e.what() << "\n";
      }
      contents.warnings.push_back({number, e.what()});
    }
  }
  return contents;
}

RecordWriter::RecordWriter(const std::string& path) : path_(path) {
  fd_ = ::open(path.c_str(), O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
  if (fd_ < 0) fail_io("cannot open record log", path, errno);
}

RecordWriter::~RecordWriter() {
  if (fd_ >= 0) ::close(fd_);
}

void RecordWriter::write(const Record& record) {
  std::string line = record_to_line(record) + "\n";
  // Under an exclusive lock, so that the lines of several tuners on one log
  // never interleave, and readers (which take a shared one) never see half
  // a line. A writer killed mid-line leaves a torn line: it is ended first,
  // so that it stays a (skipped) line of its own instead of swallowing this
  // record.
  FileLock lock(fd_, FileLock::kExclusive, path_);
  struct stat st {};
  if (::fstat(fd_, &st) != 0) fail_io("cannot stat record log", path_, errno);
  if (st.st_size > 0) {
    char last = '\n';
    int rfd = ::open(path_.c_str(), O_RDONLY | O_CLOEXEC);
    if (rfd >= 0) {
      if (::pread(rfd, &last, 1, st.st_size - 1) != 1) last = '\n';
      ::close(rfd);
    }
    if (last != '\n') line.insert(line.begin(), '\n');
  }
  // One write(2) for the whole line (looped only if the kernel takes part).
  write_all(fd_, line, path_);
}

std::string task_key(const te::Task& task) {
  return task.workload_key() + "@" + task->target.str();
}

ContextMatch ContextMatch::only(const ir::PassContext& context) {
  TT_CHECK(context, kInvalidArgument, "ContextMatch::only needs a pass context");
  return ContextMatch{Hash64(context.hash())};
}

std::string group_key(const Record& r) {
  return task_key(r.input.task) + " pass_context " + r.result.pass_context_hash.str();
}

std::map<std::string, Record> best_per_task(const std::vector<Record>& records) {
  std::map<std::string, Record> best;
  for (auto& [key, group] : ok_by_group(records))
    best.emplace(key, *lowest_cost(pool_by_state(group)));
  return best;
}

std::map<std::string, std::vector<Record>> top_k_per_task(const std::vector<Record>& records,
                                                          size_t k) {
  std::map<std::string, std::vector<Record>> top;
  if (k == 0) return top;
  for (auto& [key, group] : ok_by_group(records)) {
    std::vector<PooledRecord> pooled = pool_by_state(group);
    std::vector<const PooledRecord*> order = ranked(pooled);
    if (order.size() > k) order.resize(k);
    auto& out = top[key];
    for (const PooledRecord* p : order) {
      for (const Record* r : p->sources) out.push_back(*r);
    }
  }
  return top;
}

std::vector<Record> pool_by_schedule(const std::vector<Record>& records) {
  std::vector<const Record*> group;
  for (const Record& r : records) group.push_back(&r);
  std::vector<Record> out;
  for (PooledRecord& p : pool_by_state(group)) out.push_back(std::move(p.record));
  return out;
}

std::vector<Record> best_k_for(const std::vector<Record>& records, const te::Task& task,
                               const ContextMatch& context, size_t k, TargetMatch target) {
  const std::string workload = task.workload_key();
  std::vector<const Record*> matching;
  for (const Record& r : records) {
    if (!r.result.ok() || !context.accepts(r.result)) continue;
    if (r.input.task.workload_key() != workload || !target_matches(r, task, target)) continue;
    matching.push_back(&r);
  }
  std::vector<PooledRecord> pooled = pool_by_state(matching);
  std::vector<const PooledRecord*> order = ranked(pooled);
  if (order.size() > k) order.resize(k);
  std::vector<Record> out;
  for (const PooledRecord* p : order) out.push_back(p->record);
  return out;
}

std::optional<Record> best_for(const std::vector<Record>& records, const te::Task& task,
                               const ContextMatch& context, TargetMatch target) {
  std::vector<Record> best = best_k_for(records, task, context, 1, target);
  if (best.empty()) return std::nullopt;
  return best.front();
}

std::string why_no_record(const std::vector<Record>& records, const te::Task& task,
                          const ContextMatch& context, TargetMatch target) {
  if (best_for(records, task, context, target)) return "";
  const std::string workload = task.workload_key();
  std::set<std::string> targets, contexts;
  size_t of_workload = 0;
  for (const Record& r : records) {
    if (!r.result.ok() || r.input.task.workload_key() != workload) continue;
    ++of_workload;
    if (!target_matches(r, task, target)) {
      targets.insert(r.input.task->target.str());
    } else {
      contexts.insert(r.result.pass_context_hash.str());
    }
  }
  if (of_workload == 0) return "the log has no successful record of " + workload;
  if (!contexts.empty()) {
    return tensortune::detail::concat(
        "the log's records of ", workload, " on ", task->target.str(),
        " were tuned under other pass contexts (", join({contexts.begin(), contexts.end()}, ", "),
        "), not this one (", context.hash ? context.hash->str() : "any",
        "); give --any-pass-context to use them anyway");
  }
  return tensortune::detail::concat("the log's records of ", workload, " are for other targets (",
                                    join({targets.begin(), targets.end()}, "; "), "), not ",
                                    task->target.str());
}

ResumeSet resume_set(const std::vector<Record>& records, const te::Task& task,
                     const ContextMatch& context) {
  const std::string key = task_key(task);
  ResumeSet set;
  std::unordered_set<uint64_t> seen;
  std::set<std::string> others;
  for (const Record& r : records) {
    if (task_key(r.input.task) != key) continue;
    if (!context.accepts(r.result)) {
      ++set.other_context_records;
      if (others.insert(r.result.pass_context_hash.str()).second) {
        set.other_contexts.push_back(r.result.pass_context_hash);
      }
      continue;
    }
    // The worker went away, not the candidate: measure it again.
    if (r.result.error_code == ErrorCode::kDeviceLost) continue;
    if (seen.insert(structural_hash(r.input.state)).second) set.records.push_back(&r);
  }
  return set;
}

std::vector<Record> merge_records(const std::vector<std::vector<Record>>& logs) {
  // The line is the record's whole content, so equal lines are exact duplicates.
  std::unordered_set<std::string> seen;
  std::vector<Record> merged;
  for (const auto& log : logs) {
    for (const Record& r : log) {
      if (seen.insert(record_to_line(r)).second) merged.push_back(r);
    }
  }
  return merged;
}

std::vector<Record> distill_records(const std::vector<Record>& records, size_t k) {
  std::map<std::string, std::vector<Record>> top = top_k_per_task(records, k);
  std::vector<Record> out;
  std::set<std::string> done;
  for (const Record& r : records) {
    std::string key = group_key(r);
    if (!done.insert(key).second) continue;
    auto it = top.find(key);
    if (it == top.end()) continue;
    out.insert(out.end(), it->second.begin(), it->second.end());
  }
  return out;
}

}  // namespace tensortune::measure
