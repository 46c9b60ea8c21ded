#include "tensortune/search/features.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <unordered_map>

#include "tensortune/lower/lower.h"
#include "tensortune/object/structural.h"

namespace tensortune::search {

using ir::Expr;
using ir::ExprKind;
using lower::ForKind;
using lower::Stmt;

namespace {

constexpr int kBufferSlots = 5;
constexpr int kPerBuffer = 15;
constexpr int kComputeFeatures = 26;
constexpr int kIntensitySamples = 10;
static_assert(kComputeFeatures + kBufferSlots * kPerBuffer + kIntensitySamples + 2 ==
              kFeaturesPerStore);

float scaled(double x) { return static_cast<float>(std::log2(1.0 + std::max(x, 0.0))); }

struct Loop {
  const ir::VarNode* var;
  int64_t extent;
  ForKind kind;
};

/// Arithmetic in one evaluation of a store's value (and its indices).
struct OpCounts {
  double add_sub = 0, mul = 0, div = 0, fma = 0, math = 0, cmp = 0, int_ops = 0, select = 0,
         cast = 0, loads = 0;
};

void count_ops(const Expr& e, OpCounts& c) {
  if (!e) return;
  switch (e->kind()) {
    case ExprKind::kIntImm:
    case ExprKind::kFloatImm:
    case ExprKind::kVar: return;
    case ExprKind::kBinary: {
      const auto& b = static_cast<const ir::BinaryNode&>(*e);
      bool is_float = e->dtype.is_float();
      if (!is_float) {
        c.int_ops += 1;
      } else {
        switch (b.op) {
          case ir::BinaryOp::kAdd:
          case ir::BinaryOp::kSub: {
            auto is_mul = [](const Expr& x) {
              return x->kind() == ExprKind::kBinary &&
                     static_cast<const ir::BinaryNode&>(*x).op == ir::BinaryOp::kMul;
            };
            if (is_mul(b.a) || is_mul(b.b)) {
              c.fma += 1;
            } else {
              c.add_sub += 1;
            }
            break;
          }
          case ir::BinaryOp::kMul: c.mul += 1; break;
          case ir::BinaryOp::kDiv:
          case ir::BinaryOp::kMod:
          case ir::BinaryOp::kFloorDiv:
          case ir::BinaryOp::kFloorMod: c.div += 1; break;
          case ir::BinaryOp::kMin:
          case ir::BinaryOp::kMax: c.cmp += 1; break;
        }
      }
      count_ops(b.a, c);
      count_ops(b.b, c);
      return;
    }
    case ExprKind::kCompare: {
      const auto& n = static_cast<const ir::CompareNode&>(*e);
      c.cmp += 1;
      count_ops(n.a, c);
      count_ops(n.b, c);
      return;
    }
    case ExprKind::kLogical: {
      const auto& n = static_cast<const ir::LogicalNode&>(*e);
      c.int_ops += 1;
      count_ops(n.a, c);
      count_ops(n.b, c);
      return;
    }
    case ExprKind::kNot:
      c.int_ops += 1;
      count_ops(static_cast<const ir::NotNode&>(*e).a, c);
      return;
    case ExprKind::kSelect: {
      const auto& n = static_cast<const ir::SelectNode&>(*e);
      c.select += 1;
      count_ops(n.condition, c);
      count_ops(n.true_value, c);
      count_ops(n.false_value, c);
      return;
    }
    case ExprKind::kCast:
      c.cast += 1;
      count_ops(static_cast<const ir::CastNode&>(*e).value, c);
      return;
    case ExprKind::kCall:
      c.math += 1;
      for (const auto& a : static_cast<const ir::CallNode&>(*e).args) count_ops(a, c);
      return;
    case ExprKind::kReduce:
    case ExprKind::kProducerLoad: return;  // not in lowered code
    case ExprKind::kBufferLoad:
      c.loads += 1;
      count_ops(static_cast<const ir::BufferLoadNode&>(*e).index, c);
      return;
    case ExprKind::kRamp: count_ops(static_cast<const ir::RampNode&>(*e).base, c); return;
    case ExprKind::kBroadcast:
      count_ops(static_cast<const ir::BroadcastNode&>(*e).value, c);
      return;
  }
}

int64_t floor_div(int64_t a, int64_t b) {
  if (b == 0) return 0;
  int64_t q = a / b;
  return (a % b != 0 && ((a < 0) != (b < 0))) ? q - 1 : q;
}

/// The value of integer index `e` with the loop variable `var` at `value`
/// and every other variable at 0.
int64_t eval_index(const Expr& e, const ir::VarNode* var, int64_t value) {
  switch (e->kind()) {
    case ExprKind::kIntImm: return static_cast<const ir::IntImmNode&>(*e).value;
    case ExprKind::kVar: return e.get() == var ? value : 0;
    case ExprKind::kBinary: {
      const auto& b = static_cast<const ir::BinaryNode&>(*e);
      int64_t x = eval_index(b.a, var, value), y = eval_index(b.b, var, value);
      switch (b.op) {
        case ir::BinaryOp::kAdd: return x + y;
        case ir::BinaryOp::kSub: return x - y;
        case ir::BinaryOp::kMul: return x * y;
        case ir::BinaryOp::kDiv: return y ? x / y : 0;
        case ir::BinaryOp::kMod: return y ? x % y : 0;
        case ir::BinaryOp::kFloorDiv: return floor_div(x, y);
        case ir::BinaryOp::kFloorMod: return y ? x - floor_div(x, y) * y : 0;
        case ir::BinaryOp::kMin: return std::min(x, y);
        case ir::BinaryOp::kMax: return std::max(x, y);
      }
      return 0;
    }
    case ExprKind::kCast: return eval_index(static_cast<const ir::CastNode&>(*e).value, var, value);
    case ExprKind::kRamp: return eval_index(static_cast<const ir::RampNode&>(*e).base, var, value);
    case ExprKind::kBroadcast:
      return eval_index(static_cast<const ir::BroadcastNode&>(*e).value, var, value);
    case ExprKind::kSelect:
      return eval_index(static_cast<const ir::SelectNode&>(*e).true_value, var, value);
    default: return 0;
  }
}

/// One buffer's accesses in a store statement.
struct Access {
  const ir::BufferNode* buffer = nullptr;
  bool read = false, write = false;
  int count = 0;
  std::vector<int64_t> strides;  ///< per enclosing loop (outer to inner), in elements
};

/// Unique elements touched when the loops from `first` inward run.
double footprint(const Access& a, const std::vector<Loop>& loops, size_t first) {
  double product = 1, span = 1;
  for (size_t l = first; l < loops.size(); ++l) {
    if (a.strides[l] == 0) continue;
    product *= static_cast<double>(loops[l].extent);
    span +=
        static_cast<double>(std::llabs(a.strides[l])) * static_cast<double>(loops[l].extent - 1);
  }
  return std::min(product, span);
}

double cache_lines(const Access& a, const std::vector<Loop>& loops, double elems) {
  int64_t elem = std::max(a.buffer->dtype.bytes() * a.buffer->dtype.lanes(), 1);
  int64_t smallest = 0;
  for (size_t l = 0; l < loops.size(); ++l) {
    int64_t s = std::llabs(a.strides[l]);
    if (s && (!smallest || s < smallest)) smallest = s;
  }
  if (smallest && smallest * elem < 64) return std::ceil(elems * static_cast<double>(elem) / 64.0);
  return elems;
}

class Extractor {
 public:
  ProgramFeatures run(const lower::PrimFunc& f) {
    visit(f->body);
    ProgramFeatures out;
    out.rows = static_cast<int>(rows_.size() / kFeaturesPerStore);
    for (float& v : rows_) {
      if (v == kLocalTotalPlaceholder) v = scaled(static_cast<double>(local_bytes_));
    }
    out.values = std::move(rows_);
    return out;
  }

