// Kernels built by hand, lowered by the pipeline, generated as C, compiled
// into one module (a single compiler run for all of them, cached across test
// processes) and called on real buffers; each result is compared with a plain
// C++ loop.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "codegen/codegen_test_util.h"
#include "lower/pass_test_util.h"
#include "tensortune/codegen/backend.h"
#include "tensortune/codegen/c_codegen.h"
#include "tensortune/codegen/module.h"
#include "tensortune/ir/pass_context.h"
#include "tensortune/lower/pipeline.h"
#include "tensortune/te/ndarray.h"

namespace tensortune::codegen {
namespace {

using ir::DataType;
using ir::Expr;
using ir::Var;
using lower::Buffer;
using lower::ForKind;
using lower::PrimFunc;
using lower::Stmt;
using te::NDArray;

using lower::testing::load;
using lower::testing::loop;
Stmt store(const Buffer& b, Expr index, Expr value) {
  return lower::buffer_store(b, std::move(index), std::move(value));
}
Buffer f32(const std::string& name, int64_t n) {
  return Buffer::make(name, DataType::float32(), {n});
}

// ---- the kernels ----

// C = A + B over 256 elements: 16 x vectorized 16.
PrimFunc vadd(const std::string& name) {
  Buffer a = f32("A", 256), b = f32("B", 256), c = f32("C", 256);
  Var io = Var::make("io"), ii = Var::make("ii");
  Expr idx = io * 16 + ii;
  return PrimFunc::make(
      name, {a, b, c}, 2,
      loop(io, 16, loop(ii, 16, store(c, idx, load(a, idx) + load(b, idx)), ForKind::kVectorized)));
}

// C[8x32] = A[8x16] * B[16x32], columns vectorized by 16, the reduction inside.
constexpr int kM = 8, kN = 32, kK = 16;
PrimFunc matmul() {
  Buffer a = f32("A", kM * kK), b = f32("B", kK * kN), c = f32("C", kM * kN);
  Var i = Var::make("i"), jo = Var::make("jo"), ji = Var::make("ji"), k = Var::make("k");
  Expr j = jo * 16 + ji;
  Stmt init = loop(ji, 16, store(c, i * kN + j, 0.0f), ForKind::kVectorized);
  Stmt update = loop(
      k, kK,
      loop(ji, 16,
           store(c, i * kN + j, load(c, i * kN + j) + load(a, i * kK + k) * load(b, k * kN + j)),
           ForKind::kVectorized),
      ForKind::kUnrolled);
  return PrimFunc::make("matmul", {a, b, c}, 2,
                        loop(i, kM, loop(jo, 2, lower::seq({init, update}))));
}

// S[i] = sum over k of A[i*16 + k], with the reduction loop marked vectorized
// (which must fall back to a serial loop).
PrimFunc row_sum() {
  Buffer a = f32("A", 64), s = f32("S", 4);
  Var i = Var::make("i"), k = Var::make("k");
  return PrimFunc::make(
      "row_sum", {a, s}, 1,
      loop(i, 4,
           lower::seq({store(s, i, 0.0f), loop(k, 16, store(s, i, load(s, i) + load(a, i * 16 + k)),
                                               ForKind::kVectorized)})));
}

// Softmax's row statistics over 3 rows of 100: M[i] = max over k of A[i*100
// + k], S[i] = sum over k of exp(A[i*100 + k] - M[i]); both reductions
// become vector accumulators with a scalar tail (100 is no multiple of a
// register's lanes).
PrimFunc row_stats() {
  Buffer a = f32("A", 300), m = f32("M", 3), s = f32("S", 3);
  Var i = Var::make("i"), k = Var::make("k"), l = Var::make("l");
  Expr x = load(a, i * 100 + k), y = load(a, i * 100 + l);
  return PrimFunc::make(
      "row_stats", {a, m, s}, 1,
      loop(i, 3,
           lower::seq({store(m, i, load(a, i * 100)),
                       loop(k, 100, store(m, i, ir::max(load(m, i), x))), store(s, i, 0.0f),
                       loop(l, 100, store(s, i, load(s, i) + ir::exp(y - load(m, i))))})));
}

// C = A * 3 + 1 over 64 x 16 with a parallel outer loop.
PrimFunc parallel_scale() {
  Buffer a = f32("A", 1024), c = f32("C", 1024);
  Var i = Var::make("i"), j = Var::make("j");
  Expr idx = i * 16 + j;
  return PrimFunc::make(
      "parallel_scale", {a, c}, 1,
      loop(i, 64, loop(j, 16, store(c, idx, load(a, idx) * 3.0f + 1.0f), ForKind::kVectorized),
           ForKind::kParallel));
}

// C[i - 5] += 1 for i in [5, 1005): a parallel loop that does not start at
// 0, each iteration a read and a write, so an iteration run twice or never
// shows in C.
PrimFunc parallel_count() {
  Buffer c = f32("C", 1000);
  Var i = Var::make("i");
  return PrimFunc::make("parallel_count", {c}, 0,
                        lower::for_loop(i, 5, ir::int_imm(1000, i->dtype), ForKind::kParallel,
                                        store(c, i - 5, load(c, i - 5) + 1.0f)));
}

// Per row: T = A * 2 in a local buffer, then C = T + 1 (the allocation is
// hoisted by storage_rewrite; with `big` it is too large for the stack).
PrimFunc staged(const std::string& name, int64_t local_size) {
  Buffer a = f32("A", 256), c = f32("C", 256);
  Buffer t = Buffer::make("T", DataType::float32(), {local_size}, {}, "local");
  Var i = Var::make("i"), j = Var::make("j");
  return PrimFunc::make(
      name, {a, c}, 1,
      loop(i, 16,
           lower::allocate(t, lower::seq({loop(j, 16, store(t, j, load(a, i * 16 + j) * 2.0f),
                                               ForKind::kVectorized),
                                          loop(j, 16, store(c, i * 16 + j, load(t, j) + 1.0f),
                                               ForKind::kVectorized)}))));
}

// C = max(A, 0) over 100 elements, split by 16 with a guard.
PrimFunc guarded_relu() {
  Buffer a = f32("A", 100), c = f32("C", 100);
  Var io = Var::make("io"), ii = Var::make("ii");
  Expr idx = io * 16 + ii;
  return PrimFunc::make(
      "guarded_relu", {a, c}, 1,
      loop(io, 7,
           loop(ii, 16, lower::if_then_else(idx < 100, store(c, idx, ir::max(load(a, idx), 0.0f))),
                ForKind::kVectorized)));
}

// C = A * B + 1 in `dtype` (float16 or bfloat16), vectorized.
PrimFunc half_fma(const std::string& name, DataType dtype) {
  Buffer a = Buffer::make("A", dtype, {64}), b = Buffer::make("B", dtype, {64});
  Buffer c = Buffer::make("C", dtype, {64});
  Var io = Var::make("io"), ii = Var::make("ii");
  Expr idx = io * 16 + ii;
  return PrimFunc::make(
      name, {a, b, c}, 2,
      loop(io, 4,
           loop(ii, 16, store(c, idx, load(a, idx) * load(b, idx) + ir::make_const(dtype, 1)),
                ForKind::kVectorized)));
}

// H = f16(A) and W = f32(G) over 96 elements, vectorized `lanes` wide:
// the float16 conversions, one instruction each where the target has them.
PrimFunc half_conversions(int lanes) {
  const DataType f16 = DataType::float16();
  Buffer a = f32("A", 96), w = f32("W", 96);
  Buffer h = Buffer::make("H", f16, {96}), g = Buffer::make("G", f16, {96});
  Var io = Var::make("io"), ii = Var::make("ii");
  Expr idx = io * lanes + ii;
  return PrimFunc::make(
      "half_conversions_x" + std::to_string(lanes), {a, g, h, w}, 2,
      loop(io, 96 / lanes,
           loop(ii, lanes,
                lower::seq({store(h, idx, ir::cast(f16, load(a, idx))),
                            store(w, idx, ir::cast(DataType::float32(), load(g, idx)))}),
                ForKind::kVectorized)));
}

// H = half(D) from float64 or `source` (`half` float16 or bfloat16), one
// element at a time or in vectors of 4; the cast's value read back through
// float32, so that it is not the store that rounds.
PrimFunc half_from_double(const std::string& name, ForKind kind,
                          DataType half = DataType::float16(),
                          DataType source = DataType::float64()) {
  Buffer d = Buffer::make("D", source, {4});
  Buffer h = Buffer::make("H", half, {4});
  Var i = Var::make("i");
  Expr rounded = ir::cast(half, load(d, i));
  return PrimFunc::make(
      name, {d, h}, 1,
      loop(i, 4, store(h, i, ir::cast(half, ir::cast(DataType::float32(), rounded) * 1.0f)), kind));
}

// Vector conversions across more than one width step, which the C back end
// makes one step at a time (u8 -> i16 -> i32 -> f32 and back), over 64
// elements vectorized 16 wide: F = U - S + H / 4, and back to bytes and
// words, OU = u8(U / 2 + 3), OS = i8(S / 2), OH = i16(U - 2 S) (all in range).
PrimFunc byte_conversions() {
  const DataType u8 = DataType::uint(8), i8 = DataType::int_(8), i16 = DataType::int_(16);
  const DataType f = DataType::float32(), i32 = DataType::int32();
  Buffer u = Buffer::make("U", u8, {64}), s = Buffer::make("S", i8, {64});
  Buffer h = Buffer::make("H", i16, {64}), out_f = f32("F", 64);
  Buffer ou = Buffer::make("OU", u8, {64}), os = Buffer::make("OS", i8, {64});
  Buffer oh = Buffer::make("OH", i16, {64});
  Var io = Var::make("io"), ii = Var::make("ii");
  Expr idx = io * 16 + ii;
  Expr fu = ir::cast(f, load(u, idx)), fs = ir::cast(f, load(s, idx));
  Stmt body = lower::seq(
      {store(out_f, idx, fu - fs + ir::cast(f, load(h, idx)) * 0.25f),
       store(ou, idx, ir::cast(u8, fu * 0.5f + 3.0f)), store(os, idx, ir::cast(i8, fs * 0.5f)),
       store(oh, idx,
             ir::cast(i16, ir::cast(i32, load(u, idx)) - ir::cast(i32, load(s, idx)) * 2))});
  return PrimFunc::make("byte_conversions", {u, s, h, out_f, ou, os, oh}, 4,
                        loop(io, 4, loop(ii, 16, body, ForKind::kVectorized)));
}

// Q = floordiv(X, 3), R = floormod(X, 5) over int32, vectorized and scalar.
PrimFunc int_division(const std::string& name, ForKind kind) {
  Buffer x = Buffer::make("X", DataType::int32(), {32}),
         q = Buffer::make("Q", DataType::int32(), {32});
  Buffer r = Buffer::make("R", DataType::int32(), {32});
  Var i = Var::make("i");
  return PrimFunc::make(name, {x, q, r}, 1,
                        loop(i, 32,
                             lower::seq({store(q, i, ir::floordiv(load(x, i), 3)),
                                         store(r, i, ir::floormod(load(x, i), 5))}),
                             kind));
}

// C = exp(A) * log(|B| + 1) + sqrt(|A|), selects and a cast of the index:
// intrinsics without a vector form (log) keep the loop (hinted to the
// compiler).
PrimFunc math_mix(const std::string& name, bool vector_form_only) {
  Buffer a = f32("A", 32), b = f32("B", 32), c = f32("C", 32);
  Var i = Var::make("i");
  Expr x = load(a, i), y = load(b, i);
  Expr value = ir::sqrt(ir::fabs(x)) + ir::select(i < 8, 1.0f, 2.0f) * ir::min(x, y) +
               ir::cast(DataType::float32(), i) + ir::select(load(b, 0) > 0.0f, x, y);
  if (!vector_form_only) value = value + ir::exp(x) * ir::log(ir::fabs(y) + 1.0f);
  return PrimFunc::make(name, {a, b, c}, 2, loop(i, 32, store(c, i, value), ForKind::kVectorized));
}

// C = f(A) over 64 elements, vectorized 32 wide: f is exp, erf or tanh,
// which vector code computes in plain arithmetic instead of math.h's calls.
PrimFunc vector_math(const std::string& name, ir::Intrinsic op, int64_t rows = 2) {
  Buffer a = f32("A", rows * 32), c = f32("C", rows * 32);
  Var io = Var::make("io"), ii = Var::make("ii");
  Expr idx = io * 32 + ii;
  Expr x = load(a, idx);
  return PrimFunc::make(
      name, {a, c}, 1,
      loop(io, rows, loop(ii, 32, store(c, idx, ir::call(op, {x})), ForKind::kVectorized)));
}

constexpr int64_t kSweepRows = 4096;  // 131072 lanes per function

// C = A * (ii + io) over 8 rows of 32, where ii, the lane, is a value: a
// ramp whose base holds the row's loop variable (64-bit in the C, the lanes
// 32-bit).
PrimFunc lane_values() {
  Buffer a = f32("A", 256), c = f32("C", 256);
  Var io = Var::make("io"), ii = Var::make("ii");
  Expr idx = io * 32 + ii;
  return PrimFunc::make(
      "lane_values", {a, c}, 1,
      loop(io, 8,
           loop(ii, 32, store(c, idx, load(a, idx) * ir::cast(DataType::float32(), ii + io)),
                ForKind::kVectorized)));
}

// C[1:33] = C[0:32] + 1, one vector statement: every lane reads before any
// is written, also once the statement is cut into register-wide pieces.
PrimFunc shifted_add() {
  Buffer c = f32("C", 40);
  return PrimFunc::make(
      "shifted_add", {c}, 0,
      store(c, ir::ramp(1, 1, 32), load(c, ir::ramp(0, 1, 32)) + ir::broadcast(1.0f, 32)));
}

// C[r*32 + i] = row r of a transform (r chosen per row, only its side
// evaluated): row 0 pads A's first vector with zeros (a blend), row 1 is
// loads alone, so the two sides of the C ?: start out of different types.
PrimFunc row_transform() {
  Buffer a = f32("A", 32), b = f32("B", 32), c = f32("C", 64);
  Var r = Var::make("r"), io = Var::make("io"), ii = Var::make("ii");
  Expr idx = io * 16 + ii;
  Expr padded = ir::select(io >= 1, load(a, idx), 0.0f);
  Expr row = ir::select(r == 0, padded * 2.0f + load(b, idx), load(a, idx) - load(b, idx));
  return PrimFunc::make(
      "row_transform", {a, b, c}, 2,
      loop(r, 2, loop(io, 2, loop(ii, 16, store(c, r * 32 + idx, row), ForKind::kVectorized))));
}

// ---- building them all in one module ----

class EndToEnd : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    std::vector<PrimFunc> raw = {
        vadd("vadd"),
        matmul(),
        row_sum(),
        row_stats(),
        parallel_scale(),
        parallel_count(),
        staged("staged", 16),
        staged("staged_heap", 32768),
        guarded_relu(),
        half_fma("fma_f16", DataType::float16()),
        half_conversions(4),
        half_conversions(8),
        half_conversions(16),
        half_conversions(32),
        half_from_double("half_from_double", ForKind::kSerial),
        half_from_double("half_from_double_x4", ForKind::kVectorized),
        half_from_double("bf16_from_double", ForKind::kSerial, DataType::bfloat16()),
        half_from_double("bf16_from_double_x4", ForKind::kVectorized, DataType::bfloat16()),
        half_from_double("bf16_from_int", ForKind::kSerial, DataType::bfloat16(),
                         DataType::int32()),
        half_from_double("bf16_from_int_x4", ForKind::kVectorized, DataType::bfloat16(),
                         DataType::int32()),
        byte_conversions(),
        half_fma("fma_bf16", DataType::bfloat16()),
        int_division("div_vector", ForKind::kVectorized),
        int_division("div_scalar", ForKind::kSerial),
        math_mix("math_vector", true),
        math_mix("math_mixed", false),
        vector_math("exp_vector", ir::Intrinsic::kExp),
        vector_math("erf_vector", ir::Intrinsic::kErf),
        vector_math("tanh_vector", ir::Intrinsic::kTanh),
        vector_math("exp_sweep", ir::Intrinsic::kExp, kSweepRows),
        vector_math("erf_sweep", ir::Intrinsic::kErf, kSweepRows),
        vector_math("tanh_sweep", ir::Intrinsic::kTanh, kSweepRows),
        lane_values(),
        shifted_add(),
        row_transform()};
    auto& lowered = *(lowered_ = new std::vector<PrimFunc>());
    for (const auto& f : raw) lowered.push_back(lower::run_pipeline(f));
    {
      // The same vector add, lowered without vectorization.
      ir::PassContextGuard guard(ir::PassContext::make(
          ir::PassContextOptions().with_config("tir.disable_vectorize", true)));
      lowered.push_back(lower::run_pipeline(vadd("vadd_scalar")));
    }
    source_ = new std::string(generate_c(lowered, testing::test_target()));
    module_ =
        new Module(build_module(lowered, testing::test_target(), testing::shared_cache_options()));
  }
  static void TearDownTestSuite() {
    delete lowered_;
    lowered_ = nullptr;
    delete module_;
    delete source_;
    module_ = nullptr;
    source_ = nullptr;
  }

