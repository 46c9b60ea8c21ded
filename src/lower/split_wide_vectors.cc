// The "split_wide_vectors" pass: see passes.h.
//
// Why a pass: a schedule may vectorize a loop of 16 or 32 lanes on a machine
// whose registers hold 8. GCC's generic vector types accept that, but a value
// of such a type kept across a loop (a register-tile accumulator) is moved
// through the stack piece by piece, which runs ten times slower than the same
// loop written with register-wide vectors. So vector statements are cut into
// register-wide pieces here, where the lanes are still explicit, before the
// C is written.
#include <algorithm>
#include <map>

#include "tensortune/ir/expr_functor.h"
#include "tensortune/ir/simplify.h"
#include "tensortune/lower/passes.h"
#include "tensortune/object/structural.h"

namespace tensortune::lower {
namespace {

using ir::ExprKind;

/// Bytes one lane of `t` takes in a register as the C backend computes it:
/// float16 and bfloat16 compute in float, and bool vectors are int32 masks.
int register_lane_bytes(DataType t) {
  if (t.is_bool() || t.code() == DataType::Code::kBFloat) return 4;
  if (t.code() == DataType::Code::kFloat && t.bits() < 32) return 4;
  return std::max(t.bits() / 8, 1);
}

/// Finds the widest lane, in bytes, of the vectors an expression computes
/// with. Load indices are addresses, not values in registers, so a ramp there
/// does not count.
class LaneWidth final : public ir::ExprMutator {
 public:
  int widest = 0;
  Expr mutate(const Expr& e) override {
    if (!e.dtype().is_scalar()) widest = std::max(widest, register_lane_bytes(e.dtype()));
    return ir::ExprMutator::mutate(e);
  }

 protected:
  using ir::ExprMutator::rewrite;
  Expr rewrite(const ir::BufferLoadNode&, const Expr& self) override { return self; }
};

/// The widest lane, in bytes, of the vectors the statements of `f` store or bind.
int widest_vector_lane(const PrimFunc& f) {
  LaneWidth width;
  visit_stmts(f->body, [&](const Stmt& s) {
    if (s->kind() == StmtKind::kBufferStore) {
      width.mutate(static_cast<const BufferStoreNode&>(*s).value);
    } else if (s->kind() == StmtKind::kLetStmt) {
      width.mutate(static_cast<const LetStmtNode&>(*s).value);
    }
  });
  return width.widest;
}

/// Rewrites vector statements of more than `chunk` lanes into statements of
/// `chunk` lanes each.
class Splitter final : public StmtMutator {
 public:
  explicit Splitter(int chunk) : chunk_(chunk) {}

 protected:
  Stmt rewrite(const BufferStoreNode& n, const Stmt& self) override {
    int lanes = n.value.dtype().lanes();
    if (lanes <= chunk_ || lanes % chunk_ != 0 || n.index.dtype().lanes() != lanes) return self;
    const int pieces = lanes / chunk_;
    if (reads_only_what_it_writes(n)) {
      // Each piece reads what it writes and nothing another piece writes:
      // stores can follow their own loads, which keeps few values live.
      std::vector<Stmt> stores;
      for (int k = 0; k < pieces; ++k) {
        stores.push_back(
            buffer_store(n.buffer, slice(n.index, k * chunk_), slice(n.value, k * chunk_)));
      }
      return seq(std::move(stores));
    }
    // Otherwise every piece is computed before any is stored, as the one wide
    // store would.
    std::vector<Var> parts;
    std::vector<Stmt> stores;
    for (int k = 0; k < pieces; ++k) {
      parts.push_back(
          Var::make("tt_piece" + std::to_string(k), n.value.dtype().with_lanes(chunk_)));
      stores.push_back(buffer_store(n.buffer, slice(n.index, k * chunk_), parts.back()));
    }
    Stmt out = seq(std::move(stores));
    for (int k = pieces - 1; k >= 0; --k) out = let_stmt(parts[k], slice(n.value, k * chunk_), out);
    return out;
  }

  Stmt rewrite(const LetStmtNode& n, const Stmt& self) override {
    int lanes = n.value.dtype().lanes();
    if (lanes <= chunk_ || lanes % chunk_ != 0) return StmtMutator::rewrite(n, self);
    std::vector<Var>& parts = pieces_[n.var.get()];
    for (int k = 0; k < lanes / chunk_; ++k) {
      parts.push_back(
          Var::make(n.var->name + "_" + std::to_string(k), n.value.dtype().with_lanes(chunk_)));
    }
    Stmt out = mutate(n.body);
    for (int k = lanes / chunk_ - 1; k >= 0; --k) {
      out = let_stmt(parts[static_cast<size_t>(k)], slice(n.value, k * chunk_), out);
    }
    return out;
  }

