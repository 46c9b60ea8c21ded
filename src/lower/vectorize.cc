// The "vectorize" pass: see passes.h.
//
// A kVectorized loop is handled in three steps: a dependence check (may the
// iterations run together at all?), then the rewrite of its body into vector
// operations, which gives up on anything the C backend has no vector form for,
// and last the fallback: a loop whose iterations are independent but whose
// body could not be rewritten stays kVectorized (the code generator hints it
// to the C compiler's vectorizer), and one whose iterations may interfere
// becomes serial.
#include "tensortune/lower/passes.h"

#include <map>
#include <optional>
#include <set>
#include <vector>

#include "lower/pass_util.h"
#include "tensortune/ir/arith.h"
#include "tensortune/ir/expr_functor.h"
#include "tensortune/ir/pass_context.h"
#include "tensortune/ir/simplify.h"
#include "tensortune/object/structural.h"

namespace tensortune::lower {
namespace {

using ir::BinaryOp;
using ir::ExprKind;
using ir::Intrinsic;

constexpr int64_t kMaxLanes = kMaxVectorLanes;

bool is_power_of_two(int64_t v) { return v > 0 && (v & (v - 1)) == 0; }

// ---- the rewrite into vector operations ----

bool contains_load(const Expr& e) {
  bool found = false;
  ir::visit_pre_order(e, [&](const Expr& x) { found |= x->kind() == ExprKind::kBufferLoad; });
  return found;
}

/// Rewrites the body of one loop into `lanes`-wide vector operations; sets
/// failed() when something has no vector form.
class BodyVectorizer final : public ir::ExprMutator {
 public:
  BodyVectorizer(const ForNode& loop, int lanes)
      : var_(loop.loop_var.get()),
        lanes_(lanes),
        ramp_(ir::ramp(loop.min, ir::make_const(loop.min.dtype(), 1), lanes)) {}

  bool failed() const { return failed_; }

  Stmt vectorize(const Stmt& s) {
    if (failed_) return s;
    return dispatch(s, [&](const auto& n) -> Stmt {
      using N = std::decay_t<decltype(n)>;
      if constexpr (std::is_same_v<N, BufferStoreNode>) {
        Expr index = mutate(n.index), value = mutate(n.value);
        if (!is_unit_ramp(index)) return fail(s);  // scalar or strided store
        if (value.dtype().is_scalar()) value = ir::broadcast(value, lanes_);
        return buffer_store(n.buffer, index, value);
      } else if constexpr (std::is_same_v<N, SeqNode>) {
        std::vector<Stmt> stmts;
        for (const auto& x : n.stmts) stmts.push_back(vectorize(x));
        return seq(std::move(stmts));
      } else if constexpr (std::is_same_v<N, IfThenElseNode>) {
        Expr cond = mutate(n.condition);
        if (!cond.dtype().is_scalar()) return fail(s);
        Stmt then_case = vectorize(n.then_case);
        Stmt else_case = n.else_case ? vectorize(n.else_case) : Stmt();
        return if_then_else(cond, then_case, else_case);
      } else if constexpr (std::is_same_v<N, ForNode>) {
        Expr min = mutate(n.min), extent = mutate(n.extent);
        if (!min.dtype().is_scalar() || !extent.dtype().is_scalar()) return fail(s);
        return for_loop(n.loop_var, min, extent, n.for_kind, vectorize(n.body));
      } else if constexpr (std::is_same_v<N, LetStmtNode>) {
        Expr value = mutate(n.value);
        if (value.dtype().is_scalar()) return let_stmt(n.var, value, vectorize(n.body));
        Var vector_var = Var::make(n.var->name, value.dtype());
        let_vars_[n.var.get()] = vector_var;
        return let_stmt(vector_var, value, vectorize(n.body));
      } else {
        // Allocations (a buffer per lane) and evaluations have no vector form here.
        return fail(s);
      }
    });
  }

 protected:
  using ir::ExprMutator::rewrite;

