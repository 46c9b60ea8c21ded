// The "storage_rewrite" pass alone, and tir.disable_storage_rewrite.
#include <gtest/gtest.h>

#include "lower/pass_test_util.h"
#include "tensortune/ir/pass_context.h"
#include "tensortune/lower/passes.h"

namespace tensortune::lower {
namespace {

using testing::expect_same;
using testing::expect_same_results;
using testing::load;
using testing::loop;

Buffer A = Buffer::make("A", DataType::float32(), {64});
Buffer B = Buffer::make("B", DataType::float32(), {64});

PrimFunc func(Stmt body) { return PrimFunc::make("f", {A, B}, 1, std::move(body)); }

Buffer local(const std::string& name, int64_t size, DataType dtype = DataType::float32()) {
  return Buffer::make(name, dtype, {size}, {}, "local");
}

// T[j] = A[i*16 + j] * 2; B[i*16 + j] = T[j] + 1, over j.
Stmt stage_through(const Buffer& t, const Expr& i, const Var& j) {
  return seq({loop(j, 16, buffer_store(t, j, load(A, i * 16 + j) * 2.0f)),
              loop(j, 16, buffer_store(B, i * 16 + j, load(t, j) + 1.0f))});
}

TEST(StorageRewrite, HoistsAllocationOutOfSerialLoops) {
  Var i = Var::make("i"), j = Var::make("j");
  Buffer t = local("T", 16);
  PrimFunc f = func(loop(i, 4, allocate(t, stage_through(t, i, j))));
  PrimFunc out = storage_rewrite_pass(f);
  expect_same(out->body, allocate(t, loop(i, 4, stage_through(t, i, j))));
  expect_same_results(f, out);
}

TEST(StorageRewrite, KeepsAllocationInsideParallelAndVectorizedLoops) {
  Var i = Var::make("i"), j = Var::make("j");
  Buffer t = local("T", 16);
  for (ForKind kind : {ForKind::kParallel, ForKind::kVectorized}) {
    PrimFunc f = func(loop(i, 4, allocate(t, stage_through(t, i, j)), kind));
    EXPECT_TRUE(storage_rewrite_pass(f).same_as(f));
  }
  // Inside a parallel loop, an allocation is hoisted to the start of its body.
  Var k = Var::make("k");
  PrimFunc g =
      func(loop(k, 2, loop(i, 2, allocate(t, stage_through(t, k * 2 + i, j))), ForKind::kParallel));
  expect_same(
      storage_rewrite_pass(g)->body,
      loop(k, 2, allocate(t, loop(i, 2, stage_through(t, k * 2 + i, j))), ForKind::kParallel));
}

TEST(StorageRewrite, MergesDisjointAllocationsOfOneDtype) {
  Var i = Var::make("i"), j = Var::make("j");
  Buffer t1 = local("T1", 16), t2 = local("T2", 32);
  PrimFunc f = func(loop(
      i, 4, seq({allocate(t1, stage_through(t1, i, j)), allocate(t2, stage_through(t2, i, j))})));
  PrimFunc out = storage_rewrite_pass(f);
  Buffer shared = local("T1", 32);
  expect_same(
      out->body,
      allocate(shared,
               loop(i, 4, seq({stage_through(shared, i, j), stage_through(shared, i, j)}))));
  expect_same_results(f, out);
}

TEST(StorageRewrite, KeepsBuffersThatLiveTogetherOrDifferInDtypeApart) {
  Var i = Var::make("i"), j = Var::make("j");
  Buffer t1 = local("T1", 16), t2 = local("T2", 16), t3 = local("T3", 16, DataType::int32());
  Stmt both = seq({loop(j, 16, buffer_store(t1, j, load(A, j))),
                   loop(j, 16, buffer_store(t2, j, load(t1, j))),
                   loop(j, 16, buffer_store(B, j, load(t2, j)))});
  PrimFunc nested = func(allocate(t1, allocate(t2, both)));
  EXPECT_TRUE(storage_rewrite_pass(nested).same_as(nested));
  Stmt ints = loop(j, 16, buffer_store(t3, j, 1));
  PrimFunc dtypes = func(seq({allocate(t1, stage_through(t1, i * 0, j)), allocate(t3, ints)}));
  PrimFunc out = storage_rewrite_pass(dtypes);
  expect_same(out->body, allocate(t1, allocate(t3, seq({stage_through(t1, i * 0, j), ints}))));
}

TEST(StorageRewrite, DisabledByConfig) {
  Var i = Var::make("i"), j = Var::make("j");
  Buffer t = local("T", 16);
  PrimFunc f = func(loop(i, 4, allocate(t, stage_through(t, i, j))));
  ir::PassContextGuard guard(ir::PassContext::make(
      ir::PassContextOptions().with_config("tir.disable_storage_rewrite", true)));
  EXPECT_TRUE(storage_rewrite_pass(f).same_as(f));
}

}  // namespace
}  // namespace tensortune::lower
