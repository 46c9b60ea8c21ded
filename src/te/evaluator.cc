// The reference evaluator. Each stage's body is compiled once into a tree of
// closures over a frame of variable slots (one slot per loop variable), then
// run for every output element; see evaluator.h for the semantics.
#include "tensortune/te/evaluator.h"

#include <cmath>
#include <cstring>
#include <limits>
#include <unordered_map>
#include <unordered_set>

#include "tensortune/ir/scalar_semantics.h"
#include "tensortune/support/strings.h"

namespace tensortune::te {
namespace {

/// One scalar: integers and bool as their two's-complement bits in `i`
/// (sign-extended for signed types, zero-extended for unsigned ones and bool),
/// floats, already rounded to their type, in `f`.
union Value {
  int64_t i;
  double f;
};

Value int_value(int64_t v) {
  Value r;
  r.i = v;
  return r;
}
Value float_value(double v) {
  Value r;
  r.f = v;
  return r;
}

bool is_unsigned(DataType t) { return t.is_uint() || t.is_bool(); }

using Rounder = double (*)(double);
double round_none(double v) { return v; }
double round_f32(double v) { return static_cast<double>(static_cast<float>(v)); }
double round_f16(double v) { return ir::round_to_float(DataType::float16(), v); }
double round_bf16(double v) { return ir::round_to_float(DataType::bfloat16(), v); }

Rounder rounder_of(DataType t) {
  if (t.code() == DataType::Code::kBFloat) return round_bf16;
  if (t.bits() == 64) return round_none;
  if (t.bits() == 32) return round_f32;
  return round_f16;
}

double to_double(DataType t, Value v) {
  if (t.is_float()) return v.f;
  if (is_unsigned(t)) return static_cast<double>(static_cast<uint64_t>(v.i));
  return static_cast<double>(v.i);
}

// The cast of ir::cast, from `from` to `to`; integer to integer stays exact
// in 64 bits, everything else follows ir::convert_scalar.
Value convert(DataType from, DataType to, Value v) {
  if (to.is_bool()) return int_value(from.is_float() ? v.f != 0 : v.i != 0);
  if (to.is_float()) return float_value(ir::round_to_float(to, to_double(from, v)));
  if (from.is_float()) {
    return int_value(static_cast<int64_t>(ir::convert_scalar(from, to, v.f)));
  }
  return int_value(ir::wrap_to_int(to, v.i));
}

std::string index_str(const std::vector<int64_t>& index) {
  std::vector<std::string> parts;
  for (int64_t d : index) parts.push_back(std::to_string(d));
  return "[" + join(parts, ", ") + "]";
}

/// What a running stage needs for its error messages.
struct StageInfo {
  std::string name;
  size_t num_axes = 0;
};

struct Frame {
  std::vector<Value> vars;
  const StageInfo* stage = nullptr;

