// `tensortune records`, run as a real child process on logs written here:
// what show, best, merge and distill print and write, and how the exit
// status treats a corrupt line (a warning) and a newer-version line (an error).
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>

#include "tensortune/measure/record.h"
#include "tensortune/object/serialize.h"
#include "tensortune/object/structural.h"
#include "tensortune/schedule/random_schedule.h"
#include "tensortune/support/strings.h"
#include "tensortune/support/subprocess.h"

namespace tensortune {
namespace {

namespace fs = std::filesystem;
using measure::ErrorCode;
using measure::Record;

RunResult cli(std::vector<std::string> args) {
  args.insert(args.begin(), TT_CLI_PATH);
  return run_captured(args, {}, std::chrono::seconds(120));
}

te::Task matmul_task(std::string_view target) {
  return te::Task::make(te::make_named_workload_from_text("matmul", "8,8,8"),
                        ir::Target::parse(target));
}

/// A schedule of `task` of its own for each `seconds` (a random one).
schedule::State state_for(const te::Task& task, double seconds) {
  std::mt19937_64 rng(static_cast<uint64_t>(seconds * 1e6));
  return schedule::random_state(schedule::ComputeDAG(te::workload_tensors(task->workload)), rng);
}

Record record(const te::Task& task, double seconds, ErrorCode code = ErrorCode::kNoError,
              std::string message = "") {
  Record r{{task, state_for(task, seconds)}, {}};
  r.result.error_code = code;
  r.result.error_message = std::move(message);
  if (code == ErrorCode::kNoError) r.result.costs = {seconds};
  r.result.timestamp = 1700000000 + seconds * 1e6;  // distinct records for distinct costs
  return r;
}

class RecordsCli : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string tmpl = (fs::temp_directory_path() / "tt_records_cli_XXXXXX").string();
    ASSERT_NE(mkdtemp(tmpl.data()), nullptr);
    dir_ = tmpl;
    // Two tasks: matmul on c (three successes, one failure) and on
    // "c -num-cores=2" (failures only).
    te::Task c = matmul_task("c"), c2 = matmul_task("c -num-cores=2");
    records_ = {record(c, 2e-3),
                record(c2, 0, ErrorCode::kCompileError, "cc: error: bad\nsecond line of it"),
                record(c, 1e-3),
                record(c, 0, ErrorCode::kRunTimeout, "ran for 10 s"),
                record(c2, 0, ErrorCode::kCompileError, "cc: error: worse"),
                record(c2, 0, ErrorCode::kRuntimeError, "segfault"),
                record(c, 4e-3)};
    records_[2].result.host = "node-9";  // measured by rank 3 of an MPI job
    records_[2].result.rank = 3;
    std::string text;
    for (const Record& r : records_) text += measure::record_to_line(r) + "\n";
    write(log(), text);
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::string path(const std::string& name) const { return (dir_ / name).string(); }
  std::string log() const { return path("log.jsonl"); }
  static void write(const std::string& p, const std::string& text) {
    std::ofstream(p, std::ios::binary) << text;
  }
  static std::string read(const std::string& p) {
    std::ifstream in(p, std::ios::binary);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
  }

