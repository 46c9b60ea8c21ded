#include "tensortune/lower/stmt.h"

#include <sstream>

#include "tensortune/support/checked.h"

namespace tensortune::lower {

void ForNode::declare(FieldList<ForNode>& f) {
  f.def("loop_var", &ForNode::loop_var, kBinds)
      .def("min", &ForNode::min)
      .def("extent", &ForNode::extent)
      .def("for_kind", &ForNode::for_kind)
      .def("body", &ForNode::body)
      .validate(
          [](const ForNode& n) { for_loop(n.loop_var, n.min, n.extent, n.for_kind, n.body); });
}
void IfThenElseNode::declare(FieldList<IfThenElseNode>& f) {
  f.def("condition", &IfThenElseNode::condition)
      .def("then_case", &IfThenElseNode::then_case)
      .def("else_case", &IfThenElseNode::else_case)
      .validate(
          [](const IfThenElseNode& n) { if_then_else(n.condition, n.then_case, n.else_case); });
}
void AllocateNode::declare(FieldList<AllocateNode>& f) {
  f.def("buffer", &AllocateNode::buffer)
      .def("body", &AllocateNode::body)
      .validate([](const AllocateNode& n) { allocate(n.buffer, n.body); });
}
void BufferStoreNode::declare(FieldList<BufferStoreNode>& f) {
  f.def("buffer", &BufferStoreNode::buffer)
      .def("index", &BufferStoreNode::index)
      .def("value", &BufferStoreNode::value)
      .validate([](const BufferStoreNode& n) { buffer_store(n.buffer, n.index, n.value); });
}
void SeqNode::declare(FieldList<SeqNode>& f) {
  f.def("stmts", &SeqNode::stmts).validate([](const SeqNode& n) {
    for (const auto& s : n.stmts) TT_CHECK(s, kInvalidArgument, "null statement in a sequence");
  });
}
void LetStmtNode::declare(FieldList<LetStmtNode>& f) {
  f.def("var", &LetStmtNode::var, kBinds)
      .def("value", &LetStmtNode::value)
      .def("body", &LetStmtNode::body)
      .validate([](const LetStmtNode& n) { let_stmt(n.var, n.value, n.body); });
}
void EvaluateNode::declare(FieldList<EvaluateNode>& f) {
  f.def("value", &EvaluateNode::value).validate([](const EvaluateNode& n) { evaluate(n.value); });
}
void PrimFuncNode::declare(FieldList<PrimFuncNode>& f) {
  f.def("name", &PrimFuncNode::name)
      .def("params", &PrimFuncNode::params)
      .def("num_inputs", &PrimFuncNode::num_inputs)
      .def("body", &PrimFuncNode::body)
      .validate(
          [](const PrimFuncNode& n) { PrimFunc::make(n.name, n.params, n.num_inputs, n.body); });
}

TT_REGISTER_NODE(ForNode);
TT_REGISTER_NODE(IfThenElseNode);
TT_REGISTER_NODE(AllocateNode);
TT_REGISTER_NODE(BufferStoreNode);
TT_REGISTER_NODE(SeqNode);
TT_REGISTER_NODE(LetStmtNode);
TT_REGISTER_NODE(EvaluateNode);
TT_REGISTER_NODE(PrimFuncNode);

Stmt for_loop(Var loop_var, Expr min, Expr extent, ForKind kind, Stmt body) {
  TT_CHECK(loop_var && min && extent && body, kInvalidArgument,
           "a loop needs a variable, bounds and a body");
  TT_CHECK(min.dtype().is_integer() && extent.dtype().is_integer() && loop_var->dtype.is_integer(),
           kTypeMismatch, "loop '", loop_var->name, "' must have integer bounds");
  auto n = make_node<ForNode>();
  n->loop_var = std::move(loop_var);
  n->min = std::move(min);
  n->extent = std::move(extent);
  n->for_kind = kind;
  n->body = std::move(body);
  return Stmt(n);
}

Stmt if_then_else(Expr condition, Stmt then_case, Stmt else_case) {
  TT_CHECK(condition && then_case, kInvalidArgument, "if needs a condition and a body");
  TT_CHECK(condition.dtype() == DataType::boolean(), kTypeMismatch,
           "an if condition must be a scalar bool, got ", condition.dtype().str());
  auto n = make_node<IfThenElseNode>();
  n->condition = std::move(condition);
  n->then_case = std::move(then_case);
  n->else_case = std::move(else_case);
  return Stmt(n);
}

Stmt allocate(Buffer buffer, Stmt body) {
  TT_CHECK(buffer && body, kInvalidArgument, "an allocation needs a buffer and a body");
  auto n = make_node<AllocateNode>();
  n->buffer = std::move(buffer);
  n->body = std::move(body);
  return Stmt(n);
}

Stmt buffer_store(Buffer buffer, Expr index, Expr value) {
  TT_CHECK(buffer && index && value, kInvalidArgument,
           "a store needs a buffer, an index and a value");
  TT_CHECK(index.dtype().is_integer(), kTypeMismatch, "store index into '", buffer->name,
           "' must be an integer");
  TT_CHECK(value.dtype().element_of() == buffer->dtype, kTypeMismatch, "storing ",
           value.dtype().str(), " into '", buffer->name, "' of ", buffer->dtype.str());
  TT_CHECK(value.dtype().lanes() == index.dtype().lanes(), kTypeMismatch, "store into '",
           buffer->name, "': ", index.dtype().lanes(), " index lanes but ", value.dtype().lanes(),
           " value lanes");
  auto n = make_node<BufferStoreNode>();
  n->buffer = std::move(buffer);
  n->index = std::move(index);
  n->value = std::move(value);
  return Stmt(n);
}

Stmt seq(std::vector<Stmt> stmts) {
  std::vector<Stmt> flat;
  for (auto& s : stmts) {
    TT_CHECK(s, kInvalidArgument, "null statement in a sequence");
    if (s->kind() == StmtKind::kSeq) {
      const auto& inner = static_cast<const SeqNode&>(*s).stmts;
      flat.insert(flat.end(), inner.begin(), inner.end());
    } else {
      flat.push_back(std::move(s));
    }
  }
  if (flat.size() == 1) return flat[0];
  auto n = make_node<SeqNode>();
  n->stmts = std::move(flat);
  return Stmt(n);
}

Stmt let_stmt(Var var, Expr value, Stmt body) {
  TT_CHECK(var && value && body, kInvalidArgument, "a let needs a variable, a value and a body");
  TT_CHECK(var->dtype == value.dtype(), kTypeMismatch, "let '", var->name, "' of ",
           var->dtype.str(), " bound to ", value.dtype().str());
  auto n = make_node<LetStmtNode>();
  n->var = std::move(var);
  n->value = std::move(value);
  n->body = std::move(body);
  return Stmt(n);
}

Stmt evaluate(Expr value) {
  TT_CHECK(value, kInvalidArgument, "evaluate of a null expression");
  auto n = make_node<EvaluateNode>();
  n->value = std::move(value);
  return Stmt(n);
}

PrimFunc PrimFunc::make(std::string name, std::vector<Buffer> params, int num_inputs, Stmt body) {
  TT_CHECK(!name.empty() && body, kInvalidArgument, "a function needs a name and a body");
  TT_CHECK(num_inputs >= 0 && num_inputs <= static_cast<int>(params.size()), kInvalidArgument,
           "function '", name, "': ", num_inputs, " inputs but ", params.size(), " parameters");
  auto n = make_node<PrimFuncNode>();
  n->name = std::move(name);
  n->params = std::move(params);
  n->num_inputs = num_inputs;
  n->body = std::move(body);
  return PrimFunc(n);
}

PrimFunc PrimFunc::with_body(Stmt body) const {
  return make(get()->name, get()->params, get()->num_inputs, std::move(body));
}

// ---- traversal ----

Stmt StmtMutator::mutate(const Stmt& s) {
  if (!s) return s;
  switch (s->kind()) {
#define TT_STMT_MUTATE_CASE(name) \
  case StmtKind::k##name: return rewrite(static_cast<const name##Node&>(*s), s);
    TT_STMT_NODES(TT_STMT_MUTATE_CASE)
#undef TT_STMT_MUTATE_CASE
  }
  TT_ICHECK(false, "bad statement kind");
  return s;
}

Stmt StmtMutator::rewrite(const ForNode& n, const Stmt& self) {
  Expr min = mutate_expr(n.min), extent = mutate_expr(n.extent);
  Stmt body = mutate(n.body);
  if (min.same_as(n.min) && extent.same_as(n.extent) && body.same_as(n.body)) return self;
  return for_loop(n.loop_var, min, extent, n.for_kind, body);
}
Stmt StmtMutator::rewrite(const IfThenElseNode& n, const Stmt& self) {
  Expr cond = mutate_expr(n.condition);
  Stmt then_case = mutate(n.then_case), else_case = mutate(n.else_case);
  if (cond.same_as(n.condition) && then_case.same_as(n.then_case) &&
      else_case.same_as(n.else_case)) {
    return self;
  }
  return if_then_else(cond, then_case, else_case);
}
Stmt StmtMutator::rewrite(const AllocateNode& n, const Stmt& self) {
  Stmt body = mutate(n.body);
  return body.same_as(n.body) ? self : allocate(n.buffer, body);
}
Stmt StmtMutator::rewrite(const BufferStoreNode& n, const Stmt& self) {
  Expr index = mutate_expr(n.index), value = mutate_expr(n.value);
  if (index.same_as(n.index) && value.same_as(n.value)) return self;
  return buffer_store(n.buffer, index, value);
}
Stmt StmtMutator::rewrite(const SeqNode& n, const Stmt& self) {
  std::vector<Stmt> stmts;
  bool changed = false;
  for (const auto& s : n.stmts) {
    stmts.push_back(mutate(s));
    changed |= !stmts.back().same_as(s);
  }
  return changed ? seq(std::move(stmts)) : self;
}
Stmt StmtMutator::rewrite(const LetStmtNode& n, const Stmt& self) {
  Expr value = mutate_expr(n.value);
  Stmt body = mutate(n.body);
  if (value.same_as(n.value) && body.same_as(n.body)) return self;
  return let_stmt(n.var, value, body);
}
Stmt StmtMutator::rewrite(const EvaluateNode& n, const Stmt& self) {
  Expr value = mutate_expr(n.value);
  return value.same_as(n.value) ? self : evaluate(value);
}

void visit_stmts(const Stmt& s, const std::function<void(const Stmt&)>& visit) {
  if (!s) return;
  visit(s);
  dispatch(s, [&](const auto& n) {
    using N = std::decay_t<decltype(n)>;
    if constexpr (std::is_same_v<N, ForNode> || std::is_same_v<N, AllocateNode> ||
                  std::is_same_v<N, LetStmtNode>) {
      visit_stmts(n.body, visit);
    } else if constexpr (std::is_same_v<N, IfThenElseNode>) {
      visit_stmts(n.then_case, visit);
      visit_stmts(n.else_case, visit);
    } else if constexpr (std::is_same_v<N, SeqNode>) {
      for (const auto& x : n.stmts) visit_stmts(x, visit);
    }
  });
}

void visit_stmt_exprs(const Stmt& s, const std::function<void(const Expr&)>& visit) {
  visit_stmts(s, [&](const Stmt& x) {
    dispatch(x, [&](const auto& n) {
      using N = std::decay_t<decltype(n)>;
      if constexpr (std::is_same_v<N, ForNode>) {
        visit(n.min);
        visit(n.extent);
      } else if constexpr (std::is_same_v<N, IfThenElseNode>) {
        visit(n.condition);
      } else if constexpr (std::is_same_v<N, BufferStoreNode>) {
        visit(n.index);
        visit(n.value);
      } else if constexpr (std::is_same_v<N, LetStmtNode> || std::is_same_v<N, EvaluateNode>) {
        visit(n.value);
      }
    });
  });
}

// ---- printing ----

namespace {

void print(std::ostream& os, const Stmt& s, int indent) {
  std::string pad(2 * indent, ' ');
  dispatch(s, [&](const auto& n) {
    using N = std::decay_t<decltype(n)>;
    if constexpr (std::is_same_v<N, ForNode>) {
      os << pad;
      if (n.for_kind != ForKind::kSerial) {
        os << EnumNames<ForKind>::names[static_cast<int>(n.for_kind)] << " ";
      }
      os << "for (" << n.loop_var->name << ", " << ir::to_string(n.min) << ", "
         << ir::to_string(n.extent) << ") {\n";
      print(os, n.body, indent + 1);
      os << pad << "}\n";
    } else if constexpr (std::is_same_v<N, IfThenElseNode>) {
      os << pad << "if " << ir::to_string(n.condition) << " {\n";
      print(os, n.then_case, indent + 1);
      if (n.else_case) {
        os << pad << "} else {\n";
        print(os, n.else_case, indent + 1);
      }
      os << pad << "}\n";
    } else if constexpr (std::is_same_v<N, AllocateNode>) {
      os << pad << "allocate " << n.buffer->name << "[" << Buffer(n.buffer).storage_elements()
         << "] " << n.buffer->dtype.str() << " " << n.buffer->scope << "\n";
      print(os, n.body, indent);
    } else if constexpr (std::is_same_v<N, BufferStoreNode>) {
      os << pad << n.buffer->name << "[" << ir::to_string(n.index)
         << "] = " << ir::to_string(n.value) << "\n";
    } else if constexpr (std::is_same_v<N, SeqNode>) {
      for (const auto& x : n.stmts) print(os, x, indent);
    } else if constexpr (std::is_same_v<N, LetStmtNode>) {
      os << pad << "let " << n.var->name << " = " << ir::to_string(n.value) << "\n";
      print(os, n.body, indent);
    } else if constexpr (std::is_same_v<N, EvaluateNode>) {
      os << pad << ir::to_string(n.value) << "\n";
    }
  });
}

}  // namespace

std::string to_string(const Stmt& s) {
  std::ostringstream os;
  print(os, s, 0);
  return os.str();
}

std::string to_string(const PrimFunc& f) {
  std::ostringstream os;
  os << "func " << f->name << "(";
  for (size_t i = 0; i < f->params.size(); ++i) {
    const auto& b = f->params[i];
    if (i) os << ", ";
    os << b->name << ": " << b->dtype.str() << "[";
    for (size_t d = 0; d < b->shape.size(); ++d) os << (d ? ", " : "") << b->shape[d];
    os << "]";
  }
  os << ") {\n";
  print(os, f->body, 1);
  os << "}\n";
  return os.str();
}

std::vector<int64_t> argument_bytes(const PrimFunc& f) {
  std::vector<int64_t> bytes;
  for (const Buffer& b : f->params) {
    int64_t elements;
    if (b->strides.empty()) {
      elements = checked_elements(b->shape, "parameter '" + b->name + "'");
    } else {
      int64_t last = 0;
      for (size_t d = 0; d < b->shape.size() && d < b->strides.size(); ++d) {
        last = checked_add(last, checked_mul(b->shape[d] - 1, b->strides[d], b->name), b->name);
      }
      elements = checked_add(last, 1, b->name);
    }
    bytes.push_back(checked_mul(elements, b->dtype.bytes(), "parameter '" + b->name + "'"));
  }
  return bytes;
}

}  // namespace tensortune::lower