  std::string where() const {
    std::vector<int64_t> index;
    for (size_t d = 0; d < stage->num_axes; ++d) index.push_back(vars[d].i);
    return "stage '" + stage->name + "' (computing " + stage->name + index_str(index) + ")";
  }
};

using Fn = std::function<Value(Frame&)>;

[[noreturn]] void division_by_zero(const Frame& f) {
  fail(ErrorKind::kRuntime, "integer division by zero in ", f.where());
}

template <class T>
bool compare_values(ir::CompareOp op, T a, T b) {
  switch (op) {
    case ir::CompareOp::kEQ: return a == b;
    case ir::CompareOp::kNE: return a != b;
    case ir::CompareOp::kLT: return a < b;
    case ir::CompareOp::kLE: return a <= b;
    case ir::CompareOp::kGT: return a > b;
    case ir::CompareOp::kGE: return a >= b;
  }
  return false;
}

// ---- typed element access ---------------------------------------------------

using Loader = Value (*)(const std::byte*);
using Storer = void (*)(std::byte*, Value);

template <class T>
T read_as(const std::byte* p) {
  T v;
  std::memcpy(&v, p, sizeof v);
  return v;
}
template <class T>
void write_as(std::byte* p, T v) {
  std::memcpy(p, &v, sizeof v);
}

Loader loader_of(DataType t) {
  switch (t.code()) {
    case DataType::Code::kFloat:
      if (t.bits() == 64) return [](const std::byte* p) { return float_value(read_as<double>(p)); };
      if (t.bits() == 32) return [](const std::byte* p) { return float_value(read_as<float>(p)); };
      return
          [](const std::byte* p) { return float_value(half_bits_to_double(read_as<uint16_t>(p))); };
    case DataType::Code::kBFloat:
      return [](const std::byte* p) {
        return float_value(bfloat16_bits_to_double(read_as<uint16_t>(p)));
      };
    case DataType::Code::kInt:
      switch (t.bits()) {
        case 8: return [](const std::byte* p) { return int_value(read_as<int8_t>(p)); };
        case 16: return [](const std::byte* p) { return int_value(read_as<int16_t>(p)); };
        case 32: return [](const std::byte* p) { return int_value(read_as<int32_t>(p)); };
        default: return [](const std::byte* p) { return int_value(read_as<int64_t>(p)); };
      }
    case DataType::Code::kUInt:
      switch (t.bits()) {
        case 8: return [](const std::byte* p) { return int_value(read_as<uint8_t>(p)); };
        case 16: return [](const std::byte* p) { return int_value(read_as<uint16_t>(p)); };
        case 32: return [](const std::byte* p) { return int_value(read_as<uint32_t>(p)); };
        default:
          return [](const std::byte* p) {
            return int_value(static_cast<int64_t>(read_as<uint64_t>(p)));
          };
      }
    case DataType::Code::kBool:
      return [](const std::byte* p) { return int_value(read_as<uint8_t>(p) != 0 ? 1 : 0); };
  }
  TT_ICHECK(false, "bad dtype");
  return nullptr;
}

Storer storer_of(DataType t) {
  switch (t.code()) {
    case DataType::Code::kFloat:
      if (t.bits() == 64) return [](std::byte* p, Value v) { write_as<double>(p, v.f); };
      if (t.bits() == 32) {
        return [](std::byte* p, Value v) { write_as<float>(p, static_cast<float>(v.f)); };
      }
      return [](std::byte* p, Value v) { write_as<uint16_t>(p, float_to_half_bits(v.f)); };
    case DataType::Code::kBFloat:
      return [](std::byte* p, Value v) { write_as<uint16_t>(p, float_to_bfloat16_bits(v.f)); };
    case DataType::Code::kInt:
    case DataType::Code::kUInt:
    case DataType::Code::kBool:
      switch (t.bytes()) {
        case 1:
          return [](std::byte* p, Value v) { write_as<uint8_t>(p, static_cast<uint8_t>(v.i)); };
        case 2:
          return [](std::byte* p, Value v) { write_as<uint16_t>(p, static_cast<uint16_t>(v.i)); };
        case 4:
          return [](std::byte* p, Value v) { write_as<uint32_t>(p, static_cast<uint32_t>(v.i)); };
        default:
          return [](std::byte* p, Value v) { write_as<uint64_t>(p, static_cast<uint64_t>(v.i)); };
      }
  }
  TT_ICHECK(false, "bad dtype");
  return nullptr;
}

// ---- the compiler -----------------------------------------------------------

class Compiler {
 public:
  Compiler(const std::unordered_map<const TensorNode*, const NDArray*>& arrays,
           const std::string& stage)
      : arrays_(arrays), stage_(stage) {}

  /// Gives `var` the next slot; it must not be bound already.
  int bind(const ir::VarNode* var) {
    if (!slots_.emplace(var, next_slot_).second) {
      fail(ErrorKind::kInvalidArgument, "stage '", stage_, "': variable '", var->name,
           "' is bound twice");
    }
    return next_slot_++;
  }
  void unbind(const ir::VarNode* var) { slots_.erase(var); }
  int num_slots() const { return next_slot_; }

