// `tensortune measure` and `tensortune tune` as a user runs them: a planted
// fault is a result, not a crash; a run resumes from its log without
// measuring a state twice; a tuner killed with SIGKILL or stopped with
// SIGTERM leaves a log that loads and no worker behind.
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <thread>

#include "tensortune/measure/measurer.h"
#include "tensortune/measure/mpi.h"
#include "tensortune/measure/record.h"
#include "tensortune/object/serialize.h"
#include "tensortune/object/structural.h"
#include "tensortune/search/evolutionary.h"
#include "tensortune/search/tuner.h"
#include "tensortune/support/subprocess.h"

namespace tensortune {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

class TuneCli : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string tmpl = (fs::temp_directory_path() / "tt_tune_cli_XXXXXX").string();
    ASSERT_NE(mkdtemp(tmpl.data()), nullptr);
    dir_ = tmpl;
    log_ = dir_ + "/tune.log";
  }
  void TearDown() override { fs::remove_all(dir_); }

  /// The CLI's options: a module cache private to this test.
  SpawnOptions options() const {
    SpawnOptions o;
    o.env = {{"XDG_CACHE_HOME", dir_ + "/cache"}};
    return o;
  }
  RunResult cli(std::vector<std::string> args) const {
    args.insert(args.begin(), TT_CLI_PATH);
    return run_captured(args, options(), std::chrono::seconds(300));
  }
  std::vector<std::string> tune_args(int trials, int batch, uint64_t seed = 1) const {
    return {"tune",
            "--workload",
            "matmul",
            "--args",
            "16,16,16",
            "--target",
            "c",
            "--trials",
            std::to_string(trials),
            "--batch-size",
            std::to_string(batch),
            "--log",
            log_,
            "--seed",
            std::to_string(seed),
            "--json"};
  }
  size_t log_lines() const {
    std::ifstream in(log_);
    size_t n = 0;
    for (std::string line; std::getline(in, line);) n += !line.empty();
    return n;
  }
  /// A tuning run far longer than any test, output discarded.
  Subprocess start_long_tuning_run() const {
    std::vector<std::string> argv = tune_args(10000, 2);
    argv.insert(argv.begin(), TT_CLI_PATH);
    SpawnOptions o = options();
    o.stdout_mode = StreamMode::kNull;
    o.stderr_mode = StreamMode::kNull;
    return Subprocess::spawn(argv, o);
  }
  /// Structural hashes of the logged states; fails the test on a duplicate.
  std::set<uint64_t> logged_states() const {
    auto contents = measure::load_records(log_, false);
    std::set<uint64_t> hashes;
    for (const auto& r : contents.records) {
      EXPECT_TRUE(hashes.insert(structural_hash(r.input.state)).second)
          << "state measured twice: " << save_string(r.input.state);
    }
    return hashes;
  }

  std::string dir_, log_;
};

