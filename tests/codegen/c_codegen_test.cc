// The C generator's text (nothing is compiled here): kernel signature, vector
// code, pragmas, allocations, names, errors, the effect of pass options, and
// the compiler flags.
#include "tensortune/codegen/c_codegen.h"

#include <gtest/gtest.h>

#include <algorithm>

#include "codegen/codegen_test_util.h"
#include "common/test_util.h"
#include "lower/pass_test_util.h"
#include "tensortune/ir/pass_context.h"
#include "tensortune/lower/pipeline.h"

namespace tensortune::codegen {
namespace {

using ir::DataType;
using ir::Expr;
using ir::Var;
using lower::Buffer;
using lower::ForKind;
using lower::PrimFunc;
using lower::Stmt;

Buffer A = Buffer::make("A", DataType::float32(), {256});
Buffer B = Buffer::make("B", DataType::float32(), {256});
Buffer C = Buffer::make("C", DataType::float32(), {256});

using lower::testing::load;
using lower::testing::loop;

PrimFunc vadd(const std::string& name = "vadd") {
  Var io = Var::make("io"), ii = Var::make("ii");
  Expr idx = io * 16 + ii;
  return PrimFunc::make(name, {A, B, C}, 2,
                        loop(io, 16,
                             loop(ii, 16, lower::buffer_store(C, idx, load(A, idx) + load(B, idx)),
                                  ForKind::kVectorized)));
}

std::string c_of(const PrimFunc& f, const ir::Target& target = ir::Target::parse("c")) {
  return generate_c({lower::run_pipeline(f)}, target);
}

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

int occurrences(const std::string& text, const std::string& part) {
  int n = 0;
  for (size_t at = text.find(part); at != std::string::npos; at = text.find(part, at + 1)) ++n;
  return n;
}

TEST(CCodegen, KernelSignatureAndVectorCode) {
  // Registers of 64 bytes hold the sixteen lanes.
  std::string c = c_of(vadd(), ir::Target::parse("c -mattr=avx512f"));
  // The body takes restrict parameters; the exported function unpacks args.
  EXPECT_TRUE(contains(c,
                       "static int32_t tt_kernel_vadd(const float* restrict A, "
                       "const float* restrict B, float* restrict C) {"))
      << c;
  EXPECT_TRUE(
      contains(c,
               "int32_t vadd(void** args) {\n  return tt_kernel_vadd((const float*)args[0], "
               "(const float*)args[1], (float*)args[2]);\n}"))
      << c;
  EXPECT_TRUE(contains(c, "typedef float tt_f32x16 __attribute__((vector_size(64)));")) << c;
  EXPECT_TRUE(contains(c, "*(tt_f32x16_u*)(C + io * 16) = ")) << c;
  EXPECT_TRUE(contains(c, "(*(const tt_f32x16_u*)(A + io * 16))")) << c;
  EXPECT_TRUE(contains(c, "  return 0;\n}")) << c;
}

TEST(CCodegen, ConditionsThatCannotFaultAreCombinedWithoutBranches) {
  // The padding test of a convolution: bounds of index arithmetic, joined
  // by & (no branch per bound); a test that reads memory or divides by a
  // variable keeps && so that it runs only when the tests before it pass.
  Var i = Var::make("i");
  Expr in_bounds = ir::logical_and(i >= 1, i < 255);
  Expr reads = ir::logical_and(in_bounds, load(A, i) > Expr(0.0f));
  Expr divides = ir::logical_and(i > 0, ir::floordiv(Expr(256), i) > 2);
  PrimFunc f = PrimFunc::make(
      "pad", {A, B, C}, 2,
      lower::seq(
          {loop(i, 256, lower::buffer_store(C, i, ir::select(in_bounds, load(A, i - 1), 0.0f))),
           loop(i, 256, lower::buffer_store(B, i, ir::select(reads, load(A, i), 1.0f))),
           loop(i, 256, lower::buffer_store(C, i, ir::select(divides, 2.0f, 3.0f)))}));
  // Not through the pipeline, whose passes may take the tests out of loops.
  std::string c = generate_c({f}, ir::Target::parse("c"));
  EXPECT_TRUE(contains(c, "C[i] = (i >= 1 & i < 255) ?")) << c;
  EXPECT_TRUE(contains(c, "(i_1 >= 1 & i_1 < 255 && A[i_1] > 0.0f) ?")) << c;
  EXPECT_TRUE(contains(c, "(i_2 > 0 && tt_floordiv_i32(256, i_2) > 2) ?")) << c;
}

TEST(CCodegen, ASelectWhoseConditionIsTheSameInEveryLaneEvaluatesOneSide) {
  // A row of a matrix chosen by an outer loop (a Winograd transform's): the
  // sides read memory several times, so only the chosen one is evaluated; a
  // padding select's single load stays a blend without a branch.
  Var r = Var::make("r"), io = Var::make("io"), ii = Var::make("ii");
  Expr idx = io * 16 + ii;
  Expr row = ir::select(r == 0, load(A, idx) + load(B, idx),
                        ir::select(r == 1, load(A, idx) - load(B, idx), load(B, idx)));
  Expr pad = ir::select(io * r >= 3, load(A, idx), 0.0f);
  PrimFunc f = PrimFunc::make(
      "rows", {A, B, C}, 2,
      loop(r, 3,
           loop(io, 16,
                loop(ii, 16, lower::buffer_store(C, idx, row + pad), ForKind::kVectorized))));
  std::string c = c_of(f, ir::Target::parse("c -mattr=avx512f"));
  EXPECT_TRUE(contains(c, "(r == 0) ? ")) << c;
  EXPECT_TRUE(contains(c, " : (tt_f32x16)((r == 1) ? ")) << c;
  EXPECT_TRUE(contains(c, "tt_broadcast_i32x16(-(io * r >= 3))")) << c;
  EXPECT_FALSE(contains(c, "-(r == 0)")) << c;
}

TEST(CCodegen, VectorsWiderThanTheRegistersAreCutToTheirWidth) {
  std::string narrow = c_of(vadd(), ir::Target::parse("c -mattr=avx2"));
  EXPECT_FALSE(contains(narrow, "tt_f32x16")) << narrow;
  EXPECT_TRUE(contains(narrow, "*(tt_f32x8_u*)(C + io * 16) = ")) << narrow;
  EXPECT_TRUE(contains(narrow, "*(tt_f32x8_u*)(C + io * 16 + 8) = ")) << narrow;
  // The plain target has SSE's 16 bytes.
  EXPECT_EQ(occurrences(c_of(vadd()), "*(tt_f32x4_u*)(C + "), 4);
}

TEST(CCodegen, ComparisonsWiderThanTheRegistersGoLaneByLane) {
  // GCC turns a vector comparison wider than the registers into one scalar
  // compare per lane; a loop over the lanes becomes a compare per register.
  // Vectors are that wide only when split_wide_vectors does not run; the
  // comparison stays only when partition_loops does not split the loop at it.
  ir::PassContextGuard guard(ir::PassContext::make(ir::PassContextOptions()
                                                       .with_disabled("split_wide_vectors")
                                                       .with_disabled("partition_loops")));
  Var io = Var::make("io"), ii = Var::make("ii");
  Expr idx = io * 16 + ii;
  Expr a = load(A, idx), b = load(B, idx);
  PrimFunc f = PrimFunc::make(
      "wide", {A, B, C}, 2,
      loop(io, 16,
           loop(ii, 16,
                lower::buffer_store(C, idx,
                                    ir::max(a, b) * ir::min(a, b) + ir::select(ii < 8, 1.0f, 2.0f)),
                ForKind::kVectorized)));
  std::string narrow = c_of(f, ir::Target::parse("c -mattr=avx2"));
  for (const char* helper : {"tt_lt_i32x16(", "tt_vmax_f32x16(", "tt_vmin_f32x16("}) {
    EXPECT_TRUE(contains(narrow, helper)) << helper << "\n" << narrow;
  }
  // min and max keep fmin/fmax's rule for NaN.
  EXPECT_TRUE(contains(narrow, "r[l] = (a[l] > b[l] || b[l] != b[l]) ? a[l] : b[l];")) << narrow;
  std::string wide = c_of(f, ir::Target::parse("c -mattr=avx512f"));
  EXPECT_FALSE(contains(wide, "tt_lt_i32x16")) << wide;
  EXPECT_FALSE(contains(wide, "tt_vmax_f32x16")) << wide;
}

TEST(CCodegen, DisableVectorizeChangesTheCode) {
  std::string vector = c_of(vadd());
  ir::PassContextGuard guard(
      ir::PassContext::make(ir::PassContextOptions().with_config("tir.disable_vectorize", true)));
  std::string scalar = c_of(vadd());
  EXPECT_NE(vector, scalar);
  EXPECT_FALSE(contains(scalar, "tt_f32x16")) << scalar;
  EXPECT_FALSE(contains(scalar, "#pragma omp simd")) << scalar;
  EXPECT_TRUE(contains(scalar, "for (int64_t ii = 0; ii < 16; ++ii) {")) << scalar;
  EXPECT_TRUE(contains(scalar, "C[io * 16 + ii] = A[io * 16 + ii] + B[io * 16 + ii];")) << scalar;
}

TEST(CCodegen, DisabledVectorizePassLeavesCompilerHint) {
  ir::PassContextGuard guard(
      ir::PassContext::make(ir::PassContextOptions().with_disabled("vectorize")));
  std::string c = c_of(vadd());
  EXPECT_TRUE(contains(c, "#pragma omp simd\n    for (int64_t ii = 0; ii < 16; ++ii) {")) << c;
}

TEST(CCodegen, MaxUnrollStepChangesReplicatedStatements) {
  Var i = Var::make("i");
  PrimFunc f =
      PrimFunc::make("unrolled", {A, C}, 1,
                     loop(i, 16, lower::buffer_store(C, i, load(A, i) * 2.0f), ForKind::kUnrolled));
  std::string unrolled = c_of(f);
  EXPECT_EQ(occurrences(unrolled, "C["), 16) << unrolled;
  auto with_max_step = [&](int64_t max_step) {
    ir::PassContextGuard guard(ir::PassContext::make(
        ir::PassContextOptions().with_config("tir.max_unroll_step", max_step)));
    return c_of(f);
  };
  // Too long to replicate under 8, but the hint's 8 copies fit.
  std::string hinted = with_max_step(8);
  EXPECT_EQ(occurrences(hinted, "C["), 1) << hinted;
  EXPECT_TRUE(contains(hinted, "#pragma GCC unroll 8\n  for (int64_t i = 0; i < 16; ++i) {"))
      << hinted;
  // Under 4 they do not: a plain loop.
  std::string serial = with_max_step(4);
  EXPECT_EQ(occurrences(serial, "C["), 1) << serial;
  EXPECT_FALSE(contains(serial, "#pragma GCC unroll")) << serial;
}

TEST(CCodegen, OutermostParallelLoopOnly) {
  Var i = Var::make("i"), j = Var::make("j");
  PrimFunc f = PrimFunc::make(
      "par", {A, C}, 1,
      loop(i, 16,
           loop(j, 16, lower::buffer_store(C, i * 16 + j, load(A, i * 16 + j)), ForKind::kParallel),
           ForKind::kParallel));
  std::string c = c_of(f, ir::Target::parse("c -num-cores=4"));
  // One loop on the library's threads: the outer one, its body a function
  // of restrict parameters called over ranges of i.
  EXPECT_EQ(occurrences(c, "tt_parallel_for(16, "), 1) << c;
  EXPECT_TRUE(contains(c,
                       "void vtt_parallel_par(int64_t i, float* restrict C, "
                       "const float* restrict A) {"))
      << c;
  EXPECT_TRUE(contains(c, "/* parallel loop inside a parallel or simd loop: runs serially */"))
      << c;
  EXPECT_EQ(occurrences(c, "#pragma omp"), 0) << c;
  EXPECT_NE(c.find("static int32_t tt_num_threads = 4;"), std::string::npos) << c;
  // One core: no threads at all.
  std::string one = c_of(f, ir::Target::parse("c"));
  EXPECT_FALSE(contains(one, "tt_parallel_for")) << one;
  EXPECT_FALSE(contains(one, "pthread")) << one;
}

TEST(CCodegen, NoOpenMPConstructInsideASimdLoop) {
  Var i = Var::make("i"), j = Var::make("j");
  // Loops the vectorize pass keeps as hinted loops (a log has no vector form).
  PrimFunc f =
      PrimFunc::make("nested", {A, C}, 1,
                     loop(i, 4,
                          loop(j, 4, lower::buffer_store(C, i * 4 + j, ir::log(load(A, i * 4 + j))),
                               ForKind::kVectorized),
                          ForKind::kVectorized));
  std::string c = c_of(f, ir::Target::parse("c -num-cores=2"));
  EXPECT_EQ(occurrences(c, "#pragma omp"), 1) << c;
  EXPECT_TRUE(contains(c, "#pragma omp simd\n  for (int64_t i = 0;")) << c;
}

TEST(CCodegen, SmallAllocationsOnTheStackLargeOnTheHeap) {
  Var i = Var::make("i");
  auto staged = [&](int64_t size) {
    Buffer t = Buffer::make("T", DataType::float32(), {size}, {}, "local");
    return PrimFunc::make(
        "staged", {A, C}, 1,
        lower::allocate(t, lower::seq({loop(i, 16, lower::buffer_store(t, i, load(A, i))),
                                       loop(i, 16, lower::buffer_store(C, i, load(t, i)))})));
  };
  std::string small = c_of(staged(1024));
  EXPECT_TRUE(contains(small, "  float T[1024] __attribute__((aligned(16)));\n")) << small;
  std::string large = c_of(staged(65536));
  EXPECT_TRUE(contains(large, "float* restrict T = (float*)tt_alloc(262144);")) << large;
  EXPECT_TRUE(contains(large, "  free(T);\n")) << large;
}

TEST(CCodegen, NamesBecomeUniqueCIdentifiers) {
  Buffer keyword = Buffer::make("float", DataType::float32(), {16});
  Buffer dotted = Buffer::make("out.0", DataType::float32(), {16});
  Var i1 = Var::make("i"), i2 = Var::make("i");
  PrimFunc f = PrimFunc::make(
      "exp", {keyword, dotted}, 1,
      lower::seq({loop(i1, 16, lower::buffer_store(dotted, i1, load(keyword, i1))),
                  loop(i2, 16, lower::buffer_store(dotted, i2, load(dotted, i2) * 2.0f))}));
  EXPECT_EQ(c_function_name("exp"), "exp_kernel");
  EXPECT_EQ(c_function_name("conv2d_nchw"), "conv2d_nchw");
  std::string c = c_of(f);
  EXPECT_TRUE(contains(c, "int32_t exp_kernel(void** args)")) << c;
  EXPECT_TRUE(contains(c, "(const float* restrict float_v, float* restrict out_0)")) << c;
  EXPECT_TRUE(contains(c, "for (int64_t i = 0;")) << c;
  EXPECT_TRUE(contains(c, "for (int64_t i_1 = 0;")) << c;
}

TEST(CCodegen, HalfPrecisionConvertsOnLoadAndStore) {
  Buffer h = Buffer::make("H", DataType::float16(), {16});
  Buffer bf = Buffer::make("BF", DataType::bfloat16(), {16});
  Var i = Var::make("i");
  PrimFunc f = PrimFunc::make(
      "half", {h, bf}, 1,
      loop(i, 16, lower::buffer_store(bf, i, ir::cast(DataType::bfloat16(), load(h, i)) * 2.0f)));
  std::string c = c_of(f);
  EXPECT_TRUE(contains(c, "(const _Float16* restrict H, uint16_t* restrict BF)")) << c;
  EXPECT_TRUE(contains(c, "BF[i] = tt_f32_to_bf16(")) << c;
  EXPECT_TRUE(contains(c, "tt_f16_to_f32(H[i])")) << c;
}

TEST(CCodegen, Errors) {
  Var i = Var::make("i"), n = Var::make("n");
  PrimFunc free_var = PrimFunc::make("f", {A, C}, 1, lower::buffer_store(C, n, 1.0f));
  EXPECT_TT_ERROR(generate_c({free_var}, ir::Target::parse("c")), kInvalidArgument,
                  "function 'f': variable 'n' is used outside its scope");
  Buffer t = Buffer::make("T", DataType::float32(), {4}, {}, "local");
  PrimFunc stray = PrimFunc::make("g", {A, C}, 1, lower::buffer_store(t, 0, 1.0f));
  EXPECT_TT_ERROR(generate_c({stray}, ir::Target::parse("c")), kInvalidArgument,
                  "buffer 'T' is used outside its allocation");
  EXPECT_TT_ERROR(generate_c({vadd("k.1"), vadd("k_1")}, ir::Target::parse("c")), kInvalidArgument,
                  "both become the C function 'k_1'");
  EXPECT_TT_ERROR(generate_c({vadd()}, ir::Target::parse("cuda")), kInvalidArgument,
                  "target of kind 'c'");
}

bool has_flag(const std::vector<std::string>& flags, const std::string& flag) {
  return std::find(flags.begin(), flags.end(), flag) != flags.end();
}

TEST(CCodegen, CompileFlags) {
  auto native = compile_flags(ir::Target::parse("native"));
  for (const char* flag : {"-O3", "-fPIC", "-shared", "-fopenmp", "-fwrapv", "-lm"}) {
    EXPECT_TRUE(has_flag(native, flag)) << flag;
  }
#if defined(__x86_64__)
  EXPECT_TRUE(has_flag(native, "-march=native"));
  // GCC's own preference for the CPU may be narrower than the target's vectors.
  int64_t native_bits = ir::hardware_params(ir::Target::parse("native"))->vector_bytes * 8;
  EXPECT_TRUE(has_flag(native, "-mprefer-vector-width=" + std::to_string(native_bits)));
  // Another CPU: only the features it names.
  auto avx2 = compile_flags(ir::Target::parse("c -mcpu=other -mattr=avx2,fma -cflags=\"-O2 -g\""));
  EXPECT_TRUE(has_flag(avx2, "-march=x86-64"));
  EXPECT_TRUE(has_flag(avx2, "-mavx2"));
  EXPECT_TRUE(has_flag(avx2, "-mfma"));
  EXPECT_FALSE(has_flag(avx2, "-march=native"));
  EXPECT_TRUE(has_flag(avx2, "-mprefer-vector-width=256"));
  EXPECT_FALSE(has_flag(avx2, "-mprefer-vector-width=512"));
  // The target's -cflags come last, so -O2 overrides -O3.
  EXPECT_EQ(avx2.back(), "-g");
  EXPECT_EQ(avx2[avx2.size() - 2], "-O2");
  auto narrow = compile_flags(ir::Target::parse("c -mattr=avx512f -vector-width=32"));
  EXPECT_TRUE(has_flag(narrow, "-mprefer-vector-width=256"));
  EXPECT_TRUE(has_flag(narrow, "-mavx512f"));
#endif
}

}  // namespace
}  // namespace tensortune::codegen
