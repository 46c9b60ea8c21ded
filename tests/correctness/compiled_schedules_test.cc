// Every operator of the library, under random valid schedules, compiled to C
// and run: the results match the reference evaluator. All states of one
// operator go into one module (one compiler run) to keep the test fast.
#include <gtest/gtest.h>

#include <random>

#include "common/module_cache.h"
#include "tensortune/codegen/build.h"
#include "tensortune/ir/pass_context.h"
#include "tensortune/object/serialize.h"
#include "tensortune/schedule/random_schedule.h"
#include "tensortune/support/host_cpu.h"
#include "tensortune/support/strings.h"
#include "tensortune/te/evaluator.h"
#include "tensortune/te/ops.h"
#include "tensortune/te/workload.h"

namespace tensortune::schedule {
namespace {

using te::Tensor;
using DT = ir::DataType;

struct OpCase {
  std::string name;
  te::WorkloadTensors tensors;
};

Tensor input(std::vector<int64_t> shape, std::string name, DT dtype = DT::float32()) {
  return te::placeholder(std::move(shape), dtype, std::move(name));
}

// One small instance of every operator (odd sizes on purpose), plus the
// registered workloads.
std::vector<OpCase> op_cases() {
  std::vector<OpCase> cases;
  auto add = [&](std::string name, std::vector<Tensor> in, Tensor out) {
    cases.push_back({std::move(name), {std::move(in), {std::move(out)}}});
  };
  Tensor x = input({3, 5, 6}, "x"), y = input({5, 1}, "y"), v = input({6}, "v");
  Tensor img = input({1, 4, 7, 6}, "img");
  add("unary", {x}, te::sigmoid(te::tanh(te::exp(te::negative(x)))));
  add("sqrt_log_abs", {x}, te::log(te::sqrt(te::abs(x))));
  add("relu_leaky_clip", {x}, te::clip(te::leaky_relu(te::relu(x), 0.1), -0.5, 0.5));
  add("gelu", {x}, te::gelu(x));
  add("broadcast_binary", {x, y}, te::maximum(te::multiply(te::add(x, y), y), te::subtract(x, y)));
  add("divide_power", {x, v}, te::power(te::abs(te::divide(x, te::add(v, v))), v));
  add("bias_add", {img, v}, te::bias_add(img, te::slice(v, {0}, {4})));
  add("compare_logic_where", {x, y},
      te::where(te::logical_xor(te::greater(x, y), te::logical_not(te::less_equal(y, x))),
                te::expand(y, {3, 5, 6}), x));
  Tensor ids = input({2, 4}, "ids", DT::int64());
  add("take", {x, ids}, te::take(x, ids, 1));
  Tensor gi = input({3, 2, 6}, "gi", DT::int32());
  add("gather_elements_tile", {x, gi}, te::tile(te::gather_elements(x, gi, 1), {1, 2, 1}));
  add("cumsum", {x}, te::add(te::cumsum(x, 1), te::cumsum(x, 2, true, true)));
  add("one_hot", {ids}, te::one_hot(ids, 5, 2.0, -1.0, DT::float32(), 1));
  add("equal_cast", {x, v},
      te::cast(te::logical_or(te::equal(x, v), te::greater_equal(x, v)), DT::float32()));
  add("softmax", {x}, te::softmax(x, -1));
  add("log_softmax", {x}, te::log_softmax(x, 1));
  Tensor gamma = input({6}, "gamma"), beta = input({6}, "beta");
  add("layer_norm", {x, gamma, beta}, te::layer_norm(x, gamma, beta));
  add("batch_norm", {img, v},
      te::batch_norm_inference(img, te::slice(v, {0}, {4}), te::slice(v, {1}, {5}),
                               te::slice(v, {2}, {6}), te::abs(te::slice(v, {0}, {4}))));
  add("pad", {img}, te::pad(img, {0, 0, 1, 2}, {0, 1, 0, 1}, 0.5));
  add("reshape_transpose", {x}, te::transpose(te::reshape(x, {5, 18}), {1, 0}));
  add("concat_slice", {x}, te::concat({x, te::slice(x, {0, 1, 0}, {3, 4, 6})}, 1));
  add("reduce", {x}, te::add(te::reduce_mean(x, {1}, true), te::reduce_max(x, {1}, true)));
  add("reduce_sum_min", {x}, te::subtract(te::reduce_sum(x, {0, 2}), te::reduce_min(x, {0, 2})));
  add("pool", {img},
      te::avg_pool2d_nchw(te::max_pool2d_nchw(img, te::Pool2dAttrsNode::uniform(3, 1, 1)),
                          te::Pool2dAttrsNode::uniform(2, 2, 0)));
  add("lrn", {img}, te::lrn(img, 3, 1e-3, 0.75, 2.0));
  add("argmax", {x}, te::arg_reduce(te::floor(x), 1, false, true, false));
  add("argmin_last", {x}, te::arg_reduce(te::floor(x), 2, true, false, true));
  add("global_pool", {img},
      te::add(te::global_avg_pool2d_nchw(img), te::global_max_pool2d_nchw(img)));
  Tensor w = input({3, 4, 3, 3}, "w"), dw = input({4, 1, 3, 3}, "dw");
  add("conv2d_strided_dilated", {img, w},
      te::conv2d_nchw(img, w, te::Conv2dAttrsNode::uniform(2, 1, 2)));
  add("depthwise", {img, dw},
      te::depthwise_conv2d_nchw(img, dw, te::Conv2dAttrsNode::uniform(1, 1)));
  Tensor tw = input({4, 2, 3, 3}, "tw");
  add("conv2d_transpose", {img, tw},
      te::conv2d_transpose_nchw(img, tw, te::Conv2dTransposeAttrsNode{}));
  // Winograd's algorithm, tiles of 2 (6x5 outputs: a ragged last column of
  // tiles), and the transforms alone with tiles of 4.
  Tensor nhwc = input({1, 6, 5, 3}, "nhwc");
  Tensor u = input({16, 3, 4}, "u");
  Tensor tiles = te::winograd_input_transform(nhwc, 2, {1, 1, 1, 1});
  Tensor products =
      te::reshape(te::batch_matmul(te::reshape(tiles, {16, 9, 3}), u), {4, 4, 1, 3, 3, 4});
  add("winograd_2", {nhwc, u}, te::winograd_output_transform(products, 2, 6, 5));
  add("winograd_4_input", {nhwc}, te::winograd_input_transform(nhwc, 4, {0, 1, 2, 0}));
  Tensor m4 = input({6, 6, 1, 2, 2, 3}, "m4");
  add("winograd_4_output", {m4}, te::winograd_output_transform(m4, 4, 5, 7));
  Tensor a = input({2, 3, 4}, "a"), b = input({2, 5, 4}, "b");
  add("batch_matmul_transposed", {a, b}, te::batch_matmul(a, b, false, true));
  Tensor d = input({3, 5}, "d"), dwt = input({4, 5}, "dwt"), bias = input({4}, "bias");
  add("dense_bias", {d, dwt, bias}, te::dense(d, dwt, bias));
  Tensor h = input({4, 6}, "h", DT::float16());
  add("float16", {h}, te::cast(te::relu(te::add(h, h)), DT::float32()));
  // A half convolution sums in float32 and its bias is added to the sum.
  Tensor himg = input({1, 4, 7, 6}, "himg", DT::float16());
  Tensor hw = input({3, 4, 3, 3}, "hw", DT::float16()), hb = input({3}, "hb", DT::float16());
  Tensor hconv = te::bias_add(te::conv2d_nchw(himg, hw, te::Conv2dAttrsNode::uniform(1, 1)), hb, 1);
  add("float16_conv_bias", {himg, hw, hb}, te::cast(hconv, DT::float32()));
  // A swish after it works on the float32 sum and is stored in half.
  add("float16_conv_swish", {himg, hw, hb}, te::multiply(hconv, te::sigmoid(hconv)));
  // int8 convolution on words of four channels: 7 channels leave a partial
  // word; the kernel is packed along its input channels.
  Tensor bytes = input({1, 5, 6, 7}, "bytes", DT::uint(8));
  Tensor kbytes = input({3, 2, 5, 7}, "kbytes", DT::int_(8));
  Tensor pad_word = input({}, "pad_word", DT::int32());
  te::Conv2dAttrsNode int8_attrs = te::Conv2dAttrsNode::uniform(1, 1);
  int8_attrs.padding = {1, 0, 2, 1};
  int8_attrs.strides = {2, 1};
  int8_attrs.data_layout = "NHWC";
  add("conv2d_int8x4", {bytes, kbytes, pad_word},
      te::conv2d_nhwc_int8x4(te::pack_int8x4(bytes),
                             te::transpose(te::pack_int8x4(kbytes), {0, 1, 3, 2}), pad_word,
                             int8_attrs));
  add("round_reduce_prod", {x}, te::reduce_prod(te::round(x), {1}, true));
  Tensor xi = input({3, 5, 6}, "xi", DT::int32()), yi = input({5, 1}, "yi", DT::int32());
  add("floor_trunc_mod", {xi, yi}, te::add(te::floor_mod(xi, yi), te::trunc_mod(xi, yi)));
  add("fmod_float", {x, v}, te::trunc_mod(x, te::add(v, v)));
  // Resampling taps (random indices: the kernel clamps them, as the reference does).
  Tensor rows = input({9, 4}, "rows", DT::int32()), row_w = input({9, 4}, "row_w");
  Tensor cols = input({5, 2}, "cols", DT::int32()), col_w = input({5, 2}, "col_w");
  add("resample_atan", {img, rows, row_w, cols, col_w},
      te::atan(te::resample2d_nchw(img, rows, row_w, cols, col_w)));
  add("topk_gather", {x}, te::gather_elements(x, te::topk_indices(x, 3, 1, true), 1));
  Tensor si = input({2, 5, 4}, "si", DT::int64()), su = input({2, 5, 4}, "su");
  add("scatter_elements_add", {x, si, su},
      te::scatter_elements(x, si, su, 0, "add", "scatter_elements"));
  Tensor ti = input({4, 2}, "ti", DT::int32()), tu = input({4, 6}, "tu");
  add("scatter_nd_last", {x, ti, tu}, te::scatter_nd(x, ti, tu));
  for (const auto* def : te::registered_workloads()) {
    te::Workload wl = te::make_named_workload_from_text(def->name, def->example_args);
    cases.push_back({te::workload_key(wl), te::workload_tensors(wl)});
  }
  return cases;
}

/// Each of `states` of `tensors`, compiled for every -mattr of `mattrs`
/// this machine has (the others are skipped), matches the reference.
void expect_states_match_on(const te::WorkloadTensors& tensors, const std::vector<State>& states,
                            std::initializer_list<const char*> mattrs) {
  const std::vector<std::string>& host = host_cpu().features;
  auto has = [&](const std::string& f) {
    return std::find(host.begin(), host.end(), f) != host.end();
  };
  for (std::string mattr : mattrs) {
    bool supported = true;
    for (const std::string& f : tensortune::split(mattr, ',')) supported = supported && has(f);
    if (!supported) continue;
    SCOPED_TRACE(mattr);
    ir::Target target = ir::Target::parse("c -num-cores=2 -mattr=" + mattr);
    std::vector<codegen::StateCheck> checks = codegen::verify_states(
        tensors, states, target, ir::PassContext::make(), 3, testing::shared_cache_options());
    for (size_t i = 0; i < checks.size(); ++i) {
      ASSERT_TRUE(checks[i].ok()) << "state " << i << ": "
                                  << (checks[i].build.ok() ? checks[i].check->mismatch
                                                           : checks[i].build.error);
    }
  }
}

TEST(CompiledRandomSchedules, EveryOperatorMatchesTheReference) {
  const int kStates = 6;
  ir::Target target = ir::Target::parse("c -num-cores=2");
  for (const auto& c : op_cases()) {
    SCOPED_TRACE(c.name);
    ComputeDAG dag(c.tensors);
    std::mt19937_64 rng(std::hash<std::string>{}(c.name) % 10007);
    std::vector<State> states = {State::make()};
    for (int i = 0; i < kStates; ++i) states.push_back(random_state(dag, rng));
    std::vector<codegen::StateCheck> checks = codegen::verify_states(
        c.tensors, states, target, ir::PassContext::make(), 3, testing::shared_cache_options());
    for (size_t i = 0; i < checks.size(); ++i) {
      const codegen::StateCheck& check = checks[i];
      ASSERT_TRUE(check.ok()) << c.name << ", state " << i << ": "
                              << (check.build.ok() ? check.check->mismatch : check.build.error)
                              << "\nstate: " << save_string(states[i]);
    }
  }
}

// The dot products of int8 convolutions in each form the C code takes:
// VNNI at 512 and 256 bits (AVX-512 VL, AVX-VNNI), pmaddwd (AVX-512 BW,
// AVX2, SSE2), lane by lane. A form whose instructions this machine lacks
// is skipped.
TEST(CompiledRandomSchedules, Int8DotProductsMatchInEveryInstructionSet) {
  Tensor bytes = input({1, 6, 5, 8}, "bytes", DT::uint(8));
  Tensor kbytes = input({3, 3, 16, 8}, "kbytes", DT::int_(8));
  Tensor pad_word = input({}, "pad_word", DT::int32());
  te::Conv2dAttrsNode attrs = te::Conv2dAttrsNode::uniform(1, 1);
  attrs.data_layout = "NHWC";
  te::WorkloadTensors tensors{
      {bytes, kbytes, pad_word},
      {te::conv2d_nhwc_int8x4(te::pack_int8x4(bytes),
                              te::transpose(te::pack_int8x4(kbytes), {0, 1, 3, 2}), pad_word,
                              attrs)}};
  ComputeDAG dag(tensors);
  std::mt19937_64 rng(11);
  std::vector<State> states = {State::make()};
  for (int i = 0; i < 8; ++i) states.push_back(random_state(dag, rng));
  expect_states_match_on(
      tensors, states,
      {"avx512f,avx512bw,avx512vl,avx512vnni", "avx2,avxvnni", "avx512f,avx512bw", "avx2", "sse2"});
}

// Float16 loads, stores and roundings, whole vectors at 4 to 32 lanes and
// strided scalars, under random schedules: every branch of the generated
// conversions compiles (AVX-512F's, F16C's, and the compiler's own where
// neither is enabled: -mattr without f16c) and matches the reference to
// float16's tolerance. EndToEnd.HalfVectorsConvertAsScalarsDo checks the
// rounding bit for bit on this machine's branch.
TEST(CompiledRandomSchedules, Float16ConversionsMatchInEveryInstructionSet) {
  Tensor h = input({8, 64}, "h", DT::float16()), g = input({64}, "g", DT::float16());
  const te::WorkloadTensors tensors = {
      {h, g},
      {te::transpose(te::relu(te::subtract(te::multiply(h, g), g)), {1, 0}),
       te::cast(te::maximum(h, g), DT::float32())}};
  ComputeDAG dag(tensors);
  std::mt19937_64 rng(12);
  std::vector<State> states = {State::make()};
  for (int i = 0; i < 8; ++i) states.push_back(random_state(dag, rng));
  expect_states_match_on(tensors, states,
                         {"avx512f,avx512bw,f16c", "avx2,fma,f16c", "avx2,fma", "sse2"});
}

}  // namespace
}  // namespace tensortune::schedule
