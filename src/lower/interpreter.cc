#include "tensortune/lower/interpreter.h"

#include <unordered_map>

#include "tensortune/ir/scalar_semantics.h"

namespace tensortune::lower {
namespace {

using Lanes = std::vector<double>;

class Interpreter {
 public:
  void bind(const Buffer& b, te::NDArray* array) { params_[b.get()] = array; }

  void run(const Stmt& s) {
    dispatch(s, [&](const auto& n) {
      using N = std::decay_t<decltype(n)>;
      if constexpr (std::is_same_v<N, ForNode>) {
        int64_t lo = scalar_int(n.min), extent = scalar_int(n.extent);
        for (int64_t i = lo; i < lo + extent; ++i) {
          vars_[n.loop_var.get()] = {static_cast<double>(i)};
          run(n.body);
        }
        vars_.erase(n.loop_var.get());
      } else if constexpr (std::is_same_v<N, IfThenElseNode>) {
        if (eval(n.condition)[0] != 0) {
          run(n.then_case);
        } else if (n.else_case) {
          run(n.else_case);
        }
      } else if constexpr (std::is_same_v<N, AllocateNode>) {
        auto& storage = locals_[n.buffer.get()];
        storage.assign(static_cast<size_t>(Buffer(n.buffer).storage_elements()), 0.0);
        run(n.body);
        locals_.erase(n.buffer.get());
      } else if constexpr (std::is_same_v<N, BufferStoreNode>) {
        Lanes index = eval(n.index), value = eval(n.value);
        for (size_t l = 0; l < index.size(); ++l)
          store(n.buffer, static_cast<int64_t>(index[l]), value[l]);
      } else if constexpr (std::is_same_v<N, SeqNode>) {
        for (const auto& x : n.stmts) run(x);
      } else if constexpr (std::is_same_v<N, LetStmtNode>) {
        vars_[n.var.get()] = eval(n.value);  // all lanes of a vector let
        run(n.body);
        vars_.erase(n.var.get());
      } else if constexpr (std::is_same_v<N, EvaluateNode>) {
        eval(n.value);
      }
    });
  }

 private:
  int64_t scalar_int(const Expr& e) { return static_cast<int64_t>(eval(e)[0]); }

  Lanes eval(const Expr& e) {
    using namespace ir;  // NOLINT: node names
    const DataType t = e.dtype();
    const size_t lanes = static_cast<size_t>(t.lanes());
    return dispatch(e, [&](const auto& n) -> Lanes {
      using N = std::decay_t<decltype(n)>;
      if constexpr (std::is_same_v<N, VarNode>) {
        auto it = vars_.find(&n);
        TT_CHECK(it != vars_.end(), kRuntime, "variable '", n.name, "' is used outside its scope");
        return it->second;
      } else if constexpr (std::is_same_v<N, IntImmNode> || std::is_same_v<N, FloatImmNode>) {
        return {evaluate_scalar(e, nullptr)};
      } else if constexpr (std::is_same_v<N, BinaryNode>) {
        Lanes a = eval(n.a), b = eval(n.b), out(lanes);
        DataType et = t.element_of();
        for (size_t l = 0; l < lanes; ++l) {
          if (et.is_float()) {
            out[l] = apply_float(n.op, et, a[l], b[l]);
          } else {
            auto r = apply_int(n.op, et, static_cast<int64_t>(a[l]), static_cast<int64_t>(b[l]));
            TT_CHECK(r, kRuntime, "integer division by zero in ", to_string(e));
            out[l] = static_cast<double>(*r);
          }
        }
        return out;
      } else if constexpr (std::is_same_v<N, CompareNode>) {
        Lanes a = eval(n.a), b = eval(n.b), out(lanes);
        for (size_t l = 0; l < lanes; ++l) out[l] = apply_compare(n.op, n.a.dtype(), a[l], b[l]);
        return out;
      } else if constexpr (std::is_same_v<N, LogicalNode>) {
        Lanes a = eval(n.a), b = eval(n.b), out(lanes);
        for (size_t l = 0; l < lanes; ++l) {
          out[l] = n.op == LogicalOp::kAnd ? (a[l] != 0 && b[l] != 0) : (a[l] != 0 || b[l] != 0);
        }
        return out;
      } else if constexpr (std::is_same_v<N, NotNode>) {
        Lanes a = eval(n.a);
        for (auto& x : a) x = x == 0;
        return a;
      } else if constexpr (std::is_same_v<N, SelectNode>) {
        Lanes c = eval(n.condition), a = eval(n.true_value), b = eval(n.false_value), out(lanes);
        for (size_t l = 0; l < lanes; ++l) out[l] = c[l] != 0 ? a[l] : b[l];
        return out;
      } else if constexpr (std::is_same_v<N, CastNode>) {
        Lanes a = eval(n.value);
        for (auto& x : a) x = convert_scalar(n.value.dtype().element_of(), t.element_of(), x);
        return a;
      } else if constexpr (std::is_same_v<N, CallNode>) {
        Lanes a = eval(n.args[0]);
        Lanes b = n.args.size() > 1 ? eval(n.args[1]) : Lanes(lanes, 0.0);
        for (size_t l = 0; l < lanes; ++l) a[l] = apply_intrinsic(n.op, t.element_of(), a[l], b[l]);
        return a;
      } else if constexpr (std::is_same_v<N, BufferLoadNode>) {
        Lanes index = eval(n.index), out(lanes);
        for (size_t l = 0; l < lanes; ++l) out[l] = load(n.buffer, static_cast<int64_t>(index[l]));
        return out;
      } else if constexpr (std::is_same_v<N, RampNode>) {
        double base = eval(n.base)[0], stride = eval(n.stride)[0];
        Lanes out(lanes);
        for (size_t l = 0; l < lanes; ++l) out[l] = base + stride * static_cast<double>(l);
        return out;
      } else if constexpr (std::is_same_v<N, BroadcastNode>) {
        return Lanes(lanes, eval(n.value)[0]);
      } else {
        static_assert(std::is_same_v<N, ReduceNode> || std::is_same_v<N, ProducerLoadNode>);
        fail(ErrorKind::kRuntime, n.type_key(), " must not remain in lowered code");
      }
    });
  }

