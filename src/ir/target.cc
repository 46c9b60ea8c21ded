#include "tensortune/ir/target.h"

#include <algorithm>
#include <cctype>
#include <limits>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <ostream>
#include <set>

#include "tensortune/object/structural.h"
#include "tensortune/support/host_cpu.h"
#include "tensortune/support/strings.h"

namespace tensortune::ir {
namespace {

using json = nlohmann::json;

std::string strip_dash(std::string_view name) {
  return std::string(starts_with(name, "-") ? name.substr(1) : name);
}

std::string describe(const json& value) {
  std::string text = value.dump();
  if (text.size() > 40) text = text.substr(0, 37) + "...";
  return std::string(value.type_name()) + " " + text;
}

// ---------------------------------------------------------------------------
// The kind registry. Kinds are registered at static initialisation and never
// removed, so references into the map stay valid for the life of the process.

struct KindRegistry {
  std::mutex mutex;
  std::map<std::string, std::unique_ptr<TargetKindInfo>, std::less<>> kinds;
};

KindRegistry& kind_registry() {
  static KindRegistry registry;
  return registry;
}

std::string known_kinds() { return join(target_kind_names(), ", "); }

std::string known_attrs(const TargetKindInfo& kind) {
  std::vector<std::string> names;
  for (const auto& a : kind.attrs) names.push_back("-" + a.name);
  std::sort(names.begin(), names.end());
  return names.empty() ? "(none)" : join(names, ", ");
}

[[noreturn]] void unknown_attr(const TargetKindInfo& kind, std::string_view name) {
  fail(ErrorKind::kNotFound, "unknown attribute '-", strip_dash(name), "' for target kind '",
       kind.name, "'; known attributes: ", known_attrs(kind));
}

const TargetAttrInfo& find_attr(const TargetKindInfo& kind, std::string_view name) {
  const TargetAttrInfo* info = kind.attr(name);
  if (!info) unknown_attr(kind, name);
  return *info;
}

std::string where(const TargetKindInfo& kind, const TargetAttrInfo& attr) {
  return "attribute '-" + attr.name + "' of target kind '" + kind.name + "'";
}

// A list element must survive the comma-separated string form.
void check_list_element(const TargetKindInfo& kind, const TargetAttrInfo& attr,
                        const std::string& element) {
  if (element.empty() || element.find(',') != std::string::npos) {
    fail(ErrorKind::kInvalidArgument, where(kind, attr),
         ": list elements must be non-empty and contain no ',', got \"", element, "\"");
  }
}

// Checks a typed value and returns its canonical form (lists as sorted sets).
json canonical_value(const TargetKindInfo& kind, const TargetAttrInfo& attr, const json& value) {
  auto mismatch = [&] {
    fail(ErrorKind::kTypeMismatch, where(kind, attr), " expects ", target_attr_type_name(attr.type),
         ", got ", describe(value));
  };
  switch (attr.type) {
    case TargetAttrType::kInt: {
      if (!value.is_number_integer()) mismatch();
      if (value.is_number_unsigned() &&
          value.get<uint64_t>() > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
        fail(ErrorKind::kInvalidArgument, where(kind, attr), ": ", value.dump(),
             " is out of range");
      }
      int64_t v = value.get<int64_t>();
      if (v < attr.min_value) {
        fail(ErrorKind::kInvalidArgument, where(kind, attr), " must be at least ", attr.min_value,
             ", got ", v);
      }
      return v;
    }
    case TargetAttrType::kBool:
      if (!value.is_boolean()) mismatch();
      return value;
    case TargetAttrType::kString:
      if (!value.is_string()) mismatch();
      return value;
    case TargetAttrType::kStringList: {
      if (!value.is_array()) mismatch();
      std::set<std::string> elements;
      for (const auto& e : value) {
        if (!e.is_string()) mismatch();
        check_list_element(kind, attr, e.get<std::string>());
        elements.insert(e.get<std::string>());
      }
      return json(std::vector<std::string>(elements.begin(), elements.end()));
    }
  }
  TT_ICHECK(false, "unhandled target attribute type");
  return json();
}

// Converts the text after '=' in a target string (nullptr: no '=' at all).
json value_from_text(const TargetKindInfo& kind, const TargetAttrInfo& attr,
                     const std::string* text) {
  if (!text) {
    if (attr.type == TargetAttrType::kBool) return true;
    fail(ErrorKind::kParse, where(kind, attr), " needs a value: -", attr.name, "=<",
         target_attr_type_name(attr.type), ">");
  }
  switch (attr.type) {
    case TargetAttrType::kInt: {
      long long v = 0;
      if (!parse_int(*text, &v)) {
        fail(ErrorKind::kTypeMismatch, where(kind, attr), " expects int, got '", *text, "'");
      }
      return static_cast<int64_t>(v);
    }
    case TargetAttrType::kBool:
      if (*text == "true") return true;
      if (*text == "false") return false;
      fail(ErrorKind::kTypeMismatch, where(kind, attr), " expects bool (true or false), got '",
           *text, "'");
    case TargetAttrType::kString: return *text;
    case TargetAttrType::kStringList:
      return text->empty() ? json::array() : json(split(*text, ','));
  }
  TT_ICHECK(false, "unhandled target attribute type");
  return json();
}

// ---------------------------------------------------------------------------
// The string form.

bool needs_quotes(std::string_view text) {
  if (text.empty()) return true;
  for (char c : text) {
    if (std::isspace(static_cast<unsigned char>(c)) || c == '"' || c == '\\') return true;
  }
  return false;
}

std::string quote_if_needed(std::string_view text) {
  if (!needs_quotes(text)) return std::string(text);
  std::string out = "\"";
  for (char c : text) {
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  return out + "\"";
}

std::string format_value(const json& value) {
  if (value.is_boolean()) return value.get<bool>() ? "true" : "false";
  if (value.is_number_integer()) return std::to_string(value.get<int64_t>());
  if (value.is_string()) return quote_if_needed(value.get<std::string>());
  TT_ICHECK(value.is_array(), "unexpected target attribute value ", value.dump());
  return quote_if_needed(join(value.get<std::vector<std::string>>(), ","));
}

std::string target_string(const TargetNode& node) {
  std::string out = node.kind;
  for (const auto& [name, value] : node.attrs.items())
    out += " -" + name + "=" + format_value(value);
  if (node.host) out += " -host=" + quote_if_needed(target_string(*node.host));
  return out;
}

// Splits at whitespace outside double quotes; inside quotes a backslash takes
// the next character literally, so quote_if_needed's output reads back as is.
std::vector<std::string> tokenize(std::string_view text) {
  std::vector<std::string> tokens;
  std::string current;
  bool in_token = false, in_quote = false;
  size_t quote_start = 0;
  for (size_t i = 0; i < text.size(); ++i) {
    char c = text[i];
    if (in_quote) {
      if (c == '\\' && i + 1 < text.size()) {
        current += text[++i];
      } else if (c == '"') {
        in_quote = false;
      } else {
        current += c;
      }
    } else if (std::isspace(static_cast<unsigned char>(c))) {
      if (in_token) tokens.push_back(std::move(current));
      current.clear();
      in_token = false;
    } else {
      in_token = true;
      if (c == '"') {
        in_quote = true;
        quote_start = i;
      } else {
        current += c;
      }
    }
  }
  if (in_quote) fail(ErrorKind::kParse, "unterminated quote at byte offset ", quote_start);
  if (in_token) tokens.push_back(std::move(current));
  return tokens;
}

// `native` is shorthand for `c -mcpu=native`.
constexpr std::string_view kNativeAlias = "native";

const TargetKindInfo& kind_of(std::string_view name) {
  return target_kind(name == kNativeAlias ? std::string_view("c") : name);
}

const TargetNode& deref(const Target& target, std::string_view what) {
  TT_CHECK(target, kInvalidArgument, what, ": the target is null");
  return *target;
}

// ---------------------------------------------------------------------------
// Validation of a node: shared by every constructor and by load_json.

void validate_target(const TargetNode& node) {
  const TargetKindInfo& kind = target_kind(node.kind);
  if (!node.attrs.is_object()) {
    fail(ErrorKind::kTypeMismatch, "target attributes must be a JSON object, got ",
         describe(node.attrs));
  }
  for (const auto& [name, value] : node.attrs.items()) {
    const TargetAttrInfo* attr = kind.attr(name);
    if (!attr || attr->name != name) unknown_attr(kind, name);
    json canonical = canonical_value(kind, *attr, value);
    if (canonical != value) {
      fail(ErrorKind::kInvalidArgument, where(kind, *attr), " is not in canonical form (",
           value.dump(), " instead of ", canonical.dump(), ")");
    }
    if (canonical == attr->default_value) {
      fail(ErrorKind::kInvalidArgument, where(kind, *attr), " is set to its default ", value.dump(),
           "; canonical targets omit defaults");
    }
  }
  if (node.host) {
    const TargetKindInfo& host_kind = target_kind(node.host->kind);
    if (!host_kind.can_be_host) {
      std::vector<std::string> hosts;
      for (const auto& name : target_kind_names()) {
        if (target_kind(name).can_be_host) hosts.push_back(name);
      }
      fail(ErrorKind::kInvalidArgument, "target kind '", host_kind.name,
           "' cannot be a host; host kinds: ", join(hosts, ", "));
    }
    if (node.host->host) {
      fail(ErrorKind::kInvalidArgument, "the host '", target_string(*node.host),
           "' has a host of its own; a host must not have one");
    }
  }
  if (kind.validate) kind.validate(node);
}

// The one normaliser behind parse, from_json and make (see target.h).
Target build(std::string_view kind_name, const json& given, const Target& host) {
  const TargetKindInfo& kind = kind_of(kind_name);
  if (!given.is_object()) {
    fail(ErrorKind::kTypeMismatch, "target attributes must be a JSON object, got ",
         describe(given));
  }
  json attrs = json::object();
  for (const auto& [key, value] : given.items()) {
    const TargetAttrInfo& attr = find_attr(kind, key);
    if (attrs.contains(attr.name)) {
      fail(ErrorKind::kInvalidArgument, where(kind, attr), " is given twice");
    }
    attrs[attr.name] = canonical_value(kind, attr, value);
  }
  if (kind_name == kNativeAlias) {
    if (attrs.contains("mcpu")) {
      fail(ErrorKind::kInvalidArgument,
           "'native' means 'c -mcpu=native' and cannot take -mcpu=", format_value(attrs["mcpu"]));
    }
    attrs["mcpu"] = "native";
  }
  if (kind.resolve) {
    kind.resolve(attrs);
    // The hook may add values; bring them to canonical form like the user's.
    for (auto& [key, value] : attrs.items())
      value = canonical_value(kind, find_attr(kind, key), value);
  }
  for (const auto& attr : kind.attrs) {
    auto it = attrs.find(attr.name);
    if (it != attrs.end() && *it == attr.default_value) attrs.erase(it);
  }
  auto node = make_node<TargetNode>();
  node->kind = kind.name;
  node->attrs = std::move(attrs);
  node->host = host;
  validate_target(*node);
  return Target(node);
}

// ---------------------------------------------------------------------------
// The built-in kinds.

bool is_power_of_two(int64_t v) { return v > 0 && (v & (v - 1)) == 0; }

void resolve_c(json& attrs) {
  auto mcpu = attrs.find("mcpu");
  if (mcpu == attrs.end() || *mcpu != "native") return;
  const HostCpu& cpu = host_cpu();
  *mcpu = cpu.name;
  // What the user set explicitly wins (e.g. -num-cores=2 to leave cores free).
  auto fill = [&](const char* name, json value) {
    if (!attrs.contains(name)) attrs[name] = std::move(value);
  };
  fill("mattr", cpu.features);
  fill("num-cores", cpu.cores);
  if (cpu.cache_line > 0) fill("cache-line", cpu.cache_line);
  if (cpu.l1 > 0) fill("l1-cache", cpu.l1);
  if (cpu.l2 > 0) fill("l2-cache", cpu.l2);
  if (cpu.l3 > 0) fill("l3-cache", cpu.l3);
}

void validate_c(const TargetNode& t) {
  const std::string mcpu = t.attr<std::string>("mcpu");
  TT_CHECK(mcpu != "native", kInvalidArgument,
           "-mcpu=native is unresolved; build targets with Target::parse, from_json or make");
  TT_CHECK(!mcpu.empty(), kInvalidArgument, "-mcpu must not be empty");
  TT_CHECK(!t.attr<std::string>("compiler").empty(), kInvalidArgument,
           "-compiler must not be empty");
  for (const auto& feature : t.attr<std::vector<std::string>>("mattr")) {
    bool ok = std::isalnum(static_cast<unsigned char>(feature[0]));
    for (char c : feature) {
      ok = ok && (std::islower(static_cast<unsigned char>(c)) ||
                  std::isdigit(static_cast<unsigned char>(c)) || c == '.' || c == '_' || c == '-');
    }
    TT_CHECK(ok, kInvalidArgument, "-mattr feature '", feature,
             "' is not a feature name (lower-case letters, digits, '.', '_' and '-')");
  }
  int64_t width = t.attr<int64_t>("vector-width");
  TT_CHECK(width == 0 || is_power_of_two(width), kInvalidArgument,
           "-vector-width must be 0 (derived from -mattr) or a power of two, got ", width);
  TT_CHECK(is_power_of_two(t.attr<int64_t>("cache-line")), kInvalidArgument,
           "-cache-line must be a power of two, got ", t.attr<int64_t>("cache-line"));
}

// -vector-width, or what -mattr implies when it is 0.
int64_t c_vector_bytes(const TargetNode& t) {
  int64_t width = t.attr<int64_t>("vector-width");
  if (width > 0) return width;
  auto features = t.attr<std::vector<std::string>>("mattr");
  auto has = [&](std::string_view f) {
    return std::find(features.begin(), features.end(), f) != features.end();
  };
  if (has("avx512f")) return 64;
  if (has("avx") || has("avx2")) return 32;
  return 16;
}

bool compatible_c(const TargetNode& tuned, const TargetNode& run, std::string* why) {
  auto run_features = run.attr<std::vector<std::string>>("mattr");
  for (const auto& f : tuned.attr<std::vector<std::string>>("mattr")) {
    if (!std::binary_search(run_features.begin(), run_features.end(), f)) {
      if (why) *why = "the target run on lacks -mattr feature '" + f + "'";
      return false;
    }
  }
  int64_t tuned_width = c_vector_bytes(tuned), run_width = c_vector_bytes(run);
  if (run_width < tuned_width) {
    if (why) {
      *why = "the target run on has " + std::to_string(run_width) + "-byte vectors, the schedule " +
             "was tuned for " + std::to_string(tuned_width) + "-byte vectors";
    }
    return false;
  }
  return true;
}

HardwareParams hardware_params_c(const TargetNode& t) {
  auto p = make_node<HardwareParamsNode>();
  p->num_cores = t.attr<int64_t>("num-cores");
  p->vector_bytes = c_vector_bytes(t);
  p->cache_line_bytes = t.attr<int64_t>("cache-line");
  p->l1_cache_bytes = t.attr<int64_t>("l1-cache");
  p->l2_cache_bytes = t.attr<int64_t>("l2-cache");
  p->l3_cache_bytes = t.attr<int64_t>("l3-cache");
  return HardwareParams(p);
}

TargetKindInfo c_kind() {
  using T = TargetAttrType;
  TargetKindInfo k;
  k.name = "c";
  k.doc = "CPU code, generated as C and compiled by a C compiler";
  k.can_be_host = true;
  k.attrs = {
      {"mcpu", T::kString, "generic",
       "CPU model name (descriptive); \"native\" resolves the local CPU into every attribute", 0},
      {"mattr", T::kStringList, json::array(),
       "instruction-set features the code may use, GCC -m spelling (avx2,fma,avx512f,neon)", 0},
      {"num-cores", T::kInt, 1, "CPU cores the code may use", 1},
      {"vector-width", T::kInt, 0,
       "bytes of the widest SIMD register the code may use; 0: 64 with avx512f, 32 with "
       "avx/avx2, else 16",
       0},
      {"cache-line", T::kInt, 64, "cache line size in bytes", 1},
      {"l1-cache", T::kInt, 32768, "L1 data cache size in bytes (per core)", 1},
      {"l2-cache", T::kInt, 1048576, "L2 cache size in bytes", 1},
      {"l3-cache", T::kInt, 8388608, "L3 cache size in bytes (shared)", 1},
      {"compiler", T::kString, "cc", "the C compiler command", 0, true},
      {"cflags", T::kString, "-O3", "flags passed to the C compiler", 0, true},
  };
  k.resolve = resolve_c;
  k.validate = validate_c;
  k.compatible = compatible_c;
  k.hardware_params = hardware_params_c;
  return k;
}

struct CudaArch {
  int64_t major = 0, minor = 0;
  bool specific = false;  // sm_90a: arch-specific features, runs only on that exact arch
};

std::optional<CudaArch> parse_cuda_arch(std::string_view arch) {
  if (!starts_with(arch, "sm_")) return std::nullopt;
  arch.remove_prefix(3);
  CudaArch out;
  if (!arch.empty() && arch.back() == 'a') {
    out.specific = true;
    arch.remove_suffix(1);
  }
  long long number = 0;
  if (arch.size() < 2 || !std::isdigit(static_cast<unsigned char>(arch[0])) ||
      !parse_int(arch, &number)) {
    return std::nullopt;
  }
  out.major = number / 10;
  out.minor = number % 10;
  return out;
}

void validate_cuda(const TargetNode& t) {
  const std::string arch = t.attr<std::string>("arch");
  TT_CHECK(parse_cuda_arch(arch), kInvalidArgument, "-arch must look like sm_80 or sm_90a, got '",
           arch, "'");
  TT_CHECK(is_power_of_two(t.attr<int64_t>("thread-warp-size")), kInvalidArgument,
           "-thread-warp-size must be a power of two, got ", t.attr<int64_t>("thread-warp-size"));
}

bool compatible_cuda(const TargetNode& tuned, const TargetNode& run, std::string* why) {
  auto say = [&](std::string reason) {
    if (why) *why = std::move(reason);
    return false;
  };
  const std::string tuned_arch = tuned.attr<std::string>("arch"),
                    run_arch = run.attr<std::string>("arch");
  CudaArch a = *parse_cuda_arch(tuned_arch), b = *parse_cuda_arch(run_arch);
  // Binary compatibility of NVIDIA GPUs: same major version, minor not older;
  // arch-specific ("a") code only runs on exactly its arch.
  if (a.specific ? tuned_arch != run_arch : (a.major != b.major || b.minor < a.minor)) {
    return say("code for " + tuned_arch + " does not run on " + run_arch);
  }
  for (const char* limit : {"max-threads-per-block", "max-shared-memory-per-block"}) {
    if (run.attr<int64_t>(limit) < tuned.attr<int64_t>(limit)) {
      return say(std::string("the target run on has a smaller -") + limit + " (" +
                 std::to_string(run.attr<int64_t>(limit)) + " < " +
                 std::to_string(tuned.attr<int64_t>(limit)) + ")");
    }
  }
  if (run.attr<int64_t>("thread-warp-size") != tuned.attr<int64_t>("thread-warp-size")) {
    return say("the warp sizes differ");
  }
  return true;
}

HardwareParams hardware_params_cuda(const TargetNode& t) {
  auto p = make_node<HardwareParamsNode>();
  p->num_cores = t.attr<int64_t>("num-sms");
  p->vector_bytes = 16;       // the widest per-thread global access (float4)
  p->cache_line_bytes = 128;  // the global memory transaction size of every NVIDIA GPU
  p->max_threads_per_block = t.attr<int64_t>("max-threads-per-block");
  p->max_shared_memory_per_block = t.attr<int64_t>("max-shared-memory-per-block");
  p->warp_size = t.attr<int64_t>("thread-warp-size");
  return HardwareParams(p);
}

TargetKindInfo cuda_kind() {
  using T = TargetAttrType;
  TargetKindInfo k;
  k.name = "cuda";
  k.doc = "NVIDIA GPU code, generated as CUDA C++";
  k.attrs = {
      {"arch", T::kString, "sm_80", "compute capability the code is compiled for (sm_80, sm_90a)",
       0},
      {"max-threads-per-block", T::kInt, 1024, "most threads in one block", 1},
      {"max-shared-memory-per-block", T::kInt, 49152, "most shared memory one block may use, bytes",
       0},
      {"thread-warp-size", T::kInt, 32, "threads per warp", 1},
      {"num-sms", T::kInt, 108, "streaming multiprocessors (108 on an A100)", 1},
  };
  k.validate = validate_cuda;
  k.compatible = compatible_cuda;
  k.hardware_params = hardware_params_cuda;
  return k;
}

TT_REGISTER_TARGET_KIND(c_kind());
TT_REGISTER_TARGET_KIND(cuda_kind());

template <class T>
constexpr TargetAttrType attr_type_of() {
  if constexpr (std::is_same_v<T, int64_t>) return TargetAttrType::kInt;
  if constexpr (std::is_same_v<T, bool>) return TargetAttrType::kBool;
  if constexpr (std::is_same_v<T, std::string>) return TargetAttrType::kString;
  if constexpr (std::is_same_v<T, std::vector<std::string>>) return TargetAttrType::kStringList;
}

}  // namespace

// ---------------------------------------------------------------------------
// Registry functions.

std::string_view target_attr_type_name(TargetAttrType type) {
  switch (type) {
    case TargetAttrType::kInt: return "int";
    case TargetAttrType::kBool: return "bool";
    case TargetAttrType::kString: return "string";
    case TargetAttrType::kStringList: return "list of strings";
  }
  return "?";
}

const TargetAttrInfo* TargetKindInfo::attr(std::string_view name) const {
  std::string bare = strip_dash(name);
  for (const auto& a : attrs) {
    if (a.name == bare) return &a;
  }
  return nullptr;
}

void register_target_kind(TargetKindInfo info) {
  TT_ICHECK(!info.name.empty() && info.name != kNativeAlias && !starts_with(info.name, "-"),
            "bad target kind name '", info.name, "'");
  std::set<std::string> seen;
  for (const auto& a : info.attrs) {
    TT_ICHECK(!a.name.empty() && !starts_with(a.name, "-") && a.name != "host" &&
                  a.name != "kind" && a.name.find('=') == std::string::npos,
              "target kind '", info.name, "': bad attribute name '", a.name, "'");
    TT_ICHECK(seen.insert(a.name).second, "target kind '", info.name, "': attribute '", a.name,
              "' declared twice");
    try {
      TT_ICHECK(canonical_value(info, a, a.default_value) == a.default_value, "target kind '",
                info.name, "': default of '", a.name, "' is not canonical");
    } catch (const UserError& e) {
      TT_ICHECK(false, "target kind '", info.name, "': bad default: ", e.what());
    }
  }
  KindRegistry& registry = kind_registry();
  std::lock_guard<std::mutex> lock(registry.mutex);
  std::string name = info.name;
  TT_ICHECK(!registry.kinds.count(name), "target kind '", name, "' registered twice");
  registry.kinds.emplace(name, std::make_unique<TargetKindInfo>(std::move(info)));
}

const TargetKindInfo& target_kind(std::string_view name) {
  KindRegistry& registry = kind_registry();
  {
    std::lock_guard<std::mutex> lock(registry.mutex);
    auto it = registry.kinds.find(name);
    if (it != registry.kinds.end()) return *it->second;
  }
  fail(ErrorKind::kNotFound, "unknown target kind '", name, "'; known kinds: ", known_kinds());
}

std::vector<std::string> target_kind_names() {
  KindRegistry& registry = kind_registry();
  std::lock_guard<std::mutex> lock(registry.mutex);
  std::vector<std::string> names;
  for (const auto& [name, info] : registry.kinds) names.push_back(name);
  return names;
}

// ---------------------------------------------------------------------------
// Nodes.

int64_t vector_registers(const HardwareParamsNode& hw) { return hw.vector_bytes >= 64 ? 32 : 16; }

int64_t vector_lanes(const HardwareParamsNode& hw, DataType dtype) {
  return std::max<int64_t>(hw.vector_bytes / std::max(dtype.bytes(), 1), 1);
}

void HardwareParamsNode::declare(FieldList<HardwareParamsNode>& f) {
  using N = HardwareParamsNode;
  f.def("num_cores", &N::num_cores)
      .def("vector_bytes", &N::vector_bytes)
      .def("cache_line_bytes", &N::cache_line_bytes)
      .def("l1_cache_bytes", &N::l1_cache_bytes)
      .def("l2_cache_bytes", &N::l2_cache_bytes)
      .def("l3_cache_bytes", &N::l3_cache_bytes)
      .def("max_threads_per_block", &N::max_threads_per_block)
      .def("max_shared_memory_per_block", &N::max_shared_memory_per_block)
      .def("warp_size", &N::warp_size)
      .validate([](const N& p) {
        TT_CHECK(p.num_cores >= 1 && p.vector_bytes >= 1 && p.cache_line_bytes >= 1,
                 kInvalidArgument, "num_cores, vector_bytes and cache_line_bytes must be positive");
        TT_CHECK(p.l1_cache_bytes >= 0 && p.l2_cache_bytes >= 0 && p.l3_cache_bytes >= 0 &&
                     p.max_threads_per_block >= 0 && p.max_shared_memory_per_block >= 0 &&
                     p.warp_size >= 0,
                 kInvalidArgument, "hardware parameters must not be negative");
      });
}

void TargetNode::declare(FieldList<TargetNode>& f) {
  f.def("kind", &TargetNode::kind)
      .def("attrs", &TargetNode::attrs)
      .def("host", &TargetNode::host)
      .validate(validate_target);
}

TT_REGISTER_NODE(HardwareParamsNode);
TT_REGISTER_NODE(TargetNode);

bool TargetNode::has_attr(std::string_view name) const { return attrs.contains(strip_dash(name)); }

template <class T>
T TargetNode::attr(std::string_view name) const {
  const TargetKindInfo& k = target_kind(kind);
  const TargetAttrInfo& info = find_attr(k, name);
  if (info.type != attr_type_of<T>()) {
    fail(ErrorKind::kTypeMismatch, where(k, info), " is a ", target_attr_type_name(info.type),
         ", not a ", target_attr_type_name(attr_type_of<T>()));
  }
  auto it = attrs.find(info.name);
  return (it != attrs.end() ? *it : info.default_value).template get<T>();
}

template int64_t TargetNode::attr<int64_t>(std::string_view) const;
template bool TargetNode::attr<bool>(std::string_view) const;
template std::string TargetNode::attr<std::string>(std::string_view) const;
template std::vector<std::string> TargetNode::attr<std::vector<std::string>>(
    std::string_view) const;

// ---------------------------------------------------------------------------
// Target.

Target Target::parse(std::string_view text) {
  try {
    std::vector<std::string> tokens = tokenize(text);
    if (tokens.empty())
      fail(ErrorKind::kParse, "empty target string; known kinds: ", known_kinds());
    const std::string& kind_name = tokens[0];
    if (starts_with(kind_name, "-")) {
      fail(ErrorKind::kParse, "a target string starts with its kind; known kinds: ", known_kinds());
    }
    const TargetKindInfo& kind = kind_of(kind_name);
    json attrs = json::object();
    Target host;
    bool host_given = false;
    for (size_t i = 1; i < tokens.size(); ++i) {
      const std::string& token = tokens[i];
      if (!starts_with(token, "-") || token.size() < 2) {
        fail(ErrorKind::kParse, "expected -name=value, got '", token, "'");
      }
      auto eq = token.find('=');
      std::string name = token.substr(1, eq == std::string::npos ? std::string::npos : eq - 1);
      std::optional<std::string> value;
      if (eq != std::string::npos) value = token.substr(eq + 1);
      if (name == "host") {
        TT_CHECK(!host_given, kInvalidArgument, "-host is given twice");
        TT_CHECK(value, kParse, "-host needs a value: -host=<target string>");
        host = parse(*value);
        host_given = true;
        continue;
      }
      const TargetAttrInfo& attr = find_attr(kind, name);
      if (attrs.contains(attr.name)) {
        fail(ErrorKind::kInvalidArgument, where(kind, attr), " is given twice");
      }
      attrs[attr.name] = value_from_text(kind, attr, value ? &*value : nullptr);
    }
    return build(kind_name, attrs, host);
  } catch (const UserError& e) {
    fail(e.kind(), "target string '", text, "': ", e.what());
  }
}

Target Target::from_json(const json& config) {
  if (config.is_string()) return parse(config.get<std::string>());
  if (!config.is_object()) {
    fail(ErrorKind::kTypeMismatch, "a target config is a string or an object, got ",
         describe(config));
  }
  auto kind = config.find("kind");
  if (kind == config.end() || !kind->is_string()) {
    fail(ErrorKind::kParse, "target config ", describe(config), ": missing string 'kind'");
  }
  json attrs = json::object();
  Target host;
  for (const auto& [key, value] : config.items()) {
    if (key == "kind") continue;
    if (key == "host") {
      if (!value.is_null()) host = from_json(value);
      continue;
    }
    attrs[key] = value;
  }
  return build(kind->get<std::string>(), attrs, host);
}

Target Target::make(std::string_view kind, const json& attrs, const Target& host) {
  return build(kind, attrs, host);
}

std::string Target::str() const { return target_string(deref(*this, "Target::str")); }

json Target::to_json() const {
  const TargetNode& node = deref(*this, "Target::to_json");
  json out = node.attrs;
  out["kind"] = node.kind;
  if (node.host) out["host"] = host().to_json();
  return out;
}

Target Target::host() const { return Target(deref(*this, "Target::host").host); }

Target Target::with_host(const Target& new_host) const {
  const TargetNode& node = deref(*this, "Target::with_host");
  if (!new_host) return *this;
  if (node.host) {
    // Structural, not pointer, comparison: a host that crossed a process
    // boundary is another object with the same value (docs/architecture.md, "Why the rules").
    if (structural_equal(node.host, new_host)) return *this;
    fail(ErrorKind::kInvalidArgument, "target '", str(), "' already has host '", host().str(),
         "', which differs from the new host '", new_host.str(), "'");
  }
  auto copy = make_node<TargetNode>(node);
  copy->host = new_host;
  validate_target(*copy);
  return Target(copy);
}

Target Target::without_host() const {
  const TargetNode& node = deref(*this, "Target::without_host");
  if (!node.host) return *this;
  auto copy = make_node<TargetNode>(node);
  copy->host = nullptr;
  return Target(copy);
}

bool Target::operator==(const Target& other) const { return structural_equal(*this, other); }

std::ostream& operator<<(std::ostream& os, const Target& target) {
  return os << (target ? target.str() : std::string("null"));
}

bool compatible(const Target& tuned_for, const Target& run_on, std::string* why) {
  const TargetNode& a = deref(tuned_for, "compatible");
  const TargetNode& b = deref(run_on, "compatible");
  auto say = [&](std::string reason) {
    if (why) *why = std::move(reason);
    return false;
  };
  if (a.kind != b.kind) return say("the kinds differ ('" + a.kind + "' and '" + b.kind + "')");
  const TargetKindInfo& kind = target_kind(a.kind);
  if (kind.compatible) {
    if (!kind.compatible(a, b, why)) return false;
  } else if (a.attrs != b.attrs) {
    return say("the attributes differ (" + target_string(a) + " and " + target_string(b) + ")");
  }
  if (a.host && b.host) {
    std::string inner;
    if (!compatible(tuned_for.host(), run_on.host(), &inner)) return say("hosts: " + inner);
  }
  return true;
}

HardwareParams hardware_params(const Target& target) {
  const TargetNode& node = deref(target, "hardware_params");
  const TargetKindInfo& kind = target_kind(node.kind);
  TT_CHECK(kind.hardware_params, kInvalidArgument, "target kind '", kind.name,
           "' does not describe hardware parameters");
  return kind.hardware_params(node);
}

}  // namespace tensortune::ir

namespace tensortune::ir {

std::vector<std::string> program_attributes(const Target& target) {
  std::vector<std::string> set;
  for (Target t = target; t; t = t.host()) {
    const TargetKindInfo& kind = target_kind(t->kind);
    for (const TargetAttrInfo& attr : kind.attrs) {
      if (!attr.names_program || !t->has_attr(attr.name)) continue;
      const json& value = t->attrs.at(attr.name);
      set.push_back("-" + attr.name + "=" +
                    (value.is_string() ? value.get<std::string>() : value.dump()));
    }
  }
  return set;
}

}  // namespace tensortune::ir
