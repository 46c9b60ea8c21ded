#include "tensortune/search/task_scheduler.h"

#include <cmath>

#include "tensortune/schedule/compute_dag.h"
#include "tensortune/support/strings.h"
#include "tensortune/te/workload.h"

namespace tensortune::search {

std::optional<double> TaskSummary::best_latency() const {
  if (!best) return std::nullopt;
  return best->result.median_cost();
}

std::optional<double> TaskSummary::best_gflops() const {
  auto latency = best_latency();
  if (!latency || flops <= 0 || *latency <= 0) return std::nullopt;
  return flops / *latency / 1e9;
}

std::optional<size_t> RoundRobinScheduler::next(const std::vector<TaskSummary>& tasks) {
  for (size_t tried = 0; tried < tasks.size(); ++tried) {
    size_t t = next_++ % tasks.size();
    if (!tasks[t].done()) return t;
  }
  return std::nullopt;
}

std::string operator_class(const te::Task& task) {
  if (auto named = task->workload.as<te::NamedWorkloadNode>()) return named->name;
  schedule::ComputeDAG dag(te::workload_tensors(task->workload));
  std::vector<std::string> tiled;
  auto tag = [&](int s) {
    auto op = dag.stages()[static_cast<size_t>(s)].compute_op();
    return op->tag.empty() ? op->name : op->tag;
  };
  for (int s = 0; s < dag.num_stages(); ++s) {
    if (dag.analysis(s).needs_multi_level_tiling) tiled.push_back(tag(s));
  }
  return tiled.empty() ? tag(dag.num_stages() - 1) : join(tiled, "+");
}

std::optional<size_t> GradientScheduler::next(const std::vector<TaskSummary>& tasks) {
  history_.resize(tasks.size());
  classes_.resize(tasks.size());
  auto operator_of = [&](size_t t) -> const std::string& {
    if (classes_[t].empty()) classes_[t] = operator_class(tasks[t].task);
    return classes_[t];
  };
  // Record where each task stands after its rounds so far.
  for (size_t t = 0; t < tasks.size(); ++t) {
    auto latency = tasks[t].best_latency();
    int64_t trials = tasks[t].trials + tasks[t].resumed;
    if (latency && (history_[t].empty() || history_[t].back().first != trials)) {
      history_[t].emplace_back(trials, *latency);
    }
  }
  // Warm-up: every task never measured gets a round before any gets a
  // second one. A task the log has measured starts with its latency known:
  // warming it up again would spend a round of each resumed run on every
  // task, however little it weighs (a model's pooling and 1x1 convolutions).
  for (size_t t = 0; t < tasks.size(); ++t) {
    if (!tasks[t].done() && tasks[t].rounds == 0 && tasks[t].resumed == 0) return t;
  }
  // The best throughput of each operator, for the forward estimate.
  std::map<std::string, double> best_flops;
  for (size_t t = 0; t < tasks.size(); ++t) {
    const TaskSummary& s = tasks[t];
    if (auto latency = s.best_latency(); latency && *latency > 0 && s.flops > 0) {
      double& b = best_flops[operator_of(t)];
      b = std::max(b, s.flops / *latency);
    }
  }
  std::optional<size_t> choice;
  double best_gradient = 0;
  for (size_t t = 0; t < tasks.size(); ++t) {
    const TaskSummary& s = tasks[t];
    if (s.done()) continue;
    auto latency = s.best_latency();
    if (!latency) {
      // Nothing succeeded yet: no gain to estimate; chosen only when no
      // other task is expected to gain.
      if (!choice || best_gradient > 0) {
        choice = t;
        best_gradient = 0;
      }
      continue;
    }
    const auto& h = history_[t];
    double backward = 0;
    if (h.size() > static_cast<size_t>(window_)) {
      const auto& then = h[h.size() - 1 - static_cast<size_t>(window_)];
      int64_t d = h.back().first - then.first;
      if (d > 0) backward = (h.back().second - then.second) / static_cast<double>(d);
    }
    double g = *latency;
    double next = g - g / static_cast<double>(std::max<int64_t>(s.rounds, 1));
    auto similar = best_flops.find(operator_of(t));
    if (similar != best_flops.end() && similar->second > 0 && s.flops > 0) {
      next = std::min(next, beta_ * s.flops / similar->second);
    }
    double forward = next - g;
    double gradient = s.weight * (alpha_ * backward + (1 - alpha_) * forward);
    if (!choice || gradient < best_gradient) {
      choice = t;
      best_gradient = gradient;
    }
  }
  return choice;
}

std::unique_ptr<TaskScheduler> make_task_scheduler(std::string_view name) {
  if (name == "gradient") return std::make_unique<GradientScheduler>();
  if (name == "round-robin") return std::make_unique<RoundRobinScheduler>();
  fail(ErrorKind::kInvalidArgument, "unknown task scheduler '", name,
       "'; the schedulers are: gradient, round-robin");
}

}  // namespace tensortune::search