  Expr rewrite(const ir::VarNode& n, const Expr& self) override {
    if (&n == var_) return ramp_;
    auto it = let_vars_.find(&n);
    return it == let_vars_.end() ? self : Expr(it->second);
  }

  Expr rewrite(const ir::BinaryNode& n, const Expr& self) override {
    Expr a = mutate(n.a), b = mutate(n.b);
    if (a.dtype().is_scalar() && b.dtype().is_scalar()) {
      return a.same_as(n.a) && b.same_as(n.b) ? self : ir::binary(n.op, a, b);
    }
    // Affine integer arithmetic on ramps stays a ramp, so that indices keep
    // their stride visible: ramp(b1, s1) + ramp(b2, s2) = ramp(b1 + b2, s1 + s2).
    if (n.dtype.is_integer()) {
      auto ra = as_ramp(a), rb = as_ramp(b);
      if (ra && rb && (n.op == BinaryOp::kAdd || n.op == BinaryOp::kSub)) {
        return make_ramp(ir::binary(n.op, ra->first, rb->first),
                         ir::binary(n.op, ra->second, rb->second));
      }
      if (n.op == BinaryOp::kMul && ra && b.dtype().is_scalar()) {
        return make_ramp(ra->first * b, ra->second * b);
      }
      if (n.op == BinaryOp::kMul && rb && a.dtype().is_scalar()) {
        return make_ramp(a * rb->first, a * rb->second);
      }
    }
    return ir::binary(n.op, widen(a), widen(b));
  }

  Expr rewrite(const ir::CompareNode& n, const Expr& self) override {
    Expr a = mutate(n.a), b = mutate(n.b);
    if (a.same_as(n.a) && b.same_as(n.b)) return self;
    return ir::compare(n.op, widen(a), widen(b));
  }

  Expr rewrite(const ir::LogicalNode& n, const Expr& self) override {
    Expr a = mutate(n.a), b = mutate(n.b);
    if (a.same_as(n.a) && b.same_as(n.b)) return self;
    return ir::logical(n.op, widen(a), widen(b));
  }

  Expr rewrite(const ir::SelectNode& n, const Expr& self) override {
    Expr c = mutate(n.condition), t = mutate(n.true_value), f = mutate(n.false_value);
    // A vector condition evaluates both sides in every lane, so a load guarded
    // by it (padding, a partial tile) could read out of bounds.
    if (!c.dtype().is_scalar() && (contains_load(n.true_value) || contains_load(n.false_value))) {
      return fail(self);
    }
    if (c.same_as(n.condition) && t.same_as(n.true_value) && f.same_as(n.false_value)) return self;
    if (!c.dtype().is_scalar() || !t.dtype().is_scalar() || !f.dtype().is_scalar()) {
      t = widen(t);
      f = widen(f);
    }
    return ir::select(c, t, f);
  }

  Expr rewrite(const ir::CastNode& n, const Expr& self) override {
    Expr v = mutate(n.value);
    if (v.same_as(n.value)) return self;
    if (v.dtype().is_scalar()) return ir::cast(n.dtype, v);
    // A widening integer cast of a ramp is the ramp of the cast (indices).
    if (auto r = as_ramp(v);
        r && n.dtype.is_integer() && v.dtype().is_integer() && n.dtype.bits() >= v.dtype().bits()) {
      DataType t = n.dtype.element_of();
      return make_ramp(ir::cast(t, r->first), ir::cast(t, r->second));
    }
    return ir::cast(n.dtype.with_lanes(lanes_), v);
  }

  Expr rewrite(const ir::CallNode& n, const Expr& self) override {
    std::vector<Expr> args;
    bool changed = mutate_all(n.args, &args);
    if (!changed) return self;
    bool vector = false;
    for (const auto& a : args) vector |= !a.dtype().is_scalar();
    if (!vector) return ir::call(n.op, std::move(args));
    if (!has_vector_form(n.op, n.dtype)) return fail(self);
    for (auto& a : args) a = widen(a);
    return ir::call(n.op, std::move(args));
  }

