// Measurement records: the line format (a saved graph) round-trips every
// field, a log written by version 1 still reads, bad lines are skipped with
// their line numbers, newer versions are refused, writers recover from a torn
// last line, and the queries (best, top-k, distill, merge, lookup by target
// and pass context, the resume set) pick what they promise.
#include "tensortune/measure/record.h"

#include <gtest/gtest.h>

#include <atomic>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>
#include <set>
#include <sstream>
#include <thread>

#include "common/test_util.h"
#include "tensortune/object/structural.h"
#include "tensortune/schedule/compute_dag.h"
#include "tensortune/schedule/random_schedule.h"
#include "tensortune/te/ops.h"
#include "tensortune/te/workload.h"

namespace tensortune::measure {
namespace {

namespace fs = std::filesystem;

te::Task matmul_task(std::string_view target, std::string_view host = "") {
  ir::Target t = ir::Target::parse(target);
  if (!host.empty()) t = t.with_host(ir::Target::parse(host));
  return te::Task::make(te::make_named_workload_from_text("matmul", "8,8,8"), t);
}

te::Task dag_task() {
  te::Tensor a = te::placeholder({6, 5}, ir::DataType::float32(), "A");
  te::Tensor b = te::placeholder({5, 7}, ir::DataType::float32(), "B");
  return te::Task::make(te::make_dag_workload({a, b}, {te::matmul(a, b)}),
                        ir::Target::parse("c -num-cores=2").with_host(ir::Target::parse("c")));
}

// The n-th of a fixed sequence of random valid states of `task` (n = 0: naive).
schedule::State nth_state(const te::Task& task, int n) {
  if (n == 0) return schedule::State::make();
  schedule::ComputeDAG dag(te::workload_tensors(task->workload));
  std::mt19937_64 rng(1000 + n);
  return schedule::random_state(dag, rng);
}

Record ok_record(const te::Task& task, int state, double seconds) {
  Record r{{task, nth_state(task, state)}, {}};
  r.result.costs = {seconds, seconds};
  r.result.timestamp = 1700000000.25 + state;
  return r;
}

Record failed_record(const te::Task& task, int state, ErrorCode code) {
  Record r{{task, nth_state(task, state)}, {}};
  r.result.error_code = code;
  r.result.error_message = "it went wrong";
  return r;
}

void expect_same(const Record& a, const Record& b) {
  EXPECT_TRUE(structural_equal(a.input.task, b.input.task));
  EXPECT_TRUE(a.input.task->target == b.input.task->target);
  EXPECT_TRUE(structural_equal(a.input.state, b.input.state));
  EXPECT_EQ(a.result.error_code, b.result.error_code);
  EXPECT_EQ(a.result.error_message, b.result.error_message);
  EXPECT_EQ(a.result.costs, b.result.costs);
  EXPECT_EQ(a.result.build_seconds, b.result.build_seconds);
  EXPECT_EQ(a.result.run_seconds, b.result.run_seconds);
  EXPECT_EQ(a.result.kernel_seconds, b.result.kernel_seconds);
  EXPECT_EQ(a.result.timestamp, b.result.timestamp);
  EXPECT_EQ(a.result.pass_context_hash, b.result.pass_context_hash);
  EXPECT_EQ(a.result.max_error.has_value(), b.result.max_error.has_value());
  if (a.result.max_error && b.result.max_error) {
    EXPECT_TRUE(*a.result.max_error == *b.result.max_error ||
                (std::isnan(*a.result.max_error) && std::isnan(*b.result.max_error)));
  }
}

/// A fresh directory per test, removed afterwards.
class RecordFiles : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string tmpl = (fs::temp_directory_path() / "tt_record_test_XXXXXX").string();
    ASSERT_NE(mkdtemp(tmpl.data()), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::string path(const std::string& name) const { return (dir_ / name).string(); }
  static void write_text(const std::string& path, const std::string& text) {
    std::ofstream(path, std::ios::binary) << text;
  }
  static std::string read_text(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
  }

  fs::path dir_;
};

TEST(Record, NamedWorkloadWithHostRoundTrips) {
  te::Task task = matmul_task("c -num-cores=2 -mattr=avx2,fma", "c -mattr=avx2");
  Record r = ok_record(task, 3, 1.5e-4);
  r.result.costs = {1.5e-4, 1.25e-4, 0.1 + 0.2};  // doubles must come back bit for bit
  r.result.build_seconds = 0.75;
  r.result.run_seconds = 0.125;
  r.result.kernel_seconds = 0.0625;
  r.result.pass_context_hash =
      Hash64(0xfedcba9876543210ull);  // above 2^63: no JSON number survives that
  r.result.max_error = 1e-7;
  r.result.instruments = {{"pass_names", {"simplify", "vectorize"}}};

  std::string line = record_to_line(r);
  EXPECT_EQ(line.find('\n'), std::string::npos);
  EXPECT_EQ(line.rfind("{\"format\":\"tensortune.graph\"", 0), 0u) << line;
  EXPECT_NE(line.find("\"pass_context_hash\":\"fedcba9876543210\""), std::string::npos) << line;
  EXPECT_NE(line.find("\"type\":\"measure.Record\",\"version\":3"), std::string::npos) << line;
  // A registered workload travels as its name and arguments.
  EXPECT_NE(line.find("\"name\":\"matmul\""), std::string::npos) << line;
  EXPECT_EQ(line.find("te.Compute"), std::string::npos) << line;

  Record back = record_from_line(line);
  expect_same(r, back);
  EXPECT_EQ(back.result.instruments, r.result.instruments);
  EXPECT_EQ(task_key(back.input.task), task_key(task));
  EXPECT_EQ(record_to_line(back), line);
}

TEST(Record, DagWorkloadRoundTripsAsItsGraphWithSharing) {
  // C = A . A^T: one placeholder read twice, which must stay one node.
  te::Tensor a = te::placeholder({6, 5}, ir::DataType::float32(), "A");
  te::Task task =
      te::Task::make(te::make_dag_workload({a}, {te::dense(a, a)}), ir::Target::parse("c"));
  Record r = ok_record(task, 2, 3e-5);
  std::string line = record_to_line(r);
  EXPECT_NE(line.find("te.DagWorkload"), std::string::npos);
  Record back = record_from_line(line);
  expect_same(r, back);
  EXPECT_EQ(back.input.task.workload_key(), task.workload_key());
  EXPECT_TRUE(same_sharing(back.input.task, task));
  EXPECT_EQ(te::workload_tensors(back.input.task->workload).inputs.size(), 1u);
}

TEST(Record, EveryErrorCodeRoundTrips) {
  te::Task task = matmul_task("c");
  for (ErrorCode code : kAllErrorCodes) {
    Record r =
        code == ErrorCode::kNoError ? ok_record(task, 0, 1e-3) : failed_record(task, 1, code);
    std::string line = record_to_line(r);
    EXPECT_NE(line.find("\"error_code\":\"" + std::string(error_code_name(code)) + "\""),
              std::string::npos);
    EXPECT_EQ(record_from_line(line).result.error_code, code) << error_code_name(code);
  }
}

TEST(Record, MaxErrorMayBeAbsentOrNonFinite) {
  te::Task task = matmul_task("c");
  for (std::optional<double> e :
       {std::optional<double>(), std::optional<double>(0.0), std::optional<double>(std::nan("")),
        std::optional<double>(HUGE_VAL), std::optional<double>(-HUGE_VAL)}) {
    Record r = failed_record(task, 0, ErrorCode::kWrongAnswer);
    r.result.max_error = e;
    expect_same(r, record_from_line(record_to_line(r)));
  }
}

TEST(Record, TheMeasuringHostAndRankRoundTripAndOlderRecordsHaveNone) {
  te::Task task = matmul_task("c");
  Record r = ok_record(task, 0, 1e-3);
  r.result.host = "node-7";
  r.result.rank = 12;
  Record back = record_from_line(record_to_line(r));
  EXPECT_EQ(back.result.host, "node-7");
  EXPECT_EQ(back.result.rank, 12);
  // A record written before these fields: no host, and no rank (-1).
  auto doc = nlohmann::json::parse(record_to_line(r));
  for (auto& node : doc["nodes"]) {
    if (node["type"] == "measure.MeasureResult") {
      node.erase("host");
      node.erase("rank");
    }
  }
  Record old = record_from_line(doc.dump());
  EXPECT_EQ(old.result.host, "");
  EXPECT_EQ(old.result.rank, -1);
}

TEST(Record, ResultsThatCouldNotBeReadBackAreNotWritten) {
  Record r = ok_record(matmul_task("c"), 0, 1e-3);
  r.result.costs.push_back(HUGE_VAL);
  EXPECT_TT_ERROR(record_to_line(r), kInvalidArgument, "costs must be positive seconds");
  Record no_costs = ok_record(matmul_task("c"), 0, 1e-3);
  no_costs.result.costs.clear();
  EXPECT_TT_ERROR(record_to_line(no_costs), kInvalidArgument, "NO_ERROR with 0 costs");
}

TEST(Record, InvalidUtf8InMessagesIsReplacedNotFatal) {
  Record r = failed_record(matmul_task("c"), 0, ErrorCode::kCompileError);
  r.result.error_message = "bad byte \xff here";
  Record back = record_from_line(record_to_line(r));
  EXPECT_EQ(back.result.error_message.rfind("bad byte ", 0), 0u);
  EXPECT_NE(back.result.error_message.find(" here"), std::string::npos);
}

// `line` with the first occurrence of `from` replaced by `to`.
std::string edited(std::string line, const std::string& from, const std::string& to) {
  size_t at = line.find(from);
  EXPECT_NE(at, std::string::npos) << from;
  if (at != std::string::npos) line.replace(at, from.size(), to);
  return line;
}

TEST(Record, MalformedLinesAreParseErrorsSayingWhatIsWrong) {
  std::string good = record_to_line(ok_record(matmul_task("c -num-cores=2"), 0, 1e-3));
  EXPECT_TT_ERROR(record_from_line(good.substr(0, good.size() / 2)), kParse,
                  "invalid JSON at byte offset");
  EXPECT_TT_ERROR(record_from_line("[1,2]"), kParse, "must be a JSON object");
  EXPECT_TT_ERROR(
      record_from_line(edited(good, "\"type\":\"measure.Record\"", "\"type\":\"measure.Recor\"")),
      kParse, "unknown type key 'measure.Recor'");
  EXPECT_TT_ERROR(record_from_line(edited(good, "\"name\":\"matmul\"", "\"name\":\"nosuch\"")),
                  kParse, "unknown workload 'nosuch'");
  EXPECT_TT_ERROR(record_from_line(edited(good, "\"NO_ERROR\"", "\"NO_ERRORS\"")), kParse,
                  "one of NO_ERROR|INSTANTIATION_ERROR");
  EXPECT_TT_ERROR(record_from_line(edited(good, "\"costs\":[", "\"costs\":[\"x\",")), kParse,
                  "field 'costs'");
  EXPECT_TT_ERROR(record_from_line(edited(good, "\"pass_context_hash\":\"0000000000000000\"",
                                          "\"pass_context_hash\":\"00000000000000zz\"")),
                  kParse, "16 hexadecimal digits");
  EXPECT_TT_ERROR(record_from_line(edited(good, "\"num-cores\":2", "\"num-cores\":\"two\"")),
                  kParse, "ir.Target");
  EXPECT_TT_ERROR(record_from_line(edited(good, "\"costs\":[0.001,0.001]", "\"costs\":[]")), kParse,
                  "the result says NO_ERROR with 0 costs");
}

TEST(Record, AVersion2LineReadsWithNoKernelTime) {
  Record r = ok_record(matmul_task("c"), 0, 1e-3);
  r.result.kernel_seconds = 0.5;
  std::string line = record_to_line(r);
  line = edited(line, "\"type\":\"measure.Record\",\"version\":3",
                "\"type\":\"measure.Record\",\"version\":2");
  line = edited(line, "\"kernel_seconds\":0.5,", "");
  Record back = record_from_line(line);
  EXPECT_EQ(back.result.kernel_seconds, 0);
  EXPECT_EQ(back.result.costs, r.result.costs);
}

TEST(Record, NewerVersionIsRefusedWithTheVersion) {
  std::string good = record_to_line(ok_record(matmul_task("c"), 0, 1e-3));
  std::string v4 = edited(good, "\"type\":\"measure.Record\",\"version\":3",
                          "\"type\":\"measure.Record\",\"version\":4");
  EXPECT_TT_ERROR(record_from_line(v4), kParse,
                  "written by format version 4, this build reads up to 3");
  // Refused even when a node changed shape, so that the line does not load.
  EXPECT_TT_ERROR(record_from_line(edited(v4, "\"costs\":", "\"new_field\":1,\"costs\":")), kParse,
                  "written by format version 4");
  // And in the old layout.
  EXPECT_TT_ERROR(record_from_line("{\"version\":7}"), kParse, "written by format version 7");
  // A newer saved-graph format is refused the same way, not skipped.
  std::string graph2 = good;
  ASSERT_EQ(graph2.substr(graph2.size() - 12), "\"version\":1}");
  graph2.replace(graph2.size() - 2, 1, "2");
  EXPECT_TT_ERROR(record_from_line(graph2), kParse,
                  "saved-graph format version 2, this build reads 1");
}

TEST_F(RecordFiles, CorruptAndTruncatedLinesAreSkippedWithTheirLineNumbers) {
  te::Task task = matmul_task("c");
  std::vector<Record> written;
  std::string text;
  for (int i = 0; i < 3; ++i) {
    written.push_back(ok_record(task, i, 1e-3 * (i + 1)));
    text += record_to_line(written.back()) + "\n";
  }
  text += "{\"version\": 2, \"task\": garbage}\n";  // line 4
  text += "   \n";                                  // line 5: blank, silently ignored
  written.push_back(failed_record(task, 4, ErrorCode::kRunTimeout));
  text += record_to_line(written.back()) + "\n";  // line 6
  std::string last = record_to_line(ok_record(task, 5, 1e-3));
  text += last.substr(0, last.size() - 20);  // line 7: a writer killed mid-line
  write_text(path("log.jsonl"), text);

  LogContents log = load_records(path("log.jsonl"), /*print_warnings=*/false);
  ASSERT_EQ(log.records.size(), written.size());
  for (size_t i = 0; i < written.size(); ++i) expect_same(written[i], log.records[i]);
  ASSERT_EQ(log.warnings.size(), 2u);
  EXPECT_EQ(log.warnings[0].line, 4u);
  EXPECT_NE(log.warnings[0].message.find("not valid JSON"), std::string::npos);
  EXPECT_EQ(log.warnings[1].line, 7u);
  EXPECT_NE(log.warnings[1].message.find("invalid JSON"), std::string::npos);
}

TEST_F(RecordFiles, SkippedLinesArePrintedWhenAsked) {
  write_text(path("log.jsonl"),
             record_to_line(ok_record(matmul_task("c"), 0, 1e-3)) + "\n{\"version\":1}\n");
  ::testing::internal::CaptureStderr();
  LogContents log = load_records(path("log.jsonl"));
  std::string err = ::testing::internal::GetCapturedStderr();
  EXPECT_EQ(log.records.size(), 1u);
  EXPECT_NE(err.find("warning: " + path("log.jsonl") + ":2: skipped: missing key \"task\""),
            std::string::npos)
      << err;
}

TEST_F(RecordFiles, ANewerVersionLineStopsTheLoadNamingFileAndLine) {
  std::string good = record_to_line(ok_record(matmul_task("c"), 0, 1e-3));
  write_text(path("log.jsonl"), good + "\n" + good + "\n" +
                                    edited(good, "\"measure.Record\",\"version\":3",
                                           "\"measure.Record\",\"version\":5") +
                                    "\n");
  EXPECT_TT_ERROR(load_records(path("log.jsonl"), false), kParse,
                  path("log.jsonl") + ":3: written by format version 5, this build reads up to 3");
}

TEST_F(RecordFiles, MissingFiles) {
  EXPECT_TT_ERROR(load_records(path("none.jsonl")), kNotFound, path("none.jsonl"));
  EXPECT_TRUE(load_records(path("none.jsonl"), true, /*missing_ok=*/true).records.empty());
  EXPECT_TT_ERROR(RecordWriter(path("no/such/dir/log.jsonl")), kIO,
                  "cannot open record log '" + path("no/such/dir/log.jsonl") + "': No such file");
}

TEST_F(RecordFiles, WriterAppendsAndStartsANewLineAfterATornOne) {
  te::Task task = matmul_task("c");
  std::string first = record_to_line(ok_record(task, 0, 1e-3));
  write_text(path("log.jsonl"), first + "\n" + first.substr(0, 30));  // torn by a kill
  {
    RecordWriter writer(path("log.jsonl"));
    writer.write(ok_record(task, 1, 2e-3));
    writer.write(ok_record(task, 2, 3e-3));
  }
  std::string text = read_text(path("log.jsonl"));
  EXPECT_EQ(text, first + "\n" + first.substr(0, 30) + "\n" +
                      record_to_line(ok_record(task, 1, 2e-3)) + "\n" +
                      record_to_line(ok_record(task, 2, 3e-3)) + "\n");
  LogContents log = load_records(path("log.jsonl"), false);
  EXPECT_EQ(log.records.size(), 3u);
  ASSERT_EQ(log.warnings.size(), 1u);
  EXPECT_EQ(log.warnings[0].line, 2u);

  // A clean file gains no blank line; a new file is created.
  { RecordWriter(path("log.jsonl")).write(ok_record(task, 3, 4e-3)); }
  EXPECT_EQ(load_records(path("log.jsonl"), false).records.size(), 4u);
  EXPECT_EQ(read_text(path("log.jsonl")).find("\n\n"), std::string::npos);
  { RecordWriter(path("new.jsonl")).write(ok_record(task, 0, 1e-3)); }
  EXPECT_EQ(read_text(path("new.jsonl")), first + "\n");
}

// Several writers on one log (each its own descriptor, as several tuners
// have), with records larger than a pipe's atomic write, while a reader
// loads it again and again: every line the reader sees parses, and at the
// end every record is there once.
TEST_F(RecordFiles, ConcurrentWritersAndReadersLoseAndTearNothing) {
  te::Task task = matmul_task("c");
  constexpr int kWriters = 4, kRecords = 40;
  std::atomic<bool> done{false};
  std::atomic<size_t> torn{0}, loads{0};
  std::thread reader([&] {
    while (!done) {
      LogContents log = load_records(path("shared.jsonl"), false, true);
      torn += log.warnings.size();
      ++loads;
    }
  });
  std::vector<std::thread> writers;
  for (int w = 0; w < kWriters; ++w) {
    writers.emplace_back([&, w] {
      RecordWriter writer(path("shared.jsonl"));
      for (int i = 0; i < kRecords; ++i) {
        Record r = failed_record(task, 0, ErrorCode::kCompileError);
        // ~20 KB a line: several write(2) calls' worth for stdio or a pipe.
        r.result.error_message = std::string(20000, static_cast<char>('a' + w)) + std::to_string(i);
        writer.write(r);
      }
    });
  }
  for (auto& t : writers) t.join();
  done = true;
  reader.join();
  EXPECT_EQ(torn, 0u) << "over " << loads << " loads";
  LogContents log = load_records(path("shared.jsonl"), false);
  EXPECT_TRUE(log.warnings.empty());
  ASSERT_EQ(log.records.size(), static_cast<size_t>(kWriters * kRecords));
  std::set<std::string> seen;
  for (const Record& r : log.records) {
    const std::string& m = r.result.error_message;
    ASSERT_GT(m.size(), 20000u);
    EXPECT_EQ(m.find_first_not_of(m[0]), 20000u);  // one writer's line, whole
    seen.insert(m.substr(19999));
  }
  EXPECT_EQ(seen.size(), static_cast<size_t>(kWriters * kRecords));
  // Each record knows its line.
  EXPECT_EQ(log.records.front().line, 1u);
  EXPECT_EQ(log.records.back().line, static_cast<size_t>(kWriters * kRecords));
}

TEST(Record, TaskKeyIsWorkloadAndFullTarget) {
  te::Task task = matmul_task("c -num-cores=2", "c -mattr=avx2");
  EXPECT_EQ(task_key(task), "matmul(8,8,8,float32)@c -num-cores=2 -host=\"c -mattr=avx2\"");
}

/// The key best_per_task groups records of `task` under the default context by.
std::string group(const te::Task& task) {
  return task_key(task) + " pass_context " + Hash64(0).str();
}

TEST(Record, BestAndTopKUseMeanCostOfSuccessfulRecordsPerTaskAndContext) {
  te::Task a = matmul_task("c -num-cores=2"), b = dag_task();
  Record uneven = ok_record(a, 3, 0);
  uneven.result.costs = {1e-3, 5e-3};  // mean 3e-3: worse than 2e-3 though its minimum is better
  std::vector<Record> records = {failed_record(a, 1, ErrorCode::kCompileError),
                                 ok_record(a, 2, 2e-3),
                                 uneven,
                                 ok_record(b, 1, 9e-3),
                                 ok_record(a, 4, 4e-3),
                                 failed_record(b, 2, ErrorCode::kRuntimeError)};
  auto best = best_per_task(records);
  ASSERT_EQ(best.size(), 2u);
  EXPECT_EQ(best.at(group(a)).result.mean_cost(), 2e-3);
  EXPECT_EQ(best.at(group(b)).result.mean_cost(), 9e-3);

  auto top = top_k_per_task(records, 2);
  ASSERT_EQ(top.at(group(a)).size(), 2u);
  EXPECT_EQ(top.at(group(a))[0].result.mean_cost(), 2e-3);
  EXPECT_DOUBLE_EQ(top.at(group(a))[1].result.mean_cost(), 3e-3);
  EXPECT_EQ(top.at(group(b)).size(), 1u);
  EXPECT_EQ(top_k_per_task(records, 10).at(group(a)).size(), 3u);

  // A record tuned under another context is best of its own group.
  Record other = ok_record(a, 5, 1e-4);
  other.result.pass_context_hash = Hash64(7);
  records.push_back(other);
  best = best_per_task(records);
  EXPECT_EQ(best.size(), 3u);
  EXPECT_EQ(best.at(group(a)).result.mean_cost(), 2e-3);

  // Only failures: no best.
  EXPECT_TRUE(best_per_task({failed_record(a, 1, ErrorCode::kCompileError)}).empty());
}

TEST(Record, ASchedulesRecordsArePooledAndSchedulesMeasuredAgainOutrankTheRest) {
  te::Task a = matmul_task("c -num-cores=2");
  // Measured once each, the lowest median wins as always.
  std::vector<Record> records = {ok_record(a, 1, 1e-3), ok_record(a, 2, 2e-3),
                                 ok_record(a, 3, 5e-4)};
  EXPECT_TRUE(
      structural_equal(best_for(records, a, ContextMatch::any())->input.state, nth_state(a, 3)));
  // States 1 and 2 measured again (a run's finalists): 1 took 4 ms twice
  // more, 3 ms pooled, worse than 2's steady 2 ms; state 3, timed once in a
  // fast moment, no longer counts.
  records.push_back(ok_record(a, 1, 4e-3));
  records.push_back(ok_record(a, 1, 4e-3));
  records.push_back(ok_record(a, 2, 2e-3));
  auto best = best_for(records, a, ContextMatch::any());
  ASSERT_TRUE(best);
  EXPECT_TRUE(structural_equal(best->input.state, nth_state(a, 2)));
  EXPECT_DOUBLE_EQ(best->result.mean_cost(), 2e-3);
  EXPECT_EQ(best->result.costs.size(), 4u);
  EXPECT_TRUE(structural_equal(best_per_task(records).at(group(a)).input.state, nth_state(a, 2)));
  // Measured once more at 0.1 ms, state 1 wins on all its eight costs.
  records.push_back(ok_record(a, 1, 1e-4));
  records.push_back(ok_record(a, 1, 1e-4));
  best = best_for(records, a, ContextMatch::any());
  EXPECT_TRUE(structural_equal(best->input.state, nth_state(a, 1)));
  EXPECT_EQ(best->result.costs.size(), 10u);
  EXPECT_NEAR(best->result.mean_cost(), (2 * 1e-3 + 4 * 4e-3 + 4 * 1e-4) / 10, 1e-12);
  // A distilled log keeps every record of the schedules it keeps, ranked
  // the same way, so it still picks what the whole log picks.
  records.push_back(ok_record(a, 4, 1e-5));  // once, in a fast moment
  std::vector<Record> one = distill_records(records, 1);
  ASSERT_EQ(one.size(), 5u);
  for (const Record& r : one) EXPECT_TRUE(structural_equal(r.input.state, nth_state(a, 1)));
  EXPECT_TRUE(structural_equal(best_for(one, a, ContextMatch::any())->input.state,
                               best_for(records, a, ContextMatch::any())->input.state));
  std::vector<Record> two = distill_records(records, 2);
  ASSERT_EQ(two.size(), 7u);
  EXPECT_TRUE(structural_equal(two[5].input.state, nth_state(a, 2)));
}

TEST(Record, OneDisturbedRepeatDoesNotSinkASchedule) {
  // State 1's first repeat paid for something else on the core (4 ms where
  // the others took 0.3): its median, 0.3 ms, still beats state 2's steady
  // 0.5 ms, where its mean (1.5 ms) would not.
  te::Task a = matmul_task("c -num-cores=2");
  Record disturbed = ok_record(a, 1, 3e-4);
  disturbed.result.costs = {4e-3, 3.1e-4, 3e-4};
  std::vector<Record> records = {ok_record(a, 2, 5e-4), disturbed};
  auto best = best_for(records, a, ContextMatch::any());
  ASSERT_TRUE(best);
  EXPECT_TRUE(structural_equal(best->input.state, nth_state(a, 1)));
  EXPECT_DOUBLE_EQ(best->result.median_cost(), 3.1e-4);
  EXPECT_DOUBLE_EQ(ok_record(a, 2, 5e-4).result.median_cost(), 5e-4);
  MeasureResult none;
  EXPECT_TRUE(std::isinf(none.median_cost()));
}

TEST(Record, DistillKeepsTheKBestInOrderOfFirstAppearance) {
  te::Task a = matmul_task("c"), b = dag_task(), c = matmul_task("c -num-cores=3");
  std::vector<Record> records = {failed_record(b, 0, ErrorCode::kRunTimeout),
                                 ok_record(a, 1, 5e-3),
                                 failed_record(c, 1, ErrorCode::kCompileError),  // no success: gone
                                 ok_record(a, 2, 1e-3),
                                 ok_record(b, 3, 7e-3),
                                 ok_record(a, 3, 3e-3)};
  std::vector<Record> one = distill_records(records);
  ASSERT_EQ(one.size(), 2u);
  EXPECT_EQ(task_key(one[0].input.task), task_key(b));  // b appeared first, though it failed there
  EXPECT_EQ(task_key(one[1].input.task), task_key(a));
  EXPECT_EQ(one[1].result.mean_cost(), 1e-3);

  std::vector<Record> two = distill_records(records, 2);
  ASSERT_EQ(two.size(), 3u);
  EXPECT_EQ(two[1].result.mean_cost(), 1e-3);
  EXPECT_EQ(two[2].result.mean_cost(), 3e-3);
}

TEST(Record, MergeDropsExactDuplicatesOnly) {
  te::Task a = matmul_task("c");
  Record r1 = ok_record(a, 1, 1e-3), r2 = ok_record(a, 2, 2e-3);
  Record remeasured = r1;
  remeasured.result.timestamp += 60;  // the same state measured again is new data
  std::vector<Record> merged = merge_records({{r1, r2}, {r2, remeasured, r1}});
  ASSERT_EQ(merged.size(), 3u);
  expect_same(merged[0], r1);
  expect_same(merged[1], r2);
  expect_same(merged[2], remeasured);
}

TEST(Record, ExactLookupDoesNotCrossTargetsOrHosts) {
  te::Task two = matmul_task("c -num-cores=2");
  te::Task four = matmul_task("c -num-cores=4");
  te::Task two_on_host = matmul_task("c -num-cores=2", "c -mattr=avx2");
  std::vector<Record> records = {ok_record(two, 1, 2e-3), ok_record(two, 2, 1e-3),
                                 failed_record(four, 1, ErrorCode::kRunTimeout)};
  ContextMatch any = ContextMatch::any();

  auto best = best_for(records, two, any);
  ASSERT_TRUE(best);
  EXPECT_EQ(best->result.mean_cost(), 1e-3);
  EXPECT_FALSE(best_for(records, four, any));
  EXPECT_FALSE(best_for(records, two_on_host, any));
  EXPECT_NE(why_no_record(records, four, any).find("are for other targets (c -num-cores=2)"),
            std::string::npos);

  // Asked for explicitly: a schedule tuned for 2 cores is valid on 4, and on a host.
  auto compatible = best_for(records, four, any, TargetMatch::kCompatible);
  ASSERT_TRUE(compatible);
  EXPECT_EQ(compatible->result.mean_cost(), 1e-3);
  EXPECT_TRUE(best_for(records, two_on_host, any, TargetMatch::kCompatible));
  // Not across workloads, nor to a target lacking a feature the record's has.
  EXPECT_FALSE(best_for(records, dag_task(), any, TargetMatch::kCompatible));
  EXPECT_EQ(
      why_no_record(records, dag_task(), any).rfind("the log has no successful record of dag:", 0),
      0u);
  std::vector<Record> avx = {ok_record(matmul_task("c -mattr=avx2"), 1, 1e-3)};
  EXPECT_FALSE(best_for(avx, matmul_task("c"), any, TargetMatch::kCompatible));
}

TEST(Record, LookupsMatchThePassContextUnlessAnyIsAskedFor) {
  te::Task task = matmul_task("c");
  ir::PassContext plain = ir::PassContext::make();
  ir::PassContext serial =
      ir::PassContext::make(ir::PassContextOptions().with_config("tir.disable_vectorize", true));
  Record fast = ok_record(task, 1, 1e-3), slow = ok_record(task, 2, 2e-3);
  fast.result.pass_context_hash = Hash64(serial.hash());
  slow.result.pass_context_hash = Hash64(plain.hash());
  std::vector<Record> records = {fast, slow};

  EXPECT_EQ(best_for(records, task, ContextMatch::only(plain))->result.mean_cost(), 2e-3);
  EXPECT_EQ(best_for(records, task, ContextMatch::only(serial))->result.mean_cost(), 1e-3);
  EXPECT_EQ(best_for(records, task, ContextMatch::any())->result.mean_cost(), 1e-3);

  // Only other contexts: nothing, and a message that says so and how to accept them.
  std::vector<Record> only_serial = {fast};
  EXPECT_FALSE(best_for(only_serial, task, ContextMatch::only(plain)));
  std::string why = why_no_record(only_serial, task, ContextMatch::only(plain));
  EXPECT_NE(why.find("tuned under other pass contexts (" + Hash64(serial.hash()).str() + ")"),
            std::string::npos)
      << why;
  EXPECT_NE(why.find("--any-pass-context"), std::string::npos) << why;
  EXPECT_EQ(why_no_record(only_serial, task, ContextMatch::any()), "");
}

TEST(Record, ResumeSetTakesTheTaskUnderItsContextEachStateOnce) {
  te::Task a = matmul_task("c"), other = matmul_task("c -num-cores=2");
  Record elsewhere = ok_record(a, 4, 1e-3);
  elsewhere.result.pass_context_hash = Hash64(42);
  std::vector<Record> records = {ok_record(a, 1, 1e-3),
                                 failed_record(a, 2, ErrorCode::kCompileError),
                                 failed_record(a, 3, ErrorCode::kDeviceLost),
                                 ok_record(other, 3, 1e-3),
                                 ok_record(a, 1, 2e-3),
                                 elsewhere};
  ContextMatch plain{Hash64(0)};
  ResumeSet set = resume_set(records, a, plain);
  ASSERT_EQ(set.records.size(), 2u);
  EXPECT_EQ(set.records[0], &records[0]);  // the first record of a state
  EXPECT_EQ(set.records[1], &records[1]);  // a failure was measured too; DEVICE_LOST was not
  EXPECT_EQ(set.other_context_records, 1u);
  EXPECT_EQ(set.other_contexts, std::vector<Hash64>{Hash64(42)});
  EXPECT_EQ(resume_set(records, a, ContextMatch::any()).records.size(), 3u);
  EXPECT_TRUE(resume_set(records, matmul_task("c -num-cores=4"), plain).records.empty());
}

TEST(Record, ALogWrittenByFormatVersion1StillReads) {
  // Written by tensortune 0.1 (`tensortune tune` and `tensortune measure`
  // before records were saved graphs), never edited.
  std::string path = std::string(TT_SOURCE_DIR) + "/tests/measure/data/records_v1.jsonl";
  LogContents log = load_records(path, false);
  EXPECT_TRUE(log.warnings.empty()) << log.warnings.front().message;
  ASSERT_GE(log.records.size(), 4u);
  size_t ok = 0, failed = 0;
  for (const Record& r : log.records) {
    ok += r.result.ok();
    failed += !r.result.ok();
    // Written again, a record is a current-version line that reads back the same.
    expect_same(r, record_from_line(record_to_line(r)));
  }
  EXPECT_GT(ok, 0u);
  EXPECT_GT(failed, 0u);
}

}  // namespace
}  // namespace tensortune::measure
