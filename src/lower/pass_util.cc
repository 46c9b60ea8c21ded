#include "lower/pass_util.h"

#include "tensortune/ir/expr_functor.h"

namespace tensortune::lower::detail {
namespace {

class ExprMapper final : public StmtMutator {
 public:
  explicit ExprMapper(const std::function<Expr(const Expr&)>& rewrite) : rewrite_(rewrite) {}
  Expr mutate_expr(const Expr& e) override { return e ? rewrite_(e) : e; }

 private:
  const std::function<Expr(const Expr&)>& rewrite_;
};

}  // namespace

Stmt map_exprs(const Stmt& s, const std::function<Expr(const Expr&)>& rewrite) {
  ExprMapper mapper(rewrite);
  return mapper.mutate(s);
}

Stmt substitute(const Stmt& s, const std::function<Expr(const ir::VarNode&)>& replacement) {
  return map_exprs(s, [&](const Expr& e) { return ir::substitute(e, replacement); });
}

Stmt substitute(const Stmt& s, const ir::VarNode* var, const Expr& value) {
  return substitute(s, [&](const ir::VarNode& v) { return &v == var ? value : Expr(); });
}

Stmt no_op() { return seq({}); }

bool is_no_op(const Stmt& s) {
  return s->kind() == StmtKind::kSeq && static_cast<const SeqNode&>(*s).stmts.empty();
}

}  // namespace tensortune::lower::detail
