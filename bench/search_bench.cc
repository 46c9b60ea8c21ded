// What one round of the search costs outside the compiler and the kernels:
// sampling 2,048 states from a task's sketches, lowering and featurising
// them, training the XGBoost model on 1,024 measured programs, and
// predicting 2,048. Tasks: matmul 1024^3 and the ResNet 3x3 64->64 conv at
// 56x56 in NHWC, for the machine this runs on.
//
//   build-release/bench/search_bench
#include <benchmark/benchmark.h>

#include <cmath>
#include <random>

#include "tensortune/search/annotate.h"
#include "tensortune/search/cost_model.h"
#include "tensortune/search/features.h"
#include "tensortune/search/sketch.h"
#include "tensortune/te/task.h"

namespace tt = tensortune;

namespace {

constexpr int kStates = 2048;

struct Case {
  tt::te::Task task;
  tt::schedule::ComputeDAG dag;
  std::vector<tt::search::Sketch> sketches;
  std::vector<tt::schedule::State> states;
  std::vector<tt::search::ProgramFeatures> features;
};

Case& case_of(int which) {
  static std::map<int, Case> cases;
  auto it = cases.find(which);
  if (it != cases.end()) return it->second;
  const char* names[] = {"matmul", "conv2d_nhwc"};
  const char* args[] = {"1024,1024,1024", "1,64,56,56,64,3,3,1,1"};
  auto task = tt::te::Task::make(tt::te::make_named_workload_from_text(names[which], args[which]),
                                 tt::ir::Target::parse("c -mcpu=native -num-cores=2"));
  tt::schedule::ComputeDAG dag(tt::te::workload_tensors(task->workload));
  Case c{task, dag, tt::search::generate_sketches(dag, tt::search::sketch_options(task)), {}, {}};
  std::mt19937_64 rng(1);
  const tt::ir::HardwareParamsNode& machine = *task->hardware_params;
  for (int i = 0; i < kStates; ++i) {
    c.states.push_back(
        tt::search::sample_state(c.sketches[i % c.sketches.size()], dag, machine, {}, rng));
    c.features.push_back(tt::search::lower_for_search(dag, c.states.back()).features);
  }
  return cases.emplace(which, std::move(c)).first->second;
}

void BM_SampleStates(benchmark::State& state) {
  Case& c = case_of(static_cast<int>(state.range(0)));
  const tt::ir::HardwareParamsNode& machine = *c.task->hardware_params;
  std::mt19937_64 rng(2);
  for (auto _ : state) {
    for (int i = 0; i < kStates; ++i) {
      benchmark::DoNotOptimize(
          tt::search::sample_state(c.sketches[i % c.sketches.size()], c.dag, machine, {}, rng));
    }
  }
  state.counters["states/s"] =
      benchmark::Counter(kStates, benchmark::Counter::kIsIterationInvariantRate);
}
BENCHMARK(BM_SampleStates)->Arg(0)->Arg(1)->Unit(benchmark::kMillisecond);

void BM_LowerAndFeaturize(benchmark::State& state) {
  Case& c = case_of(static_cast<int>(state.range(0)));
  for (auto _ : state) {
    for (const auto& s : c.states) benchmark::DoNotOptimize(tt::search::lower_for_search(c.dag, s));
  }
  state.counters["states/s"] =
      benchmark::Counter(kStates, benchmark::Counter::kIsIterationInvariantRate);
}
BENCHMARK(BM_LowerAndFeaturize)->Arg(0)->Arg(1)->Unit(benchmark::kMillisecond);

/// A model trained on the first 1,024 programs, costs from a formula the features can see.
tt::search::XgbCostModel& trained(Case& c) {
  static std::map<const Case*, std::unique_ptr<tt::search::XgbCostModel>> models;
  auto& m = models[&c];
  if (!m) {
    m = std::make_unique<tt::search::XgbCostModel>(1);
    tt::search::Dataset data;
    for (int i = 0; i < kStates / 2; ++i) {
      double speed = 1 + c.features[i].row(c.features[i].rows - 1)[14];  // vector_inner_extent
      data.add("t", c.features[i], 1e-3 / speed);
    }
    m->train(data);
  }
  return *m;
}

void BM_Train1024(benchmark::State& state) {
  Case& c = case_of(static_cast<int>(state.range(0)));
  tt::search::Dataset data;
  for (int i = 0; i < kStates / 2; ++i) {
    double speed = 1 + c.features[i].row(c.features[i].rows - 1)[14];
    data.add("t", c.features[i], 1e-3 / speed);
  }
  for (auto _ : state) {
    tt::search::XgbCostModel model(1);
    benchmark::DoNotOptimize(model.train(data));
  }
}
BENCHMARK(BM_Train1024)->Arg(0)->Arg(1)->Unit(benchmark::kMillisecond);

void BM_Predict(benchmark::State& state) {
  Case& c = case_of(static_cast<int>(state.range(0)));
  tt::search::XgbCostModel& model = trained(c);
  std::vector<const tt::search::ProgramFeatures*> f;
  for (const auto& p : c.features) f.push_back(&p);
  for (auto _ : state) benchmark::DoNotOptimize(model.predict(f));
  state.counters["states/s"] =
      benchmark::Counter(kStates, benchmark::Counter::kIsIterationInvariantRate);
}
BENCHMARK(BM_Predict)->Arg(0)->Arg(1)->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