  int64_t checked(const ir::BufferNode* b, int64_t index, int64_t size) {
    TT_CHECK(index >= 0 && index < size, kRuntime, "out-of-bounds access ", b->name, "[", index,
             "] (", size, " elements)");
    return index;
  }

  double load(const Buffer& b, int64_t index) {
    if (auto p = params_.find(b.get()); p != params_.end()) {
      return p->second->get(checked(b.get(), index, p->second->size()));
    }
    auto l = locals_.find(b.get());
    TT_CHECK(l != locals_.end(), kRuntime, "buffer '", b->name, "' is used outside its allocation");
    return l->second[checked(b.get(), index, static_cast<int64_t>(l->second.size()))];
  }

  void store(const Buffer& b, int64_t index, double value) {
    if (auto p = params_.find(b.get()); p != params_.end()) {
      p->second->set(checked(b.get(), index, p->second->size()), value);
      return;
    }
    auto l = locals_.find(b.get());
    TT_CHECK(l != locals_.end(), kRuntime, "buffer '", b->name, "' is used outside its allocation");
    l->second[checked(b.get(), index, static_cast<int64_t>(l->second.size()))] =
        te::cast_value(b->dtype, value);
  }

  std::unordered_map<const ir::VarNode*, Lanes> vars_;
  std::unordered_map<const ir::BufferNode*, te::NDArray*> params_;
  std::unordered_map<const ir::BufferNode*, std::vector<double>> locals_;
};

}  // namespace

void interpret(const PrimFunc& f, const std::vector<te::NDArray*>& args) {
  TT_CHECK(args.size() == f->params.size(), kInvalidArgument, "function '", f->name, "' takes ",
           f->params.size(), " arrays, got ", args.size());
  Interpreter interp;
  for (size_t i = 0; i < args.size(); ++i) {
    const Buffer& b = f->params[i];
    TT_CHECK(args[i] && args[i]->dtype() == b->dtype && args[i]->shape() == b->shape,
             kInvalidArgument, "argument ", i, " of '", f->name, "' must be ", b->dtype.str(),
             " of the shape of '", b->name, "'");
    interp.bind(b, args[i]);
  }
  interp.run(f->body);
}

}  // namespace tensortune::lower
