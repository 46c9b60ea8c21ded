// The "vectorize_reductions" pass: see passes.h.
//
// Why: a schedule vectorizes spatial loops only, so a stage whose innermost
// loop is its reduction (a softmax's row maximum and sum, a layer norm's
// mean) folds one element per step into one scalar, a chain of dependent
// additions that the C compiler may not reorder (no -ffast-math). Here the
// loop folds whole vectors into a few register-wide accumulators instead,
// which are combined once at the end, the way a vendor kernel sums a row.
// A float sum is then added up in another order: its result may differ in
// the last bits, as it does between any two schedules that tile the
// reduction differently.
#include <optional>
#include <vector>

#include "lower/pass_util.h"
#include "tensortune/ir/arith.h"
#include "tensortune/ir/expr_functor.h"
#include "tensortune/lower/passes.h"
#include "tensortune/object/structural.h"

namespace tensortune::lower {
namespace {

using ir::BinaryOp;
using ir::ExprKind;

/// At most this many register-wide accumulators: enough to hide the latency
/// of a vector add (3-4 cycles at 2 per cycle) behind independent chains.
constexpr int64_t kMaxAccumulators = 4;

/// The loop `B[index] = B[index] op value(v)` for v in [min, min + extent),
/// with `index` the same in every iteration and `value` not reading B.
struct Reduction {
  const BufferStoreNode* store;
  BinaryOp op;
  Expr value;  ///< the folded-in term
};

bool same_buffer(const Buffer& a, const Buffer& b) {
  return a.same_as(b) || structural_equal(a, b);
}

bool is_same_element(const Expr& e, const BufferStoreNode& store) {
  if (e->kind() != ExprKind::kBufferLoad) return false;
  const auto& load = static_cast<const ir::BufferLoadNode&>(*e);
  return same_buffer(load.buffer, store.buffer) && structural_equal(load.index, store.index);
}

bool reads_buffer(const Expr& e, const Buffer& b) {
  bool found = false;
  ir::visit_pre_order(e, [&](const Expr& x) {
    if (x->kind() == ExprKind::kBufferLoad) {
      found |= same_buffer(static_cast<const ir::BufferLoadNode&>(*x).buffer, b);
    }
  });
  return found;
}

/// Lanes of a register for the dtypes this pass handles (32- and 64-bit
/// numbers, which the C backend computes in their own width); 0 for others.
int64_t register_lanes(DataType t, int64_t vector_bytes) {
  bool number = t.code() == DataType::Code::kFloat || t.code() == DataType::Code::kInt ||
                t.code() == DataType::Code::kUInt;
  if (!t.is_scalar() || !number || (t.bits() != 32 && t.bits() != 64)) return 0;
  return vector_bytes / (t.bits() / 8);
}

/// Matches the reduction in the body of `loop`: lets around one store.
std::optional<Reduction> match(const ForNode& loop) {
  std::vector<const ir::VarNode*> bound{loop.loop_var.get()};
  const StmtNode* s = loop.body.get();
  while (s->kind() == StmtKind::kLetStmt) {
    const auto& let = static_cast<const LetStmtNode&>(*s);
    bound.push_back(let.var.get());
    s = let.body.get();
  }
  if (s->kind() != StmtKind::kBufferStore) return std::nullopt;
  const auto& store = static_cast<const BufferStoreNode&>(*s);
  for (const auto* v : bound) {
    if (ir::uses_var(store.index, v)) return std::nullopt;
  }
  if (store.value->kind() != ExprKind::kBinary) return std::nullopt;
  const auto& fold = static_cast<const ir::BinaryNode&>(*store.value);
  if (fold.op != BinaryOp::kAdd && fold.op != BinaryOp::kMax && fold.op != BinaryOp::kMin) {
    return std::nullopt;
  }
  Expr value;
  if (is_same_element(fold.a, store)) {
    value = fold.b;
  } else if (is_same_element(fold.b, store)) {
    value = fold.a;
  } else {
    return std::nullopt;
  }
  if (reads_buffer(value, store.buffer)) return std::nullopt;
  return Reduction{&store, fold.op, value};
}

/// `body` (lets around the reduction's store) with the store replaced by `store`.
Stmt with_store(const Stmt& body, const Stmt& store) {
  if (body->kind() != StmtKind::kLetStmt) return store;
  const auto& let = static_cast<const LetStmtNode&>(*body);
  return let_stmt(let.var, let.value, with_store(let.body, store));
}

/// A vectorized loop of `lanes` over `lane`, vectorized; null if its body has no vector form.
Stmt vector_loop(const Var& lane, int64_t lanes, const Stmt& body) {
  Stmt loop = for_loop(lane, ir::int_imm(0, lane->dtype), ir::int_imm(lanes, lane->dtype),
                       ForKind::kVectorized, body);
  return detail::vectorize_body(static_cast<const ForNode&>(*loop));
}

class ReductionVectorizer final : public StmtMutator {
 public:
  explicit ReductionVectorizer(int64_t vector_bytes) : vector_bytes_(vector_bytes) {}

