// Whole models from the command line, as a new user runs them: the tasks of
// a model, a short tuning run, compiling in a fresh process with the log
// (and without it), running the result on inputs from files, and the errors
// for bad input: nothing half-written, a clear message, a non-zero exit.
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <set>
#include <sstream>

#include <nlohmann/json.hpp>

#include "tensortune/support/files.h"
#include "tensortune/support/subprocess.h"
#include "tensortune/te/npy.h"

namespace tensortune {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

const char* kTarget = "c -mcpu=native -num-cores=2";

class ModelCli : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    std::string tmpl = (fs::temp_directory_path() / "tt_model_cli_XXXXXX").string();
    ASSERT_NE(mkdtemp(tmpl.data()), nullptr);
    dir_ = tmpl;
    const std::string src = TT_SOURCE_DIR;
    RunResult a = run_captured(
        {"/usr/bin/python3", src + "/tests/models/make_models.py", "--out", dir_, "--only", "cnn"});
    ASSERT_TRUE(a.status.success()) << a.err;
    RunResult b = run_captured({"/usr/bin/python3", src + "/tests/models/make_op_models.py",
                                "--out", dir_, "--only", "odd_output_name,conv_pads_strides"});
    ASSERT_TRUE(b.status.success()) << b.err;
  }
  static void TearDownTestSuite() { fs::remove_all(dir_); }

  static RunResult cli(std::vector<std::string> args) {
    args.insert(args.begin(), TT_CLI_PATH);
    SpawnOptions o;
    o.env = {{"XDG_CACHE_HOME", dir_ + "/cache"}};
    return run_captured(args, o, std::chrono::seconds(600));
  }
  static json cli_json(std::vector<std::string> args) {
    RunResult r = cli(args);
    EXPECT_EQ(r.status.code, 0) << r.out << r.err;
    return json::parse(r.out);
  }
  static std::string cnn() { return dir_ + "/cnn.onnx"; }

  static std::string dir_;
};
std::string ModelCli::dir_;

TEST_F(ModelCli, TasksListsOperatorsShapesWeightsFlopsAndKeys) {
  json t = cli_json({"tasks", cnn(), "--target", kTarget, "--json"});
  // The second convolution (16 -> 32 channels) runs as Winograd's three
  // kernels; the first reads the NCHW image through its transpose to NHWC.
  ASSERT_EQ(t["tasks"].size(), 9u);
  EXPECT_EQ(t["kernels"], 9);
  const json& conv = t["tasks"][0];
  EXPECT_EQ(conv["operators"], "transpose+nn.conv2d+nn.bias_add+relu");
  EXPECT_EQ(conv["output_shape"], json::array({1, 32, 32, 16}));
  EXPECT_EQ(conv["weight"], 1);
  EXPECT_GT(conv["flops"].get<double>(), 8e5);
  EXPECT_EQ(conv["workload_key"].get<std::string>().substr(0, 4), "dag:");
  RunResult text = cli({"tasks", cnn(), "--target", kTarget});
  ASSERT_TRUE(text.status.success()) << text.err;
  EXPECT_NE(text.out.find("9 tasks, 9 kernel calls"), std::string::npos) << text.out;
}

TEST_F(ModelCli, ADisabledGraphPassIsSkippedByExtractionAsByCompile) {
  json direct = cli_json(
      {"tasks", cnn(), "--target", kTarget, "--disable-pass", "winograd_conv2d", "--json"});
  EXPECT_EQ(direct["tasks"].size(), 7u);
  EXPECT_EQ(direct["tasks"][2]["operators"], "nn.conv2d+nn.bias_add+relu");
  json tuned =
      cli_json({"tune", cnn(), "--target", kTarget, "--trials", "8", "--batch-size", "8",
                "--disable-pass", "winograd_conv2d", "--log", dir_ + "/direct.log", "--json"});
  EXPECT_EQ(tuned["tasks"].size(), 7u);
}

