#include "tensortune/measure/record.h"

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstring>
#include <fstream>
#include <iostream>
#include <set>
#include <unordered_set>

#include "tensortune/object/serialize.h"
#include "tensortune/object/structural.h"
#include "tensortune/support/error.h"
#include "tensortune/support/strings.h"

namespace tensortune::measure {
namespace {

using json = nlohmann::json;

// The "format" of a saved graph (serialize.h), for wrapping a bare node object.
constexpr const char* kGraphFormat = "tensortune.graph";

// ---------------------------------------------------------------------------
// Writing


// A record that cannot be read back must not be written: JSON has no
// infinity or NaN (nlohmann would write null, which the reader rejects).
void check_finite(double value, std::string_view field) {
  TT_CHECK(std::isfinite(value), kInvalidArgument, "cannot write a record whose result.", field,
           " is ", value, ": records hold finite numbers only");
}

// The node's saved fields without its type key: the object form records use.
json hardware_params_to_json(const ir::HardwareParams& hw) {
  json fields = save_json(hw)["nodes"][0];
  fields.erase("type");
  return fields;
}

json task_to_json(const te::Task& task) {
  TT_CHECK(task, kInvalidArgument, "cannot write a record without a task");
  const ir::Target host = task->target.host();
  json j = {{"workload_key", task.workload_key()},
            {"target", task->target.str()},
            {"host", host ? json(host.str()) : json(nullptr)},
            {"hardware_params", hardware_params_to_json(task->hardware_params)}};
  // A named workload is re-created from its key; any other travels whole.
  if (!task->workload.as<te::NamedWorkloadNode>()) j["workload"] = save_json(task->workload);
  return j;
}

// max_error may legitimately be NaN or infinite (an output full of NaN is a
// wrong answer worth recording), so non-finite values are written as strings.
json max_error_to_json(const std::optional<double>& max_error) {
  if (!max_error) return nullptr;
  if (std::isnan(*max_error)) return "nan";
  if (std::isinf(*max_error)) return *max_error > 0 ? "inf" : "-inf";
  return *max_error;
}

json result_to_json(const MeasureResult& r) {
  for (double cost : r.costs) check_finite(cost, "costs");
  check_finite(r.build_seconds, "build_seconds");
  check_finite(r.run_seconds, "run_seconds");
  check_finite(r.timestamp, "timestamp");
  return {{"error_code", error_code_name(r.error_code)},
          {"error_message", r.error_message},
          {"costs", r.costs},
          {"build_seconds", r.build_seconds},
          {"run_seconds", r.run_seconds},
          {"timestamp", r.timestamp},
          {"pass_context_hash", hash_to_hex(r.pass_context_hash)},
          {"max_error", max_error_to_json(r.max_error)}};
}

// Compiler output is not always valid UTF-8 (and shorten_message may cut a
// character in two): replace bad bytes rather than fail the whole record.
std::string dump(const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }

// ---------------------------------------------------------------------------
// Reading. Every problem is a kParse error naming the key (as a dotted path)
// and what was found there.

std::string_view type_name(const json& j) { return j.type_name(); }

const json& member(const json& object, const char* key, std::string_view where) {
  auto it = object.find(key);
  if (it == object.end()) {
    if (where.empty()) fail(ErrorKind::kParse, "missing key \"", key, "\"");
    fail(ErrorKind::kParse, "missing key \"", key, "\" in \"", where, "\"");
  }
  return *it;
}

std::string path_of(std::string_view where, const char* key) {
  return where.empty() ? std::string(key) : std::string(where) + "." + key;
}

const json& object_member(const json& object, const char* key, std::string_view where) {
  const json& j = member(object, key, where);
  TT_CHECK(j.is_object(), kParse, "\"", path_of(where, key), "\" must be an object, found ",
           type_name(j));
  return j;
}

std::string string_member(const json& object, const char* key, std::string_view where) {
  const json& j = member(object, key, where);
  TT_CHECK(j.is_string(), kParse, "\"", path_of(where, key), "\" must be a string, found ",
           type_name(j));
  return j.get<std::string>();
}

double number_member(const json& object, const char* key, std::string_view where) {
  const json& j = member(object, key, where);
  TT_CHECK(j.is_number(), kParse, "\"", path_of(where, key), "\" must be a number, found ",
           type_name(j));
  return j.get<double>();
}

// Runs `body`, turning a user error of the library (a bad target string, a
// graph that does not load) into a kParse error that says which key held it.
// Internal errors pass through: they are bugs, not bad lines.
template <class F>
auto reading(std::string_view what, F&& body) -> decltype(body()) {
  try {
    return body();
  } catch (const Error& e) {
    if (e.kind() == ErrorKind::kInternal) throw;
    fail(ErrorKind::kParse, what, ": ", e.what());
  }
}

ir::HardwareParams hardware_params_from_json(const json& fields) {
  // Through the node's own loader: it checks the field set and types and
  // runs the node's validation, with messages naming the field.
  json node = fields;
  node["type"] = ir::HardwareParamsNode::kTypeKey;
  json doc = {{"format", kGraphFormat}, {"version", 1}, {"root", 0}, {"nodes", {node}}};
  return reading("bad \"task.hardware_params\"",
                 [&] { return load_json_as<ir::HardwareParams>(doc); });
}

te::Workload workload_from_json(const json& task, const std::string& key) {
  auto it = task.find("workload");
  if (it == task.end()) {
    if (starts_with(key, "dag:")) {
      fail(ErrorKind::kParse, "workload \"", key,
           "\" is a DAG but the record has no \"task.workload\" graph");
    }
    return reading(detail::concat("unknown workload \"", key, "\""),
                   [&] { return te::parse_workload_key(key); });
  }
  te::Workload w =
      reading("bad \"task.workload\"", [&] { return load_json_as<te::Workload>(*it); });
  TT_CHECK(w, kParse, "\"task.workload\" is a null graph");
  std::string actual = te::workload_key(w);
  TT_CHECK(actual == key, kParse, "\"task.workload\" has key \"", actual,
           "\", but \"task.workload_key\" says \"", key, "\"");
  return w;
}

te::Task task_from_json(const json& record) {
  const json& task = object_member(record, "task", "");
  std::string key = string_member(task, "workload_key", "task");
  std::string target_text = string_member(task, "target", "task");
  const json& host_json = member(task, "host", "task");
  TT_CHECK(host_json.is_string() || host_json.is_null(), kParse,
           "\"task.host\" must be a target string or null, found ", type_name(host_json));
  const json& hw_json = object_member(task, "hardware_params", "task");

  ir::Target target =
      reading("bad \"task.target\"", [&] { return ir::Target::parse(target_text); });
  if (host_json.is_string()) {
    std::string host_text = host_json.get<std::string>();
    ir::Target host = reading("bad \"task.host\"", [&] { return ir::Target::parse(host_text); });
    target = reading("\"task.host\" disagrees with \"task.target\"",
                     [&] { return target.with_host(host); });
  } else {
    TT_CHECK(!target.host(), kParse, "\"task.host\" is null, but \"task.target\" names host '",
             target.host().str(), "'");
  }
  ir::HardwareParams hw = hardware_params_from_json(hw_json);
  te::Workload workload = workload_from_json(task, key);
  return reading("bad task", [&] { return te::Task::make(workload, target, hw); });
}


std::optional<double> max_error_from_json(const json& j) {
  if (j.is_null()) return std::nullopt;
  if (j.is_number()) return j.get<double>();
  if (j.is_string()) {
    const std::string& s = j.get_ref<const std::string&>();
    if (s == "nan") return std::nan("");
    if (s == "inf") return HUGE_VAL;
    if (s == "-inf") return -HUGE_VAL;
  }
  fail(ErrorKind::kParse,
       "\"result.max_error\" must be a number, null, \"nan\", \"inf\" or \"-inf\", found ",
       j.dump());
}

MeasureResult result_from_json(const json& record) {
  const json& r = object_member(record, "result", "");
  MeasureResult result;
  std::string code = string_member(r, "error_code", "result");
  result.error_code = reading("bad \"result.error_code\"", [&] { return parse_error_code(code); });
  result.error_message = string_member(r, "error_message", "result");
  const json& costs = member(r, "costs", "result");
  TT_CHECK(costs.is_array(), kParse, "\"result.costs\" must be an array of seconds, found ",
           type_name(costs));
  for (const json& c : costs) {
    TT_CHECK(c.is_number(), kParse, "\"result.costs\" must hold numbers only, found ",
             type_name(c));
    result.costs.push_back(c.get<double>());
  }  // A success needs costs that can be compared; a failure has none.
  TT_CHECK(result.ok() == !result.costs.empty(), kParse, "\"result\" says ", code, " with ",
           result.costs.size(), " costs (", (result.ok() ? "a success needs at least one" : "a failure has none"), ")");
  for (double c : result.costs) {
    TT_CHECK(std::isfinite(c) && c > 0, kParse, "\"result.costs\" must be positive seconds, found ", c);
  }

  result.build_seconds = number_member(r, "build_seconds", "result");
  result.run_seconds = number_member(r, "run_seconds", "result");
  result.timestamp = number_member(r, "timestamp", "result");
  result.pass_context_hash = hash_from_hex(string_member(r, "pass_context_hash", "result"), "\"result.pass_context_hash\"");
  result.max_error = max_error_from_json(member(r, "max_error", "result"));
  return result;
}

// Parses the text and checks the version: the part of reading a line that
// decides whether the line is refused (a newer version) or merely bad.
json parse_line(std::string_view line) {
  json doc;
  try {
    doc = parse_json_text(line, "record line");
  } catch (const Error& e) {
    fail(ErrorKind::kParse, "not valid JSON: ", e.what());
  }
  TT_CHECK(doc.is_object(), kParse, "a record must be a JSON object, found ", type_name(doc));
  return doc;
}

// -1 when the line is of a newer version than this build reads (the caller
// decides how to refuse it), else the (valid) version.
int line_version(const json& doc) {
  const json& v = member(doc, "version", "");
  TT_CHECK(v.is_number_integer(), kParse, "\"version\" must be an integer, found ", v.dump());
  int64_t version = v.get<int64_t>();
  if (version > kRecordVersion) return -1;
  TT_CHECK(version >= 1, kParse, "unknown record format version ", version,
           " (versions start at 1; this build reads up to ", kRecordVersion, ")");
  return static_cast<int>(version);
}

std::string newer_version_message(const json& doc) {
  return detail::concat("written by format version ", doc["version"].get<int64_t>(),
                        ", this build reads up to ", kRecordVersion);
}

Record record_from_json(const json& doc) {
  Record record;
  record.input.task = task_from_json(doc);
  record.input.state = reading(
      "bad \"state\"", [&] { return load_json_as<schedule::State>(member(doc, "state", "")); });
  TT_CHECK(record.input.state, kParse, "\"state\" is a null graph");
  record.result = result_from_json(doc);
  return record;
}

bool is_blank(std::string_view line) { return trim(line).empty(); }

[[noreturn]] void fail_io(std::string_view what, const std::string& path, int err) {
  fail(ErrorKind::kIO, what, " '", path, "': ", std::strerror(err));
}

// Records of successful measurements, grouped by task_key, each group in log order.
std::map<std::string, std::vector<const Record*>> ok_by_task(const std::vector<Record>& records) {
  std::map<std::string, std::vector<const Record*>> groups;
  for (const Record& r : records) {
    if (r.result.ok()) groups[task_key(r.input.task)].push_back(&r);
  }
  return groups;
}

// Best first; equal costs keep log order, so results do not depend on sort internals.
void sort_by_cost(std::vector<const Record*>& group) {
  std::stable_sort(group.begin(), group.end(), [](const Record* a, const Record* b) {
    return a->result.mean_cost() < b->result.mean_cost();
  });
}

}  // namespace

// ---------------------------------------------------------------------------

std::string record_to_line(const Record& record) {
  TT_CHECK(record.input.state, kInvalidArgument, "cannot write a record without a state");
  // Built as text so that the keys keep this order (nlohmann sorts them) and
  // the state uses the serializer's direct writer.
  return detail::concat("{\"version\":", kRecordVersion,
                        ",\"task\":", dump(task_to_json(record.input.task)),
                        ",\"state\":", save_string(record.input.state),
                        ",\"result\":", dump(result_to_json(record.result)), "}");
}

Record record_from_line(std::string_view line) {
  json doc = parse_line(line);
  if (line_version(doc) < 0) fail(ErrorKind::kParse, newer_version_message(doc));
  return record_from_json(doc);
}

LogContents load_records(const std::string& path, bool print_warnings, bool missing_ok) {
  LogContents contents;
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    int err = errno;
    if (err == ENOENT && missing_ok) return contents;
    if (err == ENOENT) fail(ErrorKind::kNotFound, "record log '", path, "' does not exist");
    fail_io("cannot open record log", path, err);
  }
  std::string line;
  for (size_t number = 1; std::getline(in, line); ++number) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (is_blank(line)) continue;
    auto skip = [&](const Error& e) {
      if (print_warnings) {
        std::cerr << "warning: " << path << ":" << number << ": skipped: " << e.what() << "\n";
      }
      contents.warnings.push_back({number, e.what()});
    };
    json doc;
    int version = 0;
    try {
      doc = parse_line(line);
      version = line_version(doc);
    } catch (const Error& e) {
      if (e.kind() != ErrorKind::kParse) throw;
      skip(e);
      continue;
    }
    if (version < 0) {
      // Refused, not skipped: a tuner resuming from this log would re-measure,
      // and a merge or distill would silently drop, what this build cannot read.
      fail(ErrorKind::kParse, path, ":", number, ": ", newer_version_message(doc),
           " (a newer tensortune wrote this log)");
    }
    try {
      contents.records.push_back(record_from_json(doc));
    } catch (const Error& e) {
      if (e.kind() != ErrorKind::kParse) throw;
      skip(e);
    }
  }
  if (in.bad()) fail_io("cannot read record log", path, errno);
  return contents;
}

