// The graph IR and its passes: type inference and its errors, graphs that
// cannot be malformed, passes that compute what the graph did (checked
// against the reference evaluator, call by call) and never change their
// input, fusion in an order that runs producers first, reshapes as free
// views, and the compiled model's memory plan and runtime errors.
#include "tensortune/graph/graph.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <functional>
#include <map>
#include <random>
#include <unordered_map>

#include "common/module_cache.h"
#include "common/test_util.h"
#include "tensortune/graph/compile.h"
#include "tensortune/graph/partition.h"
#include "tensortune/graph/passes.h"
#include "tensortune/object/serialize.h"
#include "tensortune/object/structural.h"
#include "tensortune/runtime/model_folder.h"
#include "tensortune/schedule/random_schedule.h"
#include "tensortune/schedule/steps.h"
#include "tensortune/search/default_schedule.h"
#include "tensortune/support/files.h"
#include "tensortune/support/shape.h"
#include "tensortune/support/strings.h"
#include "tensortune/te/evaluator.h"

namespace tensortune::graph {
namespace {

namespace fs = std::filesystem;
using ir::DataType;
const DataType kF32 = DataType::float32();

/// The graph's outputs by the reference evaluator, one call at a time.
std::vector<te::NDArray> evaluate_graph(const Graph& g, const std::vector<te::NDArray>& inputs) {
  std::unordered_map<const Object*, te::NDArray> value;
  for (size_t i = 0; i < g->inputs.size(); ++i) value[g->inputs[i].get()] = inputs[i];
  auto of = [&](const Value& v) -> te::NDArray {
    if (auto c = dynamic_cast<const ConstantNode*>(v.get())) return c->data.array();
    return value.at(v.get());
  };
  for (const auto& c : calls_in_order(g)) {
    std::vector<te::Tensor> ps;
    std::vector<te::NDArray> args;
    for (size_t i = 0; i < c->args.size(); ++i) {
      ps.push_back(te::placeholder(c->args[i]->shape, c->args[i]->dtype, "a" + std::to_string(i)));
      args.push_back(of(c->args[i]));
    }
    value[c.get()] = te::evaluate({te::find_op(c->op).compute(ps, c->attrs.get())}, ps, args)[0];
  }
  std::vector<te::NDArray> out;
  for (const auto& o : g->outputs) out.push_back(of(o));
  return out;
}

/// The graph's outputs with all its calls composed into one expression, as
/// a fused group computes them: each call reads its producers' stages (and
/// through a `narrow`, as fused operators do).
std::vector<te::NDArray> evaluate_composed(const Graph& g, const std::vector<te::NDArray>& inputs) {
  std::unordered_map<const Object*, te::Tensor> tensor;
  std::vector<te::Tensor> placeholders;
  std::vector<te::NDArray> arrays;
  auto bind = [&](const Value& v, const te::NDArray& a) {
    placeholders.push_back(
        te::placeholder(v->shape, v->dtype, "p" + std::to_string(arrays.size())));
    arrays.push_back(a);
    tensor[v.get()] = placeholders.back();
  };
  for (size_t i = 0; i < g->inputs.size(); ++i) bind(g->inputs[i], inputs[i]);
  for (const auto& c : calls_in_order(g)) {
    std::vector<te::Tensor> args;
    for (const auto& a : c->args) {
      if (auto k = dynamic_cast<const ConstantNode*>(a.get()); k && !tensor.count(a.get())) {
        bind(a, k->data.array());
      }
      args.push_back(tensor.at(a.get()));
    }
    tensor[c.get()] = te::find_op(c->op).compute(args, c->attrs.get());
  }
  std::vector<te::Tensor> outputs;
  for (const auto& o : g->outputs) outputs.push_back(tensor.at(o.get()));
  return te::evaluate(outputs, placeholders, arrays);
}

Value weight(std::vector<int64_t> shape, uint64_t seed) {
  return constant(te::NDArray::random(kF32, std::move(shape), seed, -0.5, 0.5),
                  "w" + std::to_string(seed));
}

te::Attrs conv_attrs(std::vector<int64_t> padding, std::vector<int64_t> strides = {1, 1}) {
  auto a = make_node<te::Conv2dAttrsNode>();
  a->padding = std::move(padding);
  a->strides = std::move(strides);
  return te::Attrs(a);
}

te::Attrs norm_attrs(int64_t axis) {
  auto a = make_node<te::NormAttrsNode>();
  a->axis = axis;
  return te::Attrs(a);
}

te::Attrs reshape_attrs(std::vector<int64_t> shape) {
  auto a = make_node<te::ReshapeAttrsNode>();
  a->shape = std::move(shape);
  return te::Attrs(a);
}

/// x -> conv3x3 -> batch_norm -> relu -> (+ shortcut conv1x1 of x) -> relu:
/// a residual block, NCHW, with everything the passes rewrite.
Graph residual_block() {
  auto x = input("x", {1, 4, 6, 6}, kF32);
  Value y = call("nn.conv2d", {x, weight({8, 4, 3, 3}, 1)}, conv_attrs({1, 1, 1, 1}), "conv_a");
  te::NDArray var = te::NDArray::random(kF32, {8}, 9, 0.5, 1.5);
  y = call("nn.batch_norm",
           {y, weight({8}, 2), weight({8}, 3), weight({8}, 4), constant(var, "var")}, norm_attrs(1),
           "bn_a");
  y = call("relu", {y}, te::Attrs(), "relu_a");
  Value s = call("nn.conv2d", {x, weight({8, 4, 1, 1}, 5)}, conv_attrs({0, 0, 0, 0}), "conv_s");
  Value out = call("relu", {call("add", {y, s}, te::Attrs(), "add")}, te::Attrs(), "relu_out");
  return Graph::make({x}, {out}, {"out"});
}

TEST(GraphIr, CallsInferTheirTypeAndNameWhatIsWrong) {
  auto x = input("x", {1, 4, 6, 6}, kF32);
  Value y = call("nn.conv2d", {x, weight({8, 4, 3, 3}, 1)}, conv_attrs({1, 1, 1, 1}, {2, 2}), "c");
  EXPECT_EQ(y->shape, (std::vector<int64_t>{1, 8, 3, 3}));
  EXPECT_TT_ERROR(
      call("nn.conv2d", {x, weight({8, 3, 3, 3}, 1)}, conv_attrs({0, 0, 0, 0}), "bad_conv"),
      kInvalidArgument, "'nn.conv2d' (bad_conv): groups 1 do not fit 4 input channels");
  EXPECT_TT_ERROR(
      call("nn.dense", {input("a", {2, 3}, kF32), weight({4, 5}, 1)}, te::Attrs(), "fc"),
      kInvalidArgument, "'nn.dense' (fc): data [2, 3] and weight [4, 5] differ in K");
  EXPECT_TT_ERROR(call("relu", {x, x}), kInvalidArgument, "relu");
  EXPECT_TT_ERROR(call("no_such_op", {x}), kNotFound, "no_such_op");
  EXPECT_TT_ERROR(call("nn.conv2d", {x, weight({8, 4, 3, 3}, 1)}, norm_attrs(1)), kInvalidArgument,
                  "graph.Conv2dAttrs");
}

TEST(GraphIr, GraphsCannotBeMalformed) {
  auto x = input("x", {2}, kF32), z = input("z", {2}, kF32);
  Value r = call("relu", {x});
  EXPECT_TT_ERROR(Graph::make({}, {r}, {"out"}), kInvalidArgument,
                  "the outputs use input 'x', which is not among the graph's inputs");
  EXPECT_TT_ERROR(Graph::make({x, input("x", {3}, kF32)}, {r}, {"out"}), kInvalidArgument,
                  "graph input name 'x' is used twice");
  EXPECT_TT_ERROR(Graph::make({x}, {r}, {"out", "more"}), kInvalidArgument, "one name each");
  EXPECT_TT_ERROR(Graph::make({x, z}, {r, r}, {"out", "out"}), kInvalidArgument,
                  "'out' is used twice");
  // A saved graph whose call does not type-checks is refused when loaded.
  Graph g = Graph::make({x}, {r}, {"out"});
  std::string text = save_string(g);
  std::string broken = text;
  size_t at = broken.find("\"shape\":[2]");
  ASSERT_NE(at, std::string::npos);
  broken.replace(at, 11, "\"shape\":[3]");
  EXPECT_ANY_THROW(load_string(broken));
  EXPECT_TRUE(structural_equal(load_string(text), ObjectPtr(g.ptr())));
}

TEST(GraphIr, PrintsOneLinePerCall) {
  std::string text = to_string(residual_block());
  EXPECT_NE(text.find("nn.conv2d("), std::string::npos) << text;
  EXPECT_NE(text.find("[1, 8, 6, 6]"), std::string::npos) << text;
  EXPECT_NE(text.find("float32"), std::string::npos) << text;
}

TEST(GraphPasses, EveryPassComputesWhatTheGraphDidAndLeavesItAsItWas) {
  Graph g = residual_block();
  const std::string bytes = save_string(g);
  const uint64_t hash = structural_hash(g);
  std::vector<te::NDArray> in = {te::NDArray::random(kF32, {1, 4, 6, 6}, 3)};
  te::NDArray expected = evaluate_graph(g, in)[0];
  const ir::Target target = ir::Target::parse("c -num-cores=2 -l2-cache=1048576");
  using Pass = std::function<Graph(const Graph&)>;
  for (auto [name, pass] : std::vector<std::pair<const char*, Pass>>{
           {"fold_constants", fold_constants},
           {"simplify_inference", simplify_inference},
           {"convert_layout_nhwc", convert_layout_nhwc},
           {"integer_matmul_as_conv2d", integer_matmul_as_conv2d},
           {"integer_conv2d_as_patches", integer_conv2d_as_patches},
           {"int8_conv2d_words", int8_conv2d_words},
           {"int_conv2d_as_float", int_conv2d_as_float},
           {"exact_integer_casts", exact_integer_casts},
           {"float16_conv2d_in_float32", float16_conv2d_in_float32},
           {"float16_ops_in_float32", float16_ops_in_float32},
           {"winograd_conv2d", [&](const Graph& x) { return winograd_conv2d(x, target); }},
           {"pad_output_channels", [&](const Graph& x) { return pad_output_channels(x, target); }},
           {"scale_conv_weights", scale_conv_weights},
           {"sink_reshapes", sink_reshapes},
           {"optimize", [&](const Graph& x) { return optimize(x, target); }}}) {
    SCOPED_TRACE(name);
    Graph out = pass(g);
    EXPECT_TRUE(te::allclose(evaluate_graph(out, in)[0], expected, te::Tolerance{1e-5, 1e-4}));
    EXPECT_EQ(save_string(g), bytes);
    EXPECT_EQ(structural_hash(g), hash);
  }
  // The optimised block: no batch norm left, convolutions in NHWC.
  std::string ops;
  for (const auto& c : calls_in_order(optimize(g))) {
    ops += c->op + " ";
    if (c->op == "nn.conv2d") {
      EXPECT_EQ(dynamic_cast<const te::Conv2dAttrsNode&>(*c->attrs).data_layout, "NHWC");
    }
  }
  EXPECT_EQ(ops.find("batch_norm"), std::string::npos) << ops;
  EXPECT_EQ(
      optimize_pass_names(),
      (std::vector<std::string>{
          "simplify_inference", "fold_constants", "convert_layout_nhwc", "integer_matmul_as_conv2d",
          "integer_conv2d_as_patches", "int8_conv2d_words", "int_conv2d_as_float",
          "exact_integer_casts", "float16_conv2d_in_float32", "float16_ops_in_float32",
          "winograd_conv2d", "pad_output_channels", "scale_conv_weights", "sink_reshapes"}));
}

// A reduction over the image keeping its axes (QLinearGlobalAveragePool's
// integer sum) reduces the NHWC value where it is: no transpose back to NCHW.
TEST(GraphPasses, ImageReductionsStayNhwc) {
  auto x = input("x", {1, 4, 6, 6}, kF32);
  Value conv = call("nn.conv2d", {x, weight({8, 4, 3, 3}, 1)}, conv_attrs({1, 1, 1, 1}), "conv");
  auto sum = make_node<te::ReduceAttrsNode>();
  sum->axes = {-1, 2};
  Value pooled = call("reduce_sum", {call("relu", {conv})}, te::Attrs(sum));
  Graph g = Graph::make({x}, {call("sigmoid", {pooled})}, {"out"});
  Graph out = convert_layout_nhwc(g);
  int reductions = 0;
  for (const auto& c : calls_in_order(out)) {
    if (c->op != "reduce_sum") continue;
    ++reductions;
    EXPECT_EQ(c->args[0]->shape, (std::vector<int64_t>{1, 6, 6, 8})) << to_string(out);
    const auto* source = dynamic_cast<const CallNode*>(c->args[0].get());
    ASSERT_NE(source, nullptr);
    EXPECT_EQ(source->op, "relu") << to_string(out);
  }
  EXPECT_EQ(reductions, 1);
  std::vector<te::NDArray> in = {te::NDArray::random(kF32, {1, 4, 6, 6}, 5)};
  EXPECT_TRUE(te::allclose(evaluate_graph(out, in)[0], evaluate_graph(g, in)[0],
                           te::Tolerance{1e-5, 1e-4}));
}

// Output channels no vector width divides: a few zero channels more, sliced
// off, and the same answer. Channels that half a vector divides stay.
TEST(GraphPasses, OutputChannelsPadToWholeVectors) {
  auto x = input("x", {1, 4, 6, 6}, kF32);
  Value odd = call("nn.conv2d", {x, weight({37, 4, 3, 3}, 1)}, conv_attrs({1, 1, 1, 1}), "odd");
  Value even = call("nn.conv2d", {x, weight({12, 4, 1, 1}, 2)}, conv_attrs({0, 0, 0, 0}), "even");
  auto rows = input("rows", {3, 16}, kF32);
  Value fc = call("nn.dense", {rows, weight({75, 16}, 3)}, te::Attrs(), "fc");
  Graph g = Graph::make({x, rows}, {call("relu", {odd}), even, fc}, {"odd", "even", "fc"});
  // AVX2: 8 float lanes, so 37 -> 40 and 75 -> 80; 12 is a multiple of 4.
  const ir::Target target = ir::Target::parse("c -mattr=avx2,fma -num-cores=2");
  Graph out = pad_output_channels(convert_layout_nhwc(g), target);
  std::map<std::string, std::vector<int64_t>> padded;
  for (const auto& c : calls_in_order(out)) {
    if (c->op == "nn.conv2d" || c->op == "nn.dense") padded[c->name] = c->shape;
  }
  EXPECT_EQ(padded["odd.padded"], (std::vector<int64_t>{1, 6, 6, 40}));
  EXPECT_EQ(padded["fc.padded"], (std::vector<int64_t>{3, 80}));
  EXPECT_EQ(padded.count("even.padded"), 0u);
  std::vector<te::NDArray> in = {te::NDArray::random(kF32, {1, 4, 6, 6}, 3),
                                 te::NDArray::random(kF32, {3, 16}, 4)};
  std::vector<te::NDArray> want = evaluate_graph(g, in), got = evaluate_graph(out, in);
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    EXPECT_TRUE(te::allclose(got[i], want[i], te::Tolerance{1e-5, 1e-4})) << i;
  }
  // AVX-512: 16 float lanes, and a convolution's 24 channels (three 8-lane
  // vectors) become two whole vectors; a dense layer's stay.
  Value conv24 = call("nn.conv2d", {x, weight({24, 4, 1, 1}, 5)}, conv_attrs({0, 0, 0, 0}), "c24");
  Value fc24 = call("nn.dense", {rows, weight({24, 16}, 6)}, te::Attrs(), "fc24");
  Graph wide = Graph::make({x, rows}, {conv24, fc24}, {"c24", "fc24"});
  const ir::Target avx512 = ir::Target::parse("c -mattr=avx2,fma,avx512f -num-cores=2");
  padded.clear();
  for (const auto& c : calls_in_order(pad_output_channels(convert_layout_nhwc(wide), avx512))) {
    if (c->op == "nn.conv2d" || c->op == "nn.dense") padded[c->name] = c->shape;
  }
  EXPECT_EQ(padded["c24.padded"], (std::vector<int64_t>{1, 6, 6, 32}));
  EXPECT_EQ(padded.count("fc24.padded"), 0u);
  EXPECT_EQ(padded["fc24"], (std::vector<int64_t>{3, 24}));
}

// A squeeze-excitation's scale moves from the data into the next
// convolution's weight where the weight is the smaller and nothing pads
// the product, and a constant one folds into a constant weight; the answer
// stays.
TEST(GraphPasses, PerChannelScalesOfConvolutionDataMoveIntoTheWeight) {
  auto x = input("x", {1, 8, 12, 12}, kF32);  // 1152 elements
  auto squeeze_excite = [](const Value& v, uint64_t seed) {
    auto layout = make_node<te::LayoutAttrsNode>();
    layout->layout = "NCHW";
    Value pooled = call("nn.global_avg_pool2d", {v}, te::Attrs(layout));
    return call("sigmoid", {call("nn.conv2d", {pooled, weight({8, 8, 1, 1}, seed)},
                                 conv_attrs({0, 0, 0, 0}))});
  };
  Value gate = squeeze_excite(x, 1);
  auto conv = [&](const Value& data, std::vector<int64_t> w, std::vector<int64_t> padding,
                  uint64_t seed, const std::string& name) {
    return call("nn.conv2d", {data, weight(std::move(w), seed)}, conv_attrs(std::move(padding)),
                name);
  };
  // Moved: a 32-element weight against 1152 elements of data.
  Value small = conv(call("multiply", {x, gate}), {4, 8, 1, 1}, {0, 0, 0, 0}, 2, "project");
  // Kept: a weight of 256 elements, more than an eighth of the data.
  Value large = conv(call("multiply", {gate, x}), {32, 8, 1, 1}, {0, 0, 0, 0}, 3, "wide");
  // Kept: small enough, but padded after the product.
  Value padded = conv(call("multiply", {x, gate}), {1, 8, 3, 3}, {1, 1, 1, 1}, 4, "padded");
  // Folded: a constant scale before a padded, strided convolution, in the
  // [C, 1, 1] form ONNX models give it.
  Value normalised = call("multiply", {x, weight({8, 1, 1}, 5)});
  Value stem = call("nn.conv2d", {normalised, weight({16, 8, 3, 3}, 6)},
                    conv_attrs({1, 1, 1, 1}, {2, 2}), "stem");
  // Kept: a product read twice, and a scale per image of a batch of 2.
  Value shared = call("multiply", {x, gate});
  Value twice = call("add", {conv(shared, {8, 8, 1, 1}, {0, 0, 0, 0}, 7, "reads_shared"), shared});
  auto pair = input("pair", {2, 8, 6, 6}, kF32);
  Value per_image = conv(call("multiply", {pair, squeeze_excite(pair, 8)}), {2, 8, 1, 1},
                         {0, 0, 0, 0}, 9, "per_image");
  Graph g = Graph::make({x, pair}, {small, large, padded, stem, twice, per_image},
                        {"small", "large", "padded", "stem", "twice", "per_image"});
  Graph out = scale_conv_weights(convert_layout_nhwc(g));
  std::map<std::string, const CallNode*> convs;
  for (const auto& c : calls_in_order(out)) {
    if (c->op == "nn.conv2d") convs[c->name] = c.get();
  }
  auto data_op = [&](const std::string& name) {
    const auto* d = dynamic_cast<const CallNode*>(convs.at(name)->args[0].get());
    return d ? d->op : std::string("input");
  };
  auto weight_op = [&](const std::string& name) {
    const Value& w = convs.at(name)->args[1];
    if (dynamic_cast<const ConstantNode*>(w.get())) return std::string("constant");
    return dynamic_cast<const CallNode&>(*w).op;
  };
  EXPECT_EQ(data_op("project"), "transpose");  // x itself, in NHWC
  EXPECT_EQ(weight_op("project"), "multiply");
  EXPECT_EQ(data_op("stem"), "transpose");
  EXPECT_EQ(weight_op("stem"), "constant");
  for (const char* kept : {"wide", "padded", "reads_shared", "per_image"}) {
    EXPECT_EQ(data_op(kept), "multiply") << kept;
    EXPECT_EQ(weight_op(kept), "constant") << kept;
  }
  std::vector<te::NDArray> in = {te::NDArray::random(kF32, {1, 8, 12, 12}, 10),
                                 te::NDArray::random(kF32, {2, 8, 6, 6}, 11)};
  std::vector<te::NDArray> want = evaluate_graph(g, in), got = evaluate_graph(out, in);
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    EXPECT_TRUE(te::allclose(got[i], want[i], te::Tolerance{1e-5, 1e-4})) << i;
  }
}