  Fn compile(const Expr& e) {
    DataType t = e.dtype();
    if (!t.is_scalar()) {
      fail(ErrorKind::kTypeMismatch, "stage '", stage_, "': the reference evaluator handles ",
           "scalar expressions only, got ", t.str(), " in ", ir::to_string(e));
    }
    return ir::dispatch(e, [&](const auto& node) { return compile_node(node, t); });
  }

 private:
  Fn compile_node(const ir::IntImmNode& n, DataType t) {
    Value v = int_value(ir::wrap_to_int(t, n.value));
    return [v](Frame&) { return v; };
  }

  Fn compile_node(const ir::FloatImmNode& n, DataType t) {
    Value v = float_value(ir::round_to_float(t, n.value));
    return [v](Frame&) { return v; };
  }

  Fn compile_node(const ir::VarNode& n, DataType) {
    auto it = slots_.find(&n);
    if (it == slots_.end()) {
      fail(ErrorKind::kInvalidArgument, "stage '", stage_, "': variable '", n.name,
           "' is not bound by the stage or a reduction around it");
    }
    int slot = it->second;
    return [slot](Frame& f) { return f.vars[slot]; };
  }

  Fn compile_node(const ir::BinaryNode& n, DataType t) {
    Fn a = compile(n.a), b = compile(n.b);
    ir::BinaryOp op = n.op;
    // The operands have the node's type (the ir factory unifies them). The
    // hot cases get their own closures; the rest go through ir's semantics.
    if (t.is_float()) {
      Rounder round = rounder_of(t);
      switch (op) {
        case ir::BinaryOp::kAdd:
          return [a, b, round](Frame& f) { return float_value(round(a(f).f + b(f).f)); };
        case ir::BinaryOp::kSub:
          return [a, b, round](Frame& f) { return float_value(round(a(f).f - b(f).f)); };
        case ir::BinaryOp::kMul:
          return [a, b, round](Frame& f) { return float_value(round(a(f).f * b(f).f)); };
        case ir::BinaryOp::kDiv:
        case ir::BinaryOp::kMod:
        case ir::BinaryOp::kFloorDiv:
        case ir::BinaryOp::kFloorMod:
        case ir::BinaryOp::kMin:
        case ir::BinaryOp::kMax:
          return [a, b, op, t](Frame& f) {
            double x = a(f).f;
            return float_value(ir::apply_float(op, t, x, b(f).f));
          };
      }
    }
    return [a, b, op, t](Frame& f) {
      int64_t x = a(f).i;
      std::optional<int64_t> r = ir::apply_int(op, t, x, b(f).i);
      if (!r) division_by_zero(f);
      return int_value(*r);
    };
  }

  Fn compile_node(const ir::CompareNode& n, DataType) {
    Fn a = compile(n.a), b = compile(n.b);
    ir::CompareOp op = n.op;
    DataType t = n.a.dtype();
    if (t.is_float()) {
      return [a, b, op](Frame& f) {
        double x = a(f).f;
        return int_value(compare_values(op, x, b(f).f));
      };
    }
    if (is_unsigned(t)) {
      return [a, b, op](Frame& f) {
        auto x = static_cast<uint64_t>(a(f).i);
        return int_value(compare_values(op, x, static_cast<uint64_t>(b(f).i)));
      };
    }
    return [a, b, op](Frame& f) {
      int64_t x = a(f).i;
      return int_value(compare_values(op, x, b(f).i));
    };
  }

  Fn compile_node(const ir::LogicalNode& n, DataType) {
    Fn a = compile(n.a), b = compile(n.b);
    if (n.op == ir::LogicalOp::kAnd) {
      return [a, b](Frame& f) { return int_value(a(f).i != 0 && b(f).i != 0); };
    }
    return [a, b](Frame& f) { return int_value(a(f).i != 0 || b(f).i != 0); };
  }

  Fn compile_node(const ir::NotNode& n, DataType) {
    Fn a = compile(n.a);
    return [a](Frame& f) { return int_value(a(f).i == 0); };
  }