  /// Calls kernel `name` on `arrays`.
  static void call(const std::string& name, std::vector<NDArray*> arrays) {
    ASSERT_NE(module_, nullptr) << "the module failed to build (see SetUpTestSuite)";
    std::vector<void*> args;
    for (auto* a : arrays) args.push_back(a->data());
    ASSERT_EQ(module_->get(name)(args.data()), 0) << name;
  }

  static void expect_close(const NDArray& actual, const NDArray& expected,
                           const std::string& what) {
    auto diff = te::compare_arrays(actual, expected, te::default_tolerance(expected.dtype()));
    EXPECT_FALSE(diff.has_value()) << what << ": " << *diff << "\n" << *source_;
  }

  static std::vector<PrimFunc>* lowered_;
  static Module* module_;
  static std::string* source_;
};

std::vector<PrimFunc>* EndToEnd::lowered_ = nullptr;
Module* EndToEnd::module_ = nullptr;
std::string* EndToEnd::source_ = nullptr;

NDArray random_f32(int64_t n, uint64_t seed) {
  return NDArray::random(DataType::float32(), {n}, seed);
}

TEST_F(EndToEnd, OneModuleForAllKernels) {
  ASSERT_NE(module_, nullptr);
  for (const auto& f : *lowered_) EXPECT_TRUE(module_->has(f->name)) << f->name;
  // The same kernels again: the cache answers, no compiler runs.
  Module again = build_module(*lowered_, testing::test_target(), testing::shared_cache_options());
  EXPECT_TRUE(again.from_cache());
  EXPECT_EQ(again.library_path(), module_->library_path());
}