TEST(GraphPasses, PowersByConstantExponentsBecomeProducts) {
  auto x = input("x", {4, 8}, kF32);
  auto exponent = [](std::vector<int64_t> shape, std::vector<float> values) {
    te::NDArray a(kF32, std::move(shape));
    for (int64_t i = 0; i < a.size(); ++i) a.set(i, values[static_cast<size_t>(i)]);
    return constant(a, "e");
  };
  Value squared = call("power", {x, exponent({}, {2})});
  Value cubed = call("power", {x, exponent({1, 8}, std::vector<float>(8, 3))});
  Value root = call("power", {call("abs", {x}), exponent({1}, {0.5})});
  // Left alone: another exponent, exponents that differ, one that broadcasts x.
  Value other = call("power", {call("abs", {x}), exponent({1}, {2.5})});
  std::vector<float> mixed(8, 2);
  mixed[3] = 3;
  Value uneven = call("power", {x, exponent({8}, mixed)});
  Value wider = call("power", {x, exponent({2, 4, 8}, std::vector<float>(64, 2))});
  Graph g = Graph::make({x}, {squared, cubed, root, other, uneven, wider},
                        {"a", "b", "c", "d", "e", "f"});
  Graph s = simplify_inference(g);
  std::map<std::string, int> ops;
  for (const auto& c : calls_in_order(s)) ++ops[c->op];
  EXPECT_EQ(ops["power"], 3);
  EXPECT_EQ(ops["multiply"], 3);
  EXPECT_EQ(ops["sqrt"], 1);
  std::vector<te::NDArray> in = {te::NDArray::random(kF32, {4, 8}, 3)};
  std::vector<te::NDArray> before = evaluate_graph(g, in), after = evaluate_graph(s, in);
  for (size_t i = 0; i < before.size(); ++i) EXPECT_TRUE(te::allclose(after[i], before[i])) << i;
}