 private:
  /// True if every load of the stored buffer in the value reads exactly the
  /// lanes the store writes (an accumulator update).
  static bool reads_only_what_it_writes(const BufferStoreNode& n) {
    bool only = true;
    ir::visit_pre_order(n.value, [&](const Expr& e) {
      if (e->kind() != ExprKind::kBufferLoad) return;
      const auto& load = static_cast<const ir::BufferLoadNode&>(*e);
      if (load.buffer.get() == n.buffer.get() || load.buffer->name == n.buffer->name) {
        only &= equal_with_free_vars_by_identity(load.index, n.index);
      }
    });
    return only;
  }

  /// Lanes [offset, offset + chunk_) of `e`; a scalar is itself.
  Expr slice(const Expr& e, int offset) {
    if (e.dtype().is_scalar()) return e;
    TT_ICHECK(e.dtype().lanes() % chunk_ == 0 && offset % chunk_ == 0, "slicing ",
              e.dtype().lanes(), " lanes at ", offset, " into ", chunk_);
    switch (e->kind()) {
      case ExprKind::kRamp: {
        const auto& r = static_cast<const ir::RampNode&>(*e);
        Expr base =
            offset == 0
                ? r.base
                : ir::simplify(r.base + r.stride * ir::make_const(r.stride.dtype(), offset));
        return ir::ramp(base, r.stride, chunk_);
      }
      case ExprKind::kBroadcast:
        return ir::broadcast(static_cast<const ir::BroadcastNode&>(*e).value, chunk_);
      case ExprKind::kVar: {
        auto it = pieces_.find(static_cast<const ir::VarNode*>(e.get()));
        TT_ICHECK(it != pieces_.end(), "vector variable ", static_cast<const ir::VarNode&>(*e).name,
                  " is not bound by a split let");
        return it->second.at(static_cast<size_t>(offset / chunk_));
      }
      case ExprKind::kBinary: {
        const auto& b = static_cast<const ir::BinaryNode&>(*e);
        return ir::binary(b.op, slice(b.a, offset), slice(b.b, offset));
      }
      case ExprKind::kCompare: {
        const auto& c = static_cast<const ir::CompareNode&>(*e);
        return ir::compare(c.op, slice(c.a, offset), slice(c.b, offset));
      }
      case ExprKind::kLogical: {
        const auto& l = static_cast<const ir::LogicalNode&>(*e);
        return ir::logical(l.op, slice(l.a, offset), slice(l.b, offset));
      }
      case ExprKind::kNot:
        return ir::logical_not(slice(static_cast<const ir::NotNode&>(*e).a, offset));
      case ExprKind::kSelect: {
        const auto& s = static_cast<const ir::SelectNode&>(*e);
        return ir::select(slice(s.condition, offset), slice(s.true_value, offset),
                          slice(s.false_value, offset));
      }
      case ExprKind::kCast: {
        const auto& c = static_cast<const ir::CastNode&>(*e);
        return ir::cast(c.dtype.with_lanes(chunk_), slice(c.value, offset));
      }
      case ExprKind::kCall: {
        const auto& c = static_cast<const ir::CallNode&>(*e);
        std::vector<Expr> args;
        for (const auto& a : c.args) args.push_back(slice(a, offset));
        return ir::call(c.op, std::move(args));
      }
      case ExprKind::kBufferLoad: {
        const auto& l = static_cast<const ir::BufferLoadNode&>(*e);
        return ir::buffer_load(l.buffer, slice(l.index, offset));
      }
      // A vector constant (simplify folds a comparison of equal vectors into one).
      case ExprKind::kIntImm:
        return ir::int_imm(static_cast<const ir::IntImmNode&>(*e).value,
                           e.dtype().with_lanes(chunk_));
      case ExprKind::kFloatImm:
        return ir::float_imm(static_cast<const ir::FloatImmNode&>(*e).value,
                             e.dtype().with_lanes(chunk_));
      case ExprKind::kReduce:
      case ExprKind::kProducerLoad: break;
    }
    TT_ICHECK(false, "no vector form to slice: ", e);
    return e;
  }

  int chunk_;
  std::map<const ir::VarNode*, std::vector<Var>> pieces_;
};

}  // namespace

PrimFunc split_wide_vectors(const PrimFunc& f, int64_t vector_bytes) {
  int widest = widest_vector_lane(f);
  if (widest == 0) return f;
  // Lanes are powers of two, so a power-of-two chunk divides every wider vector.
  int chunk = 1;
  while (int64_t{chunk} * 2 * widest <= vector_bytes) chunk *= 2;
  if (chunk < 2) return f;
  Stmt body = Splitter(chunk).mutate(f->body);
  return body.same_as(f->body) ? f : f.with_body(body);
}

}  // namespace tensortune::lower
