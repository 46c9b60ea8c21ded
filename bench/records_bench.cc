// How fast a record log reads and writes: a log of 10,000 records of
// random matmul 256^3 schedules (a few successes, a few failures, as a
// tuning run leaves them), written with RecordWriter into a scratch file,
// then read back whole with load_records.
//
//  - LoadRecords: load_records of the whole log (parse, rebuild tasks and
//    states); the time per log and records per second.
//  - WriteRecords: RecordWriter::write of every record (serialise, append,
//    flush) into a fresh file.
//
// Run it alone on the machine, in Release:
//   build-release/bench/records_bench
#include <benchmark/benchmark.h>
#include <unistd.h>

#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include "tensortune/measure/record.h"
#include "tensortune/schedule/compute_dag.h"
#include "tensortune/schedule/random_schedule.h"
#include "tensortune/te/workload.h"

namespace tt = tensortune;
namespace fs = std::filesystem;

namespace {

constexpr int kRecords = 10000;

std::string scratch_path(const std::string& name) {
  return (fs::temp_directory_path() /
          ("tt-records-bench-" + std::to_string(::getpid()) + "-" + name))
      .string();
}

/// kRecords records: random states of one task, one in eight a failure.
const std::vector<tt::measure::Record>& sample_records() {
  static const std::vector<tt::measure::Record> records = [] {
    auto task = tt::te::Task::make(tt::te::make_named_workload_from_text("matmul", "256,256,256"),
                                   tt::ir::Target::parse("c -num-cores=2"));
    tt::schedule::ComputeDAG dag(tt::te::workload_tensors(task->workload));
    std::mt19937_64 rng(1);
    std::vector<tt::measure::Record> out;
    for (int i = 0; i < kRecords; ++i) {
      tt::measure::Record r;
      r.input = {task, tt::schedule::random_state(dag, rng)};
      if (i % 8 == 7) {
        r.result.error_code = tt::measure::ErrorCode::kCompileError;
        r.result.error_message = "candidate.c:12: error: something the compiler said";
      } else {
        r.result.costs = {1e-3 + i * 1e-7, 1.1e-3, 0.9e-3};
        r.result.max_error = 1e-6;
      }
      r.result.build_seconds = 0.2;
      r.result.run_seconds = 0.01;
      r.result.timestamp = 1.8e9 + i;
      out.push_back(r);
    }
    return out;
  }();
  return records;
}

const std::string& log_path() {
  static const std::string path = [] {
    std::string p = scratch_path("load.log");
    fs::remove(p);
    tt::measure::RecordWriter writer(p);
    for (const auto& r : sample_records()) writer.write(r);
    return p;
  }();
  return path;
}

void LoadRecords(benchmark::State& state) {
  const std::string& path = log_path();
  size_t loaded = 0;
  for (auto _ : state) {
    auto contents = tt::measure::load_records(path);
    loaded = contents.records.size();
    benchmark::DoNotOptimize(contents);
  }
  if (loaded != kRecords) state.SkipWithError("the log did not read back whole");
  state.counters["records/s"] = benchmark::Counter(static_cast<double>(kRecords),
                                                   benchmark::Counter::kIsIterationInvariantRate);
  state.counters["MB"] = static_cast<double>(fs::file_size(path)) / 1e6;
}
BENCHMARK(LoadRecords)->Unit(benchmark::kMillisecond)->MinTime(2);

void WriteRecords(benchmark::State& state) {
  const auto& records = sample_records();
  std::string path = scratch_path("write.log");
  for (auto _ : state) {
    state.PauseTiming();
    fs::remove(path);
    state.ResumeTiming();
    tt::measure::RecordWriter writer(path);
    for (const auto& r : records) writer.write(r);
  }
  fs::remove(path);
  state.counters["records/s"] = benchmark::Counter(static_cast<double>(kRecords),
                                                   benchmark::Counter::kIsIterationInvariantRate);
}
BENCHMARK(WriteRecords)->Unit(benchmark::kMillisecond)->MinTime(2);

}  // namespace

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  fs::remove(log_path());
  return 0;
}
