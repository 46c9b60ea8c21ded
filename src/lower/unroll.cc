// The "unroll" pass: see passes.h.
#include "tensortune/lower/passes.h"

#include <algorithm>

#include "lower/pass_util.h"
#include "tensortune/ir/pass_context.h"

namespace tensortune::lower {
namespace {

/// Unrolls bottom-up. `copies` of a statement is how many times the unrolled
/// loops inside it have replicated their innermost bodies (the largest over
/// its parts), so an outer loop of extent e replicates them e * copies times.
class Unroller {
 public:
  explicit Unroller(int64_t max_step) : max_step_(max_step) {}

  Stmt unroll(const Stmt& s, int64_t* copies) {
    *copies = 1;
    return dispatch(s, [&](const auto& n) -> Stmt {
      using N = std::decay_t<decltype(n)>;
      if constexpr (std::is_same_v<N, ForNode>) {
        int64_t inner = 1;
        Stmt body = unroll(n.body, &inner);
        auto extent = ir::as_const_int(n.extent);
        // A vectorized loop the vectorize pass left is a loop over lanes
        // (omp simd, masked where guarded): its body once per lane.
        *copies = n.for_kind == ForKind::kVectorized && extent
                      ? std::max<int64_t>(*extent, 1) * inner
                      : inner;
        if (n.for_kind == ForKind::kUnrolled && max_step_ == 0) {
          return for_loop(n.loop_var, n.min, n.extent, ForKind::kSerial, body);
        }
        if (n.for_kind == ForKind::kUnrolled && extent && *extent * inner <= max_step_) {
          *copies = std::max<int64_t>(*extent, 1) * inner;
          std::vector<Stmt> replicas;
          for (int64_t k = 0; k < *extent; ++k) {
            Expr value = ir::as_const_int(n.min) && *ir::as_const_int(n.min) == 0
                             ? ir::int_imm(k, n.loop_var->dtype)
                             : n.min + ir::int_imm(k, n.loop_var->dtype);
            replicas.push_back(detail::substitute(body, n.loop_var.get(), value));
          }
          return seq(std::move(replicas));
        }
        if (n.for_kind == ForKind::kUnrolled) {
          // Too long to replicate here: the hint asks the C compiler for up to
          // kUnrollHintFactor copies, kept only while they fit the limit. A
          // hint around a large replicated body (3x3 taps around 32 scalar
          // statements, in each of a partitioned loop's parts) made GCC take
          // 9 s over one kernel.
          const int64_t factor = unroll_hint_factor(n.extent);
          if (factor * inner > max_step_) {
            return for_loop(n.loop_var, n.min, n.extent, ForKind::kSerial, body);
          }
          *copies = factor * inner;
        }
        if (body.same_as(n.body)) return s;
        return for_loop(n.loop_var, n.min, n.extent, n.for_kind, body);
      } else if constexpr (std::is_same_v<N, IfThenElseNode>) {
        int64_t a = 1, b = 1;
        Stmt then_case = unroll(n.then_case, &a);
        Stmt else_case = n.else_case ? unroll(n.else_case, &b) : Stmt();
        *copies = std::max(a, b);
        if (then_case.same_as(n.then_case) && else_case.same_as(n.else_case)) return s;
        return if_then_else(n.condition, then_case, else_case);
      } else if constexpr (std::is_same_v<N, AllocateNode>) {
        Stmt body = unroll(n.body, copies);
        return body.same_as(n.body) ? s : allocate(n.buffer, body);
      } else if constexpr (std::is_same_v<N, LetStmtNode>) {
        Stmt body = unroll(n.body, copies);
        return body.same_as(n.body) ? s : let_stmt(n.var, n.value, body);
      } else if constexpr (std::is_same_v<N, SeqNode>) {
        std::vector<Stmt> stmts;
        bool changed = false;
        for (const auto& x : n.stmts) {
          int64_t c = 1;
          stmts.push_back(unroll(x, &c));
          changed |= !stmts.back().same_as(x);
          *copies = std::max(*copies, c);
        }
        return changed ? seq(std::move(stmts)) : s;
      } else {
        return s;
      }
    });
  }

 private:
  int64_t max_step_;
};

}  // namespace

int64_t unroll_hint_factor(const Expr& extent) {
  auto e = ir::as_const_int(extent);
  return e ? std::clamp<int64_t>(*e, 1, kUnrollHintFactor) : kUnrollHintFactor;
}

PrimFunc unroll_pass(const PrimFunc& f) {
  int64_t max_step = ir::PassContext::current()->get_config<int64_t>("tir.max_unroll_step");
  Unroller unroller(std::max<int64_t>(max_step, 0));
  int64_t copies = 1;
  Stmt body = unroller.unroll(f->body, &copies);
  return body.same_as(f->body) ? f : f.with_body(body);
}

// The option this pass reads (TVM's name for it).
TT_REGISTER_CONFIG_OPTION("tir.max_unroll_step", ir::ConfigType::kInt, 64,
                          "unroll loops of at most this many constant iterations; 0 disables");

}  // namespace tensortune::lower
