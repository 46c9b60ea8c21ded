// Placeholders, computes, the tensor DAG, its JSON round trip and flop counts.
#include "tensortune/te/tensor.h"

#include <gtest/gtest.h>

#include "common/te_node_samples.h"
#include "common/te_util.h"
#include "common/test_util.h"
#include "tensortune/object/serialize.h"
#include "tensortune/object/structural.h"
#include "tensortune/te/evaluator.h"
#include "tensortune/te/ops.h"
#include "tensortune/te/workload.h"

namespace tensortune::te {
namespace {

using testing::arrays_close;

Tensor scaled(const Tensor& x, double factor, std::string name) {
  return compute(
      x.shape(), [&](const std::vector<Var>& v) { return x(v[0], v[1]) * factor; },
      std::move(name));
}

TEST(Tensor, PlaceholderAndCompute) {
  Tensor a = placeholder({3, 4}, DataType::float16(), "A");
  EXPECT_TRUE(a.is_placeholder());
  EXPECT_FALSE(a.compute_op());
  EXPECT_EQ(a.name(), "A");
  EXPECT_EQ(a.size(), 12);
  EXPECT_EQ(a.dtype(), DataType::float16());

  Tensor b =
      compute({3, 4}, [&](const std::vector<Var>& v) { return a(v[0], v[1]) + a(v[0], v[1]); }, "B",
              "elemwise", {{"k", 1}});
  ASSERT_TRUE(b.compute_op());
  EXPECT_EQ(b.dtype(), DataType::float16());  // the body's type
  EXPECT_EQ(b.compute_op()->tag, "elemwise");
  EXPECT_EQ(b.compute_op()->attrs["k"], 1);
  ASSERT_EQ(b.compute_op()->axis.size(), 2u);
  EXPECT_EQ(b.compute_op()->axis[0]->var->name, "i");
  EXPECT_EQ(b.compute_op()->axis[1]->var->name, "j");
  EXPECT_EQ(b.compute_op()->axis[1]->extent, 4);

  Tensor five = compute(
      {1, 1, 1, 1, 1}, [&](const std::vector<Var>&) { return Expr(1.0f); }, "five");
  EXPECT_EQ(five.compute_op()->axis[4]->var->name, "i4");

  Tensor scalar = compute(
      {}, [&](const std::vector<Var>&) { return Expr(2.0f); }, "scalar");
  EXPECT_EQ(scalar.size(), 1);
  EXPECT_EQ(scalar.ndim(), 0);
}

TEST(Tensor, IndexingIsChecked) {
  Tensor a = placeholder({3, 4}, DataType::float32(), "A");
  Var i = Var::make("i");
  EXPECT_TT_ERROR(a(i), kInvalidArgument, "tensor 'A' of shape [3, 4] has 2 dimensions");
  EXPECT_TT_ERROR(a(i, Expr(1.5f)), kTypeMismatch,
                  "index 1 of tensor 'A' must be a scalar integer");
  // Any integer type indexes.
  EXPECT_NO_THROW(a(Var::make("x", DataType::int64()), Var::make("y", DataType::uint(8))));
}

TEST(Tensor, ComputeRulesAreChecked) {
  Tensor a = placeholder({3, 4}, DataType::float32(), "A");
  EXPECT_TT_ERROR(placeholder({3, 0}), kInvalidArgument, "dimension 1 of shape [3, 0] is 0");
  EXPECT_TT_ERROR(placeholder({3}, DataType::float32(4), "V"), kTypeMismatch, "vector lanes");
  EXPECT_TT_ERROR(placeholder({int64_t{1} << 32}), kInvalidArgument, "extents must be in");
  Var free = Var::make("n");
  EXPECT_TT_ERROR(compute(
                      {3}, [&](const std::vector<Var>& v) { return a(v[0], free); }, "C"),
                  kInvalidArgument, "compute 'C': the body uses variable 'n'");
  IterVar k = reduce_axis(4, "k");
  EXPECT_TT_ERROR(
      compute(
          {3}, [&](const std::vector<Var>& v) { return sum(a(v[0], k.expr()), {k}) * 2.0f; }, "C"),
      kInvalidArgument, "a reduction may only be the whole body");
  EXPECT_TT_ERROR(compute(
                      {3}, [&](const std::vector<Var>&) { return Expr(); }, "C"),
                  kInvalidArgument, "the body is null");
  EXPECT_TT_ERROR(reduce_axis(0), kInvalidArgument, "reduction axis 'k' has extent 0");
  // A reduction listing the same axis twice.
  EXPECT_TT_ERROR(compute(
                      {3},
                      [&](const std::vector<Var>& v) {
                        return sum(a(v[0], k.expr()), {k, k});
                      },
                      "C"),
                  kInvalidArgument, "'k' is bound twice");
}

TEST(Tensor, InputsAndPostOrderAreDeterministic) {
  Tensor a = placeholder({4, 4}, DataType::float32(), "A");
  Tensor b = placeholder({4, 4}, DataType::float32(), "B");
  Tensor c = compute(
      {4, 4},
      [&](const std::vector<Var>& v) { return b(v[0], v[1]) + a(v[0], v[1]) + b(v[1], v[0]); },
      "C");
  std::vector<Tensor> inputs = input_tensors(c);
  ASSERT_EQ(inputs.size(), 2u);  // first-use order, each once
  EXPECT_TRUE(inputs[0].same_as(b));
  EXPECT_TRUE(inputs[1].same_as(a));
  EXPECT_TRUE(input_tensors(a).empty());

  Tensor d = relu(c);
  Tensor e = add(d, a);
  std::vector<Tensor> order = post_order_tensors({e, c});
  std::vector<std::string> names;
  for (const Tensor& t : order) names.push_back(t.name());
  EXPECT_EQ(names, (std::vector<std::string>{"B", "A", "C", "relu", "add"}));
  // Loading the graph again gives the same order (nothing depends on addresses).
  Workload w = make_dag_workload({a, b}, {e});
  auto loaded = load_json_as<Workload>(save_json(w)).as<DagWorkloadNode>();
  std::vector<std::string> again;
  for (const Tensor& t : post_order_tensors(loaded->outputs)) again.push_back(t.name());
  EXPECT_EQ(again, (std::vector<std::string>{"B", "A", "C", "relu", "add"}));
  std::vector<Tensor> phs = placeholder_inputs({e});
  ASSERT_EQ(phs.size(), 2u);
  EXPECT_TRUE(phs[0].same_as(b));
}

// The required test: one placeholder feeding two computes that meet again
// (C = A * A^T, built as scale(A) . transpose(A)) survives save/load with the
// sharing intact and computes the same values.
TEST(Tensor, SharedInputsSurviveRoundTrip) {
  Tensor a = placeholder({5, 3}, DataType::float32(), "A");
  Tensor left = scaled(a, 2.0, "A2");   // compute 1 reading A
  Tensor right = transpose(a, {1, 0});  // compute 2 reading A
  Tensor c = matmul(left, right);       // where they meet
  Workload w = make_dag_workload({a}, {c});

  std::string text = save_string(w);
  auto loaded = load_string(text);
  auto dag = std::dynamic_pointer_cast<const DagWorkloadNode>(loaded);
  ASSERT_TRUE(dag);
  ASSERT_EQ(dag->inputs.size(), 1u);
  ASSERT_EQ(dag->outputs.size(), 1u);
  Tensor c2 = dag->outputs[0];
  std::vector<Tensor> meet = input_tensors(c2);
  ASSERT_EQ(meet.size(), 2u);
  std::vector<Tensor> via_left = input_tensors(meet[0]);
  std::vector<Tensor> via_right = input_tensors(meet[1]);
  ASSERT_EQ(via_left.size(), 1u);
  ASSERT_EQ(via_right.size(), 1u);
  // The same node, not an equal copy.
  EXPECT_TRUE(via_left[0].same_as(via_right[0]));
  EXPECT_TRUE(via_left[0].same_as(dag->inputs[0]));
  EXPECT_FALSE(via_left[0].same_as(a));
  // The whole graph: four tensors, each once; A is written once in the JSON.
  EXPECT_EQ(post_order_tensors(dag->outputs).size(), 4u);
  int placeholders_saved = 0;
  nlohmann::json saved = nlohmann::json::parse(text);
  for (const auto& node : saved["nodes"]) {
    if (node["type"] == "te.PlaceholderOp") ++placeholders_saved;
  }
  EXPECT_EQ(placeholders_saved, 1);
  EXPECT_TRUE(structural_equal(w, Workload(dag)));
  EXPECT_EQ(structural_hash(w), structural_hash(Workload(dag)));
  EXPECT_EQ(workload_key(w), workload_key(Workload(dag)));

  NDArray input = NDArray::random(DataType::float32(), {5, 3}, 7);
  NDArray before = evaluate({c}, {a}, {input})[0];
  NDArray after = evaluate(dag->outputs, dag->inputs, {input})[0];
  EXPECT_EQ(max_abs_diff(before, after), 0.0);
  // And it is C = 2 A A^T.
  NDArray expected = testing::make_array(DataType::float32(), {5, 5}, [&](const auto& ix) {
    double s = 0;
    for (int64_t k = 0; k < 3; ++k) s += 2 * input.at({ix[0], k}) * input.at({ix[1], k});
    return s;
  });
  EXPECT_TRUE(arrays_close(after, expected));

  // The literal C = A A^T: one compute reading A twice.
  Tensor direct = matmul(a, a, false, true);
  auto direct_back =
      load_json_as<Workload>(save_json(make_dag_workload({a}, {direct}))).as<DagWorkloadNode>();
  ASSERT_EQ(input_tensors(direct_back->outputs[0]).size(), 1u);
  EXPECT_TRUE(input_tensors(direct_back->outputs[0])[0].same_as(direct_back->inputs[0]));
  NDArray gram = evaluate(direct_back->outputs, direct_back->inputs, {input})[0];
  NDArray half_expected = testing::make_array(DataType::float32(), {5, 5}, [&](const auto& ix) {
    return expected.at({ix[0], ix[1]}) / 2;
  });
  EXPECT_TRUE(arrays_close(gram, half_expected));
}

TEST(Tensor, RoundTripOfBoundVariablesAndAttrs) {
  Tensor x = placeholder({2, 3, 8, 8}, DataType::float32(), "x");
  Tensor w = placeholder({4, 3, 3, 3}, DataType::float32(), "w");
  Tensor y = max_pool2d_nchw(conv2d_nchw(x, w, Conv2dAttrsNode::uniform(1, 1)),
                             Pool2dAttrsNode::uniform(3, 2, 1));
  Workload dag = make_dag_workload({x, w}, {y});
  auto back = load_string(save_string(dag));
  EXPECT_TRUE(structural_equal(ObjectPtr(dag.ptr()), back))
      << *first_difference(ObjectPtr(dag.ptr()), back);
  EXPECT_EQ(structural_hash(ObjectPtr(dag.ptr())), structural_hash(back));
  // The -inf pad value of the max pool is written in a form JSON text can hold.
  EXPECT_NE(save_string(dag).find("\"-inf\""), std::string::npos);
  // Building the same program twice gives equal graphs (fresh variables match up to renaming).
  Tensor y2 = max_pool2d_nchw(conv2d_nchw(x, w, Conv2dAttrsNode::uniform(1, 1)),
                              Pool2dAttrsNode::uniform(3, 2, 1));
  EXPECT_TRUE(structural_equal(y, y2));
  EXPECT_EQ(structural_hash(y), structural_hash(y2));
  Tensor y3 = max_pool2d_nchw(conv2d_nchw(x, w, Conv2dAttrsNode::uniform(1, 0)),
                              Pool2dAttrsNode::uniform(3, 2, 1));
  EXPECT_FALSE(structural_equal(y, y3));
}

TEST(Tensor, LoadRejectsInconsistentTensors) {
  Tensor a = placeholder({3, 4}, DataType::float32(), "A");
  Tensor b = relu(a);
  nlohmann::json doc = save_json(b);
  // Find the output tensor node (the root) and give it a wrong shape.
  auto& root = doc["nodes"][doc["root"].get<size_t>()];
  root["shape"] = {3, 5};
  EXPECT_TT_ERROR(load_json(doc), kInvalidArgument, "differs from the extents [3, 4]");
  doc = save_json(b);
  doc["nodes"][doc["root"].get<size_t>()]["dtype"] = "float16";
  EXPECT_TT_ERROR(load_json(doc), kTypeMismatch, "differs from the type float32");
}

TEST(FlopCount, CountsArithmeticOnData) {
  Tensor a = placeholder({6, 7}, DataType::float32(), "A");
  Tensor b = placeholder({7, 5}, DataType::float32(), "B");
  EXPECT_EQ(flop_count({matmul(a, b)}), 2.0 * 6 * 5 * 7);
  EXPECT_EQ(flop_count({a}), 0.0);
  // Data movement is free; relu is one max per element.
  EXPECT_EQ(flop_count({transpose(a)}), 0.0);
  EXPECT_EQ(flop_count({reshape(a, {42})}), 0.0);
  EXPECT_EQ(flop_count({pad(a, {1, 1}, {2, 2})}), 0.0);
  EXPECT_EQ(flop_count({relu(a)}), 42.0);
  // Each stage once, even when two outputs share it.
  Tensor c = matmul(a, b);
  EXPECT_EQ(flop_count({relu(c), c}), 2.0 * 6 * 5 * 7 + 30);
  // dense with a bias: the matmul plus one add per output.
  Tensor w = placeholder({5, 7}, DataType::float32(), "W");
  Tensor bias = placeholder({5}, DataType::float32(), "bias");
  EXPECT_EQ(flop_count({dense(a, w, bias)}), 2.0 * 6 * 5 * 7 + 30);
  // conv2d: 2 * N*K*OH*OW * C/groups*R*S, the padding stage free.
  Tensor x = placeholder({1, 4, 9, 9}, DataType::float32(), "x");
  Tensor k = placeholder({6, 2, 3, 3}, DataType::float32(), "k");
  Tensor y = conv2d_nchw(x, k, Conv2dAttrsNode::uniform(2, 1, 1, 2));
  EXPECT_EQ(y.shape(), (std::vector<int64_t>{1, 6, 5, 5}));
  EXPECT_EQ(flop_count({y}), 2.0 * 6 * 5 * 5 * 2 * 3 * 3);
  // softmax over [M, N]: max (1 per element), exp(x - max) (2), sum (1), times
  // the reciprocal of the sum (2: the count follows the compute as written,
  // though the compiler hoists the reciprocal out of the row).
  Tensor s = placeholder({3, 8}, DataType::float32(), "s");
  EXPECT_EQ(flop_count({softmax(s)}), 6.0 * 24);
  // A reduction with an init: the init counts once per output element.
  IterVar r = reduce_axis(7, "r");
  Tensor with_init = compute(
      {6},
      [&](const std::vector<Var>& v) {
        return ir::reduce(ir::ReduceOp::kSum, a(v[0], r.expr()) * a(v[0], r.expr()), {r}, Expr(),
                          a(v[0], 0) + 1.0f);
      },
      "with_init");
  EXPECT_EQ(flop_count({with_init}), 6.0 * (7 * 2 + 1));
  // gelu: erf, three multiplies and an add per element.
  EXPECT_EQ(flop_count({gelu(a)}), 5.0 * 42);
}

}  // namespace
}  // namespace tensortune::te