/// Workers started by the tuner `parent` (they carry --parent-pid in argv).
std::vector<pid_t> workers_of(pid_t parent) {
  std::vector<pid_t> found;
  std::string needle = std::string("--parent-pid") + '\0' + std::to_string(parent) + '\0';
  for (const auto& entry : fs::directory_iterator("/proc")) {
    pid_t pid = static_cast<pid_t>(std::atoi(entry.path().filename().c_str()));
    if (pid <= 0) continue;
    std::ifstream in(entry.path() / "cmdline", std::ios::binary);
    std::string cmdline((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    std::ifstream stat(entry.path() / "stat");
    std::string st;
    std::getline(stat, st);
    bool zombie = st.size() > st.rfind(')') + 2 && st[st.rfind(')') + 2] == 'Z';
    if (!zombie && cmdline.find(needle) != std::string::npos) found.push_back(pid);
  }
  return found;
}

/// Waits up to five seconds for the workers of `parent` to go.
std::vector<pid_t> workers_left(pid_t parent) {
  std::vector<pid_t> left;
  for (int i = 0; i < 500; ++i) {
    left = workers_of(parent);
    if (left.empty()) break;
    ::usleep(10000);
  }
  return left;
}

// The flags of tune are generated from the option nodes' declarations: each
// option field is a flag whose help shows the library's default, and --json
// echoes what the run used.
TEST_F(TuneCli, EveryDeclaredOptionIsAFlagWithTheLibrarysDefault) {
  RunResult help = cli({"tune", "--help"});
  ASSERT_TRUE(help.status.success()) << help.err;
  const search::TuneOptions tune;
  const search::EvolutionaryOptions evolution;
  const measure::LocalRunnerOptions runner;
  const measure::LocalBuilderOptions builder;
  const measure::MpiOptions mpi;
  std::map<std::string, json> defaults;
  for (const Object* node :
       std::initializer_list<const Object*>{&tune, &evolution, &evolution.annotate, &runner.timing,
                                            &runner, &builder, &builder.pool, &mpi}) {
    json values = field_values(*node);
    for (const FieldInfo& f : node->type_info().fields) {
      if (!f.flag.empty()) defaults[f.flag] = values[f.name];
    }
  }
  ASSERT_GE(defaults.size(), 27u);
  for (const auto& [flag, value] : defaults) {
    // "  --trials INT=64   help", or "  --check   help" for a switch.
    std::string shown = "--" + flag + (value.is_boolean() ? "" : " ");
    size_t at = help.out.find("  " + shown);
    ASSERT_NE(at, std::string::npos) << shown << " is not in the help:\n" << help.out;
    if (value.is_boolean()) continue;
    std::string line = help.out.substr(at, help.out.find('\n', at) - at);
    size_t eq = line.find('=');
    ASSERT_NE(eq, std::string::npos) << line;
    std::istringstream rest(line.substr(eq + 1));
    std::string text;
    rest >> text;
    EXPECT_DOUBLE_EQ(std::stod(text), value.get<double>()) << line;
  }

  std::string t = dir_ + "/task.json";
  ASSERT_TRUE(cli({"task", "--workload", "matmul", "--args", "8,8,8", "-o", t}).status.success());
  RunResult run = cli({"tune", "--task", t, "--log", log_, "--trials", "4", "--batch-size", "4",
                       "--repeat", "2", "--eps-greedy", "0.25", "--json"});
  ASSERT_EQ(run.status.code, 0) << run.err;
  json options = json::parse(run.out)["options"];
  EXPECT_EQ(options.size(), defaults.size());
  EXPECT_EQ(options["trials"], 4);
  EXPECT_EQ(options["repeat"], 2);
  EXPECT_EQ(options["eps-greedy"], 0.25);
  EXPECT_EQ(options["population"], evolution.population);

  RunResult bad = cli({"tune", "--task", t, "--log", log_, "--mutation-prob", "1.5"});
  EXPECT_NE(bad.status.code, 0);
  EXPECT_NE(bad.err.find("--mutation-prob: 1.5 is out of range: it must be from 0 to 1"),
            std::string::npos)
      << bad.err;
  bad = cli({"tune", "--task", t, "--log", log_, "--build-timeout", "0"});
  EXPECT_NE(bad.status.code, 0);
  EXPECT_NE(bad.err.find("--build-timeout: 0 is out of range: it must be from 0.001 to 86400"),
            std::string::npos)
      << bad.err;
}

TEST_F(TuneCli, MeasureReportsAPlantedFaultAsAResult) {
  RunResult task =
      cli({"task", "--workload", "matmul", "--args", "16,16,16", "-o", dir_ + "/task.json"});
  ASSERT_TRUE(task.status.success()) << task.err;
  RunResult bad = cli({"measure", "--task", dir_ + "/task.json", "--config",
                       "testing.inject_fault=segv", "--json", "--log", log_});
  EXPECT_EQ(bad.status.code, 3) << bad.out << bad.err;
  json out = json::parse(bad.out);
  EXPECT_EQ(out["error_code"], "RUNTIME_ERROR");
  EXPECT_NE(out["error_message"].get<std::string>().find("signal 11"), std::string::npos)
      << bad.out;

  RunResult good = cli({"measure", "--task", dir_ + "/task.json", "--check", "--repeat", "2",
                        "--json", "--log", log_, "--instrument", "pass_names"});
  ASSERT_EQ(good.status.code, 0) << good.out << good.err;
  out = json::parse(good.out);
  EXPECT_EQ(out["error_code"], "NO_ERROR");
  EXPECT_EQ(out["costs"].size(), 2u);
  EXPECT_EQ(out["max_error"], 0.0);
  EXPECT_FALSE(out["instruments"]["pass_names"].empty()) << good.out;

  auto records = measure::load_records(log_).records;
  ASSERT_EQ(records.size(), 2u);
  EXPECT_EQ(records[0].result.error_code, measure::ErrorCode::kRuntimeError);
  EXPECT_TRUE(records[1].result.ok());
}

// A bug of tensortune in a build worker is not the candidate's failure: the
// run stops with exit status 70, naming the stage, and records nothing for
// the candidate; what the log held before is still there.
TEST_F(TuneCli, AnInternalErrorInAWorkerStopsTheRunAsABugNotAsACandidatesFailure) {
  RunResult first = cli(tune_args(2, 2));
  ASSERT_EQ(first.status.code, 0) << first.err;
  const size_t before = measure::load_records(log_).records.size();
  std::vector<std::string> args = tune_args(4, 2);
  args.insert(args.end(), {"--config", "testing.inject_fault=internal_error"});
  RunResult bug = cli(args);
  EXPECT_EQ(bug.status.code, 70) << bug.out << bug.err;
  EXPECT_NE(bug.err.find("at lower"), std::string::npos) << bug.err;
  EXPECT_NE(bug.err.find("This is a bug in tensortune"), std::string::npos) << bug.err;
  EXPECT_EQ(measure::load_records(log_).records.size(), before);
}

TEST_F(TuneCli, FreshActivationsAreWrittenBeforeEveryCallAndTheCheckStillPasses) {
  std::vector<std::string> args = tune_args(2, 2);
  args.insert(args.end(), {"--fresh-activations", "--check", "--json"});
  RunResult r = cli(args);
  ASSERT_EQ(r.status.code, 0) << r.out << r.err;
  EXPECT_NE(r.err.find(", activations written before every call"), std::string::npos) << r.err;
  EXPECT_TRUE(json::parse(r.out)["tasks"][0]["errors"].empty()) << r.out;
}

TEST_F(TuneCli, TuneShowsWhatTheInstrumentsSawPerTrial) {
  std::vector<std::string> args = tune_args(2, 2);
  args.insert(args.end(), {"--instrument", "pass_names"});
  RunResult r = cli(args);
  ASSERT_EQ(r.status.code, 0) << r.out << r.err;
  // One line per candidate, from the build worker that lowered it.
  EXPECT_NE(r.err.find("instrument pass_names (build worker, matmul(16,16,16,float32) trial 1): "),
            std::string::npos)
      << r.err;
  EXPECT_NE(r.err.find("trial 2): "), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("simplify"), std::string::npos) << r.err;
}

TEST_F(TuneCli, AnotherPassContextResumesNothingAndSaysSo) {
  RunResult first = cli(tune_args(4, 2));
  ASSERT_EQ(first.status.code, 0) << first.out << first.err;
  std::vector<std::string> args = tune_args(2, 2);
  args.insert(args.end(), {"--opt-level", "1"});
  RunResult other = cli(args);
  ASSERT_EQ(other.status.code, 0) << other.out << other.err;
  EXPECT_EQ(json::parse(other.out)["tasks"][0]["resumed"], 0);
  EXPECT_NE(other.err.find("built under other pass contexts"), std::string::npos) << other.err;
  EXPECT_NE(other.err.find("--any-pass-context resumes them"), std::string::npos) << other.err;
  args.push_back("--any-pass-context");
  RunResult any = cli(args);
  ASSERT_EQ(any.status.code, 0) << any.out << any.err;
  // Every state of both runs (the second, resuming nothing, may have
  // measured states of the first again under its own context).
  EXPECT_GE(json::parse(any.out)["tasks"][0]["resumed"].get<int>(), 4) << any.out;
}

TEST_F(TuneCli, VerifyBuildsRunsAndChecksSchedules) {
  RunResult task =
      cli({"task", "--workload", "matmul", "--args", "16,16,16", "-o", dir_ + "/task.json"});
  ASSERT_TRUE(task.status.success()) << task.err;
  RunResult ok =
      cli({"verify", "--task", dir_ + "/task.json", "--random-states", "3", "--seed", "1"});
  EXPECT_EQ(ok.status.code, 0) << ok.out << ok.err;
  // A planted wrong answer is a mismatch, and a non-zero exit.
  RunResult wrong = cli(
      {"verify", "--task", dir_ + "/task.json", "--config", "testing.inject_fault=wrong_answer"});
  EXPECT_NE(wrong.status.code, 0) << wrong.out << wrong.err;
  // The default schedule (what compile gives an untuned task) is vectorized,
  // unlike the naive one, and matches the reference.
  RunResult naive = cli({"lower", "--task", dir_ + "/task.json"});
  RunResult fallback = cli({"lower", "--task", dir_ + "/task.json", "--state", "default"});
  ASSERT_EQ(fallback.status.code, 0) << fallback.err;
  EXPECT_NE(fallback.out, naive.out);
  EXPECT_NE(fallback.out.find("ramp("), std::string::npos) << fallback.out;
  EXPECT_EQ(naive.out.find("ramp("), std::string::npos) << naive.out;
  RunResult checked = cli({"verify", "--task", dir_ + "/task.json", "--state", "default"});
  EXPECT_EQ(checked.status.code, 0) << checked.out << checked.err;
}

TEST_F(TuneCli, ResumesFromTheLogWithoutMeasuringAStateTwice) {
  RunResult first = cli(tune_args(6, 3));
  ASSERT_EQ(first.status.code, 0) << first.out << first.err;
  json report = json::parse(first.out);
  EXPECT_EQ(report["trials"], 6);
  EXPECT_EQ(report["tasks"][0]["resumed"], 0);
  EXPECT_TRUE(report["tasks"][0]["best_gflops"].is_number()) << first.out;
  EXPECT_EQ(log_lines(), 6u);

  // The same seed again: the policy would propose the same states first.
  RunResult second = cli(tune_args(4, 3));
  ASSERT_EQ(second.status.code, 0) << second.out << second.err;
  report = json::parse(second.out);
  EXPECT_EQ(report["trials"], 4);
  EXPECT_EQ(report["tasks"][0]["resumed"], 6);
  EXPECT_EQ(log_lines(), 10u);
  EXPECT_EQ(logged_states().size(), 10u);
}

// Three tuners on one log at once (different seeds, so different states),
// with `records merge` reading it meanwhile: every line of the log parses,
// every trial of each tuner is there, and each merge wrote a whole log.
TEST_F(TuneCli, SeveralTunersOnOneLogLoseNothing) {
  std::vector<Subprocess> tuners;
  for (uint64_t seed = 1; seed <= 3; ++seed) {
    std::vector<std::string> argv = tune_args(6, 3, seed);
    argv.insert(argv.begin(), TT_CLI_PATH);
    SpawnOptions o = options();
    o.stdout_mode = StreamMode::kNull;
    o.stderr_mode = StreamMode::kNull;
    tuners.push_back(Subprocess::spawn(argv, o));
  }
  int merges = 0;
  for (bool running = true; running;) {
    running = false;
    for (auto& t : tuners) running |= !t.try_wait().has_value();
    if (fs::exists(log_)) {
      RunResult merge = cli({"records", "merge", log_, "-o", dir_ + "/merged.log"});
      ASSERT_EQ(merge.status.code, 0) << merge.err;  // it refuses a log with a torn line
      ++merges;
    }
  }
  for (auto& t : tuners) EXPECT_TRUE(t.wait().success());
  auto contents = measure::load_records(log_, false);
  EXPECT_TRUE(contents.warnings.empty());
  EXPECT_EQ(contents.records.size(), 18u);
  EXPECT_GT(merges, 0);
}

TEST_F(TuneCli, KilledTunerLeavesALoadableLogAndNoWorkers) {
  Subprocess tuner = start_long_tuning_run();
  for (int i = 0; i < 3000 && log_lines() < 4; ++i) ::usleep(10000);
  ASSERT_GE(log_lines(), 4u) << "the tuner wrote no records";
  ASSERT_FALSE(workers_of(tuner.pid()).empty());
  tuner.kill(SIGKILL);
  EXPECT_EQ(tuner.wait().signal, SIGKILL);
  EXPECT_EQ(workers_left(tuner.pid()), std::vector<pid_t>{});

  size_t before = logged_states().size();
  RunResult resumed = cli(tune_args(4, 2));
  ASSERT_EQ(resumed.status.code, 0) << resumed.out << resumed.err;
  EXPECT_EQ(json::parse(resumed.out)["tasks"][0]["resumed"], before);
  EXPECT_EQ(logged_states().size(), before + 4);
}

/// True while process `pid` exists and is not a zombie.
bool alive(pid_t pid) {
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string st;
  if (!std::getline(stat, st)) return false;
  return st.size() > st.rfind(')') + 2 && st[st.rfind(')') + 2] != 'Z';
}

TEST_F(TuneCli, KilledDuringABuildLeavesNoCompilerBehind) {
  // A "compiler" that records its pid and takes a minute: the tuner gets
  // `kill -9` while it runs, and it must not outlive the tuner by more than
  // a moment (its worker ends its whole group when its parent dies).
  std::string slow_cc = dir_ + "/slow-cc.sh", pids = dir_ + "/cc.pids";
  {
    std::ofstream script(slow_cc);
    script << "#!/bin/sh\necho $$ >> " << pids << "\nexec sleep 60\n";
  }
  fs::permissions(slow_cc, fs::perms::owner_all);
  std::vector<std::string> argv = {TT_CLI_PATH, "tune",     "--workload", "matmul",
                                   "--args",    "16,16,16", "--target",   "c -compiler=" + slow_cc,
                                   "--trials",  "4",        "--log",      log_};
  SpawnOptions o = options();
  o.stdout_mode = StreamMode::kNull;
  o.stderr_mode = StreamMode::kNull;
  Subprocess tuner = Subprocess::spawn(argv, o);
  std::vector<pid_t> compilers;
  for (int i = 0; i < 3000 && compilers.empty(); ++i) {
    ::usleep(10000);
    std::ifstream in(pids);
    for (pid_t pid; in >> pid;) compilers.push_back(pid);
  }
  ASSERT_FALSE(compilers.empty()) << "no compiler started";
  for (pid_t pid : compilers) ASSERT_TRUE(alive(pid));
  tuner.kill(SIGKILL);
  EXPECT_EQ(tuner.wait().signal, SIGKILL);
  EXPECT_EQ(workers_left(tuner.pid()), std::vector<pid_t>{});
  for (pid_t pid : compilers) {
    for (int i = 0; i < 200 && alive(pid); ++i) ::usleep(10000);
    EXPECT_FALSE(alive(pid)) << "the compiler " << pid << " outlived the tuner";
  }
}

TEST_F(TuneCli, SigtermStopsTheTunerAndItsWorkers) {
  Subprocess tuner = start_long_tuning_run();
  for (int i = 0; i < 3000 && log_lines() < 2; ++i) ::usleep(10000);
  ASSERT_GE(log_lines(), 2u);
  ASSERT_FALSE(workers_of(tuner.pid()).empty());
  ::kill(tuner.pid(), SIGTERM);
  EXPECT_EQ(tuner.wait().signal, SIGTERM);
  EXPECT_EQ(workers_left(tuner.pid()), std::vector<pid_t>{});
  logged_states();  // loads, no duplicates
}

}  // namespace
}  // namespace tensortune