TEST_F(ModelCli, TuneThenCompileInAFreshProcessThenRun) {
  const std::string log = dir_ + "/cnn.log";
  RunResult tune = cli({"tune", cnn(), "--target", kTarget, "--trials", "24", "--batch-size", "3",
                        "--log", log, "--json"});
  ASSERT_EQ(tune.status.code, 0) << tune.out << tune.err;
  // A model's weights come from memory when it runs, and so they do when timed.
  EXPECT_NE(tune.err.find("weights evicted before every call"), std::string::npos) << tune.err;
  json tuned_run = json::parse(tune.out);
  EXPECT_EQ(tuned_run["tasks"].size(), 9u);
  EXPECT_EQ(tuned_run["trials"], 24);

  // The log alone, in another process: no extraction state carried over.
  json report = cli_json(
      {"compile", cnn(), "--target", kTarget, "--log", log, "-o", dir_ + "/cnn.tt", "--json"});
  int tuned = 0;
  for (const auto& t : report["tasks"]) {
    tuned += t["tuned"].get<bool>();
    if (!t["tuned"].get<bool>()) {
      EXPECT_FALSE(t["why"].get<std::string>().empty());
    }
  }
  EXPECT_GE(tuned, 4) << report.dump(1);
  EXPECT_LE(report["planned_bytes"], report["intermediate_bytes"]);

  // Run on the generator's input, as .npy and as an ONNX TensorProto: the same outputs.
  json run = cli_json({"run", dir_ + "/cnn.tt", "--input", "input=" + dir_ + "/cnn.input_0.npy",
                       "--repeat", "3", "--output-dir", dir_ + "/out_npy", "--json"});
  EXPECT_GT(run["latency_s"].get<double>(), 0);
  EXPECT_EQ(run["latencies_s"].size(), 3u);
  ASSERT_EQ(run["outputs"].size(), 1u);
  EXPECT_EQ(run["outputs"][0]["shape"], json::array({1, 10}));
  EXPECT_EQ(run["outputs"][0]["dtype"], "float32");
  std::string name = run["outputs"][0]["name"];
  cli_json({"run", dir_ + "/cnn.tt", "--input", "input=" + dir_ + "/cnn.input_0.pb", "--threads",
            "1", "--output-dir", dir_ + "/out_pb", "--json"});
  te::NDArray a = te::parse_npy(*read_file_if_exists(dir_ + "/out_npy/" + name + ".npy"), "a");
  te::NDArray b = te::parse_npy(*read_file_if_exists(dir_ + "/out_pb/" + name + ".npy"), "b");
  EXPECT_TRUE(te::allclose(a, b));

  // The profile: each call's speed from its task's FLOPs (in the report),
  // and the time the log recorded for it alone where it was tuned.
  double conv_flops = 0;
  for (const auto& t : report["tasks"]) {
    if (t["description"].get<std::string>().find("conv2d") != std::string::npos) {
      conv_flops = t["flops"].get<double>();
    }
  }
  EXPECT_GT(conv_flops, 0) << report.dump(1);
  RunResult profile =
      cli({"run", dir_ + "/cnn.tt", "--repeat", "2", "--threads", "1", "--profile"});
  ASSERT_EQ(profile.status.code, 0) << profile.err;
  EXPECT_NE(profile.err.find("GFLOP/s  alone ms  task"), std::string::npos) << profile.err;
  // Which threads "alone" was timed on, beside this run's.
  EXPECT_NE(profile.err.find("on the 2 threads of the target it was compiled for; this run used 1"),
            std::string::npos)
      << profile.err;
  int rows_with_both = 0;
  std::istringstream lines(profile.err);
  for (std::string line; std::getline(lines, line);) {
    double ms = 0, share = 0, gflops = 0, alone = 0;
    rows_with_both +=
        std::sscanf(line.c_str(), "%*d %lf %lf%% %lf %lf", &ms, &share, &gflops, &alone) == 4 &&
        gflops > 0 && alone > 0;
  }
  EXPECT_GE(rows_with_both, 1) << profile.err;
  // With --json, the same rows in the order the calls run, each with its
  // task's key where it has a task.
  json profiled =
      cli_json({"run", dir_ + "/cnn.tt", "--repeat", "2", "--threads", "1", "--profile", "--json"});
  ASSERT_TRUE(profiled.contains("profile")) << profiled.dump(1);
  std::set<std::string> compiled_keys, profiled_keys;
  for (const auto& t : report["tasks"]) compiled_keys.insert(t["workload_key"].get<std::string>());
  double shares = 0;
  for (size_t i = 0; i < profiled["profile"].size(); ++i) {
    const json& row = profiled["profile"][i];
    EXPECT_EQ(row["step"], i);
    EXPECT_GT(row["mean_s"].get<double>(), 0);
    shares += row["share"].get<double>();
    if (row["workload_key"].is_string()) profiled_keys.insert(row["workload_key"]);
  }
  EXPECT_NEAR(shares, 1.0, 1e-9);
  EXPECT_EQ(profiled_keys, compiled_keys);

  // Every task tuned or an error: --fail-on-default, with a log that misses some.
  if (tuned < static_cast<int>(report["tasks"].size())) {
    RunResult strict = cli({"compile", cnn(), "--target", kTarget, "--log", log,
                            "--fail-on-default", "-o", dir_ + "/strict.tt"});
    EXPECT_NE(strict.status.code, 0);
    EXPECT_NE(strict.err.find("have no tuned schedule (--fail-on-default)"), std::string::npos)
        << strict.err;
    EXPECT_FALSE(fs::exists(dir_ + "/strict.tt"));
  }
  // The log was tuned for another target.
  RunResult other = cli({"compile", cnn(), "--target", "c -mattr=avx2 -num-cores=7", "--log", log,
                         "-o", dir_ + "/other.tt"});
  EXPECT_NE(other.status.code, 0);
  EXPECT_NE(other.err.find("the log's records of this model's tasks are for another target"),
            std::string::npos)
      << other.err;
  EXPECT_FALSE(fs::exists(dir_ + "/other.tt"));
}