  Expr rewrite(const ir::BufferLoadNode& n, const Expr& self) override {
    Expr index = mutate(n.index);
    if (index.same_as(n.index)) return self;
    if (index.dtype().is_scalar() || is_unit_ramp(index)) return ir::buffer_load(n.buffer, index);
    return fail(self);  // a gather
  }

  // Vectors already in the body, and tensor-level nodes, are left to the fallback.
  Expr rewrite(const ir::RampNode&, const Expr& self) override { return fail(self); }
  Expr rewrite(const ir::BroadcastNode&, const Expr& self) override { return fail(self); }
  Expr rewrite(const ir::ReduceNode&, const Expr& self) override { return fail(self); }
  Expr rewrite(const ir::ProducerLoadNode&, const Expr& self) override { return fail(self); }

 private:
  // Overloads rather than a template: clang does not instantiate a member
  // template first used inside the generic lambda of vectorize().
  Stmt fail(const Stmt& self) {
    failed_ = true;
    return self;
  }
  Expr fail(const Expr& self) {
    failed_ = true;
    return self;
  }

  Expr widen(const Expr& e) const { return e.dtype().is_scalar() ? ir::broadcast(e, lanes_) : e; }

  Expr make_ramp(const Expr& base, const Expr& stride) const {
    return ir::ramp(ir::simplify(base), ir::simplify(stride), lanes_);
  }

  /// (base, stride) of a ramp; a scalar integer is a ramp of stride 0.
  std::optional<std::pair<Expr, Expr>> as_ramp(const Expr& e) const {
    if (e->kind() == ExprKind::kRamp) {
      const auto& r = static_cast<const ir::RampNode&>(*e);
      return std::pair{r.base, r.stride};
    }
    if (e.dtype().is_scalar() && e.dtype().is_integer()) {
      return std::pair{e, ir::make_const(e.dtype(), 0)};
    }
    return std::nullopt;
  }

  static bool is_unit_ramp(const Expr& e) {
    if (e->kind() != ExprKind::kRamp) return false;
    auto stride = ir::as_const_int(static_cast<const ir::RampNode&>(*e).stride);
    return stride && *stride == 1;
  }

  const ir::VarNode* var_;
  int lanes_;
  Expr ramp_;
  std::map<const ir::VarNode*, Var> let_vars_;
  bool failed_ = false;
};

/// The constant c with index(v + 1) = index(v) + c for the loop variable v,
/// found with the same ramp algebra the rewrite uses (so casts and constant
/// factors are understood); nullopt when the index is not affine in v.
std::optional<int64_t> stride_of(const Expr& index, const ForNode& loop) {
  BodyVectorizer probe(loop, 2);
  Expr lanes = probe.mutate(index);
  if (probe.failed()) return std::nullopt;
  if (lanes.dtype().is_scalar()) return 0;
  if (lanes->kind() != ExprKind::kRamp) return std::nullopt;
  return ir::as_const_int(static_cast<const ir::RampNode&>(*lanes).stride);
}

// ---- the dependence check ----

struct Access {
  const ir::BufferNode* buffer;
  Expr index;  ///< with let-bound variables inlined
  bool is_store;
};

/// Collects the buffer accesses of a loop body, with the ranges of the loops
/// inside it, and whether every loop and let inside can be described.
class AccessCollector {
 public:
  explicit AccessCollector(const ForNode& loop) : loop_(loop) {}