  Fn compile_node(const ir::SelectNode& n, DataType) {
    Fn c = compile(n.condition), t = compile(n.true_value), e = compile(n.false_value);
    // Both arms are evaluated: see the select rule in evaluator.h.
    return [c, t, e](Frame& f) {
      bool take = c(f).i != 0;
      Value x = t(f);
      Value y = e(f);
      return take ? x : y;
    };
  }

  Fn compile_node(const ir::CastNode& n, DataType t) {
    Fn v = compile(n.value);
    DataType from = n.value.dtype();
    return [v, from, t](Frame& f) { return convert(from, t, v(f)); };
  }

  Fn compile_node(const ir::CallNode& n, DataType t) {
    TT_ICHECK(!n.args.empty() && n.args.size() <= 2, "intrinsic ", ir::op_name(n.op), " with ",
              n.args.size(), " arguments");
    Fn x = compile(n.args[0]);
    if (n.op == ir::Intrinsic::kDot4U8S8) {
      Fn y = compile(n.args[1]);
      return [x, y](Frame& f) {
        return int_value(ir::dot4_u8s8(static_cast<int32_t>(x(f).i), static_cast<int32_t>(y(f).i)));
      };
    }
    TT_ICHECK(t.is_float(), "intrinsic ", ir::op_name(n.op), " of type ", t.str());
    DataType tx = n.args[0].dtype();
    ir::Intrinsic op = n.op;
    if (n.args.size() == 1) {
      return [x, tx, t, op](Frame& f) {
        return float_value(ir::apply_intrinsic(op, t, to_double(tx, x(f))));
      };
    }
    Fn y = compile(n.args[1]);
    DataType ty = n.args[1].dtype();
    return [x, y, tx, ty, t, op](Frame& f) {
      double a = to_double(tx, x(f));
      return float_value(ir::apply_intrinsic(op, t, a, to_double(ty, y(f))));
    };
  }

  Fn compile_node(const ir::ReduceNode& n, DataType t) {
    // The init is outside the reduction's scope; compile it before binding the axes.
    Fn init = compile(n.init ? n.init : ir::reduce_identity(n.op, t));
    std::vector<int> slots;
    std::vector<int64_t> extents;
    for (const IterVar& iv : n.axis) {
      slots.push_back(bind(iv->var.get()));
      extents.push_back(iv->extent);
    }
    Fn source = compile(n.source);
    Fn cond = n.condition ? compile(n.condition) : Fn();
    for (const IterVar& iv : n.axis) unbind(iv->var.get());
    for (int64_t e : extents) {
      // An empty reduction is just its init.
      if (e <= 0) return init;
    }
    auto combine = combiner(n.op, t);
    return [init, slots, extents, source, cond, combine](Frame& f) {
      Value acc = init(f);
      size_t k = slots.size();
      for (size_t d = 0; d < k; ++d) f.vars[slots[d]].i = 0;
      while (true) {
        if (!cond || cond(f).i != 0) acc = combine(acc, source(f));
        // Advance the odometer, the last axis fastest.
        size_t d = k;
        while (true) {
          if (d == 0) return acc;
          --d;
          if (++f.vars[slots[d]].i < extents[d]) break;
          f.vars[slots[d]].i = 0;
        }
      }
    };
  }

  static std::function<Value(Value, Value)> combiner(ir::ReduceOp op, DataType t) {
    ir::BinaryOp bin = ir::BinaryOp::kAdd;
    switch (op) {
      case ir::ReduceOp::kSum: bin = ir::BinaryOp::kAdd; break;
      case ir::ReduceOp::kProd: bin = ir::BinaryOp::kMul; break;
      case ir::ReduceOp::kMax: bin = ir::BinaryOp::kMax; break;
      case ir::ReduceOp::kMin: bin = ir::BinaryOp::kMin; break;
    }
    if (t.is_float()) {
      if (bin == ir::BinaryOp::kAdd) {
        Rounder round = rounder_of(t);
        return [round](Value a, Value b) { return float_value(round(a.f + b.f)); };
      }
      return [bin, t](Value a, Value b) { return float_value(ir::apply_float(bin, t, a.f, b.f)); };
    }
    return [bin, t](Value a, Value b) {
      // Combiners never divide, so there is always a result.
      return int_value(*ir::apply_int(bin, t, a.i, b.i));
    };
  }

