#include "cli_common.h"

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>

#include "tensortune/codegen/c_codegen.h"
#include "tensortune/graph/passes.h"
#include "tensortune/lower/pipeline.h"
#include "tensortune/object/serialize.h"
#include "tensortune/search/default_schedule.h"
#include "tensortune/support/files.h"
#include "tensortune/support/strings.h"

namespace tensortune::cli {
namespace tt = ::tensortune;
using json = nlohmann::json;

namespace {

// The value typed as the option is registered.
json config_value(const std::string& key, const std::string& text) {
  const auto* info = tt::ir::find_config_option(key);
  if (!info) {
    std::vector<std::string> keys;
    for (const auto& o : tt::ir::config_options()) keys.push_back(o.key);
    tt::fail(tt::ErrorKind::kNotFound, "unknown config option '", key,
             "'; known options: ", tt::join(keys, ", "));
  }
  const std::string bad_value =
      tt::detail::concat("config option '", key, "' takes a ", tt::ir::config_type_name(info->type),
                         ", got '", text, "'");
  switch (info->type) {
    case tt::ir::ConfigType::kBool:
      if (text == "true" || text == "1") return true;
      if (text == "false" || text == "0") return false;
      tt::fail(tt::ErrorKind::kInvalidArgument, bad_value);
    case tt::ir::ConfigType::kInt: {
      long long v;
      if (!tt::parse_int(text, &v)) tt::fail(tt::ErrorKind::kInvalidArgument, bad_value);
      return v;
    }
    case tt::ir::ConfigType::kFloat: {
      double v;
      if (!tt::parse_double(text, &v)) tt::fail(tt::ErrorKind::kInvalidArgument, bad_value);
      return v;
    }
    case tt::ir::ConfigType::kString: return text;
  }
  return text;
}

}  // namespace

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) tt::fail(tt::ErrorKind::kNotFound, "cannot open '", path, "'");
  std::ostringstream os;
  os << in.rdbuf();
  return os.str();
}

void check_not_an_input(const std::string& output, const std::vector<std::string>& inputs) {
  for (const std::string& input : inputs) {
    TT_CHECK(input.empty() || !path_is_within(input, output), kInvalidArgument, "the output '",
             output, "' is the input '", input,
             "': write to another file, then move it over the input if you mean to");
  }
}

void write_output(const std::string& path, const std::string& text,
                  const std::vector<std::string>& inputs) {
  if (path.empty() || path == "-") {
    std::cout << text;
    return;
  }
  check_not_an_input(path, inputs);
  TT_CHECK(!std::filesystem::is_directory(path), kInvalidArgument, "the output '", path,
           "' is a folder; give a file name");
  // Whole or not at all: a failed or interrupted write leaves what was there.
  tt::write_file_atomically(path, text);
}

void PassContextArgs::add_to(CLI::App* cmd) {
  cmd->add_option("--opt-level", opt_level, "optimisation level 0-3")->check(CLI::Range(0, 3));
  cmd->add_option("--config", config, "a PassContext option KEY=VALUE (repeatable)");
  cmd->add_option("--disable-pass", disabled, "a pass to skip, lowering or graph (repeatable)");
  cmd->add_option("--instrument", instruments, "an instrument NAME or NAME=JSON (repeatable)");
}

ir::PassContext PassContextArgs::make() const {
  tt::ir::PassContextOptions options;
  options.with_opt_level(opt_level);
  for (const auto& item : config) {
    auto eq = item.find('=');
    if (eq == std::string::npos) {
      tt::fail(tt::ErrorKind::kInvalidArgument, "--config '", item, "' is not KEY=VALUE");
    }
    std::string key = item.substr(0, eq), text = item.substr(eq + 1);
    options.with_config(key, config_value(key, text));
  }
  // A misspelt pass would otherwise disable nothing, silently.
  std::vector<std::string> known;
  for (const auto& names :
       {tt::lower::pipeline_pass_names(), tt::lower::target_pipeline_pass_names(),
        tt::graph::optimize_pass_names()}) {
    for (const auto& name : names) {
      if (std::find(known.begin(), known.end(), name) == known.end()) known.push_back(name);
    }
  }
  for (const auto& pass : disabled) {
    TT_CHECK(std::find(known.begin(), known.end(), pass) != known.end(), kInvalidArgument,
             "--disable-pass names '", pass,
             "', which is no pass; the passes are: ", tt::join(known, ", "));
    options.with_disabled(pass);
  }
  for (const auto& item : instruments) {
    auto eq = item.find('=');
    json params = json::object();
    if (eq != std::string::npos) {
      params = tt::parse_json_text(item.substr(eq + 1),
                                   "parameters of --instrument " + item.substr(0, eq));
    }
    options.with_instrument(tt::ir::InstrumentSpec::make(item.substr(0, eq), params));
  }
  return tt::ir::PassContext::make(options);
}

namespace {

/// The saved object in the file at `path`, which must be an R.
template <class R>
R load_file_as(const std::string& path) {
  tt::ObjectPtr node;
  try {
    node = tt::load_string(read_file(path));
  } catch (const tt::UserError& e) {
    tt::fail(e.kind(), "'", path, "': ", e.what());
  }
  auto typed = std::dynamic_pointer_cast<const typename R::NodeType>(node);
  if (!typed) {
    tt::fail(tt::ErrorKind::kTypeMismatch, "'", path, "' holds a ",
             node ? std::string(node->type_key()) : std::string("null object"), ", not a ",
             R::NodeType::kTypeKey);
  }
  return R(std::move(typed));
}

}  // namespace

namespace {
bool trust_file_compiler = false;
}  // namespace

