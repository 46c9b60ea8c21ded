// Helpers for the lowering pass tests: short builders for loop nests, and a
// check that two kernels compute the same thing (with the reference interpreter).
#pragma once

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "tensortune/lower/interpreter.h"
#include "tensortune/lower/stmt.h"
#include "tensortune/object/structural.h"
#include "tensortune/te/ndarray.h"

namespace tensortune::lower::testing {

/// A loop over [0, extent).
inline Stmt loop(const Var& v, int64_t extent, Stmt body, ForKind kind = ForKind::kSerial) {
  return for_loop(v, 0, ir::int_imm(extent, v->dtype), kind, std::move(body));
}

/// A load of one element.
inline Expr load(const Buffer& b, Expr index) { return ir::buffer_load(b, std::move(index)); }

/// Number of BufferStore statements in `s`.
inline int count_stores(const Stmt& s) {
  int n = 0;
  visit_stmts(s, [&](const Stmt& x) { n += x->kind() == StmtKind::kBufferStore; });
  return n;
}

/// Number of loops of `kind` in `s`.
inline int count_loops(const Stmt& s, ForKind kind) {
  int n = 0;
  visit_stmts(s, [&](const Stmt& x) {
    n += x->kind() == StmtKind::kFor && static_cast<const ForNode&>(*x).for_kind == kind;
  });
  return n;
}

/// Expects structural equality, printing both sides and the first difference otherwise.
inline void expect_same(const Stmt& actual, const Stmt& expected) {
  EXPECT_TRUE(structural_equal(actual, expected))
      << "actual:\n"
      << to_string(actual) << "expected:\n"
      << to_string(expected)
      << "first difference: " << first_difference(actual, expected).value_or("none");
}

/// Runs both kernels (same parameters) with the interpreter on the same
/// random inputs and expects equal outputs.
inline void expect_same_results(const PrimFunc& before, const PrimFunc& after, uint64_t seed = 1) {
  std::vector<te::NDArray> a, b;
  for (size_t i = 0; i < before->params.size(); ++i) {
    const auto& p = before->params[i];
    te::NDArray x = te::NDArray::random(p->dtype, p->shape, seed + i);
    a.push_back(x);
    b.push_back(x);
  }
  std::vector<te::NDArray*> pa, pb;
  for (size_t i = 0; i < a.size(); ++i) {
    pa.push_back(&a[i]);
    pb.push_back(&b[i]);
  }
  interpret(before, pa);
  interpret(after, pb);
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_TRUE(te::allclose(b[i], a[i])) << "parameter " << before->params[i]->name << " differs\n"
                                          << to_string(after);
  }
}

}  // namespace tensortune::lower::testing
