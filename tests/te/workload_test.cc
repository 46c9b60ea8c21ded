// The workload registry, keys, and named/DAG workloads across save and load.
#include "tensortune/te/workload.h"

#include <gtest/gtest.h>

#include <cmath>

#include "common/te_util.h"
#include "common/test_util.h"
#include "tensortune/object/serialize.h"
#include "tensortune/object/structural.h"
#include "tensortune/te/evaluator.h"
#include "tensortune/te/ops.h"

namespace tensortune::te {
namespace {

using json = nlohmann::json;

TEST(Workload, KeysAreCanonical) {
  Workload a = make_named_workload_from_text("matmul", "64,64,64");
  Workload b = make_named_workload_from_text("matmul", "64, 64, 64, float32");
  Workload c = make_named_workload("matmul", json::array({64, "64", 64.0, "float32"}));
  EXPECT_EQ(workload_key(a), "matmul(64,64,64,float32)");
  EXPECT_EQ(workload_key(b), workload_key(a));
  EXPECT_EQ(workload_key(c), workload_key(a));
  EXPECT_TRUE(structural_equal(a, c));
  EXPECT_EQ(a.as<NamedWorkloadNode>()->args, json::array({64, 64, 64, "float32"}));
  // Defaults in the middle of a signature are filled too.
  EXPECT_EQ(workload_key(make_named_workload_from_text("conv2d_nchw", "1,3,32,32,8,3,3,1,1")),
            "conv2d_nchw(1,3,32,32,8,3,3,1,1,1,1,float32)");
  EXPECT_EQ(workload_key(make_named_workload_from_text("softmax", "4,8,float16")),
            "softmax(4,8,float16)");
  // The key parses back to the same workload.
  for (const Workload& w : {a, make_named_workload_from_text("layer_norm", "3,5,bfloat16")}) {
    Workload again = parse_workload_key(workload_key(w));
    EXPECT_TRUE(structural_equal(w, again));
    EXPECT_EQ(workload_key(again), workload_key(w));
  }
  EXPECT_TT_ERROR(parse_workload_key("dag:0123456789abcdef"), kInvalidArgument, "hash");
  EXPECT_TT_ERROR(parse_workload_key("matmul 1,2,3"), kInvalidArgument, "is not a workload key");
}

TEST(Workload, KeysAreStable) {
  // Hard-coded: a key must mean the same thing in every process and release.
  EXPECT_EQ(workload_key(make_named_workload_from_text("dense", "1,1000,512")),
            "dense(1,1000,512,float32)");
  Tensor a = placeholder({8, 8}, DataType::float32(), "A");
  Tensor b = placeholder({8, 8}, DataType::float32(), "B");
  Workload dag = make_dag_workload({a, b}, {matmul(a, b)});
  std::string key = workload_key(dag);
  ASSERT_EQ(key.size(), 4u + 16u);
  EXPECT_EQ(key.substr(0, 4), "dag:");
  // Built again from scratch, and after a round trip: the same key.
  Tensor a2 = placeholder({8, 8}, DataType::float32(), "A");
  Tensor b2 = placeholder({8, 8}, DataType::float32(), "B");
  EXPECT_EQ(workload_key(make_dag_workload({a2, b2}, {matmul(a2, b2)})), key);
  EXPECT_EQ(workload_key(load_json_as<Workload>(save_json(dag))), key);
  // A different program, a different key.
  EXPECT_NE(workload_key(make_dag_workload({a, b}, {matmul(a, b, false, true)})), key);
}

TEST(Workload, ConstantInputsLeaveOlderKeysAsTheyWere) {
  // constant_inputs was added to DAG workloads after logs were written with
  // them: a DAG without constants keeps the key it had before (computed by
  // the release before the field existed), a saved DAG without the field
  // loads with none, and marking an input constant makes another program.
  Tensor a = placeholder({8, 16}, DataType::float32(), "A");
  Tensor w = placeholder({16, 4}, DataType::float32(), "W");
  Tensor out = relu(matmul(a, w));
  Workload plain = make_dag_workload({a, w}, {out});
  EXPECT_EQ(workload_key(plain), "dag:150a82380620e96e");
  json saved = save_json(plain);
  std::string text = saved.dump();
  ASSERT_NE(text.find("\"constant_inputs\""), std::string::npos);
  for (auto& node : saved["nodes"]) node.erase("constant_inputs");
  ASSERT_EQ(saved.dump().find("constant_inputs"), std::string::npos);
  Workload old = load_json_as<Workload>(saved);
  EXPECT_TRUE(structural_equal(old, plain));
  EXPECT_EQ(workload_key(old), workload_key(plain));
  // The text loader's fast path accepts the missing field too.
  EXPECT_TRUE(structural_equal(load_string(saved.dump()), ObjectPtr(plain.ptr())));

  Workload weighted = make_dag_workload({a, w}, {out}, {1});
  EXPECT_NE(workload_key(weighted), workload_key(plain));
  EXPECT_EQ(workload_tensors(weighted).constant_inputs, std::vector<int>{1});
  Workload again = load_json_as<Workload>(save_json(weighted));
  EXPECT_EQ(workload_key(again), workload_key(weighted));
  EXPECT_EQ(workload_tensors(again).constant_inputs, std::vector<int>{1});

  EXPECT_TT_ERROR(make_dag_workload({a, w}, {out}, {2}), kInvalidArgument,
                  "constant input 2 is out of range or out of order (2 inputs)");
  EXPECT_TT_ERROR(make_dag_workload({a, w}, {out}, {1, 0}), kInvalidArgument, "out of order");
}

TEST(Workload, ArgumentErrorsNameTheArgumentAndSignature) {
  EXPECT_TT_ERROR(make_named_workload_from_text("matmul", "64,64"), kInvalidArgument,
                  "workload 'matmul' takes 3 to 4 arguments, got 2 (missing 'K'); signature: "
                  "matmul(M:int, N:int, K:int[, dtype:dtype=float32])");
  EXPECT_TT_ERROR(make_named_workload_from_text("matmul", "64,64,64,float32,5"), kInvalidArgument,
                  "takes 3 to 4 arguments, got 5");
  EXPECT_TT_ERROR(make_named_workload_from_text("matmul", "64,sixty,64"), kInvalidArgument,
                  "argument 2 'N' must be an int, got \"sixty\"; signature: matmul(");
  EXPECT_TT_ERROR(make_named_workload_from_text("matmul", "64,64,64,float33"), kInvalidArgument,
                  "argument 4 'dtype' unknown data type 'float33'");
  EXPECT_TT_ERROR(make_named_workload("matmul", json::array({64, 64.5, 64})), kInvalidArgument,
                  "'N' must be an int, got 64.5");
  EXPECT_TT_ERROR(make_named_workload("matmul", json::object()), kInvalidArgument,
                  "arguments must be a JSON array");
  // Valid types, impossible values: reported when the workload is made.
  EXPECT_TT_ERROR(make_named_workload_from_text("matmul", "0,64,64"), kInvalidArgument,
                  "workload 'matmul' with arguments [0,64,64,\"float32\"]");
  EXPECT_TT_ERROR(make_named_workload_from_text("conv2d_nchw", "1,3,8,8,4,3,3,1,1,1,2"),
                  kInvalidArgument, "groups = 2");
}

TEST(Workload, UnknownNamesListTheRegisteredOnes) {
  EXPECT_TT_ERROR(make_named_workload_from_text("matmull", "1,2,3"), kNotFound,
                  "unknown workload 'matmull'; registered workloads: add, avg_pool2d_nchw, ");
  EXPECT_TT_ERROR(find_workload("nope"), kNotFound, "conv2d_nchw");
  // Loading a record that names an unregistered workload fails the same way.
  json doc = save_json(make_named_workload_from_text("relu", "8"));
  doc["nodes"][0]["name"] = "nope";
  EXPECT_TT_ERROR(load_json(doc), kNotFound, "unknown workload 'nope'");
  doc = save_json(make_named_workload_from_text("relu", "8"));
  doc["nodes"][0]["args"] = json::array({8});
  EXPECT_TT_ERROR(load_json(doc), kInvalidArgument, "not in canonical form");
}

TEST(Workload, RegistryHasTheRequiredFamilies) {
  std::vector<std::string> names;
  for (const WorkloadDef* def : registered_workloads()) names.push_back(def->name);
  EXPECT_TRUE(std::is_sorted(names.begin(), names.end()));
  for (const char* required :
       {"matmul", "dense", "batch_matmul", "conv2d_nchw", "conv2d_nhwc", "depthwise_conv2d_nchw",
        "conv2d_bias_relu_nchw", "max_pool2d_nchw", "softmax", "layer_norm"}) {
    EXPECT_NE(std::find(names.begin(), names.end(), required), names.end()) << required;
  }
  EXPECT_EQ(signature(find_workload("conv2d_nchw")),
            "N:int, C:int, H:int, W:int, K:int, R:int, S:int, stride:int, pad:int[, "
            "dilation:int=1][, groups:int=1][, dtype:dtype=float32]");
}

// Every registered workload builds at its example arguments, round-trips in
// both forms, and evaluates to finite values.
TEST(Workload, EveryRegisteredWorkloadBuildsRoundTripsAndEvaluates) {
  for (const WorkloadDef* def : registered_workloads()) {
    SCOPED_TRACE(def->name);
    ASSERT_FALSE(def->example_args.empty());
    ASSERT_FALSE(def->doc.empty());
    Workload named = make_named_workload_from_text(def->name, def->example_args);
    auto named_back = load_string(save_string(named));
    EXPECT_TRUE(structural_equal(ObjectPtr(named.ptr()), named_back));
    EXPECT_EQ(structural_hash(ObjectPtr(named.ptr())), structural_hash(named_back));
    EXPECT_EQ(workload_key(named), workload_key(load_json_as<Workload>(save_json(named))));

    WorkloadTensors tensors = workload_tensors(named);
    ASSERT_FALSE(tensors.outputs.empty());
    Workload dag = make_dag_workload(tensors.inputs, tensors.outputs);
    auto dag_back = load_string(save_string(dag));
    EXPECT_TRUE(structural_equal(ObjectPtr(dag.ptr()), dag_back));
    EXPECT_EQ(structural_hash(ObjectPtr(dag.ptr())), structural_hash(dag_back));
    // Building twice gives the same program.
    WorkloadTensors rebuilt = workload_tensors(named);
    Workload dag2 = make_dag_workload(rebuilt.inputs, rebuilt.outputs);
    EXPECT_EQ(workload_key(dag2), workload_key(dag));
    EXPECT_GT(flop_count(tensors.outputs), 0.0);

    auto loaded = std::dynamic_pointer_cast<const DagWorkloadNode>(dag_back);
    ASSERT_TRUE(loaded);
    std::vector<NDArray> inputs = random_inputs(tensors.inputs, 13);
    std::vector<NDArray> before = evaluate(tensors.outputs, tensors.inputs, inputs);
    std::vector<NDArray> after = evaluate(loaded->outputs, loaded->inputs, inputs);
    ASSERT_EQ(before.size(), after.size());
    for (size_t i = 0; i < before.size(); ++i) {
      EXPECT_EQ(max_abs_diff(before[i], after[i]), 0.0);
      for (int64_t e = 0; e < before[i].size(); ++e) {
        ASSERT_TRUE(std::isfinite(before[i].get(e))) << "output " << i << " element " << e;
      }
    }
  }
}

TEST(Workload, NamedWorkloadsComputeWhatTheyNameAndHonourTheDtype) {
  WorkloadTensors t = workload_tensors(make_named_workload_from_text("matmul", "3,4,5"));
  ASSERT_EQ(t.inputs.size(), 2u);
  EXPECT_EQ(t.inputs[0].shape(), (std::vector<int64_t>{3, 5}));
  EXPECT_EQ(t.inputs[1].shape(), (std::vector<int64_t>{5, 4}));
  EXPECT_EQ(t.outputs[0].shape(), (std::vector<int64_t>{3, 4}));
  EXPECT_EQ(flop_count(t.outputs), 2.0 * 3 * 4 * 5);
  WorkloadTensors h = workload_tensors(make_named_workload_from_text("dense", "2,3,4,float16"));
  EXPECT_EQ(h.outputs[0].dtype(), DataType::float16());
  EXPECT_EQ(h.inputs[1].shape(), (std::vector<int64_t>{3, 4}));
  WorkloadTensors conv =
      workload_tensors(make_named_workload_from_text("conv2d_nhwc", "1,8,8,4,6,3,3,2,1,1,2"));
  EXPECT_EQ(conv.inputs[0].shape(), (std::vector<int64_t>{1, 8, 4, 8}));  // N, H, W, C
  EXPECT_EQ(conv.inputs[1].shape(), (std::vector<int64_t>{3, 3, 4, 6}));  // HWIO, C / groups
  EXPECT_EQ(conv.outputs[0].shape(), (std::vector<int64_t>{1, 4, 2, 6}));
  WorkloadTensors fused =
      workload_tensors(make_named_workload_from_text("conv2d_bias_relu_nchw", "1,3,8,8,4,3,3,1,1"));
  EXPECT_EQ(fused.inputs.size(), 3u);
  EXPECT_EQ(fused.outputs[0].name(), "relu");
  // relu(conv + bias) is never negative.
  auto out = evaluate(fused.outputs, fused.inputs, random_inputs(fused.inputs, 3));
  for (int64_t e = 0; e < out[0].size(); ++e) EXPECT_GE(out[0].get(e), 0.0);
}

TEST(Workload, DagWorkloadsAreChecked) {
  Tensor a = placeholder({4}, DataType::float32(), "a");
  Tensor b = placeholder({4}, DataType::float32(), "b");
  Tensor c = add(a, b);
  EXPECT_TT_ERROR(make_dag_workload({a}, {c}), kInvalidArgument,
                  "the outputs read placeholder 'b', which is not among the inputs");
  EXPECT_TT_ERROR(make_dag_workload({a, b, a}, {c}), kInvalidArgument, "listed twice");
  EXPECT_TT_ERROR(make_dag_workload({a, c}, {c}), kInvalidArgument, "is computed");
  EXPECT_TT_ERROR(make_dag_workload({a, b}, {}), kInvalidArgument, "needs an output");
  // An unused input is fine (a kernel may take an argument it ignores).
  EXPECT_NO_THROW(make_dag_workload({a, b, placeholder({2}, DataType::float32(), "unused")}, {c}));
  WorkloadTensors t = workload_tensors(make_dag_workload({a, b}, {c}));
  EXPECT_TRUE(t.outputs[0].same_as(c));
}

}  // namespace
}  // namespace tensortune::te