 private:
  // The program's total local allocation is known at the end only.
  static constexpr float kLocalTotalPlaceholder = -12345.0f;

  void visit(const Stmt& s) {
    lower::dispatch(s, [&](const auto& n) {
      using N = std::decay_t<decltype(n)>;
      if constexpr (std::is_same_v<N, lower::ForNode>) {
        auto extent = ir::as_const_int(n.extent);
        loops_.push_back(
            {n.loop_var.get(), extent ? std::max<int64_t>(*extent, 1) : 1, n.for_kind});
        visit(n.body);
        loops_.pop_back();
      } else if constexpr (std::is_same_v<N, lower::IfThenElseNode>) {
        ++guards_;
        visit(n.then_case);
        if (n.else_case) visit(n.else_case);
        --guards_;
      } else if constexpr (std::is_same_v<N, lower::AllocateNode>) {
        local_bytes_ += n.buffer.storage_elements() * n.buffer->dtype.bytes();
        visit(n.body);
      } else if constexpr (std::is_same_v<N, lower::SeqNode>) {
        for (const auto& x : n.stmts) visit(x);
      } else if constexpr (std::is_same_v<N, lower::LetStmtNode>) {
        visit(n.body);
      } else if constexpr (std::is_same_v<N, lower::BufferStoreNode>) {
        store(n);
      }
    });
  }