TEST(EndToEndHelpers, KernelsBuiltInUnitsComputeWhatOneModuleDoes) {
  // Enough kernels for two units: each kernel in exactly one, the thread
  // count defined in the first and shared, and every kernel callable.
  std::unique_ptr<KernelSources> sources = kernel_sources(ir::Target::parse("c -num-cores=2"));
  std::vector<size_t> all;
  std::vector<SourceUnit> units;
  while (units.size() < 2 && all.size() < 1000) {
    all.push_back(sources->add(lower::run_pipeline(vadd("vadd_" + std::to_string(all.size())))));
    if (all.size() % 50 == 0) units = sources->units(all, 2);
  }
  ASSERT_EQ(units.size(), 2u) << all.size() << " kernels";
  std::vector<size_t> held;
  for (const SourceUnit& u : units) held.insert(held.end(), u.kernels.begin(), u.kernels.end());
  EXPECT_EQ(held, all);
  EXPECT_NE(units[0].text.find("tt_set_num_threads"), std::string::npos);
  EXPECT_EQ(units[1].text.find("tt_set_num_threads"), std::string::npos);
  ModuleOptions options = testing::shared_cache_options();
  options.jobs = 2;
  Module m = build_in_units(*sources, all, options);
  auto set_threads =
      reinterpret_cast<int32_t (*)(int32_t)>(reinterpret_cast<void*>(m.get("tt_set_num_threads")));
  EXPECT_EQ(set_threads(1), 0);
  NDArray a = random_f32(256, 1), b = random_f32(256, 2);
  for (size_t i : {size_t{0}, all.size() - 1}) {
    NDArray c(DataType::float32(), {256});
    void* args[] = {a.data(), b.data(), c.data()};
    ASSERT_EQ(m.get("vadd_" + std::to_string(i))(args), 0);
    for (int64_t k = 0; k < 256; ++k) {
      ASSERT_EQ(c.get(k), static_cast<float>(a.get(k) + b.get(k))) << i << ", element " << k;
    }
  }
  EXPECT_TRUE(build_in_units(*sources, all, options).from_cache());
}

