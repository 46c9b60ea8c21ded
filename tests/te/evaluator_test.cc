// NDArray and the reference evaluator's semantics.
#include "tensortune/te/evaluator.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "common/te_util.h"
#include "common/test_util.h"
#include "tensortune/te/ops.h"

namespace tensortune::te {
namespace {

using testing::arrays_close;
using testing::make_array;

// ---- NDArray ------------------------------------------------------------------

TEST(NDArray, StorageIsTheElementTypesBytes) {
  NDArray a(DataType::float32(), {2, 3});
  EXPECT_EQ(a.size(), 6);
  EXPECT_EQ(a.nbytes(), 24u);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(a.data()) % 64, 0u);
  for (int64_t i = 0; i < a.size(); ++i) EXPECT_EQ(a.get(i), 0.0);
  a.set(a.flat_index({1, 2}), 2.5);
  EXPECT_EQ(static_cast<const float*>(a.data())[5], 2.5f);
  EXPECT_EQ(a.at({1, 2}), 2.5);
  EXPECT_EQ(a.unflatten(5), (std::vector<int64_t>{1, 2}));
  EXPECT_EQ(a.describe(), "float32[2, 3]");

  NDArray h(DataType::float16(), {3});
  h.set(0, 1.0);
  h.set(1, 65504);
  h.set(2, 0.1);
  const auto* bits = static_cast<const uint16_t*>(h.data());
  EXPECT_EQ(bits[0], 0x3c00);
  EXPECT_EQ(bits[1], 0x7bff);
  EXPECT_EQ(bits[2], 0x2e66);  // 0.1 rounds to 0.0999755859375
  EXPECT_EQ(h.get(2), 0.0999755859375);

  NDArray bf(DataType::bfloat16(), {1});
  bf.set(0, 1.0);
  EXPECT_EQ(static_cast<const uint16_t*>(bf.data())[0], 0x3f80);

  NDArray i8(DataType::int_(8), {2});
  i8.set(0, 200);  // wraps
  i8.set_int(1, -3);
  EXPECT_EQ(i8.get(0), -56);
  EXPECT_EQ(static_cast<const int8_t*>(i8.data())[1], -3);
  NDArray flags(DataType::boolean(), {1});
  flags.set(0, 5);
  EXPECT_EQ(static_cast<const uint8_t*>(flags.data())[0], 1);

