// The "simplify" pass: see passes.h.
#include "tensortune/lower/passes.h"

#include "lower/pass_util.h"
#include "tensortune/ir/simplify.h"

namespace tensortune::lower {
namespace {

class StmtSimplifier final : public StmtMutator {
 public:
  Expr mutate_expr(const Expr& e) override { return e ? ir::simplify(e) : e; }

 protected:
  using StmtMutator::rewrite;

  Stmt rewrite(const IfThenElseNode& n, const Stmt& self) override {
    Stmt s = StmtMutator::rewrite(n, self);
    const auto& m = static_cast<const IfThenElseNode&>(*s);
    if (auto c = ir::as_const_int(m.condition)) {
      if (*c) return m.then_case;
      return m.else_case ? m.else_case : detail::no_op();
    }
    return s;
  }

  Stmt rewrite(const ForNode& n, const Stmt& self) override {
    Stmt s = StmtMutator::rewrite(n, self);
    const auto& loop = static_cast<const ForNode&>(*s);
    auto extent = ir::as_const_int(loop.extent);
    return (extent && *extent <= 0) || detail::is_no_op(loop.body) ? detail::no_op() : s;
  }
};

}  // namespace

PrimFunc simplify_pass(const PrimFunc& f) {
  StmtSimplifier simplifier;
  Stmt body = simplifier.mutate(f->body);
  return body.same_as(f->body) ? f : f.with_body(body);
}

}  // namespace tensortune::lower
