// ONNX import against ONNX Runtime: every single-operator edge case of
// tests/models/make_op_models.py and the models of make_models.py
// (an MLP, a CNN with batch norm and pooling, ResNet-18, transformer encoder
// blocks) imported, compiled with default schedules, run, and compared with
// ONNX Runtime's outputs on the same inputs. The models are generated here,
// never downloaded; ONNX Runtime is the npm package scripts/setup.sh
// installs into tools/ort. Also: the models' tasks (counts and weights), the
// imported graph left exactly as it was by extraction and compilation, the
// fallback when a graph pass fails halfway, whole-model round trips, and the
// documented errors for malformed and unsupported models.
#include "tensortune/frontend/onnx.h"

#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <set>

#include <nlohmann/json.hpp>

#include "common/module_cache.h"
#include "common/test_util.h"
#include "tensortune/graph/compile.h"
#include "tensortune/graph/partition.h"
#include "tensortune/graph/passes.h"
#include "tensortune/ir/pass_context.h"
#include "tensortune/measure/record.h"
#include "tensortune/object/serialize.h"
#include "tensortune/object/structural.h"
#include "tensortune/support/files.h"
#include "tensortune/support/strings.h"
#include "tensortune/support/subprocess.h"
#include "tensortune/te/npy.h"

namespace tensortune {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

const char* kModels[] = {"mlp",
                         "cnn",
                         "resnet18",
                         "transformer",
                         "transformer_ln_decomposed",
                         "mobilenetv2",
                         "efficientnet_b0",
                         "unet",
                         "crnn",
                         "audio",
                         "bert_mask",
                         "yolo"};

void run_or_fail(const std::vector<std::string>& argv) {
  RunResult r = run_captured(argv, SpawnOptions(), std::chrono::seconds(600));
  if (!r.status.success()) {
    fail(ErrorKind::kRuntime, argv[0], " ", argv.size() > 1 ? argv[1] : "", " failed: ", r.err,
         r.out);
  }
}

/// The generated models, their inputs and ONNX Runtime's outputs
/// (tests/models/make_test_data.sh): under ctest made once for every test
/// process of the run (TT_TEST_DATA_DIR, tests/CMakeLists.txt), else once
/// per test program in a temporary folder. What a test writes goes to its
/// own `scratch` folder.
struct Generated {
  std::string dir, scratch, error;
  json ops, bad;

