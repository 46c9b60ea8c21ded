// The "storage_rewrite" pass: see passes.h.
//
// Semantics that make this valid (stmt.h): an Allocate gives fresh,
// uninitialised storage for the duration of its body. So its storage may come
// from anywhere that is not in use meanwhile: moving the allocation out of a
// serial loop changes nothing (each iteration still starts from garbage), and
// two allocations neither of whose scopes contains the other are never live
// at once, so they can share storage. A parallel or vectorized loop is a
// boundary: its iterations may run at the same time, each with its own copy.
#include "tensortune/lower/passes.h"

#include <algorithm>
#include <map>
#include <set>
#include <vector>

#include "lower/pass_util.h"
#include "tensortune/ir/expr_functor.h"
#include "tensortune/ir/pass_context.h"
#include "tensortune/object/structural.h"

namespace tensortune::lower {
namespace {

using BufferKey = const ir::BufferNode*;

/// Buffer -> replacement; a buffer node structurally equal to a key counts
/// as that key (structure, not identity: docs/architecture.md invariant 3).
class BufferMap {
 public:
  void add(const Buffer& from, const Buffer& to) { entries_.emplace_back(from, to); }
  bool empty() const { return entries_.empty(); }
  /// The replacement of `b`, or null.
  Buffer find(const Buffer& b) const {
    for (const auto& [from, to] : entries_) {
      if (from.same_as(b)) return to;
    }
    for (const auto& [from, to] : entries_) {
      if (structural_equal(from, b)) return to;
    }
    return Buffer();
  }

 private:
  std::vector<std::pair<Buffer, Buffer>> entries_;
};

/// Replaces buffers in loads, stores and allocations.
class BufferReplacer final : public StmtMutator {
 public:
  explicit BufferReplacer(const BufferMap& map) : map_(map) {}

  Expr mutate_expr(const Expr& e) override {
    if (!e) return e;
    LoadReplacer loads(map_);
    return loads.mutate(e);
  }

 protected:
  using StmtMutator::rewrite;
  Stmt rewrite(const BufferStoreNode& n, const Stmt& self) override {
    Expr index = mutate_expr(n.index), value = mutate_expr(n.value);
    Buffer to = map_.find(n.buffer);
    if (!to && index.same_as(n.index) && value.same_as(n.value)) return self;
    return buffer_store(to ? to : n.buffer, index, value);
  }
  Stmt rewrite(const AllocateNode& n, const Stmt& self) override {
    Stmt body = mutate(n.body);
    Buffer to = map_.find(n.buffer);
    if (!to && body.same_as(n.body)) return self;
    return allocate(to ? to : n.buffer, body);
  }

 private:
  class LoadReplacer final : public ir::ExprMutator {
   public:
    explicit LoadReplacer(const BufferMap& map) : map_(map) {}

   protected:
    using ir::ExprMutator::rewrite;
    Expr rewrite(const ir::BufferLoadNode& n, const Expr& self) override {
      Expr index = mutate(n.index);
      Buffer to = map_.find(n.buffer);
      if (!to && index.same_as(n.index)) return self;
      return ir::buffer_load(to ? to : n.buffer, index);
    }

   private:
    const BufferMap& map_;
  };

  const BufferMap& map_;
};

bool is_region_boundary(const ForNode& n) {
  return n.for_kind == ForKind::kParallel || n.for_kind == ForKind::kVectorized;
}

/// One region: the function body, or the body of a parallel or vectorized
/// loop. Its allocations (outside nested regions) are taken out, given
/// storage slots, and put back at the start of the region.
class Region {
 public:
  Stmt rewrite(const Stmt& body) {
    Stmt stripped = strip(body);
    assign_slots();
    // Buffers that share a slot, or whose slot grew, are renamed to the slot's buffer.
    BufferMap replace;
    for (const auto& slot : slots_) {
      for (const auto& member : slot.members) {
        if (!member.same_as(slot.buffer)) replace.add(member, slot.buffer);
      }
    }
    Stmt out = stripped;
    if (!replace.empty()) {
      BufferReplacer replacer(replace);
      out = replacer.mutate(out);
    }
    for (auto it = slots_.rbegin(); it != slots_.rend(); ++it) out = allocate(it->buffer, out);
    // Nothing moved or merged: keep the original nodes.
    return equal_with_free_vars_by_identity(out, body) ? body : out;
  }

