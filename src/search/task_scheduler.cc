#include "tensortune/search/task_scheduler.h"

namespace tensortune::search {

std::optional<double> TaskSummary::best_latency() const {
  if (!best) return std::nullopt;
  return best->result.mean_cost();
}

std::optional<double> TaskSummary::best_gflops() const {
  auto latency = best_latency();
  if (!latency || flops <= 0 || *latency <= 0) return std::nullopt;
  return flops / *latency / 1e9;
}

std::optional<size_t> RoundRobinScheduler::next(const std::vector<TaskSummary>& tasks) {
  for (size_t tried = 0; tried < tasks.size(); ++tried) {
    size_t t = next_++ % tasks.size();
    if (!tasks[t].exhausted) return t;
  }
  return std::nullopt;
}

}  // namespace tensortune::search
