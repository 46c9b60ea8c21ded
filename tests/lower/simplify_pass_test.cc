// The "simplify" pass alone.
#include <gtest/gtest.h>

#include "lower/pass_test_util.h"
#include "tensortune/lower/passes.h"

namespace tensortune::lower {
namespace {

using testing::expect_same;
using testing::load;
using testing::loop;

Buffer A = Buffer::make("A", DataType::float32(), {64});
Buffer B = Buffer::make("B", DataType::float32(), {64});

TEST(SimplifyPass, FoldsIndicesAndValues) {
  Var i = Var::make("i");
  Stmt body = loop(i, 8, buffer_store(B, (i * 8 + 3) - i * 8 + i, load(A, i + 0) * 1.0f));
  PrimFunc f = PrimFunc::make("f", {A, B}, 1, body);
  PrimFunc out = simplify_pass(f);
  expect_same(out->body, loop(i, 8, buffer_store(B, i + 3, load(A, i))));
}

TEST(SimplifyPass, ConstantConditionsAndEmptyLoopsDisappear) {
  Var i = Var::make("i");
  Stmt store = buffer_store(B, 0, 1.0f);
  Stmt other = buffer_store(B, 1, 2.0f);
  Stmt body = seq({if_then_else(Expr(1) < 2, store, other), if_then_else(Expr(3) < 2, store),
                   if_then_else(Expr(3) < 2, store, other), loop(i, 0, store)});
  PrimFunc out = simplify_pass(PrimFunc::make("f", {A, B}, 1, body));
  expect_same(out->body, seq({store, other}));
}

TEST(SimplifyPass, UnchangedFunctionIsReturnedAsIs) {
  Var i = Var::make("i");
  PrimFunc f = PrimFunc::make("f", {A, B}, 1, loop(i, 64, buffer_store(B, i, load(A, i))));
  EXPECT_TRUE(simplify_pass(f).same_as(f));
}

}  // namespace
}  // namespace tensortune::lower