  void add_access(std::vector<Access>& accesses, const ir::BufferNode* buffer, const Expr& index,
                  bool write) {
    Access* a = nullptr;
    for (auto& x : accesses) {
      if (x.buffer == buffer) a = &x;
    }
    if (!a) {
      accesses.push_back({buffer, false, false, 0, {}});
      a = &accesses.back();
      a->strides.resize(loops_.size());
      for (size_t l = 0; l < loops_.size(); ++l) {
        a->strides[l] = eval_index(index, loops_[l].var, 1) - eval_index(index, loops_[l].var, 0);
      }
    }
    (write ? a->write : a->read) = true;
    ++a->count;
  }

  void collect_loads(const Expr& e, std::vector<Access>& accesses) {
    if (!e) return;
    if (e->kind() == ExprKind::kBufferLoad) {
      const auto& load = static_cast<const ir::BufferLoadNode&>(*e);
      add_access(accesses, load.buffer.get(), load.index, false);
    }
    // Children: the few kinds that hold sub-expressions.
    switch (e->kind()) {
      case ExprKind::kBinary: {
        const auto& b = static_cast<const ir::BinaryNode&>(*e);
        collect_loads(b.a, accesses);
        collect_loads(b.b, accesses);
        break;
      }
      case ExprKind::kCompare: {
        const auto& b = static_cast<const ir::CompareNode&>(*e);
        collect_loads(b.a, accesses);
        collect_loads(b.b, accesses);
        break;
      }
      case ExprKind::kLogical: {
        const auto& b = static_cast<const ir::LogicalNode&>(*e);
        collect_loads(b.a, accesses);
        collect_loads(b.b, accesses);
        break;
      }
      case ExprKind::kNot: collect_loads(static_cast<const ir::NotNode&>(*e).a, accesses); break;
      case ExprKind::kSelect: {
        const auto& n = static_cast<const ir::SelectNode&>(*e);
        collect_loads(n.condition, accesses);
        collect_loads(n.true_value, accesses);
        collect_loads(n.false_value, accesses);
        break;
      }
      case ExprKind::kCast:
        collect_loads(static_cast<const ir::CastNode&>(*e).value, accesses);
        break;
      case ExprKind::kCall:
        for (const auto& a : static_cast<const ir::CallNode&>(*e).args) collect_loads(a, accesses);
        break;
      case ExprKind::kBroadcast:
        collect_loads(static_cast<const ir::BroadcastNode&>(*e).value, accesses);
        break;
      default: break;
    }
  }