RecordWriter::RecordWriter(const std::string& path) : path_(path) {
  // "a+": every write goes to the end of the file, and we can still read its
  // last byte to see whether a killed writer left a line unfinished.
  file_ = std::fopen(path.c_str(), "a+");
  if (!file_) fail_io("cannot open record log", path, errno);
  if (std::fseek(file_, 0, SEEK_END) != 0) {
    int err = errno;
    std::fclose(file_);
    fail_io("cannot seek in record log", path, err);
  }
  long size = std::ftell(file_);
  bool torn = false;
  if (size > 0 && std::fseek(file_, -1, SEEK_END) == 0) torn = std::fgetc(file_) != '\n';
  if (torn) {
    // The torn line stays a (skipped) line of its own instead of swallowing
    // the first record written now.
    std::fseek(file_, 0, SEEK_END);  // a read must be followed by a seek before a write
    if (std::fputc('\n', file_) == EOF || std::fflush(file_) != 0) {
      int err = errno;
      std::fclose(file_);
      fail_io("cannot write to record log", path, err);
    }
  }
}

RecordWriter::~RecordWriter() {
  if (file_) std::fclose(file_);
}

void RecordWriter::write(const Record& record) {
  std::string line = record_to_line(record) + "\n";
  // One fwrite of the whole line, flushed at once, so the line reaches the
  // file in as few write(2) calls as stdio makes (usually one).
  if (std::fwrite(line.data(), 1, line.size(), file_) != line.size() || std::fflush(file_) != 0) {
    fail_io("cannot write to record log", path_, errno);
  }
}

