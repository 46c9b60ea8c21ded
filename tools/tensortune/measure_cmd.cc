// `tensortune measure`: one schedule of a task through the builder and runner
// worker pools, exactly as the tuner measures candidates. A candidate that
// fails (crashes, hangs, computes a wrong answer) is a result, printed with
// its error code; the exit status is 3 then, and 1 only for bad input.
#include <cstdio>
#include <iostream>

#include "cli_common.h"
#include "tensortune/measure/record.h"
#include "tensortune/schedule/compute_dag.h"
#include "tensortune/te/workload.h"

namespace tensortune::cli {
namespace {

using json = nlohmann::json;

struct MeasureCommandArgs {
  std::string task_path, state_path, log_path;
  bool as_json = false;
  PassContextArgs pass_context;
  MeasureArgs measure;
  NodeOptions options;  ///< the flags generated from measure.timing
};

int run_measure(const MeasureCommandArgs& args) {
  te::Task task = load_task(args.task_path);
  schedule::State state = load_state(args.state_path, task);
  measure::install_interrupt_cleanup();
  ir::PassContext context = args.pass_context.make();
  measure::LocalBuilderOptions build_options = args.measure.builder_options();
  build_options.parallelism = 1;
  measure::LocalBuilder builder(build_options);
  measure::LocalRunner runner(args.measure.runner_options());
  std::unique_ptr<measure::RecordWriter> log;
  if (!args.log_path.empty()) log = std::make_unique<measure::RecordWriter>(args.log_path);
  // The very path a tuning run takes (search::tune measures through it too).
  measure::MeasureResult r = measure::measure_candidates(
      task, {state}, context, builder, runner,
      [&](const measure::MeasureInput& input, const measure::MeasureResult& result) {
        if (log) log->write(measure::Record{input, result});
      })[0];
  double flops = schedule::ComputeDAG(te::workload_tensors(task->workload)).flop_count();
  std::optional<double> gflops;
  // At the median, the cost schedules are ranked by.
  if (r.ok() && r.median_cost() > 0 && flops > 0) gflops = flops / r.median_cost() / 1e9;
  if (args.as_json) {
    json out = {{"workload_key", task.workload_key()},
                {"target", task->target.str()},
                {"error_code", measure::error_code_name(r.error_code)},
                {"error_message", r.error_message},
                {"costs", r.costs},
                {"options", args.options.values()},
                {"mean_cost", r.ok() ? json(r.mean_cost()) : json(nullptr)},
                {"median_cost", r.ok() ? json(r.median_cost()) : json(nullptr)},
                {"gflops", gflops ? json(*gflops) : json(nullptr)},
                {"build_seconds", r.build_seconds},
                {"run_seconds", r.run_seconds},
                {"max_error", r.max_error ? json(*r.max_error) : json(nullptr)},
                {"pass_context_hash", r.pass_context_hash.str()},
                {"instruments", r.instruments}};
    std::cout << out.dump(1, ' ', false, json::error_handler_t::replace) << "\n";
  } else if (r.ok()) {
    std::printf("%s  %s on %s\n", std::string(measure::error_code_name(r.error_code)).c_str(),
                task.workload_key().c_str(), task->target.str().c_str());
    std::printf("  median %.4f ms, mean %.4f ms over %zu repeats:", r.median_cost() * 1e3,
                r.mean_cost() * 1e3, r.costs.size());
    for (double c : r.costs) std::printf(" %.4f", c * 1e3);
    std::printf("\n");
    if (gflops) std::printf("  %.2f GFLOP/s\n", *gflops);
    if (r.max_error) std::printf("  checked against the reference: max error %.3g\n", *r.max_error);
    std::printf("  build %.3f s, run %.3f s, pass context %s\n", r.build_seconds, r.run_seconds,
                r.pass_context_hash.str().c_str());
  } else {
    std::printf("%s  %s on %s\n%s\n", std::string(measure::error_code_name(r.error_code)).c_str(),
                task.workload_key().c_str(), task->target.str().c_str(), r.error_message.c_str());
  }
  // What the instruments saw in the build worker reaches the user, failed or not.
  if (!args.as_json) print_instruments(r.instruments, "in the build worker");
  return r.ok() ? 0 : 3;
}

}  // namespace

Command add_measure_command(CLI::App& app) {
  auto args = std::make_shared<MeasureCommandArgs>();
  CLI::App* cmd = app.add_subcommand(
      "measure",
      "build and time one schedule through the worker pools (exit 3 if the candidate fails)");
  cmd->add_option("--task", args->task_path, "a task file (tensortune task)")->required();
  add_trust_file_compiler_flag(cmd);
  cmd->add_option("--state", args->state_path,
                  "a schedule state file, or 'default' for the schedule compile gives untuned "
                  "tasks (default: the naive schedule)");
  cmd->add_option("--log", args->log_path, "append the record to this log");
  cmd->add_flag("--json", args->as_json, "machine-readable output");
  args->measure.add_to(cmd, args->options);
  args->pass_context.add_to(cmd);
  return {cmd, [args] { return run_measure(*args); }};
}

}  // namespace tensortune::cli
