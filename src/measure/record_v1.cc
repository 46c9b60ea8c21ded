// Version 1 records, written by tensortune before 0.2: one JSON object per line,
//   {"version": 1,
//    "task": {"workload_key", "target", "host", "hardware_params",
//             "workload" (a saved graph, only for workloads not registered by name)},
//    "state": a saved graph,
//    "result": {"error_code", "error_message", "costs", "build_seconds", "run_seconds",
//               "timestamp", "pass_context_hash" (16 hex digits),
//               "max_error" (a number, null, "nan", "inf" or "-inf")}}.
// Nothing writes this layout any more (record.h); this reader keeps old logs
// readable. Each part goes through the object system's own checks: the
// hardware parameters and the result are loaded as the nodes they are.
#include "measure/record_v1.h"

#include "tensortune/object/serialize.h"
#include "tensortune/support/strings.h"
#include "tensortune/te/workload.h"

namespace tensortune::measure::detail {
namespace {

using json = nlohmann::json;

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
           j.type_name());
  return j;
}

std::string string_member(const json& object, const char* key, std::string_view where) {
  const json& j = member(object, key, where);
  TT_CHECK(j.is_string(), kParse, "\"", path_of(where, key), "\" must be a string, found ",
           j.type_name());
  return j.get<std::string>();
}

// Runs `body`, turning a user error of the library (a bad target string, a
// graph that does not load) into a kParse error that says which key held it.
// Internal errors pass through: they are bugs, not bad lines.
template <class F>
auto reading(std::string_view what, F&& body) -> decltype(body()) {
  try {
    return body();
  } catch (const UserError& e) {
    fail(ErrorKind::kParse, what, ": ", e.what());
  }
}

/// A node of type `key` from the object of its fields, through the node's own
/// loader (which checks fields, types and the node's validation).
template <class R>
R load_fields(const json& fields, const char* key, std::string_view what) {
  json node = fields;
  node["type"] = key;
  json doc = {{"format", "tensortune.graph"}, {"version", 1}, {"root", 0}, {"nodes", {node}}};
  return reading(what, [&] { return load_json_as<R>(doc); });
}

te::Workload workload_from_json(const json& task, const std::string& key) {
  auto it = task.find("workload");
  if (it == task.end()) {
    if (starts_with(key, "dag:")) {
      fail(ErrorKind::kParse, "workload \"", key,
           "\" is a DAG but the record has no \"task.workload\" graph");
    }
    return reading(tensortune::detail::concat("unknown workload \"", key, "\""),
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
           "\"task.host\" must be a target string or null, found ", host_json.type_name());
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
  auto hw = load_fields<ir::HardwareParams>(object_member(task, "hardware_params", "task"),
                                            ir::HardwareParamsNode::kTypeKey,
                                            "bad \"task.hardware_params\"");
  te::Workload workload = workload_from_json(task, key);
  return reading("bad task", [&] { return te::Task::make(workload, target, hw); });
}

MeasureResult result_from_json(const json& record) {
  // Version 1 results are a MeasureResult's fields less "instruments", with
  // the same spellings (error code names, hex hash, "nan"/"inf" strings).
  json fields = object_member(record, "result", "");
  fields["instruments"] = json::object();
  auto r = load_fields<Ref<MeasureResult>>(fields, MeasureResult::kTypeKey, "bad \"result\"");
  return *r;
}

}  // namespace

std::tuple<te::Task, schedule::State, MeasureResult> record_v1_from_json(const json& doc) {
  te::Task task = task_from_json(doc);
  auto state = reading("bad \"state\"",
                       [&] { return load_json_as<schedule::State>(member(doc, "state", "")); });
  TT_CHECK(state, kParse, "\"state\" is a null graph");
  return {std::move(task), std::move(state), result_from_json(doc)};
}

}  // namespace tensortune::measure::detail
