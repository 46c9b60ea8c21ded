// Mutations, crossover and the evolutionary policy: every change it makes
// replays, it never proposes a program twice, it finds better programs than
// random search for the same number of measurements, and a run is
// reproducible from its seed whatever the number of build workers.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <random>
#include <set>

#include "common/test_util.h"
#include "measure/measure_test_util.h"
#include "tensortune/object/serialize.h"
#include "tensortune/object/structural.h"
#include "tensortune/schedule/steps.h"
#include "tensortune/search/default_schedule.h"
#include "tensortune/search/evolutionary.h"
#include "tensortune/search/mutate.h"
#include "tensortune/search/tuner.h"
#include "tensortune/support/strings.h"
#include "tensortune/te/workload.h"

namespace tensortune::search {
namespace {

using measure::BuildResult;
using measure::ErrorCode;
using measure::RunOutcome;
using schedule::ComputeDAG;
using schedule::State;

te::Task task_of(const std::string& name, const std::string& args) {
  return te::Task::make(te::make_named_workload_from_text(name, args),
                        ir::Target::parse("c -num-cores=2"));
}

ComputeDAG dag_of(const te::Task& task) { return ComputeDAG(te::workload_tensors(task->workload)); }

std::vector<State> samples(const te::Task& task, int n, uint64_t seed) {
  ComputeDAG dag = dag_of(task);
  std::vector<Sketch> sketches = generate_sketches(dag, sketch_options(task));
  std::mt19937_64 rng(seed);
  std::vector<State> out;
  for (int i = 0; i < n; ++i) {
    out.push_back(sample_state(sketches[static_cast<size_t>(i) % sketches.size()], dag,
                               *task->hardware_params, {}, rng));
  }
  return out;
}

int64_t split_product(const schedule::Step& step) {
  int64_t p = 1;
  for (int64_t l : step.as<schedule::SplitStepNode>()->lengths) p *= l;
  return p;
}

TEST(Mutations, TileSizesMoveFactorsWithinASplit) {
  te::Task task = task_of("matmul", "64,64,64");
  ComputeDAG dag = dag_of(task);
  std::mt19937_64 rng(1);
  int changed = 0;
  for (const State& s : samples(task, 60, 2)) {
    std::optional<State> m = mutate_tile_size(dag, s, AnnotateOptions{}, rng);
    if (!m) continue;
    schedule::replay(dag, *m);  // throws if invalid
    ASSERT_EQ(m->steps().size(), s.steps().size());
    for (size_t i = 0; i < s.steps().size(); ++i) {
      if (!s.steps()[i].as<schedule::SplitStepNode>()) {
        EXPECT_TRUE(structural_equal(s.steps()[i], m->steps()[i]));
      } else if (!structural_equal(s.steps()[i], m->steps()[i])) {
        ++changed;
        // The loop keeps its extent: the lengths' product divides it as before.
        EXPECT_EQ(64 % split_product(m->steps()[i]), 0);
      }
    }
  }
  EXPECT_GT(changed, 40);
}

// The vector axis's innermost tile gains or loses factors of two only, so a
// power of two of vectors stays one (3 vectors would be a scalar loop).
TEST(Mutations, TheVectorTileStaysAPowerOfTwoOfVectors) {
  // j has 96 = 3 x 32 points: moving a factor 3 into its innermost tile
  // would make 3 vectors of it.
  te::Task task = task_of("matmul", "32,96,32");
  ComputeDAG dag = dag_of(task);
  std::mt19937_64 rng(5);
  int vector_tiles_changed = 0;
  for (State s : samples(task, 40, 4)) {
    for (int round = 0; round < 20; ++round) {
      std::optional<State> m = mutate_tile_size(dag, s, AnnotateOptions{}, rng);
      if (!m) continue;
      schedule::LoopState loops = schedule::replay(dag, *m);
      for (size_t i = 0; i < s.steps().size(); ++i) {
        auto before = s.steps()[i].as<schedule::SplitStepNode>();
        auto after = m->steps()[i].as<schedule::SplitStepNode>();
        if (!after || structural_equal(s.steps()[i], m->steps()[i])) continue;
        // Tiling splits the axes last first: split k of a stage is its axis k.
        auto op = loops.stage(after->stage).tensor.compute_op();
        if (!op || op->body->kind() != ir::ExprKind::kReduce ||
            after->iter != static_cast<int>(op->axis.size()) - 1) {
          continue;
        }
        int64_t old_inner = before->lengths.back(), new_inner = after->lengths.back();
        EXPECT_EQ(old_inner / (old_inner & -old_inner), new_inner / (new_inner & -new_inner))
            << old_inner << " -> " << new_inner;
        vector_tiles_changed += old_inner != new_inner;
      }
      s = *m;
    }
  }
  EXPECT_GT(vector_tiles_changed, 0);
}

TEST(Mutations, AReductionsInnerTileMayGrowPastTheSpatialBound) {
  // k has 1024 points, i and j 16: an inner length past 16 is k's, and
  // mutation takes it past the spatial bound of 64 but not the reduction's.
  te::Task task = task_of("matmul", "16,16,1024");
  ComputeDAG dag = dag_of(task);
  AnnotateOptions options;
  options.max_innermost_reduction_split = 256;
  std::mt19937_64 rng(7);
  int past_spatial_bound = 0;
  for (State s : samples(task, 40, 3)) {
    for (int round = 0; round < 20; ++round) {
      std::optional<State> m = mutate_tile_size(dag, s, options, rng);
      if (!m) continue;
      for (size_t i = 0; i < s.steps().size(); ++i) {
        auto split = m->steps()[i].as<schedule::SplitStepNode>();
        if (!split || structural_equal(s.steps()[i], m->steps()[i])) continue;
        EXPECT_LE(split->lengths.back(), 256);
        past_spatial_bound += split->lengths.back() > 64;
      }
      s = *m;
    }
  }
  EXPECT_GT(past_spatial_bound, 0);
}

TEST(Mutations, UnrollParallelAndComputeLocationChangeWhatTheySay) {
  te::Task task = task_of("matmul", "64,64,64");
  ComputeDAG dag = dag_of(task);
  std::mt19937_64 rng(3);
  int unroll = 0, parallel = 0;
  for (const State& s : samples(task, 40, 4)) {
    if (auto m = mutate_auto_unroll(dag, s, {0, 16, 64, 512}, rng)) {
      unroll += !structural_equal(*m, s);
    }
    if (auto m = mutate_parallel(dag, s, rng)) {
      parallel += m->steps().size() != s.steps().size() || !structural_equal(*m, s);
    }
  }
  EXPECT_GT(unroll, 30);
  EXPECT_GT(parallel, 20);
  // The padding of a convolution, computed at one of the conv's loops, moves.
  te::Task conv = task_of("conv2d_nchw", "1,4,8,8,4,3,3,1,1");
  ComputeDAG conv_dag = dag_of(conv);
  State at = State::make({schedule::compute_at(2, 3, 1)});
  std::set<std::string> places;
  for (int i = 0; i < 20; ++i) {
    if (auto m = mutate_compute_location(conv_dag, at, rng)) places.insert(save_string(*m));
  }
  EXPECT_GE(places.size(), 3u);
  EXPECT_FALSE(mutate_compute_location(dag, State::make(), rng));
}

TEST(Mutations, CrossoverMixesTileSizesOfParentsOfOneStructure) {
  te::Task task = task_of("matmul", "64,64,64");
  ComputeDAG dag = dag_of(task);
  std::mt19937_64 rng(5);
  ComputeDAG d = dag_of(task);
  Sketch sketch = generate_sketches(d)[0];
  AnnotateOptions options;
  State a = fill_tile_sizes(sketch.state, d, *task->hardware_params, options, rng);
  State b = fill_tile_sizes(sketch.state, d, *task->hardware_params, options, rng);
  int children = 0;
  for (int i = 0; i < 20; ++i) {
    if (auto c = crossover(dag, a, b, rng)) {
      ++children;
      for (size_t k = 0; k < c->steps().size(); ++k) {
        EXPECT_TRUE(structural_equal(c->steps()[k], a.steps()[k]) ||
                    structural_equal(c->steps()[k], b.steps()[k]));
      }
    }
  }
  EXPECT_GT(children, 10);
  // Parents of different sketches have no child.
  State other =
      fill_tile_sizes(generate_sketches(d)[1].state, d, *task->hardware_params, options, rng);
  EXPECT_FALSE(crossover(dag, a, other, rng));
}

/// Prices each state with a formula the features can see (vectorized,
/// parallel, unrolled and well-tiled programs are cheaper), so that search
/// runs can be compared exactly and repeated. With `inner`, the candidates
/// are really built by it first (the price travels in the result).
class FormulaBuilder final : public measure::Builder {
 public:
  explicit FormulaBuilder(measure::Builder* inner = nullptr) : inner_(inner) {}
  void check(const te::Task& task, const ir::PassContext& context) override {
    if (inner_) inner_->check(task, context);
  }
  std::vector<BuildResult> build(const te::Task& task, const std::vector<State>& states,
                                 const ir::PassContext& context) override {
    std::vector<BuildResult> out =
        inner_ ? inner_->build(task, states, context) : std::vector<BuildResult>(states.size());
    ComputeDAG dag = dag_of(task);
    for (size_t i = 0; i < states.size(); ++i) {
      if (!inner_) out[i].pass_context_hash = measure::Hash64(context.hash());
      out[i].build_seconds = 0;
      if (out[i].error_code != ErrorCode::kNoError) continue;
      out[i].function = format_double(price(dag, states[i]));
    }
    return out;
  }
  static double price(const ComputeDAG& dag, const State& s) {
    ProgramFeatures f = lower_for_search(dag, s).features;
    const auto& names = feature_names();
    auto at = [&](int row, const char* name) {
      return std::exp2(static_cast<double>(
                 f.row(row)[std::find(names.begin(), names.end(), name) - names.begin()])) -
             1;
    };
    double cost = 0;
    for (int r = 0; r < f.rows; ++r) {
      double speed = (1 + at(r, "vector_inner_extent")) * (1 + at(r, "parallel_loops")) *
                     (1 + std::min(at(r, "unroll_product"), 16.0) / 4) /
                     (1 + std::abs(std::log2(1 + at(r, "buf0.bytes_3_loops")) - 12));
      cost += at(r, "trips") / speed;
    }
    return cost * 1e-9;
  }