TEST(EndToEndHelpers, WriteSharesCopiesEveryByteOnTheKernelsThreads) {
  // The run worker's copy of a kernel's activations before each timed call
  // (RunnerOptions::fresh_activations), on three threads: sizes that split
  // cache lines unevenly, end inside one, or leave threads without a line.
  Module m = build_module({lower::run_pipeline(vadd("vadd_3"))},
                          ir::Target::parse("c -num-cores=3"), testing::shared_cache_options());
  auto write = reinterpret_cast<void (*)(char*, const char*, int64_t)>(
      reinterpret_cast<void*>(m.get("tt_write_shares")));
  std::vector<char> src(1000), dst(1001);
  for (size_t i = 0; i < src.size(); ++i) src[i] = static_cast<char>(i * 7 + 1);
  for (int64_t bytes : {0, 1, 63, 64, 65, 130, 1000}) {
    std::fill(dst.begin(), dst.end(), 0);
    write(dst.data(), src.data(), bytes);
    for (int64_t i = 0; i < bytes; ++i) ASSERT_EQ(dst[i], src[i]) << bytes << " bytes, at " << i;
    for (size_t i = static_cast<size_t>(bytes); i < dst.size(); ++i) {
      ASSERT_EQ(dst[i], 0) << bytes << " bytes, wrote " << i;
    }
  }
}

