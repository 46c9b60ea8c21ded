// What the subcommands of the tensortune command line share: reading and
// writing files, the PassContext options, loading tasks and states, and the
// way a subcommand in its own file registers itself with main().
#pragma once

#include <CLI/CLI.hpp>

#include <functional>
#include <map>
#include <string>
#include <vector>

#include "tensortune/graph/graph.h"
#include "tensortune/ir/pass_context.h"
#include "tensortune/measure/measurer.h"
#include "tensortune/schedule/state.h"
#include "tensortune/te/task.h"

namespace tensortune::cli {

/// A subcommand and what it does once the command line has been parsed; the
/// int is the exit status. main() runs it inside its error handling.
struct Command {
  CLI::App* app = nullptr;
  std::function<int()> run;
};

/// `tensortune records show|best|merge|distill` (records_cmd.cc).
Command add_records_command(CLI::App& app);

/// The whole file; a kNotFound error naming it when it cannot be opened.
std::string read_file(const std::string& path);
/// A kInvalidArgument error when `output` is one of `inputs` (paths resolved).
void check_not_an_input(const std::string& output, const std::vector<std::string>& inputs);
/// Writes `text` to `path` whole or not at all (a temporary file renamed
/// over it), or to standard output for "" or "-". A path that is one of
/// `inputs` (what the command read) is a kInvalidArgument error.
void write_output(const std::string& path, const std::string& text,
                  const std::vector<std::string>& inputs = {});

/// A task file as `tensortune task` writes it; its target may name no
/// compiler or compiler flags (check_file_target).
te::Task load_task(const std::string& path);

/// `--trust-file-compiler` on `cmd`: lets the targets of the task files it
/// reads name the C compiler and its flags.
void add_trust_file_compiler_flag(CLI::App* cmd);
/// A kInvalidArgument error when `task`, read from `where`, sets target
/// attributes that name a program (-compiler, -cflags): a file is data, and
/// only the person running the tool chooses what runs (docs/architecture.md invariant 10).
void check_file_target(const te::Task& task, const std::string& where);
/// A state file (one saved State); the naive schedule for "".
schedule::State load_state(const std::string& path);
/// load_state, where "default" is the schedule compile gives `task` when a log lacks it.
schedule::State load_state(const std::string& path, const te::Task& task);

/// What instruments saw (name -> results), one line each on stderr, saying
/// where they ran (e.g. "build worker, matmul(...) trial 3").
void print_instruments(const nlohmann::json& instruments, const std::string& where);

/// The flags a command generates from reflected option nodes (FieldList::option):
/// one per option field, with the field's help, its default (the bound node's
/// value) and its range. A value given is set through set_field, so the range
/// the library checks is the only range, and the error names the flag.
class NodeOptions {
 public:
  /// Adds `node`'s option fields to `cmd` as --PREFIXFLAG (only those named
  /// in `fields`, when given), each help line led by `help_lead`. `node` must
  /// outlive the command.
  void add(CLI::App* cmd, Object& node, const std::string& prefix = "",
           const std::vector<std::string>& fields = {}, const std::string& help_lead = "");
  /// Each generated flag's value, by flag name (without "--"): what a
  /// command's --json output echoes as its options.
  nlohmann::json values() const;

 private:
  struct Bound {
    Object* node;
    std::string prefix;
    std::vector<std::string> fields;
  };
  template <class F>
  void each_option(const Bound& b, F&& f) const;
  std::vector<Bound> bound_;
};

/// The PassContext options every command that lowers or builds takes:
/// --opt-level, --config KEY=VALUE, --disable-pass NAME, --instrument NAME[=JSON].
struct PassContextArgs {
  int opt_level = 2;
  std::vector<std::string> config;       ///< KEY=VALUE
  std::vector<std::string> disabled;     ///< pass names
  std::vector<std::string> instruments;  ///< NAME or NAME=JSON

  void add_to(CLI::App* cmd);
  /// The context; an unknown key or badly typed value is an error listing the known keys.
  ir::PassContext make() const;
};

/// How candidates are built and timed, for `measure` and `tune`: the
/// measure layer's option sets, their option fields generated as flags.
struct MeasureArgs {
  measure::LocalBuilderOptions build;  ///< its pool's limits apply to the runner's too
  measure::LocalRunnerOptions run;     ///< run.timing.flush_weights: the two flags below
  bool flush_weights = false, warm_weights = false;  ///< neither given: the caller's default

  void add_to(CLI::App* cmd, NodeOptions& options);
  measure::LocalBuilderOptions builder_options() const { return build; }
  /// `weights_cold` is whether weights are evicted before every call when
  /// neither --flush-weights nor --warm-weights was given.
  measure::LocalRunnerOptions runner_options(bool weights_cold = false) const;
};

/// The `measure` command: one schedule through the worker pools.
Command add_measure_command(CLI::App& app);
/// The `tune` command: random search with records and resume.
Command add_tune_command(CLI::App& app);
/// The `sketches` command: a task's sketches and samples of them (search_cmd.cc).
Command add_sketches_command(CLI::App& app);
/// The `train-model` command: a cost model from record logs (search_cmd.cc).
Command add_train_model_command(CLI::App& app);
/// The `apply` command: a log's best schedule built or printed (search_cmd.cc).
Command add_apply_command(CLI::App& app);

/// The `tasks` command: an ONNX model's tuning tasks (model_cmd.cc).
Command add_tasks_command(CLI::App& app);
/// The `compile` command: an ONNX model built with a log's schedules (model_cmd.cc).
Command add_compile_command(CLI::App& app);
/// The `run` command: a compiled model run and timed (model_cmd.cc).
Command add_run_command(CLI::App& app);

/// --input-shape NAME=DIMS options as a map; a malformed one is a
/// kInvalidArgument error showing the form.
std::map<std::string, std::vector<int64_t>> parse_input_shapes(
    const std::vector<std::string>& specs);
/// The ONNX model at `path`, with shapes for its open inputs and the
/// inputs fixed to a value (--input-value NAME=FILE, a .npy or .pb file).
graph::Graph load_model(const std::string& path, const std::vector<std::string>& input_shapes,
                        const std::vector<std::string>& input_values = {});
/// An array from a .npy or ONNX TensorProto .pb file.
te::NDArray read_input(const std::string& path);

}  // namespace tensortune::cli