  void collect(const Stmt& s) {
    dispatch(s, [&](const auto& n) {
      using N = std::decay_t<decltype(n)>;
      if constexpr (std::is_same_v<N, ForNode>) {
        exprs(n.min);
        exprs(n.extent);
        auto min = ir::as_const_int(n.min), extent = ir::as_const_int(n.extent);
        if (min && *min == 0 && extent) {
          inner_ranges_[n.loop_var.get()] = *extent;
        } else {
          // Shift a constant min away; other bounds leave the variable undescribed.
          if (min && extent) {
            Var shifted = Var::make(n.loop_var->name, n.loop_var->dtype);
            inner_ranges_[shifted.get()] = *extent;
            inline_[n.loop_var.get()] = shifted + ir::int_imm(*min, n.loop_var->dtype);
            keep_alive_.push_back(shifted);
          } else {
            undescribed_.insert(n.loop_var.get());
          }
        }
        collect(n.body);
      } else if constexpr (std::is_same_v<N, IfThenElseNode>) {
        exprs(n.condition);
        collect(n.then_case);
        if (n.else_case) collect(n.else_case);
      } else if constexpr (std::is_same_v<N, AllocateNode>) {
        private_buffers_.insert(canonical(n.buffer));
        collect(n.body);
      } else if constexpr (std::is_same_v<N, BufferStoreNode>) {
        exprs(n.index);
        exprs(n.value);
        accesses_.push_back({canonical(n.buffer), inlined(n.index), true});
      } else if constexpr (std::is_same_v<N, SeqNode>) {
        for (const auto& x : n.stmts) collect(x);
      } else if constexpr (std::is_same_v<N, LetStmtNode>) {
        exprs(n.value);
        inline_[n.var.get()] = inlined(n.value);
        collect(n.body);
      } else if constexpr (std::is_same_v<N, EvaluateNode>) {
        exprs(n.value);
      }
    });
  }

  /// True if no two iterations of the loop touch the same element of a
  /// buffer that the body writes (buffers allocated inside are private).
  bool iterations_independent() const {
    std::map<const ir::BufferNode*, Expr> stored_at;
    for (const auto& a : accesses_) {
      if (!a.is_store || private_buffers_.count(a.buffer)) continue;
      auto [it, fresh] = stored_at.emplace(a.buffer, a.index);
      if (fresh && !distinct_per_iteration(a.index)) return false;
    }
    for (const auto& a : accesses_) {
      auto it = stored_at.find(a.buffer);
      if (it == stored_at.end()) continue;
      // Every access of a written buffer is at the same element in one
      // iteration, which no other iteration touches.
      if (!a.index.same_as(it->second) &&
          !equal_with_free_vars_by_identity(ir::simplify(a.index), ir::simplify(it->second))) {
        return false;
      }
    }
    return true;
  }

 private:
  void exprs(const Expr& e) {
    ir::visit_pre_order(e, [&](const Expr& x) {
      if (x->kind() == ExprKind::kBufferLoad) {
        const auto& load = static_cast<const ir::BufferLoadNode&>(*x);
        accesses_.push_back({canonical(load.buffer), inlined(load.index), false});
      }
    });
  }

  /// One node per buffer: structurally equal buffer nodes are the same buffer.
  const ir::BufferNode* canonical(const Buffer& b) {
    for (const auto& known : buffers_) {
      if (known.same_as(b) || structural_equal(known, b)) return known.get();
    }
    buffers_.push_back(b);
    return b.get();
  }

  Expr inlined(const Expr& e) const {
    if (inline_.empty()) return e;
    return ir::substitute(e, [&](const ir::VarNode& v) {
      auto it = inline_.find(&v);
      return it == inline_.end() ? Expr() : it->second;
    });
  }

  // index = c * loop_var + rest, where rest spans at most |c| values over
  // the inner loops: then iteration i touches only [lo + c*i, lo + c*i + |c|).
  bool distinct_per_iteration(const Expr& index) const {
    for (const auto* v : undescribed_) {
      if (ir::uses_var(index, v)) return false;
    }
    auto coeff = stride_of(index, loop_);
    if (!coeff || *coeff == 0) return false;
    const ir::VarNode* var = loop_.loop_var.get();
    Expr zero = ir::int_imm(0, loop_.loop_var->dtype);
    Expr rest = ir::simplify(
        ir::substitute(index, [&](const ir::VarNode& v) { return &v == var ? zero : Expr(); }));
    auto bound = ir::bound_of(rest, inner_ranges_);
    return bound && bound->extent <= (*coeff < 0 ? -*coeff : *coeff);
  }