TEST(GraphPasses, ADisabledPassIsSkipped) {
  Graph g = residual_block();
  ir::PassContextGuard guard(
      ir::PassContext::make(ir::PassContextOptions().with_disabled("convert_layout_nhwc")));
  for (const auto& c : calls_in_order(optimize(g))) {
    if (c->op == "nn.conv2d") {
      EXPECT_EQ(dynamic_cast<const te::Conv2dAttrsNode&>(*c->attrs).data_layout, "NCHW");
    }
  }
}

/// x -> conv3x3 (pad 1, or none) -> bias -> relu, NHWC with HWIO kernels
/// already, `c` to `k` channels.
Graph nhwc_conv_block(int64_t c, int64_t k, int64_t size, int64_t pad, int64_t stride = 1) {
  auto x = input("x", {1, size, size, c}, kF32);
  auto a = make_node<te::Conv2dAttrsNode>();
  a->padding = {pad, pad, pad, pad};
  a->strides = {stride, stride};
  a->data_layout = "NHWC";
  Value y = call("nn.conv2d", {x, weight({3, 3, c, k}, 11)}, te::Attrs(a), "conv");
  auto axis = make_node<te::AxisAttrsNode>();
  axis->axis = 3;
  y = call("relu", {call("nn.bias_add", {y, weight({k}, 12)}, te::Attrs(axis), "bias")},
           te::Attrs(), "relu");
  return Graph::make({x}, {y}, {"out"});
}

std::string ops_of(const Graph& g) {
  std::string ops;
  for (const auto& c : calls_in_order(g)) ops += (ops.empty() ? "" : " ") + c->op;
  return ops;
}

TEST(GraphPasses, WinogradComputesTheConvolutionWhereItPays) {
  // 1 MiB of L2 on each of 2 cores: the 16 -> 32 kernel transformed for
  // tiles of 4 (36 * 16 * 32 * 4 bytes = 72 KiB) fits.
  const ir::Target target = ir::Target::parse("c -num-cores=2 -l2-cache=1048576");
  for (int64_t pad : {1, 0}) {
    for (int64_t size : {9, 12}) {  // 7 or 9 outputs wide with no padding: ragged last tiles
      SCOPED_TRACE(::testing::Message() << "pad " << pad << ", size " << size);
      Graph g = nhwc_conv_block(16, 32, size, pad);
      const std::string bytes = save_string(g);
      Graph w = winograd_conv2d(g, target);
      EXPECT_EQ(ops_of(w),
                "nn.winograd_input_transform reshape nn.matmul reshape "
                "nn.winograd_output_transform nn.bias_add relu");
      EXPECT_EQ(save_string(g), bytes);
      std::vector<te::NDArray> in = {te::NDArray::random(kF32, {1, size, size, 16}, 5)};
      EXPECT_TRUE(te::allclose(evaluate_graph(w, in)[0], evaluate_graph(g, in)[0],
                               te::Tolerance{1e-4, 1e-4}));
      // The output transform takes the bias and the relu: three kernels, one view each way.
      std::vector<std::string> groups;
      for (const auto& grp : fuse_groups(w)) {
        groups.push_back((grp.is_view() ? "view:" : "") + grp.description());
      }
      EXPECT_EQ(groups, (std::vector<std::string>{
                            "nn.winograd_input_transform", "view:reshape", "nn.matmul",
                            "view:reshape", "nn.winograd_output_transform+nn.bias_add+relu"}));
    }
  }
  // The product's task is the batched matmul itself, with no reshape stages
  // around it (a copy to the same shape is no elementwise consumer its tiles
  // could take in), reading the transformed kernel as a constant input.
  graph::Partition partition = partition_model(nhwc_conv_block(64, 64, 16, 1), target);
  int products = 0;
  for (const auto& t : partition.tasks) {
    if (t.description != "nn.matmul") continue;
    ++products;
    te::WorkloadTensors tensors = te::workload_tensors(t.task->workload);
    ASSERT_EQ(tensors.outputs.size(), 1u);
    auto op = tensors.outputs[0].compute_op();
    ASSERT_TRUE(op);
    EXPECT_EQ(op->tag, "batch_matmul");
    EXPECT_EQ(tensors.constant_inputs, (std::vector<int>{1}));
  }
  EXPECT_EQ(products, 1);
  // Tiles of 4 where the output has at least 16 of them, else tiles of 2.
  auto tile_of = [](const Graph& w) -> int64_t {
    for (const auto& c : calls_in_order(w)) {
      if (c->op == "nn.winograd_output_transform") {
        return dynamic_cast<const te::WinogradAttrsNode&>(*c->attrs).tile;
      }
    }
    return 0;
  };
  EXPECT_EQ(tile_of(winograd_conv2d(nhwc_conv_block(64, 64, 16, 1), target)), 4);  // 4 x 4 tiles
  EXPECT_EQ(tile_of(winograd_conv2d(nhwc_conv_block(64, 64, 13, 1), target)), 4);  // ragged
  EXPECT_EQ(tile_of(winograd_conv2d(nhwc_conv_block(64, 64, 8, 1), target)), 2);   // 2 x 2 of 4
  EXPECT_EQ(tile_of(winograd_conv2d(nhwc_conv_block(512, 512, 7, 1), target)), 2);
  // Left direct: strided, too few channels, too few tiles even of 2.
  auto direct = [](const Graph& g, const ir::Target& t) {
    return ops_of(winograd_conv2d(g, t)) == "nn.conv2d nn.bias_add relu";
  };
  EXPECT_TRUE(direct(nhwc_conv_block(16, 32, 9, 1, 2), target));
  EXPECT_TRUE(direct(nhwc_conv_block(8, 32, 9, 1), target));
  EXPECT_TRUE(direct(nhwc_conv_block(64, 64, 6, 1), target));  // 3 x 3 tiles of 2
  EXPECT_TRUE(direct(nhwc_conv_block(64, 64, 8, 1), ir::Target()));
}

/// NHWC conv2d attributes: padding (top, left, bottom, right), strides, dilation.
te::Attrs nhwc_conv_attrs(std::vector<int64_t> padding, std::vector<int64_t> strides,
                          std::vector<int64_t> dilation) {
  auto a = make_node<te::Conv2dAttrsNode>();
  a->padding = std::move(padding);
  a->strides = std::move(strides);
  a->dilation = std::move(dilation);
  a->data_layout = "NHWC";
  return te::Attrs(a);
}

// An int32 NHWC convolution of centred bytes, as ConvInteger imports.
Graph centred_int8_conv(DataType bytes, int64_t zero_point, bool through_transpose, te::Attrs attrs,
                        double kernel_high = 127.99,
                        std::vector<int64_t> kernel_shape = {3, 2, 6, 5}) {
  const DataType i32 = DataType::int32();
  auto x = input(
      "x", through_transpose ? std::vector<int64_t>{1, 6, 9, 8} : std::vector<int64_t>{1, 9, 8, 6},
      bytes);
  auto cast = make_node<te::CastAttrsNode>();
  cast->dtype = i32;
  Value wide = call("cast", {x}, te::Attrs(cast), "wide");
  te::NDArray z(i32, {});
  z.set_int(0, zero_point);
  Value centred = call("subtract", {wide, constant(z, "zp")}, te::Attrs(), "centred");
  if (through_transpose) {
    auto perm = make_node<te::TransposeAttrsNode>();
    perm->perm = {0, 2, 3, 1};
    centred = call("transpose", {centred}, te::Attrs(perm), "nhwc");
  }
  Value w = constant(te::NDArray::random(i32, kernel_shape, 3, -128, kernel_high), "w");
  return Graph::make({x}, {call("nn.conv2d", {centred, w}, std::move(attrs), "conv")}, {"out"});
}

TEST(GraphPasses, Int8ConvolutionsComputeOnWordsOfFourChannels) {
  const auto& attrs = nhwc_conv_attrs;
  struct Case {
    DataType bytes;
    int64_t zero_point;
    bool transpose;
    te::Attrs attrs;
  };
  const DataType u8 = DataType::uint(8), i8 = DataType::int_(8);
  for (const Case& c : {Case{u8, 131, false, attrs({1, 1, 1, 1}, {1, 1}, {1, 1})},
                        Case{u8, 0, true, attrs({2, 0, 1, 1}, {2, 1}, {1, 2})},
                        Case{i8, -7, false, attrs({0, 1, 2, 0}, {1, 2}, {1, 1})},
                        Case{i8, 127, true, attrs({1, 1, 1, 1}, {1, 1}, {2, 1})}}) {
    SCOPED_TRACE(::testing::Message() << c.bytes.str() << " zero point " << c.zero_point);
    Graph g = centred_int8_conv(c.bytes, c.zero_point, c.transpose, c.attrs);
    const std::string before = save_string(g);
    Graph words = int8_conv2d_words(g);
    EXPECT_EQ(save_string(g), before);
    const std::string ops = ops_of(words);
    EXPECT_NE(ops.find("nn.pack_int8x4"), std::string::npos) << ops;
    EXPECT_NE(ops.find("nn.conv2d_int8x4"), std::string::npos) << ops;
    EXPECT_EQ(ops.find("nn.conv2d "), std::string::npos) << ops;
    const double low = c.bytes == u8 ? 0 : -128, high = c.bytes == u8 ? 255.99 : 127.99;
    std::vector<te::NDArray> in = {te::NDArray::random(c.bytes, g->inputs[0]->shape, 9, low, high)};
    EXPECT_TRUE(
        te::allclose(evaluate_graph(words, in)[0], evaluate_graph(g, in)[0], te::Tolerance{0, 0}));
  }
  // Left as they are: a kernel beyond int8, a grouped convolution.
  Graph wide_kernel = centred_int8_conv(u8, 3, false, attrs({0, 0, 0, 0}, {1, 1}, {1, 1}), 200);
  EXPECT_EQ(ops_of(int8_conv2d_words(wide_kernel)), "cast subtract nn.conv2d");
}

/// A constant int32 zero point of 5, as a model's QLinear operators hold one.
Value zero_point_five() {
  te::NDArray z(DataType::int32(), {});
  z.set_int(0, 5);
  return constant(z, "zp");
}

