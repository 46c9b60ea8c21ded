// A compiled model is data read back from disk: every tampering with its
// folder (a plan pointing outside its buffers, a truncated library, flipped
// weights, a missing manifest) is a clear error when it is loaded, never a
// signal or a wrong answer; and the folder is written so that nothing the
// user made is replaced or removed.
#include "tensortune/runtime/compiled_model.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <functional>

#include "common/module_cache.h"
#include "common/node_samples.h"
#include "common/test_util.h"
#include "tensortune/graph/compile.h"
#include "tensortune/object/serialize.h"
#include "tensortune/support/files.h"
#include "tensortune/support/hash.h"
#include "tensortune/te/operator.h"

namespace tensortune::runtime {
namespace {

namespace fs = std::filesystem;
const ir::DataType kF32 = ir::DataType::float32();

/// The sample plan of node_samples(): one kernel with a packed weight, a
/// second kernel, and a copy to a second output.
ModelPlan sample_plan() {
  ObjectPtr node = testing::node_samples().at("runtime.ModelPlan")();
  return ModelPlan(std::dynamic_pointer_cast<const ModelPlanNode>(node));
}

/// `plan` with `edit` applied to a deep copy of it.
ModelPlan edited(const ModelPlan& plan, const std::function<void(ModelPlanNode&)>& edit) {
  // Through the codec: every node a new one, so that edit can change any.
  nlohmann::json saved = save_json(plan);
  ObjectPtr copy = load_json(saved);
  auto node =
      std::const_pointer_cast<ModelPlanNode>(std::dynamic_pointer_cast<const ModelPlanNode>(copy));
  edit(*node);
  return ModelPlan(node);
}

template <class T>
T& mut(const Ref<T>& r) {
  return const_cast<T&>(*r);
}

TEST(Plan, TheSamplePlanIsValidAndEveryInconsistencyIsNamed) {
  ModelPlan plan = sample_plan();
  check_plan(*plan);
  struct Case {
    const char* what;
    std::function<void(ModelPlanNode&)> edit;
    const char* message;
  };
  const std::vector<Case> cases = {
      {"input buffer id out of range", [](ModelPlanNode& p) { mut(p.inputs[0]).buffer = 9; },
       "inputs[0].buffer is buffer 9, but the plan has 6 buffers"},
      {"output on an arena buffer", [](ModelPlanNode& p) { mut(p.outputs[0]).buffer = 3; },
       "outputs[0].buffer is buffer 3, a arena buffer, not an output one"},
      {"output shape unlike its buffer",
       [](ModelPlanNode& p) {
         mut(p.outputs[0]).shape = {2, 2};
       },
       "outputs[0] is float32[2, 2], but its buffer 4 is float32[4]"},
      {"arena offset past the arena", [](ModelPlanNode& p) { mut(p.buffers[3]).offset = 60; },
       "buffers[3].offset is 60 for 16 bytes, outside the arena_bytes 64"},
      {"negative arena offset", [](ModelPlanNode& p) { mut(p.buffers[3]).offset = -8; },
       "buffers[3].offset is -8"},
      {"constant past weights.bin", [](ModelPlanNode& p) { p.weights_bytes = 70; },
       "buffers[1].offset is 64 for 16 bytes, outside weights.bin's weights_bytes 70"},
      {"constant bytes unlike its shape", [](ModelPlanNode& p) { mut(p.buffers[1]).bytes = 12; },
       "buffers[1].bytes is 12, but float32[4] takes 16"},
      {"packed element count too large", [](ModelPlanNode& p) { mut(p.buffers[2]).bytes = 64; },
       "the packer 'k0_pack' reads 16 and writes 32 bytes, but buffers[2].source has 16 and "
       "buffers[2] 64"},
      {"packed source not before it", [](ModelPlanNode& p) { mut(p.buffers[2]).source = 4; },
       "buffers[2].source is 4, not a buffer before it"},
      {"copy index out of range", [](ModelPlanNode& p) { mut(p.steps[2]).copy_from = 17; },
       "steps[2].copy_from is buffer 17, but the plan has 6 buffers"},
      {"copy into an input", [](ModelPlanNode& p) { mut(p.steps[2]).copy_to = 0; },
       "steps[2].copy_to is a input buffer, not an output"},
      {"step argument out of range", [](ModelPlanNode& p) { mut(p.steps[0]).args[1] = -1; },
       "steps[0].args[1] is buffer -1, but the plan has 6 buffers"},
      {"step argument smaller than the kernel takes",
       [](ModelPlanNode& p) {
         mut(p.steps[1]).args = {3, 2};
       },
       "steps[1].args[1] is buffer 2 of 32 bytes, but 'k1' takes 16 bytes there"},
      {"too few arguments",
       [](ModelPlanNode& p) {
         mut(p.steps[0]).args = {0, 2};
       },
       "steps[0] passes 2 arguments to 'k0', which takes 3"},
      {"unknown function", [](ModelPlanNode& p) { mut(p.steps[0]).function = "k9"; },
       "steps[0].function names the function 'k9', which the plan's functions do not list"},
      {"arena too large", [](ModelPlanNode& p) { p.arena_bytes = int64_t{1} << 62; },
       "arena_bytes is 4611686018427387904, not in [0, 2^47]"},
      {"shape overflowing int64",
       [](ModelPlanNode& p) {
         mut(p.buffers[0]).shape = {int64_t{1} << 40, int64_t{1} << 40};
       },
       "has more elements than a 64-bit integer can count"},
  };
  for (const Case& c : cases) {
    ModelPlan bad = edited(plan, c.edit);
    EXPECT_TT_ERROR(check_plan(*bad), kInvalidArgument, c.message) << c.what;
    // Loading runs the same check.
    EXPECT_THROW(load_string(save_string(bad)), Error) << c.what;
  }
}

class ModelFolder : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string tmpl = (fs::temp_directory_path() / "tt_runtime_XXXXXX").string();
    ASSERT_NE(mkdtemp(tmpl.data()), nullptr);
    dir_ = tmpl;
    // Two denses (an intermediate in the arena), and a view of the result
    // as a second output.
    auto x = graph::input("x", {4, 16}, kF32);
    auto dense = [](graph::Value v, int64_t in, uint64_t seed) {
      return graph::call(
          "relu",
          {graph::call("nn.dense",
                       {v, graph::constant(te::NDArray::random(kF32, {8, in}, seed), "w")})});
    };
    graph::Value y = dense(dense(x, 16, 1), 8, 2);
    auto reshape = make_node<te::ReshapeAttrsNode>();
    reshape->shape = {8, 4};
    graph::Value view = graph::call("reshape", {y}, te::Attrs(reshape));
    graph_ = graph::Graph::make({x}, {y, view}, {"y", "y_view"});
    compile("model.tt");
  }
  void TearDown() override { fs::remove_all(dir_); }
  void compile(const std::string& name, std::vector<std::string> protect = {}) {
    graph::CompileOptions o;
    o.target = ir::Target::parse("c -num-cores=2");
    o.module_options = testing::shared_cache_options();
    o.protect = std::move(protect);
    graph::compile_model(graph_, o, path(name));
  }
  std::string path(const std::string& name) const { return dir_ + "/" + name; }
  std::string model() const { return path("model.tt"); }
  /// Rewrites `file` of the model and its size and hash in the manifest, so
  /// that only the plan check stands between it and the runtime.
  void rewrite_consistently(const std::string& file, const std::string& bytes) {
    write_file_atomically(model() + "/" + file, bytes);
    ObjectPtr m = load_string(*read_file_if_exists(model() + "/manifest.json"));
    auto manifest = std::const_pointer_cast<ManifestNode>(
        std::dynamic_pointer_cast<const ManifestNode>(load_json(save_json(m))));
    for (auto& f : manifest->files) {
      if (f->name != file) continue;
      mut(f).bytes = static_cast<int64_t>(bytes.size());
      mut(f).sha256 = sha256_hex(bytes);
    }
    write_file_atomically(model() + "/manifest.json", save_string(Manifest(manifest)));
  }
  std::vector<te::NDArray> inputs() const { return {te::NDArray::random(kF32, {4, 16}, 3)}; }