  EXPECT_TT_ERROR(a.at({2, 0}), kInvalidArgument, "out of bounds for NDArray float32[2, 3]");
  EXPECT_TT_ERROR(a.flat_index({0}), kInvalidArgument, "has 1 dimensions");
}

TEST(NDArray, ArraysOfAHugePageOrMoreStartOnAHugePageAndAreZeroed) {
  // Huge pages (madvise'd) need a 2 MiB-aligned range; smaller arrays keep
  // the cache-line alignment.
  NDArray big(DataType::float32(), {(3 << 20) / 4 + 5});
  EXPECT_EQ(reinterpret_cast<uintptr_t>(big.data()) % (2u << 20), 0u);
  const auto* bytes = static_cast<const unsigned char*>(big.data());
  for (size_t i = 0; i < big.nbytes(); i += 4093) ASSERT_EQ(bytes[i], 0) << "byte " << i;
  EXPECT_EQ(bytes[big.nbytes() - 1], 0);
  NDArray copy = big;
  EXPECT_EQ(reinterpret_cast<uintptr_t>(copy.data()) % (2u << 20), 0u);
  NDArray small(DataType::float32(), {(1 << 20) / 4});
  EXPECT_EQ(reinterpret_cast<uintptr_t>(small.data()) % 64, 0u);
}

TEST(NDArray, CopiesAreDeep) {
  NDArray a = NDArray::random(DataType::float64(), {4}, 1);
  NDArray b = a;
  b.set(0, 42);
  EXPECT_NE(a.get(0), 42);
  EXPECT_NE(a.data(), b.data());
  NDArray c;
  EXPECT_FALSE(c.defined());
  c = a;
  EXPECT_EQ(max_abs_diff(a, c), 0.0);
  NDArray d = std::move(b);
  EXPECT_EQ(d.get(0), 42);
  EXPECT_FALSE(b.defined());  // NOLINT(bugprone-use-after-move): what a move leaves behind
  EXPECT_EQ(b.size(), 0);     // NOLINT(bugprone-use-after-move)
}

TEST(NDArray, HalfConversions) {
  EXPECT_EQ(float_to_half_bits(0x1.0p-24), 0x0001);  // smallest subnormal
  EXPECT_EQ(float_to_half_bits(0x1.0p-25), 0x0000);  // a tie rounds to even (zero)
  EXPECT_EQ(float_to_half_bits(65519), 0x7bff);
  EXPECT_EQ(float_to_half_bits(65520), 0x7c00);  // overflows to infinity
  EXPECT_EQ(float_to_half_bits(-2), 0xc000);
  EXPECT_EQ(float_to_half_bits(1 + 0x1.0p-11), 0x3c00);  // tie to even
  EXPECT_EQ(float_to_half_bits(1 + 3 * 0x1.0p-11), 0x3c02);
  EXPECT_TRUE(std::isnan(half_bits_to_double(0x7e00)));
  for (uint32_t bits = 0; bits < 0x7c00; bits += 7) {
    EXPECT_EQ(float_to_half_bits(half_bits_to_double(static_cast<uint16_t>(bits))), bits);
  }
  EXPECT_EQ(bfloat16_bits_to_double(float_to_bfloat16_bits(3.14159)), 3.140625);
  // From double, one rounding: above the tie (through float, the tie: 1);
  // the tie itself to even; below the overflow threshold (through float,
  // the threshold: infinity); above half the least subnormal.
  EXPECT_EQ(float_to_bfloat16_bits(1 + 0x1.0p-8 + 0x1.0p-40), 0x3f81);
  EXPECT_EQ(float_to_bfloat16_bits(1 + 0x1.0p-8), 0x3f80);
  EXPECT_EQ(float_to_bfloat16_bits(0x1.0p128 - 0x1.0p119 - 0x1.0p90), 0x7f7f);
  EXPECT_EQ(float_to_bfloat16_bits(0x1.0p128 - 0x1.0p119), 0x7f80);
  EXPECT_EQ(float_to_bfloat16_bits(-0x1.0p200), 0xff80);
  EXPECT_EQ(float_to_bfloat16_bits(0x1.0p-134 + 0x1.0p-160), 0x0001);
  EXPECT_EQ(float_to_bfloat16_bits(0x1.0p-134), 0x0000);
  EXPECT_EQ(cast_value(DataType::float16(), 3.14159), 3.140625);
  // A converted copy: exact to a wider type, rounded to a narrower one.
  NDArray h(DataType::float16(), {2});
  h.set(0, 3.14159);
  h.set(1, -65504);
  NDArray f = h.converted(DataType::float32());
  EXPECT_EQ(f.dtype(), DataType::float32());
  EXPECT_EQ(f.shape(), h.shape());
  EXPECT_EQ(f.get(0), 3.140625);
  EXPECT_EQ(f.get(1), -65504);
  EXPECT_EQ(f.converted(DataType::bfloat16()).get(0), 3.140625);
  EXPECT_EQ(f.converted(DataType::bfloat16()).get(1), -65536);
  EXPECT_EQ(cast_value(DataType::uint(8), 257), 1);
  EXPECT_EQ(cast_value(DataType::int32(), -2.7), -2);
}

TEST(NDArray, RandomFillIsReproducibleAndInRange) {
  NDArray a = NDArray::random(DataType::float32(), {100}, 42, -2, 3);
  NDArray b = NDArray::random(DataType::float32(), {100}, 42, -2, 3);
  NDArray c = NDArray::random(DataType::float32(), {100}, 43, -2, 3);
  EXPECT_EQ(max_abs_diff(a, b), 0.0);
  EXPECT_GT(max_abs_diff(a, c), 0.0);
  for (int64_t i = 0; i < a.size(); ++i) {
    EXPECT_GE(a.get(i), -2);
    EXPECT_LT(a.get(i), 3);
  }
  NDArray ints = NDArray::random(DataType::int_(8), {200}, 1, -3, 3);
  bool saw_low = false, saw_high = false;
  for (int64_t i = 0; i < ints.size(); ++i) {
    EXPECT_GE(ints.get(i), -3);
    EXPECT_LE(ints.get(i), 3);
    saw_low = saw_low || ints.get(i) == -3;
    saw_high = saw_high || ints.get(i) == 3;
  }
  EXPECT_TRUE(saw_low && saw_high);
}

TEST(NDArray, CompareNamesTheFirstMismatch) {
  NDArray a(DataType::float32(), {2, 2});
  NDArray b = a;
  EXPECT_TRUE(allclose(a, b));
  b.set(3, 1e-6);
  EXPECT_TRUE(allclose(a, b));  // within float32's atol
  b.set(2, 0.5);
  auto diff = compare_arrays(a, b, default_tolerance(DataType::float32()));
  ASSERT_TRUE(diff);
  EXPECT_NE(diff->find("1 of 4 elements"), std::string::npos) << *diff;
  EXPECT_NE(diff->find("first at [1, 0]: got 0, expected 0.5"), std::string::npos) << *diff;
  EXPECT_EQ(max_abs_diff(a, b), 0.5);
  NDArray nan1(DataType::float32(), {1}), nan2(DataType::float32(), {1});
  nan1.set(0, NAN);
  nan2.set(0, NAN);
  EXPECT_TRUE(allclose(nan1, nan2));
  EXPECT_FALSE(allclose(nan1, NDArray(DataType::float32(), {1})));
  EXPECT_TRUE(compare_arrays(a, NDArray(DataType::float32(), {4}), {}).has_value());
  EXPECT_TT_ERROR(max_abs_diff(a, NDArray(DataType::float64(), {2, 2})), kInvalidArgument,
                  "float32[2, 2] and float64[2, 2]");
  // Integers compare exactly.
  NDArray i1(DataType::int32(), {1}), i2(DataType::int32(), {1});
  i2.set(0, 1);
  EXPECT_FALSE(allclose(i1, i2));
}

// An infinity matches only the same infinity, and NaN only NaN: rtol * |inf|
// must not accept everything.
TEST(NDArray, InfinitiesAndNaNMatchOnlyThemselves) {
  auto one = [](double v) {
    NDArray a(DataType::float32(), {1});
    a.set(0, v);
    return a;
  };
  const Tolerance loose{1.0, 1.0};
  EXPECT_TRUE(allclose(one(INFINITY), one(INFINITY), loose));
  EXPECT_TRUE(allclose(one(-INFINITY), one(-INFINITY), loose));
  EXPECT_FALSE(allclose(one(1e30), one(INFINITY), loose));       // finite against +inf
  EXPECT_FALSE(allclose(one(-1e30), one(-INFINITY), loose));     // finite against -inf
  EXPECT_FALSE(allclose(one(INFINITY), one(1e30), loose));       // +inf against finite
  EXPECT_FALSE(allclose(one(-INFINITY), one(INFINITY), loose));  // opposite infinities
  EXPECT_FALSE(allclose(one(INFINITY), one(-INFINITY), loose));
  EXPECT_FALSE(allclose(one(NAN), one(INFINITY), loose));
  EXPECT_FALSE(allclose(one(INFINITY), one(NAN), loose));
  EXPECT_FALSE(allclose(one(0.0), one(NAN), loose));
  EXPECT_TRUE(allclose(one(NAN), one(NAN), loose));
  auto diff = compare_arrays(one(1.0), one(INFINITY), loose);
  ASSERT_TRUE(diff);
  EXPECT_NE(diff->find("expected inf"), std::string::npos) << *diff;
}

// ---- evaluator semantics ------------------------------------------------------

// One-element helper: evaluates f() as a 1-element compute over the given inputs.
NDArray eval1(const std::function<Expr()>& f) {
  Tensor t = compute(
      {1}, [&](const std::vector<Var>&) { return f(); }, "t");
  return evaluate({t}, {}, {})[0];
}

TEST(Evaluator, IntegerSemantics) {
  DataType i8 = DataType::int_(8);
  EXPECT_EQ(eval1([&] { return ir::make_const(i8, 100) + ir::make_const(i8, 100); }).get(0), -56);
  EXPECT_EQ(eval1([] { return Expr(-7) / Expr(2); }).get(0), -3);
  EXPECT_EQ(eval1([] { return Expr(-7) % Expr(2); }).get(0), -1);
  EXPECT_EQ(eval1([] { return ir::floordiv(Expr(-7), Expr(2)); }).get(0), -4);
  EXPECT_EQ(eval1([] { return ir::floormod(Expr(-7), Expr(2)); }).get(0), 1);
  EXPECT_EQ(eval1([] { return ir::floormod(Expr(7), Expr(-2)); }).get(0), -1);
  DataType u8 = DataType::uint(8);
  EXPECT_EQ(eval1([&] { return ir::make_const(u8, 3) - ir::make_const(u8, 5); }).get(0), 254);
  EXPECT_EQ(eval1([&] { return ir::cast(u8, Expr(-1)) > ir::make_const(u8, 3); }).get(0), 1);
  EXPECT_EQ(eval1([] { return ir::cast(DataType::int32(), Expr(-2.75f)); }).get(0), -2);
  EXPECT_EQ(eval1([] { return Expr(int64_t{1} << 40) * Expr(int64_t{1} << 30); }).get(0),
            0.0);  // wraps in 64 bits
  Tensor x = placeholder({2}, DataType::int32(), "x");
  Tensor q = compute(
      {2}, [&](const std::vector<Var>& v) { return Expr(10) / x(v[0]); }, "q");
  NDArray xs(DataType::int32(), {2});
  xs.set(0, 3);
  EXPECT_TT_ERROR(evaluate({q}, {x}, {xs}), kRuntime,
                  "integer division by zero in stage 'q' (computing q[1])");
}

TEST(Evaluator, Float16RoundsAfterEveryOperation) {
  DataType f16 = DataType::float16();
  // 2048 + 1 is not representable in float16: each addition rounds back to 2048.
  Tensor x = placeholder({3}, f16, "x");
  Tensor y = compute(
      {3},
      [&](const std::vector<Var>& v) {
        return (x(v[0]) + ir::make_const(f16, 1)) + ir::make_const(f16, 1);
      },
      "y");
  NDArray xs(f16, {3});
  xs.set(0, 2048);
  xs.set(1, 1);
  xs.set(2, 0.1);
  NDArray out = evaluate({y}, {x}, {xs})[0];
  EXPECT_EQ(out.get(0), 2048);  // in float32 this would be 2050
  EXPECT_EQ(out.get(1), 3);
  EXPECT_EQ(out.get(2), cast_value(f16, cast_value(f16, cast_value(f16, 0.1) + 1) + 1));
  // A float16 sum accumulates in float16.
  IterVar k = reduce_axis(3000, "k");
  Tensor ones = compute(
      {1}, [&](const std::vector<Var>&) { return sum(ir::make_const(f16, 1), {k}); }, "ones");
  EXPECT_EQ(evaluate({ones}, {}, {})[0].get(0), 2048);
  // bfloat16 has 8 significant bits.
  DataType bf = DataType::bfloat16();
  EXPECT_EQ(eval1([&] { return ir::make_const(bf, 256) + ir::make_const(bf, 1); }).get(0), 256);
  // float32 rounds too: 2^24 + 1 is 2^24.
  EXPECT_EQ(eval1([] { return Expr(16777216.0f) + Expr(1.0f); }).get(0), 16777216.0);
}

TEST(Evaluator, IntrinsicsAndCasts) {
  EXPECT_EQ(eval1([] { return ir::exp(Expr(0.0f)); }).get(0), 1);
  EXPECT_EQ(eval1([] { return ir::sqrt(Expr(2.0f)); }).get(0), static_cast<float>(std::sqrt(2.0)));
  EXPECT_EQ(eval1([] { return ir::call(ir::Intrinsic::kRound, {Expr(2.5f)}); }).get(0), 2);
  EXPECT_EQ(eval1([] { return ir::call(ir::Intrinsic::kRound, {Expr(3.5f)}); }).get(0), 4);
  EXPECT_EQ(eval1([] { return ir::sigmoid(Expr(0.0f)); }).get(0), 0.5);
  EXPECT_EQ(eval1([] { return ir::pow(Expr(2.0f), Expr(10.0f)); }).get(0), 1024);
  EXPECT_EQ(eval1([] { return ir::rsqrt(Expr(4.0f)); }).get(0), 0.5);
  EXPECT_EQ(eval1([] { return ir::erf(Expr(0.0f)); }).get(0), 0);
  EXPECT_EQ(eval1([] { return ir::cast(DataType::float16(), Expr(0.1f)); }).get(0),
            cast_value(DataType::float16(), static_cast<float>(0.1)));
  EXPECT_EQ(eval1([] { return ir::max(Expr(-1.0f), Expr(2.0f)); }).get(0), 2);
  EXPECT_EQ(eval1([] { return ir::select(Expr(1) < Expr(2), Expr(5), Expr(6)); }).get(0), 5);
  EXPECT_EQ(eval1([] { return ir::logical_and(Expr(1) < Expr(2), Expr(3) < Expr(2)); }).get(0), 0);
}

TEST(Evaluator, ReductionsWithConditionAndInit) {
  Tensor a = placeholder({4, 6}, DataType::float32(), "a");
  IterVar k = reduce_axis(6, "k");
  // Sum of the even columns, starting from 100.
  Tensor s = compute(
      {4},
      [&](const std::vector<Var>& v) {
        return ir::reduce(ir::ReduceOp::kSum, a(v[0], k.expr()), {k},
                          ir::floormod(k.expr(), Expr(2)) == Expr(0), Expr(100.0f));
      },
      "s");
  IterVar k2 = reduce_axis(6, "k2");
  Tensor m = compute(
      {4}, [&](const std::vector<Var>& v) { return min(a(v[0], k2.expr()), {k2}); }, "m");
  IterVar k3 = reduce_axis(4, "k3"), k4 = reduce_axis(6, "k4");
  Tensor p = compute(
      {},
      [&](const std::vector<Var>&) {
        return prod(a(k3.expr(), k4.expr()), {k3, k4});
      },
      "p");
  NDArray in = NDArray::random(DataType::float32(), {4, 6}, 3, 0.5, 1.5);
  auto out = evaluate({s, m, p}, {a}, {in});
  double all = 1;
  for (int64_t i = 0; i < 4; ++i) {
    double expect = 100, lowest = INFINITY;
    for (int64_t j = 0; j < 6; ++j) {
      if (j % 2 == 0) expect = static_cast<float>(expect + in.at({i, j}));
      lowest = std::min(lowest, in.at({i, j}));
      all = static_cast<float>(all * in.at({i, j}));
    }
    EXPECT_EQ(out[0].get(i), expect);
    EXPECT_EQ(out[1].get(i), lowest);
  }
  EXPECT_EQ(out[2].size(), 1);
  EXPECT_EQ(out[2].get(0), all);
  // Integer max starts from the type's minimum.
  Tensor ints = placeholder({3}, DataType::int_(16), "ints");
  IterVar r = reduce_axis(3, "r");
  Tensor mx = compute(
      {1}, [&](const std::vector<Var>&) { return max(ints(r.expr()), {r}); }, "mx");
  NDArray iv(DataType::int_(16), {3});
  iv.set(0, -300);
  iv.set(1, -20);
  iv.set(2, -7000);
  EXPECT_EQ(evaluate({mx}, {ints}, {iv})[0].get(0), -20);
}

TEST(Evaluator, OutOfBoundsReadsAreErrors) {
  Tensor a = placeholder({4}, DataType::float32(), "a");
  Tensor shifted = compute(
      {4}, [&](const std::vector<Var>& v) { return a(v[0] + 1); }, "shifted");
  NDArray in(DataType::float32(), {4});
  EXPECT_TT_ERROR(evaluate({shifted}, {a}, {in}), kRuntime,
                  "stage 'shifted' (computing shifted[3]) reads tensor 'a' out of bounds at [4]; "
                  "its shape is [4]");
  // Both arms of a select must be safe, even the one not taken.
  Tensor guarded = compute(
      {4},
      [&](const std::vector<Var>& v) {
        return ir::select(v[0] < Expr(3), a(v[0] + 1), Expr(0.0f));
      },
      "guarded");
  EXPECT_TT_ERROR(evaluate({guarded}, {a}, {in}), kRuntime,
                  "reads tensor 'a' out of bounds at [4]");
  // The source of a reduction is not evaluated where its condition fails.
  IterVar k = reduce_axis(5, "k");
  Tensor cond = compute(
      {1}, [&](const std::vector<Var>&) { return sum(a(k.expr()), {k}, k.expr() < Expr(4)); },
      "cond");
  EXPECT_NO_THROW(evaluate({cond}, {a}, {in}));
}

TEST(Evaluator, InputsAreChecked) {
  Tensor a = placeholder({2, 3}, DataType::float32(), "a");
  Tensor b = placeholder({3}, DataType::float32(), "b");
  Tensor c = add(a, b);
  NDArray av = NDArray::random(DataType::float32(), {2, 3}, 1);
  NDArray bv = NDArray::random(DataType::float32(), {3}, 2);
  EXPECT_TT_ERROR(evaluate({c}, {a}, {av}), kInvalidArgument,
                  "no value for input 'b' (float32[3]); values were given for: 'a'");
  EXPECT_TT_ERROR(evaluate({c}, {a, b}, {av, av}), kInvalidArgument,
                  "input 'b' is float32[3] but its value is float32[2, 3]");
  EXPECT_TT_ERROR(evaluate({c}, {a, c}, {av, bv}), kInvalidArgument, "is computed");
  EXPECT_TT_ERROR(evaluate({c}, {{"a", av}}), kInvalidArgument, "no value for input 'b'");
  // By name, with an unused extra.
  auto by_name = evaluate({c}, {{"a", av}, {"b", bv}, {"unused", bv}});
  auto by_tensor = evaluate({c}, {a, b}, {av, bv});
  EXPECT_EQ(max_abs_diff(by_name[0], by_tensor[0]), 0.0);
  // An output that is an input comes back as a copy.
  auto same = evaluate({a}, {a}, {av});
  EXPECT_EQ(max_abs_diff(same[0], av), 0.0);
  EXPECT_NE(same[0].data(), av.data());
  // Two placeholders of one name cannot be given by name.
  Tensor a2 = placeholder({2, 3}, DataType::float32(), "a");
  EXPECT_TT_ERROR(evaluate({add(a, a2)}, {{"a", av}}), kInvalidArgument,
                  "two inputs are named 'a'");
}

TEST(Evaluator, MatmulOf64IsQuickAndExact) {
  Tensor a = placeholder({64, 64}, DataType::float32(), "A");
  Tensor b = placeholder({64, 64}, DataType::float32(), "B");
  std::vector<NDArray> in = random_inputs({a, b}, 5);
  NDArray c = evaluate({matmul(a, b)}, {a, b}, in)[0];
  // Same order of accumulation, rounded to float32 at every step: bit-exact.
  NDArray expected = make_array(DataType::float32(), {64, 64}, [&](const auto& ix) {
    float s = 0;
    for (int64_t k = 0; k < 64; ++k) {
      s += static_cast<float>(in[0].at({ix[0], k})) * static_cast<float>(in[1].at({k, ix[1]}));
    }
    return s;
  });
  EXPECT_EQ(max_abs_diff(c, expected), 0.0);
}

TEST(Evaluator, IntegerTensorsAndMixedTypes) {
  Tensor a = placeholder({3, 5}, DataType::int_(8), "a");
  Tensor b = placeholder({5, 2}, DataType::int_(8), "b");
  IterVar k = reduce_axis(5, "k");
  // An int8 x int8 -> int32 matmul, as quantized models compute it.
  Tensor c = compute(
      {3, 2},
      [&](const std::vector<Var>& v) {
        return sum(ir::cast(DataType::int32(), a(v[0], k.expr())) *
                       ir::cast(DataType::int32(), b(k.expr(), v[1])),
                   {k});
      },
      "c");
  auto in = random_inputs({a, b}, 9);
  NDArray out = evaluate({c}, {a, b}, in)[0];
  EXPECT_EQ(out.dtype(), DataType::int32());
  NDArray expected = make_array(DataType::int32(), {3, 2}, [&](const auto& ix) {
    int64_t s = 0;
    for (int64_t j = 0; j < 5; ++j)
      s += in[0].get_int(ix[0] * 5 + j) * in[1].get_int(j * 2 + ix[1]);
    return static_cast<double>(s);
  });
  EXPECT_TRUE(arrays_close(out, expected));
}

}  // namespace
}  // namespace tensortune::te
