// What a user hands the command line cannot hurt them: an output is never
// written over what they made (or over an input), a task file cannot choose
// the program that runs, and a name given twice, a pass that does not
// exist or two outputs whose file names collide are errors or kept apart,
// never silently merged.
#include <gtest/gtest.h>

#include <filesystem>

#include <nlohmann/json.hpp>

#include "tensortune/support/files.h"
#include "tensortune/support/subprocess.h"
#include "tensortune/te/npy.h"

namespace tensortune {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

const char* kTarget = "c -num-cores=2";

class TrustCli : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    std::string tmpl = (fs::temp_directory_path() / "tt_trust_cli_XXXXXX").string();
    ASSERT_NE(mkdtemp(tmpl.data()), nullptr);
    dir_ = tmpl;
    RunResult r = run_captured(
        {"/usr/bin/python3", std::string(TT_SOURCE_DIR) + "/tests/models/make_op_models.py",
         "--out", dir_ + "/models", "--only", "odd_output_name,colliding_output_names"});
    ASSERT_TRUE(r.status.success()) << r.err;
  }
  static void TearDownTestSuite() { fs::remove_all(dir_); }

  static RunResult cli(std::vector<std::string> args, const std::string& cwd = "") {
    args.insert(args.begin(), TT_CLI_PATH);
    SpawnOptions o;
    o.env = {{"XDG_CACHE_HOME", dir_ + "/cache"}};
    o.working_dir = cwd;
    return run_captured(args, o, std::chrono::seconds(300));
  }
  static void expect_error(const RunResult& r, const std::string& needle) {
    EXPECT_NE(r.status.code, 0) << r.out;
    EXPECT_NE(r.err.find(needle), std::string::npos) << r.err;
    EXPECT_EQ(r.err.find("Segmentation"), std::string::npos) << r.err;
  }
  static std::string model() { return dir_ + "/models/odd_output_name.onnx"; }

  static std::string dir_;
};
std::string TrustCli::dir_;

TEST_F(TrustCli, CompileNeverWritesOverWhatTheUserMade) {
  // A folder holding the model and a file of the user's.
  const std::string work = dir_ + "/work";
  fs::create_directories(work);
  fs::copy_file(model(), work + "/m.onnx");
  write_file_atomically(work + "/notes.txt", "mine");
  const std::string bytes = *read_file_if_exists(work + "/m.onnx");
  auto untouched = [&] {
    EXPECT_EQ(*read_file_if_exists(work + "/notes.txt"), "mine");
    EXPECT_EQ(*read_file_if_exists(work + "/m.onnx"), bytes);
  };
  expect_error(cli({"compile", "m.onnx", "--target", kTarget, "-o", "."}, work),
               "contains the input 'm.onnx'");
  untouched();
  expect_error(cli({"compile", "m.onnx", "--target", kTarget, "-o", "m.onnx"}, work),
               "is the input 'm.onnx'");
  untouched();
  expect_error(cli({"compile", work + "/m.onnx", "--target", kTarget, "-o", dir_}),
               "contains the input");
  expect_error(cli({"compile", work + "/m.onnx", "--target", kTarget, "-o", work + "/notes.txt"}),
               "exists and is not a folder");
  untouched();
  fs::create_directories(work + "/results");
  write_file_atomically(work + "/results/r.csv", "1,2");
  expect_error(cli({"compile", work + "/m.onnx", "--target", kTarget, "-o", work + "/results"}),
               "is not a compiled model tensortune wrote");
  EXPECT_EQ(*read_file_if_exists(work + "/results/r.csv"), "1,2");
  // Its own output it replaces, again and again.
  for (int i = 0; i < 2; ++i) {
    RunResult ok = cli({"compile", work + "/m.onnx", "--target", kTarget, "-o", work + "/m.tt"});
    ASSERT_TRUE(ok.status.success()) << ok.err;
  }
  // A log given as the output.
  write_file_atomically(work + "/tune.log", "");
  expect_error(cli({"compile", work + "/m.onnx", "--target", kTarget, "--log", work + "/tune.log",
                    "-o", work + "/tune.log"}),
               "is the input");
  untouched();
}

