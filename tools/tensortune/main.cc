// tensortune: the command line. Each subcommand parses its options and calls
// the library; errors print one line naming what was wrong and exit non-zero.
#include <CLI/CLI.hpp>

#include <fstream>
#include <iostream>
#include <random>
#include <sstream>

#include "cli_common.h"
#include "tensortune/codegen/backend.h"
#include "tensortune/codegen/build.h"
#include "tensortune/ir/pass_context.h"
#include "tensortune/ir/target.h"
#include "tensortune/lower/lower.h"
#include "tensortune/measure/mpi.h"
#include "tensortune/object/serialize.h"
#include "tensortune/object/structural.h"
#include "tensortune/schedule/random_schedule.h"
#include "tensortune/schedule/state.h"
#include "tensortune/support/build_info.h"
#include "tensortune/support/strings.h"
#include "tensortune/te/evaluator.h"
#include "tensortune/te/printer.h"
#include "tensortune/te/task.h"
#include "tensortune/te/workload.h"

namespace tt = tensortune;
using json = nlohmann::json;
using tt::cli::load_state;
using tt::cli::load_task;
using tt::cli::PassContextArgs;
using tt::cli::read_file;
using tt::cli::write_output;

namespace {

constexpr const char* kVersion = "0.1.0";

json arg_spec_json(const tt::te::ArgSpec& a) {
  json j = {{"name", a.name},
            {"type", std::string(tt::EnumNames<tt::te::ArgType>::names[static_cast<int>(a.type)])}};
  if (!a.default_value.is_null()) j["default"] = a.default_value;
  return j;
}

int cmd_version(bool as_json) {
  if (as_json) {
    std::cout << json{{"version", kVersion},
                      {"graph_format_version", tt::kGraphFormatVersion},
                      {"protocol_version", tt::measure::kProtocolVersion},
                      {"build_id", std::string(tt::build_id())},
                      {"mpi", tt::measure::mpi_built()}}
                     .dump()
              << "\n";
  } else {
    std::cout << "tensortune " << kVersion << " (saved graph format " << tt::kGraphFormatVersion
              << ", worker protocol " << tt::measure::kProtocolVersion << ", "
              << (tt::measure::mpi_built() ? "with" : "without") << " MPI)\n"
              << tt::build_id() << "\n";
  }
  return 0;
}

int cmd_workloads(bool as_json) {
  json list = json::array();
  for (const auto* def : tt::te::registered_workloads()) {
    if (as_json) {
      json args = json::array();
      for (const auto& a : def->args) args.push_back(arg_spec_json(a));
      list.push_back({{"name", def->name}, {"args", args}, {"doc", def->doc}});
    } else {
      std::cout << def->name << " " << tt::te::signature(*def) << "\n    " << def->doc << "\n";
    }
  }
  if (as_json) std::cout << list.dump(1) << "\n";
  return 0;
}

int cmd_task(const std::string& workload, const std::string& args, const std::string& target,
             const std::string& host, const std::string& output, bool as_json) {
  tt::ir::Target t = tt::ir::Target::parse(target);
  if (!host.empty()) t = t.with_host(tt::ir::Target::parse(host));
  tt::te::Task task = tt::te::Task::make(tt::te::make_named_workload_from_text(workload, args), t);
  tt::te::workload_tensors(task->workload);  // builds it once: bad arguments fail here
  std::string saved = tt::save_string(task, 1) + "\n";
  if (output.empty()) {
    std::cout << saved;
    return 0;
  }
  write_output(output, saved);
  if (as_json) {
    std::cout << json{{"output", output},
                      {"workload_key", task.workload_key()},
                      {"target", task->target.str()}}
                     .dump()
              << "\n";
  } else {
    std::cout << "wrote " << output << ": " << task.workload_key() << " on " << task->target.str()
              << "\n";
  }
  return 0;
}

std::string describe_hardware(const tt::ir::HardwareParams& hw) {
  json j = tt::field_values(*hw);
  std::vector<std::string> parts;
  for (const auto& [k, v] : j.items()) {
    if (v != 0) parts.push_back(k + "=" + v.dump());
  }
  return tt::join(parts, " ");
}

// A readable view of the saved object; the generic graph printer for types
// without a dedicated one.
std::string describe(const tt::ObjectPtr& node) {
  std::ostringstream os;
  if (auto task = std::dynamic_pointer_cast<const tt::te::TaskNode>(node)) {
    tt::te::Task t(task);
    os << "task\n  workload: " << t.workload_key()
       << "\n  target:   " << task->target.without_host().str() << "\n  host:     "
       << (task->target.host() ? task->target.host().str() : std::string("(none)"))
       << "\n  hardware: " << describe_hardware(task->hardware_params) << "\n  program:\n";
    for (const auto& line :
         tt::split(tt::te::print_stages(tt::te::workload_tensors(task->workload).outputs), '\n')) {
      if (!line.empty()) os << "    " << line << "\n";
    }
    return os.str();
  }
  if (auto w = std::dynamic_pointer_cast<const tt::te::WorkloadNode>(node)) {
    tt::te::Workload wl(w);
    os << "workload " << tt::te::workload_key(wl) << "\n"
       << tt::te::print_stages(tt::te::workload_tensors(wl).outputs);
    return os.str();
  }
  if (auto target = std::dynamic_pointer_cast<const tt::ir::TargetNode>(node)) {
    tt::ir::Target t(target);
    os << "target " << t.str() << "\n  hardware: " << describe_hardware(tt::ir::hardware_params(t))
       << "\n";
    return os.str();
  }
  return tt::print_graph(node);
}

int cmd_inspect(const std::string& path, bool as_json) {
  tt::ObjectPtr node;
  try {
    node = tt::load_string(read_file(path));
  } catch (const tt::UserError& e) {
    tt::fail(e.kind(), "'", path, "': ", e.what());
  }
  if (!node) tt::fail(tt::ErrorKind::kInvalidArgument, "'", path, "' holds a null object");
  if (as_json) {
    json out = {{"type", node->type_key()},
                {"structural_hash", tt::structural_hash(node)},
                {"object", tt::save_json(node)}};
    if (auto task = std::dynamic_pointer_cast<const tt::te::TaskNode>(node)) {
      out["workload_key"] = tt::te::Task(task).workload_key();
      out["target"] = task->target.str();
    }
    std::cout << out.dump(1) << "\n";
  } else {
    std::cout << describe(node);
  }
  return 0;
}

int cmd_states(const std::string& task_path, int count, uint64_t seed, const std::string& output) {
  tt::te::Task task = load_task(task_path);
  tt::schedule::ComputeDAG dag(tt::te::workload_tensors(task->workload));
  std::mt19937_64 rng(seed);
  std::ostringstream lines;
  for (int i = 0; i < count; ++i)
    lines << tt::save_string(tt::schedule::random_state(dag, rng)) << "\n";
  write_output(output, lines.str(), {task_path});
  if (!output.empty() && output != "-")
    std::cerr << "wrote " << count << " states to " << output << "\n";
  return 0;
}

int cmd_lower(const std::string& task_path, const std::string& state_path, const std::string& emit,
              const PassContextArgs& pc) {
  tt::te::Task task = load_task(task_path);
  tt::schedule::ComputeDAG dag(tt::te::workload_tensors(task->workload));
  tt::schedule::LoopState loops = tt::schedule::replay(dag, load_state(state_path, task));
  tt::ir::PassContextGuard guard(pc.make());
  tt::lower::PrimFunc f = tt::lower::lower(loops, "kernel");
  if (emit == "ir" || emit == "both") std::cout << tt::lower::to_string(f);
  if (emit == "c" || emit == "both") {
    // The target kind's back end, as the build worker uses it.
    auto sources = tt::codegen::kernel_sources(task->target);
    std::cout << sources->source({sources->add(f)});
  }
  tt::cli::print_instruments(guard.instrument_results(), "lowering");
  return 0;
}

// Builds every state (one compiler run for all), runs each on random inputs
// and compares with the reference evaluator: codegen::verify_states, the
// pipeline the build worker and the correctness tests use.
int cmd_verify(const std::string& task_path, const std::string& state_path, int random_states,
               uint64_t seed, const PassContextArgs& pc, bool as_json) {
  tt::te::Task task = load_task(task_path);
  tt::te::WorkloadTensors tensors = tt::te::workload_tensors(task->workload);
  tt::schedule::ComputeDAG dag(tensors);
  std::vector<tt::schedule::State> states;
  if (random_states > 0) {
    std::mt19937_64 rng(seed);
    for (int i = 0; i < random_states; ++i) states.push_back(tt::schedule::random_state(dag, rng));
  } else {
    states.push_back(load_state(state_path, task));
  }
  std::vector<tt::codegen::StateCheck> checks =
      tt::codegen::verify_states(tensors, states, task->target, pc.make(), seed + 1);
  int failures = 0;
  json report = json::array();
  for (size_t i = 0; i < checks.size(); ++i) {
    const tt::codegen::StateCheck& c = checks[i];
    std::string problem;
    if (!c.build.ok()) {
      problem =
          std::string(tt::codegen::build_stage_name(c.build.stage)) + " failed: " + c.build.error;
    } else if (!c.check->ok()) {
      problem = "MISMATCH: " + c.check->mismatch;
    }
    double max_error = c.check ? c.check->max_error : 0.0;
    failures += !c.ok();
    if (as_json) {
      report.push_back({{"state", i},
                        {"max_error", c.check ? json(max_error) : json(nullptr)},
                        {"ok", c.ok()},
                        {"message", problem}});
    } else {
      std::cout << "state " << i << ": ";
      if (c.check) std::cout << "max error " << max_error;
      std::cout << (problem.empty() ? "  ok" : "  " + problem) << "\n";
      if (!problem.empty()) std::cout << "  " << tt::save_string(states[i]) << "\n";
    }
    if (!as_json) tt::cli::print_instruments(c.build.instruments, "state " + std::to_string(i));
  }
  if (as_json) {
    std::cout << json{{"states", report}, {"failures", failures}}.dump(1) << "\n";
  } else {
    std::cout << states.size() - failures << " of " << states.size()
              << " states match the reference\n";
  }
  return failures == 0 ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"tensortune: an auto-tuning compiler for tensor programs"};
  // --help shows each option's default, which is the library's (the options
  // are bound to the library's option structs).
  app.option_defaults()->always_capture_default();
  app.require_subcommand(1);
  bool as_json = false;