 private:
  measure::Builder* inner_;
};

class FormulaRunner final : public measure::Runner {
 public:
  std::vector<RunOutcome> run(const te::Task&, const std::vector<BuildResult>& built,
                              const measure::RunHints&) override {
    std::vector<RunOutcome> out(built.size());
    for (size_t i = 0; i < built.size(); ++i) {
      out[i].error_code = built[i].error_code;
      if (built[i].error_code != ErrorCode::kNoError) continue;
      double cost = 0;
      parse_double(built[i].function, &cost);
      out[i].costs = {cost};
    }
    return out;
  }
};

std::shared_ptr<SharedCostModel> xgb() {
  return std::make_shared<SharedCostModel>(make_cost_model("xgb", 0));
}

TEST(EvolutionarySearch, NeverProposesAProgramTwice) {
  te::Task task = task_of("matmul", "32,32,32");
  EvolutionaryOptions options;
  options.population = 64;
  EvolutionarySearchPolicy policy(task, 1, xgb(), options);
  ComputeDAG dag = dag_of(task);
  std::set<uint64_t> programs;
  FormulaBuilder builder;
  FormulaRunner runner;
  for (int round = 0; round < 6; ++round) {
    std::vector<State> states = policy.propose(16);
    ASSERT_EQ(states.size(), 16u);
    for (const auto& s : states) {
      EXPECT_TRUE(programs.insert(lower_for_search(dag, s).program_hash).second) << round;
    }
    policy.update(states, measure::measure_candidates(task, states, ir::PassContext::make(),
                                                      builder, runner));
  }
}

TEST(EvolutionarySearch, TheDefaultScheduleIsMeasuredFirstAndOnce) {
  // What compile gives an untuned task is the first candidate: tuning can
  // only end faster than not tuning.
  te::Task task = task_of("matmul", "64,64,64");
  ComputeDAG dag = dag_of(task);
  const uint64_t untuned = lower_for_search(dag, default_schedule(task)).program_hash;
  EvolutionarySearchPolicy policy(task, 3, xgb(), {});
  FormulaBuilder builder;
  FormulaRunner runner;
  int seen = 0;
  for (int round = 0; round < 3; ++round) {
    std::vector<State> states = policy.propose(8);
    ASSERT_EQ(states.size(), 8u);
    if (round == 0) {
      EXPECT_EQ(lower_for_search(dag, states[0]).program_hash, untuned);
    }
    for (const auto& s : states) seen += lower_for_search(dag, s).program_hash == untuned;
    policy.update(states, measure::measure_candidates(task, states, ir::PassContext::make(),
                                                      builder, runner));
  }
  EXPECT_EQ(seen, 1);
}

double best_cost(const TuneReport& r) { return *r.tasks[0].best_latency(); }

TEST(EvolutionarySearch, FindsFasterProgramsThanRandomSearchForTheSameTrials) {
  // One run's best depends much on its seed in this priced world (either
  // search may stumble on a cheap program early), so five seeds each, and
  // the medians compared.
  te::Task task = task_of("matmul", "128,128,128");
  FormulaBuilder builder;
  FormulaRunner runner;
  TuneOptions options;
  options.trials = 96;
  options.batch_size = 16;
  EvolutionaryOptions evo;
  evo.population = 128;
  std::vector<double> guided, sketched, random;
  int wins = 0;
  for (uint64_t seed = 0; seed < 5; ++seed) {
    options.seed = seed;
    TuneReport g = tune({task}, evolutionary_policy(xgb(), evo), builder, runner, options);
    EXPECT_EQ(g.trials, 96);
    guided.push_back(best_cost(g));
    sketched.push_back(best_cost(tune(
        {task},
        evolutionary_policy(std::make_shared<SharedCostModel>(make_cost_model("random", 0)), evo),
        builder, runner, options)));
    random.push_back(best_cost(tune(
        {task},
        [](const te::Task& t, uint64_t s) { return std::make_unique<RandomSearchPolicy>(t, s); },
        builder, runner, options)));
    wins += guided.back() < random.back();
  }
  auto median = [](std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
  };
  EXPECT_GE(wins, 3);
  EXPECT_LT(median(guided), median(random));
  EXPECT_LE(median(guided), median(sketched));
}

/// The candidates of a run, in order, as record lines without the times.
std::vector<std::string> run_records(int build_workers, const std::string& log) {
  std::filesystem::remove(log);
  // Small, so that no candidate's C takes long to compile.
  te::Task task = task_of("matmul", "16,16,16");
  measure::LocalBuilderOptions bo = measure::testing::builder_options(build_workers);
  measure::LocalBuilder real(bo);
  FormulaBuilder builder(&real);
  FormulaRunner runner;
  TuneOptions options;
  options.trials = 64;
  options.batch_size = 16;
  options.log_path = log;
  options.seed = 42;
  EvolutionaryOptions evo;
  evo.population = 64;
  tune({task}, evolutionary_policy(xgb(), evo), builder, runner, options);
  std::vector<std::string> out;
  for (const auto& r : measure::load_records(log).records) {
    measure::MeasureResult result = r.result;
    result.timestamp = 0;
    result.build_seconds = 0;
    result.run_seconds = 0;
    out.push_back(measure::record_to_line({r.input, result}));
  }
  std::filesystem::remove(log);
  return out;
}

TEST(EvolutionarySearch, ARunIsReproducibleFromItsSeedWithAnyNumberOfBuildWorkers) {
  std::string log = measure::testing::test_cache_dir() + "-determinism.jsonl";
  std::vector<std::string> one = run_records(1, log);
  std::vector<std::string> again = run_records(1, log);
  std::vector<std::string> two = run_records(2, log);
  ASSERT_EQ(one.size(), 64u);
  EXPECT_EQ(one, again);
  EXPECT_EQ(one, two);
}

}  // namespace
}  // namespace tensortune::search