TEST_F(EndToEnd, VectorAdd) {
  for (const char* name : {"vadd", "vadd_scalar"}) {
    NDArray a = random_f32(256, 1), b = random_f32(256, 2), c(DataType::float32(), {256});
    c.fill(NAN);
    call(name, {&a, &b, &c});
    NDArray expected(DataType::float32(), {256});
    for (int64_t i = 0; i < 256; ++i) expected.set(i, static_cast<float>(a.get(i) + b.get(i)));
    expect_close(c, expected, name);
  }
}

TEST_F(EndToEnd, MatmulWithVectorizedColumns) {
  NDArray a = random_f32(kM * kK, 3), b = random_f32(kK * kN, 4), c(DataType::float32(), {kM * kN});
  c.fill(NAN);
  call("matmul", {&a, &b, &c});
  NDArray expected(DataType::float32(), {kM * kN});
  for (int i = 0; i < kM; ++i) {
    for (int j = 0; j < kN; ++j) {
      double sum = 0;
      for (int k = 0; k < kK; ++k) sum += a.get(i * kK + k) * b.get(k * kN + j);
      expected.set(i * kN + j, sum);
    }
  }
  expect_close(c, expected, "matmul");
}

TEST_F(EndToEnd, ReductionMarkedVectorizedRunsSerially) {
  NDArray a = random_f32(64, 5), s(DataType::float32(), {4});
  call("row_sum", {&a, &s});
  NDArray expected(DataType::float32(), {4});
  for (int i = 0; i < 4; ++i) {
    double sum = 0;
    for (int k = 0; k < 16; ++k) sum += a.get(i * 16 + k);
    expected.set(i, sum);
  }
  expect_close(s, expected, "row_sum");
}

TEST_F(EndToEnd, RowReductionsFoldVectors) {
  EXPECT_NE(source_->find("S_acc"), std::string::npos) << "the sum was not vectorized";
  EXPECT_NE(source_->find("M_acc"), std::string::npos) << "the maximum was not vectorized";
  NDArray a = random_f32(300, 9), m(DataType::float32(), {3}), s(DataType::float32(), {3});
  call("row_stats", {&a, &m, &s});
  NDArray want_m(DataType::float32(), {3}), want_s(DataType::float32(), {3});
  for (int i = 0; i < 3; ++i) {
    double max = a.get(i * 100), sum = 0;
    for (int k = 0; k < 100; ++k) max = std::max(max, a.get(i * 100 + k));
    for (int k = 0; k < 100; ++k) sum += std::exp(a.get(i * 100 + k) - max);
    want_m.set(i, max);
    want_s.set(i, sum);
  }
  expect_close(m, want_m, "row_stats max");
  expect_close(s, want_s, "row_stats sum");
}

TEST_F(EndToEnd, ParallelLoop) {
  EXPECT_NE(source_->find("tt_parallel_for(64, "), std::string::npos);
  NDArray a = random_f32(1024, 6), c(DataType::float32(), {1024});
  call("parallel_scale", {&a, &c});
  NDArray expected(DataType::float32(), {1024});
  for (int64_t i = 0; i < 1024; ++i) expected.set(i, a.get(i) * 3 + 1);
  expect_close(c, expected, "parallel_scale");
}

TEST_F(EndToEnd, EveryIterationOfAParallelLoopRunsOnceOnAnyNumberOfThreads) {
  // More threads than cores too: workers then often start late, after the
  // caller has taken their share.
  using SetThreads = int32_t (*)(int32_t);
  auto set_threads =
      reinterpret_cast<SetThreads>(reinterpret_cast<void*>(module_->get("tt_set_num_threads")));
  ASSERT_NE(source_->find("tt_parallel_for(1000, "), std::string::npos) << *source_;
  ASSERT_NE(source_->find("_a = {C, 5};"), std::string::npos) << *source_;
  NDArray c(DataType::float32(), {1000});
  for (int64_t i = 0; i < 1000; ++i) c.set(i, 0.0);
  int calls = 0;
  for (int threads : {1, 2, 3, 8, 2}) {
    set_threads(threads);
    for (int r = 0; r < 200; ++r, ++calls) call("parallel_count", {&c});
  }
  set_threads(0);  // back to the target's cores
  for (int64_t i = 0; i < 1000; ++i) ASSERT_EQ(c.get(i), calls) << "iteration " << i + 5;
}

TEST_F(EndToEnd, LocalBuffersOnStackAndHeap) {
  EXPECT_NE(source_->find("tt_alloc(131072)"), std::string::npos);
  for (const char* name : {"staged", "staged_heap"}) {
    NDArray a = random_f32(256, 7), c(DataType::float32(), {256});
    call(name, {&a, &c});
    NDArray expected(DataType::float32(), {256});
    for (int64_t i = 0; i < 256; ++i) expected.set(i, a.get(i) * 2 + 1);
    expect_close(c, expected, name);
  }
}

TEST_F(EndToEnd, NonDivisibleGuardWritesNothingPastTheEnd) {
  // One buffer of 112 elements whose last 12 are a sentinel the kernel must not touch.
  NDArray a = random_f32(100, 8), c(DataType::float32(), {112});
  c.fill(-7.0);
  call("guarded_relu", {&a, &c});
  for (int64_t i = 0; i < 112; ++i) {
    double want = i < 100 ? std::max(a.get(i), 0.0) : -7.0;
    ASSERT_EQ(c.get(i), want) << "index " << i;
  }
}

