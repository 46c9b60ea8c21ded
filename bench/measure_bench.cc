// What the measurement layer costs and how well it times, through real
// tensortune-worker processes:
//
//  - RunOverhead: LocalRunner::run of a prebuilt matmul 8x8x8 (number=1,
//    repeat=1) on a warm worker, minus the kernel's own time (its warm-up
//    call and its timed call), as the median over the iterations. This is
//    the price of a measurement a tuner pays on top of the kernel: request
//    serialisation, the pipe round trip, the worker reading the task and
//    making inputs. Target: under 5 ms.
//  - Build/cpr: candidates per second of LocalBuilder (2 build workers) for
//    16 distinct random states of matmul 32x32x32 per iteration (the same
//    three sets of 16 for every case), with
//    1, 2, 4 or 8 candidates compiled together per request, into a fresh
//    module cache each iteration so nothing comes from the cache. The peer,
//    BuildDirect, compiles one module per candidate in this process on two
//    threads (one compiler process per candidate, no workers).
//  - TimingCv/min_repeat_ms/flush: coefficient of variation, in percent, of
//    the 30 costs of one run request (repeat=30) of a naive matmul 128^3,
//    with min_repeat_ms 0 or 20 and flush_cache off or on; the median over
//    the iterations.
//
// Run it alone on the machine (nothing compiling next to it), in Release:
//   build-rel/bench/measure_bench
#include <benchmark/benchmark.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <map>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "tensortune/codegen/backend.h"
#include "tensortune/codegen/c_codegen.h"
#include "tensortune/codegen/module.h"
#include "tensortune/lower/lower.h"
#include "tensortune/measure/measurer.h"
#include "tensortune/schedule/compute_dag.h"
#include "tensortune/schedule/random_schedule.h"
#include "tensortune/te/workload.h"

namespace tt = tensortune;
namespace fs = std::filesystem;

