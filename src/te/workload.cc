#include "tensortune/te/workload.h"

#include <cctype>
#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <map>
#include <memory>
#include <unordered_set>

#include "tensortune/object/serialize.h"
#include "tensortune/object/structural.h"
#include "tensortune/support/strings.h"

namespace tensortune::te {
namespace {

using json = nlohmann::json;

std::map<std::string, std::unique_ptr<WorkloadDef>, std::less<>>& registry() {
  static std::map<std::string, std::unique_ptr<WorkloadDef>, std::less<>> defs;
  return defs;
}

std::string registered_names() {
  std::vector<std::string> names;
  for (const auto& [name, def] : registry()) names.push_back(name);
  return names.empty() ? std::string("(none)") : join(names, ", ");
}

std::string type_name(ArgType t) { return std::string(EnumNames<ArgType>::names[size_t(t)]); }

size_t required_count(const WorkloadDef& def) {
  size_t n = 0;
  while (n < def.args.size() && def.args[n].default_value.is_null()) ++n;
  return n;
}

[[noreturn]] void bad_argument(const WorkloadDef& def, size_t i, const std::string& what) {
  fail(ErrorKind::kInvalidArgument, "workload '", def.name, "': argument ", i + 1, " '",
       def.args[i].name, "' ", what, "; signature: ", def.name, "(", signature(def), ")");
}

std::string describe(const json& value) {
  std::string text = value.dump();
  return text.size() > 40 ? text.substr(0, 40) + "..." : text;
}

std::optional<int64_t> as_int(const json& v) {
  if (v.is_number_unsigned()) {
    if (v.get<uint64_t>() > static_cast<uint64_t>(INT64_MAX)) return std::nullopt;
    return static_cast<int64_t>(v.get<uint64_t>());
  }
  if (v.is_number_integer()) return v.get<int64_t>();
  if (v.is_number_float()) {
    double d = v.get<double>();
    if (std::isfinite(d) && d == std::trunc(d) && std::fabs(d) < 9.0e15) {
      return static_cast<int64_t>(d);
    }
    return std::nullopt;
  }
  if (v.is_string()) {
    long long n = 0;
    if (parse_int(trim(v.get<std::string>()), &n)) return n;
  }
  return std::nullopt;
}

std::optional<std::vector<int64_t>> parse_shape_text(std::string_view text) {
  text = trim(text);
  std::vector<std::string> parts;
  if (!text.empty() && text.front() == '[') {
    if (text.back() != ']') return std::nullopt;
    std::string_view inner = trim(text.substr(1, text.size() - 2));
    if (!inner.empty()) parts = split(inner, ',');
  } else {
    parts = split(text, 'x');
  }
  std::vector<int64_t> shape;
  for (const auto& p : parts) {
    long long n = 0;
    if (!parse_int(trim(p), &n)) return std::nullopt;
    shape.push_back(n);
  }
  return shape;
}

// One argument in any accepted form, made canonical (see workload.h).
json canonical_arg(const WorkloadDef& def, size_t i, const json& value) {
  const ArgSpec& spec = def.args[i];
  switch (spec.type) {
    case ArgType::kInt: {
      auto n = as_int(value);
      if (!n) bad_argument(def, i, "must be an int, got " + describe(value));
      return *n;
    }
    case ArgType::kFloat: {
      double d = 0;
      bool ok = false;
      if (value.is_number()) {
        d = value.get<double>();
        ok = true;
      } else if (value.is_string()) {
        ok = parse_double(trim(value.get<std::string>()), &d);
      }
      if (!ok || !std::isfinite(d)) {
        bad_argument(def, i, "must be a finite number, got " + describe(value));
      }
      return d;
    }
    case ArgType::kShape: {
      std::optional<std::vector<int64_t>> shape;
      if (value.is_array()) {
        shape.emplace();
        for (const json& e : value) {
          auto n = as_int(e);
          if (!n) {
            shape.reset();
            break;
          }
          shape->push_back(*n);
        }
      } else if (value.is_string()) {
        shape = parse_shape_text(value.get<std::string>());
      }
      if (!shape) {
        bad_argument(
            def, i,
            "must be a shape (an array of ints, or text like 1x3x224x224), got " + describe(value));
      }
      return *shape;
    }
    case ArgType::kDType: {
      if (!value.is_string()) bad_argument(def, i, "must be a dtype name, got " + describe(value));
      std::string canonical;
      try {
        canonical = DataType::parse(trim(value.get<std::string>())).str();
      } catch (const UserError& e) {
        bad_argument(def, i, e.what());
      }
      return canonical;
    }
    case ArgType::kString:
      if (!value.is_string()) bad_argument(def, i, "must be a string, got " + describe(value));
      return value;
  }
  TT_ICHECK(false, "bad argument type");
  return nullptr;
}

json canonical_args(const WorkloadDef& def, const json& args) {
  if (!args.is_array()) {
    fail(ErrorKind::kInvalidArgument, "workload '", def.name,
         "': arguments must be a JSON array, got ", describe(args), "; signature: ", def.name, "(",
         signature(def), ")");
  }
  size_t required = required_count(def);
  if (args.size() < required || args.size() > def.args.size()) {
    std::string range = required == def.args.size()
                            ? std::to_string(required)
                            : std::to_string(required) + " to " + std::to_string(def.args.size());
    std::string missing =
        args.size() < required ? " (missing '" + def.args[args.size()].name + "')" : std::string();
    fail(ErrorKind::kInvalidArgument, "workload '", def.name, "' takes ", range, " arguments, got ",
         args.size(), missing, "; signature: ", def.name, "(", signature(def), ")");
  }
  json out = json::array();
  for (size_t i = 0; i < def.args.size(); ++i) {
    out.push_back(canonical_arg(def, i, i < args.size() ? args[i] : def.args[i].default_value));
  }
  return out;
}

// Splits at commas outside brackets and quotes.
std::vector<std::string> split_top_level(std::string_view text) {
  std::vector<std::string> parts;
  if (trim(text).empty()) return parts;
  int depth = 0;
  bool quoted = false;
  std::string current;
  for (size_t i = 0; i < text.size(); ++i) {
    char c = text[i];
    if (quoted) {
      current += c;
      if (c == '\\' && i + 1 < text.size()) {
        current += text[++i];
      } else if (c == '"') {
        quoted = false;
      }
      continue;
    }
    if (c == '"') quoted = true;
    if (c == '[') ++depth;
    if (c == ']') --depth;
    if (c == ',' && depth == 0) {
      parts.emplace_back(trim(current));
      current.clear();
      continue;
    }
    current += c;
  }
  parts.emplace_back(trim(current));
  return parts;
}

// One text argument as JSON of its declared type (canonical_arg checks it further).
json text_arg(const WorkloadDef& def, size_t i, const std::string& text) {
  if (i >= def.args.size()) return text;  // the count check reports it
  switch (def.args[i].type) {
    case ArgType::kInt:
    case ArgType::kFloat:
    case ArgType::kShape:
    case ArgType::kDType: return text;
    case ArgType::kString:
      if (!text.empty() && text.front() == '"') {
        try {
          return parse_json_text(text, "quoted string");
        } catch (const UserError&) {
          bad_argument(def, i, "is not a valid quoted string: " + text);
        }
      }
      return text;
  }
  return text;
}

std::string format_arg(const ArgSpec& spec, const json& value) {
  switch (spec.type) {
    case ArgType::kInt: return std::to_string(value.get<int64_t>());
    case ArgType::kFloat: return format_double(value.get<double>());
    case ArgType::kShape: return value.dump();  // [1,3,224,224]
    case ArgType::kDType: return value.get<std::string>();
    case ArgType::kString: return value.dump();
  }
  return value.dump();
}

void validate_named(const NamedWorkloadNode& n) {
  const WorkloadDef& def = find_workload(n.name);
  json canonical = canonical_args(def, n.args);
  if (canonical != n.args) {
    fail(ErrorKind::kInvalidArgument, "workload '", n.name, "': arguments ", n.args.dump(),
         " are not in canonical form (", canonical.dump(), ")");
  }
}

void validate_dag(const DagWorkloadNode& n) {
  if (n.outputs.empty()) fail(ErrorKind::kInvalidArgument, "a DAG workload needs an output");
  std::unordered_set<const TensorNode*> given;  // membership only
  for (size_t i = 0; i < n.inputs.size(); ++i) {
    const Tensor& t = n.inputs[i];
    if (!t) fail(ErrorKind::kInvalidArgument, "DAG workload: input ", i, " is null");
    if (!t.is_placeholder()) {
      fail(ErrorKind::kInvalidArgument, "DAG workload: input ", i, " ('", t.name(),
           "') is computed, not a placeholder");
    }
    if (!given.insert(t.get()).second) {
      fail(ErrorKind::kInvalidArgument, "DAG workload: input '", t.name(), "' is listed twice");
    }
  }
  for (size_t i = 0; i < n.outputs.size(); ++i) {
    if (!n.outputs[i]) fail(ErrorKind::kInvalidArgument, "DAG workload: output ", i, " is null");
  }
  for (size_t k = 0; k < n.constant_inputs.size(); ++k) {
    int64_t c = n.constant_inputs[k];
    if (c < 0 || c >= static_cast<int64_t>(n.inputs.size()) ||
        (k > 0 && c <= n.constant_inputs[k - 1])) {
      fail(ErrorKind::kInvalidArgument, "DAG workload: constant input ", c,
           " is out of range or out of order (", n.inputs.size(), " inputs)");
    }
  }
  for (const Tensor& p : placeholder_inputs(n.outputs)) {
    if (!given.count(p.get())) {
      fail(ErrorKind::kInvalidArgument, "DAG workload: the outputs read placeholder '", p.name(),
           "', which is not among the inputs");
    }
  }
}

}  // namespace

void NamedWorkloadNode::declare(FieldList<NamedWorkloadNode>& f) {
  f.def("name", &NamedWorkloadNode::name)
      .def("args", &NamedWorkloadNode::args)
      .validate(validate_named);
}

void DagWorkloadNode::declare(FieldList<DagWorkloadNode>& f) {
  f.def("inputs", &DagWorkloadNode::inputs)
      .def("outputs", &DagWorkloadNode::outputs)
      .def_added_later("constant_inputs", &DagWorkloadNode::constant_inputs)
      .validate(validate_dag);
}

TT_REGISTER_NODE(NamedWorkloadNode);
TT_REGISTER_NODE(DagWorkloadNode);

void register_workload(WorkloadDef def) {
  TT_ICHECK(!def.name.empty() && def.build, "a workload needs a name and a build function");
  for (char c : def.name) {
    TT_ICHECK(std::isalnum(static_cast<unsigned char>(c)) || c == '_', "workload name '", def.name,
              "' must be an identifier (it is part of keys)");
  }
  bool optional = false;
  for (size_t i = 0; i < def.args.size(); ++i) {
    ArgSpec& spec = def.args[i];
    if (spec.default_value.is_null()) {
      TT_ICHECK(!optional, "workload '", def.name, "': required argument '", spec.name,
                "' follows an optional one");
    } else {
      optional = true;
      spec.default_value = canonical_arg(def, i, spec.default_value);
    }
  }
  auto& defs = registry();
  TT_ICHECK(!defs.count(def.name), "workload '", def.name, "' registered twice");
  std::string name = def.name;
  defs.emplace(std::move(name), std::make_unique<WorkloadDef>(std::move(def)));
}

std::vector<const WorkloadDef*> registered_workloads() {
  std::vector<const WorkloadDef*> out;
  for (const auto& [name, def] : registry()) out.push_back(def.get());
  return out;
}

const WorkloadDef& find_workload(std::string_view name) {
  auto it = registry().find(name);
  if (it == registry().end()) {
    fail(ErrorKind::kNotFound, "unknown workload '", name,
         "'; registered workloads: ", registered_names());
  }
  return *it->second;
}

std::string signature(const WorkloadDef& def) {
  std::string out;
  for (size_t i = 0; i < def.args.size(); ++i) {
    const ArgSpec& spec = def.args[i];
    std::string item = spec.name + ":" + type_name(spec.type);
    if (!spec.default_value.is_null()) item += "=" + format_arg(spec, spec.default_value);
    if (spec.default_value.is_null()) {
      out += (i ? ", " : "") + item;
    } else {
      out += (i ? "[, " : "[") + item + "]";
    }
  }
  return out;
}

Workload make_named_workload(std::string_view name, const nlohmann::json& args) {
  const WorkloadDef& def = find_workload(name);
  auto node = make_node<NamedWorkloadNode>();
  node->name = def.name;
  node->args = canonical_args(def, args);
  // Build once, so arguments the signature admits but the ops reject (a zero
  // extent, groups that do not divide the channels) fail here, not in a worker.
  try {
    def.build(node->args);
  } catch (const UserError& e) {
    fail(e.kind(), "workload '", def.name, "' with arguments ", node->args.dump(), ": ", e.what());
  }
  return Workload(std::move(node));
}

Workload make_named_workload_from_text(std::string_view name, std::string_view args) {
  const WorkloadDef& def = find_workload(name);
  json array = json::array();
  std::vector<std::string> parts = split_top_level(args);
  for (size_t i = 0; i < parts.size(); ++i) array.push_back(text_arg(def, i, parts[i]));
  return make_named_workload(name, array);
}

Workload parse_workload_key(std::string_view key) {
  std::string_view text = trim(key);
  if (starts_with(text, "dag:")) {
    fail(ErrorKind::kInvalidArgument, "key '", key,
         "' names a DAG workload by its hash; the workload itself must come with it");
  }
  size_t open = text.find('(');
  if (open == std::string_view::npos || open == 0 || text.back() != ')') {
    fail(ErrorKind::kInvalidArgument, "'", key,
         "' is not a workload key; expected name(arg,...) such as matmul(64,64,64,float32)");
  }
  return make_named_workload_from_text(text.substr(0, open),
                                       text.substr(open + 1, text.size() - open - 2));
}

Workload make_dag_workload(std::vector<Tensor> inputs, std::vector<Tensor> outputs,
                           std::vector<int> constant_inputs) {
  auto node = make_node<DagWorkloadNode>();
  node->inputs = std::move(inputs);
  node->outputs = std::move(outputs);
  node->constant_inputs.assign(constant_inputs.begin(), constant_inputs.end());
  validate_dag(*node);
  return Workload(std::move(node));
}

WorkloadTensors workload_tensors(const Workload& w) {
  TT_CHECK(w, kInvalidArgument, "workload_tensors of a null workload");
  if (auto dag = w.as<DagWorkloadNode>()) {
    return {dag->inputs, dag->outputs,
            std::vector<int>(dag->constant_inputs.begin(), dag->constant_inputs.end())};
  }
  auto named = w.as<NamedWorkloadNode>();
  TT_ICHECK(named, "unknown workload node ", w->type_key());
  const WorkloadDef& def = find_workload(named->name);
  WorkloadTensors tensors = def.build(named->args);
  for (size_t k = 0; k < tensors.constant_inputs.size(); ++k) {
    int c = tensors.constant_inputs[k];
    TT_ICHECK(c >= 0 && c < static_cast<int>(tensors.inputs.size()) &&
                  (k == 0 || c > tensors.constant_inputs[k - 1]),
              "workload '", def.name, "' lists constant input ", c, " out of order or range");
  }
  // The same checks as for a DAG: a registered function must return a well-formed one.
  auto check = make_node<DagWorkloadNode>();
  check->inputs = tensors.inputs;
  check->outputs = tensors.outputs;
  try {
    validate_dag(*check);
  } catch (const UserError& e) {
    TT_ICHECK(false, "workload '", def.name, "' built an invalid DAG: ", e.what());
  }
  return tensors;
}

std::string workload_key(const Workload& w) {
  TT_CHECK(w, kInvalidArgument, "workload_key of a null workload");
  if (auto named = w.as<NamedWorkloadNode>()) {
    const WorkloadDef& def = find_workload(named->name);
    std::vector<std::string> parts;
    for (size_t i = 0; i < def.args.size() && i < named->args.size(); ++i) {
      parts.push_back(format_arg(def.args[i], named->args[i]));
    }
    return named->name + "(" + join(parts, ",") + ")";
  }
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016" PRIx64, structural_hash(w));
  return std::string("dag:") + hex;
}

uint64_t workload_dag_hash(const Workload& w) {
  if (w.as<DagWorkloadNode>()) return structural_hash(w);
  WorkloadTensors tensors = workload_tensors(w);
  auto dag = make_node<DagWorkloadNode>();
  dag->inputs = std::move(tensors.inputs);
  dag->outputs = std::move(tensors.outputs);
  return structural_hash(Workload(std::move(dag)));
}

}  // namespace tensortune::te
