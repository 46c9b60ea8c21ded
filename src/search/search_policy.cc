#include "tensortune/search/search_policy.h"

#include "tensortune/object/structural.h"
#include "tensortune/schedule/random_schedule.h"
#include "tensortune/te/workload.h"

namespace tensortune::search {

RandomSearchPolicy::RandomSearchPolicy(const te::Task& task, uint64_t seed)
    : dag_(te::workload_tensors(task->workload)), rng_(seed) {}

std::vector<schedule::State> RandomSearchPolicy::propose(size_t count) {
  std::vector<schedule::State> out;
  // Small tasks have few distinct states; give up on a batch after many
  // repeats in a row rather than loop for ever.
  constexpr int kMaxRepeatsInARow = 200;
  int repeats = 0;
  while (out.size() < count && repeats < kMaxRepeatsInARow) {
    schedule::State state = schedule::random_state(dag_, rng_);
    if (seen_.insert(structural_hash(state)).second) {
      out.push_back(std::move(state));
      repeats = 0;
    } else {
      ++repeats;
    }
  }
  return out;
}

void RandomSearchPolicy::update(const std::vector<schedule::State>& states,
                                const std::vector<measure::MeasureResult>&) {
  for (const auto& s : states) seen_.insert(structural_hash(s));
}

}  // namespace tensortune::search