  void store(const lower::BufferStoreNode& n) {
    std::vector<float> f(kFeaturesPerStore, 0.0f);
    OpCounts ops;
    count_ops(n.value, ops);
    count_ops(n.index, ops);
    double trips = 1, outer = 1;
    double vec_product = 1, unroll_product = 1, par_product = 1, reduce_product = 1;
    int64_t vec_inner = 0;
    int vec_count = 0, unroll_count = 0, par_count = 0, reduce_count = 0;
    std::vector<Access> accesses;
    add_access(accesses, n.buffer.get(), n.index, true);
    collect_loads(n.value, accesses);
    const Access& out = accesses[0];
    for (size_t l = 0; l < loops_.size(); ++l) {
      const Loop& loop = loops_[l];
      trips *= static_cast<double>(loop.extent);
      if (l + 1 < loops_.size()) outer *= static_cast<double>(loop.extent);
      switch (loop.kind) {
        case ForKind::kVectorized:
          vec_product *= static_cast<double>(loop.extent);
          vec_inner = loop.extent;
          ++vec_count;
          break;
        case ForKind::kUnrolled:
          unroll_product *= static_cast<double>(loop.extent);
          ++unroll_count;
          break;
        case ForKind::kParallel:
          par_product *= static_cast<double>(loop.extent);
          ++par_count;
          break;
        case ForKind::kSerial: break;
      }
      if (out.strides[l] == 0) {
        reduce_product *= static_cast<double>(loop.extent);
        ++reduce_count;
      }
    }
    auto total = [&](double per_run) { return scaled(per_run * trips); };
    int k = 0;
    f[k++] = total(ops.add_sub);
    f[k++] = total(ops.mul);
    f[k++] = total(ops.div);
    f[k++] = total(ops.fma);
    f[k++] = total(ops.math);
    f[k++] = total(ops.cmp);
    f[k++] = total(ops.int_ops);
    f[k++] = total(ops.select);
    f[k++] = total(ops.cast);
    f[k++] = total(ops.loads);
    f[k++] = scaled(static_cast<double>(loops_.size()));
    f[k++] = scaled(trips);
    f[k++] = scaled(loops_.empty() ? 0.0 : static_cast<double>(loops_.back().extent));
    f[k++] = scaled(outer);
    f[k++] = scaled(static_cast<double>(vec_inner));
    f[k++] = scaled(vec_count ? vec_product : 0);
    f[k++] = !loops_.empty() && loops_.back().kind == ForKind::kVectorized ? 1.0f : 0.0f;
    f[k++] = scaled(unroll_count ? unroll_product : 0);
    f[k++] = scaled(unroll_count);
    f[k++] = scaled(par_count ? par_product : 0);
    f[k++] = scaled(par_count);
    f[k++] = scaled(guards_);
    f[k++] = scaled(reduce_count);
    f[k++] = scaled(reduce_count ? reduce_product : 0);
    f[k++] = !loops_.empty() && out.strides.back() == 0 ? 1.0f : 0.0f;
    f[k++] = scaled(static_cast<double>(accesses.size()));
    // Buffers, most bytes touched first.
    std::vector<std::pair<double, size_t>> order;
    for (size_t a = 0; a < accesses.size(); ++a) {
      double elem = accesses[a].buffer->dtype.bytes();
      order.emplace_back(footprint(accesses[a], loops_, 0) * elem, a);
    }
    std::stable_sort(order.begin(), order.end(),
                     [](const auto& x, const auto& y) { return x.first > y.first; });
    double bytes_at_level[kIntensitySamples] = {};
    for (size_t slot_index = 0; slot_index < order.size(); ++slot_index) {
      const Access& a = accesses[order[slot_index].second];
      const double elem = a.buffer->dtype.bytes();
      for (int lvl = 0; lvl < kIntensitySamples; ++lvl) {
        size_t first = loops_.size() > static_cast<size_t>(lvl) ? loops_.size() - lvl - 1 : 0;
        bytes_at_level[lvl] += footprint(a, loops_, first) * elem;
      }
      const int slot = static_cast<int>(slot_index);
      if (slot >= kBufferSlots) continue;
      int b = kComputeFeatures + slot * kPerBuffer;
      auto level = [&](size_t inner) {
        size_t first = loops_.size() > inner ? loops_.size() - inner : 0;
        return footprint(a, loops_, first) * elem;
      };
      int64_t innermost_stride = 0;
      for (size_t l = loops_.size(); l-- > 0;) {
        if (a.strides[l] != 0) {
          innermost_stride = a.strides[l];
          break;
        }
      }
      double unique = footprint(a, loops_, 0);
      // The innermost loop that does not move the access: data is reused
      // across its iterations, after the loops inside it touch `distance`.
      double reuse_extent = 0, distance = 0;
      for (size_t l = loops_.size(); l-- > 0;) {
        if (a.strides[l] == 0) {
          reuse_extent = static_cast<double>(loops_[l].extent);
          distance = footprint(a, loops_, l + 1) * elem;
          break;
        }
      }
      f[b + 0] = a.read ? 1.0f : 0.0f;
      f[b + 1] = a.write ? 1.0f : 0.0f;
      f[b + 2] = scaled(elem);
      f[b + 3] = scaled(static_cast<double>(std::llabs(innermost_stride)));
      f[b + 4] = scaled(loops_.empty() ? 0.0 : static_cast<double>(std::llabs(a.strides.back())));
      f[b + 5] = scaled(level(1));
      f[b + 6] = scaled(level(2));
      f[b + 7] = scaled(level(3));
      f[b + 8] = scaled(unique * elem);
      f[b + 9] = scaled(cache_lines(a, loops_, unique));
      f[b + 10] = scaled(unique > 0 ? trips * a.count / unique : 0);
      f[b + 11] = scaled(distance);
      f[b + 12] = scaled(reuse_extent);
      f[b + 13] = a.buffer->scope == "local" ? 1.0f : 0.0f;
      f[b + 14] = scaled(a.count);
    }
    // Arithmetic intensity: operations over bytes, loop level by loop level.
    double per_run = ops.add_sub + ops.mul + ops.div + 2 * ops.fma + ops.math + ops.cmp;
    int ai = kComputeFeatures + kBufferSlots * kPerBuffer;
    for (int lvl = 0; lvl < kIntensitySamples; ++lvl) {
      double iters = 1;
      for (size_t l = loops_.size() > static_cast<size_t>(lvl) ? loops_.size() - lvl - 1 : 0;
           l < loops_.size(); ++l) {
        iters *= static_cast<double>(loops_[l].extent);
      }
      f[ai + lvl] = scaled(bytes_at_level[lvl] > 0 ? per_run * iters / bytes_at_level[lvl] : 0);
    }
    f[ai + kIntensitySamples] =
        n.buffer->scope == "local"
            ? scaled(static_cast<double>(n.buffer.storage_elements() * n.buffer->dtype.bytes()))
            : 0.0f;
    f[ai + kIntensitySamples + 1] = kLocalTotalPlaceholder;
    rows_.insert(rows_.end(), f.begin(), f.end());
  }

