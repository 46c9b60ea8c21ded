/// \file
/// Sketch-based evolutionary search guided by a learnt cost model (Ansor's
/// search, OSDI '20 section 5). Each round: a population sampled from the
/// task's sketches plus the best measured states, evolved for a few
/// generations by mutation and crossover with parents chosen in proportion
/// to their predicted score; then the best predicted programs not measured
/// yet, mixed with a few random ones (epsilon-greedy). Programs are told
/// apart by what they lower to, not by their step lists. Until the cost
/// model has learnt anything, a round is random samples of the sketches.
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <unordered_map>
#include <unordered_set>

#include "tensortune/search/annotate.h"
#include "tensortune/search/cost_model.h"
#include "tensortune/search/search_policy.h"

namespace tensortune::search {

/// What the policies of one tuning run share: one cost model, trained on
/// everything measured in the run (and its log), and the time spent on it.
class SharedCostModel {
 public:
  explicit SharedCostModel(std::unique_ptr<CostModel> model) : model_(std::move(model)) {}
  CostModel& model() { return *model_; }
  /// Adds a measured program (mean cost in seconds, infinity when it failed).
  void add(const std::string& task_key, ProgramFeatures features, double cost);
  /// Retrains on everything added; a model that cannot train yet keeps its
  /// scores (note() says why), as does one whose training fails (a warning
  /// is printed once and the run goes on with the scores it had).
  void retrain();
  std::vector<float> predict(const std::vector<const ProgramFeatures*>& programs);
  const Dataset& data() const { return data_; }
  const std::string& note() const { return note_; }
  double training_seconds() const { return training_seconds_; }

 private:
  std::unique_ptr<CostModel> model_;
  Dataset data_;
  std::string note_;
  double training_seconds_ = 0;
  bool warned_ = false;
  size_t trained_on_ = 0;
};

/// The evolutionary policy's options (a reflected node: see TuneOptions).
struct EvolutionaryOptions : Object {
  int population = 512;
  int generations = 4;
  double mutation_prob = 0.85;
  double crossover_prob = 0.05;
  double eps_greedy = 0.05;
  /// Share of the population taken from the best measured states.
  double init_measured_ratio = 0.2;
  AnnotateOptions annotate;
  /// Mutation weights: tile size, auto-unroll, compute location, parallel.
  double weight_tile_size = 0.90, weight_auto_unroll = 0.04, weight_compute_location = 0.05,
         weight_parallel = 0.01;
  TT_NODE(EvolutionaryOptions, "search.EvolutionaryOptions")
  static void declare(FieldList<EvolutionaryOptions>& f);
};

/// The evolutionary policy for one task. Its first proposal starts with the
/// task's default schedule (search/default_schedule.h).
class EvolutionarySearchPolicy final : public SearchPolicy {
 public:
  EvolutionarySearchPolicy(const te::Task& task, uint64_t seed,
                           std::shared_ptr<SharedCostModel> model,
                           EvolutionaryOptions options = {});
  std::vector<schedule::State> propose(size_t count) override;
  void update(const std::vector<schedule::State>& states,
              const std::vector<measure::MeasureResult>& results) override;
  const std::vector<Sketch>& sketches() const { return sketches_; }

 private:
  struct Candidate {
    schedule::State state;
    uint64_t program = 0;
    const ProgramFeatures* features = nullptr;
  };
  /// `state` lowered, from the cache; nullopt for a state that does not lower.
  std::optional<Candidate> evaluate(const schedule::State& state);
  /// Lowers the states not in the cache yet, on every core, into the cache.
  void prefetch(const std::vector<schedule::State>& states);
  schedule::State random_state();
  std::optional<schedule::State> mutate(const schedule::State& s);
  std::vector<schedule::State> random_new(size_t count, std::unordered_set<uint64_t>& taken);
  /// propose() after the default schedule: evolution, or random states
  /// while the cost model is untrained.
  std::vector<schedule::State> search(size_t count);

  te::Task task_;
  std::string task_key_;
  schedule::ComputeDAG dag_;
  std::vector<Sketch> sketches_;
  ir::HardwareParams machine_;
  EvolutionaryOptions options_;
  std::shared_ptr<SharedCostModel> model_;
  std::mt19937_64 rng_;
  bool default_proposed_ = false;
  /// Programs measured or proposed: never proposed (again).
  std::unordered_set<uint64_t> taken_;
  /// Measured states, best first by cost, to seed the population.
  std::vector<std::pair<double, schedule::State>> measured_;
  /// By structural hash of the state: what it lowered to.
  struct Lowered {
    uint64_t program = 0;
    ProgramFeatures features;
    bool ok = false;
  };
  std::unordered_map<uint64_t, Lowered> cache_;
};

/// A factory for tune(): evolutionary policies sharing `model`.
PolicyFactory evolutionary_policy(std::shared_ptr<SharedCostModel> model,
                                  EvolutionaryOptions options = {});

}  // namespace tensortune::search
