// The "vectorize_reductions" pass: a loop folding a term into one element
// becomes vector accumulators folded once at the end, with the same result.
#include <gtest/gtest.h>

#include "lower/pass_test_util.h"
#include "tensortune/lower/passes.h"

namespace tensortune::lower {
namespace {

using testing::count_loops;
using testing::count_stores;
using testing::expect_same_results;
using testing::load;
using testing::loop;

Buffer A = Buffer::make("A", DataType::float32(), {512});
Buffer B = Buffer::make("B", DataType::float32(), {512});
Buffer C = Buffer::make("C", DataType::float32(), {8});

PrimFunc func(Stmt body) { return PrimFunc::make("f", {A, B, C}, 2, std::move(body)); }

/// The allocations of `s`, outermost first.
std::vector<Buffer> allocations(const Stmt& s) {
  std::vector<Buffer> out;
  visit_stmts(s, [&](const Stmt& x) {
    if (x->kind() == StmtKind::kAllocate)
      out.push_back(static_cast<const AllocateNode&>(*x).buffer);
  });
  return out;
}

/// Number of vector stores in `s`.
int count_vector_stores(const Stmt& s) {
  int n = 0;
  visit_stmts(s, [&](const Stmt& x) {
    n += x->kind() == StmtKind::kBufferStore &&
         !static_cast<const BufferStoreNode&>(*x).value.dtype().is_scalar();
  });
  return n;
}

TEST(VectorizeReductions, ASumBecomesFourRegisterWideAccumulators) {
  // C[0] += A[k] for k < 64, with 32-byte registers: 4 x 8 lanes, folded twice.
  Var k = Var::make("k");
  PrimFunc f = func(loop(k, 64, buffer_store(C, 0, load(C, 0) + load(A, k))));
  PrimFunc out = vectorize_reductions(f, 32);
  auto acc = allocations(out->body);
  ASSERT_EQ(acc.size(), 1u) << to_string(out);
  EXPECT_EQ(acc[0]->shape, std::vector<int64_t>{32});
  // The first fold, one more round in a loop, then 32 -> 16 -> 8 -> 4 -> 2 lanes.
  EXPECT_EQ(count_vector_stores(out->body), 6) << to_string(out);
  EXPECT_EQ(count_loops(out->body, ForKind::kSerial), 1) << to_string(out);
  expect_same_results(f, out);
}

TEST(VectorizeReductions, AMaximumWithATailKeepsTheLastIterationsScalar) {
  // Rows of 100 under a row loop: 100 = 3 x 32 + 4.
  Var i = Var::make("i"), k = Var::make("k");
  PrimFunc f = func(
      loop(i, 4,
           seq({buffer_store(C, i, load(A, i * 100)),
                loop(k, 100, buffer_store(C, i, ir::max(load(C, i), load(A, i * 100 + k))))})));
  PrimFunc out = vectorize_reductions(f, 32);
  EXPECT_EQ(allocations(out->body).size(), 1u) << to_string(out);
  // The row loop, the folding rounds, and the 4 iterations left over.
  EXPECT_EQ(count_loops(out->body, ForKind::kSerial), 3) << to_string(out);
  expect_same_results(f, out);
}

TEST(VectorizeReductions, AccumulatorsThatDivideTheExtentArePreferred) {
  // 48 = 3 x (2 x 8): two accumulators and no scalar tail rather than four and a tail of 16.
  Var k = Var::make("k");
  PrimFunc f = func(loop(k, 48, buffer_store(C, 1, load(C, 1) + load(A, k) * load(B, k + 7))));
  PrimFunc out = vectorize_reductions(f, 32);
  auto acc = allocations(out->body);
  ASSERT_EQ(acc.size(), 1u) << to_string(out);
  EXPECT_EQ(acc[0]->shape, std::vector<int64_t>{16});
  EXPECT_EQ(count_loops(out->body, ForKind::kSerial), 1) << to_string(out);
  expect_same_results(f, out);
}

TEST(VectorizeReductions, WiderRegistersTakeMoreLanesEach) {
  Var k = Var::make("k");
  PrimFunc f = func(loop(k, 256, buffer_store(C, 0, ir::min(load(C, 0), load(A, k)))));
  PrimFunc out = vectorize_reductions(f, 64);
  auto acc = allocations(out->body);
  ASSERT_EQ(acc.size(), 1u);
  EXPECT_EQ(acc[0]->shape, std::vector<int64_t>{64});
  expect_same_results(f, out);
}

TEST(VectorizeReductions, LoopsThatAreNotSuchReductionsStayAsTheyAre) {
  Var k = Var::make("k");
  auto unchanged = [](const PrimFunc& f) {
    EXPECT_TRUE(vectorize_reductions(f, 32).same_as(f)) << to_string(f);
  };
  // Shorter than one register.
  unchanged(func(loop(k, 4, buffer_store(C, 0, load(C, 0) + load(A, k)))));
  // The element changes with the loop: not a reduction.
  unchanged(func(loop(k, 8, buffer_store(C, k, load(C, k) + load(A, k)))));
  // The term reads the element's buffer.
  unchanged(func(loop(k, 64, buffer_store(C, 0, load(C, 0) + load(C, 1) * load(A, k)))));
  // A product is not folded.
  unchanged(func(loop(k, 64, buffer_store(C, 0, load(C, 0) * load(A, k)))));
  // A strided term has no vector form (a gather).
  unchanged(func(loop(k, 64, buffer_store(C, 0, load(C, 0) + load(A, k * 8)))));
  // Not innermost: the body is a loop (itself too short to rewrite).
  Var j = Var::make("j");
  unchanged(func(loop(k, 64, loop(j, 4, buffer_store(C, 0, load(C, 0) + load(A, k * 4 + j))))));
  // Inside a loop left to the C compiler's vectorizer.
  unchanged(func(loop(j, 8, loop(k, 64, buffer_store(C, j, load(C, j) + load(A, k * 8 + j))),
                      ForKind::kVectorized)));
}

TEST(VectorizeReductions, AnUnrolledLoopWithAnOffsetIsRewrittenToo) {
  // k over [5, 69): the element folds A[5..68].
  Var k = Var::make("k");
  PrimFunc f = PrimFunc::make("f", {A, B, C}, 2,
                              for_loop(k, ir::int_imm(5), ir::int_imm(64), ForKind::kUnrolled,
                                       buffer_store(C, 2, load(C, 2) + (load(A, k) - load(B, k)))));
  PrimFunc out = vectorize_reductions(f, 32);
  EXPECT_EQ(allocations(out->body).size(), 1u) << to_string(out);
  EXPECT_EQ(count_stores(out->body), 8) << to_string(out);
  expect_same_results(f, out);
}

}  // namespace
}  // namespace tensortune::lower