TEST_F(EndToEnd, HalfPrecisionElementwise) {
  for (auto [name, dtype] :
       {std::pair{"fma_f16", DataType::float16()}, std::pair{"fma_bf16", DataType::bfloat16()}}) {
    NDArray a = NDArray::random(dtype, {64}, 9), b = NDArray::random(dtype, {64}, 10);
    NDArray c(dtype, {64});
    call(name, {&a, &b, &c});
    NDArray expected(dtype, {64});
    for (int64_t i = 0; i < 64; ++i) expected.set(i, a.get(i) * b.get(i) + 1);
    expect_close(c, expected, name);
  }
}

// Rounding to nearest even at ties, subnormal halves, overflow to infinity
// and NaN, as NDArray's conversion gives them, at every vector width.
TEST_F(EndToEnd, HalfVectorsConvertAsScalarsDo) {
  const std::vector<float> values = {1.0f,
                                     -2.5f,
                                     65504.0f,
                                     65520.0f,
                                     -1e6f,
                                     1.0f + 1.0f / 2048,
                                     1.0f + 3.0f / 2048,
                                     5.96e-8f,
                                     2.98e-8f,
                                     3e-8f,
                                     -6.1e-5f,
                                     1e-40f,
                                     0.1f,
                                     -0.0f,
                                     std::numeric_limits<float>::infinity(),
                                     std::numeric_limits<float>::quiet_NaN()};
  NDArray a(DataType::float32(), {96}), g(DataType::float16(), {96});
  for (int64_t i = 0; i < 96; ++i) {
    a.set(i, values[static_cast<size_t>(i) % values.size()] * (i < 16 ? 1.0f : 1.0f + i / 64.0f));
    g.set(i, a.get(i));  // rounded to float16
  }
  for (int lanes : {4, 8, 16, 32}) {
    SCOPED_TRACE(lanes);
    NDArray h(DataType::float16(), {96}), w(DataType::float32(), {96});
    call("half_conversions_x" + std::to_string(lanes), {&a, &g, &h, &w});
    for (int64_t i = 0; i < 96; ++i) {
      if (std::isnan(a.get(i))) {
        EXPECT_TRUE(std::isnan(h.get(i)) && std::isnan(w.get(i))) << i;
        continue;
      }
      EXPECT_EQ(h.get(i), g.get(i)) << i << ": " << a.get(i);
      EXPECT_EQ(w.get(i), g.get(i)) << i;
      EXPECT_EQ(std::signbit(h.get(i)), std::signbit(a.get(i))) << i;
    }
  }
}

// Float64 rounds to float16 once, in scalars and vectors: 1 + 2^-11 +
// 2^-40 is above the tie, and through float32 it would become the tie and
// round down to 1; 65519.999 is below the overflow threshold (65520), and
// through float32 it would become 65520 and infinity.
TEST_F(EndToEnd, HalfFromDoubleRoundsOnce) {
  const double above_tie = 1.0 + std::ldexp(1.0, -11) + std::ldexp(1.0, -40);
  const std::vector<double> from = {above_tie, -above_tie, 65519.999, -65519.999};
  const std::vector<double> want = {1.0 + std::ldexp(1.0, -10), -1.0 - std::ldexp(1.0, -10),
                                    65504.0, -65504.0};
  for (const char* name : {"half_from_double", "half_from_double_x4"}) {
    NDArray d(DataType::float64(), {4}), h(DataType::float16(), {4});
    for (int64_t i = 0; i < 4; ++i) d.set(i, from[static_cast<size_t>(i)]);
    call(name, {&d, &h});
    for (int64_t i = 0; i < 4; ++i) EXPECT_EQ(h.get(i), want[static_cast<size_t>(i)]) << name << i;
  }
}

// Float64 rounds to bfloat16 once too: 1 + 2^-8 + 2^-40 is above the tie,
// and through float32 it would become the tie and round down to 1; just
// below the overflow threshold (2^128 - 2^119), through float32 it would
// round up to it and become infinity; 2^-134 + 2^-160, above half the
// least subnormal, through float32 would be the tie and round to 0. A NaN
// stays a NaN.
TEST_F(EndToEnd, BFloat16FromDoubleRoundsOnce) {
  const double above_tie = 1.0 + std::ldexp(1.0, -8) + std::ldexp(1.0, -40);
  const double below_overflow = std::ldexp(1.0, 128) - std::ldexp(1.0, 119) - std::ldexp(1.0, 90);
  const double largest = std::ldexp(1.0, 128) - std::ldexp(1.0, 120);
  const std::vector<double> from = {above_tie, -below_overflow, std::nan(""),
                                    std::ldexp(1.0, -134) + std::ldexp(1.0, -160)};
  const std::vector<double> want = {1.0 + std::ldexp(1.0, -7), -largest, std::nan(""),
                                    std::ldexp(1.0, -133)};
  for (const char* name : {"bf16_from_double", "bf16_from_double_x4"}) {
    NDArray d(DataType::float64(), {4}), h(DataType::bfloat16(), {4});
    for (int64_t i = 0; i < 4; ++i) d.set(i, from[static_cast<size_t>(i)]);
    call(name, {&d, &h});
    for (int64_t i = 0; i < 4; ++i) {
      if (std::isnan(want[static_cast<size_t>(i)])) {
        EXPECT_TRUE(std::isnan(h.get(i))) << name << i;
      } else {
        EXPECT_EQ(h.get(i), want[static_cast<size_t>(i)]) << name << i;
      }
    }
  }
}