TEST_F(ModelCli, RunWritesEachOutputAsAFileNamedAfterIt) {
  std::string model = dir_ + "/odd_output_name.onnx";
  RunResult c = cli({"compile", model, "--target", kTarget, "-o", dir_ + "/odd.tt"});
  ASSERT_TRUE(c.status.success()) << c.err;
  EXPECT_NE(c.out.find("0 of 1 tasks tuned"), std::string::npos) << c.out;
  // Random inputs when none is given; the name made a file name.
  json run = cli_json({"run", dir_ + "/odd.tt", "--output-dir", dir_ + "/odd_out", "--json"});
  EXPECT_EQ(run["outputs"][0]["name"], "scores:0/final");
  EXPECT_TRUE(fs::exists(dir_ + "/odd_out/scores_0_final.npy"));
}

TEST_F(ModelCli, BadInputIsAClearErrorAndWritesNothing) {
  std::string model = dir_ + "/conv_pads_strides.onnx";
  RunResult c = cli({"compile", model, "--target", kTarget, "-o", dir_ + "/conv.tt"});
  ASSERT_TRUE(c.status.success()) << c.err;
  // An input file of another shape, an unknown input, a missing file.
  write_file_atomically(dir_ + "/wrong.npy",
                        te::npy_bytes(te::NDArray(ir::DataType::float32(), {1, 3, 9, 8})));
  RunResult r = cli({"run", dir_ + "/conv.tt", "--input", "x=" + dir_ + "/wrong.npy",
                     "--output-dir", dir_ + "/o1"});
  EXPECT_NE(r.status.code, 0);
  EXPECT_NE(r.err.find("wrong.npy holds float32[1, 3, 9, 8] but input 'x' is float32[1, 3, 9, 9]"),
            std::string::npos)
      << r.err;
  EXPECT_FALSE(fs::exists(dir_ + "/o1"));
  r = cli({"run", dir_ + "/conv.tt", "--input", "y=" + dir_ + "/wrong.npy"});
  EXPECT_NE(r.err.find("--input names 'y', which is no input of the model; its inputs are: x"),
            std::string::npos)
      << r.err;
  r = cli({"run", dir_ + "/conv.tt", "--input", "x=" + dir_ + "/missing.npy"});
  EXPECT_NE(r.status.code, 0);
  EXPECT_NE(r.err.find("missing.npy"), std::string::npos) << r.err;
  // Not a model; a truncated model; a malformed --input-shape.
  r = cli({"run", dir_, "--repeat", "1"});
  EXPECT_NE(r.err.find("is not a compiled model"), std::string::npos) << r.err;
  std::string bytes = *read_file_if_exists(cnn());
  write_file_atomically(dir_ + "/truncated.onnx", bytes.substr(0, bytes.size() / 3));
  r = cli({"compile", dir_ + "/truncated.onnx", "-o", dir_ + "/truncated.tt"});
  EXPECT_NE(r.status.code, 0);
  EXPECT_NE(r.err.find("truncated.onnx"), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(dir_ + "/truncated.tt"));
  r = cli({"tune", cnn(), "--trials", "1", "--log", dir_ + "/never.log", "--flush-weights",
           "--warm-weights"});
  EXPECT_NE(r.status.code, 0);
  EXPECT_NE(r.err.find("--flush-weights excludes --warm-weights"), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(dir_ + "/never.log"));
  r = cli({"tasks", cnn(), "--input-shape", "input=1,3,x"});
  EXPECT_NE(r.err.find("--input-shape 'input=1,3,x': 'x' is not a dimension"), std::string::npos)
      << r.err;
  // A model that uses what is not supported: every gap at once, in the
  // error and in --json.
  r = cli({"tasks", dir_ + "/bad_many_gaps.onnx", "--json"});
  EXPECT_EQ(r.status.code, 1);
  EXPECT_NE(r.err.find("the model uses 4 things tensortune does not support"), std::string::npos)
      << r.err;
  json gaps = json::parse(r.out)["unsupported"];
  ASSERT_EQ(gaps.size(), 4u) << r.out;
  EXPECT_EQ(gaps[1]["what"], "Bernoulli");
  EXPECT_EQ(gaps[1]["where"], json::array({"Bernoulli_0", "Bernoulli_2"}));
  r = cli({"compile", dir_ + "/bad_many_gaps.onnx", "-o", dir_ + "/gaps.tt"});
  EXPECT_NE(r.status.code, 0);
  EXPECT_NE(
      r.err.find("operator Bernoulli is not supported (2 nodes: 'Bernoulli_0', 'Bernoulli_2')"),
      std::string::npos)
      << r.err;
  EXPECT_FALSE(fs::exists(dir_ + "/gaps.tt"));
}

}  // namespace
}  // namespace tensortune
