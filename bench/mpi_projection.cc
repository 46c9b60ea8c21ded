// Projects tuning under mpirun to many hosts (docs/mpi.md#scaling): the
// real tuner (search::tune, the evolutionary search, the XGBoost cost model,
// the task scheduler) drives simulated ranks. Each candidate's build and run
// time is drawn from a real record log, and the messages rank 0 would
// exchange are really encoded and decoded. Build and run times pass on a
// virtual clock: builds are list-scheduled on every host's build workers,
// runs on its runners, as MpiCluster hands them out. Rank 0's own work (its
// search, training, messages) is timed for real.
//
// usage: mpi_projection LOG [--hosts 1,10,100,1000] [--cores 8] [--trials 1000]
//                           [--batch-size 16|auto] [--latency-us 20] [--gbytes-per-s 1]
//
// Prints one JSON object per host count: trials per second, and where the
// time goes (rank 0's search, training, messages; the build and run
// makespans).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <map>
#include <queue>
#include <random>
#include <string>
#include <vector>

#include "tensortune/measure/measurer.h"
#include "tensortune/measure/mpi.h"
#include "tensortune/measure/rank_protocol.h"
#include "tensortune/measure/record.h"
#include "tensortune/object/structural.h"
#include "tensortune/search/cost_model.h"
#include "tensortune/search/evolutionary.h"
#include "tensortune/search/tuner.h"
#include "tensortune/support/strings.h"

namespace tt = tensortune;
using namespace tensortune::measure;
using Clock = std::chrono::steady_clock;

namespace {

double since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

/// The simulated ranks: hosts of `cores` cores, one runner and cores - 1
/// build workers each, and the time their work takes on the virtual clock.
struct VirtualCluster {
  int64_t hosts = 1, cores = 8;
  std::vector<double> build_samples, run_samples;
  std::mt19937_64 rng{7};
  double latency_s = 20e-6, bytes_per_s = 1e9;
  // What passed on the virtual clock, and rank 0's real time in messages.
  double build_s = 0, run_s = 0, wire_s = 0, messages_s = 0;

  double draw(const std::vector<double>& samples) {
    return samples[std::uniform_int_distribution<size_t>(0, samples.size() - 1)(rng)];
  }
  /// The makespan of `jobs` on `workers` identical workers, each job going
  /// to the first that is free (as MpiCluster hands out runs).
  static double makespan(const std::vector<double>& jobs, int64_t workers) {
    std::priority_queue<double, std::vector<double>, std::greater<double>> free_at;
    for (int64_t w = 0; w < std::min<int64_t>(workers, static_cast<int64_t>(jobs.size())); ++w)
      free_at.push(0);
    double end = 0;
    for (double job : jobs) {
      double start = free_at.top();
      free_at.pop();
      free_at.push(start + job);
      end = std::max(end, start + job);
    }
    return end;
  }
  /// Rank 0 sends `request` and decodes `reply`, for real: the time is its own.
  template <class Reply>
  void exchange(const tt::Object& request, const tt::Object& reply, const char* what) {
    auto start = Clock::now();
    std::string sent = encode(request);
    messages_s += since(start);
    std::string answer = encode(reply);  // made by the rank: not rank 0's time
    start = Clock::now();
    (void)decode<Reply>(answer, what);
    messages_s += since(start);
    wire_s += 2 * latency_s + static_cast<double>(sent.size() + answer.size()) / bytes_per_s;
  }
};

Hash64 program_of(const tt::te::Task& task, const tt::schedule::State& state) {
  return Hash64(tt::structural_hash(task) * 31 + tt::structural_hash(state));
}

class VirtualBuilder final : public Builder {
 public:
  explicit VirtualBuilder(VirtualCluster& v) : v_(v) {}
  std::vector<BuildResult> build(const tt::te::Task& task,
                                 const std::vector<tt::schedule::State>& states,
                                 const tt::ir::PassContext& context) override {
    std::vector<BuildResult> results(states.size());
    std::vector<double> times;
    for (size_t i = 0; i < states.size(); ++i) {
      results[i].program_hash = program_of(task, states[i]);
      results[i].build_seconds = v_.draw(v_.build_samples);
      results[i].pass_context_hash = Hash64(context.hash());
      times.push_back(results[i].build_seconds);
    }
    v_.build_s += VirtualCluster::makespan(times, v_.hosts * std::max<int64_t>(1, v_.cores - 1));
    // One share per host that gets work, as MpiCluster splits a batch.
    int64_t workers = v_.hosts * std::max<int64_t>(1, v_.cores - 1);
    size_t per_worker = std::max<size_t>(
        1, std::min<size_t>(8, (states.size() + workers - 1) / static_cast<size_t>(workers)));
    size_t share = per_worker * static_cast<size_t>(std::max<int64_t>(1, v_.cores - 1));
    for (size_t begin = 0; begin < states.size(); begin += share) {
      size_t end = std::min(states.size(), begin + share);
      RankBuild request;
      request.task = task;
      request.states.assign(states.begin() + begin, states.begin() + end);
      request.pass_context = context;
      RankBuildReply reply;
      for (size_t i = begin; i < end; ++i) {
        reply.results.emplace_back(tt::make_node<BuildResult>(results[i]));
      }
      v_.exchange<RankBuildReply>(request, reply, "rank build reply");
    }
    return results;
  }

