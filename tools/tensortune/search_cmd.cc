// `tensortune sketches`: the sketches of a task, as the search starts from
// them, and a few complete schedules sampled from each.
#include <iostream>
#include <random>

#include "cli_common.h"
#include "tensortune/object/serialize.h"
#include "tensortune/schedule/compute_dag.h"
#include "tensortune/search/annotate.h"
#include "tensortune/search/sketch.h"

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
  search::MachineModel machine = search::machine_model(task);
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

}  // namespace

Command add_sketches_command(CLI::App& app) {
  auto args = std::make_shared<SketchesArgs>();
  CLI::App* cmd = app.add_subcommand(
      "sketches", "print the sketches the search starts from (and schedules sampled from them)");
  cmd->add_option("--task", args->task_path, "a task file (tensortune task)")->required();
  cmd->add_option("--samples", args->samples, "complete schedules to sample from each sketch")
      ->check(CLI::Range(0, 10000));
  cmd->add_option("--seed", args->seed, "random seed for the samples");
  cmd->add_flag("--json", args->as_json, "machine-readable output");
  return {cmd, [args] { return run_sketches(*args); }};
}

}  // namespace tensortune::cli