// An int32 wider than float's 24 bits rounds to bfloat16 once too:
// 2^25 + 2^17 + 1 is above the tie between 2^25 and 2^25 + 2^18, and
// through float it would become the tie and round down. The reference
// evaluator rounds it once.
TEST_F(EndToEnd, BFloat16FromWideIntegersRoundsOnce) {
  const std::vector<int64_t> from = {33685505, -33685505, 33685504, 7};
  const std::vector<double> want = {33816576, -33816576, 33554432, 7};
  for (const char* name : {"bf16_from_int", "bf16_from_int_x4"}) {
    NDArray d(DataType::int32(), {4}), h(DataType::bfloat16(), {4});
    for (int64_t i = 0; i < 4; ++i) d.set_int(i, from[static_cast<size_t>(i)]);
    call(name, {&d, &h});
    for (int64_t i = 0; i < 4; ++i) {
      const double value = static_cast<double>(from[static_cast<size_t>(i)]);
      EXPECT_EQ(h.get(i), want[static_cast<size_t>(i)]) << name << i;
      EXPECT_EQ(h.get(i), te::cast_value(DataType::bfloat16(), value)) << name << i;
    }
  }
}

TEST_F(EndToEnd, ByteAndWordVectorsConvertExactly) {
  // Every byte value, both signs, and words near both ends.
  NDArray u(DataType::uint(8), {64}), s(DataType::int_(8), {64}), h(DataType::int_(16), {64});
  for (int64_t i = 0; i < 64; ++i) {
    u.set_int(i, (i * 37 + 255) % 256);
    s.set_int(i, (i * 53) % 256 - 128);
    h.set_int(i, i % 2 ? 32767 - i * 97 : -32768 + i * 89);
  }
  NDArray f(DataType::float32(), {64}), ou(DataType::uint(8), {64}), os(DataType::int_(8), {64}),
      oh(DataType::int_(16), {64});
  call("byte_conversions", {&u, &s, &h, &f, &ou, &os, &oh});
  for (int64_t i = 0; i < 64; ++i) {
    const int64_t a = u.get_int(i), b = s.get_int(i), c = h.get_int(i);
    EXPECT_EQ(f.get(i),
              static_cast<float>(a) - static_cast<float>(b) + static_cast<float>(c) * 0.25f)
        << i;
    EXPECT_EQ(ou.get_int(i), static_cast<int64_t>(static_cast<float>(a) * 0.5f + 3.0f)) << i;
    EXPECT_EQ(os.get_int(i), static_cast<int64_t>(static_cast<float>(b) * 0.5f)) << i;
    EXPECT_EQ(oh.get_int(i), a - 2 * b) << i;
  }
}

TEST_F(EndToEnd, IntegerFloorDivisionAndModulo) {
  for (const char* name : {"div_vector", "div_scalar"}) {
    NDArray x(DataType::int32(), {32}), q(DataType::int32(), {32}), r(DataType::int32(), {32});
    for (int64_t i = 0; i < 32; ++i) x.set_int(i, i * 7 - 100);
    call(name, {&x, &q, &r});
    for (int64_t i = 0; i < 32; ++i) {
      int64_t v = x.get_int(i);
      int64_t fq = v / 3 - ((v % 3 != 0) && (v < 0));
      int64_t fr = ((v % 5) + 5) % 5;
      ASSERT_EQ(q.get_int(i), fq) << name << " floordiv(" << v << ", 3)";
      ASSERT_EQ(r.get_int(i), fr) << name << " floormod(" << v << ", 5)";
    }
  }
}

TEST_F(EndToEnd, MathIntrinsicsSelectsAndCasts) {
  for (const char* name : {"math_vector", "math_mixed"}) {
    NDArray a = random_f32(32, 11), b = random_f32(32, 12), c(DataType::float32(), {32});
    call(name, {&a, &b, &c});
    NDArray expected(DataType::float32(), {32});
    for (int64_t i = 0; i < 32; ++i) {
      double x = a.get(i), y = b.get(i);
      double v = std::sqrt(std::fabs(x)) + (i < 8 ? 1.0 : 2.0) * std::fmin(x, y) +
                 static_cast<double>(i) + (b.get(0) > 0 ? x : y);
      if (std::string(name) == "math_mixed") v += std::exp(x) * std::log(std::fabs(y) + 1);
      expected.set(i, v);
    }
    expect_close(c, expected, name);
  }
}

TEST_F(EndToEnd, ARowChosenPerLoopIterationComputesEitherSide) {
  NDArray a = random_f32(32, 13), b = random_f32(32, 14), c(DataType::float32(), {64});
  c.fill(NAN);
  call("row_transform", {&a, &b, &c});
  NDArray expected(DataType::float32(), {64});
  for (int64_t i = 0; i < 32; ++i) {
    expected.set(i, (i >= 16 ? a.get(i) : 0.0) * 2 + b.get(i));
    expected.set(32 + i, a.get(i) - b.get(i));
  }
  expect_close(c, expected, "row_transform");
}

