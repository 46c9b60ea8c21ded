/// \file
/// The loop-nest IR that schedules lower to and code generators read.
///
/// Semantics: statements run in order; a For runs its body for loop_var =
/// min, min+1, ..., min+extent-1 (kParallel: iterations may run concurrently
/// and must not depend on one another; kVectorized: the body may run as vector
/// operations across iterations; kUnrolled: the body is to be replicated).
/// Allocate gives its buffer fresh, uninitialised storage for the duration of
/// its body (private to each iteration of an enclosing parallel loop).
/// BufferStore writes one element (or, with a vector index, lanes elements) at
/// a flat element index. Every node kind is listed once in TT_STMT_NODES.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "tensortune/ir/buffer.h"
#include "tensortune/ir/expr.h"

namespace tensortune::lower {

using ir::Buffer;
using ir::DataType;
using ir::Expr;
using ir::Var;

#define TT_STMT_NODES(X) \
  X(For)                 \
  X(IfThenElse)          \
  X(Allocate)            \
  X(BufferStore)         \
  X(Seq)                 \
  X(LetStmt)             \
  X(Evaluate)

enum class StmtKind {
#define TT_STMT_ENUM_ENTRY(name) k##name,
  TT_STMT_NODES(TT_STMT_ENUM_ENTRY)
#undef TT_STMT_ENUM_ENTRY
};

struct StmtNode : Object {
  virtual StmtKind kind() const = 0;
};

class Stmt : public Ref<StmtNode> {
 public:
  using Ref<StmtNode>::Ref;
  StmtKind kind() const { return get()->kind(); }
};

#define TT_STMT_NODE(Name, key)                        \
  TT_NODE(Name##Node, key)                             \
  static constexpr StmtKind kKind = StmtKind::k##Name; \
  StmtKind kind() const override { return kKind; }

enum class ForKind { kSerial, kParallel, kVectorized, kUnrolled };

struct ForNode : StmtNode {
  Var loop_var;
  Expr min;
  Expr extent;
  ForKind for_kind = ForKind::kSerial;
  Stmt body;
  TT_STMT_NODE(For, "lower.For")
  static void declare(FieldList<ForNode>& f);
};

struct IfThenElseNode : StmtNode {
  Expr condition;
  Stmt then_case;
  Stmt else_case;  ///< may be null
  TT_STMT_NODE(IfThenElse, "lower.IfThenElse")
  static void declare(FieldList<IfThenElseNode>& f);
};

struct AllocateNode : StmtNode {
  Buffer buffer;
  Stmt body;
  TT_STMT_NODE(Allocate, "lower.Allocate")
  static void declare(FieldList<AllocateNode>& f);
};

struct BufferStoreNode : StmtNode {
  Buffer buffer;
  Expr index;
  Expr value;
  TT_STMT_NODE(BufferStore, "lower.BufferStore")
  static void declare(FieldList<BufferStoreNode>& f);
};

struct SeqNode : StmtNode {
  std::vector<Stmt> stmts;
  TT_STMT_NODE(Seq, "lower.Seq")
  static void declare(FieldList<SeqNode>& f);
};

struct LetStmtNode : StmtNode {
  Var var;
  Expr value;
  Stmt body;
  TT_STMT_NODE(LetStmt, "lower.LetStmt")
  static void declare(FieldList<LetStmtNode>& f);
};

struct EvaluateNode : StmtNode {
  Expr value;
  TT_STMT_NODE(Evaluate, "lower.Evaluate")
  static void declare(FieldList<EvaluateNode>& f);
};

// ---- construction (validating) ----
Stmt for_loop(Var loop_var, Expr min, Expr extent, ForKind kind, Stmt body);
Stmt if_then_else(Expr condition, Stmt then_case, Stmt else_case = Stmt());
Stmt allocate(Buffer buffer, Stmt body);
Stmt buffer_store(Buffer buffer, Expr index, Expr value);
/// A sequence; nested sequences are flattened and a single statement is returned as is.
Stmt seq(std::vector<Stmt> stmts);
Stmt let_stmt(Var var, Expr value, Stmt body);
Stmt evaluate(Expr value);

/// A kernel: buffers passed in (inputs then outputs) and its body.
struct PrimFuncNode : Object {
  std::string name;
  std::vector<Buffer> params;
  int num_inputs = 0;
  Stmt body;
  TT_NODE(PrimFuncNode, "lower.PrimFunc")
  static void declare(FieldList<PrimFuncNode>& f);
};

class PrimFunc : public Ref<PrimFuncNode> {
 public:
  using Ref<PrimFuncNode>::Ref;
  static PrimFunc make(std::string name, std::vector<Buffer> params, int num_inputs, Stmt body);
  /// The same function with another body.
  PrimFunc with_body(Stmt body) const;
};

/// The bytes each parameter of `f` spans (its furthest element, for strided
/// layouts), in order: what a caller must pass it. Checked arithmetic.
std::vector<int64_t> argument_bytes(const PrimFunc& f);

/// Calls `f(const XNode&)` with the concrete node of `s`.
template <class F>
decltype(auto) dispatch(const Stmt& s, F&& f) {
  switch (s->kind()) {
#define TT_STMT_DISPATCH_CASE(name) \
  case StmtKind::k##name: return f(static_cast<const name##Node&>(*s));
    TT_STMT_NODES(TT_STMT_DISPATCH_CASE)
#undef TT_STMT_DISPATCH_CASE
  }
  TT_ICHECK(false, "bad statement kind");
  return f(static_cast<const EvaluateNode&>(*s));
}

/// Default-recursive statement rewriter; returns a node unchanged when its
/// children are, so untouched subtrees stay shared. Expressions go through
/// mutate_expr (identity by default).
class StmtMutator {
 public:
  virtual ~StmtMutator() = default;
  virtual Stmt mutate(const Stmt& s);
  virtual Expr mutate_expr(const Expr& e) { return e; }

 protected:
#define TT_STMT_MUTATOR_METHOD(name) virtual Stmt rewrite(const name##Node& node, const Stmt& self);
  TT_STMT_NODES(TT_STMT_MUTATOR_METHOD)
#undef TT_STMT_MUTATOR_METHOD
};

/// Calls `visit` on every statement, parents before children.
void visit_stmts(const Stmt& s, const std::function<void(const Stmt&)>& visit);

/// Calls `visit` on every expression held directly by a statement of `s`
/// (each top-level expression once; not their sub-expressions).
void visit_stmt_exprs(const Stmt& s, const std::function<void(const Expr&)>& visit);

/// C-like rendering of a statement or a function, for `tensortune lower --emit ir`.
std::string to_string(const Stmt& s);
std::string to_string(const PrimFunc& f);

}  // namespace tensortune::lower

namespace tensortune {
template <>
struct EnumNames<lower::ForKind> {
  static constexpr std::array<std::string_view, 4> names = {"serial", "parallel", "vectorized",
                                                            "unrolled"};
};
}  // namespace tensortune