std::string task_key(const te::Task& task) {
  return task.workload_key() + "@" + task->target.str();
}

std::map<std::string, Record> best_per_task(const std::vector<Record>& records) {
  std::map<std::string, Record> best;
  for (auto& [key, group] : ok_by_task(records)) {
    sort_by_cost(group);
    best.emplace(key, *group.front());
  }
  return best;
}

std::map<std::string, std::vector<Record>> top_k_per_task(const std::vector<Record>& records,
                                                          size_t k) {
  std::map<std::string, std::vector<Record>> top;
  if (k == 0) return top;
  for (auto& [key, group] : ok_by_task(records)) {
    sort_by_cost(group);
    if (group.size() > k) group.resize(k);
    auto& out = top[key];
    for (const Record* r : group) out.push_back(*r);
  }
  return top;
}

std::optional<Record> best_for(const std::vector<Record>& records, const te::Task& task,
                               TargetMatch match) {
  const std::string key = task_key(task);
  const std::string workload = task.workload_key();
  const Record* best = nullptr;
  for (const Record& r : records) {
    if (!r.result.ok()) continue;
    bool matches = false;
    switch (match) {
      case TargetMatch::kExact:
        matches = task_key(r.input.task) == key;
        break;
      case TargetMatch::kCompatible:
        matches = r.input.task.workload_key() == workload &&
                  ir::compatible(r.input.task->target, task->target);
        break;
    }
    if (matches && (!best || r.result.mean_cost() < best->result.mean_cost())) best = &r;
  }
  if (!best) return std::nullopt;
  return *best;
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
    std::string key = task_key(r.input.task);
    if (!done.insert(key).second) continue;
    auto it = top.find(key);
    if (it == top.end()) continue;
    out.insert(out.end(), it->second.begin(), it->second.end());
  }
  return out;
}

std::vector<uint64_t> measured_state_hashes(const std::vector<Record>& records,
                                            const te::Task& task) {
  const std::string key = task_key(task);
  std::vector<uint64_t> hashes;
  std::unordered_set<uint64_t> seen;
  for (const Record& r : records) {
    if (task_key(r.input.task) != key) continue;
    // The worker went away, not the candidate: measure it again.
    if (r.result.error_code == ErrorCode::kDeviceLost) continue;
    uint64_t h = structural_hash(r.input.state);
    if (seen.insert(h).second) hashes.push_back(h);
  }
  return hashes;
}

}  // namespace tensortune::measure