  fs::path dir_;
  std::vector<Record> records_;
};

TEST_F(RecordsCli, ShowListsEveryRecord) {
  RunResult r = cli({"records", "show", log()});
  ASSERT_TRUE(r.status.success()) << r.err;
  std::vector<std::string> lines = split(r.out, '\n');
  ASSERT_GE(lines.size(), 7u) << r.out;
  // matmul 8x8x8 is 2*8*8*8 = 1024 flops: 1 ms is 0.001024 GFLOP/s.
  EXPECT_EQ(lines[0], "matmul(8,8,8,float32)  c  NO_ERROR  2 ms  0.000512 GFLOP/s");
  EXPECT_EQ(lines[1], "matmul(8,8,8,float32)  c -num-cores=2  COMPILE_ERROR  cc: error: bad");
  EXPECT_EQ(lines[2],
            "matmul(8,8,8,float32)  c  NO_ERROR  1 ms  0.001024 GFLOP/s  on node-9 rank 3");
  EXPECT_EQ(lines[3], "matmul(8,8,8,float32)  c  RUN_TIMEOUT  ran for 10 s");
  EXPECT_EQ(r.err, "");

  RunResult j = cli({"records", "show", log(), "--json"});
  ASSERT_TRUE(j.status.success()) << j.err;
  nlohmann::json doc = parse_json_text(j.out);
  ASSERT_TRUE(doc.is_array());
  ASSERT_EQ(doc.size(), records_.size());
  EXPECT_EQ(doc[1]["result"]["error_code"], "COMPILE_ERROR");
  EXPECT_EQ(doc[0]["workload_key"], records_[0].input.task.workload_key());
  EXPECT_EQ(doc[0]["target"], records_[0].input.task->target.str());
  EXPECT_EQ(doc[0]["result"]["costs"].size(), records_[0].result.costs.size());
  EXPECT_EQ(doc[0]["result"]["pass_context_hash"], "0000000000000000");
  EXPECT_TRUE(
      structural_equal(load_json(doc[0]["state"]), ObjectPtr(records_[0].input.state.ptr())));
}

TEST_F(RecordsCli, BestReportsLatencyOrWhyEveryTrialFailed) {
  RunResult r = cli({"records", "best", log()});
  ASSERT_TRUE(r.status.success()) << r.err;
  EXPECT_EQ(
      r.out,
      "matmul(8,8,8,float32)  c  1 ms  0.001024 GFLOP/s  4 trials (1 failed: RUN_TIMEOUT x1)\n"
      "matmul(8,8,8,float32)  c -num-cores=2  FAILED  all 3 trials failed "
      "(COMPILE_ERROR x2, RUNTIME_ERROR x1)\n"
      "    cc: error: bad\n"
      "    second line of it\n");

  RunResult j = cli({"records", "best", log(), "--json"});
  ASSERT_TRUE(j.status.success()) << j.err;
  nlohmann::json doc = parse_json_text(j.out);
  ASSERT_EQ(doc.size(), 2u);
  EXPECT_EQ(doc[0]["status"], "ok");
  EXPECT_EQ(doc[0]["trials"], 4);
  EXPECT_DOUBLE_EQ(doc[0]["latency_ms"].get<double>(), 1.0);
  EXPECT_DOUBLE_EQ(doc[0]["gflops"].get<double>(), 0.001024);
  EXPECT_EQ(doc[0]["errors"], (nlohmann::json{{"RUN_TIMEOUT", 1}}));
  EXPECT_EQ(doc[1]["status"], "failed");
  EXPECT_TRUE(doc[1]["gflops"].is_null());
  EXPECT_TRUE(doc[1]["latency_ms"].is_null());
  EXPECT_EQ(doc[1]["errors"], (nlohmann::json{{"COMPILE_ERROR", 2}, {"RUNTIME_ERROR", 1}}));
  EXPECT_EQ(doc[1]["message"], "cc: error: bad\nsecond line of it");
}

TEST_F(RecordsCli, BestAndDistillPickTheScheduleCompilePicks) {
  // The run's finalist, measured twice at 2 ms, against a schedule timed
  // once at 1 ms in a fast moment: compile takes the finalist, and so do
  // best and distill.
  te::Task c = matmul_task("c");
  Record again = record(c, 2e-3);
  again.result.timestamp += 1;
  std::string text = measure::record_to_line(record(c, 2e-3)) + "\n" +
                     measure::record_to_line(record(c, 1e-3)) + "\n" +
                     measure::record_to_line(again) + "\n";
  write(path("finalists.jsonl"), text);
  RunResult b = cli({"records", "best", path("finalists.jsonl")});
  ASSERT_TRUE(b.status.success()) << b.err;
  EXPECT_NE(b.out.find("  2 ms  "), std::string::npos) << b.out;
  RunResult d = cli({"records", "distill", path("finalists.jsonl"), "-o", path("one.jsonl")});
  ASSERT_TRUE(d.status.success()) << d.err;
  EXPECT_EQ(read(path("one.jsonl")), measure::record_to_line(record(c, 2e-3)) + "\n" +
                                         measure::record_to_line(again) + "\n");
}

TEST_F(RecordsCli, DistillAndMergeWriteLogs) {
  RunResult d = cli({"records", "distill", log(), "-k", "2", "-o", path("best.jsonl")});
  ASSERT_TRUE(d.status.success()) << d.err;
  EXPECT_EQ(read(path("best.jsonl")), measure::record_to_line(records_[2]) + "\n" +
                                          measure::record_to_line(records_[0]) + "\n");

  // The distilled records are already in the log: merging adds nothing but
  // the log's own records, in order.
  RunResult m = cli({"records", "merge", log(), path("best.jsonl"), "-o", path("merged.jsonl")});
  ASSERT_TRUE(m.status.success()) << m.err;
  EXPECT_EQ(read(path("merged.jsonl")), read(log()));
  EXPECT_NE(m.err.find("wrote 7 records"), std::string::npos) << m.err;
  EXPECT_NE(m.err.find("2 duplicates dropped"), std::string::npos) << m.err;
}

TEST_F(RecordsCli, ACorruptLineIsAWarningAndANewerVersionAnError) {
  std::string good = read(log());
  write(path("corrupt.jsonl"), "{\"version\": 1, \"task\"\n" + good);
  RunResult r = cli({"records", "show", path("corrupt.jsonl")});
  EXPECT_TRUE(r.status.success()) << r.err;
  EXPECT_NE(r.err.find("warning: " + path("corrupt.jsonl") + ":1: skipped: not valid JSON"),
            std::string::npos)
      << r.err;
  EXPECT_EQ(split(r.out, '\n').size(), records_.size() + 1) << r.out;  // + the final empty piece

  std::string line = measure::record_to_line(records_[0]);
  const std::string current = "\"measure.Record\",\"version\":3";
  line.replace(line.find(current), current.size(), "\"measure.Record\",\"version\":4");
  write(path("newer.jsonl"), good + line + "\n");
  for (const char* sub : {"show", "best"}) {
    RunResult n = cli({"records", sub, path("newer.jsonl")});
    EXPECT_FALSE(n.status.success()) << sub;
    EXPECT_NE(n.err.find(path("newer.jsonl") +
                         ":8: written by format version 4, this build reads up to 3"),
              std::string::npos)
        << n.err;
  }
  RunResult n = cli({"records", "merge", log(), path("newer.jsonl"), "-o", path("out.jsonl")});
  EXPECT_FALSE(n.status.success());
  EXPECT_FALSE(fs::exists(path("out.jsonl")));
}

TEST_F(RecordsCli, AMissingLogIsAnError) {
  RunResult r = cli({"records", "show", path("none.jsonl")});
  EXPECT_FALSE(r.status.success());
  EXPECT_NE(r.err.find("error: record log '" + path("none.jsonl") + "' does not exist"),
            std::string::npos)
      << r.err;
}

}  // namespace
}  // namespace tensortune