 private:
  const ForNode& loop_;
  std::vector<Access> accesses_;
  std::vector<Buffer> buffers_;  ///< the canonical nodes
  ir::VarRanges inner_ranges_;
  std::map<const ir::VarNode*, Expr> inline_;
  std::set<const ir::VarNode*> undescribed_;
  std::set<const ir::BufferNode*> private_buffers_;
  std::vector<Var> keep_alive_;  ///< stand-ins for shifted loops, keyed by address above
};

// ---- the pass ----

class LoopVectorizer final : public StmtMutator {
 protected:
  using StmtMutator::rewrite;

  Stmt rewrite(const ForNode& n, const Stmt& self) override {
    // Inner loops first: an inner vectorized loop that stays a loop makes the
    // outer one fall back too.
    Stmt s = StmtMutator::rewrite(n, self);
    if (n.for_kind != ForKind::kVectorized) return s;
    const auto& loop = static_cast<const ForNode&>(*s);

    AccessCollector accesses(loop);
    accesses.collect(loop.body);
    if (!accesses.iterations_independent()) {
      return for_loop(loop.loop_var, loop.min, loop.extent, ForKind::kSerial, loop.body);
    }
    auto extent = ir::as_const_int(loop.extent);
    if (!extent || *extent > kMaxLanes || !is_power_of_two(*extent) || *extent < 2) return s;
    BodyVectorizer vectorizer(loop, static_cast<int>(*extent));
    Stmt body = vectorizer.vectorize(loop.body);
    return vectorizer.failed() ? s : body;
  }
};

/// With "tir.disable_vectorize": every vectorized loop runs serially.
class VectorizeSkipper final : public StmtMutator {
 protected:
  using StmtMutator::rewrite;
  Stmt rewrite(const ForNode& n, const Stmt& self) override {
    Stmt s = StmtMutator::rewrite(n, self);
    if (n.for_kind != ForKind::kVectorized) return s;
    const auto& loop = static_cast<const ForNode&>(*s);
    return for_loop(loop.loop_var, loop.min, loop.extent, ForKind::kSerial, loop.body);
  }
};

}  // namespace

namespace detail {
Stmt vectorize_body(const ForNode& loop) {
  auto extent = ir::as_const_int(loop.extent);
  if (!extent || *extent > kMaxLanes || !is_power_of_two(*extent) || *extent < 2) return Stmt();
  BodyVectorizer vectorizer(loop, static_cast<int>(*extent));
  Stmt body = vectorizer.vectorize(loop.body);
  return vectorizer.failed() ? Stmt() : body;
}
}  // namespace detail

bool has_vector_form(Intrinsic op, DataType t) {
  bool single =
      (t.code() == DataType::Code::kFloat && t.bits() <= 32) || t.code() == DataType::Code::kBFloat;
  switch (op) {
    case Intrinsic::kSqrt:
    case Intrinsic::kRsqrt:
    case Intrinsic::kFabs:
    case Intrinsic::kFloor:
    case Intrinsic::kCeil:
    case Intrinsic::kRound:
    case Intrinsic::kTrunc:
    case Intrinsic::kDot4U8S8: return true;
    case Intrinsic::kExp:
    case Intrinsic::kErf:
    case Intrinsic::kTanh:
    case Intrinsic::kSigmoid: return single;
    case Intrinsic::kLog:
    case Intrinsic::kPow:
    case Intrinsic::kSin:
    case Intrinsic::kCos:
    case Intrinsic::kExp2:
    case Intrinsic::kLog2:
    case Intrinsic::kAtan: return false;
  }
  return false;
}

PrimFunc vectorize_pass(const PrimFunc& f) {
  Stmt body;
  if (ir::PassContext::current()->get_config<bool>("tir.disable_vectorize")) {
    VectorizeSkipper skipper;
    body = skipper.mutate(f->body);
  } else {
    LoopVectorizer vectorizer;
    body = vectorizer.mutate(f->body);
  }
  return body.same_as(f->body) ? f : f.with_body(body);
}

// The option this pass reads (TVM's name for it).
TT_REGISTER_CONFIG_OPTION("tir.disable_vectorize", ir::ConfigType::kBool, false,
                          "lower vectorized loops as serial loops");

}  // namespace tensortune::lower
