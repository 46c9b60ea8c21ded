/// \file
/// What a tuner asks of a search strategy: propose states of a task to
/// measure, and learn from what measuring them gave. The random policy here
/// is the baseline the sketch-based evolutionary search replaces.
#pragma once

#include <cstdint>
#include <memory>
#include <random>
#include <unordered_set>
#include <vector>

#include "tensortune/measure/measure_result.h"
#include "tensortune/schedule/compute_dag.h"
#include "tensortune/schedule/state.h"
#include "tensortune/te/task.h"

namespace tensortune::search {

/// A search strategy for one task.
class SearchPolicy {
 public:
  virtual ~SearchPolicy() = default;
  /// Up to `count` states not measured before (fewer when the policy finds
  /// no more new ones: the space is exhausted or too small).
  virtual std::vector<schedule::State> propose(size_t count) = 0;
  /// What measuring `states` gave, including states measured in earlier runs
  /// (read from a log), so they are never proposed again.
  virtual void update(const std::vector<schedule::State>& states,
                      const std::vector<measure::MeasureResult>& results) = 0;
};

/// Makes the policy for a task; the seed makes a run reproducible.
using PolicyFactory = std::function<std::unique_ptr<SearchPolicy>(const te::Task&, uint64_t seed)>;

/// Uniformly random valid states (schedule::random_state), never the same
/// state twice (by structural hash).
class RandomSearchPolicy final : public SearchPolicy {
 public:
  RandomSearchPolicy(const te::Task& task, uint64_t seed);
  std::vector<schedule::State> propose(size_t count) override;
  void update(const std::vector<schedule::State>& states,
              const std::vector<measure::MeasureResult>& results) override;

 private:
  schedule::ComputeDAG dag_;
  std::mt19937_64 rng_;
  std::unordered_set<uint64_t> seen_;  ///< structural hashes of measured or proposed states
};

}  // namespace tensortune::search