  std::string dir_;
  graph::Graph graph_;
};

TEST_F(ModelFolder, AnUntouchedModelLoadsVerifiedAndRuns) {
  CompiledModel m = CompiledModel::load(model());
  EXPECT_EQ(m.run(inputs()).size(), 2u);
  for (const char* f : {"manifest.json", "plan.json", "model.so", "weights.bin"}) {
    EXPECT_TRUE(fs::exists(model() + "/" + f)) << f;
  }
}

TEST_F(ModelFolder, FlippedWeightsAreRefusedUnlessVerificationIsSkipped) {
  std::string weights = *read_file_if_exists(model() + "/weights.bin");
  weights[weights.size() / 2] ^= 0x7f;
  write_file_atomically(model() + "/weights.bin", weights);
  EXPECT_TT_ERROR(CompiledModel::load(model()), kParse, "weights.bin has SHA-256 ");
  // --no-verify: the sizes still match, so it loads (and computes from the
  // flipped weight, as the user asked).
  CompiledModel m = CompiledModel::load(model(), LoadOptions{false});
  EXPECT_EQ(m.run(inputs()).size(), 2u);
}

TEST_F(ModelFolder, ATruncatedLibraryIsAnErrorNotABusError) {
  std::string library = *read_file_if_exists(model() + "/model.so");
  write_file_atomically(model() + "/model.so", library.substr(0, library.size() / 2));
  EXPECT_TT_ERROR(CompiledModel::load(model()), kParse, "model.so has ");
  EXPECT_TT_ERROR(CompiledModel::load(model(), LoadOptions{false}), kParse,
                  "but the manifest says");
  // Even when the manifest is made to agree, the library is refused by the
  // loader, from memory: no mapping of a file that can shrink under it.
  rewrite_consistently("model.so", library.substr(0, library.size() / 2));
  EXPECT_THROW(CompiledModel::load(model()), Error);
}