  Generated() {
    std::string tmpl = (fs::temp_directory_path() / "tt_onnx_XXXXXX").string();
    if (!mkdtemp(tmpl.data())) {
      error = "cannot make a temporary folder";
      return;
    }
    scratch = tmpl;
    const std::string src = TT_SOURCE_DIR;
    try {
      if (const char* shared = std::getenv("TT_TEST_DATA_DIR");
          shared && fs::exists(std::string(shared) + "/onnx/ready")) {
        dir = std::string(shared) + "/onnx";
      } else {
        dir = scratch + "/data";
        run_or_fail({src + "/tests/models/make_test_data.sh", dir});
      }
      ops = json::parse(*read_file_if_exists(dir + "/ops/manifest.json"));
      bad = json::parse(*read_file_if_exists(dir + "/ops/bad_manifest.json"));
    } catch (const std::exception& e) {
      error = e.what();
    }
  }
  ~Generated() {
    std::error_code ec;
    if (!scratch.empty()) fs::remove_all(scratch, ec);
  }
  std::string model(const std::string& name) const { return dir + "/models/" + name + ".onnx"; }
};

const Generated& generated() {
  static const Generated g;
  return g;
}

#define REQUIRE_GENERATED() ASSERT_EQ(generated().error, "") << "the test models could not be made"

te::NDArray npy(const std::string& path) {
  std::optional<std::string> bytes = read_file_if_exists(path);
  TT_CHECK(bytes, kNotFound, "no file ", path);
  return te::parse_npy(*bytes, path);
}

/// The file of each output in an --output-dir, as `tensortune run` and
/// ort_run.js name them: unsafe characters replaced by _, then _2, _3, ...
/// added when two names collide.
std::vector<std::string> npy_names(const std::vector<std::string>& names) {
  std::set<std::string> taken;
  std::vector<std::string> files;
  for (std::string stem : names) {
    for (char& c : stem) {
      if (!std::isalnum(static_cast<unsigned char>(c)) && c != '.' && c != '_' && c != '-') c = '_';
    }
    if (stem.empty() || stem == "." || stem == "..") stem = "_" + stem;
    std::string file = stem + ".npy";
    for (int k = 2; taken.count(file); ++k) file = stem + "_" + std::to_string(k) + ".npy";
    taken.insert(file);
    files.push_back(file);
  }
  return files;
}

/// Compiles `model` with default schedules (for this machine's CPU) into a
/// fresh folder, runs it on `inputs` and returns its outputs.
std::vector<te::NDArray> compile_and_run(const graph::Graph& model,
                                         const std::vector<te::NDArray>& inputs,
                                         const std::string& out_dir,
                                         graph::CompileReport* report = nullptr) {
  graph::CompileOptions options;
  options.target = ir::Target::parse("c -mcpu=native -num-cores=2");
  options.module_options = testing::shared_cache_options();
  graph::CompileReport r = graph::compile_model(model, options, out_dir);
  if (report) *report = r;
  runtime::CompiledModel m = runtime::CompiledModel::load(out_dir);
  return m.run(inputs);
}

/// Float outputs within atol 1e-4 + rtol 1e-3 of the largest |expected|
/// (sums of thousands of products in another order); others exactly.
::testing::AssertionResult matches(const te::NDArray& ours, const te::NDArray& ort,
                                   double extra_atol = 0) {
  if (ours.shape() != ort.shape() || ours.dtype() != ort.dtype()) {
    return ::testing::AssertionFailure()
           << "ours " << ours.describe() << ", ONNX Runtime's " << ort.describe();
  }
  double scale = 0;
  for (int64_t i = 0; i < ort.size(); ++i) scale = std::max(scale, std::abs(ort.get(i)));
  te::Tolerance tol = ort.dtype().is_float() ? te::Tolerance{1e-4 + 1e-3 * scale + extra_atol, 1e-3}
                                             : te::Tolerance{};
  if (auto diff = te::compare_arrays(ours, ort, tol)) return ::testing::AssertionFailure() << *diff;
  return ::testing::AssertionSuccess();
}

/// How far half outputs `ours` are from a float32 `reference` of the same
/// values, in float16 ulps at the reference's value.
struct HalfUlps {
  double max = 0;            ///< the largest distance
  double over_one = 0;       ///< the fraction of outputs more than one ulp off
  bool within_bound = true;  ///< every output within 1 ulp + 2^-14 of the largest |reference|
};

HalfUlps half_ulps(const te::NDArray& ours, const te::NDArray& reference) {
  double scale = 0;
  for (int64_t i = 0; i < reference.size(); ++i)
    scale = std::max(scale, std::abs(reference.get(i)));
  // Float32 sums in another order than the reference's differ by a few
  // float32 ulps of the sum's terms, which is many half ulps of an output
  // near zero; 2^-14 of the largest output is far below half's resolution
  // (2^-11), which a sum accumulated in half would exceed.
  const double slack = std::ldexp(scale, -14);
  HalfUlps r;
  int over = 0;
  for (int64_t i = 0; i < reference.size(); ++i) {
    double exact = reference.get(i);
    double rounded = std::abs(te::cast_value(ir::DataType::float16(), exact));
    // Half has 10 fraction bits; below 2^-14 the spacing is the subnormals'.
    double ulp = rounded < std::ldexp(1.0, -14) ? std::ldexp(1.0, -24)
                                                : std::ldexp(1.0, std::ilogb(rounded) - 10);
    double error = std::abs(ours.get(i) - exact);
    r.max = std::max(r.max, error / ulp);
    over += error > ulp;
    r.within_bound = r.within_bound && error <= ulp + slack;
  }
  r.over_one = reference.size() ? static_cast<double>(over) / reference.size() : 0;
  return r;
}

// Found by onnx_loader_fuzz: a name that is not UTF-8 imported, and saving
// the graph then threw nlohmann's exception instead of a user error.
TEST(OnnxImport, NamesThatAreNotUtf8AreRefused) {
  std::optional<std::string> bytes =
      read_file_if_exists(std::string(TT_SOURCE_DIR) +
                          "/tests/fuzz/corpus/onnx_loader/regression_invalid_utf8_name.onnx");
  ASSERT_TRUE(bytes);
  EXPECT_TT_ERROR(frontend::import_onnx_bytes(*bytes), kParse, "is not valid UTF-8");
}

TEST(OnnxImport, EveryOperatorCaseMatchesOnnxRuntime) {
  REQUIRE_GENERATED();
  const Generated& g = generated();
  ASSERT_GE(g.ops.size(), 60u);
  std::set<std::string> covered;
  for (const json& c : g.ops) {
    std::string name = c["name"];
    SCOPED_TRACE(name);
    for (const auto& op : c["ops"]) covered.insert(op.get<std::string>());
    // A case ONNX Runtime does not run (an LSTM with batch-first layout) is
    // checked against its outputs for a twin computing the same.
    std::string ort_dir = g.dir + "/ops_ort/" + c.value("ort_reference", name);
    ASSERT_FALSE(fs::exists(ort_dir + "/error.txt"))
        << "ONNX Runtime refused the case: " << *read_file_if_exists(ort_dir + "/error.txt");
    // Inputs the case fixes at import (--input-value): constants for us,
    // inputs for ONNX Runtime.
    frontend::OnnxImportOptions options;
    std::vector<te::NDArray> inputs;
    std::set<std::string> fixed;
    for (const auto& f : c.value("fixed_inputs", json::array())) fixed.insert(f.get<std::string>());
    for (const auto& in : c["inputs"]) {
      te::NDArray value = npy(g.dir + "/ops/" + in["file"].get<std::string>());
      if (fixed.count(in["name"].get<std::string>())) {
        options.input_values[in["name"].get<std::string>()] = value;
      } else {
        inputs.push_back(value);
      }
    }
    graph::Graph model =
        frontend::import_onnx(g.dir + "/ops/" + c["model"].get<std::string>(), options);
    std::vector<te::NDArray> outputs =
        compile_and_run(model, inputs, g.scratch + "/ops_tt/" + name);
    ASSERT_EQ(outputs.size(), model->output_names.size());
    std::vector<std::string> files = npy_names(model->output_names);
    for (size_t i = 0; i < outputs.size(); ++i) {
      // A quantized model in QDQ form may round a value to the next step
      // where ONNX Runtime's fused integer kernel does not: its case allows
      // one step (its "atol").
      EXPECT_TRUE(matches(outputs[i], npy(ort_dir + "/" + files[i]), c.value("atol", 0.0)))
          << "output " << model->output_names[i];
    }
    // Half outputs, against the same model computed in float32: summed in
    // float32 and rounded once, almost all are within an ulp (summed in
    // half, most of a 576-product convolution's would not be).
    if (c.contains("wide_reference")) {
      std::string wide_dir = g.dir + "/ops_ort/" + c["wide_reference"].get<std::string>();
      for (size_t i = 0; i < outputs.size(); ++i) {
        HalfUlps u = half_ulps(outputs[i], npy(wide_dir + "/" + files[i]));
        std::cout << name << " " << model->output_names[i] << ": at most " << u.max
                  << " half ulps from float32; " << 100 * u.over_one << "% more than 1\n";
        EXPECT_TRUE(u.within_bound) << "output " << model->output_names[i];
        EXPECT_LE(u.over_one, 0.01) << "output " << model->output_names[i];
      }
    }
  }

  // Every operator the importer maps is in at least one case.
  for (const std::string& op : frontend::supported_onnx_ops()) {
    EXPECT_TRUE(covered.count(op)) << op << " has no case in tests/models/make_op_models.py";
  }
}

TEST(OnnxImport, AnInputFixedToAValueMustBeOneOfItsType) {
  REQUIRE_GENERATED();
  const std::string path = generated().dir + "/ops/shape_and_axes_given_as_inputs.onnx";
  auto import_with = [&](const std::string& name, te::NDArray value) {
    frontend::OnnxImportOptions options;
    options.input_values[name] = std::move(value);
    return frontend::import_onnx(path, options);
  };
  te::NDArray shape(ir::DataType::int64(), {2});
  shape.set(0, 4);
  shape.set(1, 6);
  // Only axes left open: the Reshape folds, the reduction needs its axes.
  EXPECT_TT_ERROR(import_with("shape", shape), kInvalidArgument,
                  "its axes must be a constant (or computed from static shapes)");
  EXPECT_TT_ERROR(import_with("shape", te::NDArray(ir::DataType::float32(), {2})), kInvalidArgument,
                  "--input-value for input 'shape' is float32[2]; the model declares int64");
  EXPECT_TT_ERROR(import_with("shape", te::NDArray(ir::DataType::int64(), {3})), kInvalidArgument,
                  "is int64[3], not of the shape the model declares");
  EXPECT_TT_ERROR(import_with("nope", shape), kInvalidArgument,
                  "--input-value names 'nope', which is not an input of the model");
}

TEST(OnnxImport, ModelsMatchOnnxRuntime) {
  REQUIRE_GENERATED();
  const Generated& g = generated();
  for (const char* name : kModels) {
    SCOPED_TRACE(name);
    graph::Graph model = frontend::import_onnx(g.model(name));
    std::vector<te::NDArray> inputs;
    for (size_t k = 0; k < model->inputs.size(); ++k) {
      const std::string file = g.dir + "/models/" + name + ".input_" + std::to_string(k);
      inputs.push_back(npy(file + ".npy"));
      // The same input as the TensorProto the generator wrote beside it.
      EXPECT_TRUE(
          te::allclose(frontend::read_tensor_proto(file + ".pb"), inputs.back(), te::Tolerance{}));
    }
    graph::CompileReport report;
    std::vector<te::NDArray> out =
        compile_and_run(model, inputs, g.scratch + "/models_tt/" + name, &report);
    ASSERT_EQ(out.size(), 1u);
    EXPECT_TRUE(matches(
        out[0], npy(g.dir + "/models_ort/" + name + "/" + npy_names(model->output_names)[0])));
    // The memory plan shares memory between intermediates never live together.
    if (std::string(name) != "mlp") {
      EXPECT_LT(report.planned_bytes, report.intermediate_bytes);
    }
    for (const auto& t : report.tasks) {
      EXPECT_FALSE(t.tuned);
      EXPECT_EQ(t.why, "no log given");
    }
  }
}

// The float16 variants (tests/models/convert_models.py): stored, passed and
// returned in half, against ONNX Runtime running the same half model. The
// two round intermediates to half in different places, so outputs differ by
// a few half ulps at the model's scale.
TEST(OnnxImport, HalfModelsMatchOnnxRuntime) {
  REQUIRE_GENERATED();
  const Generated& g = generated();
  for (const char* base : {"cnn", "unet", "crnn", "audio", "bert_mask", "yolo"}) {
    const std::string name = std::string(base) + "_fp16";
    SCOPED_TRACE(name);
    graph::Graph model = frontend::import_onnx(g.model(name));
    std::vector<te::NDArray> inputs;
    for (size_t k = 0; k < model->inputs.size(); ++k) {
      inputs.push_back(npy(g.dir + "/models/" + name + ".input_" + std::to_string(k) + ".npy"));
      if (inputs.back().dtype().is_float()) {
        EXPECT_EQ(inputs.back().dtype(), ir::DataType::float16());
      }
    }
    std::vector<te::NDArray> out = compile_and_run(model, inputs, g.scratch + "/models_tt/" + name);
    ASSERT_EQ(out.size(), 1u);
    EXPECT_EQ(out[0].dtype(), ir::DataType::float16());
    te::NDArray ort = npy(g.dir + "/models_ort/" + name + "/" + npy_names(model->output_names)[0]);
    double scale = 0;
    for (int64_t i = 0; i < ort.size(); ++i) scale = std::max(scale, std::abs(ort.get(i)));
    EXPECT_TRUE(matches(out[0], ort, 1e-2 * scale));
  }
}

// The bfloat16 variants (tests/models/convert_models.py), stored, passed
// and computed in bfloat16 (sums in float32), against ONNX Runtime running
// the same numbers in float32 (it has no bfloat16 matmul): apart by the
// bfloat16 rounding of each intermediate, 2^-9 of its size, compounding.
TEST(OnnxImport, BFloat16ModelsMatchOnnxRuntimeInFloat32) {
  REQUIRE_GENERATED();
  const Generated& g = generated();
  const auto bf16 = ir::DataType::bfloat16();
  for (const char* base : {"mlp", "transformer", "bert_mask"}) {
    const std::string name = std::string(base) + "_bf16";
    SCOPED_TRACE(name);
    graph::Graph model = frontend::import_onnx(g.model(name));
    std::vector<te::NDArray> inputs;
    for (size_t k = 0; k < model->inputs.size(); ++k) {
      te::NDArray in = npy(g.dir + "/models/" + name + ".input_" + std::to_string(k) + ".npy");
      if (model->inputs[k]->dtype == bf16) {
        // Written as float32 values bfloat16 holds exactly.
        te::NDArray narrowed = te::as_npy_holds(in, bf16);
        ASSERT_EQ(narrowed.dtype(), bf16);
        for (int64_t i = 0; i < in.size(); ++i) {
          ASSERT_EQ(narrowed.get(i), in.get(i)) << "input " << k << ", element " << i;
        }
        in = std::move(narrowed);
      }
      inputs.push_back(std::move(in));
    }
    std::vector<te::NDArray> out = compile_and_run(model, inputs, g.scratch + "/models_tt/" + name);
    ASSERT_EQ(out.size(), 1u);
    ASSERT_EQ(out[0].dtype(), bf16);
    te::NDArray ort =
        npy(g.dir + "/models_ort/" + name + "_wide/" + npy_names(model->output_names)[0]);
    te::NDArray wide(ir::DataType::float32(), out[0].shape());
    for (int64_t i = 0; i < wide.size(); ++i) wide.set(i, out[0].get(i));
    double scale = 0;
    for (int64_t i = 0; i < ort.size(); ++i) scale = std::max(scale, std::abs(ort.get(i)));
    EXPECT_TRUE(matches(wide, ort, 2e-2 * scale));
  }
}

// The int8 variants in the forms ONNX Runtime's quantizer writes (static
// QDQ and QOperator, and quantize_dynamic's), against ONNX Runtime running
// them with its integer kernels. Integer products are exact on both sides.
// QDQ runs here as integer convolutions and matmuls and float operators
// between quantize and dequantize pairs, where ONNX Runtime fuses each pair
// into an integer kernel that requantizes in one step, and
// quantize_dynamic's form quantizes each layer's input again at run time:
// a value on a rounding boundary may land one quantization step apart
// (after a float difference of an ulp, on another instruction set), and
// the step carries through the layers after.
TEST(OnnxImport, Int8ModelsMatchOnnxRuntime) {
  REQUIRE_GENERATED();
  const Generated& g = generated();
  for (const char* base : {"cnn", "crnn", "bert_mask", "yolo", "transformer"}) {
    for (const char* form : {"qdq", "qoperator", "dynamic"}) {
      const std::string name = std::string(base) + "_" + form;
      const bool written = std::string(form) != "dynamic" || std::string(base) != "yolo";
      if (!written) continue;  // make_test_data.sh writes no dynamic yolo
      SCOPED_TRACE(name);
      graph::Graph model = frontend::import_onnx(g.model(name));
      std::vector<te::NDArray> inputs;
      for (size_t k = 0; k < model->inputs.size(); ++k) {
        inputs.push_back(npy(g.dir + "/models/" + name + ".input_" + std::to_string(k) + ".npy"));
      }
      std::vector<te::NDArray> out =
          compile_and_run(model, inputs, g.scratch + "/models_tt/" + name);
      ASSERT_EQ(out.size(), 1u);
      te::NDArray ort =
          npy(g.dir + "/models_ort/" + name + "/" + npy_names(model->output_names)[0]);
      double scale = 0;
      for (int64_t i = 0; i < ort.size(); ++i) scale = std::max(scale, std::abs(ort.get(i)));
      EXPECT_TRUE(matches(out[0], ort, std::string(form) == "qoperator" ? 0 : 2e-2 * scale));
    }
  }
}

// Integer products compute on words of four bytes (VNNI's operands), as
// ONNX Runtime's integer kernels compute them: QLinearMatMul, MatMulInteger
// with a zero point known only at run time, a MatMul and a Conv in QDQ
// form, a convolution of one channel over a wide window. None is left a
// float or int32 product.
TEST(OnnxImport, QuantizedProductsComputeOnWords) {
  REQUIRE_GENERATED();
  const Generated& g = generated();
  const ir::Target target = ir::Target::parse("c -num-cores=2");
  for (const char* name : {"qlinear_matmul", "dynamic_quantize_on_words", "qdq_matmul",
                           "qdq_conv_relu", "integer_conv_patches"}) {
    SCOPED_TRACE(name);
    graph::Graph model = graph::optimize(
        frontend::import_onnx(g.dir + "/ops/" + std::string(name) + ".onnx"), target);
    std::map<std::string, int> ops;
    for (const auto& c : graph::calls_in_order(model)) ++ops[c->op];
    EXPECT_GT(ops["nn.conv2d_int8x4"], 0);
    EXPECT_EQ(ops["nn.conv2d"] + ops["nn.matmul"] + ops["nn.dense"], 0);
  }
}

// What a partition is, for every model: each call in exactly one group,
// each group reading only what earlier groups (or the model) made, each
// non-view group one of the tasks, and the tasks' occurrences adding up to
// the kernel calls.
TEST(OnnxImport, EveryModelIsPartitionedIntoGroupsThatCoverItsCallsInOrder) {
  REQUIRE_GENERATED();
  ir::Target target = ir::Target::parse("c -mattr=avx2,fma -num-cores=2");
  std::map<std::string, graph::Partition> partitions;
  for (const char* name : kModels) {
    SCOPED_TRACE(name);
    const graph::Partition& p = partitions[name] =
        graph::partition_model(frontend::import_onnx(generated().model(name)), target);
    EXPECT_EQ(p.fallback_reason, "");
    ASSERT_EQ(p.task_of_group.size(), p.groups.size());
    std::map<const Object*, size_t> group_of;
    for (size_t gi = 0; gi < p.groups.size(); ++gi) {
      for (const auto& c : p.groups[gi].calls) {
        EXPECT_TRUE(group_of.emplace(c.get(), gi).second) << c->op << " is in two groups";
      }
    }
    EXPECT_EQ(group_of.size(), graph::calls_in_order(p.graph).size());
    int64_t kernels = 0;
    for (size_t gi = 0; gi < p.groups.size(); ++gi) {
      const graph::FusedGroup& g = p.groups[gi];
      for (const auto& v : g.inputs) {
        auto it = group_of.find(v.get());
        if (it == group_of.end()) continue;  // an input or a constant of the model
        EXPECT_LT(it->second, gi) << "a group reads a value made after it";
        EXPECT_TRUE(p.groups[it->second].calls.back().same_as(v))
            << "a group reads a value from inside another group";
      }
      if (g.is_view()) {
        EXPECT_EQ(p.task_of_group[gi], -1);
        continue;
      }
      ++kernels;
      ASSERT_GE(p.task_of_group[gi], 0);
      ASSERT_LT(p.task_of_group[gi], static_cast<int64_t>(p.tasks.size()));
      EXPECT_EQ(te::workload_key(graph::group_workload(g)),
                p.tasks[static_cast<size_t>(p.task_of_group[gi])].workload_key);
    }
    int64_t total = 0;
    std::set<std::string> keys;
    for (const auto& t : p.tasks) {
      total += t.occurrences;
      EXPECT_EQ(t.task.workload_key(), t.workload_key);
      EXPECT_TRUE(keys.insert(t.workload_key).second) << "two tasks of one workload";
    }
    EXPECT_EQ(total, kernels);
  }
  // ResNet-18: every stride-1 3x3 convolution, those with a residual add
  // included, becomes Winograd's three kernels.
  const graph::Partition& ex = partitions["resnet18"];
  std::map<std::string, int64_t> weights;
  for (const auto& t : ex.tasks) weights[t.description] += t.occurrences;
  EXPECT_EQ(weights["nn.conv2d+nn.bias_add+add+relu"], 0);
  EXPECT_GT(weights["nn.winograd_output_transform+nn.bias_add+add+relu"], 0);
  for (const auto& t : ex.tasks) {
    if (t.description.rfind("nn.conv2d", 0) == 0 || t.description == "nn.matmul") {
      // Weights are constant inputs of their task: the layout rewrite may pre-pack them.
      EXPECT_FALSE(te::workload_tensors(t.task->workload).constant_inputs.empty());
      EXPECT_GT(t.flops, 1e7);
    }
  }
  // GELU, in either form, is the epilogue of the FFN's first dense; a
  // decomposed layer norm's squares are products, not powers.
  for (auto [name, ffn] :
       {std::pair<const char*, const char*>{"transformer",
                                            "nn.dense+add+multiply+erf+add+multiply+multiply"},
        {"transformer_ln_decomposed",
         "nn.dense+add+multiply+multiply+multiply+add+multiply+tanh+add+multiply+multiply"}}) {
    SCOPED_TRACE(name);
    weights.clear();
    for (const auto& t : partitions[name].tasks) {
      weights[t.description] += t.occurrences;
      EXPECT_EQ(t.description.find("power"), std::string::npos) << t.description;
    }
    EXPECT_EQ(weights[ffn], 1);
  }
}

// The workloads `tune MODEL` measures are exactly those `compile MODEL`
// looks up in the log, for every model: both start from one partition.
TEST(OnnxImport, TuneMeasuresExactlyTheWorkloadsCompileLooksUp) {
  REQUIRE_GENERATED();
  const std::string target = "c -num-cores=2";
  SpawnOptions o;
  o.env = {{"XDG_CACHE_HOME", generated().scratch + "/cache"}};
  // Exit 3 from tune: a task whose one random candidate failed (ran past
  // the timeout); compile then finds nothing for it, as checked below.
  auto cli = [&](std::vector<std::string> args, int allowed = 0) {
    args.insert(args.begin(), TT_CLI_PATH);
    RunResult r = run_captured(args, o, std::chrono::seconds(600));
    const bool ok = r.status.success() || (allowed != 0 && r.status.code == allowed);
    EXPECT_TRUE(ok) << "exit " << r.status.code << ": " << r.err;
    return ok ? json::parse(r.out) : json::object();
  };
  for (const char* name : kModels) {
    SCOPED_TRACE(name);
    const std::string model = generated().model(name), log = generated().scratch + "/keys_" + name;
    json listed = cli({"tasks", model, "--target", target, "--json"});
    std::set<std::string> keys;
    for (const auto& t : listed["tasks"]) keys.insert(t["workload_key"].get<std::string>());
    // About one candidate per task: enough to find each in the log.
    const std::string trials = std::to_string(keys.size());
    json tuned =
        cli({"tune", model, "--target", target, "--trials", trials, "--warm-up-batch", "1",
             "--batch-size", trials, "--policy", "random", "--log", log + ".log", "--json"},
            3);
    std::set<std::string> tuned_keys, measured;
    for (const auto& t : tuned["tasks"]) {
      tuned_keys.insert(t["workload_key"].get<std::string>());
      // A failed task may only have run past the timeout: any other error
      // (a build failure, a wrong answer) is a bug, whatever the exit.
      if (t.value("status", "") == "failed") {
        for (const auto& [code, count] : t["errors"].items()) {
          EXPECT_EQ(code, "RUN_TIMEOUT") << t.dump();
        }
      }
    }
    for (const auto& r : measure::load_records(log + ".log").records) {
      if (r.result.ok()) measured.insert(r.input.task.workload_key());
    }
    EXPECT_FALSE(measured.empty());
    json compiled = cli(
        {"compile", model, "--target", target, "--log", log + ".log", "-o", log + ".tt", "--json"});
    std::set<std::string> looked_up;
    for (const auto& t : compiled["tasks"]) {
      const std::string key = t["workload_key"].get<std::string>();
      looked_up.insert(key);
      // Found in the log exactly when tune measured it.
      EXPECT_EQ(t["tuned"].get<bool>(), measured.count(key) == 1) << t.dump();
    }
    EXPECT_EQ(tuned_keys, keys);
    EXPECT_EQ(looked_up, keys);
    for (const auto& key : measured) EXPECT_EQ(keys.count(key), 1u) << key;
  }
}

TEST(OnnxImport, ExtractionAndCompilationLeaveTheGraphAsItWas) {
  REQUIRE_GENERATED();
  for (const char* name : {"cnn", "transformer"}) {
    SCOPED_TRACE(name);
    graph::Graph model = frontend::import_onnx(generated().model(name));
    const uint64_t hash = structural_hash(model);
    const std::string bytes = save_string(model);
    graph::partition_model(model, ir::Target::parse("c -num-cores=2"));
    EXPECT_EQ(structural_hash(model), hash);
    EXPECT_EQ(save_string(model), bytes);
    graph::CompileOptions options;
    options.target = ir::Target::parse("c -num-cores=2");
    options.module_options = testing::shared_cache_options();
    graph::compile_model(model, options, generated().scratch + "/untouched_" + name);
    EXPECT_EQ(structural_hash(model), hash);
    EXPECT_EQ(save_string(model), bytes);
    // And a whole model round-trips through its saved form.
    ObjectPtr loaded = load_string(bytes);
    EXPECT_TRUE(structural_equal(loaded, ObjectPtr(model.ptr())));
    EXPECT_EQ(structural_hash(loaded), hash);
    EXPECT_EQ(save_string(loaded), bytes);
  }
}

TEST(OnnxImport, APassThatFailsHalfwayLeavesExtractionTheUntouchedInput) {
  REQUIRE_GENERATED();
  graph::Graph model = frontend::import_onnx(generated().model("cnn"));
  const std::string bytes = save_string(model);
  ir::Target target = ir::Target::parse("c -num-cores=2");
  std::vector<std::string> as_given;
  for (const auto& g : graph::fuse_groups(model)) {
    if (!g.is_view()) as_given.push_back(te::workload_key(graph::group_workload(g)));
  }
  std::vector<std::string> optimised;
  for (const auto& t : graph::partition_model(model, target).tasks)
    optimised.push_back(t.task.workload_key());
  for (const std::string& pass : graph::optimize_pass_names()) {
    SCOPED_TRACE(pass);
    ir::PassContextGuard guard(ir::PassContext::make(
        ir::PassContextOptions().with_config("testing.fail_graph_pass", pass)));
    EXPECT_TT_ERROR(graph::optimize(model), kRuntime, "graph pass " + pass + " failed");
    graph::Partition ex = graph::partition_model(model, target);
    EXPECT_NE(ex.fallback_reason.find("graph pass " + pass + " failed"), std::string::npos);
    std::vector<std::string> keys;
    for (const auto& t : ex.tasks) keys.push_back(t.task.workload_key());
    // The tasks of the graph as imported (its batch norms and NCHW layout
    // still there), not of a half-rewritten one.
    std::vector<std::string> unique;
    for (const auto& k : as_given) {
      if (std::find(unique.begin(), unique.end(), k) == unique.end()) unique.push_back(k);
    }
    EXPECT_EQ(keys, unique);
    EXPECT_NE(keys, optimised);
    EXPECT_EQ(save_string(model), bytes);
  }
  // Compiling under the failing pass takes the same fallback, and is still right.
  ir::PassContextGuard guard(ir::PassContext::make(
      ir::PassContextOptions().with_config("testing.fail_graph_pass", "convert_layout_nhwc")));
  const Generated& g = generated();
  graph::CompileReport report;
  std::vector<te::NDArray> out = compile_and_run(model, {npy(g.dir + "/models/cnn.input_0.npy")},
                                                 g.scratch + "/fallback_cnn", &report);
  EXPECT_NE(report.fallback_reason.find("convert_layout_nhwc"), std::string::npos);
  EXPECT_TRUE(matches(out[0], npy(g.dir + "/models_ort/cnn/" + npy_names(model->output_names)[0])));
}

TEST(OnnxImport, ExtractionInAnotherProcessGivesTheSameTasks) {
  REQUIRE_GENERATED();
  const std::string target = "c -mattr=avx2,fma -num-cores=2";
  graph::Partition ex = graph::partition_model(frontend::import_onnx(generated().model("resnet18")),
                                               ir::Target::parse(target));
  RunResult r = run_captured(
      {TT_CLI_PATH, "tasks", generated().model("resnet18"), "--target", target, "--json"},
      SpawnOptions(), std::chrono::seconds(120));
  ASSERT_TRUE(r.status.success()) << r.err;
  json there = json::parse(r.out)["tasks"];
  ASSERT_EQ(there.size(), ex.tasks.size());
  for (size_t i = 0; i < ex.tasks.size(); ++i) {
    EXPECT_EQ(there[i]["workload_key"], ex.tasks[i].task.workload_key());
    EXPECT_EQ(there[i]["weight"], ex.tasks[i].occurrences);
    // The task itself, saved there, is this process's task.
    EXPECT_TRUE(structural_equal(load_json_as<te::Task>(there[i]["task"]), ex.tasks[i].task));
  }
}

TEST(OnnxImport, BadModelsGiveTheDocumentedErrors) {
  REQUIRE_GENERATED();
  const Generated& g = generated();
  for (const json& c : g.bad) {
    SCOPED_TRACE(c["name"].get<std::string>());
    std::string path = g.dir + "/ops/" + c["model"].get<std::string>();
    ErrorKind kind = c["kind"] == "parse" ? ErrorKind::kParse : ErrorKind::kInvalidArgument;
    EXPECT_TRUE(testing::throws_error([&] { frontend::import_onnx(path); }, kind,
                                      c["error"].get<std::string>()));
    // The file is named first.
    EXPECT_TRUE(testing::throws_error([&] { frontend::import_onnx(path); }, kind, path + ": "));
  }
  // A dynamic input is fine with its shape given.
  frontend::OnnxImportOptions shapes;
  shapes.input_shapes["x"] = {5, 3};
  graph::Graph dynamic = frontend::import_onnx(g.dir + "/ops/bad_dynamic_input.onnx", shapes);
  EXPECT_EQ(dynamic->inputs[0]->shape, (std::vector<int64_t>{5, 3}));
  shapes.input_shapes["x"] = {5, 4};
  EXPECT_TT_ERROR(
      frontend::import_onnx(g.dir + "/ops/bad_dynamic_input.onnx", shapes), kInvalidArgument,
      "--input-shape gives input 'x' extent 4 for dimension 1, fixed at 3 in the model");
  shapes.input_shapes = {{"y", {1}}};
  EXPECT_TT_ERROR(frontend::import_onnx(g.dir + "/ops/relu.onnx", shapes), kInvalidArgument,
                  "--input-shape names 'y', which is not an input of the model");

  // Truncated and corrupt files, and files that are not there.
  std::string bytes = *read_file_if_exists(g.model("cnn"));
  for (size_t cut : {size_t{0}, size_t{7}, bytes.size() / 2, bytes.size() - 3}) {
    SCOPED_TRACE(cut);
    EXPECT_TT_ERROR(frontend::import_onnx_bytes(bytes.substr(0, cut)), kParse, "");
  }
  std::string garbage(4096, '\0');
  for (size_t i = 0; i < garbage.size(); ++i)
    garbage[i] = static_cast<char>((i * 2654435761u) >> 13);
  EXPECT_TT_ERROR(frontend::import_onnx_bytes(garbage), kParse, "");
  EXPECT_TT_ERROR(frontend::import_onnx(g.scratch + "/nothing.onnx"), kNotFound, "nothing.onnx");
  EXPECT_TT_ERROR(frontend::read_tensor_proto(g.model("cnn")), kParse, "cnn.onnx");
}

// A model's gaps come in one error, each with where it occurs; what reads
// a gap's outputs is passed over, not reported again.
TEST(OnnxImport, EveryGapOfAModelIsReportedAtOnce) {
  REQUIRE_GENERATED();
  const std::string path = generated().dir + "/ops/bad_many_gaps.onnx";
  try {
    frontend::import_onnx(path);
    FAIL() << "the model imported";
  } catch (const frontend::OnnxUnsupportedError& e) {
    std::vector<std::string> found;
    for (const frontend::OnnxGap& g : e.gaps()) {
      found.push_back(g.kind + " " + (g.op_type.empty() ? g.what : g.op_type) + " @ " +
                      join(g.where, ","));
    }
    EXPECT_EQ(found, (std::vector<std::string>{
                         "dtype COMPLEX64 @ wb", "operator Bernoulli @ Bernoulli_0,Bernoulli_2",
                         "node Conv @ Conv_4",
                         "operator FusedGemm (domain com.microsoft) @ FusedGemm_0"}));
    EXPECT_EQ(e.kind(), ErrorKind::kInvalidArgument);
    EXPECT_EQ(std::string(e.what()).rfind(path + ": the model uses 4 things", 0), 0u) << e.what();
    EXPECT_EQ(e.gaps()[1].to_json()["count"], 2);
  }
}

}  // namespace
}  // namespace tensortune
