#include "tensortune/ir/pass_context.h"

#include <algorithm>
#include <cstdio>
#include <map>
#include <mutex>
#include <set>

#include "tensortune/object/structural.h"
#include "tensortune/support/strings.h"

namespace tensortune::ir {
namespace {

using json = nlohmann::json;

std::string describe(const json& value) {
  std::string text = value.dump();
  if (text.size() > 40) text = text.substr(0, 37) + "...";
  return std::string(value.type_name()) + " " + text;
}

// ---------------------------------------------------------------------------
// Registries. Filled at static initialisation and never shrunk, so pointers
// into the maps stay valid; the mutex covers late registration from plugins.

struct ConfigRegistry {
  std::mutex mutex;
  std::map<std::string, ConfigOptionInfo, std::less<>> options;
};

ConfigRegistry& config_registry() {
  static ConfigRegistry registry;
  return registry;
}

struct InstrumentRegistry {
  std::mutex mutex;
  std::map<std::string, InstrumentInfo, std::less<>> instruments;
};

InstrumentRegistry& instrument_registry() {
  static InstrumentRegistry registry;
  return registry;
}

std::string known_options() {
  std::vector<std::string> parts;
  for (const auto& option : config_options()) {
    parts.push_back(option.key + " (" + std::string(config_type_name(option.type)) + ")");
  }
  return parts.empty() ? "(none)" : join(parts, ", ");
}

const ConfigOptionInfo& get_option(std::string_view key) {
  const ConfigOptionInfo* option = find_config_option(key);
  if (!option) {
    fail(ErrorKind::kNotFound, "unknown config option '", key,
         "'; known options: ", known_options());
  }
  return *option;
}

bool has_type(const json& value, ConfigType type) {
  switch (type) {
    case ConfigType::kBool: return value.is_boolean();
    case ConfigType::kInt: return value.is_number_integer();
    case ConfigType::kFloat: return value.is_number_float();
    case ConfigType::kString: return value.is_string();
  }
  return false;
}

// Checks one option value (already in canonical form: floats as floats).
void check_option_value(const ConfigOptionInfo& option, const json& value) {
  if (!has_type(value, option.type)) {
    std::string hint = option.type == ConfigType::kFloat && value.is_number_integer()
                           ? " (write " + value.dump() + ".0)"
                           : "";
    fail(ErrorKind::kTypeMismatch, "config option '", option.key, "' expects ",
         config_type_name(option.type), ", got ", describe(value), hint,
         "; known options: ", known_options());
  }
  if (!option.choices.empty() && std::find(option.choices.begin(), option.choices.end(),
                                           value.get<std::string>()) == option.choices.end()) {
    std::vector<std::string> quoted;
    for (const auto& c : option.choices) quoted.push_back(json(c).dump());
    fail(ErrorKind::kInvalidArgument, "config option '", option.key, "' must be one of ",
         join(quoted, ", "), "; got ", value.dump());
  }
}

void check_pass_list(const std::vector<std::string>& passes, std::string_view field) {
  for (const auto& p : passes) {
    TT_CHECK(!p.empty(), kInvalidArgument, field, ": a pass name must not be empty");
  }
  for (size_t i = 1; i < passes.size(); ++i) {
    TT_CHECK(passes[i - 1] < passes[i], kInvalidArgument, field,
             " must be sorted without duplicates (canonical form), got [", join(passes, ", "), "]");
  }
}

// Shared by PassContext::make and load_json, so a worker rejects exactly
// what the tuner would have.
void validate_pass_context(const PassContextNode& ctx) {
  TT_CHECK(ctx.opt_level >= 0 && ctx.opt_level <= 3, kInvalidArgument,
           "opt_level must be between 0 and 3, got ", ctx.opt_level);
  if (!ctx.config.is_object()) {
    fail(ErrorKind::kTypeMismatch, "config must be a JSON object of option -> value, got ",
         describe(ctx.config));
  }
  for (const auto& [key, value] : ctx.config.items()) check_option_value(get_option(key), value);
  check_pass_list(ctx.disabled_passes, "disabled_passes");
  check_pass_list(ctx.required_passes, "required_passes");
  for (const auto& pass : ctx.disabled_passes) {
    TT_CHECK(!ctx.is_required(pass), kInvalidArgument, "pass '", pass,
             "' is both disabled and required");
  }
  std::set<std::string> names;
  for (const auto& spec : ctx.instruments) {
    TT_CHECK(spec, kInvalidArgument, "instruments: an instrument spec is null");
    // Results are reported by instrument name, so a name may appear once.
    TT_CHECK(names.insert(spec->name).second, kInvalidArgument, "instrument '", spec->name,
             "' is listed twice; a context holds each instrument once");
  }
}

void validate_instrument_spec(const InstrumentSpecNode& spec) {
  const InstrumentInfo* info = find_instrument(spec.name);
  if (!info) {
    fail(ErrorKind::kNotFound, "unknown instrument '", spec.name,
         "'; registered instruments: ", join(instrument_names(), ", "),
         " (an instrument must be compiled into the program that runs it)");
  }
  if (!spec.params.is_object()) {
    fail(ErrorKind::kTypeMismatch, "instrument '", spec.name,
         "': params must be a JSON object, got ", describe(spec.params));
  }
  // Making one is the only complete check of the parameters; factories have
  // no side effects, so the object is simply dropped.
  auto instrument = info->factory(spec.params);
  TT_ICHECK(instrument, "the factory of instrument '", spec.name, "' returned null");
}

// The guards in force on this thread, innermost last.
std::vector<PassContextGuard*>& guard_stack() {
  thread_local std::vector<PassContextGuard*> stack;
  return stack;
}

template <class T>
constexpr ConfigType config_type_of() {
  if constexpr (std::is_same_v<T, bool>) return ConfigType::kBool;
  if constexpr (std::is_same_v<T, int64_t>) return ConfigType::kInt;
  if constexpr (std::is_same_v<T, double>) return ConfigType::kFloat;
  if constexpr (std::is_same_v<T, std::string>) return ConfigType::kString;
}

}  // namespace

// ---------------------------------------------------------------------------
// Config options.

std::string_view config_type_name(ConfigType type) {
  switch (type) {
    case ConfigType::kBool: return "bool";
    case ConfigType::kInt: return "int";
    case ConfigType::kFloat: return "float";
    case ConfigType::kString: return "string";
  }
  return "?";
}

void register_config_option(std::string key, ConfigType type, json default_value, std::string doc,
                            std::vector<std::string> choices) {
  ConfigOptionInfo info{std::move(key), type, std::move(default_value), std::move(doc),
                        std::move(choices)};
  TT_ICHECK(
      info.key.find('.') != std::string::npos && info.key.front() != '.' && info.key.back() != '.',
      "config option key '", info.key, "' must look like layer.name");
  TT_ICHECK(has_type(info.default_value, info.type), "config option '", info.key, "': default ",
            info.default_value.dump(), " is not a ", config_type_name(info.type));
  TT_ICHECK(info.choices.empty() || info.type == ConfigType::kString, "config option '", info.key,
            "': only string options have choices");
  TT_ICHECK(info.choices.empty() ||
                std::find(info.choices.begin(), info.choices.end(),
                          info.default_value.get<std::string>()) != info.choices.end(),
            "config option '", info.key, "': the default is not one of the choices");
  ConfigRegistry& registry = config_registry();
  std::lock_guard<std::mutex> lock(registry.mutex);
  TT_ICHECK(!registry.options.count(info.key), "config option '", info.key, "' registered twice");
  std::string name = info.key;
  registry.options.emplace(std::move(name), std::move(info));
}

const ConfigOptionInfo* find_config_option(std::string_view key) {
  ConfigRegistry& registry = config_registry();
  std::lock_guard<std::mutex> lock(registry.mutex);
  auto it = registry.options.find(key);
  return it == registry.options.end() ? nullptr : &it->second;
}

std::vector<ConfigOptionInfo> config_options() {
  ConfigRegistry& registry = config_registry();
  std::lock_guard<std::mutex> lock(registry.mutex);
  std::vector<ConfigOptionInfo> out;
  for (const auto& [key, info] : registry.options) out.push_back(info);
  return out;
}

// ---------------------------------------------------------------------------
// Instruments.

void register_instrument(InstrumentInfo info) {
  TT_ICHECK(!info.name.empty() && info.factory, "an instrument needs a name and a factory");
  InstrumentRegistry& registry = instrument_registry();
  std::lock_guard<std::mutex> lock(registry.mutex);
  TT_ICHECK(!registry.instruments.count(info.name), "instrument '", info.name,
            "' registered twice");
  std::string name = info.name;
  registry.instruments.emplace(std::move(name), std::move(info));
}

const InstrumentInfo* find_instrument(std::string_view name) {
  InstrumentRegistry& registry = instrument_registry();
  std::lock_guard<std::mutex> lock(registry.mutex);
  auto it = registry.instruments.find(name);
  return it == registry.instruments.end() ? nullptr : &it->second;
}

std::vector<std::string> instrument_names() {
  InstrumentRegistry& registry = instrument_registry();
  std::lock_guard<std::mutex> lock(registry.mutex);
  std::vector<std::string> names;
  for (const auto& [name, info] : registry.instruments) names.push_back(name);
  return names;
}

std::unique_ptr<Instrument> make_instrument(const InstrumentSpec& spec) {
  TT_CHECK(spec, kInvalidArgument, "make_instrument: the spec is null");
  validate_instrument_spec(*spec);
  return find_instrument(spec->name)->factory(spec->params);
}

void InstrumentSpecNode::declare(FieldList<InstrumentSpecNode>& f) {
  f.def("name", &InstrumentSpecNode::name)
      .def("params", &InstrumentSpecNode::params)
      .validate(validate_instrument_spec);
}

InstrumentSpec InstrumentSpec::make(std::string name, json params) {
  auto node = make_node<InstrumentSpecNode>();
  node->name = std::move(name);
  node->params = params.is_null() ? json::object() : std::move(params);
  validate_instrument_spec(*node);
  return InstrumentSpec(node);
}

// ---------------------------------------------------------------------------
// PassContext.

void PassContextNode::declare(FieldList<PassContextNode>& f) {
  f.def("opt_level", &PassContextNode::opt_level)
      .def("config", &PassContextNode::config)
      .def("disabled_passes", &PassContextNode::disabled_passes)
      .def("required_passes", &PassContextNode::required_passes)
      .def("instruments", &PassContextNode::instruments)
      .validate(validate_pass_context);
}

TT_REGISTER_NODE(InstrumentSpecNode);
TT_REGISTER_NODE(PassContextNode);

template <class T>
T PassContextNode::get_config(std::string_view key) const {
  const ConfigOptionInfo& option = get_option(key);
  if (option.type != config_type_of<T>()) {
    fail(ErrorKind::kTypeMismatch, "config option '", option.key, "' is a ",
         config_type_name(option.type), ", not a ", config_type_name(config_type_of<T>()));
  }
  auto it = config.find(option.key);
  return (it != config.end() ? *it : option.default_value).template get<T>();
}

template bool PassContextNode::get_config<bool>(std::string_view) const;
template int64_t PassContextNode::get_config<int64_t>(std::string_view) const;
template double PassContextNode::get_config<double>(std::string_view) const;
template std::string PassContextNode::get_config<std::string>(std::string_view) const;

bool PassContextNode::is_disabled(std::string_view pass) const {
  return std::binary_search(disabled_passes.begin(), disabled_passes.end(), pass);
}

bool PassContextNode::is_required(std::string_view pass) const {
  return std::binary_search(required_passes.begin(), required_passes.end(), pass);
}

PassContextOptions& PassContextOptions::with_opt_level(int64_t level) {
  opt_level = level;
  return *this;
}

PassContextOptions& PassContextOptions::with_config(const std::string& key, json value) {
  if (!config.is_object()) config = json::object();
  config[key] = std::move(value);
  return *this;
}

PassContextOptions& PassContextOptions::with_disabled(std::string pass) {
  disabled_passes.push_back(std::move(pass));
  return *this;
}

PassContextOptions& PassContextOptions::with_required(std::string pass) {
  required_passes.push_back(std::move(pass));
  return *this;
}

PassContextOptions& PassContextOptions::with_instrument(InstrumentSpec spec) {
  instruments.push_back(std::move(spec));
  return *this;
}

PassContext PassContext::make(PassContextOptions options) {
  auto node = make_node<PassContextNode>();
  node->opt_level = options.opt_level;
  if (!options.config.is_null()) node->config = std::move(options.config);
  if (node->config.is_object()) {
    // An int is a fine way to write a float option; store it as a float so
    // that equal contexts are equal JSON and hash equal.
    for (auto& [key, value] : node->config.items()) {
      const ConfigOptionInfo* option = find_config_option(key);
      if (option && option->type == ConfigType::kFloat && value.is_number_integer()) {
        value = value.get<double>();
      }
    }
  }
  auto canonical = [](std::vector<std::string> passes) {
    std::sort(passes.begin(), passes.end());
    passes.erase(std::unique(passes.begin(), passes.end()), passes.end());
    return passes;
  };
  node->disabled_passes = canonical(std::move(options.disabled_passes));
  node->required_passes = canonical(std::move(options.required_passes));
  node->instruments = std::move(options.instruments);
  validate_pass_context(*node);
  return PassContext(node);
}

PassContext PassContext::current() {
  const auto& stack = guard_stack();
  if (!stack.empty()) return stack.back()->context();
  static const PassContext default_context = make();
  return default_context;
}

uint64_t PassContext::hash() const { return structural_hash(*this); }

bool PassContext::operator==(const PassContext& other) const {
  return structural_equal(*this, other);
}

// ---------------------------------------------------------------------------
// Guards and passes.

PassContextGuard::PassContextGuard(PassContext context) : context_(std::move(context)) {
  TT_CHECK(context_, kInvalidArgument, "PassContextGuard: the context is null");
  for (const auto& spec : context_->instruments) instruments_.push_back(make_instrument(spec));
  size_t entered = 0;
  try {
    for (; entered < instruments_.size(); ++entered) instruments_[entered]->enter_context();
  } catch (...) {
    // Leave the ones already entered as if the guard had ended normally.
    while (entered > 0) {
      try {
        instruments_[--entered]->exit_context();
      } catch (...) {
      }
    }
    throw;
  }
  guard_stack().push_back(this);
}

PassContextGuard::~PassContextGuard() {
  auto& stack = guard_stack();
  auto it = std::find(stack.rbegin(), stack.rend(), this);
  if (it != stack.rend()) stack.erase(std::next(it).base());
  for (size_t i = instruments_.size(); i-- > 0;) {
    try {
      instruments_[i]->exit_context();
    } catch (const std::exception& e) {
      std::fprintf(stderr, "tensortune: instrument '%s' failed when its context ended: %s\n",
                   context_->instruments[i]->name.c_str(), e.what());
    }
  }
}

json PassContextGuard::instrument_results() const {
  json out = json::object();
  for (size_t i = 0; i < instruments_.size(); ++i) {
    out[context_->instruments[i]->name] = instruments_[i]->results();
  }
  return out;
}

ObjectPtr run_pass(std::string_view name, const ObjectPtr& ir,
                   const std::function<ObjectPtr(const ObjectPtr&)>& pass, int64_t min_opt_level) {
  TT_ICHECK(!name.empty(), "run_pass needs a pass name");
  const auto& stack = guard_stack();
  PassContextGuard* guard = stack.empty() ? nullptr : stack.back();
  PassContext context = guard ? guard->context() : PassContext::current();
  if (!context->is_required(name)) {
    if (context->is_disabled(name) || context->opt_level < min_opt_level) return ir;
    if (guard) {
      // Every instrument is asked, so each sees every candidate pass.
      bool run = true;
      for (const auto& instrument : guard->instruments_) run = instrument->should_run(name) && run;
      if (!run) return ir;
    }
  }
  if (guard) {
    for (const auto& instrument : guard->instruments_) instrument->before_pass(name, ir);
  }
  ObjectPtr out = pass(ir);
  if (guard) {
    for (const auto& instrument : guard->instruments_) instrument->after_pass(name, out);
  }
  return out;
}

}  // namespace tensortune::ir
