// Data movement (pad, reshape, transpose, concat, slice) and reductions over axes.
#include <algorithm>
#include <functional>
#include <limits>
#include <set>

#include "te/op_util.h"
#include "tensortune/support/shape.h"
#include "tensortune/support/strings.h"
#include "tensortune/te/ops.h"

namespace tensortune::te {

using detail::accumulator_name;
using detail::add_index;
using detail::as_exprs;
using detail::as_type;
using detail::check_defined;
using detail::check_same_dtype;
using detail::clamp_index;
using detail::index_const;
using detail::json_number;
using detail::mul_index;
using detail::narrow;
using detail::value_const;
using detail::widen;

Tensor pad(const Tensor& x, const std::vector<int64_t>& before, const std::vector<int64_t>& after,
           double pad_value, std::string name) {
  check_defined(x, "pad", "the operand");
  size_t rank = x.shape().size();
  if (before.size() > rank || after.size() > rank) {
    fail(ErrorKind::kInvalidArgument, "pad: ", before.size(), " / ", after.size(),
         " padding entries for a tensor of ", rank, " dimensions");
  }
  std::vector<int64_t> b(rank, 0), a(rank, 0);
  for (size_t d = 0; d < rank; ++d) {
    if (d < before.size()) b[d] = before[d];
    if (d < after.size()) a[d] = after[d];
    if (b[d] < 0 || a[d] < 0) {
      fail(ErrorKind::kInvalidArgument, "pad: padding of dimension ", d, " is (", b[d], ", ", a[d],
           "); it must be >= 0");
    }
  }
  Tensor out =
      detail::pad_stage(x, b, a, value_const(x.dtype(), pad_value), name, json_number(pad_value));
  if (!out.same_as(x)) return out;
  // Nothing to pad: still a stage of its own, so the caller gets a new tensor.
  return compute(x.shape(), [&](const std::vector<Var>& v) { return x(as_exprs(v)); },
                 std::move(name), "pad",
                 {{"before", b}, {"after", a}, {"value", json_number(pad_value)}});
}

Tensor resize2d_nchw(const Tensor& data, int64_t out_h, int64_t out_w, const std::string& method,
                     const std::string& coordinate_mode, std::string name) {
  check_defined(data, "resize2d_nchw", "the data");
  TT_CHECK(data.ndim() == 4, kInvalidArgument, "resize2d_nchw: the data must be NCHW, got ",
           shape_text(data.shape()));
  TT_CHECK(data.dtype().is_float() || method == "nearest", kInvalidArgument,
           "resize2d_nchw: linear needs float data, got ", data.dtype().str());
  TT_CHECK(out_h >= 1 && out_w >= 1, kInvalidArgument,
           "resize2d_nchw: output extents must be >= 1");
  TT_CHECK(method == "nearest" || method == "linear", kInvalidArgument, "resize2d_nchw: method '",
           method, "' (nearest or linear)");
  TT_CHECK(coordinate_mode == "half_pixel" || coordinate_mode == "asymmetric" ||
               coordinate_mode == "align_corners",
           kInvalidArgument, "resize2d_nchw: coordinate mode '", coordinate_mode, "'");
  const int64_t in_h = data.shape()[2], in_w = data.shape()[3];
  nlohmann::json attrs = {
      {"size", {out_h, out_w}}, {"method", method}, {"coordinate_mode", coordinate_mode}};
  // Nearest, in integer arithmetic: the source index of output o along an
  // axis of `in` -> `out` elements.
  auto nearest = [&](const Expr& o, int64_t in, int64_t out) -> Expr {
    if (coordinate_mode == "asymmetric")
      return clamp_index(floordiv(mul_index(o, in), index_const(out)), 0, in - 1);
    if (coordinate_mode == "align_corners") {
      if (out == 1) return index_const(0);
      // round_prefer_floor(o * (in - 1) / (out - 1)) = ceil(2o(in-1) - (out-1)) / (2(out-1)).
      Expr num = mul_index(o, 2 * (in - 1)) - index_const(out - 1);
      return clamp_index(floordiv(num + index_const(2 * (out - 1) - 1), index_const(2 * (out - 1))),
                         0, in - 1);
    }
    // half_pixel: round_prefer_floor((o + 0.5) * in / out - 0.5)
    //           = ceil(((2o + 1) * in - out) / (2 out) - 1/2) = ceil(((2o+1) in - 2 out) / (2
    //           out)).
    Expr num = mul_index(o, 2 * in) + index_const(in - 2 * out);
    return clamp_index(floordiv(num + index_const(2 * out - 1), index_const(2 * out)), 0, in - 1);
  };
  if (method == "nearest") {
    return compute(
        {data.shape()[0], data.shape()[1], out_h, out_w},
        [&](const std::vector<Var>& v) {
          return data(v[0], v[1], nearest(v[2], in_h, out_h), nearest(v[3], in_w, out_w));
        },
        std::move(name), "injective", std::move(attrs));
  }
  // Linear: the source coordinate as a float, its floor and the weight.
  const ir::DataType f = data.dtype();
  auto source = [&](const Expr& o, int64_t in, int64_t out) -> Expr {
    Expr x = ir::cast(f, o);
    if (coordinate_mode == "asymmetric")
      return x * ir::make_const(f, static_cast<double>(in) / out);
    if (coordinate_mode == "align_corners") {
      return out == 1 ? ir::make_const(f, 0)
                      : x * ir::make_const(f, static_cast<double>(in - 1) / (out - 1));
    }
    Expr s = (x + ir::make_const(f, 0.5)) * ir::make_const(f, static_cast<double>(in) / out) -
             ir::make_const(f, 0.5);
    return ir::max(s, ir::make_const(f, 0));
  };
  return compute(
      {data.shape()[0], data.shape()[1], out_h, out_w},
      [&](const std::vector<Var>& v) {
        Expr ys = source(v[2], in_h, out_h), xs = source(v[3], in_w, out_w);
        Expr y0 = clamp_index(ir::cast(ir::DataType::int32(), ir::floor(ys)), 0, in_h - 1);
        Expr x0 = clamp_index(ir::cast(ir::DataType::int32(), ir::floor(xs)), 0, in_w - 1);
        Expr y1 = clamp_index(y0 + index_const(1), 0, in_h - 1);
        Expr x1 = clamp_index(x0 + index_const(1), 0, in_w - 1);
        Expr wy = ys - ir::floor(ys), wx = xs - ir::floor(xs);
        Expr one = ir::make_const(f, 1);
        Expr top = data(v[0], v[1], y0, x0) * (one - wx) + data(v[0], v[1], y0, x1) * wx;
        Expr bottom = data(v[0], v[1], y1, x0) * (one - wx) + data(v[0], v[1], y1, x1) * wx;
        return top * (one - wy) + bottom * wy;
      },
      std::move(name), "injective", std::move(attrs));
}

Tensor resample2d_nchw(const Tensor& data, const Tensor& rows, const Tensor& row_weights,
                       const Tensor& cols, const Tensor& col_weights, std::string name) {
  check_defined(data, name, "the data");
  TT_CHECK(data.ndim() == 4 && data.dtype().is_float(), kInvalidArgument, name,
           ": the data must be float NCHW, got ", data.dtype().str(), " ",
           shape_text(data.shape()));
  const ir::DataType wide = detail::accumulation_type(data.dtype());
  auto taps = [&](const Tensor& index, const Tensor& weight, const char* what) {
    check_defined(index, name, what);
    check_defined(weight, name, what);
    TT_CHECK(index.dtype().is_integer() && index.ndim() == 2 && weight.dtype().is_float() &&
                 weight.shape() == index.shape(),
             kInvalidArgument, name, ": the ", what,
             " need integer indices and float weights of one 2-D shape, got ", index.dtype().str(),
             " ", shape_text(index.shape()), " and ", weight.dtype().str(), " ",
             shape_text(weight.shape()));
    return index.shape()[1];
  };
  const int64_t row_taps = taps(rows, row_weights, "rows");
  const int64_t col_taps = taps(cols, col_weights, "columns");
  const int64_t in_h = data.shape()[2], in_w = data.shape()[3];
  Tensor out = compute(
      {data.shape()[0], data.shape()[1], rows.shape()[0], cols.shape()[0]},
      [&](const std::vector<Var>& v) {
        Expr total;
        for (int64_t i = 0; i < row_taps; ++i) {
          const Expr k = index_const(i);
          Expr row = clamp_index(ir::cast(ir::DataType::int32(), rows(v[2], k)), 0, in_h - 1);
          Expr wr = as_type(row_weights(v[2], k), wide);
          for (int64_t j = 0; j < col_taps; ++j) {
            const Expr l = index_const(j);
            Expr col = clamp_index(ir::cast(ir::DataType::int32(), cols(v[3], l)), 0, in_w - 1);
            Expr term =
                wr * as_type(col_weights(v[3], l), wide) * widen(data(v[0], v[1], row, col));
            total = total ? total + term : term;
          }
        }
        return total;
      },
      accumulator_name(name, data.dtype()), "injective",
      {{"row_taps", row_taps}, {"col_taps", col_taps}});
  return narrow(out, data.dtype(), std::move(name));
}

Tensor reshape(const Tensor& x, const std::vector<int64_t>& shape, std::string name) {
  check_defined(x, "reshape", "the operand");
  std::vector<int64_t> out = shape;
  int64_t known = 1;
  int inferred = -1;
  for (size_t d = 0; d < out.size(); ++d) {
    if (out[d] == -1 && inferred < 0) {
      inferred = static_cast<int>(d);
    } else if (out[d] < 1) {
      fail(ErrorKind::kInvalidArgument, "reshape: target shape ", shape_text(shape), " has extent ",
           out[d], " (extents are >= 1, and one may be -1)");
    } else {
      known *= out[d];
    }
  }
  if (inferred >= 0) {
    if (x.size() % known != 0) {
      fail(ErrorKind::kInvalidArgument, "reshape: cannot infer the -1 of ", shape_text(shape),
           " for ", x.size(), " elements (shape ", shape_text(x.shape()), ")");
    }
    out[inferred] = x.size() / known;
    known *= out[inferred];
  }
  if (known != x.size()) {
    fail(ErrorKind::kInvalidArgument, "reshape: ", shape_text(x.shape()), " has ", x.size(),
         " elements, the target shape ", shape_text(shape), " has ", known);
  }
  // The row-major position is index arithmetic; it needs 64 bits only for huge tensors.
  bool wide = x.size() > std::numeric_limits<int32_t>::max();
  auto konst = [&](int64_t v) { return wide ? ir::int_imm(v, DataType::int64()) : index_const(v); };
  const std::vector<int64_t>& in = x.shape();
  return compute(out,
                 [&](const std::vector<Var>& v) {
                   Expr flat = konst(0);
                   for (size_t d = 0; d < out.size(); ++d) {
                     Expr vd = wide ? ir::cast(DataType::int64(), v[d]) : Expr(v[d]);
                     flat = d == 0 ? vd : (out[d] == 1 ? flat : flat * konst(out[d])) + vd;
                   }
                   std::vector<Expr> index(in.size());
                   int64_t stride = 1;
                   for (size_t d = in.size(); d-- > 0;) {
                     Expr i = stride == 1 ? flat : ir::floordiv(flat, konst(stride));
                     if (d > 0) i = ir::floormod(i, konst(in[d]));
                     index[d] = in[d] == 1 ? index_const(0) : i;
                     stride *= in[d];
                   }
                   return x(index);
                 },
                 std::move(name), "injective", {{"op", "reshape"}, {"newshape", out}});
}

Tensor transpose(const Tensor& x, const std::vector<int>& perm, std::string name) {
  check_defined(x, "transpose", "the operand");
  int rank = x.ndim();
  std::vector<int> p = perm;
  if (p.empty()) {
    for (int d = rank - 1; d >= 0; --d) p.push_back(d);
  }
  std::vector<bool> seen(rank, false);
  bool valid = static_cast<int>(p.size()) == rank;
  for (int& d : p) {
    if (!valid) break;
    if (d < 0) d += rank;
    valid = d >= 0 && d < rank && !seen[d];
    if (valid) seen[d] = true;
  }
  if (!valid) {
    std::vector<std::string> parts;
    for (int d : perm) parts.push_back(std::to_string(d));
    fail(ErrorKind::kInvalidArgument, "transpose: [", join(parts, ", "),
         "] is not a permutation of the ", rank, " dimensions of ", shape_text(x.shape()));
  }
  std::vector<int64_t> shape(rank);
  for (int d = 0; d < rank; ++d) shape[d] = x.shape()[p[d]];
  return compute(shape,
                 [&](const std::vector<Var>& v) {
                   std::vector<Expr> index(rank);
                   for (int d = 0; d < rank; ++d) index[p[d]] = v[d];
                   return x(index);
                 },
                 std::move(name), "injective", {{"op", "transpose"}, {"perm", p}});
}

Tensor concat(const std::vector<Tensor>& xs, int axis, std::string name) {
  if (xs.empty()) fail(ErrorKind::kInvalidArgument, "concat: no tensors to join");
  for (size_t i = 0; i < xs.size(); ++i) check_defined(xs[i], "concat", "an operand");
  const Tensor& first = xs[0];
  int ax = static_cast<int>(normalize_axis(axis, first.ndim(), "concat"));
  std::vector<int64_t> offsets;
  int64_t total = 0;
  for (const Tensor& t : xs) {
    check_same_dtype(first, t, "concat");
    bool same = t.ndim() == first.ndim();
    for (int d = 0; same && d < t.ndim(); ++d) {
      same = d == ax || t.shape()[d] == first.shape()[d];
    }
    if (!same) {
      fail(ErrorKind::kInvalidArgument, "concat: '", t.name(), "' ", shape_text(t.shape()),
           " does not match '", first.name(), "' ", shape_text(first.shape()), " outside axis ",
           ax);
    }
    offsets.push_back(total);
    total += t.shape()[ax];
  }
  std::vector<int64_t> shape = first.shape();
  shape[ax] = total;
  return compute(shape,
                 [&](const std::vector<Var>& v) {
                   // Read part j at the index clamped into it, so both arms of every
                   // select stay in bounds; the select picks the part that holds it.
                   auto read = [&](size_t j) {
                     std::vector<Expr> index = as_exprs(v);
                     int64_t extent = xs[j].shape()[ax];
                     index[ax] = clamp_index(add_index(v[ax], -offsets[j]), 0, extent - 1,
                                             offsets[j] > 0, j + 1 < xs.size());
                     return xs[j](index);
                   };
                   Expr out = read(xs.size() - 1);
                   for (size_t j = xs.size() - 1; j-- > 0;) {
                     out = ir::select(v[ax] < index_const(offsets[j + 1]), read(j), out);
                   }
                   return out;
                 },
                 std::move(name), "injective", {{"op", "concat"}, {"axis", ax}});
}

namespace {

/// An index read at run time as a position in [0, extent): negative ones
/// count from the end, out-of-range ones are clamped.
Expr checked_position(const Expr& index, int64_t extent) {
  Expr i = ir::cast(DataType::int32(), index);
  i = ir::select(i < index_const(0), i + index_const(extent), i);
  return ir::min(ir::max(i, index_const(0)), index_const(extent - 1));
}

void check_integer(const Tensor& t, std::string_view op, std::string_view what) {
  if (!t.dtype().is_integer()) {
    fail(ErrorKind::kTypeMismatch, op, ": ", what, " are ", t.dtype().str(), ", not integers");
  }
}

}  // namespace

Tensor take(const Tensor& data, const Tensor& indices, int axis, std::string name) {
  check_defined(data, name, "the data");
  check_defined(indices, name, "the indices");
  check_integer(indices, name, "the indices");
  const auto rank = static_cast<int64_t>(data.shape().size());
  const auto a = static_cast<size_t>(normalize_axis(axis, rank, name));
  const size_t index_rank = indices.shape().size();
  std::vector<int64_t> shape(data.shape().begin(), data.shape().begin() + a);
  shape.insert(shape.end(), indices.shape().begin(), indices.shape().end());
  shape.insert(shape.end(), data.shape().begin() + a + 1, data.shape().end());
  const int64_t extent = data.shape()[a];
  return compute(shape,
                 [&](const std::vector<Var>& v) {
                   std::vector<Expr> at(v.begin() + a, v.begin() + a + index_rank);
                   Expr i = ir::cast(DataType::int32(), indices(at));
                   i = ir::select(i < index_const(0), i + index_const(extent), i);
                   i = ir::min(ir::max(i, index_const(0)), index_const(extent - 1));
                   std::vector<Expr> source(v.begin(), v.begin() + a);
                   source.push_back(i);
                   source.insert(source.end(), v.begin() + a + index_rank, v.end());
                   return data(source);
                 },
                 std::move(name), "injective", {{"axis", a}});
}

Tensor gather_elements(const Tensor& data, const Tensor& indices, int axis) {
  check_defined(data, "gather_elements", "the data");
  check_defined(indices, "gather_elements", "the indices");
  check_integer(indices, "gather_elements", "the indices");
  const auto rank = static_cast<int64_t>(data.shape().size());
  if (static_cast<int64_t>(indices.shape().size()) != rank) {
    fail(ErrorKind::kInvalidArgument, "gather_elements: the indices ", shape_text(indices.shape()),
         " and the data ", shape_text(data.shape()), " differ in rank");
  }
  const auto a = static_cast<size_t>(normalize_axis(axis, rank, "gather_elements"));
  for (size_t d = 0; d < data.shape().size(); ++d) {
    if (d != a && indices.shape()[d] > data.shape()[d]) {
      fail(ErrorKind::kInvalidArgument, "gather_elements: the indices ",
           shape_text(indices.shape()), " are larger than the data ", shape_text(data.shape()),
           " in dimension ", d);
    }
  }
  const int64_t extent = data.shape()[a];
  return compute(indices.shape(),
                 [&](const std::vector<Var>& v) {
                   std::vector<Expr> source = as_exprs(v);
                   source[a] = checked_position(indices(as_exprs(v)), extent);
                   return data(source);
                 },
                 "gather_elements", "injective", {{"axis", a}});
}

Tensor tile(const Tensor& x, const std::vector<int64_t>& repeats) {
  check_defined(x, "tile", "the operand");
  if (repeats.size() != x.shape().size()) {
    fail(ErrorKind::kInvalidArgument, "tile: ", repeats.size(), " repeats for a tensor of rank ",
         x.shape().size());
  }
  std::vector<int64_t> shape = x.shape();
  for (size_t d = 0; d < shape.size(); ++d) {
    if (repeats[d] < 1) fail(ErrorKind::kInvalidArgument, "tile: repeats must be >= 1");
    shape[d] *= repeats[d];
  }
  return compute(shape,
                 [&](const std::vector<Var>& v) {
                   std::vector<Expr> source;
                   for (size_t d = 0; d < v.size(); ++d) {
                     source.push_back(repeats[d] == 1
                                          ? Expr(v[d])
                                          : ir::floormod(v[d], index_const(x.shape()[d])));
                   }
                   return x(source);
                 },
                 "tile", "injective", {{"repeats", repeats}});
}

Tensor cumsum(const Tensor& x, int axis, bool exclusive, bool reverse) {
  check_defined(x, "cumsum", "the operand");
  const auto a =
      static_cast<size_t>(normalize_axis(axis, static_cast<int64_t>(x.shape().size()), "cumsum"));
  IterVar r = reduce_axis(x.shape()[a], "r");
  Tensor total =
      compute(x.shape(),
              [&](const std::vector<Var>& v) {
                std::vector<Expr> source = as_exprs(v);
                source[a] = r.expr();
                Expr i = v[a], j = r.expr();
                Expr taken = reverse ? (exclusive ? j > i : j >= i) : (exclusive ? j < i : j <= i);
                return sum(widen(x(source)), {r}, taken);
              },
              accumulator_name("cumsum", x.dtype()), "reduce",
              {{"axis", a}, {"exclusive", exclusive}, {"reverse", reverse}});
  return narrow(total, x.dtype(), "cumsum");
}

Tensor one_hot(const Tensor& indices, int64_t depth, double on_value, double off_value,
               DataType dtype, int axis) {
  check_defined(indices, "one_hot", "the indices");
  check_integer(indices, "one_hot", "the indices");
  if (depth < 1) fail(ErrorKind::kInvalidArgument, "one_hot: depth must be >= 1, got ", depth);
  const auto rank = static_cast<int64_t>(indices.shape().size()) + 1;
  const auto a = static_cast<size_t>(normalize_axis(axis, rank, "one_hot"));
  std::vector<int64_t> shape = indices.shape();
  shape.insert(shape.begin() + static_cast<std::ptrdiff_t>(a), depth);
  return compute(shape,
                 [&](const std::vector<Var>& v) {
                   std::vector<Expr> at = as_exprs(v);
                   at.erase(at.begin() + static_cast<std::ptrdiff_t>(a));
                   Expr i = ir::cast(DataType::int32(), indices(at));
                   i = ir::select(i < index_const(0), i + index_const(depth), i);
                   return ir::select(i == Expr(v[a]), value_const(dtype, on_value),
                                     value_const(dtype, off_value));
                 },
                 "one_hot", "injective", {{"depth", depth}, {"axis", a}});
}

Tensor arg_reduce(const Tensor& x, int axis, bool keepdims, bool largest, bool select_last,
                  std::string name) {
  check_defined(x, name, "the operand");
  const auto a =
      static_cast<size_t>(normalize_axis(axis, static_cast<int64_t>(x.shape().size()), name));
  const int64_t extent = x.shape()[a];
  std::vector<int64_t> kept = x.shape();
  kept[a] = 1;
  IterVar r = reduce_axis(extent, "r");
  auto along = [&](const std::vector<Var>& v) {
    std::vector<Expr> at = as_exprs(v);
    at[a] = r.expr();
    return at;
  };
  Tensor extreme = compute(
      kept,
      [&](const std::vector<Var>& v) {
        return largest ? max(x(along(v)), {r}) : min(x(along(v)), {r});
      },
      name + "_value", "reduce");
  IterVar q = reduce_axis(extent, "q");
  std::vector<int64_t> shape = keepdims ? kept : x.shape();
  if (!keepdims) shape.erase(shape.begin() + static_cast<std::ptrdiff_t>(a));
  return compute(
      shape.empty() ? std::vector<int64_t>{1} : shape,
      [&](const std::vector<Var>& v) {
        std::vector<Expr> out(v.begin(), v.end());
        if (!keepdims) {
          out.insert(out.begin() + static_cast<std::ptrdiff_t>(a), index_const(0));
          if (shape.empty()) out.erase(out.begin());
        }
        std::vector<Expr> at = out;
        at[a] = q.expr();
        out[a] = index_const(0);
        Expr position = ir::cast(DataType::int64(), q.expr());
        Expr here = x(at) == extreme(out);
        // The first position holding the extreme, or the last.
        return select_last
                   ? max(ir::select(here, position, ir::make_const(DataType::int64(), -1)), {q})
                   : min(ir::select(here, position, ir::make_const(DataType::int64(), extent)),
                         {q});
      },
      std::move(name), "reduce", {{"axis", a}, {"largest", largest}, {"select_last", select_last}});
}

namespace {

/// data where `match(v, j)` holds for some j < count, the update
/// `update(v, j)` there, reduced by `reduction`. Two stages: the reduction
/// over the matching j (for "none": the last such j), then the merge with data.
Tensor scatter(const Tensor& data, int64_t count, const std::string& reduction,
               const std::function<Expr(const std::vector<Var>&, const Expr&)>& match,
               const std::function<Expr(const std::vector<Var>&, const Expr&)>& update,
               std::string name) {
  static const std::set<std::string> reductions = {"none", "add", "mul", "max", "min"};
  TT_CHECK(reductions.count(reduction), kInvalidArgument, name, ": reduction '", reduction,
           "' (none, add, mul, max or min)");
  IterVar j = reduce_axis(count, "j");
  if (reduction == "none") {
    Tensor last = compute(
        data.shape(),
        [&](const std::vector<Var>& v) { return max(j.expr(), {j}, match(v, j.expr())); },
        name + "_last", "reduce");
    return compute(data.shape(),
                   [&](const std::vector<Var>& v) {
                     Expr at = last(as_exprs(v));
                     return ir::select(at >= index_const(0), update(v, ir::max(at, index_const(0))),
                                       data(as_exprs(v)));
                   },
                   std::move(name), "injective", {{"reduction", reduction}});
  }
  Tensor reduced = compute(
      data.shape(),
      [&](const std::vector<Var>& v) {
        Expr u = update(v, j.expr()), hit = match(v, j.expr());
        if (reduction == "add") return sum(u, {j}, hit);
        if (reduction == "mul") return prod(u, {j}, hit);
        return reduction == "max" ? max(u, {j}, hit) : min(u, {j}, hit);
      },
      name + "_" + reduction, "reduce");
  return compute(data.shape(),
                 [&](const std::vector<Var>& v) {
                   Expr d = data(as_exprs(v)), r = reduced(as_exprs(v));
                   if (reduction == "add") return d + r;
                   if (reduction == "mul") return d * r;
                   return reduction == "max" ? ir::max(d, r) : ir::min(d, r);
                 },
                 std::move(name), "injective", {{"reduction", reduction}});
}

/// An index read from `indices` as int32 in [0, extent): negatives count from the end.
Expr wrapped_index(const Tensor& indices, const std::vector<Expr>& at, int64_t extent) {
  Expr i = ir::cast(DataType::int32(), indices(at));
  return ir::select(i < index_const(0), i + index_const(extent), i);
}

void check_scatter_operands(const Tensor& data, const Tensor& indices, const Tensor& updates,
                            const std::string& name) {
  check_defined(data, name, "the data");
  check_defined(indices, name, "the indices");
  check_defined(updates, name, "the updates");
  check_integer(indices, name, "the indices");
  check_same_dtype(data, updates, name);
}

}  // namespace

Tensor scatter_elements(const Tensor& data, const Tensor& indices, const Tensor& updates, int axis,
                        const std::string& reduction, std::string name) {
  check_scatter_operands(data, indices, updates, name);
  const auto rank = static_cast<int64_t>(data.shape().size());
  const auto a = static_cast<size_t>(normalize_axis(axis, rank, name));
  TT_CHECK(indices.shape() == updates.shape() && indices.ndim() == data.ndim(), kInvalidArgument,
           name, ": indices ", shape_text(indices.shape()), " and updates ",
           shape_text(updates.shape()), " must have one shape, of the rank of data ",
           shape_text(data.shape()));
  for (size_t d = 0; d < data.shape().size(); ++d) {
    TT_CHECK(d == a || indices.shape()[d] <= data.shape()[d], kInvalidArgument, name, ": indices ",
             shape_text(indices.shape()), " are larger than data ", shape_text(data.shape()),
             " in dimension ", d);
  }
  // Update position q is the output position with q[axis] = j; where the
  // indices are smaller than data, positions past them have no update.
  auto position = [&](const std::vector<Var>& v, const Expr& j) {
    std::vector<Expr> q = as_exprs(v);
    for (size_t d = 0; d < q.size(); ++d) {
      q[d] = d == a ? j : clamp_index(q[d], 0, indices.shape()[d] - 1);
    }
    return q;
  };
  auto match = [&](const std::vector<Var>& v, const Expr& j) {
    Expr hit = wrapped_index(indices, position(v, j), data.shape()[a]) == v[a];
    for (size_t d = 0; d < v.size(); ++d) {
      if (d != a && indices.shape()[d] < data.shape()[d]) {
        hit = ir::logical_and(hit, v[d] < index_const(indices.shape()[d]));
      }
    }
    return hit;
  };
  auto update = [&](const std::vector<Var>& v, const Expr& j) { return updates(position(v, j)); };
  return scatter(data, indices.shape()[a], reduction, match, update, std::move(name));
}

Tensor scatter_nd(const Tensor& data, const Tensor& indices, const Tensor& updates,
                  const std::string& reduction, std::string name) {
  check_scatter_operands(data, indices, updates, name);
  TT_CHECK(indices.ndim() == 2 && indices.shape()[1] <= static_cast<int64_t>(data.ndim()),
           kInvalidArgument, name, ": indices must be [Q, m] with m <= the rank of data ",
           shape_text(data.shape()), ", got ", shape_text(indices.shape()));
  const int64_t count = indices.shape()[0], depth = indices.shape()[1];
  TT_CHECK(depth >= 1, kInvalidArgument, name, ": the index tuples are empty");
  std::vector<int64_t> wanted = {count};
  wanted.insert(wanted.end(), data.shape().begin() + depth, data.shape().end());
  TT_CHECK(updates.shape() == wanted, kInvalidArgument, name, ": updates must be ",
           shape_text(wanted), ", got ", shape_text(updates.shape()));
  auto match = [&](const std::vector<Var>& v, const Expr& q) {
    Expr hit;
    for (int64_t k = 0; k < depth; ++k) {
      Expr same = wrapped_index(indices, {q, index_const(k)}, data.shape()[k]) == v[k];
      hit = hit ? ir::logical_and(hit, same) : same;
    }
    return hit;
  };
  auto update = [&](const std::vector<Var>& v, const Expr& q) {
    std::vector<Expr> at = {q};
    at.insert(at.end(), v.begin() + depth, v.end());
    return updates(at);
  };
  return scatter(data, count, reduction, match, update, std::move(name));
}

Tensor topk_indices(const Tensor& x, int64_t k, int axis, bool largest, std::string name) {
  check_defined(x, name, "the operand");
  const auto a =
      static_cast<size_t>(normalize_axis(axis, static_cast<int64_t>(x.shape().size()), name));
  const int64_t extent = x.shape()[a];
  TT_CHECK(k >= 1 && k <= extent, kInvalidArgument, name, ": k = ", k, " must lie in [1, ", extent,
           "], the extent of axis ", a);
  IterVar l = reduce_axis(extent, "l");
  Tensor rank = compute(
      x.shape(),
      [&](const std::vector<Var>& v) {
        std::vector<Expr> at = as_exprs(v);
        at[a] = l.expr();
        Expr other = x(at), self = x(as_exprs(v));
        Expr before = largest ? other > self : other < self;
        before = ir::logical_or(before, ir::logical_and(other == self, l.expr() < v[a]));
        return sum(ir::select(before, index_const(1), index_const(0)), {l});
      },
      name + "_rank", "reduce");
  IterVar i = reduce_axis(extent, "i");
  std::vector<int64_t> shape = x.shape();
  shape[a] = k;
  return compute(shape,
                 [&](const std::vector<Var>& v) {
                   std::vector<Expr> at = as_exprs(v);
                   at[a] = i.expr();
                   Expr position = ir::cast(DataType::int64(), i.expr());
                   return sum(
                       ir::select(rank(at) == v[a], position, ir::make_const(DataType::int64(), 0)),
                       {i});
                 },
                 std::move(name), "reduce", {{"axis", a}, {"k", k}, {"largest", largest}});
}

Tensor slice(const Tensor& x, const std::vector<int64_t>& begin, const std::vector<int64_t>& end,
             const std::vector<int64_t>& strides, std::string name) {
  check_defined(x, "slice", "the operand");
  size_t rank = x.shape().size();
  if (begin.size() > rank || end.size() > rank || strides.size() > rank) {
    fail(ErrorKind::kInvalidArgument, "slice: more begin/end/stride entries than the ", rank,
         " dimensions of ", shape_text(x.shape()));
  }
  std::vector<int64_t> starts(rank), steps(rank), shape(rank);
  for (size_t d = 0; d < rank; ++d) {
    int64_t n = x.shape()[d];
    int64_t s = d < strides.size() ? strides[d] : 1;
    if (s == 0) fail(ErrorKind::kInvalidArgument, "slice: stride of dimension ", d, " is 0");
    // numpy: negative positions count from the end, then clamp into the
    // range a walk in this direction can take.
    auto normalize = [&](int64_t pos) {
      if (pos < 0) pos = pos < -n ? -1 : pos + n;
      return s > 0 ? std::clamp<int64_t>(pos, 0, n) : std::clamp<int64_t>(pos, -1, n - 1);
    };
    int64_t b = d < begin.size() ? normalize(begin[d]) : (s > 0 ? 0 : n - 1);
    int64_t e = d < end.size() ? normalize(end[d]) : (s > 0 ? n : -1);
    int64_t len = s > 0 ? (e - b + s - 1) / s : (b - e + (-s) - 1) / (-s);
    if (len <= 0) {
      fail(ErrorKind::kInvalidArgument, "slice: dimension ", d, " of ", shape_text(x.shape()),
           " is empty after slicing (begin ", b, ", end ", e, ", stride ", s, ")");
    }
    starts[d] = b;
    steps[d] = s;
    shape[d] = len;
  }
  return compute(shape,
                 [&](const std::vector<Var>& v) {
                   std::vector<Expr> index;
                   for (size_t d = 0; d < rank; ++d)
                     index.push_back(add_index(mul_index(v[d], steps[d]), starts[d]));
                   return x(index);
                 },
                 std::move(name), "injective",
                 {{"op", "slice"}, {"begin", starts}, {"strides", steps}});
}

// ---- reductions ---------------------------------------------------------------

namespace {

struct ReducePlan {
  std::vector<bool> reduced;  ///< per input dimension
  std::vector<int64_t> out_shape;
  std::vector<int> axes;  ///< sorted, non-negative
};

ReducePlan plan_reduce(const Tensor& x, const std::vector<int>& axes, bool keepdims,
                       std::string_view op) {
  check_defined(x, op, "the operand");
  int rank = x.ndim();
  ReducePlan plan;
  plan.reduced.assign(rank, axes.empty());
  for (int a : axes) {
    int d = static_cast<int>(normalize_axis(a, rank, op));
    if (plan.reduced[d]) fail(ErrorKind::kInvalidArgument, op, ": axis ", a, " is listed twice");
    plan.reduced[d] = true;
  }
  for (int d = 0; d < rank; ++d) {
    if (plan.reduced[d]) {
      plan.axes.push_back(d);
      if (keepdims) plan.out_shape.push_back(1);
    } else {
      plan.out_shape.push_back(x.shape()[d]);
    }
  }
  return plan;
}

Tensor reduce_stage(const Tensor& x, const ReducePlan& plan, bool keepdims, ir::ReduceOp op,
                    std::string name, std::string_view op_name) {
  std::vector<IterVar> axis;
  for (int d : plan.axes) axis.push_back(reduce_axis(x.shape()[d], "k" + std::to_string(d)));
  return compute(plan.out_shape,
                 [&](const std::vector<Var>& v) {
                   std::vector<Expr> index;
                   size_t next_out = 0, next_red = 0;
                   for (size_t d = 0; d < plan.reduced.size(); ++d) {
                     if (plan.reduced[d]) {
                       index.push_back(axis[next_red++].expr());
                       if (keepdims) ++next_out;
                     } else {
                       index.push_back(v[next_out++]);
                     }
                   }
                   Expr value = x(index);
                   return ir::reduce(op, op == ir::ReduceOp::kSum ? widen(value) : value, axis);
                 },
                 std::move(name), "reduce",
                 {{"op", op_name}, {"axes", plan.axes}, {"keepdims", keepdims}});
}

}  // namespace

Tensor reduce_sum(const Tensor& x, const std::vector<int>& axes, bool keepdims, std::string name) {
  ReducePlan plan = plan_reduce(x, axes, keepdims, "reduce_sum");
  Tensor total =
      reduce_stage(x, plan, keepdims, ir::ReduceOp::kSum, accumulator_name(name, x.dtype()), "sum");
  return narrow(total, x.dtype(), std::move(name));
}

Tensor reduce_mean(const Tensor& x, const std::vector<int>& axes, bool keepdims, std::string name) {
  ReducePlan plan = plan_reduce(x, axes, keepdims, "reduce_mean");
  int64_t count = 1;
  for (int d : plan.axes) count *= x.shape()[d];
  Tensor total = reduce_stage(x, plan, keepdims, ir::ReduceOp::kSum, name + "_sum", "sum");
  return compute(total.shape(),
                 [&](const std::vector<Var>& v) {
                   Expr mean =
                       total(as_exprs(v)) / value_const(total.dtype(), static_cast<double>(count));
                   return as_type(mean, x.dtype());
                 },
                 std::move(name), "elemwise", {{"op", "mean"}, {"count", count}});
}

Tensor reduce_max(const Tensor& x, const std::vector<int>& axes, bool keepdims, std::string name) {
  ReducePlan plan = plan_reduce(x, axes, keepdims, "reduce_max");
  return reduce_stage(x, plan, keepdims, ir::ReduceOp::kMax, std::move(name), "max");
}

Tensor reduce_prod(const Tensor& x, const std::vector<int>& axes, bool keepdims, std::string name) {
  ReducePlan plan = plan_reduce(x, axes, keepdims, "reduce_prod");
  return reduce_stage(x, plan, keepdims, ir::ReduceOp::kProd, std::move(name), "prod");
}

Tensor reduce_min(const Tensor& x, const std::vector<int>& axes, bool keepdims, std::string name) {
  ReducePlan plan = plan_reduce(x, axes, keepdims, "reduce_min");
  return reduce_stage(x, plan, keepdims, ir::ReduceOp::kMin, std::move(name), "min");
}

}  // namespace tensortune::te
