/// \file
/// Cost models: scores that rank a task's candidate schedules before any is
/// measured, learnt from the ones that were. Two: "random" (the baseline,
/// scores drawn at random) and "xgb" (gradient-boosted trees through
/// XGBoost's C API, Ansor's model: one row per store of the lowered program,
/// a program's score the sum of its rows', trained on throughput normalised
/// to the best of its task with a loss weighted towards the fast programs).
///
/// One model serves every task of a run; a Dataset keeps what was measured
/// so far, and the model is retrained from it after every measured batch.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "tensortune/search/features.h"

namespace tensortune::search {

/// Measured programs: features, and mean cost in seconds (infinity when
/// measuring failed), grouped by task.
class Dataset {
 public:
  void add(const std::string& task_key, ProgramFeatures features, double cost);
  size_t size() const { return programs_.size(); }
  /// Programs that measured successfully.
  size_t successes() const { return successes_; }
  const ProgramFeatures& features(size_t i) const { return programs_[i].features; }
  /// The training target of program i: its task's best cost over its own
  /// (1 for the fastest, towards 0 for slow ones, 0 for failures).
  std::vector<float> labels() const;

 private:
  struct Program {
    std::string task;
    ProgramFeatures features;
    double cost;
  };
  std::vector<Program> programs_;
  std::map<std::string, double> best_;
  size_t successes_ = 0;
};

/// A model that ranks programs: a higher score means faster.
class CostModel {
 public:
  virtual ~CostModel() = default;
  virtual std::string name() const = 0;
  /// Retrains on everything in `data`. A model that cannot train yet (too
  /// few programs, none successful) keeps scoring as before and says why in
  /// the returned text; "" when it trained.
  virtual std::string train(const Dataset& data) = 0;
  /// One score per program.
  virtual std::vector<float> predict(const std::vector<const ProgramFeatures*>& programs) = 0;
  /// True once the scores mean something (a random model never does).
  virtual bool trained() const = 0;
  /// Writes the model to `path` (atomically); a kInvalidArgument error for a
  /// model that has nothing to save.
  virtual void save(const std::string& path) const = 0;
};

/// The model named `name` ("xgb" or "random"); a kInvalidArgument error listing them otherwise.
std::unique_ptr<CostModel> make_cost_model(std::string_view name, uint64_t seed = 0);
/// The model names make_cost_model knows.
std::vector<std::string> cost_model_names();
/// A model saved by CostModel::save; a kParse error naming the file for a
/// file that is not a tensortune cost model or was made for other features.
std::unique_ptr<CostModel> load_cost_model(const std::string& path, uint64_t seed = 0);

/// Scores drawn uniformly at random.
class RandomCostModel final : public CostModel {
 public:
  explicit RandomCostModel(uint64_t seed) : rng_(seed) {}
  std::string name() const override { return "random"; }
  std::string train(const Dataset&) override { return ""; }
  std::vector<float> predict(const std::vector<const ProgramFeatures*>& programs) override;
  bool trained() const override { return false; }
  void save(const std::string& path) const override;

 private:
  std::mt19937_64 rng_;
};

/// Training knobs of the XGBoost model.
struct XgbOptions {
  int max_depth = 10;
  double eta = 0.2;
  double gamma = 0.001;
  double min_child_weight = 0;
  int max_rounds = 300;
  /// Training stops when the pack-sum RMSE on the training data has not
  /// improved for this many rounds.
  int early_stopping_rounds = 30;
  /// No training below this many programs (or without a success): random scores until then.
  size_t min_programs = 32;
  int threads = 0;  ///< 0: every core
};

/// Gradient-boosted trees (XGBoost C API) with Ansor's pack-sum objective.
class XgbCostModel final : public CostModel {
 public:
  explicit XgbCostModel(uint64_t seed, XgbOptions options = {});
  ~XgbCostModel() override;
  XgbCostModel(const XgbCostModel&) = delete;
  XgbCostModel& operator=(const XgbCostModel&) = delete;

  std::string name() const override { return "xgb"; }
  std::string train(const Dataset& data) override;
  std::vector<float> predict(const std::vector<const ProgramFeatures*>& programs) override;
  bool trained() const override { return booster_ != nullptr; }
  void save(const std::string& path) const override;
  /// Loads a saved model; see load_cost_model.
  void load(const std::string& path);

 private:
  XgbOptions options_;
  RandomCostModel fallback_;
  void* booster_ = nullptr;  ///< BoosterHandle
};

}  // namespace tensortune::search
