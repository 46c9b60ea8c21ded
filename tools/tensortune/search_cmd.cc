// The search's commands besides `tune`: `sketches` (a task's sketches and
// samples of them), `train-model` (a cost model from record logs) and
// `apply` (the best schedule of a log, built into a library or printed).
#include <chrono>
#include <cstdio>
#include <iostream>
#include <map>
#include <random>

#include "cli_common.h"
#include "tensortune/codegen/backend.h"
#include "tensortune/codegen/c_codegen.h"
#include "tensortune/ir/pass_context.h"
#include "tensortune/lower/lower.h"
#include "tensortune/measure/record.h"
#include "tensortune/object/serialize.h"
#include "tensortune/schedule/compute_dag.h"
#include "tensortune/search/annotate.h"
#include "tensortune/search/cost_model.h"
#include "tensortune/search/sketch.h"
#include "tensortune/support/files.h"
#include "tensortune/support/strings.h"

namespace tensortune::cli {
namespace {

using json = nlohmann::json;

struct SketchesArgs {
  std::string task_path;
  int samples = 0;
  uint64_t seed = 0;
  bool as_json = false;
};

int run_sketches(const SketchesArgs& args) {
  te::Task task = load_task(args.task_path);
  schedule::ComputeDAG dag(te::workload_tensors(task->workload));
  std::vector<search::Sketch> sketches =
      search::generate_sketches(dag, search::sketch_options(task));
  const ir::HardwareParamsNode& machine = *task->hardware_params;
  std::mt19937_64 rng(args.seed);
  json out = json::array();
  for (size_t i = 0; i < sketches.size(); ++i) {
    const search::Sketch& sketch = sketches[i];
    std::vector<schedule::State> samples;
    for (int k = 0; k < args.samples; ++k) {
      samples.push_back(search::sample_state(sketch, dag, machine, {}, rng));
    }
    if (args.as_json) {
      json entry = {{"description", sketch.description},
                    {"state", parse_json_text(save_string(sketch.state))}};
      json sampled = json::array();
      for (const auto& s : samples) sampled.push_back(parse_json_text(save_string(s)));
      if (args.samples > 0) entry["samples"] = sampled;
      out.push_back(entry);
      continue;
    }
    std::cout << "sketch " << i << ": " << sketch.description << "\n";
    for (const auto& step : sketch.state.steps()) std::cout << "  " << step->str() << "\n";
    std::cout << schedule::replay(dag, sketch.state).str();
    for (size_t k = 0; k < samples.size(); ++k) {
      std::cout << "  sample " << k << ":\n";
      for (const auto& step : samples[k].steps()) std::cout << "    " << step->str() << "\n";
    }
    std::cout << "\n";
  }
  if (args.as_json) std::cout << out.dump(1) << "\n";
  return 0;
}

struct TrainArgs {
  std::vector<std::string> logs;
  std::string output;
  uint64_t seed = 0;
};

/// How often `model` orders two programs of one task as their costs do.
double pairwise_accuracy(search::CostModel& model, const std::vector<std::string>& tasks,
                         const std::vector<search::ProgramFeatures>& programs,
                         const std::vector<double>& costs) {
  std::vector<const search::ProgramFeatures*> f;
  for (const auto& p : programs) f.push_back(&p);
  std::vector<float> scores = model.predict(f);
  int64_t right = 0, pairs = 0;
  for (size_t i = 0; i < f.size(); ++i) {
    for (size_t j = i + 1; j < f.size(); ++j) {
      if (tasks[i] != tasks[j] || costs[i] == costs[j]) continue;
      ++pairs;
      right += (scores[i] > scores[j]) == (costs[i] < costs[j]);
    }
  }
  return pairs ? static_cast<double>(right) / static_cast<double>(pairs) : 1.0;
}

int run_train(const TrainArgs& args) {
  auto start = std::chrono::steady_clock::now();
  std::vector<std::string> tasks;
  std::vector<search::ProgramFeatures> programs;
  std::vector<double> costs;
  std::map<std::string, schedule::ComputeDAG> dags;
  size_t skipped = 0;
  for (const auto& log : args.logs) {
    for (const auto& r : measure::load_records(log).records) {
      if (r.result.error_code == measure::ErrorCode::kDeviceLost) continue;
      std::string key = measure::task_key(r.input.task);
      try {
        auto it = dags.find(key);
        if (it == dags.end()) {
          it = dags.emplace(key, schedule::ComputeDAG(te::workload_tensors(r.input.task->workload)))
                   .first;
        }
        programs.push_back(search::lower_for_search(it->second, r.input.state).features);
      } catch (const UserError& e) {
        // A record this build cannot replay: one program less, not a failed run.
        std::fprintf(stderr, "warning: %s:%zu: skipped: %s\n", log.c_str(), r.line, e.what());
        ++skipped;
        continue;
      }
      tasks.push_back(key);
      costs.push_back(r.result.ok() ? r.result.median_cost() : HUGE_VAL);
    }
  }
  // Every fifth program held out, to say how well the model ranks programs
  // it has not seen; then the model is trained on all of them.
  search::Dataset held_in, all;
  std::vector<std::string> out_tasks;
  std::vector<search::ProgramFeatures> out_programs;
  std::vector<double> out_costs;
  for (size_t i = 0; i < programs.size(); ++i) {
    all.add(tasks[i], programs[i], costs[i]);
    if (i % 5 == 4) {
      out_tasks.push_back(tasks[i]);
      out_programs.push_back(programs[i]);
      out_costs.push_back(costs[i]);
    } else {
      held_in.add(tasks[i], programs[i], costs[i]);
    }
  }
  search::XgbCostModel probe(args.seed);
  std::string why = probe.train(held_in);
  std::optional<double> accuracy;
  if (why.empty()) accuracy = pairwise_accuracy(probe, out_tasks, out_programs, out_costs);
  search::XgbCostModel model(args.seed);
  why = model.train(all);
  TT_CHECK(why.empty(), kInvalidArgument, "cannot train a cost model on ", join(args.logs, ", "),
           ": ", why);
  check_not_an_input(args.output, args.logs);
  model.save(args.output);
  double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf("trained on %zu programs (%zu measured successfully) of %zu tasks in %.1f s%s\n",
              all.size(), all.successes(), dags.size(), seconds,
              skipped ? (", " + std::to_string(skipped) +
                         " records skipped: their states do not "
                         "replay here")
                            .c_str()
                      : "");
  if (accuracy) {
    std::printf("held-out pairwise ranking accuracy (every 5th program): %.3f\n", *accuracy);
  }
  std::printf("wrote %s\n", args.output.c_str());
  return 0;
}

struct ApplyArgs {
  std::string log_path, task_path, output, emit = "none", function = "kernel";
  bool any_pass_context = false, compatible_target = false;
  PassContextArgs pass_context;
};

int run_apply(const ApplyArgs& args) {
  te::Task task = load_task(args.task_path);
  ir::PassContext context = args.pass_context.make();
  std::vector<measure::Record> records = measure::load_records(args.log_path).records;
  measure::ContextMatch match =
      args.any_pass_context ? measure::ContextMatch::any() : measure::ContextMatch::only(context);
  measure::TargetMatch target =
      args.compatible_target ? measure::TargetMatch::kCompatible : measure::TargetMatch::kExact;
  std::optional<measure::Record> best = measure::best_for(records, task, match, target);
  if (!best) {
    fail(ErrorKind::kNotFound, "no schedule for ", task.workload_key(), " on ", task->target.str(),
         " in ", args.log_path, ": ", measure::why_no_record(records, task, match, target));
  }
  schedule::ComputeDAG dag(te::workload_tensors(task->workload));
  schedule::LoopState loops = schedule::replay(dag, best->input.state);
  ir::PassContextGuard guard(context);
  lower::PrimFunc f = lower::lower(loops, args.function);
  auto sources = codegen::kernel_sources(task->target);
  std::string source = sources->source({sources->add(f)});
  std::fprintf(stderr, "%s: the best of %s, %.4f ms (%s)\n", task.workload_key().c_str(),
               args.log_path.c_str(), best->result.median_cost() * 1e3,
               measure::Hash64(context.hash()).str().c_str());
  if (args.emit == "c") std::cout << source;
  if (args.emit == "ir") std::cout << lower::to_string(f);
  if (!args.output.empty()) {
    codegen::Module module = sources->compile(source, {});
    std::optional<std::string> bytes = read_file_if_exists(module.library_path());
    TT_CHECK(bytes, kIO, "the built library ", module.library_path(), " cannot be read");
    write_output(args.output, *bytes, {args.log_path, args.task_path});
    std::vector<std::string> params;
    for (const auto& b : f->params) {
      std::string shape;
      for (int64_t d : b->shape) shape += (shape.empty() ? "" : ", ") + std::to_string(d);
      params.push_back(b->name + " " + b->dtype.str() + "[" + shape + "]");
    }
    std::fprintf(stderr, "wrote %s: int32_t %s(void** args), args: %s (inputs, then outputs)\n",
                 args.output.c_str(), codegen::c_function_name(args.function).c_str(),
                 join(params, ", ").c_str());
  }
  return 0;
}

}  // namespace

Command add_train_model_command(CLI::App& app) {
  auto args = std::make_shared<TrainArgs>();
  CLI::App* cmd = app.add_subcommand(
      "train-model", "train an XGBoost cost model on record logs (for tune --cost-model-file)");
  cmd->add_option("logs", args->logs, "record logs")->required();
  cmd->add_option("-o,--output", args->output, "where to write the model")->required();
  cmd->add_option("--seed", args->seed, "random seed");
  return {cmd, [args] { return run_train(*args); }};
}

Command add_apply_command(CLI::App& app) {
  auto args = std::make_shared<ApplyArgs>();
  CLI::App* cmd = app.add_subcommand(
      "apply", "build the best schedule of a log for a task into a shared library, or print it");
  cmd->add_option("--log", args->log_path, "record log")->required();
  cmd->add_option("--task", args->task_path, "a task file (tensortune task)")->required();
  add_trust_file_compiler_flag(cmd);
  cmd->add_option("-o,--output", args->output, "write the shared library here");
  cmd->add_option("--emit", args->emit, "print the kernel: c, ir or none (default)")
      ->check(CLI::IsMember({"c", "ir", "none"}));
  cmd->add_option("--function", args->function, "the kernel's name in the library");
  cmd->add_flag("--any-pass-context", args->any_pass_context,
                "take the best record of any pass context, not only this one's");
  cmd->add_flag("--compatible-target", args->compatible_target,
                "take records of any compatible target, not only this exact one");
  args->pass_context.add_to(cmd);
  return {cmd, [args] { return run_apply(*args); }};
}

Command add_sketches_command(CLI::App& app) {
  auto args = std::make_shared<SketchesArgs>();
  CLI::App* cmd = app.add_subcommand(
      "sketches", "print the sketches the search starts from (and schedules sampled from them)");
  cmd->add_option("--task", args->task_path, "a task file (tensortune task)")->required();
  add_trust_file_compiler_flag(cmd);
  cmd->add_option("--samples", args->samples, "complete schedules to sample from each sketch")
      ->check(CLI::Range(0, 10000));
  cmd->add_option("--seed", args->seed, "random seed for the samples");
  cmd->add_flag("--json", args->as_json, "machine-readable output");
  return {cmd, [args] { return run_sketches(*args); }};
}

}  // namespace tensortune::cli