// MatMulInteger and QLinearMatMul by a constant int8 matrix: a 1x1
// convolution over the rows, on words of four bytes, its zero point a
// constant or (DynamicQuantizeLinear's) one value known only at run time.
TEST(GraphPasses, IntegerMatmulsComputeOnWordsWithZeroPointsKnownAtRunTime) {
  const DataType i32 = DataType::int32(), u8 = DataType::uint(8), i8 = DataType::int_(8);
  auto cast_to_i32 = [&](const Value& v, const char* name) {
    auto a = make_node<te::CastAttrsNode>();
    a->dtype = i32;
    return call("cast", {v}, te::Attrs(a), name);
  };
  struct Case {
    DataType bytes;
    std::vector<int64_t> shape;
    int zero_point;  // 0: none; 1: a constant; 2: a graph input, as at run time
  };
  for (const Case& c : {Case{u8, {2, 3, 12}, 2}, Case{i8, {5, 7}, 2}, Case{u8, {4, 9}, 1},
                        Case{i8, {1, 2, 3, 8}, 0}}) {
    SCOPED_TRACE(::testing::Message()
                 << c.bytes.str() << " " << shape_text(c.shape) << " zero point " << c.zero_point);
    auto x = input("x", c.shape, c.bytes);
    auto z = input("z", {1}, c.bytes);
    te::NDArray constant_z(i32, {});
    constant_z.set_int(0, c.bytes == u8 ? 131 : -9);
    Value a = cast_to_i32(x, "wide");
    if (c.zero_point == 1) a = call("subtract", {a, constant(constant_z, "zp")}, te::Attrs(), "a");
    if (c.zero_point == 2) a = call("subtract", {a, cast_to_i32(z, "zp")}, te::Attrs(), "a");
    const int64_t k = c.shape.back();
    Value w = constant(te::NDArray::random(i32, {k, 6}, 4, -128, 127.99), "w");
    std::vector<Ref<InputNode>> inputs = {x};
    if (c.zero_point == 2) inputs.push_back(z);
    Graph g = Graph::make(inputs, {call("nn.matmul", {a, w}, te::Attrs(), "mm")}, {"out"});
    const std::string before = save_string(g);
    Graph words = int8_conv2d_words(integer_matmul_as_conv2d(g));
    EXPECT_EQ(save_string(g), before);
    const std::string ops = ops_of(words);
    EXPECT_NE(ops.find("nn.conv2d_int8x4"), std::string::npos) << ops;
    EXPECT_EQ(ops.find("nn.matmul"), std::string::npos) << ops;
    const double low = c.bytes == u8 ? 0 : -128, high = c.bytes == u8 ? 255.99 : 127.99;
    std::vector<te::NDArray> in = {te::NDArray::random(c.bytes, c.shape, 9, low, high)};
    if (c.zero_point == 2) in.push_back(te::NDArray::random(c.bytes, {1}, 10, low, high));
    EXPECT_TRUE(
        te::allclose(evaluate_graph(words, in)[0], evaluate_graph(g, in)[0], te::Tolerance{0, 0}));
  }
  // Two readers of one value share its conversion (a transformer's Q, K and
  // V projections); a matrix neither on words nor exact in float32 stays.
  auto rows = input("rows", {6, 7}, i8);
  Value centred_rows =
      call("subtract", {cast_to_i32(rows, "wide"), zero_point_five()}, te::Attrs(), "a");
  auto product = [&](const char* name, uint64_t seed) {
    return call("nn.matmul",
                {centred_rows, constant(te::NDArray::random(i32, {7, 4}, seed, -128, 127.99), "w")},
                te::Attrs(), name);
  };
  Graph shared = Graph::make({rows}, {product("q", 4), product("k", 5)}, {"q", "k"});
  Graph shared_words = int8_conv2d_words(integer_matmul_as_conv2d(shared));
  const std::string ops = ops_of(shared_words);
  std::vector<te::NDArray> shared_in = {te::NDArray::random(i8, {6, 7}, 9, -128, 127.99)};
  for (size_t o = 0; o < 2; ++o) {
    EXPECT_TRUE(te::allclose(evaluate_graph(shared_words, shared_in)[o],
                             evaluate_graph(shared, shared_in)[o], te::Tolerance{0, 0}));
  }
  std::map<std::string, int> count;
  for (const auto& call : calls_in_order(shared_words)) ++count[call->op];
  EXPECT_EQ(count["nn.conv2d_int8x4"], 2) << ops;
  EXPECT_EQ(count["nn.pack_int8x4"], 1) << ops;
  EXPECT_EQ(count["add"], 1) << ops;  // int8 moved up by 128 once
  auto wide = input("wide", {2, 1024}, u8);
  Value centred =
      call("subtract", {cast_to_i32(wide, "w32"), zero_point_five()}, te::Attrs(), "centred");
  Value beyond = constant(te::NDArray::random(i32, {1024, 4}, 4, 0, 255.99), "beyond");
  Graph stays =
      Graph::make({wide}, {call("nn.matmul", {centred, beyond}, te::Attrs(), "mm")}, {"out"});
  EXPECT_EQ(ops_of(integer_matmul_as_conv2d(stays)), "cast subtract nn.matmul");

  // A padded convolution pads with the zero point's byte, computed at run
  // time here (int8 data and zero point moved up by 128); a grouped one is
  // left to int_conv2d_as_float.
  for (auto [bytes, groups] : {std::pair{u8, 1}, std::pair{i8, 1}, std::pair{u8, 2}}) {
    SCOPED_TRACE(::testing::Message() << bytes.str() << ", " << groups << " groups");
    auto x = input("x", {1, 5, 5, 8}, bytes);
    auto z = input("z", {}, bytes);
    auto padded = make_node<te::Conv2dAttrsNode>();
    padded->padding = {1, 2, 1, 0};
    padded->groups = groups;
    padded->data_layout = "NHWC";
    Value a = call("subtract", {cast_to_i32(x, "wide"), cast_to_i32(z, "zp")}, te::Attrs(), "a");
    Value w = constant(te::NDArray::random(i32, {3, 3, 8 / groups, 4}, 4, -128, 127.99), "w");
    Graph conv =
        Graph::make({x, z}, {call("nn.conv2d", {a, w}, te::Attrs(padded), "conv")}, {"out"});
    Graph out = int_conv2d_as_float(int8_conv2d_words(conv));
    const std::string ops = ops_of(out);
    EXPECT_EQ(ops.find("nn.conv2d_int8x4") != std::string::npos, groups == 1) << ops;
    EXPECT_EQ(ops.find("cast nn.conv2d cast") != std::string::npos, groups == 2) << ops;
    // A byte of 128 or more (as uint8) makes a negative pad word.
    const bool is_u8 = bytes == u8;
    for (double zero_point :
         is_u8 ? std::vector<double>{0, 131, 255} : std::vector<double>{-128, -1, 0, 127}) {
      te::NDArray zp(bytes, {});
      zp.set(0, zero_point);
      std::vector<te::NDArray> in = {
          te::NDArray::random(bytes, {1, 5, 5, 8}, 9, is_u8 ? 0 : -128, is_u8 ? 255.99 : 127.99),
          zp};
      EXPECT_TRUE(te::allclose(evaluate_graph(out, in)[0], evaluate_graph(conv, in)[0],
                               te::Tolerance{0, 0}));
    }
  }
}

// An int8 convolution of few channels (an STFT's one) over a wide window:
// a 1x1 convolution over its patches, whose words of four are full.
TEST(GraphPasses, FewChannelIntegerConvolutionsComputeOnPatches) {
  const DataType i32 = DataType::int32(), u8 = DataType::uint(8), i8 = DataType::int_(8);
  struct Case {
    DataType bytes;
    std::vector<int64_t> data, kernel;
    te::Attrs attrs;
  };
  for (const Case& c :
       {Case{u8, {1, 1, 200, 1}, {1, 32, 1, 10}, nhwc_conv_attrs({0, 0, 0, 0}, {1, 16}, {1, 1})},
        Case{i8, {2, 9, 8, 3}, {2, 3, 3, 5}, nhwc_conv_attrs({0, 0, 0, 0}, {2, 1}, {2, 2})}}) {
    SCOPED_TRACE(c.bytes.str());
    auto x = input("x", c.data, c.bytes);
    auto cast = make_node<te::CastAttrsNode>();
    cast->dtype = i32;
    Value centred =
        call("subtract", {call("cast", {x}, te::Attrs(cast), "wide"), zero_point_five()},
             te::Attrs(), "centred");
    Value w = constant(te::NDArray::random(i32, c.kernel, 4, -128, 127.99), "w");
    Graph g = Graph::make({x}, {call("nn.conv2d", {centred, w}, c.attrs, "conv")}, {"out"});
    Graph words = int8_conv2d_words(integer_conv2d_as_patches(g));
    const std::string ops = ops_of(words);
    EXPECT_NE(ops.find("take"), std::string::npos) << ops;
    EXPECT_NE(ops.find("nn.conv2d_int8x4"), std::string::npos) << ops;
    const bool is_u8 = c.bytes == u8;
    std::vector<te::NDArray> in = {
        te::NDArray::random(c.bytes, c.data, 9, is_u8 ? 0 : -128, is_u8 ? 255.99 : 127.99)};
    EXPECT_TRUE(
        te::allclose(evaluate_graph(words, in)[0], evaluate_graph(g, in)[0], te::Tolerance{0, 0}));
  }
}

TEST(GraphPasses, GroupedIntegerConvolutionsComputeExactlyInFloat) {
  auto grouped = [](int64_t groups) {
    auto a = make_node<te::Conv2dAttrsNode>();
    a->padding = {1, 0, 1, 2};
    a->strides = {2, 1};
    a->groups = groups;
    a->data_layout = "NHWC";
    return te::Attrs(a);
  };
  const DataType u8 = DataType::uint(8), i8 = DataType::int_(8);
  struct Case {
    DataType bytes;
    int64_t zero_point, groups;
    std::vector<int64_t> kernel;
  };
  for (const Case& c : {Case{u8, 255, 6, {3, 3, 1, 6}}, Case{i8, -128, 6, {3, 3, 1, 6}},
                        Case{u8, 17, 2, {3, 2, 3, 4}}, Case{u8, 0, 1, {3, 2, 6, 5}}}) {
    SCOPED_TRACE(::testing::Message() << c.bytes.str() << " groups " << c.groups);
    Graph g = centred_int8_conv(c.bytes, c.zero_point, false, grouped(c.groups), 127.99, c.kernel);
    const std::string before = save_string(g);
    Graph as_float = int_conv2d_as_float(g);
    EXPECT_EQ(save_string(g), before);
    EXPECT_EQ(ops_of(as_float), "cast subtract cast nn.conv2d cast");
    const double low = c.bytes == u8 ? 0 : -128, high = c.bytes == u8 ? 255.99 : 127.99;
    std::vector<te::NDArray> in = {te::NDArray::random(c.bytes, g->inputs[0]->shape, 9, low, high)};
    te::NDArray want = evaluate_graph(g, in)[0];
    te::NDArray got = evaluate_graph(as_float, in)[0];
    EXPECT_EQ(got.dtype(), DataType::int32());
    EXPECT_TRUE(te::allclose(got, want, te::Tolerance{0, 0}));
  }
  // Sums float32 might round are left in int32: 2^17-sized weights.
  Graph big = centred_int8_conv(u8, 3, false, grouped(6), 131072, {3, 3, 1, 6});
  EXPECT_EQ(ops_of(int_conv2d_as_float(big)), "cast subtract nn.conv2d");
}

