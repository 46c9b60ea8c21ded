// Every operator against a hand-written loop on small random inputs (odd
// sizes; stride, padding, dilation and group cases), evaluated by the
// reference evaluator.
#include "tensortune/te/ops.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cmath>

#include "common/te_util.h"
#include "common/test_util.h"
#include "tensortune/te/evaluator.h"

namespace tensortune::te {
namespace {

using testing::arrays_close;
using testing::make_array;
using Index = std::vector<int64_t>;

const DataType kF32 = DataType::float32();

struct Evaluated {
  std::vector<NDArray> in;
  NDArray out;
};

// Evaluates `out` on random inputs (seeded) and returns both.
Evaluated run(const Tensor& out, const std::vector<Tensor>& inputs, uint64_t seed = 1) {
  Evaluated r;
  r.in = random_inputs(inputs, seed);
  r.out = evaluate({out}, inputs, r.in)[0];
  return r;
}

// ---- linear algebra -----------------------------------------------------------

TEST(Ops, MatmulWithTransposes) {
  const int64_t m = 7, n = 5, k = 9;
  for (bool ta : {false, true}) {
    for (bool tb : {false, true}) {
      Tensor a = placeholder(ta ? Index{k, m} : Index{m, k}, kF32, "A");
      Tensor b = placeholder(tb ? Index{n, k} : Index{k, n}, kF32, "B");
      Tensor c = matmul(a, b, ta, tb);
      EXPECT_EQ(c.shape(), (Index{m, n}));
      EXPECT_EQ(c.compute_op()->tag, "matmul");
      EXPECT_EQ(c.compute_op()->attrs["transpose_a"], ta);
      Evaluated r = run(c, {a, b});
      NDArray expected = make_array(kF32, {m, n}, [&](const Index& ix) {
        double s = 0;
        for (int64_t j = 0; j < k; ++j) {
          s += r.in[0].at(ta ? Index{j, ix[0]} : Index{ix[0], j}) *
               r.in[1].at(tb ? Index{ix[1], j} : Index{j, ix[1]});
        }
        return s;
      });
      EXPECT_TRUE(arrays_close(r.out, expected)) << "transpose_a " << ta << " transpose_b " << tb;
    }
  }
  Tensor a = placeholder({3, 4}, kF32, "A");
  EXPECT_TT_ERROR(matmul(a, placeholder({5, 2}, kF32, "B")), kInvalidArgument,
                  "matmul: reduction extents differ");
  EXPECT_TT_ERROR(matmul(a, placeholder({4, 2}, DataType::float16(), "B")), kTypeMismatch,
                  "have different types");
  EXPECT_TT_ERROR(matmul(a, placeholder({4}, kF32, "B")), kInvalidArgument,
                  "B 'B' must have 2 dimensions");
}

TEST(Ops, DenseWithAndWithoutBias) {
  Tensor x = placeholder({6, 5}, kF32, "x");
  Tensor w = placeholder({7, 5}, kF32, "w");
  Tensor b = placeholder({7}, kF32, "b");
  Tensor plain = dense(x, w);
  Tensor biased = dense(x, w, b);
  EXPECT_EQ(plain.compute_op()->tag, "dense");
  auto in = random_inputs({x, w, b}, 3);
  auto out = evaluate({plain, biased}, {x, w, b}, in);
  auto ref = [&](bool with_bias) {
    return make_array(kF32, {6, 7}, [&](const Index& ix) {
      double s = with_bias ? in[2].at({ix[1]}) : 0;
      for (int64_t j = 0; j < 5; ++j) s += in[0].at({ix[0], j}) * in[1].at({ix[1], j});
      return s;
    });
  };
  EXPECT_TRUE(arrays_close(out[0], ref(false)));
  EXPECT_TRUE(arrays_close(out[1], ref(true)));
  EXPECT_TT_ERROR(dense(x, placeholder({7, 4}, kF32, "w")), kInvalidArgument, "differ in K");
}

TEST(Ops, BatchMatmulWithTransposesAndBroadcast) {
  const int64_t bs = 3, m = 4, n = 5, k = 6;
  for (bool ta : {false, true}) {
    for (bool tb : {false, true}) {
      for (int64_t batch_b : {bs, int64_t{1}}) {
        Tensor a = placeholder(ta ? Index{bs, k, m} : Index{bs, m, k}, kF32, "A");
        Tensor b = placeholder(tb ? Index{batch_b, n, k} : Index{batch_b, k, n}, kF32, "B");
        Tensor c = batch_matmul(a, b, ta, tb);
        EXPECT_EQ(c.shape(), (Index{bs, m, n}));
        Evaluated r = run(c, {a, b}, 11);
        NDArray expected = make_array(kF32, {bs, m, n}, [&](const Index& ix) {
          int64_t q = batch_b == 1 ? 0 : ix[0];
          double s = 0;
          for (int64_t j = 0; j < k; ++j) {
            s += r.in[0].at(ta ? Index{ix[0], j, ix[1]} : Index{ix[0], ix[1], j}) *
                 r.in[1].at(tb ? Index{q, ix[2], j} : Index{q, j, ix[2]});
          }
          return s;
        });
        EXPECT_TRUE(arrays_close(r.out, expected)) << ta << tb << batch_b;
      }
    }
  }
  EXPECT_TT_ERROR(
      batch_matmul(placeholder({2, 3, 4}, kF32, "A"), placeholder({3, 4, 5}, kF32, "B")),
      kInvalidArgument, "neither match nor broadcast");
}

TEST(Ops, BatchMatmulNdComputesAtTheOutputsAxesAndBroadcastsWholeSides) {
  struct Case {
    Index a, b, out;
  };
  for (const Case& c :
       {Case{{2, 3, 4, 5}, {2, 3, 5, 6}, {2, 3, 4, 6}},
        Case{{1, 1, 4, 5}, {2, 3, 5, 6}, {2, 3, 4, 6}}, Case{{2, 3, 4, 5}, {5, 6}, {2, 3, 4, 6}},
        Case{{4, 5}, {3, 5, 6}, {3, 4, 6}}}) {
    Tensor a = placeholder(c.a, kF32, "A"), b = placeholder(c.b, kF32, "B");
    Tensor out = batch_matmul_nd(a, b);
    ASSERT_EQ(out.shape(), c.out);
    // One stage: the product itself, no reshapes around it.
    EXPECT_EQ(out.compute_op()->tag, "batch_matmul");
    Evaluated r = run(out, {a, b}, 5);
    NDArray expected = make_array(kF32, c.out, [&](const Index& ix) {
      size_t rank = ix.size();
      auto at = [&](const Index& shape, int64_t row, int64_t col) {
        Index i;
        bool ones = std::all_of(shape.begin(), shape.end() - 2, [](int64_t e) { return e == 1; });
        for (size_t d = 0; d + 2 < shape.size(); ++d) {
          i.push_back(ones ? 0 : ix[rank - 2 - (shape.size() - 2) + d]);
        }
        i.push_back(row);
        i.push_back(col);
        return i;
      };
      double s = 0;
      for (int64_t k = 0; k < 5; ++k) {
        s += r.in[0].at(at(c.a, ix[rank - 2], k)) * r.in[1].at(at(c.b, k, ix[rank - 1]));
      }
      return s;
    });
    EXPECT_TRUE(arrays_close(r.out, expected)) << c.a.size() << "-d A, " << c.b.size() << "-d B";
  }
  EXPECT_TT_ERROR(
      batch_matmul_nd(placeholder({2, 3, 4, 5}, kF32, "A"), placeholder({3, 2, 5, 6}, kF32, "B")),
      kInvalidArgument, "neither match nor broadcast whole");
  EXPECT_TT_ERROR(
      batch_matmul_nd(placeholder({2, 4, 5}, kF32, "A"), placeholder({2, 4, 6}, kF32, "B")),
      kInvalidArgument, "K = 5");
}

// ---- convolutions -------------------------------------------------------------

int64_t conv_out(int64_t in, int64_t before, int64_t after, int64_t window, int64_t dilation,
                 int64_t stride) {
  return (in + before + after - dilation * (window - 1) - 1) / stride + 1;
}

NDArray ref_conv2d_nchw(const NDArray& x, const NDArray& w, const Conv2dAttrsNode& a) {
  int64_t n = x.shape()[0], h = x.shape()[2], wd = x.shape()[3];
  int64_t k = w.shape()[0], cg = w.shape()[1], r = w.shape()[2], s = w.shape()[3];
  int64_t oh = conv_out(h, a.padding[0], a.padding[2], r, a.dilation[0], a.strides[0]);
  int64_t ow = conv_out(wd, a.padding[1], a.padding[3], s, a.dilation[1], a.strides[1]);
  int64_t kg = k / a.groups;
  return make_array(x.dtype(), {n, k, oh, ow}, [&](const Index& ix) {
    int64_t g = ix[1] / kg;
    double acc = 0;
    for (int64_t c = 0; c < cg; ++c) {
      for (int64_t y = 0; y < r; ++y) {
        for (int64_t z = 0; z < s; ++z) {
          int64_t ih = ix[2] * a.strides[0] - a.padding[0] + y * a.dilation[0];
          int64_t iw = ix[3] * a.strides[1] - a.padding[1] + z * a.dilation[1];
          if (ih < 0 || ih >= h || iw < 0 || iw >= wd) continue;
          acc += x.at({ix[0], g * cg + c, ih, iw}) * w.at({ix[1], c, y, z});
        }
      }
    }
    return acc;
  });
}

std::vector<Conv2dAttrsNode> conv_cases() {
  std::vector<Conv2dAttrsNode> cases;
  cases.push_back(Conv2dAttrsNode::uniform(1, 0));
  cases.push_back(Conv2dAttrsNode::uniform(2, 1));
  cases.push_back(Conv2dAttrsNode::uniform(1, 2, 2));     // dilation 2
  cases.push_back(Conv2dAttrsNode::uniform(2, 1, 1, 2));  // 2 groups
  Conv2dAttrsNode odd;
  odd.strides = {2, 1};
  odd.padding = {0, 2, 1, 0};  // asymmetric
  odd.dilation = {1, 2};
  odd.groups = 3;
  cases.push_back(odd);
  return cases;
}

TEST(Ops, Conv2dNchw) {
  for (const Conv2dAttrsNode& a : conv_cases()) {
    Tensor x = placeholder({2, 6, 9, 8}, kF32, "data");
    Tensor w = placeholder({6, 6 / a.groups, 3, 2}, kF32, "kernel");
    Tensor y = conv2d_nchw(x, w, a);
    Evaluated r = run(y, {x, w}, 5);
    EXPECT_TRUE(arrays_close(r.out, ref_conv2d_nchw(r.in[0], r.in[1], a)))
        << "stride " << a.strides[0] << " pad " << a.padding[0] << " groups " << a.groups;
    // Padding is its own stage, named for schedules to find.
    bool padded = a.padding != std::vector<int64_t>{0, 0, 0, 0};
    std::vector<Tensor> stages = input_tensors(y);
    EXPECT_EQ(stages[0].name(), padded ? "pad_data" : "data");
    if (padded) {
      EXPECT_EQ(stages[0].compute_op()->tag, "pad");
    }
  }
  Tensor x = placeholder({1, 4, 5, 5}, kF32, "data");
  EXPECT_TT_ERROR(conv2d_nchw(x, placeholder({4, 3, 3, 3}, kF32, "k")), kInvalidArgument,
                  "kernel [4, 3, 3, 3] has 3 input channels per group");
  EXPECT_TT_ERROR(
      conv2d_nchw(x, placeholder({6, 2, 3, 3}, kF32, "k"), Conv2dAttrsNode::uniform(1, 0, 1, 3)),
      kInvalidArgument, "groups = 3 must be >= 1 and divide");
  EXPECT_TT_ERROR(conv2d_nchw(x, placeholder({4, 4, 7, 7}, kF32, "k")), kInvalidArgument,
                  "larger than the padded height");
  EXPECT_TT_ERROR(
      conv2d_nchw(x, placeholder({4, 4, 3, 3}, kF32, "k"), Conv2dAttrsNode::uniform(0, 0)),
      kInvalidArgument, "strides must be >= 1");
}

TEST(Ops, Conv2dNhwc) {
  for (const Conv2dAttrsNode& a : conv_cases()) {
    const int64_t n = 2, c = 6, h = 9, wd = 8, k = 6, r = 3, s = 2;
    Tensor x = placeholder({n, h, wd, c}, kF32, "data");
    Tensor w = placeholder({r, s, c / a.groups, k}, kF32, "kernel");
    Tensor y = conv2d_nhwc(x, w, a);
    Evaluated run_nhwc = run(y, {x, w}, 6);
    // Same numbers through the NCHW reference, moved between layouts.
    NDArray x_nchw = make_array(kF32, {n, c, h, wd}, [&](const Index& i) {
      return run_nhwc.in[0].at({i[0], i[2], i[3], i[1]});
    });
    NDArray w_kcrs = make_array(kF32, {k, c / a.groups, r, s}, [&](const Index& i) {
      return run_nhwc.in[1].at({i[2], i[3], i[1], i[0]});
    });
    NDArray ref = ref_conv2d_nchw(x_nchw, w_kcrs, a);
    NDArray expected = make_array(kF32, y.shape(), [&](const Index& i) {
      return ref.at({i[0], i[3], i[1], i[2]});
    });
    EXPECT_TRUE(arrays_close(run_nhwc.out, expected)) << "groups " << a.groups;
  }
}

TEST(Ops, DepthwiseConv2d) {
  for (int64_t mult : {1, 2}) {
    for (const Conv2dAttrsNode& a :
         {Conv2dAttrsNode::uniform(1, 1), Conv2dAttrsNode::uniform(2, 1, 2)}) {
      const int64_t c = 3;
      Tensor x = placeholder({2, c, 9, 7}, kF32, "data");
      Tensor w = placeholder({c, mult, 3, 3}, kF32, "kernel");
      Tensor y = depthwise_conv2d_nchw(x, w, a);
      Evaluated r = run(y, {x, w}, 8);
      // A depthwise convolution is a grouped one with groups = C.
      NDArray w_grouped = make_array(kF32, {c * mult, 1, 3, 3}, [&](const Index& i) {
        return r.in[1].at({i[0] / mult, i[0] % mult, i[2], i[3]});
      });
      Conv2dAttrsNode grouped = a;
      grouped.groups = c;
      EXPECT_TRUE(arrays_close(r.out, ref_conv2d_nchw(r.in[0], w_grouped, grouped)))
          << "multiplier " << mult << " stride " << a.strides[0];
    }
  }
}

TEST(Ops, Conv2dTranspose) {
  struct Case {
    int64_t stride, pad, output_pad;
  };
  for (Case cs : {Case{1, 0, 0}, Case{2, 1, 1}, Case{3, 2, 0}, Case{2, 0, 1}}) {
    const int64_t n = 1, c = 3, h = 5, wd = 4, k = 2, r = 3, s = 3;
    Conv2dTransposeAttrsNode a;
    a.strides = {cs.stride, cs.stride};
    a.padding = {cs.pad, cs.pad, cs.pad, cs.pad};
    a.output_padding = {cs.output_pad, cs.output_pad};
    Tensor x = placeholder({n, c, h, wd}, kF32, "data");
    Tensor w = placeholder({c, k, r, s}, kF32, "kernel");
    Tensor y = conv2d_transpose_nchw(x, w, a);
    int64_t oh = (h - 1) * cs.stride - 2 * cs.pad + r + cs.output_pad;
    int64_t ow = (wd - 1) * cs.stride - 2 * cs.pad + s + cs.output_pad;
    ASSERT_EQ(y.shape(), (Index{n, k, oh, ow}));
    Evaluated run_t = run(y, {x, w}, 12);
    // The definition: every input element scatters kernel * value onto the output.
    NDArray expected(kF32, {n, k, oh, ow});
    std::vector<double> acc(static_cast<size_t>(expected.size()), 0.0);
    testing::for_each_index({n, c, h, wd}, [&](const Index& i) {
      for (int64_t q = 0; q < k; ++q) {
        for (int64_t y0 = 0; y0 < r; ++y0) {
          for (int64_t x0 = 0; x0 < s; ++x0) {
            int64_t oy = i[2] * cs.stride - cs.pad + y0, ox = i[3] * cs.stride - cs.pad + x0;
            if (oy < 0 || oy >= oh || ox < 0 || ox >= ow) continue;
            acc[static_cast<size_t>(expected.flat_index({i[0], q, oy, ox}))] +=
                run_t.in[0].at(i) * run_t.in[1].at({i[1], q, y0, x0});
          }
        }
      }
    });
    for (int64_t f = 0; f < expected.size(); ++f) expected.set(f, acc[static_cast<size_t>(f)]);
    EXPECT_TRUE(arrays_close(run_t.out, expected)) << "stride " << cs.stride << " pad " << cs.pad;
  }
  Conv2dTransposeAttrsNode bad;
  bad.strides = {2, 2};
  bad.output_padding = {2, 0};
  EXPECT_TT_ERROR(conv2d_transpose_nchw(placeholder({1, 2, 3, 3}, kF32, "x"),
                                        placeholder({2, 2, 3, 3}, kF32, "w"), bad),
                  kInvalidArgument, "below the stride");
}

// ---- pooling ------------------------------------------------------------------

NDArray ref_pool(const NDArray& x, const Pool2dAttrsNode& a, bool is_max, const Index& out_shape) {
  int64_t h = x.shape()[2], w = x.shape()[3];
  return make_array(kF32, out_shape, [&](const Index& ix) {
    int64_t h0 = ix[2] * a.strides[0] - a.padding[0], w0 = ix[3] * a.strides[1] - a.padding[1];
    double best = -INFINITY, total = 0;
    int64_t covered = 0;
    for (int64_t y = h0; y < h0 + a.kernel[0]; ++y) {
      for (int64_t z = w0; z < w0 + a.kernel[1]; ++z) {
        if (y < 0 || y >= h || z < 0 || z >= w) continue;
        best = std::max(best, x.at({ix[0], ix[1], y, z}));
        total += x.at({ix[0], ix[1], y, z});
        ++covered;
      }
    }
    if (is_max) return best;
    // PyTorch's divisor with count_include_pad: the window clipped to the padded input.
    int64_t hend = std::min(h0 + a.kernel[0], h + a.padding[2]);
    int64_t wend = std::min(w0 + a.kernel[1], w + a.padding[3]);
    int64_t divisor = a.count_include_pad ? (hend - h0) * (wend - w0) : covered;
    return total / static_cast<double>(divisor);
  });
}

TEST(Ops, Pooling) {
  struct Case {
    int64_t kernel, stride, pad;
    bool ceil_mode, include_pad;
    Index expected_hw;  // output height and width for a 9x8 input
  };
  for (Case cs : {Case{3, 2, 1, false, false, {5, 4}}, Case{3, 2, 1, false, true, {5, 4}},
                  Case{2, 2, 0, false, false, {4, 4}}, Case{2, 2, 0, true, false, {5, 4}},
                  Case{3, 2, 1, true, true, {5, 5}}, Case{3, 1, 0, false, false, {7, 6}}}) {
    Pool2dAttrsNode a = Pool2dAttrsNode::uniform(cs.kernel, cs.stride, cs.pad);
    a.ceil_mode = cs.ceil_mode;
    a.count_include_pad = cs.include_pad;
    Tensor x = placeholder({2, 3, 9, 8}, kF32, "data");
    Tensor mx = max_pool2d_nchw(x, a);
    Tensor av = avg_pool2d_nchw(x, a);
    Index shape{2, 3, cs.expected_hw[0], cs.expected_hw[1]};
    ASSERT_EQ(mx.shape(), shape) << cs.kernel << cs.stride << cs.pad << cs.ceil_mode;
    ASSERT_EQ(av.shape(), shape);
    auto in = random_inputs({x}, 4);
    auto out = evaluate({mx, av}, {x}, in);
    EXPECT_TRUE(arrays_close(out[0], ref_pool(in[0], a, true, shape)));
    EXPECT_TRUE(arrays_close(out[1], ref_pool(in[0], a, false, shape)))
        << "include_pad " << cs.include_pad << " ceil " << cs.ceil_mode;
    EXPECT_EQ(mx.compute_op()->tag, "pool_max");
    EXPECT_EQ(av.compute_op()->tag, "pool_avg");

    // NHWC: the same pools on the transposed input give the transposed outputs.
    Tensor xt = placeholder({2, 9, 8, 3}, kF32, "data");
    auto to_nhwc = [](const NDArray& a) {
      Index s = a.shape();
      return make_array(kF32, {s[0], s[2], s[3], s[1]}, [&](const Index& i) {
        return a.at({i[0], i[3], i[1], i[2]});
      });
    };
    auto out_t = evaluate({max_pool2d_nhwc(xt, a), avg_pool2d_nhwc(xt, a)}, {xt}, {to_nhwc(in[0])});
    EXPECT_TRUE(arrays_close(out_t[0], to_nhwc(out[0])));
    EXPECT_TRUE(arrays_close(out_t[1], to_nhwc(out[1])));
  }
  EXPECT_TT_ERROR(
      max_pool2d_nchw(placeholder({1, 1, 5, 5}, kF32, "x"), Pool2dAttrsNode::uniform(2, 1, 2)),
      kInvalidArgument, "must be smaller than the window");
}

TEST(Ops, GlobalPooling) {
  Tensor x = placeholder({2, 3, 5, 7}, kF32, "data");
  Tensor avg = global_avg_pool2d_nchw(x);
  Tensor mx = global_max_pool2d_nchw(x);
  EXPECT_EQ(avg.shape(), (Index{2, 3, 1, 1}));
  auto in = random_inputs({x}, 2);
  auto out = evaluate({avg, mx}, {x}, in);
  auto ref = [&](bool is_max) {
    return make_array(kF32, {2, 3, 1, 1}, [&](const Index& ix) {
      double total = 0, best = -INFINITY;
      for (int64_t y = 0; y < 5; ++y) {
        for (int64_t z = 0; z < 7; ++z) {
          total += in[0].at({ix[0], ix[1], y, z});
          best = std::max(best, in[0].at({ix[0], ix[1], y, z}));
        }
      }
      return is_max ? best : total / 35;
    });
  };
  EXPECT_TRUE(arrays_close(out[0], ref(false)));
  EXPECT_TRUE(arrays_close(out[1], ref(true)));
}

// ---- elementwise --------------------------------------------------------------

TEST(Ops, UnaryElementwise) {
  struct Case {
    const char* name;
    std::function<Tensor(const Tensor&)> op;
    std::function<double(double)> ref;
    double low = -2, high = 2;
  };
  std::vector<Case> cases = {
      {"exp", [](const Tensor& x) { return exp(x); }, [](double v) { return std::exp(v); }},
      {"log", [](const Tensor& x) { return log(x); }, [](double v) { return std::log(v); }, 0.1, 3},
      {"sqrt", [](const Tensor& x) { return sqrt(x); }, [](double v) { return std::sqrt(v); }, 0,
       4},
      {"rsqrt", [](const Tensor& x) { return rsqrt(x); }, [](double v) { return 1 / std::sqrt(v); },
       0.1, 4},
      {"tanh", [](const Tensor& x) { return tanh(x); }, [](double v) { return std::tanh(v); }},
      {"sigmoid", [](const Tensor& x) { return sigmoid(x); },
       [](double v) { return 1 / (1 + std::exp(-v)); }},
      {"erf", [](const Tensor& x) { return erf(x); }, [](double v) { return std::erf(v); }},
      {"abs", [](const Tensor& x) { return abs(x); }, [](double v) { return std::fabs(v); }},
      {"negative", [](const Tensor& x) { return negative(x); }, [](double v) { return -v; }},
      {"floor", [](const Tensor& x) { return floor(x); }, [](double v) { return std::floor(v); }},
      {"ceil", [](const Tensor& x) { return ceil(x); }, [](double v) { return std::ceil(v); }},
      {"sin", [](const Tensor& x) { return sin(x); }, [](double v) { return std::sin(v); }},
      {"cos", [](const Tensor& x) { return cos(x); }, [](double v) { return std::cos(v); }},
      {"relu", [](const Tensor& x) { return relu(x); }, [](double v) { return std::max(v, 0.0); }},
      {"leaky_relu", [](const Tensor& x) { return leaky_relu(x, 0.1); },
       [](double v) { return v > 0 ? v : 0.1 * v; }},
      {"clip", [](const Tensor& x) { return clip(x, -0.5, 0.75); },
       [](double v) { return std::min(std::max(v, -0.5), 0.75); }},
      {"gelu", [](const Tensor& x) { return gelu(x); },
       [](double v) { return 0.5 * v * (1 + std::erf(v / std::sqrt(2.0))); }},
  };
  for (const Case& c : cases) {
    Tensor x = placeholder({3, 7}, kF32, "x");
    Tensor y = c.op(x);
    EXPECT_EQ(y.name(), c.name);
    EXPECT_EQ(y.compute_op()->tag, "elemwise");
    NDArray in = NDArray::random(kF32, {3, 7}, 17, c.low, c.high);
    NDArray out = evaluate({y}, {x}, {in})[0];
    NDArray expected = make_array(kF32, {3, 7}, [&](const Index& i) { return c.ref(in.at(i)); });
    EXPECT_TRUE(arrays_close(out, expected)) << c.name;
  }
  // Integer abs and negative, without float intrinsics.
  Tensor xi = placeholder({5}, DataType::int32(), "xi");
  NDArray iv = make_array(DataType::int32(), {5}, [](const Index& i) { return double(i[0]) - 2; });
  auto out = evaluate({abs(xi), negative(xi), relu(xi)}, {xi}, {iv});
  for (int64_t i = 0; i < 5; ++i) {
    EXPECT_EQ(out[0].get(i), std::fabs(double(i) - 2));
    EXPECT_EQ(out[1].get(i), 2.0 - double(i));
    EXPECT_EQ(out[2].get(i), std::max(0.0, double(i) - 2));
  }
  EXPECT_TT_ERROR(exp(xi), kTypeMismatch, "exp: operand 'xi' has type int32");
  EXPECT_TT_ERROR(clip(placeholder({2}, kF32, "x"), 1, 0), kInvalidArgument, "must not exceed");
}

TEST(Ops, CastAndFloat16) {
  Tensor x = placeholder({4, 5}, kF32, "x");
  Tensor h = cast(x, DataType::float16());
  Tensor y = relu(add(h, h));  // float16 all the way
  EXPECT_EQ(y.dtype(), DataType::float16());
  NDArray in = NDArray::random(kF32, {4, 5}, 3, -3, 3);
  NDArray out = evaluate({y}, {x}, {in})[0];
  DataType f16 = DataType::float16();
  NDArray expected = make_array(f16, {4, 5}, [&](const Index& i) {
    double v = cast_value(f16, in.at(i));
    return std::max(cast_value(f16, v + v), 0.0);
  });
  EXPECT_EQ(max_abs_diff(out, expected), 0.0);  // same roundings: exact
  EXPECT_EQ(h.compute_op()->tag, "injective");
}

// 3000 ones summed in float16 stop at 2048 (2048 + 1 rounds back to 2048);
// every summing operator accumulates half types in float32 and rounds once.
TEST(Ops, HalfSumsAccumulateInFloat32) {
  for (DataType half : {DataType::float16(), DataType::bfloat16()}) {
    SCOPED_TRACE(half.str());
    const int64_t n = 3000;
    Tensor row = placeholder({1, n}, half, "row");
    Tensor col = placeholder({n, 1}, half, "col");
    Tensor image = placeholder({1, n, 1, 1}, half, "image");
    Tensor kernel = placeholder({1, n, 1, 1}, half, "kernel");
    Tensor plane = placeholder({1, 1, 1, n}, half, "plane");
    Tensor weight = placeholder({1, n}, half, "weight");
    std::vector<Tensor> sums = {
        matmul(row, col),
        dense(row, weight, Tensor()),
        batch_matmul(reshape(row, {1, 1, n}), reshape(col, {1, n, 1})),
        conv2d_nchw(image, kernel, Conv2dAttrsNode::uniform(1, 0)),
        reduce_sum(row, {1}, false),
        global_avg_pool2d_nchw(image),
        avg_pool2d_nchw(plane,
                        [] {
                          Pool2dAttrsNode a = Pool2dAttrsNode::uniform(1, 1, 0);
                          a.kernel = {1, 3000};
                          return a;
                        }()),
    };
    std::vector<Tensor> inputs = {row, col, image, kernel, plane, weight};
    std::vector<NDArray> values;
    for (const Tensor& t : inputs) {
      values.push_back(make_array(half, t.shape(), [](const Index&) { return 1.0; }));
    }
    std::vector<NDArray> out = evaluate(sums, inputs, values);
    // 3000 itself rounds to 3008 in bfloat16, which keeps 8 significant bits.
    const double total = cast_value(half, 3000);
    const double expected[] = {total, total, total, total, total, 1, 1};
    for (size_t i = 0; i < sums.size(); ++i) {
      EXPECT_EQ(sums[i].dtype(), half) << sums[i].name();
      EXPECT_EQ(out[i].get(0), expected[i]) << sums[i].name();
    }
  }
}

// What reads a rounded half sum in the same DAG reads the float32 sum, and
// a chain of such operators rounds once at its end, as ONNX Runtime runs
// float16 operators without a half kernel in float32 and drops the casts
// between them: a swish after a matmul, a cast back to float32, and a
// softmax and a matmul reading a matmul's sum.
TEST(Ops, OperatorsAfterAHalfSumReadTheFloat32Sum) {
  const DataType f16 = DataType::float16();
  // The same DAG in float16 and in float32 on the same (exactly widened)
  // values: each float16 output is its float32 twin's, rounded once.
  auto build = [](DataType t) {
    Tensor a = placeholder({3, 40}, t, "a"), b = placeholder({40, 6}, t, "b");
    Tensor c = placeholder({6, 6}, t, "c");
    Tensor product = matmul(a, b);
    std::vector<Tensor> outs = {multiply(product, sigmoid(product)), tanh(product),
                                softmax(product, -1), matmul(product, c)};
    return std::pair{std::vector<Tensor>{a, b, c}, outs};
  };
  auto [in16, out16] = build(f16);
  auto [in32, out32] = build(kF32);
  Tensor widened = cast(matmul(in16[0], in16[1]), kF32);
  std::vector<NDArray> values = {NDArray::random(f16, {3, 40}, 1, -1, 1),
                                 NDArray::random(f16, {40, 6}, 2, -1, 1),
                                 NDArray::random(f16, {6, 6}, 3, -1, 1)};
  std::vector<NDArray> wide_values;
  for (const NDArray& v : values) wide_values.push_back(v.converted(kF32));
  out16.push_back(widened);
  std::vector<NDArray> got = evaluate(out16, in16, values);
  std::vector<NDArray> wide = evaluate(out32, in32, wide_values);
  for (size_t i = 0; i + 1 < got.size(); ++i) {
    EXPECT_EQ(got[i].dtype(), f16) << out16[i].name();
    EXPECT_EQ(max_abs_diff(got[i], wide[i].converted(f16)), 0.0) << out16[i].name();
  }
  // A cast back to float32 is the sum itself, not its rounding.
  EXPECT_EQ(max_abs_diff(got.back(), evaluate({matmul(in32[0], in32[1])}, in32, wide_values)[0]),
            0.0);
  // A step function reads the stored half value; arithmetic, comparisons
  // and casts read the sum: 2047 + 0.5 rounds to 2048 in half (ties to
  // even).
  Tensor pair = placeholder({1, 2}, f16, "pair"), ones = placeholder({2, 1}, f16, "ones");
  Tensor halfway = matmul(pair, ones);
  Tensor base = placeholder({1, 1}, f16, "base"), top = placeholder({1, 1}, f16, "top");
  auto value = [&](double v) { return make_array(f16, {1, 1}, [v](const Index&) { return v; }); };
  std::vector<NDArray> steps = evaluate(
      {floor(halfway), subtract(halfway, base), cast(halfway, DataType::int32()),
       less(halfway, top)},
      {pair, ones, base, top},
      {make_array(f16, {1, 2}, [](const Index& i) { return i[1] == 0 ? 2047.0 : 0.5; }),
       make_array(f16, {2, 1}, [](const Index&) { return 1.0; }), value(2047), value(2048)});
  EXPECT_EQ(steps[0].get(0), 2048.0);
  EXPECT_EQ(steps[1].get(0), 0.5);
  EXPECT_EQ(steps[2].get(0), 2047.0);  // a cast converts the sum, as ONNX Runtime does
  EXPECT_EQ(steps[3].get(0), 1.0);     // 2047.5 < 2048, where 2048 < 2048 is not
}

TEST(Ops, BroadcastingBinary) {
  struct Case {
    Index a, b, out;
  };
  for (Case cs : {Case{{3, 1, 5}, {4, 1}, {3, 4, 5}}, Case{{2, 3}, {2, 3}, {2, 3}},
                  Case{{1}, {2, 3}, {2, 3}}, Case{{4, 1}, {1, 6}, {4, 6}}}) {
    EXPECT_EQ(broadcast_shape(cs.a, cs.b), cs.out);
    Tensor a = placeholder(cs.a, kF32, "a");
    Tensor b = placeholder(cs.b, kF32, "b");
    std::vector<Tensor> outs = {add(a, b),     subtract(a, b), multiply(a, b), divide(a, b),
                                maximum(a, b), minimum(a, b),  power(a, b)};
    NDArray av = NDArray::random(kF32, cs.a, 1, 0.5, 2);
    NDArray bv = NDArray::random(kF32, cs.b, 2, 0.5, 2);
    auto got = evaluate(outs, {a, b}, {av, bv});
    std::vector<std::function<double(double, double)>> refs = {
        [](double x, double y) { return x + y; },
        [](double x, double y) { return x - y; },
        [](double x, double y) { return x * y; },
        [](double x, double y) { return x / y; },
        [](double x, double y) { return std::max(x, y); },
        [](double x, double y) { return std::min(x, y); },
        [](double x, double y) { return std::pow(x, y); }};
    // Numpy's rule: align at the right, read index 0 along extent-1 dimensions.
    auto pick = [&](const NDArray& arr, const Index& out_ix) {
      Index ix;
      size_t offset = out_ix.size() - arr.shape().size();
      for (size_t d = 0; d < arr.shape().size(); ++d) {
        ix.push_back(arr.shape()[d] == 1 ? 0 : out_ix[offset + d]);
      }
      return arr.at(ix);
    };
    for (size_t o = 0; o < outs.size(); ++o) {
      EXPECT_EQ(outs[o].shape(), cs.out);
      EXPECT_EQ(outs[o].compute_op()->tag, "broadcast");
      NDArray expected = make_array(
          kF32, cs.out, [&](const Index& i) { return refs[o](pick(av, i), pick(bv, i)); });
      EXPECT_TRUE(arrays_close(got[o], expected)) << outs[o].name();
    }
  }
  EXPECT_TT_ERROR(broadcast_shape({3, 4}, {2, 4}), kInvalidArgument,
                  "shapes [3, 4] and [2, 4] do not broadcast");
  EXPECT_TT_ERROR(add(placeholder({3, 4}, kF32, "a"), placeholder({2, 4}, kF32, "b")),
                  kInvalidArgument, "add: shapes [3, 4] and [2, 4]");
}

TEST(Ops, BiasAdd) {
  Tensor x = placeholder({2, 3, 4}, kF32, "x");
  for (int axis : {1, -1}) {
    int ax = axis < 0 ? 2 : axis;
    Tensor b = placeholder({x.shape()[ax]}, kF32, "b");
    Evaluated r = run(bias_add(x, b, axis), {x, b});
    NDArray expected = make_array(
        kF32, {2, 3, 4}, [&](const Index& i) { return r.in[0].at(i) + r.in[1].at({i[ax]}); });
    EXPECT_TRUE(arrays_close(r.out, expected));
  }
  EXPECT_TT_ERROR(bias_add(x, placeholder({4}, kF32, "b"), 1), kInvalidArgument,
                  "does not match dimension 1");
  EXPECT_TT_ERROR(bias_add(x, placeholder({4}, kF32, "b"), 3), kInvalidArgument,
                  "axis 3 is out of range");
}

// ---- normalisation -------------------------------------------------------------

TEST(Ops, SoftmaxAndLogSoftmax) {
  for (int axis : {-1, 0, 1}) {
    Tensor x = placeholder({4, 5, 3}, kF32, "x");
    Tensor sm = softmax(x, axis);
    Tensor lsm = log_softmax(x, axis);
    int ax = axis < 0 ? 2 : axis;
    // Large inputs: a naive exp would overflow; the max shift keeps it finite.
    NDArray in = NDArray::random(kF32, {4, 5, 3}, 5, -50, 100);
    auto out = evaluate({sm, lsm}, {x}, {in});
    auto reduce_over = [&](const Index& i, const std::function<void(double)>& f) {
      Index j = i;
      for (int64_t t = 0; t < in.shape()[ax]; ++t) {
        j[ax] = t;
        f(in.at(j));
      }
    };
    NDArray expected_sm = make_array(kF32, {4, 5, 3}, [&](const Index& i) {
      double m = -INFINITY, s = 0;
      reduce_over(i, [&](double v) { m = std::max(m, v); });
      reduce_over(i, [&](double v) { s += std::exp(v - m); });
      return std::exp(in.at(i) - m) / s;
    });
    NDArray expected_lsm = make_array(kF32, {4, 5, 3}, [&](const Index& i) {
      double m = -INFINITY, s = 0;
      reduce_over(i, [&](double v) { m = std::max(m, v); });
      reduce_over(i, [&](double v) { s += std::exp(v - m); });
      return in.at(i) - m - std::log(s);
    });
    EXPECT_TRUE(arrays_close(out[0], expected_sm)) << axis;
    EXPECT_TRUE(arrays_close(out[1], expected_lsm)) << axis;
    // Four stages: max, exp, sum, divide.
    EXPECT_EQ(post_order_tensors({sm}).size(), 5u);
  }
  // A 1-D softmax reduces to 0-d intermediates.
  Tensor v = placeholder({6}, kF32, "v");
  Evaluated r = run(softmax(v), {v});
  double total = 0;
  for (int64_t i = 0; i < 6; ++i) total += r.out.get(i);
  EXPECT_NEAR(total, 1.0, 1e-6);
}

TEST(Ops, LayerNorm) {
  Tensor x = placeholder({2, 3, 7}, kF32, "x");
  Tensor g = placeholder({7}, kF32, "gamma");
  Tensor b = placeholder({7}, kF32, "beta");
  auto in = random_inputs({x, g, b}, 21);
  auto out =
      evaluate({layer_norm(x, g, b, 1e-5), layer_norm(x, Tensor(), Tensor(), 0.1)}, {x, g, b}, in);
  auto ref = [&](bool affine, double eps) {
    return make_array(kF32, {2, 3, 7}, [&](const Index& i) {
      double mean = 0, var = 0;
      for (int64_t d = 0; d < 7; ++d) mean += in[0].at({i[0], i[1], d}) / 7;
      for (int64_t d = 0; d < 7; ++d) var += std::pow(in[0].at({i[0], i[1], d}) - mean, 2) / 7;
      double y = (in[0].at(i) - mean) / std::sqrt(var + eps);
      return affine ? y * in[1].at({i[2]}) + in[2].at({i[2]}) : y;
    });
  };
  EXPECT_TRUE(arrays_close(out[0], ref(true, 1e-5)));
  EXPECT_TRUE(arrays_close(out[1], ref(false, 0.1)));
  EXPECT_TT_ERROR(layer_norm(x, placeholder({3}, kF32, "gamma"), b), kInvalidArgument,
                  "gamma [3] must have the extent of the normalised axis (7)");
}

TEST(Ops, BatchNormInference) {
  Tensor x = placeholder({2, 3, 4, 5}, kF32, "x");
  std::vector<Tensor> params;
  for (const char* name : {"gamma", "beta", "mean", "var"})
    params.push_back(placeholder({3}, kF32, name));
  Tensor y = batch_norm_inference(x, params[0], params[1], params[2], params[3], 1, 1e-3);
  std::vector<Tensor> inputs = {x, params[0], params[1], params[2], params[3]};
  auto in = random_inputs(inputs, 31);
  in[4] = NDArray::random(kF32, {3}, 32, 0.5, 2);  // variances are positive
  NDArray out = evaluate({y}, inputs, in)[0];
  NDArray expected = make_array(kF32, {2, 3, 4, 5}, [&](const Index& i) {
    int64_t c = i[1];
    return (in[0].at(i) - in[3].at({c})) / std::sqrt(in[4].at({c}) + 1e-3) * in[1].at({c}) +
           in[2].at({c});
  });
  EXPECT_TRUE(arrays_close(out, expected));
  EXPECT_EQ(post_order_tensors({y}).size(), 6u);  // one stage
}

// ---- data movement -------------------------------------------------------------

TEST(Ops, Pad) {
  Tensor x = placeholder({3, 4}, kF32, "x");
  Tensor y = pad(x, {1, 0}, {2, 3}, -7.5);
  EXPECT_EQ(y.shape(), (Index{6, 7}));
  EXPECT_EQ(y.compute_op()->tag, "pad");
  Evaluated r = run(y, {x});
  NDArray expected = make_array(kF32, {6, 7}, [&](const Index& i) {
    int64_t a = i[0] - 1, b = i[1];
    return (a >= 0 && a < 3 && b < 4) ? r.in[0].at({a, b}) : -7.5;
  });
  EXPECT_TRUE(arrays_close(r.out, expected));
  EXPECT_EQ(flop_count({y}), 0.0);
  // No padding is still a copy stage.
  Tensor same = pad(x, {}, {});
  EXPECT_FALSE(same.same_as(x));
  EXPECT_TT_ERROR(pad(x, {-1}, {}), kInvalidArgument, "must be >= 0");
}

TEST(Ops, ReshapeAndTranspose) {
  Tensor x = placeholder({2, 3, 5}, kF32, "x");
  Tensor r1 = reshape(x, {5, -1});
  EXPECT_EQ(r1.shape(), (Index{5, 6}));
  Tensor t = transpose(x, {2, 0, 1});
  EXPECT_EQ(t.shape(), (Index{5, 2, 3}));
  Tensor rev = transpose(x);
  EXPECT_EQ(rev.shape(), (Index{5, 3, 2}));
  auto in = random_inputs({x}, 4);
  auto out = evaluate({r1, t, rev, reshape(x, {30})}, {x}, in);
  for (int64_t f = 0; f < 30; ++f) {
    EXPECT_EQ(out[0].get(f), in[0].get(f));  // row-major order is kept
    EXPECT_EQ(out[3].get(f), in[0].get(f));
  }
  testing::for_each_index({5, 2, 3}, [&](const Index& i) {
    EXPECT_EQ(out[1].at(i), in[0].at({i[1], i[2], i[0]}));
  });
  testing::for_each_index({5, 3, 2}, [&](const Index& i) {
    EXPECT_EQ(out[2].at(i), in[0].at({i[2], i[1], i[0]}));
  });
  EXPECT_TT_ERROR(reshape(x, {4, -1}), kInvalidArgument, "cannot infer the -1");
  EXPECT_TT_ERROR(reshape(x, {4, 7}), kInvalidArgument,
                  "has 30 elements, the target shape [4, 7] has 28");
  EXPECT_TT_ERROR(transpose(x, {0, 0, 1}), kInvalidArgument, "not a permutation");
  EXPECT_EQ(flop_count({r1, t}), 0.0);
}

TEST(Ops, Concat) {
  Tensor a = placeholder({2, 3, 4}, kF32, "a");
  Tensor b = placeholder({2, 1, 4}, kF32, "b");
  Tensor c = placeholder({2, 5, 4}, kF32, "c");
  Tensor y = concat({a, b, c}, 1);
  EXPECT_EQ(y.shape(), (Index{2, 9, 4}));
  auto in = random_inputs({a, b, c}, 6);
  NDArray out = evaluate({y}, {a, b, c}, in)[0];
  testing::for_each_index({2, 9, 4}, [&](const Index& i) {
    double v = i[1] < 3   ? in[0].at(i)
               : i[1] < 4 ? in[1].at({i[0], i[1] - 3, i[2]})
                          : in[2].at({i[0], i[1] - 4, i[2]});
    EXPECT_EQ(out.at(i), v);
  });
  Tensor single = concat({a}, -1);
  EXPECT_EQ(single.shape(), a.shape());
  EXPECT_TT_ERROR(concat({a, placeholder({2, 3, 5}, kF32, "d")}, 1), kInvalidArgument,
                  "does not match 'a' [2, 3, 4] outside axis 1");
  EXPECT_TT_ERROR(concat({}, 0), kInvalidArgument, "no tensors");
}

TEST(Ops, Slice) {
  Tensor x = placeholder({7, 6}, kF32, "x");
  struct Case {
    Index begin, end, strides;
    std::vector<Index> rows_cols;  // expected selected rows, then columns
  };
  std::vector<Case> cases = {
      {{1, 0}, {5, 6}, {}, {{1, 2, 3, 4}, {0, 1, 2, 3, 4, 5}}},
      {{0, 1}, {7, 6}, {3, 2}, {{0, 3, 6}, {1, 3, 5}}},
      {{-2}, {100}, {}, {{5, 6}, {0, 1, 2, 3, 4, 5}}},
      {{6, 4}, {-100, 0}, {-2, -1}, {{6, 4, 2, 0}, {4, 3, 2, 1}}},
      {{-1}, {-4}, {-1}, {{6, 5, 4}, {0, 1, 2, 3, 4, 5}}},
  };
  auto in = random_inputs({x}, 8);
  for (const Case& c : cases) {
    Tensor y = slice(x, c.begin, c.end, c.strides);
    Index shape{static_cast<int64_t>(c.rows_cols[0].size()),
                static_cast<int64_t>(c.rows_cols[1].size())};
    ASSERT_EQ(y.shape(), shape);
    NDArray out = evaluate({y}, {x}, in)[0];
    testing::for_each_index(shape, [&](const Index& i) {
      EXPECT_EQ(out.at(i), in[0].at({c.rows_cols[0][i[0]], c.rows_cols[1][i[1]]}));
    });
  }
  EXPECT_TT_ERROR(slice(x, {3}, {3}), kInvalidArgument, "dimension 0 of [7, 6] is empty");
  EXPECT_TT_ERROR(slice(x, {0}, {3}, {0}), kInvalidArgument, "stride of dimension 0 is 0");
}

TEST(Ops, Resize2d) {
  // ONNX Resize: the source coordinate of output o along an axis of `in` ->
  // `out` elements, then nearest (round_prefer_floor) or linear.
  auto source = [](const std::string& mode, int64_t o, int64_t in, int64_t out) {
    if (mode == "asymmetric") return static_cast<double>(o) * in / out;
    if (mode == "align_corners")
      return out == 1 ? 0.0 : static_cast<double>(o) * (in - 1) / (out - 1);
    return (o + 0.5) * in / out - 0.5;
  };
  auto clampi = [](int64_t v, int64_t hi) {
    return std::min<int64_t>(std::max<int64_t>(v, 0), hi);
  };
  for (const std::string mode : {"half_pixel", "asymmetric", "align_corners"}) {
    for (auto [in_h, in_w, out_h, out_w] :
         {std::array<int64_t, 4>{3, 4, 6, 8}, std::array<int64_t, 4>{5, 7, 3, 2},
          std::array<int64_t, 4>{4, 4, 1, 9}}) {
      Tensor x = placeholder({2, 3, in_h, in_w}, kF32, "x");
      auto in = random_inputs({x}, 4);
      NDArray nearest = evaluate({resize2d_nchw(x, out_h, out_w, "nearest", mode)}, {x}, in)[0];
      NDArray linear = evaluate({resize2d_nchw(x, out_h, out_w, "linear", mode)}, {x}, in)[0];
      ASSERT_EQ(nearest.shape(), (Index{2, 3, out_h, out_w}));
      testing::for_each_index(nearest.shape(), [&](const Index& i) {
        double ys = source(mode, i[2], in_h, out_h), xs = source(mode, i[3], in_w, out_w);
        // round_prefer_floor: halves go down.
        int64_t ny = mode == "asymmetric" ? static_cast<int64_t>(std::floor(ys))
                                          : static_cast<int64_t>(std::ceil(ys - 0.5));
        int64_t nx = mode == "asymmetric" ? static_cast<int64_t>(std::floor(xs))
                                          : static_cast<int64_t>(std::ceil(xs - 0.5));
        EXPECT_EQ(nearest.at(i), in[0].at({i[0], i[1], clampi(ny, in_h - 1), clampi(nx, in_w - 1)}))
            << mode << " at " << i[2] << "," << i[3];
        ys = std::max(ys, 0.0);
        xs = std::max(xs, 0.0);
        int64_t y0 = clampi(static_cast<int64_t>(std::floor(ys)), in_h - 1),
                x0 = clampi(static_cast<int64_t>(std::floor(xs)), in_w - 1);
        int64_t y1 = clampi(y0 + 1, in_h - 1), x1 = clampi(x0 + 1, in_w - 1);
        double wy = ys - std::floor(ys), wx = xs - std::floor(xs);
        auto at = [&](int64_t y, int64_t xx) { return in[0].at({i[0], i[1], y, xx}); };
        double expected = (at(y0, x0) * (1 - wx) + at(y0, x1) * wx) * (1 - wy) +
                          (at(y1, x0) * (1 - wx) + at(y1, x1) * wx) * wy;
        EXPECT_NEAR(linear.at(i), expected, 1e-5) << mode << " at " << i[2] << "," << i[3];
      });
    }
  }
  Tensor x = placeholder({1, 1, 4, 4}, kF32, "x");
  EXPECT_TT_ERROR(resize2d_nchw(x, 2, 2, "cubic", "half_pixel"), kInvalidArgument,
                  "method 'cubic' (nearest or linear)");
  EXPECT_TT_ERROR(resize2d_nchw(x, 2, 2, "nearest", "tf_crop"), kInvalidArgument,
                  "coordinate mode 'tf_crop'");
  EXPECT_TT_ERROR(resize2d_nchw(x, 0, 2, "nearest", "half_pixel"), kInvalidArgument, ">= 1");
}

// ---- reductions ----------------------------------------------------------------

TEST(Ops, Reductions) {
  Tensor x = placeholder({3, 4, 5}, kF32, "x");
  auto in = random_inputs({x}, 9);
  struct Case {
    std::vector<int> axes;
    bool keepdims;
    Index shape;
  };
  for (Case cs : {Case{{1}, false, {3, 5}}, Case{{0, 2}, true, {1, 4, 1}}, Case{{}, false, {}},
                  Case{{-1}, true, {3, 4, 1}}}) {
    std::vector<Tensor> outs = {
        reduce_sum(x, cs.axes, cs.keepdims), reduce_mean(x, cs.axes, cs.keepdims),
        reduce_max(x, cs.axes, cs.keepdims), reduce_min(x, cs.axes, cs.keepdims)};
    auto got = evaluate(outs, {x}, in);
    std::vector<bool> reduced(3, cs.axes.empty());
    for (int a : cs.axes) reduced[a < 0 ? a + 3 : a] = true;
    std::vector<NDArray> expected;
    for (int which = 0; which < 4; ++which) {
      expected.push_back(make_array(kF32, cs.shape, [&](const Index& out_ix) {
        double total = 0, best = -INFINITY, least = INFINITY;
        int64_t count = 0;
        testing::for_each_index({3, 4, 5}, [&](const Index& i) {
          // Does input index i map to this output index?
          size_t o = 0;
          for (size_t d = 0; d < 3; ++d) {
            if (reduced[d]) {
              if (cs.keepdims) ++o;
              continue;
            }
            if (out_ix[o++] != i[d]) return;
          }
          double v = in[0].at(i);
          total += v;
          best = std::max(best, v);
          least = std::min(least, v);
          ++count;
        });
        return which == 0 ? total : which == 1 ? total / count : which == 2 ? best : least;
      }));
    }
    for (int which = 0; which < 4; ++which) {
      EXPECT_EQ(outs[which].shape(), cs.shape);
      EXPECT_TRUE(arrays_close(got[which], expected[which])) << outs[which].name();
    }
  }
  EXPECT_TT_ERROR(reduce_sum(x, {1, -2}), kInvalidArgument, "axis -2 is listed twice");
}

}  // namespace
}  // namespace tensortune::te
