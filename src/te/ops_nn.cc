// Linear algebra, convolutions and pooling.
#include <functional>

#include "te/op_util.h"
#include "tensortune/support/shape.h"
#include "tensortune/te/ops.h"

namespace tensortune::te {

using detail::accumulator_name;
using detail::add_index;
using detail::as_exprs;
using detail::as_type;
using detail::check_rank;
using detail::check_same_dtype;
using detail::index_const;
using detail::json_number;
using detail::mul_index;
using detail::narrow;
using detail::value_const;
using detail::wide_source;
using detail::widen;

namespace {

// Checks the common parameters of a 2-D window (convolution or pooling).
// The window attributes of a 2-D op: two strides, four paddings (top, left,
// bottom, right) and two dilations, each in range.
void check_window(std::string_view op, const std::vector<int64_t>& stride,
                  const std::vector<int64_t>& padding, const std::vector<int64_t>& dilation) {
  if (stride.size() != 2 || padding.size() != 4 || dilation.size() != 2) {
    fail(ErrorKind::kInvalidArgument, op, ": needs 2 strides, 4 paddings and 2 dilations, got ",
         stride.size(), ", ", padding.size(), " and ", dilation.size());
  }
  for (int64_t s : stride) {
    if (s < 1) fail(ErrorKind::kInvalidArgument, op, ": strides must be >= 1, got ", s);
  }
  for (int64_t p : padding) {
    if (p < 0) fail(ErrorKind::kInvalidArgument, op, ": padding must be >= 0, got ", p);
  }
  for (int64_t d : dilation) {
    if (d < 1) fail(ErrorKind::kInvalidArgument, op, ": dilation must be >= 1, got ", d);
  }
}

// An attribute list of a checked length as an array, to bind its entries.
template <size_t N>
std::array<int64_t, N> as_array(const std::vector<int64_t>& v) {
  TT_ICHECK(v.size() == N, "an attribute list of ", v.size(), " values where ", N, " were checked");
  std::array<int64_t, N> out{};
  std::copy(v.begin(), v.end(), out.begin());
  return out;
}

// Output extent of a window of `size` taps (dilated extent), or a clear error.
int64_t out_extent(std::string_view op, std::string_view dim, int64_t in, int64_t pad_sum,
                   int64_t window, int64_t stride) {
  int64_t span = in + pad_sum - window;
  if (span < 0) {
    fail(ErrorKind::kInvalidArgument, op, ": the window (", window, ") is larger than the padded ",
         dim, " (", in + pad_sum, ")");
  }
  return span / stride + 1;
}

// The channel counts of a grouped convolution: `groups` divides the input
// channels c and the output channels k, and the kernel has c / groups input
// channels (`cg`). `kernel_layout` is noted after the kernel's shape.
void check_groups(std::string_view op, const Tensor& data, const Tensor& kernel,
                  std::string_view kernel_layout, int64_t c, int64_t k, int64_t cg,
                  int64_t groups) {
  if (groups < 1 || c % groups != 0 || k % groups != 0) {
    fail(ErrorKind::kInvalidArgument, op, ": groups = ", groups,
         " must be >= 1 and divide both the input channels (", c, ") and the output channels (", k,
         ")");
  }
  if (cg != c / groups) {
    fail(ErrorKind::kInvalidArgument, op, ": kernel ", shape_text(kernel.shape()), kernel_layout,
         " has ", cg, " input channels per group; data ", shape_text(data.shape()),
         " with groups = ", groups, " needs ", c / groups);
  }
}

nlohmann::json conv_attrs_json(const Conv2dAttrsNode& a, std::string_view layout) {
  return {{"stride", a.strides},
          {"padding", a.padding},
          {"dilation", a.dilation},
          {"groups", a.groups},
          {"layout", layout}};
}

}  // namespace

Conv2dAttrsNode Conv2dAttrsNode::uniform(int64_t stride, int64_t pad, int64_t dilation,
                                         int64_t groups) {
  Conv2dAttrsNode a;
  a.strides = {stride, stride};
  a.padding = {pad, pad, pad, pad};
  a.dilation = {dilation, dilation};
  a.groups = groups;
  return a;
}

Pool2dAttrsNode Pool2dAttrsNode::uniform(int64_t kernel, int64_t stride, int64_t pad) {
  Pool2dAttrsNode a;
  a.kernel = {kernel, kernel};
  a.strides = {stride, stride};
  a.padding = {pad, pad, pad, pad};
  return a;
}

// ---- linear algebra -----------------------------------------------------------

Tensor matmul(const Tensor& a, const Tensor& b, bool transpose_a, bool transpose_b,
              std::string name) {
  check_rank(a, 2, "matmul", "A");
  check_rank(b, 2, "matmul", "B");
  check_same_dtype(a, b, "matmul");
  int64_t m = transpose_a ? a.shape()[1] : a.shape()[0];
  int64_t ka = transpose_a ? a.shape()[0] : a.shape()[1];
  int64_t kb = transpose_b ? b.shape()[1] : b.shape()[0];
  int64_t n = transpose_b ? b.shape()[0] : b.shape()[1];
  if (ka != kb) {
    fail(ErrorKind::kInvalidArgument, "matmul: reduction extents differ: A ", shape_text(a.shape()),
         (transpose_a ? " (transposed)" : ""), " has K = ", ka, ", B ", shape_text(b.shape()),
         (transpose_b ? " (transposed)" : ""), " has K = ", kb);
  }
  IterVar k = reduce_axis(ka, "k");
  const Tensor wa = wide_source(a), wb = wide_source(b);
  Tensor out = compute({m, n},
                       [&](const std::vector<Var>& v) {
                         Expr lhs = transpose_a ? wa(k.expr(), v[0]) : wa(v[0], k.expr());
                         Expr rhs = transpose_b ? wb(v[1], k.expr()) : wb(k.expr(), v[1]);
                         return sum(widen(lhs) * widen(rhs), {k});
                       },
                       accumulator_name(name, a.dtype()), "matmul",
                       {{"transpose_a", transpose_a}, {"transpose_b", transpose_b}});
  return narrow(out, a.dtype(), std::move(name));
}

Tensor dense(const Tensor& data, const Tensor& weight, const Tensor& bias, std::string name) {
  check_rank(data, 2, "dense", "data");
  check_rank(weight, 2, "dense", "weight");
  check_same_dtype(data, weight, "dense");
  if (data.shape()[1] != weight.shape()[1]) {
    fail(ErrorKind::kInvalidArgument, "dense: data ", shape_text(data.shape()), " and weight ",
         shape_text(weight.shape()), " differ in K (the last extent of both)");
  }
  IterVar k = reduce_axis(data.shape()[1], "k");
  const Tensor wide_data = wide_source(data), wide_weight = wide_source(weight);
  Tensor out = compute(
      {data.shape()[0], weight.shape()[0]},
      [&](const std::vector<Var>& v) {
        return sum(widen(wide_data(v[0], k.expr())) * widen(wide_weight(v[1], k.expr())), {k});
      },
      accumulator_name(bias ? name + "_matmul" : name, data.dtype()), "dense");
  if (!bias) return narrow(out, data.dtype(), std::move(name));
  check_rank(bias, 1, "dense", "bias");
  check_same_dtype(data, bias, "dense");
  if (bias.shape()[0] != weight.shape()[0]) {
    fail(ErrorKind::kInvalidArgument, "dense: bias ", shape_text(bias.shape()),
         " does not match the ", weight.shape()[0], " output features");
  }
  return compute(out.shape(),
                 [&](const std::vector<Var>& v) {
                   return as_type(out(v[0], v[1]) + widen(bias(v[1])), data.dtype());
                 },
                 std::move(name), "broadcast", {{"op", "bias_add"}, {"axis", 1}});
}

Tensor batch_matmul(const Tensor& a, const Tensor& b, bool transpose_a, bool transpose_b,
                    std::string name) {
  check_rank(a, 3, "batch_matmul", "A");
  check_rank(b, 3, "batch_matmul", "B");
  check_same_dtype(a, b, "batch_matmul");
  int64_t ba = a.shape()[0], bb = b.shape()[0];
  if (ba != bb && ba != 1 && bb != 1) {
    fail(ErrorKind::kInvalidArgument, "batch_matmul: batch extents ", ba, " and ", bb,
         " neither match nor broadcast");
  }
  int64_t m = transpose_a ? a.shape()[2] : a.shape()[1];
  int64_t ka = transpose_a ? a.shape()[1] : a.shape()[2];
  int64_t kb = transpose_b ? b.shape()[2] : b.shape()[1];
  int64_t n = transpose_b ? b.shape()[1] : b.shape()[2];
  if (ka != kb) {
    fail(ErrorKind::kInvalidArgument, "batch_matmul: reduction extents differ: A ",
         shape_text(a.shape()), " has K = ", ka, ", B ", shape_text(b.shape()), " has K = ", kb);
  }
  IterVar k = reduce_axis(ka, "k");
  const Tensor wa = wide_source(a), wb = wide_source(b);
  Tensor out = compute({std::max(ba, bb), m, n},
                       [&](const std::vector<Var>& v) {
                         Expr ia = ba == 1 ? index_const(0) : Expr(v[0]);
                         Expr ib = bb == 1 ? index_const(0) : Expr(v[0]);
                         Expr lhs = transpose_a ? wa(ia, k.expr(), v[1]) : wa(ia, v[1], k.expr());
                         Expr rhs = transpose_b ? wb(ib, v[2], k.expr()) : wb(ib, k.expr(), v[2]);
                         return sum(widen(lhs) * widen(rhs), {k});
                       },
                       accumulator_name(name, a.dtype()), "batch_matmul",
                       {{"transpose_a", transpose_a}, {"transpose_b", transpose_b}});
  return narrow(out, a.dtype(), std::move(name));
}

Tensor batch_matmul_nd(const Tensor& a, const Tensor& b, std::string name) {
  const char* op = "batch_matmul_nd";
  check_same_dtype(a, b, op);
  const auto &sa = a.shape(), &sb = b.shape();
  if (sa.size() < 2 || sb.size() < 2) {
    fail(ErrorKind::kInvalidArgument, op, ": operands need rank 2 or more, got ", shape_text(sa),
         " and ", shape_text(sb));
  }
  size_t ra = sa.size() - 2, rb = sb.size() - 2;  // batch ranks
  if (sa.back() != sb[rb]) {
    fail(ErrorKind::kInvalidArgument, op, ": reduction extents differ: A ", shape_text(sa),
         " has K = ", sa.back(), ", B ", shape_text(sb), " has K = ", sb[rb]);
  }
  std::vector<int64_t> batch_a(sa.begin(), sa.begin() + ra), batch_b(sb.begin(), sb.begin() + rb);
  auto ones = [](const std::vector<int64_t>& s) {
    return std::all_of(s.begin(), s.end(), [](int64_t e) { return e == 1; });
  };
  if (!(batch_a == batch_b || ones(batch_a) || ones(batch_b))) {
    fail(ErrorKind::kInvalidArgument, op, ": batch axes ", shape_text(batch_a), " and ",
         shape_text(batch_b), " neither match nor broadcast whole");
  }
  std::vector<int64_t> shape = broadcast_shape(batch_a, batch_b);
  size_t rank = shape.size();
  shape.push_back(sa[ra]);
  shape.push_back(sb.back());
  // Not "k": that is the name of the output's third axis.
  IterVar k = reduce_axis(sa.back(), "r");
  const Tensor wa = wide_source(a), wb = wide_source(b);
  Tensor out = compute(
      shape,
      [&](const std::vector<Var>& v) {
        // A side's batch axes are the output's last ones, or all 0 where
        // that side broadcasts.
        auto batch_index = [&](const std::vector<int64_t>& batch) {
          std::vector<Expr> index;
          for (size_t i = 0; i < batch.size(); ++i) {
            index.push_back(ones(batch) ? index_const(0) : Expr(v[rank - batch.size() + i]));
          }
          return index;
        };
        std::vector<Expr> ia = batch_index(batch_a), ib = batch_index(batch_b);
        ia.push_back(v[rank]);
        ia.push_back(k.expr());
        ib.push_back(k.expr());
        ib.push_back(v[rank + 1]);
        return sum(widen(wa(ia)) * widen(wb(ib)), {k});
      },
      accumulator_name(name, a.dtype()), "batch_matmul");
  return narrow(out, a.dtype(), std::move(name));
}

// ---- convolutions -------------------------------------------------------------

Tensor conv2d_nchw(const Tensor& data, const Tensor& kernel, const Conv2dAttrsNode& attrs,
                   std::string name) {
  const char* op = "conv2d_nchw";
  check_rank(data, 4, op, "data");
  check_rank(kernel, 4, op, "kernel");
  check_same_dtype(data, kernel, op);
  check_window(op, attrs.strides, attrs.padding, attrs.dilation);
  int64_t n = data.shape()[0], c = data.shape()[1], h = data.shape()[2], w = data.shape()[3];
  int64_t k = kernel.shape()[0], cg = kernel.shape()[1], r = kernel.shape()[2],
          s = kernel.shape()[3];
  int64_t groups = attrs.groups;
  check_groups(op, data, kernel, "", c, k, cg, groups);
  auto [sh, sw] = as_array<2>(attrs.strides);
  auto [dh, dw] = as_array<2>(attrs.dilation);
  auto [pt, pl, pb, pr] = as_array<4>(attrs.padding);
  int64_t oh = out_extent(op, "height", h, pt + pb, dh * (r - 1) + 1, sh);
  int64_t ow = out_extent(op, "width", w, pl + pr, dw * (s - 1) + 1, sw);
  Tensor padded = detail::pad_stage(data, {0, 0, pt, pl}, {0, 0, pb, pr},
                                    value_const(data.dtype(), 0), "pad_data", 0.0);
  IterVar rc = reduce_axis(cg, "rc"), ry = reduce_axis(r, "ry"), rx = reduce_axis(s, "rx");
  int64_t kg = k / groups;
  Tensor out = compute(
      {n, k, oh, ow},
      [&](const std::vector<Var>& v) {
        Expr channel = groups == 1 ? rc.expr()
                                   : mul_index(ir::floordiv(v[1], index_const(kg)), cg) + rc.expr();
        Expr y = mul_index(v[2], sh) + mul_index(ry.expr(), dh);
        Expr x = mul_index(v[3], sw) + mul_index(rx.expr(), dw);
        return sum(widen(padded(v[0], channel, y, x)) *
                       widen(kernel(v[1], rc.expr(), ry.expr(), rx.expr())),
                   {rc, ry, rx});
      },
      accumulator_name(name, data.dtype()), op, conv_attrs_json(attrs, "NCHW"));
  return narrow(out, data.dtype(), std::move(name));
}

Tensor pack_int8x4(const Tensor& x, std::string name) {
  const char* op = "pack_int8x4";
  DataType t = x.dtype();
  TT_CHECK(t == DataType::int_(8) || t == DataType::uint(8), kInvalidArgument, op, ": packs ",
           t.str(), "; int8 and uint8 are packed");
  TT_CHECK(!x.shape().empty(), kInvalidArgument, op, ": needs at least one axis");
  const int64_t channels = x.shape().back();
  std::vector<int64_t> shape = x.shape();
  shape.back() = (channels + 3) / 4;
  return compute(
      shape,
      [&](const std::vector<Var>& v) {
        // The word's value as int32 without overflow: bytes 0..2 unsigned,
        // byte 3 signed (it holds the sign bit).
        Expr word = value_const(DataType::int32(), 0);
        for (int64_t j = 0; j < 4; ++j) {
          Expr c = mul_index(v.back(), 4) + index_const(j);
          std::vector<Expr> index(v.begin(), v.end());
          index.back() = channels % 4 == 0 ? c : ir::min(c, index_const(channels - 1));
          Expr b = ir::cast(DataType::int32(), x(index));
          Expr zero = value_const(DataType::int32(), 0);
          if (j < 3 && t.is_int()) b = ir::select(b < zero, b + value_const(b.dtype(), 256), b);
          if (j == 3 && t.is_uint()) {
            b = ir::select(b >= value_const(b.dtype(), 128), b - value_const(b.dtype(), 256), b);
          }
          if (channels % 4 != 0) b = ir::select(c < index_const(channels), b, zero);
          word = word + b * value_const(DataType::int32(), int64_t{1} << (8 * j));
        }
        return word;
      },
      std::move(name), op);
}

Tensor conv2d_nhwc_int8x4(const Tensor& data, const Tensor& kernel, const Tensor& pad_word,
                          const Conv2dAttrsNode& attrs, std::string name) {
  const char* op = "conv2d_nhwc_int8x4";
  check_rank(data, 4, op, "data");
  check_rank(kernel, 4, op, "kernel");
  check_rank(pad_word, 0, op, "pad word");
  for (const Tensor* t : {&data, &kernel, &pad_word}) {
    TT_CHECK(t->dtype() == DataType::int32(), kInvalidArgument, op, ": needs int32 words, got ",
             t->dtype().str());
  }
  check_window(op, attrs.strides, attrs.padding, attrs.dilation);
  TT_CHECK(attrs.groups == 1, kInvalidArgument, op, ": takes no groups");
  int64_t n = data.shape()[0], h = data.shape()[1], w = data.shape()[2], c4 = data.shape()[3];
  int64_t r = kernel.shape()[0], s = kernel.shape()[1], k = kernel.shape()[3];
  TT_CHECK(kernel.shape()[2] == c4, kInvalidArgument, op, ": data ", shape_text(data.shape()),
           " and kernel ", shape_text(kernel.shape()), " differ in their words of channels");
  auto [sh, sw] = as_array<2>(attrs.strides);
  auto [dh, dw] = as_array<2>(attrs.dilation);
  auto [pt, pl, pb, pr] = as_array<4>(attrs.padding);
  int64_t oh = out_extent(op, "height", h, pt + pb, dh * (r - 1) + 1, sh);
  int64_t ow = out_extent(op, "width", w, pl + pr, dw * (s - 1) + 1, sw);
  // The border is the zero point's word: its products are taken back out
  // with the rest of the zero point's (see int8_conv2d_words).
  Tensor padded =
      detail::pad_stage(data, {0, pt, pl, 0}, {0, pb, pr, 0}, pad_word({}), "pad_data", "pad_word");
  IterVar ry = reduce_axis(r, "ry"), rx = reduce_axis(s, "rx"), rc = reduce_axis(c4, "rc");
  return compute(
      {n, oh, ow, k},
      [&](const std::vector<Var>& v) {
        Expr y = mul_index(v[1], sh) + mul_index(ry.expr(), dh);
        Expr x = mul_index(v[2], sw) + mul_index(rx.expr(), dw);
        return sum(ir::dot4_u8s8(padded(v[0], y, x, rc.expr()),
                                 kernel(ry.expr(), rx.expr(), rc.expr(), v[3])),
                   {ry, rx, rc});
      },
      std::move(name), op, conv_attrs_json(attrs, "NHWC"));
}

Tensor conv2d_nhwc(const Tensor& data, const Tensor& kernel, const Conv2dAttrsNode& attrs,
                   std::string name) {
  const char* op = "conv2d_nhwc";
  check_rank(data, 4, op, "data");
  check_rank(kernel, 4, op, "kernel");
  check_same_dtype(data, kernel, op);
  check_window(op, attrs.strides, attrs.padding, attrs.dilation);
  int64_t n = data.shape()[0], h = data.shape()[1], w = data.shape()[2], c = data.shape()[3];
  int64_t r = kernel.shape()[0], s = kernel.shape()[1], cg = kernel.shape()[2],
          k = kernel.shape()[3];
  int64_t groups = attrs.groups;
  check_groups(op, data, kernel, " (HWIO)", c, k, cg, groups);
  auto [sh, sw] = as_array<2>(attrs.strides);
  auto [dh, dw] = as_array<2>(attrs.dilation);
  auto [pt, pl, pb, pr] = as_array<4>(attrs.padding);
  int64_t oh = out_extent(op, "height", h, pt + pb, dh * (r - 1) + 1, sh);
  int64_t ow = out_extent(op, "width", w, pl + pr, dw * (s - 1) + 1, sw);
  Tensor padded = detail::pad_stage(data, {0, pt, pl, 0}, {0, pb, pr, 0},
                                    value_const(data.dtype(), 0), "pad_data", 0.0);
  IterVar ry = reduce_axis(r, "ry"), rx = reduce_axis(s, "rx"), rc = reduce_axis(cg, "rc");
  int64_t kg = k / groups;
  // Depthwise (one input and one output channel per group): output channel
  // k reads input channel k, and there is no channel sum. Written so, the
  // data is read along the output's last axis, which lets its padding inline.
  const bool depthwise = cg == 1 && kg == 1;
  Tensor out = compute(
      {n, oh, ow, k},
      [&](const std::vector<Var>& v) {
        Expr channel = depthwise ? Expr(v[3])
                       : groups == 1
                           ? rc.expr()
                           : mul_index(ir::floordiv(v[3], index_const(kg)), cg) + rc.expr();
        Expr y = mul_index(v[1], sh) + mul_index(ry.expr(), dh);
        Expr x = mul_index(v[2], sw) + mul_index(rx.expr(), dw);
        Expr in_channel = depthwise ? index_const(0) : rc.expr();
        return sum(widen(padded(v[0], y, x, channel)) *
                       widen(kernel(ry.expr(), rx.expr(), in_channel, v[3])),
                   depthwise ? std::vector<IterVar>{ry, rx} : std::vector<IterVar>{ry, rx, rc});
      },
      accumulator_name(name, data.dtype()), op, conv_attrs_json(attrs, "NHWC"));
  return narrow(out, data.dtype(), std::move(name));
}

WinogradMatrices winograd_matrices(int64_t tile) {
  WinogradMatrices w;
  w.tile = tile;
  w.alpha = tile + 2;
  // Interpolation points 0, 1, -1 (and 2, -2 for tiles of 4), and infinity.
  if (tile == 2) {
    w.bt = {1, 0, -1, 0, 0, 1, 1, 0, 0, -1, 1, 0, 0, 1, 0, -1};
    w.g = {1, 0, 0, 0.5, 0.5, 0.5, 0.5, -0.5, 0.5, 0, 0, 1};
    w.at = {1, 1, 1, 0, 0, 1, -1, -1};
  } else if (tile == 4) {
    w.bt = {4, 0,  -5, 0, 1, 0, 0, -4, -4, 1,  1, 0, 0, 4, -4, -1, 1, 0,
            0, -2, -1, 2, 1, 0, 0, 2,  -1, -2, 1, 0, 0, 4, 0,  -5, 0, 1};
    w.g = {1.0 / 4,  0,        0,       -1.0 / 6, -1.0 / 6,  -1.0 / 6, -1.0 / 6, 1.0 / 6, -1.0 / 6,
           1.0 / 24, 1.0 / 12, 1.0 / 6, 1.0 / 24, -1.0 / 12, 1.0 / 6,  0,        0,       1};
    w.at = {1, 1, 1, 1, 1, 0, 0, 1, -1, 2, -2, 0, 0, 1, 1, 4, 4, 0, 0, 1, -1, 8, -8, 1};
  } else {
    fail(ErrorKind::kInvalidArgument, "Winograd output tiles of ", tile,
         " are not supported (2 or 4)");
  }
  return w;
}

namespace {

/// row . (term(0), ..., term(n - 1)) over the row's nonzero entries, a
/// coefficient of +-1 an add or a subtract.
Expr row_times(const double* row, int64_t n, const std::function<Expr(int64_t)>& term,
               ir::DataType t) {
  Expr sum;
  for (int64_t j = 0; j < n; ++j) {
    const double c = row[j];
    if (c == 0) continue;
    Expr x = term(j);
    if (!sum) {
      sum = c == 1 ? x : value_const(t, c) * x;
    } else if (c == 1 || c == -1) {
      sum = c == 1 ? sum + x : sum - x;
    } else {
      sum = sum + value_const(t, c) * x;
    }
  }
  return sum;
}

/// matrix[i, :] . (term(0), ...) for a row index i that the loops give: a
/// select per row, which folds away where the loop over i is unrolled.
Expr matrix_times(const std::vector<double>& matrix, int64_t rows, int64_t cols, const Expr& i,
                  const std::function<Expr(int64_t)>& term, ir::DataType t) {
  Expr e = row_times(&matrix[(rows - 1) * cols], cols, term, t);
  for (int64_t r = rows - 2; r >= 0; --r) {
    e = ir::select(i == index_const(r), row_times(&matrix[r * cols], cols, term, t), e);
  }
  return e;
}

}  // namespace

Tensor winograd_input_transform(const Tensor& data, int64_t tile,
                                const std::array<int64_t, 4>& padding, std::string name) {
  const char* op = "winograd_input_transform";
  check_rank(data, 4, op, "data");
  const WinogradMatrices w = winograd_matrices(tile);
  const int64_t alpha = w.alpha;
  const ir::DataType t = data.dtype();
  auto [pt, pl, pb, pr] = padding;
  int64_t n = data.shape()[0], h = data.shape()[1], wd = data.shape()[2], c = data.shape()[3];
  int64_t oh = out_extent(op, "height", h, pt + pb, 3, 1);
  int64_t ow = out_extent(op, "width", wd, pl + pr, 3, 1);
  int64_t th = (oh + tile - 1) / tile, tw = (ow + tile - 1) / tile;
  // Every tile's window lies inside the padded data: the last tiles read
  // zeros past the convolution's own padding.
  Tensor padded = detail::pad_stage(data, {0, pt, pl, 0},
                                    {0, th * tile + 2 - h - pt, tw * tile + 2 - wd - pl, 0},
                                    value_const(t, 0), "pad_data", 0.0);
  Tensor rows = compute(
      {n, th, tw, alpha, alpha, c},
      [&](const std::vector<Var>& v) {  // n, y, x, eps, b, c
        return matrix_times(
            w.bt, alpha, alpha, v[3],
            [&](int64_t a) {
              return padded(v[0], mul_index(v[1], tile) + index_const(a),
                            mul_index(v[2], tile) + v[4], v[5]);
            },
            t);
      },
      name + "_rows", op);
  return compute(
      {alpha, alpha, n, th, tw, c},
      [&](const std::vector<Var>& v) {  // eps, nu, n, y, x, c
        return matrix_times(
            w.bt, alpha, alpha, v[1],
            [&](int64_t b) { return rows(v[2], v[3], v[4], v[0], index_const(b), v[5]); }, t);
      },
      std::move(name), op, nlohmann::json{{"tile", tile}});
}

Tensor winograd_output_transform(const Tensor& m, int64_t tile, int64_t out_h, int64_t out_w,
                                 std::string name) {
  const char* op = "winograd_output_transform";
  check_rank(m, 6, op, "the products");
  const WinogradMatrices w = winograd_matrices(tile);
  const int64_t alpha = w.alpha;
  const ir::DataType t = m.dtype();
  const std::vector<int64_t>& s = m.shape();
  int64_t n = s[2], th = s[3], tw = s[4], k = s[5];
  if (s[0] != alpha || s[1] != alpha || out_h < 1 || out_w < 1 || th != (out_h + tile - 1) / tile ||
      tw != (out_w + tile - 1) / tile) {
    fail(ErrorKind::kInvalidArgument, op, ": products ", shape_text(s), " do not make a ", out_h,
         "x", out_w, " output with tiles of ", tile, " (expected [", alpha, ", ", alpha, ", N, ",
         (out_h + tile - 1) / tile, ", ", (out_w + tile - 1) / tile, ", K])");
  }
  Tensor rows = compute(
      {n, th, tw, tile, alpha, k},
      [&](const std::vector<Var>& v) {  // n, y, x, i, nu, k
        return matrix_times(
            w.at, tile, alpha, v[3],
            [&](int64_t a) { return m(index_const(a), v[4], v[0], v[1], v[2], v[5]); }, t);
      },
      name + "_rows", op);
  Expr tl = index_const(tile);
  return compute(
      {n, out_h, out_w, k},
      [&](const std::vector<Var>& v) {  // n, h, w, k
        return matrix_times(
            w.at, tile, alpha, ir::floormod(v[2], tl),
            [&](int64_t b) {
              return rows(v[0], ir::floordiv(v[1], tl), ir::floordiv(v[2], tl),
                          ir::floormod(v[1], tl), index_const(b), v[3]);
            },
            t);
      },
      std::move(name), op, nlohmann::json{{"tile", tile}});
}

Tensor depthwise_conv2d_nchw(const Tensor& data, const Tensor& kernel, const Conv2dAttrsNode& attrs,
                             std::string name) {
  const char* op = "depthwise_conv2d_nchw";
  check_rank(data, 4, op, "data");
  check_rank(kernel, 4, op, "kernel");
  check_same_dtype(data, kernel, op);
  check_window(op, attrs.strides, attrs.padding, attrs.dilation);
  int64_t n = data.shape()[0], c = data.shape()[1], h = data.shape()[2], w = data.shape()[3];
  int64_t kc = kernel.shape()[0], mult = kernel.shape()[1], r = kernel.shape()[2],
          s = kernel.shape()[3];
  if (kc != c) {
    fail(ErrorKind::kInvalidArgument, op, ": kernel ", shape_text(kernel.shape()),
         " must be [C, multiplier, R, S] with C = ", c, " (the channels of data ",
         shape_text(data.shape()), ")");
  }
  if (attrs.groups != 1 && attrs.groups != c) {
    fail(ErrorKind::kInvalidArgument, op, ": groups = ", attrs.groups,
         " is implied by the depthwise layout; pass 1 (or the channel count ", c, ")");
  }
  auto [sh, sw] = as_array<2>(attrs.strides);
  auto [dh, dw] = as_array<2>(attrs.dilation);
  auto [pt, pl, pb, pr] = as_array<4>(attrs.padding);
  int64_t oh = out_extent(op, "height", h, pt + pb, dh * (r - 1) + 1, sh);
  int64_t ow = out_extent(op, "width", w, pl + pr, dw * (s - 1) + 1, sw);
  Tensor padded = detail::pad_stage(data, {0, 0, pt, pl}, {0, 0, pb, pr},
                                    value_const(data.dtype(), 0), "pad_data", 0.0);
  IterVar ry = reduce_axis(r, "ry"), rx = reduce_axis(s, "rx");
  nlohmann::json json_attrs = conv_attrs_json(attrs, "NCHW");
  json_attrs["groups"] = c;
  json_attrs["channel_multiplier"] = mult;
  Tensor out = compute(
      {n, c * mult, oh, ow},
      [&](const std::vector<Var>& v) {
        Expr in_channel = mult == 1 ? Expr(v[1]) : ir::floordiv(v[1], index_const(mult));
        Expr m = mult == 1 ? index_const(0) : ir::floormod(v[1], index_const(mult));
        Expr y = mul_index(v[2], sh) + mul_index(ry.expr(), dh);
        Expr x = mul_index(v[3], sw) + mul_index(rx.expr(), dw);
        return sum(widen(padded(v[0], in_channel, y, x)) *
                       widen(kernel(in_channel, m, ry.expr(), rx.expr())),
                   {ry, rx});
      },
      accumulator_name(name, data.dtype()), op, std::move(json_attrs));
  return narrow(out, data.dtype(), std::move(name));
}

Tensor conv2d_transpose_nchw(const Tensor& data, const Tensor& kernel,
                             const Conv2dTransposeAttrsNode& attrs, std::string name) {
  const char* op = "conv2d_transpose_nchw";
  check_rank(data, 4, op, "data");
  check_rank(kernel, 4, op, "kernel");
  check_same_dtype(data, kernel, op);
  check_window(op, attrs.strides, attrs.padding, {1, 1});
  if (attrs.output_padding.size() != 2) {
    fail(ErrorKind::kInvalidArgument, op, ": needs 2 output paddings, got ",
         attrs.output_padding.size());
  }
  int64_t n = data.shape()[0], c = data.shape()[1], h = data.shape()[2], w = data.shape()[3];
  int64_t kc = kernel.shape()[0], k = kernel.shape()[1], r = kernel.shape()[2],
          s = kernel.shape()[3];
  if (kc != c) {
    fail(ErrorKind::kInvalidArgument, op, ": kernel ", shape_text(kernel.shape()),
         " must be [C, K, R, S] with C = ", c, " (the channels of data ", shape_text(data.shape()),
         ")");
  }
  auto [sh, sw] = as_array<2>(attrs.strides);
  auto [pt, pl, pb, pr] = as_array<4>(attrs.padding);
  auto [oph, opw] = as_array<2>(attrs.output_padding);
  if (oph < 0 || opw < 0 || oph >= sh || opw >= sw) {
    fail(ErrorKind::kInvalidArgument, op, ": output padding (", oph, ", ", opw,
         ") must be >= 0 and below the stride (", sh, ", ", sw, ")");
  }
  if (pt > r - 1 || pb > r - 1 || pl > s - 1 || pr > s - 1) {
    fail(ErrorKind::kInvalidArgument, op, ": padding (", pt, ", ", pl, ", ", pb, ", ", pr,
         ") must not exceed the kernel extent minus one (", r - 1, ", ", s - 1, ")");
  }
  // The input spread out by the stride (zeros between rows/columns), then
  // padded by R - 1 - pad so a plain convolution with the flipped kernel
  // gives the transposed one.
  int64_t bt = r - 1 - pt, bl = s - 1 - pl;
  int64_t dil_h = (h - 1) * sh + 1, dil_w = (w - 1) * sw + 1;
  int64_t ph = bt + dil_h + (r - 1 - pb + oph), pw = bl + dil_w + (s - 1 - pr + opw);
  Tensor spread = compute(
      {n, c, ph, pw},
      [&](const std::vector<Var>& v) {
        Expr y = add_index(v[2], -bt), x = add_index(v[3], -bl);
        Expr inside =
            ir::logical_and(ir::logical_and(v[2] >= index_const(bt), y < index_const(dil_h)),
                            ir::logical_and(v[3] >= index_const(bl), x < index_const(dil_w)));
        if (sh > 1) {
          inside = ir::logical_and(inside, ir::floormod(y, index_const(sh)) == index_const(0));
        }
        if (sw > 1) {
          inside = ir::logical_and(inside, ir::floormod(x, index_const(sw)) == index_const(0));
        }
        Expr iy = detail::clamp_index(sh > 1 ? ir::floordiv(y, index_const(sh)) : y, 0, h - 1);
        Expr ix = detail::clamp_index(sw > 1 ? ir::floordiv(x, index_const(sw)) : x, 0, w - 1);
        return ir::select(inside, data(v[0], v[1], iy, ix), value_const(data.dtype(), 0));
      },
      "data_dilate_pad", "pad",
      {{"stride", attrs.strides},
       {"before", {bt, bl}},
       {"after", {r - 1 - pb + oph, s - 1 - pr + opw}}});
  int64_t oh = ph - r + 1, ow = pw - s + 1;
  IterVar rc = reduce_axis(c, "rc"), ry = reduce_axis(r, "ry"), rx = reduce_axis(s, "rx");
  Tensor out =
      compute({n, k, oh, ow},
              [&](const std::vector<Var>& v) {
                Expr flipped_y = index_const(r - 1) - ry.expr();
                Expr flipped_x = index_const(s - 1) - rx.expr();
                return sum(widen(spread(v[0], rc.expr(), v[2] + ry.expr(), v[3] + rx.expr())) *
                               widen(kernel(rc.expr(), v[1], flipped_y, flipped_x)),
                           {rc, ry, rx});
              },
              accumulator_name(name, data.dtype()), op,
              {{"stride", attrs.strides},
               {"padding", attrs.padding},
               {"output_padding", attrs.output_padding}});
  return narrow(out, data.dtype(), std::move(name));
}

// ---- pooling ------------------------------------------------------------------

namespace {

struct PoolGeometry {
  int64_t oh, ow;
  int64_t extra_h, extra_w;  ///< padding beyond the bottom/right that ceil_mode windows need
};

/// `h_axis` is data's height axis; width follows it (NCHW: 2, NHWC: 1).
PoolGeometry pool_geometry(std::string_view op, const Tensor& data, const Pool2dAttrsNode& a,
                           int h_axis) {
  check_rank(data, 4, op, "data");
  check_window(op, a.strides, a.padding, {1, 1});
  if (a.kernel.size() != 2) {
    fail(ErrorKind::kInvalidArgument, op, ": needs a 2-D window, got ", a.kernel.size(), " values");
  }
  auto [r, s] = as_array<2>(a.kernel);
  if (r < 1 || s < 1) {
    fail(ErrorKind::kInvalidArgument, op, ": the window (", r, ", ", s, ") must be at least 1x1");
  }
  auto [pt, pl, pb, pr] = as_array<4>(a.padding);
  // A window lying wholly in the padding would have nothing to pool: each
  // padding must be smaller than the window, as ONNX requires.
  if (pt >= r || pb >= r || pl >= s || pr >= s) {
    fail(ErrorKind::kInvalidArgument, op, ": padding (", pt, ", ", pl, ", ", pb, ", ", pr,
         ") must be smaller than the window (", r, ", ", s, ")");
  }
  int64_t h = data.shape()[h_axis], w = data.shape()[h_axis + 1];
  auto extent = [&](std::string_view dim, int64_t in, int64_t before, int64_t after, int64_t window,
                    int64_t stride) {
    int64_t span = in + before + after - window;
    if (span < 0) {
      fail(ErrorKind::kInvalidArgument, op, ": the window (", window,
           ") is larger than the padded ", dim, " (", in + before + after, ")");
    }
    if (!a.ceil_mode) return span / stride + 1;
    int64_t out = (span + stride - 1) / stride + 1;
    // The last window must start inside the input or its leading padding.
    if ((out - 1) * stride >= in + before) --out;
    return out;
  };
  PoolGeometry g;
  g.oh = extent("height", h, pt, pb, r, a.strides[0]);
  g.ow = extent("width", w, pl, pr, s, a.strides[1]);
  g.extra_h = std::max<int64_t>(0, (g.oh - 1) * a.strides[0] + r - (h + pt + pb));
  g.extra_w = std::max<int64_t>(0, (g.ow - 1) * a.strides[1] + s - (w + pl + pr));
  return g;
}

nlohmann::json pool_attrs_json(const Pool2dAttrsNode& a, int h_axis) {
  return {{"kernel", a.kernel},
          {"stride", a.strides},
          {"padding", a.padding},
          {"ceil_mode", a.ceil_mode},
          {"count_include_pad", a.count_include_pad},
          {"layout", h_axis == 2 ? "NCHW" : "NHWC"}};
}

/// The shape of data with the spatial extents replaced by the output's.
std::vector<int64_t> pool_shape(const Tensor& data, const PoolGeometry& g, int h_axis) {
  std::vector<int64_t> shape = data.shape();
  shape[static_cast<size_t>(h_axis)] = g.oh;
  shape[static_cast<size_t>(h_axis) + 1] = g.ow;
  return shape;
}

/// Per-axis padding of data: `h` and `w` on the spatial axes, 0 elsewhere.
std::vector<int64_t> spatial_pad(int h_axis, int64_t h, int64_t w) {
  std::vector<int64_t> pad(4, 0);
  pad[static_cast<size_t>(h_axis)] = h;
  pad[static_cast<size_t>(h_axis) + 1] = w;
  return pad;
}

/// The padded input's element under output index `v` and window offset (ry, rx).
Expr window_element(const Tensor& padded, const std::vector<Var>& v, const Pool2dAttrsNode& a,
                    const IterVar& ry, const IterVar& rx, int h_axis) {
  std::vector<Expr> index(v.begin(), v.end());
  auto ha = static_cast<size_t>(h_axis);
  index[ha] = mul_index(v[ha], a.strides[0]) + ry.expr();
  index[ha + 1] = mul_index(v[ha + 1], a.strides[1]) + rx.expr();
  return padded(index);
}

Tensor max_pool2d(const char* op, const Tensor& data, const Pool2dAttrsNode& attrs,
                  std::string name, int h_axis) {
  PoolGeometry g = pool_geometry(op, data, attrs, h_axis);
  auto [pt, pl, pb, pr] = as_array<4>(attrs.padding);
  Tensor padded = detail::pad_stage(
      data, spatial_pad(h_axis, pt, pl), spatial_pad(h_axis, pb + g.extra_h, pr + g.extra_w),
      ir::min_value(data.dtype()), "pad_data",
      data.dtype().is_float() ? nlohmann::json("-inf") : nlohmann::json("min"));
  IterVar ry = reduce_axis(attrs.kernel[0], "ry"), rx = reduce_axis(attrs.kernel[1], "rx");
  nlohmann::json json_attrs = pool_attrs_json(attrs, h_axis);
  json_attrs.erase("count_include_pad");
  return compute(
      pool_shape(data, g, h_axis),
      [&](const std::vector<Var>& v) {
        return max(window_element(padded, v, attrs, ry, rx, h_axis), {ry, rx});
      },
      std::move(name), "pool_max", std::move(json_attrs));
}

Tensor avg_pool2d(const char* op, const Tensor& data, const Pool2dAttrsNode& attrs,
                  std::string name, int h_axis) {
  PoolGeometry g = pool_geometry(op, data, attrs, h_axis);
  auto [pt, pl, pb, pr] = as_array<4>(attrs.padding);
  auto [r, s] = as_array<2>(attrs.kernel);
  auto [sh, sw] = as_array<2>(attrs.strides);
  auto ha = static_cast<size_t>(h_axis);
  int64_t h = data.shape()[ha], w = data.shape()[ha + 1];
  Tensor padded = detail::pad_stage(data, spatial_pad(h_axis, pt, pl),
                                    spatial_pad(h_axis, pb + g.extra_h, pr + g.extra_w),
                                    value_const(data.dtype(), 0), "pad_data", 0.0);
  IterVar ry = reduce_axis(r, "ry"), rx = reduce_axis(s, "rx");
  nlohmann::json json_attrs = pool_attrs_json(attrs, h_axis);
  Tensor total = compute(
      pool_shape(data, g, h_axis),
      [&](const std::vector<Var>& v) {
        return sum(widen(window_element(padded, v, attrs, ry, rx, h_axis)), {ry, rx});
      },
      name + "_sum", "pool_sum", json_attrs);
  // The divisor is index arithmetic: the window's start and end, clipped.
  auto count = [&](const Expr& o, int64_t stride, int64_t before, int64_t after, int64_t window,
                   int64_t in) -> Expr {
    Expr start = add_index(mul_index(o, stride), -before);
    if (attrs.count_include_pad) {
      return ir::min(add_index(start, window), index_const(in + after)) - start;
    }
    return ir::min(add_index(start, window), index_const(in)) - ir::max(start, index_const(0));
  };
  return compute(
      total.shape(),
      [&](const std::vector<Var>& v) {
        Expr n = count(v[ha], sh, pt, pb, r, h) * count(v[ha + 1], sw, pl, pr, s, w);
        Expr mean = total(as_exprs(v)) / ir::cast(total.dtype(), n);
        return as_type(mean, data.dtype());
      },
      std::move(name), "pool_avg", std::move(json_attrs));
}

}  // namespace

Tensor max_pool2d_nchw(const Tensor& data, const Pool2dAttrsNode& attrs, std::string name) {
  return max_pool2d("max_pool2d_nchw", data, attrs, std::move(name), 2);
}

Tensor max_pool2d_nhwc(const Tensor& data, const Pool2dAttrsNode& attrs, std::string name) {
  return max_pool2d("max_pool2d_nhwc", data, attrs, std::move(name), 1);
}

Tensor avg_pool2d_nchw(const Tensor& data, const Pool2dAttrsNode& attrs, std::string name) {
  return avg_pool2d("avg_pool2d_nchw", data, attrs, std::move(name), 2);
}

Tensor avg_pool2d_nhwc(const Tensor& data, const Pool2dAttrsNode& attrs, std::string name) {
  return avg_pool2d("avg_pool2d_nhwc", data, attrs, std::move(name), 1);
}

Tensor global_avg_pool2d_nchw(const Tensor& data, std::string name) {
  check_rank(data, 4, "global_avg_pool2d_nchw", "data");
  int64_t h = data.shape()[2], w = data.shape()[3];
  IterVar ry = reduce_axis(h, "ry"), rx = reduce_axis(w, "rx");
  std::vector<int64_t> shape{data.shape()[0], data.shape()[1], 1, 1};
  Tensor total = compute(shape,
                         [&](const std::vector<Var>& v) {
                           return sum(widen(data(v[0], v[1], ry.expr(), rx.expr())), {ry, rx});
                         },
                         name + "_sum", "pool_sum", {{"global", true}, {"layout", "NCHW"}});
  return compute(shape,
                 [&](const std::vector<Var>& v) {
                   Expr mean = total(v[0], v[1], v[2], v[3]) /
                               value_const(total.dtype(), static_cast<double>(h * w));
                   return as_type(mean, data.dtype());
                 },
                 std::move(name), "pool_avg", {{"global", true}, {"layout", "NCHW"}});
}

Tensor global_max_pool2d_nchw(const Tensor& data, std::string name) {
  check_rank(data, 4, "global_max_pool2d_nchw", "data");
  IterVar ry = reduce_axis(data.shape()[2], "ry"), rx = reduce_axis(data.shape()[3], "rx");
  return compute({data.shape()[0], data.shape()[1], 1, 1},
                 [&](const std::vector<Var>& v) {
                   return max(data(v[0], v[1], ry.expr(), rx.expr()), {ry, rx});
                 },
                 std::move(name), "pool_max", {{"global", true}, {"layout", "NCHW"}});
}

Tensor lrn(const Tensor& data, int64_t size, double alpha, double beta, double bias) {
  const char* op = "lrn";
  check_rank(data, 4, op, "data");
  detail::check_float(data, op);
  if (size < 1) fail(ErrorKind::kInvalidArgument, op, ": size must be >= 1, got ", size);
  // The window of channel c: from c - floor((size - 1) / 2) to c + ceil((size - 1) / 2),
  // the channels past either end counting as zeros.
  const int64_t before = (size - 1) / 2, after = size - 1 - before;
  const DataType t = data.dtype();
  Tensor padded = detail::pad_stage(data, {0, before, 0, 0}, {0, after, 0, 0}, value_const(t, 0),
                                    "pad_data", 0.0);
  IterVar r = reduce_axis(size, "rc");
  Tensor squares = compute(data.shape(),
                           [&](const std::vector<Var>& v) {
                             Expr e = widen(padded(v[0], Expr(v[1]) + r.expr(), v[2], v[3]));
                             return sum(e * e, {r});
                           },
                           "lrn_sum", "reduce", {{"size", size}});
  return compute(data.shape(),
                 [&](const std::vector<Var>& v) {
                   const DataType wide = squares.dtype();
                   Expr scale = value_const(wide, bias) +
                                value_const(wide, alpha / static_cast<double>(size)) *
                                    squares(detail::as_exprs(v));
                   Expr x = widen(data(detail::as_exprs(v)));
                   return as_type(x / ir::pow(scale, value_const(wide, beta)), t);
                 },
                 "lrn", "elemwise",
                 {{"size", size},
                  {"alpha", json_number(alpha)},
                  {"beta", json_number(beta)},
                  {"bias", json_number(bias)}});
}

}  // namespace tensortune::te