namespace {

using Clock = std::chrono::steady_clock;

constexpr int kCandidatesPerIteration = 16;

/// A directory of this run, removed at exit.
const std::string& scratch_dir() {
  static const std::string dir = [] {
    std::string d =
        (fs::temp_directory_path() / ("tt-measure-bench-" + std::to_string(::getpid()))).string();
    fs::remove_all(d);
    fs::create_directories(d);
    std::atexit([] { fs::remove_all(scratch_dir()); });
    return d;
  }();
  return dir;
}

/// A cache directory never used before in this run.
std::string fresh_cache_dir() {
  static int counter = 0;
  return scratch_dir() + "/cache-" + std::to_string(counter++);
}

tt::te::Task matmul(const std::string& shape) {
  return tt::te::Task::make(tt::te::make_named_workload_from_text("matmul", shape),
                            tt::ir::Target::parse("c"));
}

tt::measure::WorkerPoolOptions pool_options() {
  tt::measure::WorkerPoolOptions o;
  o.worker_path = TT_WORKER_PATH;
  return o;
}

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

/// Builds `state` of `task` in a worker; aborts the benchmark when it fails.
tt::measure::BuildResult build_one(const tt::te::Task& task, const tt::schedule::State& state,
                                   benchmark::State& bench) {
  tt::measure::LocalBuilderOptions o;
  o.parallelism = 1;
  o.cache_dir = fresh_cache_dir();
  o.pool = pool_options();
  tt::measure::LocalBuilder builder(o);
  tt::measure::BuildResult built = builder.build(task, {state}, tt::ir::PassContext::make())[0];
  if (!built.library.empty() && built.error_code == tt::measure::ErrorCode::kNoError) return built;
  bench.SkipWithError(("build failed: " + built.error_message).c_str());
  return built;
}

// ---- a) overhead of one measurement on a warm worker ----

void BM_RunOverhead(benchmark::State& state) {
  tt::te::Task task = matmul("8,8,8");
  tt::measure::BuildResult built = build_one(task, tt::schedule::State::make(), state);
  if (state.error_occurred()) return;
  tt::measure::LocalRunnerOptions o;
  o.timing.number = 1;
  o.timing.repeat = 1;
  o.pool = pool_options();
  o.pool.max_requests_per_worker = 0;  // keep one warm worker throughout
  tt::measure::LocalRunner runner(o);
  for (int i = 0; i < 5; ++i) runner.run(task, {built}, {});  // start the worker, load the library

  std::vector<double> overhead, round_trip, in_worker;
  for (auto _ : state) {
    auto start = Clock::now();
    tt::measure::RunOutcome out = runner.run(task, {built}, {})[0];
    double wall = std::chrono::duration<double>(Clock::now() - start).count();
    if (out.costs.empty()) {
      state.SkipWithError(("run failed: " + out.error_message).c_str());
      return;
    }
    // The kernel runs twice per request: the warm-up call and the timed one.
    double kernel = 2 * out.costs[0];
    overhead.push_back(wall - kernel);
    round_trip.push_back(wall);
    in_worker.push_back(out.run_seconds - kernel);
  }
  state.counters["overhead_ms"] = median(overhead) * 1e3;
  state.counters["round_trip_ms"] = median(round_trip) * 1e3;
  state.counters["in_worker_ms"] = median(in_worker) * 1e3;
}

// ---- b) build throughput ----

constexpr int kStateSets = 3;

/// kStateSets sets of kCandidatesPerIteration distinct random states of
/// matmul 32^3, each with code of its own (the generated C differs), so that
/// no two share a library. Every build case builds the same sets, one per
/// iteration, each into a fresh cache: compile times differ a lot between
/// states, and cases given different states would not be comparable.
const std::vector<std::vector<tt::schedule::State>>& state_sets() {
  static const std::vector<std::vector<tt::schedule::State>> sets = [] {
    tt::te::Task task = matmul("32,32,32");
    tt::schedule::ComputeDAG dag(tt::te::workload_tensors(task->workload));
    std::mt19937_64 rng(12345);
    auto code = [&](const tt::schedule::State& s) {
      return tt::codegen::generate_c({tt::lower::lower(tt::schedule::replay(dag, s), "k")},
                                     task->target);
    };
    // The naive state is what BM_Build warms its workers up with: never one of these.
    std::set<std::string> seen = {code(tt::schedule::State::make())};
    std::vector<std::vector<tt::schedule::State>> out(kStateSets);
    for (auto& set : out) {
      while (set.size() < kCandidatesPerIteration) {
        tt::schedule::State s = tt::schedule::random_state(dag, rng);
        try {
          if (seen.insert(code(s)).second) set.push_back(s);
        } catch (const tt::UserError&) {
          // Not a buildable candidate: not one to time the compiler on.
        }
      }
    }
    return out;
  }();
  return sets;
}

void BM_Build(benchmark::State& state) {
  tt::te::Task task = matmul("32,32,32");
  state_sets();  // made before any timing
  size_t iteration = 0;
  for (auto _ : state) {
    state.PauseTiming();
    tt::measure::LocalBuilderOptions o;
    o.parallelism = 2;
    o.candidates_per_request = static_cast<int>(state.range(0));
    o.cache_dir = fresh_cache_dir();
    o.pool = pool_options();
    tt::measure::LocalBuilder builder(o);
    // Start both workers outside the timing: a tuner keeps its pool for the
    // whole search. The naive state is none of the timed ones (state_sets).
    builder.build(task, {tt::schedule::State::make(), tt::schedule::State::make()},
                  tt::ir::PassContext::make());
    const auto& states = state_sets()[iteration++ % kStateSets];
    state.ResumeTiming();
    std::vector<tt::measure::BuildResult> built =
        builder.build(task, states, tt::ir::PassContext::make());
    for (const auto& b : built) {
      if (b.error_code != tt::measure::ErrorCode::kNoError) {
        state.SkipWithError(("build failed: " + b.error_message).c_str());
        return;
      }
    }
  }
  state.counters["candidates/s"] =
      benchmark::Counter(kCandidatesPerIteration, benchmark::Counter::kIsIterationInvariantRate);
}

void BM_BuildDirect(benchmark::State& state) {
  tt::te::Task task = matmul("32,32,32");
  tt::schedule::ComputeDAG dag(tt::te::workload_tensors(task->workload));
  state_sets();
  size_t iteration = 0;
  for (auto _ : state) {
    state.PauseTiming();
    const auto& states = state_sets()[iteration++ % kStateSets];
    tt::codegen::ModuleOptions o;
    o.cache_dir = fresh_cache_dir();
    state.ResumeTiming();
    std::vector<std::thread> threads;
    for (int t = 0; t < 2; ++t) {
      threads.emplace_back([&, t] {
        for (size_t i = static_cast<size_t>(t); i < states.size(); i += 2) {
          auto f = tt::lower::lower(tt::schedule::replay(dag, states[i]), "candidate_0");
          tt::codegen::build_module({f}, task->target, o);
        }
      });
    }
    for (auto& th : threads) th.join();
  }
  state.counters["candidates/s"] =
      benchmark::Counter(kCandidatesPerIteration, benchmark::Counter::kIsIterationInvariantRate);
}

// ---- c) timing precision ----

void BM_TimingCv(benchmark::State& state) {
  tt::te::Task task = matmul("128,128,128");
  tt::measure::BuildResult built = build_one(task, tt::schedule::State::make(), state);
  if (state.error_occurred()) return;
  tt::measure::LocalRunnerOptions o;
  o.timing.repeat = 30;
  o.timing.min_repeat_ms = static_cast<int>(state.range(0));
  o.timing.flush_cache = state.range(1) != 0;
  o.timeout = std::chrono::seconds(60);
  o.pool = pool_options();
  tt::measure::LocalRunner runner(o);
  runner.run(task, {built}, {});  // start the worker, load the library
  std::vector<double> cvs, means;
  for (auto _ : state) {
    tt::measure::RunOutcome out = runner.run(task, {built}, {})[0];
    if (out.costs.size() < 2) {
      state.SkipWithError(("run failed: " + out.error_message).c_str());
      return;
    }
    double mean = 0, var = 0;
    for (double c : out.costs) mean += c;
    mean /= static_cast<double>(out.costs.size());
    for (double c : out.costs) var += (c - mean) * (c - mean);
    var /= static_cast<double>(out.costs.size() - 1);
    cvs.push_back(100 * std::sqrt(var) / mean);
    means.push_back(mean);
  }
  state.counters["CV%"] = median(cvs);
  state.counters["kernel_ms"] = median(means) * 1e3;
}

/// Keeps the counters of every case for the summary at the end.
class SummaryReporter : public benchmark::ConsoleReporter {
 public:
  void ReportRuns(const std::vector<Run>& runs) override {
    ConsoleReporter::ReportRuns(runs);
    for (const auto& run : runs) {
      if (run.run_type == Run::RT_Aggregate && run.aggregate_name != "median") continue;
      for (const auto& [name, counter] : run.counters) {
        values_[run.benchmark_name()][name] = counter.value;
      }
    }
  }

