// Features of lowered programs and the cost models that learn from them.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <random>
#include <set>

#include "common/test_util.h"
#include "tensortune/schedule/steps.h"
#include "tensortune/search/annotate.h"
#include "tensortune/search/cost_model.h"
#include "tensortune/search/features.h"
#include "tensortune/search/sketch.h"
#include "tensortune/te/workload.h"

namespace tensortune::search {
namespace {

using schedule::ComputeDAG;
using schedule::IterAnnotation;
using schedule::State;

ComputeDAG matmul_dag(const std::string& args) {
  return ComputeDAG(te::workload_tensors(te::make_named_workload_from_text("matmul", args)));
}

float feature(const ProgramFeatures& f, int row, const std::string& name) {
  const auto& names = feature_names();
  auto it = std::find(names.begin(), names.end(), name);
  EXPECT_NE(it, names.end()) << name;
  return f.row(row)[it - names.begin()];
}

double unscaled(float v) { return std::exp2(static_cast<double>(v)) - 1; }

std::string scratch(const std::string& name) {
  return (std::filesystem::temp_directory_path() /
          ("tt-model-test-" + std::to_string(::getpid()) + "-" + name))
      .string();
}

TEST(Features, NamesAreOnePerFeatureAndDistinct) {
  const auto& names = feature_names();
  EXPECT_EQ(names.size(), static_cast<size_t>(kFeaturesPerStore));
  EXPECT_EQ(std::set<std::string>(names.begin(), names.end()).size(), names.size());
}

TEST(Features, NaiveMatmulCountsItsArithmeticAndStrides) {
  ComputeDAG dag = matmul_dag("16,32,8");
  LoweredState l = lower_for_search(dag, State::make());
  ASSERT_EQ(l.features.rows, 2);  // the initialisation and the update
  EXPECT_NEAR(unscaled(feature(l.features, 1, "float_fma")), 16 * 32 * 8, 1e-6 * 4096);
  EXPECT_NEAR(unscaled(feature(l.features, 1, "trips")), 16 * 32 * 8, 1e-3);
  EXPECT_NEAR(unscaled(feature(l.features, 1, "reduce_trips")), 8, 1e-3);
  EXPECT_EQ(feature(l.features, 1, "innermost_is_reduce"), 1.0f);
  // The biggest footprint first: B (8 x 32) and A (16 x 8) are read, the
  // output (16 x 32) written and read; B's innermost stride is a row of 32.
  EXPECT_EQ(feature(l.features, 1, "buf0.is_write"), 1.0f);
  EXPECT_NEAR(unscaled(feature(l.features, 1, "buf0.bytes_all")), 16 * 32 * 4, 1e-3);
  EXPECT_NEAR(unscaled(feature(l.features, 1, "buf1.innermost_loop_stride")), 32, 1e-3);
  for (float v : l.features.values) EXPECT_TRUE(std::isfinite(v));
}

TEST(Features, AnnotationsShowAsLoopKinds) {
  ComputeDAG dag = matmul_dag("64,64,64");
  State s = State::make({schedule::split(2, 1, {16}), schedule::reorder(2, {0, 1, 3, 2}),
                         schedule::annotate(2, 3, IterAnnotation::kVectorize),
                         schedule::annotate(2, 0, IterAnnotation::kParallel)});
  LoweredState l = lower_for_search(dag, s);
  EXPECT_NEAR(unscaled(feature(l.features, 1, "vector_inner_extent")), 16, 1e-3);
  EXPECT_EQ(feature(l.features, 1, "innermost_is_vector"), 1.0f);
  EXPECT_NEAR(unscaled(feature(l.features, 1, "parallel_product")), 64, 1e-3);
}

TEST(Features, TheProgramHashIgnoresStepsThatChangeNothing) {
  ComputeDAG dag = matmul_dag("8,8,8");
  LoweredState naive = lower_for_search(dag, State::make());
  LoweredState same = lower_for_search(dag, State::make({schedule::reorder(2, {0, 1, 2})}));
  LoweredState other = lower_for_search(dag, State::make({schedule::reorder(2, {1, 0, 2})}));
  EXPECT_EQ(naive.program_hash, same.program_hash);
  EXPECT_NE(naive.program_hash, other.program_hash);
}

TEST(Dataset, LabelsAreThroughputRelativeToTheTasksBest) {
  Dataset d;
  d.add("a", {}, 2e-3);
  d.add("a", {}, 1e-3);
  d.add("b", {}, 4.0);
  d.add("a", {}, HUGE_VAL);
  EXPECT_EQ(d.size(), 4u);
  EXPECT_EQ(d.successes(), 3u);
  EXPECT_EQ(d.labels(), (std::vector<float>{0.5f, 1.0f, 1.0f, 0.0f}));
}

TEST(CostModels, UnknownNamesListTheModels) {
  EXPECT_TT_ERROR(make_cost_model("gbdt"), kInvalidArgument, "the cost models are: xgb, random");
  EXPECT_TT_ERROR(make_cost_model("random")->save(scratch("random")), kInvalidArgument,
                  "nothing to save");
}

/// Random programs of matmul 64^3 with a cost from a formula the features
/// can see: vectorized, parallel and unrolled programs are faster.
struct Synthetic {
  std::vector<LoweredState> programs;
  std::vector<double> costs;
};

Synthetic synthetic(int n, uint64_t seed) {
  ComputeDAG dag = matmul_dag("64,64,64");
  std::vector<Sketch> sketches = generate_sketches(dag, SketchOptions{"SSRSRS", {1, 2}, 2});
  ir::HardwareParamsNode machine;
  machine.num_cores = 2;
  machine.vector_bytes = 64;
  std::mt19937_64 rng(seed);
  Synthetic out;
  for (int i = 0; i < n; ++i) {
    State s =
        sample_state(sketches[static_cast<size_t>(i) % sketches.size()], dag, machine, {}, rng);
    LoweredState l = lower_for_search(dag, s);
    double speed = 1;
    for (int r = 0; r < l.features.rows; ++r) {
      speed += unscaled(feature(l.features, r, "vector_inner_extent")) +
               2 * unscaled(feature(l.features, r, "parallel_loops"));
    }
    out.costs.push_back(1e-3 / speed);
    out.programs.push_back(std::move(l));
  }
  return out;
}

/// How often the model orders two programs as their costs do.
double pairwise_accuracy(CostModel& model, const Synthetic& data) {
  std::vector<const ProgramFeatures*> f;
  for (const auto& p : data.programs) f.push_back(&p.features);
  std::vector<float> scores = model.predict(f);
  int right = 0, pairs = 0;
  for (size_t i = 0; i < scores.size(); ++i) {
    for (size_t j = i + 1; j < scores.size(); ++j) {
      if (data.costs[i] == data.costs[j]) continue;
      ++pairs;
      right += (scores[i] > scores[j]) == (data.costs[i] < data.costs[j]);
    }
  }
  return pairs ? static_cast<double>(right) / pairs : 1.0;
}

TEST(XgbCostModel, WaitsForDataThenRanksHeldOutProgramsAndSurvivesSaveAndLoad) {
  XgbCostModel model(1);
  Dataset few;
  few.add("t", {}, 1e-3);
  EXPECT_NE(model.train(few).find("waits for 32 measured programs"), std::string::npos);
  EXPECT_FALSE(model.trained());
  EXPECT_TT_ERROR(model.save(scratch("untrained")), kInvalidArgument, "not been trained");

  Synthetic train = synthetic(160, 1), test = synthetic(60, 2);
  Dataset data;
  for (size_t i = 0; i < train.programs.size(); ++i) {
    data.add("t", train.programs[i].features, train.costs[i]);
  }
  EXPECT_EQ(model.train(data), "");
  ASSERT_TRUE(model.trained());
  double accuracy = pairwise_accuracy(model, test);
  EXPECT_GT(accuracy, 0.8);
  RandomCostModel random(1);
  EXPECT_LT(pairwise_accuracy(random, test), 0.65);

  std::string path = scratch("model.json");
  model.save(path);
  std::unique_ptr<CostModel> loaded = load_cost_model(path);
  EXPECT_TRUE(loaded->trained());
  std::vector<const ProgramFeatures*> f;
  for (const auto& p : test.programs) f.push_back(&p.features);
  EXPECT_EQ(loaded->predict(f), model.predict(f));
  std::filesystem::remove(path);
}

TEST(XgbCostModel, BadModelFilesAreClearErrors) {
  EXPECT_TT_ERROR(load_cost_model(scratch("missing.json")), kNotFound,
                  "cannot read the cost model file");
  std::string corrupt = scratch("corrupt.json");
  std::ofstream(corrupt) << "{\"learner\": [1, 2";
  EXPECT_TT_ERROR(load_cost_model(corrupt), kParse, "is not a readable cost model");
  std::filesystem::remove(corrupt);
}

}  // namespace
}  // namespace tensortune::search