// QLinearConv's requantization then the next layer's centring, as they
// import: the round trip through uint8 and the zero point taken out in
// int32 change no value, and go.
TEST(GraphPasses, CastsThatChangeNoValueGo) {
  const DataType u8 = DataType::uint(8), i32 = DataType::int32();
  auto cast = [](const Value& v, DataType t) {
    auto a = make_node<te::CastAttrsNode>();
    a->dtype = t;
    return call("cast", {v}, te::Attrs(a), "cast");
  };
  auto clip = [](const Value& v, double low, double high) {
    auto a = make_node<te::ScalarAttrsNode>();
    a->alpha = low;
    a->beta = high;
    return call("clip", {v}, te::Attrs(a), "clip");
  };
  auto scalar = [](DataType t, double v) {
    te::NDArray a(t, {});
    a.set(0, v);
    return constant(std::move(a), "k");
  };
  auto x = input("x", {1, 5, 5, 8}, kF32);
  // Quantized to 0..255 with zero point 3, in float.
  Value q = clip(call("add",
                      {call("round", {call("multiply", {x, scalar(kF32, 40)}, te::Attrs(), "s")},
                            te::Attrs(), "r"),
                       scalar(kF32, 3)},
                      te::Attrs(), "zp"),
                 0, 255);
  Value bytes = cast(q, u8);
  Value dequantized = cast(cast(bytes, i32), kF32);
  Value centred =
      cast(call("subtract", {cast(bytes, i32), scalar(i32, 3)}, te::Attrs(), "c"), kF32);
  // The depthwise convolution int_conv2d_as_float leaves: cast to int32,
  // an int32 bias, back to float.
  auto conv = make_node<te::Conv2dAttrsNode>();
  conv->padding = {1, 1, 1, 1};
  conv->groups = 8;
  conv->data_layout = "NHWC";
  te::NDArray w(kF32, {3, 3, 1, 8});
  for (int64_t i = 0; i < w.size(); ++i) w.set(i, static_cast<double>(i % 255) - 127);
  te::NDArray b(i32, {8});
  for (int64_t i = 0; i < 8; ++i) b.set_int(i, 1000 * i - 3000);
  auto axis = make_node<te::AxisAttrsNode>();
  axis->axis = 3;
  Value depthwise =
      cast(call("nn.bias_add",
                {cast(call("nn.conv2d", {centred, constant(w, "w")}, te::Attrs(conv), "dw"), i32),
                 constant(b, "b")},
                te::Attrs(axis), "bias"),
           kF32);
  // Left alone: a clip wider than uint8, and a value not known to be whole.
  Value wide = cast(cast(clip(call("round", {x}, te::Attrs(), "r2"), -5, 300), u8), kF32);
  Value fraction = cast(cast(x, i32), kF32);
  Graph g = Graph::make({x}, {dequantized, centred, depthwise, wide, fraction},
                        {"dq", "centred", "depthwise", "wide", "fraction"});
  const std::string before = save_string(g);
  Graph out = exact_integer_casts(g);
  EXPECT_EQ(save_string(g), before);
  EXPECT_EQ(
      ops_of(out),
      "multiply round add clip subtract nn.conv2d nn.bias_add round clip cast cast cast cast");
  std::vector<te::NDArray> in = {te::NDArray::random(kF32, x->shape, 4, -4, 4)};
  std::vector<te::NDArray> want = evaluate_graph(g, in), got = evaluate_graph(out, in);
  for (size_t i = 0; i < want.size(); ++i) {
    SCOPED_TRACE(g->output_names[i]);
    EXPECT_EQ(got[i].dtype(), want[i].dtype());
    EXPECT_TRUE(te::allclose(got[i], want[i], te::Tolerance{0, 0}));
  }
  // 64 diamonds in a row: each value's range is worked out once (walking
  // every path would take 2^64 steps).
  auto small = input("small", {4}, u8);
  Value v = cast(small, i32);
  for (int i = 0; i < 64; ++i) v = call("maximum", {v, v}, te::Attrs(), "m");
  Graph deep = Graph::make({small}, {cast(cast(v, u8), kF32)}, {"out"});
  EXPECT_EQ(ops_of(exact_integer_casts(deep)).find("cast cast"), std::string::npos);
}

TEST(GraphPasses, WinogradTransformsNameWhatIsWrong) {
  auto x = input("x", {1, 8, 8, 16}, kF32);
  auto a = make_node<te::WinogradAttrsNode>();
  a->tile = 4;
  a->padding = {1, 1, 1, 1};
  a->output_size = {8, 8};
  EXPECT_EQ(call("nn.winograd_input_transform", {x}, te::Attrs(a))->shape,
            (std::vector<int64_t>{6, 6, 1, 2, 2, 16}));
  EXPECT_TT_ERROR(call("nn.winograd_input_transform", {x, weight({6, 6}, 1)}, te::Attrs(a)),
                  kInvalidArgument, "takes 1 arguments, got 2");
  auto b = make_node<te::WinogradAttrsNode>(*a);
  b->output_size = {7, 8};
  EXPECT_TT_ERROR(call("nn.winograd_input_transform", {x}, te::Attrs(b)), kInvalidArgument,
                  "output size [7, 8] differs from the 8x8 the data and padding give");
  auto products = input("m", {6, 6, 1, 2, 2, 32}, kF32);
  EXPECT_EQ(call("nn.winograd_output_transform", {products}, te::Attrs(a))->shape,
            (std::vector<int64_t>{1, 8, 8, 32}));
  b->output_size = {9, 8};
  EXPECT_TT_ERROR(call("nn.winograd_output_transform", {products}, te::Attrs(b)), kInvalidArgument,
                  "do not make a 9x8 output with tiles of 4");
  auto d = make_node<te::WinogradAttrsNode>(*a);
  d->tile = 3;
  EXPECT_TT_ERROR(call("nn.winograd_output_transform", {products}, te::Attrs(d)), kInvalidArgument,
                  "Winograd output tiles of 3 are not supported (2 or 4)");
  auto c = make_node<te::WinogradAttrsNode>(*a);
  c->tile = 3;
  EXPECT_TT_ERROR(load_string(save_string(ObjectPtr(c))), kInvalidArgument,
                  "Winograd output tiles of 3 are not supported (2 or 4)");
}

// A transposed convolution whose windows tile its output (kernel = stride,
// no padding) becomes a pointwise NHWC convolution and a shuffle; one whose
// windows overlap stays as it was. Both compute what they did.
TEST(GraphPasses, TransposedConvolutionsThatTileTheirOutputBecomePointwise) {
  auto transposed = [](std::vector<int64_t> kernel, std::vector<int64_t> strides,
                       std::vector<int64_t> padding) {
    auto x = input("x", {2, 6, 5, 4}, kF32);
    auto a = make_node<te::Conv2dTransposeAttrsNode>();
    a->strides = std::move(strides);
    a->padding = std::move(padding);
    Value y = call("nn.conv2d_transpose", {x, weight({6, 3, kernel[0], kernel[1]}, 1)},
                   te::Attrs(a), "up");
    auto axis = make_node<te::AxisAttrsNode>();
    axis->axis = 1;
    y = call("nn.bias_add", {y, weight({3}, 2)}, te::Attrs(axis), "up_bias");
    return Graph::make({x}, {call("relu", {y})}, {"out"});
  };
  std::vector<te::NDArray> in = {te::NDArray::random(kF32, {2, 6, 5, 4}, 3)};
  const ir::Target target = ir::Target::parse("c -num-cores=2 -l2-cache=1048576");
  struct Case {
    std::vector<int64_t> kernel, strides, padding;
    bool pointwise;
  };
  for (const Case& c :
       {Case{{2, 2}, {2, 2}, {0, 0, 0, 0}, true}, Case{{3, 2}, {3, 2}, {0, 0, 0, 0}, true},
        Case{{1, 1}, {1, 1}, {0, 0, 0, 0}, true}, Case{{3, 3}, {2, 2}, {1, 1, 1, 1}, false},
        Case{{2, 2}, {2, 2}, {1, 0, 0, 1}, false}}) {
    SCOPED_TRACE(shape_text(c.kernel) + " stride " + shape_text(c.strides));
    Graph g = transposed(c.kernel, c.strides, c.padding);
    const te::NDArray expected = evaluate_graph(g, in)[0];
    for (const Graph& out : {convert_layout_nhwc(g), optimize(g, target)}) {
      EXPECT_TRUE(te::allclose(evaluate_graph(out, in)[0], expected, te::Tolerance{1e-5, 1e-4}));
      bool transposed_left = false;
      for (const auto& call : calls_in_order(out)) {
        transposed_left |= call->op == "nn.conv2d_transpose";
      }
      EXPECT_EQ(transposed_left, !c.pointwise);
    }
  }
}

// A float16 convolution with a constant kernel computes in float32 between
// two casts, with the same values: the operator sums widened products in
// float32 and rounds once. Then Winograd's pass takes it.
TEST(GraphPasses, Float16ConvolutionsComputeInFloat32WithTheSameValues) {
  const DataType f16 = DataType::float16();
  auto x = input("x", {1, 16, 12, 12}, f16);
  Value w = constant(te::NDArray::random(f16, {16, 16, 3, 3}, 7, -0.5, 0.5), "w16");
  Graph g =
      Graph::make({x}, {call("nn.conv2d", {x, w}, conv_attrs({1, 1, 1, 1}), "conv")}, {"out"});
  std::vector<te::NDArray> in = {te::NDArray::random(f16, {1, 16, 12, 12}, 3)};
  Graph wide = float16_conv2d_in_float32(g);
  EXPECT_TRUE(
      te::allclose(evaluate_graph(wide, in)[0], evaluate_graph(g, in)[0], te::Tolerance{0.0, 0.0}));
  std::string ops;
  for (const auto& c : calls_in_order(wide)) {
    ops += c->op + " ";
    if (c->op == "nn.conv2d") {
      EXPECT_EQ(c->dtype, DataType::float32());
    }
  }
  EXPECT_EQ(ops, "cast nn.conv2d narrow ") << ops;
  // Through the whole pipeline: NHWC, Winograd, the same values to a few
  // float16 ulps (Winograd sums in another order).
  const ir::Target target = ir::Target::parse("c -num-cores=2 -l2-cache=1048576");
  Graph optimized = optimize(g, target);
  bool winograd = false;
  for (const auto& c : calls_in_order(optimized))
    winograd |= c->op == "nn.winograd_input_transform";
  EXPECT_TRUE(winograd);
  EXPECT_TRUE(te::allclose(evaluate_graph(optimized, in)[0], evaluate_graph(g, in)[0],
                           te::Tolerance{2e-3, 2e-3}));
  // A bias fused after it reads the float32 sum through narrow and rounds
  // once, as after the float16 operator; after a cast it would not.
  auto axis = make_node<te::AxisAttrsNode>();
  axis->axis = 1;
  auto to_half = make_node<te::CastAttrsNode>();
  to_half->dtype = f16;
  te::Tensor sum = te::placeholder({1, 16, 4, 4}, DataType::float32(), "sum");
  te::Tensor bias = te::placeholder({16}, f16, "bias");
  for (const char* rounding : {"narrow", "cast"}) {
    te::Tensor rounded = te::find_op(rounding).compute({sum}, to_half.get());
    te::Tensor biased = te::find_op("nn.bias_add").compute({rounded, bias}, axis.get());
    // Whether the rounded value is read at all, or only the sum under it.
    std::function<bool(const te::Tensor&)> reads_rounded = [&](const te::Tensor& t) {
      for (const auto& in : te::input_tensors(t)) {
        if (in.same_as(rounded) || reads_rounded(in)) return true;
      }
      return false;
    };
    EXPECT_EQ(reads_rounded(biased), std::string(rounding) == "cast") << rounding;
  }
}