void add_trust_file_compiler_flag(CLI::App* cmd) {
  cmd->add_flag("--trust-file-compiler", trust_file_compiler,
                "let the targets of task files name the C compiler and its flags (-compiler=, "
                "-cflags=), which are otherwise refused");
}

void check_file_target(const tt::te::Task& task, const std::string& where) {
  if (trust_file_compiler) return;
  std::vector<std::string> set = tt::ir::program_attributes(task->target);
  TT_CHECK(set.empty(), kInvalidArgument, where, ": the task's target sets ", tt::join(set, " "),
           ", which names a program to run; a task file is data and cannot choose the compiler. "
           "Give the target on the command line (tensortune task --target '...'), or pass "
           "--trust-file-compiler if you wrote this file");
}

tt::te::Task load_task(const std::string& path) {
  tt::te::Task task = load_file_as<tt::te::Task>(path);
  check_file_target(task, "'" + path + "'");
  return task;
}

tt::schedule::State load_state(const std::string& path) {
  if (path.empty()) return tt::schedule::State::make();
  return load_file_as<tt::schedule::State>(path);
}

tt::schedule::State load_state(const std::string& path, const tt::te::Task& task) {
  return path == "default" ? tt::search::default_schedule(task) : load_state(path);
}

void print_instruments(const json& instruments, const std::string& where) {
  for (const auto& [name, results] : instruments.items()) {
    std::fprintf(stderr, "instrument %s (%s): %s\n", name.c_str(), where.c_str(),
                 results.dump(-1, ' ', false, json::error_handler_t::replace).c_str());
  }
}

namespace {

/// The text of an option's value as the field's JSON value: a number for a
/// numeric field, the text itself for a string.
json option_text_value(const tt::FieldInfo& field, const std::string& text) {
  if (field.type_name == "string") return text;
  json value;
  try {
    value = tt::parse_json_text(text);
  } catch (const tt::UserError&) {
  }
  bool ok = field.type_name == "int" ? value.is_number_integer() : value.is_number();
  if (!ok) {
    tt::fail(tt::ErrorKind::kInvalidArgument, "'", text, "' is not ",
             field.type_name == "int" ? "an integer" : "a number");
  }
  return value;
}

}  // namespace

template <class F>
void NodeOptions::each_option(const Bound& b, F&& f) const {
  for (const tt::FieldInfo& field : b.node->type_info().fields) {
    if (field.flag.empty()) continue;
    if (!b.fields.empty() &&
        std::find(b.fields.begin(), b.fields.end(), field.name) == b.fields.end()) {
      continue;
    }
    f(field, b.prefix + field.flag);
  }
}

void NodeOptions::add(CLI::App* cmd, tt::Object& node, const std::string& prefix,
                      const std::vector<std::string>& fields, const std::string& help_lead) {
  bound_.push_back({&node, prefix, fields});
  for (const auto& name : fields) {
    TT_ICHECK(node.type_info().field(name) && !node.type_info().field(name)->flag.empty(),
              node.type_key(), " has no option field '", name, "'");
  }
  each_option(bound_.back(), [&](const tt::FieldInfo& field, const std::string& flag) {
    // A malformed or out-of-range value is a parse error like CLI11's own:
    // the command has not started.
    auto set = [&node, &field, flag](auto value_of) {
      try {
        tt::set_field(node, field.name, value_of());
      } catch (const tt::UserError& e) {
        throw CLI::ValidationError("--" + flag, e.what());
      }
    };
    std::string help = help_lead + field.help;
    if (field.type_name == "bool") {
      cmd->add_flag_callback(
          "--" + flag, [set] { set([] { return json(true); }); }, help);
      return;
    }
    if (field.min || field.max) help += " (" + tt::range_text(field) + ")";
    json current = tt::field_value(node, field);
    cmd->add_option_function<std::string>(
           "--" + flag,
           [set, &field](const std::string& text) {
             set([&] { return option_text_value(field, text); });
           },
           help)
        ->type_name(field.type_name == "int"     ? "INT"
                    : field.type_name == "float" ? "NUMBER"
                                                 : "TEXT")
        ->default_str(current.is_string() ? current.get<std::string>() : current.dump());
  });
}

json NodeOptions::values() const {
  json out = json::object();
  for (const Bound& b : bound_) {
    each_option(b, [&](const tt::FieldInfo& field, const std::string& flag) {
      out[flag] = tt::field_value(*b.node, field);
    });
  }
  return out;
}

void MeasureArgs::add_to(CLI::App* cmd, NodeOptions& options) {
  options.add(cmd, run.timing);
  auto* flush = cmd->add_flag("--flush-weights", flush_weights,
                              "evict the constant inputs (weights) from the caches before every "
                              "call, as a compiled model finds them (the default with a model)");
  cmd->add_flag("--warm-weights", warm_weights,
                "leave the weights in the caches between calls (the default for single tasks)")
      ->excludes(flush);
  options.add(cmd, run);
  options.add(cmd, build);
  options.add(cmd, build.pool);
  cmd->add_option_function<int>(
         "--simulate-measure",
         [this](int ms) {
           build.simulate = true;
           run.timing.simulate_ms = ms;
         },
         "for testing a tuner: lower each candidate but compile nothing, and instead of timing "
         "it wait MS milliseconds and report a cost computed from its program")
      ->type_name("MS")
      ->check(CLI::Range(0, 3600 * 1000));
}

measure::LocalRunnerOptions MeasureArgs::runner_options(bool weights_cold) const {
  measure::LocalRunnerOptions o = run;
  o.timing.flush_weights = flush_weights || (weights_cold && !warm_weights);
  o.pool.memory_limit_mb = build.pool.memory_limit_mb;
  o.pool.max_requests_per_worker = build.pool.max_requests_per_worker;
  return o;
}

}  // namespace tensortune::cli