TEST_F(TrustCli, ATaskFileCannotChooseTheCompiler) {
  // A compiler that leaves a mark: it must never run.
  const std::string mark = dir_ + "/compiler-ran";
  const std::string fake = dir_ + "/fake-cc";
  write_file_atomically(fake, "#!/bin/sh\ntouch " + mark + "\nexit 1\n");
  fs::permissions(fake, fs::perms::owner_all);
  const std::string task = dir_ + "/evil_task.json";
  RunResult made = cli({"task", "--workload", "matmul", "--args", "8,8,8", "--target",
                        "c -compiler=" + fake, "-o", task});
  ASSERT_TRUE(made.status.success()) << made.err;
  expect_error(cli({"measure", "--task", task, "--state", "default"}),
               "sets -compiler=" + fake + ", which names a program to run");
  expect_error(cli({"tune", "--task", task, "--trials", "2", "--log", dir_ + "/evil.log"}),
               "names a program to run");
  expect_error(cli({"verify", "--task", task}), "names a program to run");
  write_file_atomically(dir_ + "/tasks.jsonl",
                        json{{"workload", "matmul"},
                             {"args", "8,8,8"},
                             {"target", "c -cflags=\"-O3 -fplugin=/tmp/x.so\""}}
                                .dump() +
                            "\n");
  expect_error(
      cli({"tune", "--tasks", dir_ + "/tasks.jsonl", "--trials", "2", "--log", dir_ + "/e.log"}),
      "-cflags=-O3 -fplugin=/tmp/x.so");
  EXPECT_FALSE(fs::exists(mark));
  EXPECT_FALSE(fs::exists(dir_ + "/evil.log"));
  // Opting in runs it (and so fails to compile, as this compiler does).
  RunResult trusted =
      cli({"measure", "--task", task, "--state", "default", "--trust-file-compiler"});
  EXPECT_TRUE(fs::exists(mark)) << trusted.err;
}

TEST_F(TrustCli, NamesGivenTwiceOrUnknownAreErrors) {
  expect_error(cli({"tasks", model(), "--input-shape", "x=3", "--input-shape", "x=4"}),
               "--input-shape names 'x' twice");
  expect_error(cli({"tasks", model(), "--disable-pass", "fold_constant"}),
               "--disable-pass names 'fold_constant', which is no pass; the passes are: ");
  expect_error(
      cli({"tasks", model(), "--config", "testing.fail_graph_pass=nothing"}),
      "config option 'testing.fail_graph_pass' must be one of \"\", \"simplify_inference\"");
  RunResult c = cli({"compile", model(), "--target", kTarget, "-o", dir_ + "/odd.tt"});
  ASSERT_TRUE(c.status.success()) << c.err;
  write_file_atomically(dir_ + "/x.npy", te::npy_bytes(te::NDArray(ir::DataType::float32(), {3})));
  expect_error(cli({"run", dir_ + "/odd.tt", "--input", "x=" + dir_ + "/x.npy", "--input",
                    "x=" + dir_ + "/x.npy"}),
               "--input gives 'x' twice");
  expect_error(cli({"run", dir_ + "/odd.tt", "--output-dir", dir_ + "/odd.tt/out"}),
               "is inside the compiled model");
}

TEST_F(TrustCli, OutputsWhoseFileNamesCollideGetAFileEach) {
  const std::string model = dir_ + "/models/colliding_output_names.onnx";
  RunResult c = cli({"compile", model, "--target", kTarget, "-o", dir_ + "/collide.tt"});
  ASSERT_TRUE(c.status.success()) << c.err;
  RunResult r = cli({"run", dir_ + "/collide.tt", "--output-dir", dir_ + "/collide_out", "--json"});
  ASSERT_TRUE(r.status.success()) << r.err;
  json out = json::parse(r.out)["outputs"];
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(out[0]["name"], "a/b");
  EXPECT_EQ(out[0]["file"], dir_ + "/collide_out/a_b.npy");
  EXPECT_EQ(out[1]["name"], "a_b");
  EXPECT_EQ(out[1]["file"], dir_ + "/collide_out/a_b_2.npy");
  // Relu and Neg of the same input: the two files differ.
  EXPECT_NE(*read_file_if_exists(dir_ + "/collide_out/a_b.npy"),
            *read_file_if_exists(dir_ + "/collide_out/a_b_2.npy"));
}

TEST_F(TrustCli, MergeKeepsEveryLineOrWritesNothing) {
  write_file_atomically(dir_ + "/torn.log", "{\"version\": 3, \"not a record\n");
  expect_error(cli({"records", "merge", dir_ + "/torn.log", "-o", dir_ + "/merged.log"}),
               "torn.log:1: ");
  EXPECT_FALSE(fs::exists(dir_ + "/merged.log"));
  write_file_atomically(dir_ + "/empty.log", "");
  expect_error(cli({"records", "merge", dir_ + "/empty.log", "-o", dir_ + "/empty.log"}),
               "is the input");
  expect_error(cli({"records", "distill", dir_ + "/empty.log", "-o", dir_ + "/empty.log"}),
               "is the input");
}

}  // namespace
}  // namespace tensortune