TEST_F(ModelFolder, APlanPointingOutsideItsBuffersIsRefusedWhenLoaded) {
  ModelFiles files = read_model_folder(model());
  struct Case {
    const char* what;
    std::function<void(ModelPlanNode&)> edit;
    const char* message;
  };
  const std::vector<Case> cases = {
      {"input buffer out of range", [](ModelPlanNode& p) { mut(p.inputs[0]).buffer = 1000; },
       "inputs[0].buffer is buffer 1000"},
      {"output buffer out of range", [](ModelPlanNode& p) { mut(p.outputs[1]).buffer = -3; },
       "outputs[1].buffer is buffer -3"},
      {"arena offset past the arena",
       [](ModelPlanNode& p) {
         int arena = 0;
         for (auto& b : p.buffers) {
           if (b->kind == BufferKind::kArena) mut(b).offset = p.arena_bytes, ++arena;
         }
         ASSERT_GT(arena, 0);
       },
       "outside the arena_bytes"},
      {"a view past the end of its source",
       [](ModelPlanNode& p) {
         auto view = make_node<PlanBufferNode>(*p.buffers[0]);
         view->kind = BufferKind::kView;
         view->source = 0;
         view->offset = p.buffers[0]->bytes - 4;
         view->bytes = 8;
         p.buffers.emplace_back(std::move(view));
       },
       "for 8 bytes, outside its source's"},
      {"a view of a view",
       [](ModelPlanNode& p) {
         for (int k = 0; k < 2; ++k) {
           auto view = make_node<PlanBufferNode>(*p.buffers[0]);
           view->kind = BufferKind::kView;
           view->source = k == 0 ? 0 : static_cast<int64_t>(p.buffers.size()) - 1;
           p.buffers.emplace_back(std::move(view));
         }
       },
       "a view buffer; a view lies in an input, constant, arena or output buffer"},
      {"a step's output smaller than its kernel writes",
       [](ModelPlanNode& p) {
         for (auto& b : p.buffers) {
           if (b->kind == BufferKind::kOutput) mut(b).shape = {2, 2};
         }
       },
       "takes"},
  };
  for (const Case& c : cases) {
    std::string bytes = save_string(edited(files.plan, c.edit), 1);
    // Caught by the manifest's hash; and without it, by the plan check.
    write_file_atomically(model() + "/plan.json", bytes);
    EXPECT_TT_ERROR(CompiledModel::load(model()), kParse, "plan.json has") << c.what;
    rewrite_consistently("plan.json", bytes);
    EXPECT_TT_ERROR(CompiledModel::load(model()), kParse, c.message) << c.what;
    rewrite_consistently("plan.json", save_string(files.plan, 1));
  }
  // A plan naming a function the library lacks.
  rewrite_consistently("plan.json", save_string(edited(files.plan,
                                                       [](ModelPlanNode& p) {
                                                         mut(p.functions[0]).name = "nowhere";
                                                         mut(p.steps[0]).function = "nowhere";
                                                       }),
                                                1));
  EXPECT_TT_ERROR(CompiledModel::load(model()), kParse, "which model.so does not define");
}