  void print_summary() const {
    std::printf("\nmeasure layer summary:\n");
    if (const auto* v = find("BM_RunOverhead")) {
      std::printf(
          "  run overhead per measurement, warm worker: %.3f ms (target < 5 ms; round trip "
          "%.3f ms, of which in the worker %.3f ms)\n",
          get(*v, "overhead_ms"), get(*v, "round_trip_ms"), get(*v, "in_worker_ms"));
    }
    std::printf("  build throughput, 2 workers, candidates/s:");
    for (int cpr : {1, 2, 4, 8}) {
      if (const auto* v = find("BM_Build/" + std::to_string(cpr) + "/")) {
        std::printf("  per request %d: %.1f", cpr, get(*v, "candidates/s"));
      }
    }
    if (const auto* v = find("BM_BuildDirect")) {
      std::printf("  | direct, one compiler per candidate: %.1f", get(*v, "candidates/s"));
    }
    std::printf("\n  timing CV%% of 30 repeats (matmul 128^3, naive):\n");
    for (int ms : {0, 20}) {
      for (int flush : {0, 1}) {
        std::string key = "BM_TimingCv/min_repeat_ms:" + std::to_string(ms) +
                          "/flush:" + std::to_string(flush) + "/";
        if (const auto* v = find(key)) {
          std::printf("    min_repeat_ms %2d, flush_cache %-3s: CV %6.2f%%  (kernel %.3f ms)\n", ms,
                      flush ? "on" : "off", get(*v, "CV%"), get(*v, "kernel_ms"));
        }
      }
    }
  }

 private:
  using Counters = std::map<std::string, double>;
  const Counters* find(const std::string& prefix) const {
    for (const auto& [name, counters] : values_) {
      if ((name + "/").rfind(prefix, 0) == 0) return &counters;
    }
    return nullptr;
  }
  static double get(const Counters& c, const std::string& key) {
    auto it = c.find(key);
    return it == c.end() ? NAN : it->second;
  }
  std::map<std::string, Counters> values_;
};

}  // namespace

BENCHMARK(BM_RunOverhead)->Iterations(300)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_Build)
    ->Arg(1)
    ->Arg(2)
    ->Arg(4)
    ->Arg(8)
    ->Iterations(kStateSets)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();
BENCHMARK(BM_BuildDirect)->Iterations(kStateSets)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_TimingCv)
    ->ArgsProduct({{0, 20}, {0, 1}})
    ->ArgNames({"min_repeat_ms", "flush"})
    ->Iterations(5)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  SummaryReporter reporter;
  benchmark::RunSpecifiedBenchmarks(&reporter);
  reporter.print_summary();
  benchmark::Shutdown();
  return 0;
}