 private:
  VirtualCluster& v_;
};

class VirtualRunner final : public Runner {
 public:
  explicit VirtualRunner(VirtualCluster& v, int repeat) : v_(v), repeat_(repeat) {}
  std::vector<RunOutcome> run(const tt::te::Task& task, const std::vector<BuildResult>& built,
                              const RunHints& hints) override {
    std::vector<RunOutcome> out(built.size());
    run_each(task, built, hints, [&](size_t i, const RunOutcome& o) { out[i] = o; });
    return out;
  }
  void run_each(const tt::te::Task& task, const std::vector<BuildResult>& built,
                const RunHints& hints,
                const std::function<void(size_t, const RunOutcome&)>& on_outcome) override {
    std::vector<double> times;
    std::vector<RunOutcome> outcomes(built.size());
    for (size_t i = 0; i < built.size(); ++i) {
      RunOutcome& o = outcomes[i];
      o.costs.assign(static_cast<size_t>(repeat_), simulated_cost(built[i].program_hash));
      o.run_seconds = v_.draw(v_.run_samples);
      times.push_back(o.run_seconds);
      RankRun request;
      request.task = task;
      request.built.emplace_back(tt::make_node<BuildResult>(built[i]));
      request.best_s = hints.best_s;
      RankRunReply reply;
      reply.outcomes.emplace_back(tt::make_node<RunOutcome>(o));
      v_.exchange<RankRunReply>(request, reply, "rank run reply");
    }
    v_.run_s += VirtualCluster::makespan(times, v_.hosts);
    for (size_t i = 0; i < built.size(); ++i) on_outcome(i, outcomes[i]);
  }

 private:
  VirtualCluster& v_;
  int repeat_;
};

std::vector<int64_t> parse_list(const std::string& text) {
  std::vector<int64_t> out;
  for (const std::string& part : tt::split(text, ',')) out.push_back(std::stoll(part));
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr,
                 "usage: %s LOG [--hosts 1,10,100,1000] [--cores 8] [--trials 1000] "
                 "[--batch-size 16|auto] [--latency-us 20] [--gbytes-per-s 1]\n",
                 argv[0]);
    return 2;
  }
  std::string log = argv[1];
  std::vector<int64_t> hosts_list = {1, 10, 100, 1000};
  int64_t cores = 8, trials = 1000, batch = 16;
  double latency_us = 20, gbytes = 1;
  for (int i = 2; i + 1 < argc; i += 2) {
    std::string flag = argv[i], value = argv[i + 1];
    if (flag == "--hosts")
      hosts_list = parse_list(value);
    else if (flag == "--cores")
      cores = std::stoll(value);
    else if (flag == "--trials")
      trials = std::stoll(value);
    else if (flag == "--batch-size")
      batch = value == "auto" ? 0 : std::stoll(value);
    else if (flag == "--latency-us")
      latency_us = std::stod(value);
    else if (flag == "--gbytes-per-s")
      gbytes = std::stod(value);
    else {
      std::fprintf(stderr, "unknown flag %s\n", flag.c_str());
      return 2;
    }
  }
  LogContents contents = load_records(log);
  std::vector<tt::te::Task> tasks;
  std::map<std::string, size_t> seen;
  VirtualCluster base;
  for (const Record& r : contents.records) {
    if (!seen.count(task_key(r.input.task))) {
      seen[task_key(r.input.task)] = tasks.size();
      tasks.push_back(r.input.task);
    }
    if (r.result.ok()) {
      base.build_samples.push_back(r.result.build_seconds);
      base.run_samples.push_back(r.result.run_seconds);
    }
  }
  if (base.build_samples.empty()) {
    std::fprintf(stderr, "%s has no successful records to draw times from\n", log.c_str());
    return 1;
  }
  std::fprintf(stderr, "%zu tasks and %zu measured candidates from %s\n", tasks.size(),
               base.build_samples.size(), log.c_str());
  for (int64_t hosts : hosts_list) {
    VirtualCluster v = base;
    v.hosts = hosts;
    v.cores = cores;
    v.latency_s = latency_us * 1e-6;
    v.bytes_per_s = gbytes * 1e9;
    VirtualBuilder builder(v);
    VirtualRunner runner(v, 3);
    auto model =
        std::make_shared<tt::search::SharedCostModel>(tt::search::make_cost_model("xgb", 1));
    tt::search::TuneOptions options;
    options.trials = trials;
    // "auto": as tune under mpirun chooses (measure::cluster_batch_size).
    const int64_t round =
        batch > 0 ? batch
                  : cluster_batch_size(options.batch_size, hosts * std::max<int64_t>(1, cores - 1));
    options.batch_size = static_cast<int>(round);
    options.seed = 1;
    auto start = Clock::now();
    tt::search::TuneReport report =
        tt::search::tune(tasks, tt::search::evolutionary_policy(model), builder, runner, options);
    double wall = since(start);
    // Rank 0's time is its own work (wall, less what simulating took
    // besides the messages) plus waiting on the ranks' makespans.
    double simulated = report.time.build_s + report.time.run_s - v.messages_s;
    double rank0 = wall - simulated + v.wire_s;
    double total = rank0 + v.build_s + v.run_s;
    std::printf(
        "{\"hosts\": %lld, \"cores\": %lld, \"batch_size\": %lld, \"trials\": %lld, "
        "\"seconds\": %.2f, \"trials_per_s\": %.2f, \"rank0_s\": %.2f, \"search_s\": %.2f, "
        "\"training_s\": %.2f, \"messages_s\": %.2f, \"wire_s\": %.2f, \"build_makespan_s\": "
        "%.2f, \"run_makespan_s\": %.2f, \"rank0_share\": %.3f}\n",
        static_cast<long long>(hosts), static_cast<long long>(cores), static_cast<long long>(round),
        static_cast<long long>(report.trials), total, static_cast<double>(report.trials) / total,
        rank0, report.time.search_s, report.time.training_s, v.messages_s, v.wire_s, v.build_s,
        v.run_s, rank0 / total);
    std::fflush(stdout);
  }
  return 0;
}