// The library states what its kernels take: a plan that agrees with itself
// but not with the library (another model's library, with its manifest
// made to agree) is refused before any call.
TEST_F(ModelFolder, APlanIsCheckedAgainstWhatTheLibraryStates) {
  auto x = graph::input("x", {4, 32}, kF32);
  graph::Value y = graph::call(
      "relu",
      {graph::call("nn.dense", {x, graph::constant(te::NDArray::random(kF32, {8, 32}, 1), "w")})});
  graph_ = graph::Graph::make({x}, {y}, {"y"});
  compile("other.tt");
  rewrite_consistently("model.so", *read_file_if_exists(path("other.tt/model.so")));
  EXPECT_TT_ERROR(CompiledModel::load(model()), kParse, "but model.so's takes [");
}

TEST_F(ModelFolder, AFolderWithoutAManifestIsNoModel) {
  fs::remove(model() + "/manifest.json");
  EXPECT_TT_ERROR(CompiledModel::load(model()), kNotFound,
                  "is not a compiled model (no manifest.json)");
  EXPECT_TT_ERROR(CompiledModel::load(path("absent")), kNotFound,
                  "is not a compiled model (no such folder)");
}

TEST_F(ModelFolder, OnlyACompiledModelItWroteIsReplaced) {
  // Replacing a compiled model: the new one in place, nothing left beside it.
  compile("model.tt");
  CompiledModel::load(model());
  for (const auto& e : fs::directory_iterator(dir_)) {
    EXPECT_EQ(e.path().filename(), "model.tt") << e.path();
  }
  // A folder of the user's, a file of the user's, a model with a file added.
  fs::create_directories(path("mine"));
  write_file_atomically(path("mine/notes.txt"), "keep me");
  EXPECT_TT_ERROR(compile("mine"), kInvalidArgument,
                  "exists and is not a compiled model tensortune wrote");
  EXPECT_EQ(*read_file_if_exists(path("mine/notes.txt")), "keep me");
  write_file_atomically(path("file.txt"), "keep me too");
  EXPECT_TT_ERROR(compile("file.txt"), kInvalidArgument, "exists and is not a folder");
  EXPECT_EQ(*read_file_if_exists(path("file.txt")), "keep me too");
  write_file_atomically(model() + "/extra.txt", "added");
  EXPECT_TT_ERROR(compile("model.tt"), kInvalidArgument, "also holds 'extra.txt'");
  EXPECT_EQ(*read_file_if_exists(model() + "/extra.txt"), "added");
  // An output that is, or contains, an input.
  fs::create_directories(path("in"));
  write_file_atomically(path("in/m.onnx"), "model");
  EXPECT_TT_ERROR(compile("in/m.onnx", {path("in/m.onnx")}), kInvalidArgument, "is the input");
  EXPECT_TT_ERROR(compile("in", {path("in/m.onnx")}), kInvalidArgument, "contains the input");
  EXPECT_TT_ERROR(compile(".", {path("in/m.onnx")}), kInvalidArgument, "contains the input");
  EXPECT_EQ(*read_file_if_exists(path("in/m.onnx")), "model");
  // Nothing half-written anywhere.
  for (const auto& e : fs::recursive_directory_iterator(dir_)) {
    EXPECT_EQ(e.path().filename().string().find(".tmp"), std::string::npos) << e.path();
  }
}

}  // namespace
}  // namespace tensortune::runtime