 protected:
  using StmtMutator::rewrite;

  Stmt rewrite(const ForNode& n, const Stmt& self) override {
    // Inside a loop left for the C compiler's vectorizer an allocation
    // would be per lane: leave what is there to it.
    if (n.for_kind == ForKind::kVectorized) return self;
    Stmt s = StmtMutator::rewrite(n, self);
    if (n.for_kind != ForKind::kSerial && n.for_kind != ForKind::kUnrolled) return s;
    const auto& loop = static_cast<const ForNode&>(*s);
    auto extent = ir::as_const_int(loop.extent);
    if (!extent) return s;
    auto reduction = match(loop);
    if (!reduction) return s;
    Stmt out = rewrite_reduction(loop, *extent, *reduction);
    return out ? out : s;
  }

 private:
  /// The loop with `lanes` = accumulators × register lanes folded at a time:
  ///   acc[0:lanes] = value(min + 0:lanes)
  ///   for o in [1, extent / lanes): acc[0:lanes] = acc op value(min + o*lanes + 0:lanes)
  ///   acc[0:h] = acc[0:h] op acc[h:2h], halving down to one lane
  ///   B[index] = B[index] op acc[0]
  ///   the last extent % lanes iterations as they were.
  Stmt rewrite_reduction(const ForNode& loop, int64_t extent, const Reduction& r) {
    const BufferStoreNode& store = *r.store;
    DataType t = store.value.dtype();
    int64_t lanes = register_lanes(t, vector_bytes_);
    if (lanes < 2 || extent < lanes) return Stmt();
    // The most accumulators that fit, and of those a count that leaves no
    // scalar iterations over if there is one.
    int64_t accumulators = 0;
    for (int64_t a = kMaxAccumulators; a >= 1; a /= 2) {
      if (a * lanes > extent) continue;
      if (accumulators == 0) accumulators = a;
      if (extent % (a * lanes) == 0) {
        accumulators = a;
        break;
      }
    }
    lanes *= accumulators;

    const DataType it = loop.loop_var->dtype;
    auto c = [&](int64_t v) { return ir::int_imm(v, it); };
    Buffer acc = Buffer::make(store.buffer->name + "_acc", t, {lanes}, {}, "local");
    Var lane = Var::make("lane", it);
    Expr acc_lane = ir::buffer_load(acc, lane);
    auto fold = [&](Expr a, Expr b) { return ir::binary(r.op, std::move(a), std::move(b)); };
    // The lane loop folding iterations first + lane into acc (or setting acc to them).
    auto accumulate = [&](const Expr& first, bool initialize) -> Stmt {
      Stmt update = buffer_store(acc, lane, initialize ? r.value : fold(acc_lane, r.value));
      Stmt body =
          detail::substitute(with_store(loop.body, update), loop.loop_var.get(), first + lane);
      return vector_loop(lane, lanes, body);
    };

    std::vector<Stmt> stmts;
    Stmt first = accumulate(loop.min, true);
    if (!first) return Stmt();
    stmts.push_back(first);
    const int64_t rounds = extent / lanes;
    if (rounds > 1) {
      Var o = Var::make(loop.loop_var->name + "_o", it);
      Stmt next = accumulate(loop.min + o * c(lanes), false);
      if (!next) return Stmt();
      stmts.push_back(for_loop(o, c(1), c(rounds - 1), ForKind::kSerial, next));
    }
    for (int64_t h = lanes / 2; h >= 1; h /= 2) {
      Expr lo = h == 1 ? c(0) : ir::ramp(c(0), c(1), static_cast<int>(h));
      Expr hi = h == 1 ? c(1) : ir::ramp(c(h), c(1), static_cast<int>(h));
      stmts.push_back(
          buffer_store(acc, lo, fold(ir::buffer_load(acc, lo), ir::buffer_load(acc, hi))));
    }
    Expr total = ir::buffer_load(acc, c(0));
    stmts.push_back(buffer_store(store.buffer, store.index,
                                 fold(ir::buffer_load(store.buffer, store.index), total)));
    if (int64_t rest = extent % lanes; rest > 0) {
      stmts.push_back(for_loop(loop.loop_var, loop.min + c(rounds * lanes), c(rest),
                               ForKind::kSerial, loop.body));
    }
    return allocate(acc, seq(std::move(stmts)));
  }

  int64_t vector_bytes_;
};

}  // namespace

PrimFunc vectorize_reductions(const PrimFunc& f, int64_t vector_bytes) {
  ReductionVectorizer vectorizer(vector_bytes);
  Stmt body = vectorizer.mutate(f->body);
  return body.same_as(f->body) ? f : f.with_body(body);
}

}  // namespace tensortune::lower