  auto* version = app.add_subcommand("version", "print the version");
  version->add_flag("--json", as_json, "machine-readable output");

  auto* workloads =
      app.add_subcommand("workloads", "list the registered workloads and their arguments");
  workloads->add_flag("--json", as_json, "machine-readable output");

  std::string workload, args, target = "c", host, output;
  auto* task = app.add_subcommand(
      "task", "write a tuning task (workload, target, host, hardware parameters)");
  task->add_option("--workload", workload, "registered workload name (see `tensortune workloads`)")
      ->required();
  task->add_option("--args", args, "workload arguments, comma-separated, e.g. 64,64,64");
  task->add_option("--target", target, "target string, e.g. \"c -mcpu=native -num-cores=2\"");
  task->add_option("--host", host, "host target string");
  task->add_option("-o,--output", output, "where to write the task (default: standard output)");
  task->add_flag("--json", as_json, "machine-readable output");

  std::string inspect_path;
  auto* inspect = app.add_subcommand(
      "inspect", "print any saved object (task, workload, target, ...) readably");
  inspect->add_option("file", inspect_path, "a saved JSON file")->required();
  inspect->add_flag("--json", as_json, "machine-readable output");

  std::string task_path, state_path, emit = "ir";
  PassContextArgs pc;
  auto* lower =
      app.add_subcommand("lower", "print the lowered loop IR and/or generated C of a schedule");
  lower->add_option("--task", task_path, "a task file (tensortune task)")->required();
  tt::cli::add_trust_file_compiler_flag(lower);
  lower->add_option("--state", state_path,
                    "a schedule state file, or 'default' for the schedule compile gives untuned "
                    "tasks (default: the naive schedule)");
  lower->add_option("--emit", emit, "ir, c or both")->check(CLI::IsMember({"ir", "c", "both"}));
  pc.add_to(lower);