// Float16 matrix products (a dense layer's constant weight, attention's two
// activations, batched), softmax and layer normalisation compute in float32
// on operands widened once, with the values of the float16 operators, which
// work in float32 and round once: alone, and fused with the elementwise
// operators after them, which read through a product's rounding and not
// through a softmax's or a layer norm's.
TEST(GraphPasses, Float16MatrixProductsAndNormsComputeInFloat32WithTheSameValues) {
  const DataType f16 = DataType::float16();
  auto rows = input("rows", {2, 4, 24}, f16);
  auto keys = input("keys", {2, 24, 5}, f16);
  Value w = constant(te::NDArray::random(f16, {7, 24}, 7, -0.5, 0.5), "w16");
  Value fc = call("nn.dense", {call("reshape", {rows}, reshape_attrs({8, 24}), "flat"), w},
                  te::Attrs(), "fc");
  auto last_axis = make_node<te::AxisAttrsNode>();
  last_axis->axis = -1;
  Value scores = call("nn.softmax", {call("nn.matmul", {rows, keys}, te::Attrs(), "scores")},
                      te::Attrs(last_axis), "weights");
  Value shift = constant(te::NDArray::random(f16, {5}, 10), "shift");
  Value gamma = constant(te::NDArray::random(f16, {7}, 8, 0.5, 1.5), "gamma");
  Value beta = constant(te::NDArray::random(f16, {7}, 9), "beta");
  Value normed = call("nn.layer_norm", {call("add", {fc, fc}, te::Attrs(), "twice"), gamma, beta},
                      norm_attrs(-1), "normed");
  // rows and keys are read by two matmuls: each is cast once.
  Value again = call("nn.matmul", {rows, keys}, te::Attrs(), "again");
  Graph g = Graph::make({rows, keys},
                        {call("multiply", {normed, gamma}, te::Attrs(), "scaled"),
                         call("add", {scores, shift}, te::Attrs(), "shifted"), again},
                        {"scaled", "shifted", "again"});
  std::vector<te::NDArray> in = {te::NDArray::random(f16, {2, 4, 24}, 3),
                                 te::NDArray::random(f16, {2, 24, 5}, 4)};
  const Graph wide = float16_ops_in_float32(g);
  std::string casts;
  for (const auto& c : calls_in_order(wide)) {
    if (c->op != "cast" || c->dtype != DataType::float32()) continue;
    const auto* source = c->args[0].get();
    auto input_node = dynamic_cast<const InputNode*>(source);
    casts += (input_node ? input_node->name : dynamic_cast<const CallNode&>(*source).name) + " ";
  }
  EXPECT_EQ(casts, "flat twice rows keys scores ") << casts;
  for (auto evaluate : {evaluate_graph, evaluate_composed}) {
    const std::vector<te::NDArray> expected = evaluate(g, in);
    for (const Graph& out :
         {wide, optimize(g, ir::Target::parse("c -num-cores=2 -l2-cache=1048576"))}) {
      const std::vector<te::NDArray> got = evaluate(out, in);
      for (size_t i = 0; i < got.size(); ++i) {
        EXPECT_EQ(got[i].dtype(), f16);
        EXPECT_TRUE(te::allclose(got[i], expected[i], te::Tolerance{0.0, 0.0})) << i;
      }
      int widened = 0;
      for (const auto& c : calls_in_order(out)) {
        if (c->op == "nn.dense" || c->op == "nn.matmul" || c->op == "nn.softmax" ||
            c->op == "nn.layer_norm") {
          EXPECT_EQ(c->dtype, DataType::float32()) << c->op;
          ++widened;
        }
      }
      EXPECT_EQ(widened, 5);
    }
  }
}

// bias_add's axis counts from the front: it moves before a reshape only
// along the last axis, and then along the source's last.
TEST(GraphPasses, BiasesMoveBeforeReshapesOnlyAlongTheLastAxis) {
  for (int64_t axis : {1, 0}) {
    SCOPED_TRACE(axis);
    auto x = input("x", {2, 2, 4}, kF32);
    Value flat = call("reshape", {x}, reshape_attrs({4, 4}));
    auto a = make_node<te::AxisAttrsNode>();
    a->axis = axis;
    Value out = call("nn.bias_add", {flat, weight({4}, 1)}, te::Attrs(a));
    Graph g = Graph::make({x}, {out}, {"out"});
    Graph sunk = sink_reshapes(g);
    std::vector<te::NDArray> in = {te::NDArray::random(kF32, {2, 2, 4}, 4)};
    EXPECT_TRUE(te::allclose(evaluate_graph(sunk, in)[0], evaluate_graph(g, in)[0]));
    EXPECT_EQ(calls_in_order(sunk).back()->op, axis == 1 ? "reshape" : "nn.bias_add");
  }
  // A bias of one element along a last axis of one: the source's last axis
  // is not that one, so the bias stays after the reshape.
  auto x = input("x", {1, 4}, kF32);
  auto a = make_node<te::AxisAttrsNode>();
  a->axis = 1;
  Value out = call("nn.bias_add", {call("reshape", {x}, reshape_attrs({4, 1})), weight({1}, 1)},
                   te::Attrs(a));
  Graph g = Graph::make({x}, {out}, {"out"});
  EXPECT_EQ(calls_in_order(sink_reshapes(g)).back()->op, "nn.bias_add");
}

TEST(GraphPasses, ElementwiseWorkMovesBeforeReshapes) {
  // dense -> reshape -> + bias -> + residual -> relu: after the pass the
  // dense group takes the bias, the residual add and the relu, and the
  // reshape is left a view.
  auto x = input("x", {1, 6, 8}, kF32);
  Value flat = call("reshape", {x}, reshape_attrs({6, 8}));
  Value d = call("nn.dense", {flat, weight({8, 8}, 1)});
  Value back = call("reshape", {d}, reshape_attrs({1, 6, 8}));
  Value out = call("relu", {call("add", {call("add", {back, weight({8}, 2)}), x})});
  Graph g = Graph::make({x}, {out}, {"out"});
  Graph sunk = sink_reshapes(g);
  std::vector<te::NDArray> in = {te::NDArray::random(kF32, {1, 6, 8}, 4)};
  EXPECT_TRUE(te::allclose(evaluate_graph(sunk, in)[0], evaluate_graph(g, in)[0]));
  std::vector<std::string> groups;
  for (const auto& grp : fuse_groups(sunk))
    groups.push_back((grp.is_view() ? "view:" : "") + grp.description());
  EXPECT_EQ(groups, (std::vector<std::string>{"view:reshape", "view:reshape",
                                              "nn.dense+add+add+relu", "view:reshape"}));
  // Views are no tasks.
  graph::Partition partition = partition_model(g, ir::Target::parse("c -num-cores=2"));
  ASSERT_EQ(partition.tasks.size(), 1u);
  EXPECT_EQ(partition.tasks[0].description, "nn.dense+add+add+relu");
}

TEST(GraphFusion, GroupsRunProducersFirst) {
  // The residual add joins the first conv's group, which was made before
  // the shortcut conv it reads: the groups must still come out in an order
  // where every input is made before it is read.
  Graph g = optimize(residual_block());
  std::vector<FusedGroup> groups = fuse_groups(g);
  std::set<const Object*> made;
  for (const auto& in : g->inputs) made.insert(in.get());
  for (const auto& grp : groups) {
    for (const auto& v : grp.inputs) {
      bool ready = made.count(v.get()) || dynamic_cast<const ConstantNode*>(v.get());
      EXPECT_TRUE(ready) << grp.description() << " reads a value made later";
    }
    made.insert(grp.calls.back().get());
  }
  std::vector<std::string> d;
  for (const auto& grp : groups) d.push_back(grp.description());
  EXPECT_NE(std::find(d.begin(), d.end(), "nn.conv2d+nn.bias_add+relu+add+relu"), d.end())
      << join(d, ", ");
}

TEST(GraphFusion, ElementwiseOperandsOfOneReaderJoinIt) {
  // An LSTM cell's update: each gate an activation of its own input, met in
  // one product and sum, is one kernel.
  auto i = input("i", {1, 64}, kF32), f = input("f", {1, 64}, kF32);
  auto g = input("g", {1, 64}, kF32), c = input("c", {1, 64}, kF32);
  Value ig = call("multiply", {call("sigmoid", {i}), call("tanh", {g})});
  Value cell = call("add", {call("multiply", {call("sigmoid", {f}), c}), ig});
  std::vector<std::string> groups;
  for (const auto& grp : fuse_groups(Graph::make({i, f, g, c}, {cell}, {"cell"}))) {
    groups.push_back(grp.description());
  }
  EXPECT_EQ(groups, (std::vector<std::string>{"sigmoid+multiply+sigmoid+tanh+multiply+add"}));
  // Not an operand that broadcasts (it would be computed again for every
  // element), nor one read twice, nor an anchor's.
  auto row = input("row", {1, 1}, kF32);
  Value twice = call("tanh", {g});
  Value d = call("nn.dense", {i, weight({64, 64}, 1)});
  Value out =
      call("add",
           {call("add", {call("multiply", {call("sigmoid", {i}), call("exp", {row})}), twice}), d});
  groups.clear();
  for (const auto& grp :
       fuse_groups(Graph::make({i, g, row}, {out, call("relu", {twice})}, {"out", "r"}))) {
    groups.push_back(grp.description());
  }
  EXPECT_EQ(groups, (std::vector<std::string>{"exp", "tanh", "nn.dense", "sigmoid+multiply+add+add",
                                              "relu"}))
      << join(groups, ", ");
}

/// GELU of `x` as ONNX exporters write it: x * 0.5 * (1 + erf(x / sqrt 2)).
Value gelu(const Value& x) {
  auto scalar = [](float v, const char* name) {
    te::NDArray a(kF32, {1});
    a.set(0, v);
    return constant(a, name);
  };
  Value e = call("erf", {call("divide", {x, scalar(1.41421356f, "sqrt2")})});
  Value y = call("multiply", {x, call("add", {e, scalar(1.0f, "one")})});
  return call("multiply", {y, scalar(0.5f, "half")});
}

TEST(GraphFusion, AConvolutionReadsAnImageThroughItsTransposeToNhwc) {
  // The NCHW image turned NHWC for the stem convolution: the convolution
  // reads it through the transpose (and the normalisation before it, or a
  // float16 image's cast), and no kernel only moves it. Not a transpose of
  // 16 channels, nor one that another call reads too.
  auto image = input("image", {1, 3, 8, 8}, kF32);
  Value normalised = call("multiply", {call("add", {image, weight({3, 1, 1}, 1)}), weight({1}, 2)});
  Value stem = call("nn.conv2d", {normalised, weight({8, 3, 3, 3}, 3)},
                    conv_attrs({1, 1, 1, 1}, {2, 2}), "stem");
  auto wide = input("wide", {1, 16, 8, 8}, kF32);
  Value side =
      call("nn.conv2d", {wide, weight({8, 16, 1, 1}, 4)}, conv_attrs({0, 0, 0, 0}), "side");
  auto read_twice = input("read_twice", {1, 3, 8, 8}, kF32);
  Value both =
      call("nn.conv2d", {read_twice, weight({8, 3, 1, 1}, 5)}, conv_attrs({0, 0, 0, 0}), "both");
  auto half = input("half", {1, 3, 8, 8}, ir::DataType::float16());
  auto to_float = make_node<te::CastAttrsNode>();
  to_float->dtype = kF32;
  Value from_half =
      call("nn.conv2d", {call("cast", {half}, te::Attrs(to_float)), weight({8, 3, 3, 3}, 6)},
           conv_attrs({1, 1, 1, 1}), "from_half");
  Graph g = convert_layout_nhwc(
      Graph::make({image, wide, read_twice, half},
                  {call("relu", {stem}), side, both, call("relu", {read_twice}), from_half},
                  {"stem", "side", "both", "relu", "from_half"}));
  std::vector<std::string> joined;
  for (const auto& grp : fuse_groups(g)) {
    const std::string d = grp.description();
    if (d.find("transpose") != std::string::npos && d.find("nn.conv2d") != std::string::npos) {
      joined.push_back(d);
    }
  }
  EXPECT_EQ(joined, (std::vector<std::string>{"add+multiply+transpose+nn.conv2d+relu",
                                              "cast+transpose+nn.conv2d"}));
}

