// The search as a user drives it from the command line: sketches, a real
// tuning run that beats random search for the same trials, several
// weighted tasks with progress events, a cost model trained on the run's
// log and used by the next run, the best schedule built into a library,
// and the errors for bad input.
#include <dlfcn.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "tensortune/support/subprocess.h"

namespace tensortune {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

class SearchCli : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string tmpl = (fs::temp_directory_path() / "tt_search_cli_XXXXXX").string();
    ASSERT_NE(mkdtemp(tmpl.data()), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override { fs::remove_all(dir_); }

  RunResult cli(std::vector<std::string> args) const {
    args.insert(args.begin(), TT_CLI_PATH);
    SpawnOptions o;
    o.env = {{"XDG_CACHE_HOME", dir_ + "/cache"}};
    return run_captured(args, o, std::chrono::seconds(600));
  }
  std::string task(const std::string& workload, const std::string& args) const {
    std::string path = dir_ + "/" + workload + ".json";
    RunResult r = cli(
        {"task", "--workload", workload, "--args", args, "--target", "c -num-cores=2", "-o", path});
    EXPECT_TRUE(r.status.success()) << r.err;
    return path;
  }
  json tune(const std::vector<std::string>& extra) const {
    std::vector<std::string> args = {"tune", "--json", "--batch-size", "16"};
    args.insert(args.end(), extra.begin(), extra.end());
    RunResult r = cli(args);
    EXPECT_EQ(r.status.code, 0) << r.out << r.err;
    return json::parse(r.out);
  }

  std::string dir_;
};

TEST_F(SearchCli, SketchesOfATask) {
  RunResult r = cli({"sketches", "--task", task("matmul", "64,64,64"), "--samples", "2"});
  ASSERT_TRUE(r.status.success()) << r.err;
  EXPECT_NE(r.out.find("sketch 0: multi_level_tiling(matmul)"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("tile_with_fusion(matmul.local, level 2)"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("sample 1:"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("level 2) layout_rewrite(A) layout_rewrite(B)"), std::string::npos) << r.out;
  RunResult j = cli({"sketches", "--task", task("matmul", "64,64,64"), "--json"});
  EXPECT_EQ(json::parse(j.out).size(), 6u);  // three structures, each also packed
}

// Both policies from the command line, their logs, a cost model trained on
// them, and the best schedule built. Which policy finds faster programs is
// not asserted here (timings never go in tests): the search's edge over
// random schedules is tested under a deterministic runner (evolution_test.cc,
// FindsFasterProgramsThanRandomSearchForTheSameTrials), and bench/ measures
// it for real.
TEST_F(SearchCli, BothPoliciesTuneTrainAModelAndApplyTheBest) {
  std::string t = task("matmul", "128,128,128");
  json search = tune(
      {"--task", t, "--trials", "48", "--log", dir_ + "/search.log", "--check", "--confirm", "0"});
  json random = tune({"--task", t, "--trials", "48", "--log", dir_ + "/random.log", "--policy",
                      "random", "--confirm", "0"});
  for (const json* run : {&search, &random}) {
    EXPECT_GT((*run)["tasks"][0]["best_gflops"].get<double>(), 0) << run->dump();
  }
  EXPECT_EQ(search["trials"], 48);
  for (const char* key : {"search_s", "training_s", "build_s", "run_s", "kernel_s", "other_s"}) {
    EXPECT_TRUE(search["time"].contains(key)) << key;
  }

  // A model trained on the log starts the next run; apply builds the best.
  std::string model = dir_ + "/model.json";
  RunResult trained = cli({"train-model", dir_ + "/search.log", dir_ + "/random.log", "-o", model});
  ASSERT_TRUE(trained.status.success()) << trained.err;
  EXPECT_NE(trained.out.find("trained on 96 programs"), std::string::npos) << trained.out;
  json warm = tune(
      {"--task", t, "--trials", "16", "--log", dir_ + "/warm.log", "--cost-model-file", model});
  EXPECT_EQ(warm["trials"], 16);

  std::string library = dir_ + "/kernel.so";
  RunResult applied =
      cli({"apply", "--log", dir_ + "/search.log", "--task", t, "-o", library, "--emit", "c"});
  ASSERT_TRUE(applied.status.success()) << applied.err;
  EXPECT_NE(applied.out.find("int32_t kernel(void** args)"), std::string::npos);
  void* handle = dlopen(library.c_str(), RTLD_NOW | RTLD_LOCAL);
  ASSERT_NE(handle, nullptr) << dlerror();
  EXPECT_NE(dlsym(handle, "kernel"), nullptr);
  dlclose(handle);
  // Under another context there is no record to apply.
  RunResult other = cli({"apply", "--log", dir_ + "/search.log", "--task", t, "--opt-level", "1"});
  EXPECT_EQ(other.status.code, 1);
  EXPECT_NE(other.err.find("--any-pass-context"), std::string::npos) << other.err;
}

TEST_F(SearchCli, SeveralWeightedTasksWithProgressEvents) {
  std::string tasks = dir_ + "/tasks.jsonl";
  std::ofstream(tasks)
      << R"({"workload": "matmul", "args": "64,64,64", "target": "c -num-cores=2"})"
      << "\n"
      << R"({"workload": "dense", "args": "4,64,64", "target": "c -num-cores=2", "weight": 3})"
      << "\n";
  std::string events = dir_ + "/progress.jsonl";
  json out = tune(
      {"--tasks", tasks, "--trials", "48", "--log", dir_ + "/two.log", "--progress-json", events});
  ASSERT_EQ(out["tasks"].size(), 2u);
  EXPECT_EQ(out["tasks"][1]["weight"], 3.0);
  EXPECT_EQ(out["tasks"][0]["trials"].get<int>() + out["tasks"][1]["trials"].get<int>(), 48);
  std::ifstream in(events);
  std::vector<json> lines;
  for (std::string line; std::getline(in, line);) lines.push_back(json::parse(line));
  ASSERT_GE(lines.size(), 4u);
  EXPECT_EQ(lines.front()["event"], "start");
  EXPECT_EQ(lines[1]["event"], "batch");
  EXPECT_EQ(lines.back()["event"], "end");
  EXPECT_EQ(lines.back()["trials"], 48);
  EXPECT_TRUE(lines.back()["time"].contains("build_s"));
}

TEST_F(SearchCli, BadInputIsOneClearError) {
  std::string tasks = dir_ + "/bad.jsonl";
  std::ofstream(tasks) << R"({"workload": "matmul", "args": "8,8,8"})"
                       << "\n"
                       << R"({"workload": "matmul", "args": "8,8,8", "weight": -1})"
                       << "\n";
  auto error_of = [&](std::vector<std::string> args) {
    RunResult r = cli(args);
    EXPECT_EQ(r.status.code, 1) << r.out << r.err;
    return r.err;
  };
  std::string log = dir_ + "/x.log";
  EXPECT_NE(error_of({"tune", "--tasks", tasks, "--log", log}).find("bad.jsonl:2: \"weight\""),
            std::string::npos);
  std::string t = task("matmul", "8,8,8");
  RunResult negative = cli({"tune", "--task", t, "--log", log, "--time-budget", "-1"});
  EXPECT_NE(negative.status.code, 0);
  EXPECT_NE(negative.err.find("--time-budget: -1 is out of range: it must be from 0 to 1000000000"),
            std::string::npos)
      << negative.err;
  EXPECT_NE(error_of({"tune", "--task", t, "--log", log, "--policy", "annealing"})
                .find("the policies are: evolutionary, random"),
            std::string::npos);
  EXPECT_NE(error_of({"tune", "--task", t, "--log", log, "--cost-model", "gbdt"})
                .find("the cost models are: xgb, random"),
            std::string::npos);
  std::string corrupt = dir_ + "/model.json";
  std::ofstream(corrupt) << "not a model";
  EXPECT_NE(error_of({"tune", "--task", t, "--log", log, "--cost-model-file", corrupt})
                .find("is not a readable cost model"),
            std::string::npos);
  std::ofstream(dir_ + "/empty.log").flush();
  EXPECT_NE(error_of({"train-model", dir_ + "/empty.log", "-o", dir_ + "/m.json"})
                .find("cannot train a cost model"),
            std::string::npos);
  EXPECT_FALSE(fs::exists(dir_ + "/m.json"));
}

}  // namespace
}  // namespace tensortune