  int count = 10;
  uint64_t seed = 0;
  auto* states =
      app.add_subcommand("states", "write random valid schedule states, one JSON per line");
  states->add_option("--task", task_path, "a task file")->required();
  tt::cli::add_trust_file_compiler_flag(states);
  states->add_option("--random", count, "how many states")->check(CLI::Range(0, 1000000));
  states->add_option("--seed", seed, "random seed");
  states->add_option("-o,--output", output, "output file (default: standard output)");

  int random_states = 0;
  auto* verify = app.add_subcommand(
      "verify", "build schedules, run them and compare with the reference evaluator");
  verify->add_option("--task", task_path, "a task file")->required();
  tt::cli::add_trust_file_compiler_flag(verify);
  auto* state_opt = verify->add_option(
      "--state", state_path, "a schedule state file or 'default' (default: the naive schedule)");
  verify->add_option("--random-states", random_states, "check this many random states instead")
      ->excludes(state_opt)
      ->check(CLI::Range(1, 100000));
  verify->add_option("--seed", seed, "random seed for states and inputs");
  verify->add_flag("--json", as_json, "machine-readable output");
  pc.add_to(verify);

  // Subcommands that live in files of their own (cli_common.h).
  std::vector<tt::cli::Command> commands;
  commands.push_back(tt::cli::add_records_command(app));
  commands.push_back(tt::cli::add_measure_command(app));
  commands.push_back(tt::cli::add_tune_command(app));
  commands.push_back(tt::cli::add_sketches_command(app));
  commands.push_back(tt::cli::add_train_model_command(app));
  commands.push_back(tt::cli::add_apply_command(app));
  commands.push_back(tt::cli::add_tasks_command(app));
  commands.push_back(tt::cli::add_compile_command(app));
  commands.push_back(tt::cli::add_run_command(app));

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }

  try {
    if (*version) return cmd_version(as_json);
    if (*workloads) return cmd_workloads(as_json);
    if (*task) return cmd_task(workload, args, target, host, output, as_json);
    if (*inspect) return cmd_inspect(inspect_path, as_json);
    if (*lower) return cmd_lower(task_path, state_path, emit, pc);
    if (*states) return cmd_states(task_path, count, seed, output);
    if (*verify) return cmd_verify(task_path, state_path, random_states, seed, pc, as_json);
    for (const auto& command : commands) {
      if (*command.app) return command.run();
    }
  } catch (const tt::UserError& e) {
    std::cerr << "error: " << e.what() << "\n";
    return 1;
  } catch (const std::exception& e) {
    // A bug, not the user's input: its own exit status (sysexits' EX_SOFTWARE).
    std::cerr << "error: " << e.what()
              << "\nThis is a bug in tensortune, not a problem with your input or a candidate; "
                 "please report it with the command line that caused it.\n";
    return 70;
  }
  return 0;
}