TEST(GraphFusion, ElementwiseBranchesThatMeetAgainJoinTheirProducer) {
  // GELU reads the dense's output twice; both paths meet in its last
  // multiply, so the whole of it is the dense's epilogue.
  auto x = input("x", {4, 16}, kF32);
  Value d = call("add", {call("nn.dense", {x, weight({32, 16}, 1)}), weight({32}, 2)});
  Graph g = Graph::make({x}, {call("nn.dense", {gelu(d), weight({8, 32}, 3)})}, {"out"});
  std::vector<std::string> groups;
  for (const auto& grp : fuse_groups(g)) groups.push_back(grp.description());
  EXPECT_EQ(groups, (std::vector<std::string>{"nn.dense+add+divide+erf+add+multiply+multiply",
                                              "nn.dense"}));
  // Not when a branch leaves the elementwise world (a softmax), when the
  // value is an output of the graph too, or when the branches never meet.
  auto last_axis = make_node<te::AxisAttrsNode>();
  last_axis->axis = -1;
  Value s = call("nn.softmax", {d}, te::Attrs(last_axis));
  g = Graph::make({x}, {call("add", {call("relu", {d}), s})}, {"out"});
  groups.clear();
  for (const auto& grp : fuse_groups(g)) groups.push_back(grp.description());
  EXPECT_EQ(groups, (std::vector<std::string>{"nn.dense+add", "nn.softmax", "relu+add"}));
  g = Graph::make({x}, {gelu(d), d}, {"out", "pre"});
  groups.clear();
  for (const auto& grp : fuse_groups(g)) groups.push_back(grp.description());
  EXPECT_EQ(groups, (std::vector<std::string>{"nn.dense+add", "divide+erf+add+multiply+multiply"}));
  g = Graph::make({x}, {call("relu", {d}), call("sigmoid", {d})}, {"a", "b"});
  groups.clear();
  for (const auto& grp : fuse_groups(g)) groups.push_back(grp.description());
  EXPECT_EQ(groups, (std::vector<std::string>{"nn.dense+add", "relu", "sigmoid"}));
  // Nor when a value between the branches is an output of the graph.
  Value e = call("erf", {call("divide", {d, weight({1}, 4)})});
  g = Graph::make({x}, {call("multiply", {d, e}), e}, {"out", "erf"});
  groups.clear();
  for (const auto& grp : fuse_groups(g)) groups.push_back(grp.description());
  EXPECT_EQ(groups, (std::vector<std::string>{"nn.dense+add", "divide+erf", "multiply"}));
  // A group too small for the branches does not take them.
  groups.clear();
  g = Graph::make({x}, {gelu(d)}, {"out"});
  for (const auto& grp : fuse_groups(g, 4)) groups.push_back(grp.description());
  EXPECT_EQ(groups,
            (std::vector<std::string>{"nn.dense+add", "divide+erf+add+multiply", "multiply"}));
}

class CompiledGraph : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string tmpl = (fs::temp_directory_path() / "tt_graph_XXXXXX").string();
    ASSERT_NE(mkdtemp(tmpl.data()), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override { fs::remove_all(dir_); }
  CompileReport compile(const Graph& g, const std::string& name) {
    CompileOptions o;
    o.target = ir::Target::parse("c -num-cores=2");
    o.module_options = testing::shared_cache_options();
    return compile_model(g, o, dir_ + "/" + name);
  }
  std::string dir_;
};

TEST_F(CompiledGraph, RunsWhatTheReferenceComputesWithAPlanThatReusesMemory) {
  // Four denses in a chain, and outputs that are a view and an input.
  auto x = input("x", {4, 16}, kF32);
  Value v = x;
  for (int i = 0; i < 4; ++i) v = call("relu", {call("nn.dense", {v, weight({16, 16}, 10 + i)})});
  Value view = call("reshape", {v}, reshape_attrs({2, 32}));
  Graph g = Graph::make({x}, {v, view, x}, {"y", "y_view", "x_again"});
  CompileReport report = compile(g, "chain");
  // One task: the weights differ, the program (weights as inputs) does not.
  ASSERT_EQ(report.tasks.size(), 1u);
  EXPECT_EQ(report.tasks[0].occurrences, 4);
  EXPECT_LT(report.planned_bytes, report.intermediate_bytes);
  runtime::CompiledModel m = runtime::CompiledModel::load(dir_ + "/chain");
  std::vector<te::NDArray> in = {te::NDArray::random(kF32, {4, 16}, 1)};
  std::vector<te::NDArray> ours = m.run(in), ref = evaluate_graph(g, in);
  ASSERT_EQ(ours.size(), 3u);
  for (size_t i = 0; i < 3; ++i) EXPECT_TRUE(te::allclose(ours[i], ref[i])) << i;
  // Again, on other inputs: nothing of the first run leaks into the second.
  in = {te::NDArray::random(kF32, {4, 16}, 2)};
  ours = m.run(in);
  ref = evaluate_graph(g, in);
  for (size_t i = 0; i < 3; ++i) EXPECT_TRUE(te::allclose(ours[i], ref[i])) << i;
  m.set_threads(1);
  EXPECT_TRUE(te::allclose(m.run(in)[0], ref[0]));
  std::vector<double> seconds;
  std::vector<te::NDArray> outs = m.make_outputs();
  m.run_timed(in, outs, seconds);
  EXPECT_EQ(seconds.size(), m.step_names().size());
  // Each step's task from the report: the dense's for a kernel, null for a copy.
  std::vector<std::string> names = m.step_names();
  std::vector<nlohmann::json> tasks = m.step_tasks();
  ASSERT_EQ(tasks.size(), names.size());
  int copies = 0;
  for (size_t i = 0; i < tasks.size(); ++i) {
    if (tasks[i].is_null()) {
      EXPECT_EQ(names[i], "copy");
      ++copies;
    } else {
      EXPECT_EQ(tasks[i]["description"], names[i]);
      EXPECT_GT(tasks[i]["flops"].get<double>(), 0) << names[i];
    }
  }
  EXPECT_GE(copies, 1);  // x_again
  for (size_t i = 0; i < 3; ++i) EXPECT_TRUE(te::allclose(outs[i], ref[i])) << i;
  // The same output arrays again, on the first inputs: every element is
  // written anew, as run() would have written it.
  in = {te::NDArray::random(kF32, {4, 16}, 1)};
  m.run_into(in, outs);
  ref = evaluate_graph(g, in);
  for (size_t i = 0; i < 3; ++i) EXPECT_TRUE(te::allclose(outs[i], ref[i])) << i;

  EXPECT_TT_ERROR(m.run({te::NDArray::random(kF32, {4, 15}, 1)}), kInvalidArgument,
                  "input 'x' must be float32 of shape float32[4, 16], got float32[4, 15]");
  EXPECT_TT_ERROR(m.run({}), kInvalidArgument, "the model takes 1 inputs, got 0");
  std::vector<te::NDArray> too_few(outs.begin(), outs.begin() + 2);
  EXPECT_TT_ERROR(m.run_into(in, too_few), kInvalidArgument,
                  "the model has 3 outputs, got 2 arrays for them");
  std::vector<te::NDArray> wrong = m.make_outputs();
  wrong[1] = te::NDArray(kF32, {32, 2});
  EXPECT_TT_ERROR(m.run_into(in, wrong), kInvalidArgument,
                  "output 'y_view' must be float32 of shape float32[2, 32], got float32[32, 2]");
}

te::Attrs slice_attrs(std::vector<int64_t> begin, std::vector<int64_t> end,
                      std::vector<int64_t> strides = {}) {
  auto a = make_node<te::SliceAttrsNode>();
  a->strides = strides.empty() ? std::vector<int64_t>(begin.size(), 1) : std::move(strides);
  a->begin = std::move(begin);
  a->end = std::move(end);
  return te::Attrs(a);
}

// A slice of consecutive rows (an LSTM's time step) is a view: a pointer
// into its operand, no kernel and no task; any other slice is a kernel.
TEST_F(CompiledGraph, SlicesOfConsecutiveRowsAreViewsIntoTheirOperand) {
  auto x = input("x", {4, 3, 5}, kF32);
  Value product = call("relu", {call("add", {x, x})});                       // in the arena
  Value step = call("slice", {product}, slice_attrs({2, 0, 0}, {3, 3, 5}));  // one row of 15
  Value rows = call("slice", {step}, slice_attrs({0, 1, 0}, {1, 3, 5}));     // a view of a view
  Value tail =
      call("slice", {x}, slice_attrs({-1, 0, 0}, {4, 3, 5}));  // of the input, from the end
  Value columns = call("slice", {x}, slice_attrs({0, 0, 1}, {4, 3, 3}));  // not contiguous
  Value strided = call("slice", {x}, slice_attrs({0, 0, 0}, {4, 3, 5}, {2, 1, 1}));
  EXPECT_EQ(view_offset(*step.as<CallNode>()), 2 * 15 * 4);
  EXPECT_EQ(view_offset(*rows.as<CallNode>()), 5 * 4);
  EXPECT_EQ(view_offset(*tail.as<CallNode>()), 3 * 15 * 4);
  EXPECT_EQ(view_offset(*columns.as<CallNode>()), std::nullopt);
  EXPECT_EQ(view_offset(*strided.as<CallNode>()), std::nullopt);
  Value read = call("negative", {rows});  // a kernel reading a view
  Graph g = Graph::make({x}, {rows, tail, read, columns, strided},
                        {"rows", "tail", "read", "columns", "strided"});
  CompileReport report = compile(g, "views");
  std::vector<std::string> tasks;
  for (const auto& t : report.tasks) tasks.push_back(t.description);
  EXPECT_EQ(tasks, (std::vector<std::string>{"add+relu", "negative", "slice", "slice"}));
  runtime::CompiledModel m = runtime::CompiledModel::load(dir_ + "/views");
  std::vector<te::NDArray> in = {te::NDArray::random(kF32, {4, 3, 5}, 3)};
  std::vector<te::NDArray> ours = m.run(in), ref = evaluate_graph(g, in);
  ASSERT_EQ(ours.size(), ref.size());
  for (size_t i = 0; i < ref.size(); ++i) EXPECT_TRUE(te::allclose(ours[i], ref[i])) << i;
}

TEST_F(CompiledGraph, AnEpilogueThatReadsTheProductTwiceComputesWhatTheReferenceDoes) {
  auto x = input("x", {6, 16}, kF32);
  Value d = call("add", {call("nn.dense", {x, weight({24, 16}, 1)}), weight({24}, 2)});
  Graph g = Graph::make({x}, {gelu(d)}, {"out"});
  CompileReport report = compile(g, "gelu");
  ASSERT_EQ(report.tasks.size(), 1u);
  runtime::CompiledModel m = runtime::CompiledModel::load(dir_ + "/gelu");
  std::vector<te::NDArray> in = {te::NDArray::random(kF32, {6, 16}, 1, -3, 3)};
  EXPECT_TRUE(te::allclose(m.run(in)[0], evaluate_graph(g, in)[0]));
}