  // Lowered-code expressions never occur in tensor expressions.
  Fn compile_node(const ir::BufferLoadNode& n, DataType) { return lowered_only(n); }
  Fn compile_node(const ir::RampNode& n, DataType) { return lowered_only(n); }
  Fn compile_node(const ir::BroadcastNode& n, DataType) { return lowered_only(n); }
  Fn lowered_only(const Object& n) {
    fail(ErrorKind::kTypeMismatch, "stage '", stage_, "': ", n.type_key(),
         " belongs to lowered code, not to a tensor expression");
  }

  Fn compile_node(const ir::ProducerLoadNode& n, DataType) {
    auto tensor = n.producer.as<TensorNode>();
    TT_CHECK(tensor, kTypeMismatch, "stage '", stage_, "' reads '", n.producer->name,
             "', which is not a te tensor");
    auto it = arrays_.find(tensor.get());
    TT_ICHECK(it != arrays_.end(), "tensor '", tensor->name, "' read before it was computed");
    const NDArray* array = it->second;
    std::vector<Fn> indices;
    for (const Expr& index : n.indices) indices.push_back(compile(index));
    std::vector<int64_t> shape = tensor->shape;
    std::vector<int64_t> strides(shape.size(), 1);
    for (size_t d = shape.size(); d-- > 1;) strides[d - 1] = strides[d] * shape[d];
    Loader load = loader_of(tensor->dtype);
    auto base = static_cast<const std::byte*>(array->data());
    int64_t bytes = tensor->dtype.bytes();
    std::string name = tensor->name;
    // Comparing the index bits as unsigned catches negative signed indices
    // and huge unsigned ones alike.
    return [indices, shape, strides, load, base, bytes, name](Frame& f) {
      int64_t flat = 0;
      for (size_t d = 0; d < indices.size(); ++d) {
        int64_t i = indices[d](f).i;
        if (static_cast<uint64_t>(i) >= static_cast<uint64_t>(shape[d])) {
          out_of_bounds(f, name, shape, indices);
        }
        flat += i * strides[d];
      }
      return load(base + flat * bytes);
    };
  }

  [[noreturn]] static void out_of_bounds(Frame& f, const std::string& name,
                                         const std::vector<int64_t>& shape,
                                         const std::vector<Fn>& indices) {
    std::vector<int64_t> index;
    for (const Fn& i : indices) index.push_back(i(f).i);
    fail(ErrorKind::kRuntime, f.where(), " reads tensor '", name, "' out of bounds at ",
         index_str(index), "; its shape is ", index_str(shape));
  }

