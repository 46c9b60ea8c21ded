// `tensortune tune`: a tuning run. Random search for now (search/
// search_policy.h); every measurement is appended to the log as it arrives,
// and a run with an existing log resumes without measuring a state twice.
// Progress goes to stderr; the result to stdout (--json: one object).
#include <cstdio>
#include <iostream>

#include "cli_common.h"
#include "tensortune/search/evolutionary.h"
#include "tensortune/search/tuner.h"
#include "tensortune/support/strings.h"
#include "tensortune/te/workload.h"

namespace tensortune::cli {
namespace {

using json = nlohmann::json;

struct TuneCommandArgs {
  std::string task_path, workload, workload_args, target = "c", host, log_path;
  int64_t trials = 64;
  int batch_size = 16;
  uint64_t seed = 0;
  bool as_json = false;
  bool any_pass_context = false;
  std::string policy = "evolutionary", cost_model = "xgb", cost_model_file;
  PassContextArgs pass_context;
  MeasureArgs measure;
};

std::string errors_text(const std::map<std::string, int64_t>& errors) {
  std::string out;
  for (const auto& [code, n] : errors)
    out += (out.empty() ? "" : ", ") + code + " " + std::to_string(n);
  return out.empty() ? "none" : out;
}

void print_progress(const search::TaskSummary& s, const search::TuneReport& report, int64_t goal) {
  std::string best = "none yet";
  if (auto latency = s.best_latency()) {
    char text[96];
    std::snprintf(text, sizeof text, "%.4f ms", *latency * 1e3);
    best = text;
    if (auto g = s.best_gflops()) {
      std::snprintf(text, sizeof text, ", %.2f GFLOP/s", *g);
      best += text;
    }
  }
  std::fprintf(stderr, "[%6.1f s] %lld/%lld trials  %s: best %s  errors: %s\n", report.elapsed_s,
               static_cast<long long>(report.trials), static_cast<long long>(goal),
               s.task.workload_key().c_str(), best.c_str(), errors_text(s.errors).c_str());
}

int run_tune(const TuneCommandArgs& args) {
  te::Task task;
  if (!args.task_path.empty()) {
    TT_CHECK(args.workload.empty(), kInvalidArgument, "give either --task or --workload, not both");
    task = load_task(args.task_path);
  } else {
    TT_CHECK(!args.workload.empty(), kInvalidArgument,
             "give --task FILE or --workload NAME --args A,B,...");
    ir::Target target = ir::Target::parse(args.target);
    if (!args.host.empty()) target = target.with_host(ir::Target::parse(args.host));
    task = te::Task::make(te::make_named_workload_from_text(args.workload, args.workload_args),
                          target);
  }
  measure::install_interrupt_cleanup();
  measure::LocalBuilder builder(args.measure.builder_options());
  measure::LocalRunner runner(args.measure.runner_options());
  search::TuneOptions options;
  options.trials = args.trials;
  options.batch_size = args.batch_size;
  options.log_path = args.log_path;
  options.seed = args.seed;
  // The run's one context: every candidate is built under it, and only
  // records built under it are resumed (unless --any-pass-context).
  options.pass_context = args.pass_context.make();
  options.any_pass_context = args.any_pass_context;
  search::PolicyFactory policy;
  std::shared_ptr<search::SharedCostModel> model;
  if (args.policy == "random") {
    policy = [](const te::Task& t, uint64_t seed) -> std::unique_ptr<search::SearchPolicy> {
      return std::make_unique<search::RandomSearchPolicy>(t, seed);
    };
  } else {
    TT_CHECK(args.policy == "evolutionary", kInvalidArgument, "unknown policy '", args.policy,
             "'; the policies are: evolutionary, random");
    model = std::make_shared<search::SharedCostModel>(
        args.cost_model_file.empty() ? search::make_cost_model(args.cost_model, args.seed)
                                     : search::load_cost_model(args.cost_model_file, args.seed));
    policy = search::evolutionary_policy(model);
  }
  std::fprintf(stderr, "tuning %s on %s: %lld new trials, log %s\n", task.workload_key().c_str(),
               task->target.str().c_str(), static_cast<long long>(args.trials),
               args.log_path.c_str());
  std::map<std::string, int64_t> trial_numbers;
  search::TuneHooks hooks;
  hooks.progress = [&](const search::TaskSummary& s, const search::TuneReport& so_far) {
    print_progress(s, so_far, args.trials);
  };
  hooks.result = [&](const measure::MeasureInput& input, const measure::MeasureResult& result) {
    std::string key = input.task.workload_key();
    print_instruments(result.instruments,
                      "build worker, " + key + " trial " + std::to_string(++trial_numbers[key]));
  };
  search::TuneReport report = search::tune({task}, policy, builder, runner, options, hooks);
  for (const auto& s : report.tasks) {
    if (s.other_context_records == 0) continue;
    std::vector<std::string> hashes;
    for (const auto& h : s.other_contexts) hashes.push_back(h.str());
    std::fprintf(stderr,
                 "note: %s holds %zu records of %s built under other pass contexts (%s), not this "
                 "run's (%s): they were not resumed; --any-pass-context resumes them\n",
                 args.log_path.c_str(), s.other_context_records, s.task.workload_key().c_str(),
                 join(hashes, ", ").c_str(),
                 measure::Hash64(report.pass_context.hash()).str().c_str());
  }

  bool any_failed = false;
  json tasks = json::array();
  for (const auto& s : report.tasks) {
    any_failed |= s.failed();
    json t = {{"workload_key", s.task.workload_key()},
              {"target", s.task->target.str()},
              {"trials", s.trials},
              {"resumed", s.resumed},
              {"pass_context_hash", measure::Hash64(report.pass_context.hash()).str()},
              {"best_latency_s", s.best_latency() ? json(*s.best_latency()) : json(nullptr)},
              {"best_gflops", s.best_gflops() ? json(*s.best_gflops()) : json(nullptr)},
              {"errors", s.errors},
              {"status", s.failed() ? "failed"
                         : s.best   ? "ok"
                                    : "not measured"}};
    if (s.failed()) t["error_message"] = s.sample_error;
    if (s.exhausted) t["exhausted"] = true;
    tasks.push_back(t);
  }
  if (args.as_json) {
    json out = {{"tasks", tasks}, {"trials", report.trials}, {"elapsed_s", report.elapsed_s}};
    std::cout << out.dump(1, ' ', false, json::error_handler_t::replace) << "\n";
  } else {
    for (const auto& s : report.tasks) {
      if (s.failed()) {
        std::printf("%s: FAILED, every one of %lld candidates (%s)\n  %s\n",
                    s.task.workload_key().c_str(), static_cast<long long>(s.trials + s.resumed),
                    errors_text(s.errors).c_str(), s.sample_error.c_str());
        continue;
      }
      std::printf("%s on %s\n  %lld new trials (%lld resumed from the log) in %.1f s%s\n",
                  s.task.workload_key().c_str(), s.task->target.str().c_str(),
                  static_cast<long long>(s.trials), static_cast<long long>(s.resumed),
                  report.elapsed_s, s.exhausted ? "; no new states left to try" : "");
      if (auto latency = s.best_latency()) {
        std::printf("  best %.4f ms", *latency * 1e3);
        if (auto g = s.best_gflops()) std::printf(", %.2f GFLOP/s", *g);
        std::printf("\n");
      }
      std::printf("  errors: %s\n", errors_text(s.errors).c_str());
    }
    if (!args.log_path.empty()) std::printf("records in %s\n", args.log_path.c_str());
  }
  return any_failed ? 3 : 0;
}

}  // namespace

Command add_tune_command(CLI::App& app) {
  auto args = std::make_shared<TuneCommandArgs>();
  CLI::App* cmd = app.add_subcommand(
      "tune", "search schedules of a task, recording every measurement (exit 3 if all fail)");
  auto* task_opt = cmd->add_option("--task", args->task_path, "a task file (tensortune task)");
  cmd->add_option("--workload", args->workload, "registered workload name (instead of --task)")
      ->excludes(task_opt);
  cmd->add_option("--args", args->workload_args, "workload arguments, comma-separated");
  cmd->add_option("--target", args->target, "target string, e.g. \"c -mcpu=native -num-cores=2\"");
  cmd->add_option("--host", args->host, "host target string");
  cmd->add_option("--trials", args->trials, "new measurements in this run")
      ->check(CLI::Range(int64_t{0}, int64_t{1} << 40));
  cmd->add_option("--batch-size", args->batch_size, "candidates measured together")
      ->check(CLI::Range(1, 4096));
  cmd->add_option("--log", args->log_path, "record log: appended to, and resumed from")->required();
  cmd->add_option("--seed", args->seed, "random seed");
  cmd->add_flag("--json", args->as_json, "machine-readable output");
  cmd->add_option("--policy", args->policy, "search policy: evolutionary (default) or random");
  cmd->add_option("--cost-model", args->cost_model,
                  "cost model of the evolutionary policy: xgb (default) or random");
  cmd->add_option("--cost-model-file", args->cost_model_file,
                  "start from this trained model (tensortune train-model)");
  cmd->add_flag("--any-pass-context", args->any_pass_context,
                "resume from records of the log built under any pass context, not only this one");
  args->measure.add_to(cmd);
  args->pass_context.add_to(cmd);
  return {cmd, [args] { return run_tune(*args); }};
}

}  // namespace tensortune::cli