TEST_F(EndToEnd, VectorExpErfAndTanhMatchMathHOverTheirWholeRange) {
  // Both tails, the range where exp leaves the normal numbers, where tanh
  // changes form (0.625), and the special values; the rest spread over
  // [-110, 110].
  std::vector<float> inputs = {0.0f,   -0.0f,  1e-30f, -1e-7f,   0.5f,     -0.5f,   3.9f,
                               -3.95f, 4.5f,   88.7f,  89.5f,    -87.0f,   -103.0f, -104.5f,
                               -200.f, 1e30f,  -1e30f, NAN,      0.625f,   -0.626f, 0.3f,
                               8.99f,  -9.01f, 0.05f,  INFINITY, -INFINITY};
  for (int64_t i = static_cast<int64_t>(inputs.size()); i < 64; ++i) {
    inputs.push_back(static_cast<float>(-110.0 + 220.0 * static_cast<double>(i) / 63.0));
  }
  // Vector code, the lanes computed by the back end's arithmetic forms
  // (exp's a whole vector at a time, vscalefps where the target has it).
  for (const char* form : {"tt_exp_f32x", "tt_erf_f32(tt_a[tt_l])", "tt_tanh_f32(tt_a[tt_l])"}) {
    EXPECT_NE(source_->find(form), std::string::npos) << form << "\n" << *source_;
  }
  NDArray a(DataType::float32(), {64});
  for (int64_t i = 0; i < 64; ++i) a.set(i, inputs[static_cast<size_t>(i)]);
  for (const char* f : {"exp", "erf", "tanh"}) {
    NDArray c(DataType::float32(), {64});
    call(std::string(f) + "_vector", {&a, &c});
    for (int64_t i = 0; i < 64; ++i) {
      float x = inputs[static_cast<size_t>(i)];
      float want = f[0] == 'e' ? (f[1] == 'x' ? std::exp(x) : std::erf(x)) : std::tanh(x);
      float got = static_cast<float>(c.get(i));
      if (std::isnan(want)) {
        EXPECT_TRUE(std::isnan(got)) << x;
      } else if (want == 0) {
        EXPECT_EQ(got, 0.0f) << f << "(" << x << ")";
        EXPECT_EQ(std::signbit(got), std::signbit(want)) << f << "(" << x << ")";
      } else if (std::isinf(want)) {
        EXPECT_EQ(got, want) << x;
      } else {
        // exp and tanh: relative (a few ulp, and exp's subnormals to their
        // spacing); erf: absolute.
        double bound = std::string(f) == "erf" ? 4e-7 : 4e-7 * std::fabs(want) + 1e-44;
        EXPECT_LE(std::fabs(got - want), bound) << f << "(" << x << ")";
      }
    }
  }
}

// The same forms on a dense grid, half of it where a fit is weakest: exp's
// range edges and subnormals, erf around its switch to +-1 at 3.65 (the
// rational fit would exceed 1 from 3.654 on), tanh around the switch at
// 0.625. erf must also stay within [-1, 1].
TEST_F(EndToEnd, VectorExpErfAndTanhMatchMathHOnADenseGrid) {
  struct Range {
    const char* name;
    double wide, lo, hi;  // [-wide, wide], then [lo, hi] and [-hi, -lo]
  };
  for (Range r : {Range{"exp", 110.0, 86.0, 104.5}, Range{"erf", 6.0, 3.6, 3.95},
                  Range{"tanh", 12.0, 0.55, 0.7}}) {
    const int64_t n = kSweepRows * 32;
    NDArray a(DataType::float32(), {n}), c(DataType::float32(), {n});
    for (int64_t i = 0; i < n; ++i) {
      double t = static_cast<double>(i % (n / 2)) / static_cast<double>(n / 2 - 1);
      double x =
          i < n / 2 ? -r.wide + 2 * r.wide * t : (i % 2 ? -1 : 1) * (r.lo + (r.hi - r.lo) * t);
      a.set(i, x);
    }
    call(std::string(r.name) + "_sweep", {&a, &c});
    double worst = 0;
    for (int64_t i = 0; i < n; ++i) {
      float x = static_cast<float>(a.get(i)), got = static_cast<float>(c.get(i));
      std::string f = r.name;
      double want = f == "exp"   ? std::exp(static_cast<double>(x))
                    : f == "erf" ? std::erf(static_cast<double>(x))
                                 : std::tanh(static_cast<double>(x));
      if (f == "exp" && want > std::numeric_limits<float>::max()) {
        ASSERT_EQ(got, INFINITY) << "exp(" << x << ")";
        continue;
      }
      double bound = f == "erf" ? 4e-7 : 4e-7 * std::fabs(want) + 1e-44;
      ASSERT_LE(std::fabs(got - want), bound) << f << "(" << x << ") = " << got;
      if (f == "erf") {
        ASSERT_LE(std::fabs(got), 1.0f) << "erf(" << x << ")";
      }
      worst = std::max(worst, std::fabs(got - want) / (f == "erf" ? 1.0 : std::fabs(want)));
    }
    RecordProperty(std::string(r.name) + "_worst_error", std::to_string(worst));
  }
}

TEST_F(EndToEnd, LaneIndicesAsValuesInsideAnOuterLoop) {
  NDArray a = random_f32(256, 21), c(DataType::float32(), {256});
  call("lane_values", {&a, &c});
  NDArray expected(DataType::float32(), {256});
  for (int64_t i = 0; i < 256; ++i)
    expected.set(i, a.get(i) * static_cast<double>(i % 32 + i / 32));
  expect_close(c, expected, "lane_values");
}

TEST_F(EndToEnd, AVectorStoreOverlappingItsOwnReadReadsTheOldValues) {
  NDArray c = random_f32(40, 22), expected = c;
  for (int64_t i = 1; i <= 32; ++i) expected.set(i, c.get(i - 1) + 1.0);
  call("shifted_add", {&c});
  expect_close(c, expected, "shifted_add");
}

}  // namespace
}  // namespace tensortune::codegen