  const std::unordered_map<const TensorNode*, const NDArray*>& arrays_;
  const std::string& stage_;
  std::unordered_map<const ir::VarNode*, int> slots_;
  int next_slot_ = 0;
};

NDArray run_stage(const Tensor& t,
                  const std::unordered_map<const TensorNode*, const NDArray*>& arrays) {
  auto op = t.compute_op();
  TT_ICHECK(op, "run_stage on a placeholder");
  StageInfo info{op->name, op->axis.size()};
  Compiler compiler(arrays, info.name);
  for (const IterVar& iv : op->axis) compiler.bind(iv->var.get());
  Fn body = compiler.compile(op->body);

  NDArray out(t.dtype(), t.shape());
  Storer store = storer_of(t.dtype());
  auto* dst = static_cast<std::byte*>(out.data());
  int64_t bytes = t.dtype().bytes();
  Frame frame;
  frame.vars.assign(static_cast<size_t>(compiler.num_slots()), int_value(0));
  frame.stage = &info;
  const std::vector<int64_t>& shape = t.shape();
  size_t ndim = shape.size();
  for (int64_t flat = 0, n = out.size(); flat < n; ++flat) {
    store(dst + flat * bytes, body(frame));
    for (size_t d = ndim; d-- > 0;) {
      if (++frame.vars[d].i < shape[d]) break;
      frame.vars[d].i = 0;
    }
  }
  return out;
}

}  // namespace

std::vector<NDArray> evaluate(const std::vector<Tensor>& outputs, const std::vector<Tensor>& inputs,
                              const std::vector<NDArray>& values) {
  if (inputs.size() != values.size()) {
    fail(ErrorKind::kInvalidArgument, "evaluate: ", inputs.size(), " input tensors but ",
         values.size(), " values");
  }
  std::unordered_map<const TensorNode*, const NDArray*> arrays;
  for (size_t i = 0; i < inputs.size(); ++i) {
    const Tensor& in = inputs[i];
    TT_CHECK(in, kInvalidArgument, "evaluate: input ", i, " is null");
    if (!in.is_placeholder()) {
      fail(ErrorKind::kInvalidArgument, "evaluate: input ", i, " ('", in.name(),
           "') is computed, not a placeholder");
    }
    const NDArray& v = values[i];
    if (!v.defined() || v.dtype() != in.dtype() || v.shape() != in.shape()) {
      fail(ErrorKind::kInvalidArgument, "evaluate: input '", in.name(), "' is ", in.dtype().str(),
           index_str(in.shape()), " but its value is ", v.describe());
    }
    if (!arrays.emplace(in.get(), &v).second) {
      fail(ErrorKind::kInvalidArgument, "evaluate: input '", in.name(), "' is given twice");
    }
  }
  std::unordered_map<const TensorNode*, NDArray> computed;  // node-based: pointers stay valid
  for (const Tensor& t : post_order_tensors(outputs)) {
    if (t.is_placeholder()) {
      if (!arrays.count(t.get())) {
        std::vector<std::string> given;
        for (const Tensor& in : inputs) given.push_back("'" + in.name() + "'");
        fail(ErrorKind::kInvalidArgument, "evaluate: no value for input '", t.name(), "' (",
             t.dtype().str(), index_str(t.shape()), "); values were given for: ",
             given.empty() ? std::string("nothing") : join(given, ", "));
      }
      continue;
    }
    NDArray& slot = computed[t.get()];
    slot = run_stage(t, arrays);
    arrays[t.get()] = &slot;
  }
  std::vector<NDArray> results;
  results.reserve(outputs.size());
  for (const Tensor& out : outputs) results.push_back(*arrays.at(out.get()));
  return results;
}

std::vector<NDArray> evaluate(const std::vector<Tensor>& outputs,
                              const std::map<std::string, NDArray>& inputs) {
  std::vector<Tensor> placeholders = placeholder_inputs(outputs);
  std::vector<NDArray> values;
  std::unordered_set<std::string> names;
  for (const Tensor& p : placeholders) {
    if (!names.insert(p.name()).second) {
      fail(ErrorKind::kInvalidArgument, "evaluate: two inputs are named '", p.name(),
           "'; give the values by tensor instead of by name");
    }
    auto it = inputs.find(p.name());
    if (it == inputs.end()) {
      std::vector<std::string> given;
      for (const auto& [name, value] : inputs) given.push_back("'" + name + "'");
      fail(ErrorKind::kInvalidArgument, "evaluate: no value for input '", p.name(), "' (",
           p.dtype().str(), index_str(p.shape()), "); values were given for: ",
           given.empty() ? std::string("nothing") : join(given, ", "));
    }
    values.push_back(it->second);
  }
  return evaluate(outputs, placeholders, values);
}

std::vector<NDArray> random_inputs(const std::vector<Tensor>& inputs, uint64_t seed) {
  std::vector<NDArray> out;
  for (size_t i = 0; i < inputs.size(); ++i) {
    const Tensor& t = inputs[i];
    bool integer = t.dtype().is_integer();
    double low = integer ? (t.dtype().is_uint() ? 0.0 : -8.0) : -1.0;
    double high = integer ? 8.0 : 1.0;
    out.push_back(NDArray::random(t.dtype(), t.shape(), seed + i, low, high));
  }
  return out;
}

}  // namespace tensortune::te