  std::vector<Loop> loops_;
  int guards_ = 0;
  int64_t local_bytes_ = 0;
  std::vector<float> rows_;
};

}  // namespace

const std::vector<std::string>& feature_names() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> n = {"float_add_sub",
                                  "float_mul",
                                  "float_div",
                                  "float_fma",
                                  "float_math",
                                  "float_cmp",
                                  "int_ops",
                                  "select",
                                  "cast",
                                  "loads",
                                  "loops",
                                  "trips",
                                  "innermost_extent",
                                  "outer_trips",
                                  "vector_inner_extent",
                                  "vector_product",
                                  "innermost_is_vector",
                                  "unroll_product",
                                  "unroll_loops",
                                  "parallel_product",
                                  "parallel_loops",
                                  "guards",
                                  "reduce_loops",
                                  "reduce_trips",
                                  "innermost_is_reduce",
                                  "buffers"};
    const char* per_buffer[] = {"is_read",
                                "is_write",
                                "elem_bytes",
                                "stride",
                                "innermost_loop_stride",
                                "bytes_1_loop",
                                "bytes_2_loops",
                                "bytes_3_loops",
                                "bytes_all",
                                "cache_lines",
                                "reuse_count",
                                "reuse_distance_bytes",
                                "reuse_loop_extent",
                                "is_local",
                                "accesses"};
    for (int b = 0; b < kBufferSlots; ++b) {
      for (const char* p : per_buffer) n.push_back("buf" + std::to_string(b) + "." + p);
    }
    for (int l = 0; l < kIntensitySamples; ++l) {
      n.push_back("intensity_" + std::to_string(l + 1) + "_loops");
    }
    n.push_back("store_alloc_bytes");
    n.push_back("local_alloc_bytes");
    return n;
  }();
  return names;
}

ProgramFeatures extract_features(const lower::PrimFunc& f) { return Extractor().run(f); }

LoweredState lower_for_search(const schedule::ComputeDAG& dag, const schedule::State& state) {
  LoweredState out;
  out.func = lower::lower_schedule(schedule::replay(dag, state), "kernel");
  out.program_hash = structural_hash(out.func);
  out.features = extract_features(out.func);
  return out;
}

}  // namespace tensortune::search