 private:
  struct Slot {
    Buffer buffer;
    std::vector<Buffer> members;
  };

  Stmt strip(const Stmt& s) {
    return dispatch(s, [&](const auto& n) -> Stmt {
      using N = std::decay_t<decltype(n)>;
      if constexpr (std::is_same_v<N, AllocateNode>) {
        BufferKey key = n.buffer.get();
        if (!conflicts_.count(key)) order_.push_back(n.buffer);
        for (BufferKey open : open_) {
          if (open == key) continue;
          conflicts_[key].insert(open);
          conflicts_[open].insert(key);
        }
        conflicts_[key];
        open_.push_back(key);
        Stmt body = strip(n.body);
        open_.pop_back();
        return body;
      } else if constexpr (std::is_same_v<N, ForNode>) {
        Stmt body;
        if (is_region_boundary(n)) {
          Region inner;
          body = inner.rewrite(n.body);
        } else {
          body = strip(n.body);
        }
        return body.same_as(n.body) ? s : for_loop(n.loop_var, n.min, n.extent, n.for_kind, body);
      } else if constexpr (std::is_same_v<N, IfThenElseNode>) {
        Stmt then_case = strip(n.then_case);
        Stmt else_case = n.else_case ? strip(n.else_case) : Stmt();
        if (then_case.same_as(n.then_case) && else_case.same_as(n.else_case)) return s;
        return if_then_else(n.condition, then_case, else_case);
      } else if constexpr (std::is_same_v<N, LetStmtNode>) {
        Stmt body = strip(n.body);
        return body.same_as(n.body) ? s : let_stmt(n.var, n.value, body);
      } else if constexpr (std::is_same_v<N, SeqNode>) {
        std::vector<Stmt> stmts;
        bool changed = false;
        for (const auto& x : n.stmts) {
          stmts.push_back(strip(x));
          changed |= !stmts.back().same_as(x);
        }
        return changed ? seq(std::move(stmts)) : s;
      } else {
        return s;
      }
    });
  }

  // Greedy, in order of first allocation: each buffer joins the first slot of
  // its dtype none of whose members it is ever live together with.
  void assign_slots() {
    for (const auto& buffer : order_) {
      const auto& conflicts = conflicts_[buffer.get()];
      Slot* home = nullptr;
      for (auto& slot : slots_) {
        if (slot.buffer->dtype != buffer->dtype) continue;
        bool free = std::none_of(slot.members.begin(), slot.members.end(),
                                 [&](const Buffer& m) { return conflicts.count(m.get()); });
        if (free) {
          home = &slot;
          break;
        }
      }
      if (!home) {
        slots_.push_back({buffer, {buffer}});
        continue;
      }
      home->members.push_back(buffer);
      int64_t size = std::max(home->buffer.storage_elements(), buffer.storage_elements());
      // The shared storage is a flat buffer named after its first user;
      // loads and stores use flat indices, so every member fits in it.
      const auto& first = *home->members.front();
      home->buffer = Buffer::make(first.name, first.dtype, {size}, {}, first.scope);
    }
  }

  std::vector<Buffer> order_;  ///< allocated buffers in order of first allocation
  std::map<BufferKey, std::set<BufferKey>> conflicts_;  ///< buffers live together with each
  std::vector<BufferKey> open_;  ///< allocations around the current statement
  std::vector<Slot> slots_;
};

}  // namespace

PrimFunc storage_rewrite_pass(const PrimFunc& f) {
  if (ir::PassContext::current()->get_config<bool>("tir.disable_storage_rewrite")) return f;
  Region region;
  Stmt body = region.rewrite(f->body);
  return body.same_as(f->body) ? f : f.with_body(body);
}

// The option this pass reads (TVM's name for it).
TT_REGISTER_CONFIG_OPTION("tir.disable_storage_rewrite", ir::ConfigType::kBool, false,
                          "keep every intermediate buffer instead of reusing memory");

}  // namespace tensortune::lower