/// Compile options for `g` (partitioned into `tasks` tasks) that time three
/// candidates in the model, whose log holds three random schedules (from
/// `seed`; the first recorded fastest) of each of the tasks `tuned`.
CompileOptions three_candidates_of(const Graph& g, size_t tasks, const std::vector<size_t>& tuned,
                                   uint64_t seed) {
  CompileOptions o;
  o.target = ir::Target::parse("c -num-cores=2");
  Partition partition = partition_model(g, o.target);
  EXPECT_EQ(partition.tasks.size(), tasks);
  for (size_t t : tuned) {
    const te::Task& task = partition.tasks.at(t).task;
    schedule::ComputeDAG dag(te::workload_tensors(task->workload));
    for (int i = 0; i < 3; ++i) {
      std::mt19937_64 rng(seed + static_cast<uint64_t>(i));
      measure::Record r{{task, schedule::random_state(dag, rng)}, {}};
      r.result.costs = {1e-4 * (i + 1)};
      o.records.push_back(r);
    }
  }
  o.any_pass_context = true;
  o.in_model.candidates = 3;
  o.module_options = testing::shared_cache_options();
  o.in_model.pool.worker_path = TT_WORKER_PATH;
  return o;
}

/// Three dense+relu layers of one task, and compile options whose log holds
/// three schedules of it (the first recorded fastest), each timed in the model.
std::pair<Graph, CompileOptions> three_candidates_model() {
  auto x = input("x", {8, 32}, kF32);
  Value v = x;
  for (int i = 0; i < 3; ++i) v = call("relu", {call("nn.dense", {v, weight({32, 32}, 20 + i)})});
  Graph g = Graph::make({x}, {v}, {"y"});
  return {g, three_candidates_of(g, 1, {0}, 50)};
}

TEST_F(CompiledGraph, TimedInTheModelATaskKeepsOneOfItsBestSchedulesAndComputesTheSame) {
  auto [g, o] = three_candidates_model();
  CompileReport report = compile_model(g, o, dir_ + "/candidates");
  ASSERT_EQ(report.tasks.size(), 1u);
  EXPECT_TRUE(report.tasks[0].tuned);
  const std::string chosen = report.tasks[0].function;
  EXPECT_TRUE(chosen == "k0" || chosen == "k0v1" || chosen == "k0v2") << chosen;
  ASSERT_FALSE(report.in_model.is_null());
  EXPECT_EQ(report.in_model["tasks_compared"], 1);
  EXPECT_EQ(report.in_model["evaluations"], 1 + 3 * 3);  // the start, then 3 rounds of 3
  EXPECT_EQ(report.in_model["tasks"][0]["judged_ms"].size(), 3u);
  // Every call of the task is the chosen kernel, which computes the model.
  runtime::CompiledModel m = runtime::CompiledModel::load(dir_ + "/candidates");
  for (const auto& step : m.plan()->steps) EXPECT_EQ(step->function, chosen);
  std::vector<te::NDArray> in = {te::NDArray::random(kF32, {8, 32}, 3)};
  EXPECT_TRUE(te::allclose(m.run(in)[0], evaluate_graph(g, in)[0]));
  // The folder the timing used is gone.
  for (const auto& e : fs::directory_iterator(dir_)) {
    EXPECT_EQ(e.path().filename().string(), "candidates");
  }
  o.in_model.candidates = 0;
  EXPECT_TT_ERROR(compile_model(g, o, dir_ + "/none"), kInvalidArgument,
                  "timing in the model: candidates is 0; it must be from 1 to 16");
}

TEST_F(CompiledGraph, TimedInTheModelTasksFarApartShareTheirEvaluations) {
  // Five dense layers of five shapes, one task (and one step) each. With
  // three schedules for the tasks at steps 0 and 3, more than two steps
  // apart, both are timed in the same runs: 3 rounds of 3 evaluations. At
  // steps 0 and 2 they are timed one after the other: twice as many.
  auto x = input("x", {8, 32}, kF32);
  Value v = x;
  const int64_t widths[] = {32, 48, 40, 36, 32};
  int64_t in = 32;
  for (int i = 0; i < 5; ++i) {
    v = call("nn.dense", {v, weight({widths[i], in}, 30 + i)});
    in = widths[i];
  }
  Graph g = Graph::make({x}, {v}, {"y"});
  CompileReport apart = compile_model(g, three_candidates_of(g, 5, {0, 3}, 60), dir_ + "/apart");
  ASSERT_FALSE(apart.in_model.is_null()) << apart.to_json().dump(2);
  EXPECT_EQ(apart.in_model["tasks_compared"], 2);
  EXPECT_EQ(apart.in_model["evaluations"], 1 + 3 * 3);
  for (const auto& t : apart.in_model["tasks"]) EXPECT_EQ(t["judged_ms"].size(), 3u);
  runtime::CompiledModel m = runtime::CompiledModel::load(dir_ + "/apart");
  std::vector<te::NDArray> inputs = {te::NDArray::random(kF32, {8, 32}, 3)};
  EXPECT_TRUE(te::allclose(m.run(inputs)[0], evaluate_graph(g, inputs)[0]));
  CompileReport near = compile_model(g, three_candidates_of(g, 5, {0, 2}, 60), dir_ + "/near");
  EXPECT_EQ(near.in_model["tasks_compared"], 2);
  EXPECT_EQ(near.in_model["evaluations"], 1 + 2 * 3 * 3);
}

TEST_F(CompiledGraph, TimedInTheModelTheDefaultScheduleIsAlwaysACandidate) {
  // The default schedule, measured slowest of four alone, takes the third
  // place in the model's timing: what tune ranks below others alone can be
  // faster where its inputs come warm from the kernel before.
  auto [g, o] = three_candidates_model();
  const te::Task& task = o.records.at(0).input.task;
  measure::Record fallback{{task, search::default_schedule(task)}, {}};
  fallback.result.costs = {9e-4};
  o.records.push_back(fallback);
  CompileReport report = compile_model(g, o, dir_ + "/with_default");
  ASSERT_FALSE(report.in_model.is_null());
  EXPECT_EQ(report.in_model["tasks"][0]["log_ranks"], nlohmann::json({0, 1, 3}));
  runtime::CompiledModel m = runtime::CompiledModel::load(dir_ + "/with_default");
  std::vector<te::NDArray> in = {te::NDArray::random(kF32, {8, 32}, 3)};
  EXPECT_TRUE(te::allclose(m.run(in)[0], evaluate_graph(g, in)[0]));
  // One candidate: the log's best alone, untimed.
  o.in_model.candidates = 1;
  report = compile_model(g, o, dir_ + "/best_only");
  EXPECT_TRUE(report.in_model.is_null());
  EXPECT_EQ(report.tasks[0].function, "k0");
}

// The timing runs in a worker: a kernel that crashes or hangs there ends
// the worker, not the compiler, and comes back as a typed error; every task
// keeps its log's best.
TEST_F(CompiledGraph, AKernelThatCrashesOrHangsInTheModelTimingIsATypedError) {
  for (const std::string fault : {"segv", "hang"}) {
    SCOPED_TRACE(fault);
    auto [g, o] = three_candidates_model();
    o.in_model.per_evaluation = std::chrono::milliseconds(300);
    ir::PassContextGuard guard(
        ir::PassContext::make(ir::PassContextOptions().with_config("testing.inject_fault", fault)));
    CompileReport report = compile_model(g, o, dir_ + "/" + fault);
    const std::string code = fault == "segv" ? "RUNTIME_ERROR" : "RUN_TIMEOUT";
    EXPECT_EQ(report.in_model["error_code"], code);
    ASSERT_EQ(report.warnings.size(), 1u);
    EXPECT_NE(report.warnings[0].find("timing the candidates in the model failed (" + code + ")"),
              std::string::npos)
        << report.warnings[0];
    ASSERT_EQ(report.tasks.size(), 1u);
    EXPECT_EQ(report.tasks[0].function, "k0");  // the log's best
    // (Not loaded: loading runs the weight packers, which carry the fault too.)
    runtime::ModelPlan plan = runtime::read_model_folder(dir_ + "/" + fault).plan;
    for (const auto& step : plan->steps) EXPECT_EQ(step->function, "k0");
  }
}

// A record whose schedule no longer replays (here: a stage this task does
// not have) gives way to the task's next best record, with a warning naming
// its line in the log, instead of sending the task to the default schedule.
TEST_F(CompiledGraph, ARecordThatDoesNotReplayGivesWayToTheNextBest) {
  auto x = input("x", {8, 32}, kF32);
  Graph g = Graph::make({x}, {call("relu", {call("nn.dense", {x, weight({32, 32}, 5)})})}, {"y"});
  CompileOptions o;
  o.target = ir::Target::parse("c -num-cores=2");
  o.module_options = testing::shared_cache_options();
  o.any_pass_context = true;
  Partition partition = partition_model(g, o.target);
  ASSERT_EQ(partition.tasks.size(), 1u);
  const te::Task& task = partition.tasks[0].task;
  {
    measure::RecordWriter log(dir_ + "/replay.log");
    measure::Record broken{{task, schedule::State::make({schedule::split(99, 0, {4})})}, {}};
    broken.result.costs = {1e-6};  // the best, if it replayed
    log.write(broken);
    measure::Record good{{task, schedule::State::make()}, {}};
    good.result.costs = {1e-3};
    log.write(good);
  }
  o.records = measure::load_records(dir_ + "/replay.log").records;
  CompileReport report = compile_model(g, o, dir_ + "/replay");
  ASSERT_EQ(report.tasks.size(), 1u);
  EXPECT_TRUE(report.tasks[0].tuned);
  EXPECT_NE(report.tasks[0].why.find("1 better ones do not"), std::string::npos)
      << report.tasks[0].why;
  ASSERT_EQ(report.warnings.size(), 1u);
  EXPECT_NE(report.warnings[0].find("the record on line 1 of the log"), std::string::npos)
      << report.warnings[0];
  runtime::CompiledModel m = runtime::CompiledModel::load(dir_ + "/replay");
  std::vector<te::NDArray> in = {te::NDArray::random(kF32, {8, 32}, 4)};
  EXPECT_TRUE(te::allclose(m.run(in)[0], evaluate_graph(g, in)[0]));
}

TEST_F(CompiledGraph, BadFoldersAreNamedErrorsAndAFailedCompileLeavesNothing) {
  EXPECT_TT_ERROR(runtime::CompiledModel::load(dir_ + "/none"), kNotFound,
                  "is not a compiled model (no such folder)");
  auto x = input("x", {4, 16}, kF32);
  Graph g = Graph::make({x}, {call("relu", {x})}, {"y"});
  compile(g, "ok");
  write_file_atomically(dir_ + "/ok/plan.json", "{not json");
  EXPECT_TT_ERROR(runtime::CompiledModel::load(dir_ + "/ok"), kParse,
                  dir_ + "/ok: plan.json has 9 bytes, but the manifest says");
  // A compile that fails (no tuned schedule with fail_on_default) writes nothing.
  CompileOptions o;
  o.target = ir::Target::parse("c -num-cores=2");
  o.fail_on_default = true;
  EXPECT_TT_ERROR(compile_model(g, o, dir_ + "/strict"), kNotFound,
                  "1 of 1 tasks have no tuned schedule");
  EXPECT_FALSE(fs::exists(dir_ + "/strict"));
  for (const auto& e : fs::directory_iterator(dir_)) {
    EXPECT_EQ(e.path().filename().string().find(".tmp"), std::string::npos) << e.path();
  }
}

}  // namespace
}  // namespace tensortune::graph
