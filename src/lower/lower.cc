#include "tensortune/lower/lower.h"

#include <algorithm>
#include <map>
#include <optional>
#include <set>

#include "tensortune/ir/arith.h"
#include "tensortune/ir/expr_functor.h"
#include "tensortune/ir/simplify.h"
#include "tensortune/lower/pipeline.h"

namespace tensortune::lower {
namespace {

using schedule::ComputeLocation;
using schedule::IterAnnotation;
using schedule::IterRelation;
using schedule::LoopState;
using schedule::Stage;

// Where a stage's values live: its buffer and, for a stage computed inside
// another's loop, the region of the tensor the buffer holds.
struct Placement {
  Buffer buffer;
  std::vector<Expr> region_min;  // empty: the buffer holds the whole tensor
  std::vector<int64_t> region_extent;
  std::optional<PackedLayout> packed;  // a layout-rewritten input
};

std::string c_identifier(const std::string& name) {
  std::string out;
  for (char c : name) out += std::isalnum(static_cast<unsigned char>(c)) ? c : '_';
  if (out.empty() || std::isdigit(static_cast<unsigned char>(out[0]))) out = "t_" + out;
  return out;
}

// The flat element index of `indices` in `buffer`: int32 arithmetic when the
// buffer is small enough (no widening in the generated code), else int64.
Expr flat_index(const Buffer& buffer, const std::vector<Expr>& indices) {
  TT_ICHECK(indices.size() == buffer->shape.size(), "index rank mismatch for ", buffer->name);
  bool narrow = buffer.storage_elements() < INT32_MAX;
  for (const auto& i : indices) narrow = narrow && i.dtype() == DataType::int32();
  DataType t = narrow ? DataType::int32() : DataType::int64();
  Expr flat = ir::make_const(t, 0);
  for (size_t d = 0; d < indices.size(); ++d) {
    Expr i = indices[d].dtype() == t ? indices[d] : ir::cast(t, indices[d]);
    flat = flat + i * ir::make_const(t, static_cast<double>(buffer->strides[d]));
  }
  return ir::simplify(flat);
}

ir::Expr combine(ir::ReduceOp op, Expr acc, Expr value) {
  switch (op) {
    case ir::ReduceOp::kSum: return acc + value;
    case ir::ReduceOp::kProd: return acc * value;
    case ir::ReduceOp::kMax: return ir::max(acc, value);
    case ir::ReduceOp::kMin: return ir::min(acc, value);
  }
  TT_ICHECK(false, "bad reduce op");
  return acc;
}

ForKind for_kind(IterAnnotation a) {
  switch (a) {
    case IterAnnotation::kNone: return ForKind::kSerial;
    case IterAnnotation::kParallel: return ForKind::kParallel;
    case IterAnnotation::kVectorize: return ForKind::kVectorized;
    case IterAnnotation::kUnroll: return ForKind::kUnrolled;
  }
  return ForKind::kSerial;
}

/// The fewest statements a target can make of a vectorized loop over `lane`
/// of `lanes` iterations: one vector statement per 64 bytes of its widest
/// store (the widest vectors), at least one; but a loop with a guard on its
/// lanes inside stays a loop over lanes (`omp simd`, masked), whose lanes
/// count one by one. A guard on an outer loop (the rows of a ragged register
/// tile) guards whole vector statements: counting it by lanes kept a 7-row
/// tile's row loop rolled and GCC, where it did not unroll the loop itself,
/// kept the 28 accumulators in memory (a dense layer at half speed).
int64_t vector_statements(const Stmt& body, const ir::VarNode* lane, int64_t lanes) {
  int64_t widest = 1;
  bool guarded = false;
  visit_stmts(body, [&](const Stmt& st) {
    if (st->kind() == StmtKind::kBufferStore) {
      const auto& store = static_cast<const BufferStoreNode&>(*st);
      widest = std::max<int64_t>(widest, store.buffer->dtype.bytes());
    }
    if (st->kind() == StmtKind::kIfThenElse) {
      guarded = guarded || ir::uses_var(static_cast<const IfThenElseNode&>(*st).condition, lane);
    }
  });
  if (guarded) return lanes;
  constexpr int64_t kWidestVectorBytes = 64;
  return std::max<int64_t>(1, (lanes * widest + kWidestVectorBytes - 1) / kWidestVectorBytes);
}

// Marks as unrolled the serial loops under `s` whose whole nest has at most
// `max_step` iterations (the auto_unroll_max_step pragma). Returns the nest's
// trip count, or -1 when it cannot be unrolled (non-constant or too large).
int64_t mark_unroll(Stmt& s, int64_t max_step) {
  switch (s->kind()) {
    case StmtKind::kFor: {
      const auto& f = static_cast<const ForNode&>(*s);
      Stmt body = f.body;
      int64_t inner = mark_unroll(body, max_step);
      auto extent = ir::as_const_int(f.extent);
      // A vectorized loop becomes vector statements, not `extent` copies:
      // counting its lanes kept a register tile's row loop (14 rows of two
      // 16-lane vectors, 448 "trips") rolled, its accumulators in memory.
      // Counted as one, a 3x3 depthwise kernel unrolled 63 guarded loops of
      // 64 lanes into a function that GCC took 16 s to compile.
      const int64_t copies = f.for_kind == ForKind::kVectorized
                                 ? vector_statements(f.body, f.loop_var.get(), extent.value_or(0))
                                 : extent.value_or(0);
      int64_t trips = (inner >= 0 && extent && copies * inner <= max_step) ? copies * inner : -1;
      ForKind kind = f.for_kind;
      if (trips >= 0 && kind == ForKind::kSerial) kind = ForKind::kUnrolled;
      if (!body.same_as(f.body) || kind != f.for_kind) {
        s = for_loop(f.loop_var, f.min, f.extent, kind, body);
      }
      return kind == ForKind::kParallel ? -1 : trips;
    }
    case StmtKind::kSeq: {
      const auto& q = static_cast<const SeqNode&>(*s);
      std::vector<Stmt> stmts = q.stmts;
      int64_t total = 0;
      bool ok = true;
      for (auto& st : stmts) {
        int64_t t = mark_unroll(st, max_step);
        ok = ok && t >= 0;
        total += std::max<int64_t>(t, 0);
      }
      s = seq(stmts);
      return ok ? std::max<int64_t>(total, 1) : -1;
    }
    case StmtKind::kIfThenElse: {
      const auto& n = static_cast<const IfThenElseNode&>(*s);
      Stmt then_case = n.then_case, else_case = n.else_case;
      int64_t a = mark_unroll(then_case, max_step);
      int64_t b = else_case ? mark_unroll(else_case, max_step) : 1;
      s = if_then_else(n.condition, then_case, else_case);
      return a >= 0 && b >= 0 ? std::max(a, b) : -1;
    }
    case StmtKind::kAllocate: {
      const auto& n = static_cast<const AllocateNode&>(*s);
      Stmt body = n.body;
      int64_t t = mark_unroll(body, max_step);
      s = allocate(n.buffer, body);
      return t;
    }
    case StmtKind::kLetStmt: {
      const auto& n = static_cast<const LetStmtNode&>(*s);
      Stmt body = n.body;
      int64_t t = mark_unroll(body, max_step);
      s = let_stmt(n.var, n.value, body);
      return t;
    }
    case StmtKind::kBufferStore:
    case StmtKind::kEvaluate: return 1;
  }
  return -1;
}

/// The extents of the parts of split `rel` when its parent spans
/// extent[parent], which bound inference may have made smaller than the
/// stage's own shape (a stage computed at a loop of its consumer). As in
/// TVM's InferBound, a part of fixed length l gets min(l, what is left), from
/// the side away from the remainder part inwards: a tile level that the
/// consumer's loops already cover shrinks to one iteration instead of
/// running its full length under a guard that is false for all but one.
void split_extents(const IterRelation& rel, const Stage& st, std::vector<int64_t>& extent) {
  const int n = static_cast<int>(rel.outputs.size());
  int64_t left = extent[rel.inputs[0]];
  auto tighten = [&](int k) {
    int64_t length = st.iters[rel.outputs[k]].extent;
    extent[rel.outputs[k]] = std::min(length, std::max<int64_t>(left, 1));
    left = (left + length - 1) / length;
  };
  if (rel.remainder == 0) {
    for (int k = n - 1; k >= 1; --k) tighten(k);
  } else if (rel.remainder == n - 1) {
    for (int k = 0; k < n - 1; ++k) tighten(k);
  } else {
    // A remainder in the middle: fixed lengths as they are.
    int64_t fixed = 1;
    for (int k = 0; k < n; ++k) {
      if (k != rel.remainder) {
        extent[rel.outputs[k]] = st.iters[rel.outputs[k]].extent;
        fixed *= extent[rel.outputs[k]];
      }
    }
    left = (left + fixed - 1) / fixed;
  }
  extent[rel.outputs[rel.remainder]] = std::max<int64_t>(left, 1);
}

// The loops that copy `original` into `packed` in `layout` (elements the
// layout pads with are 0); the outermost part with more than one iteration
// runs in parallel when `parallel`.
Stmt packing_nest(const PackedLayout& layout, const te::Tensor& t, const Buffer& original,
                  const Buffer& packed, bool parallel) {
  // One loop per part; each tensor index from its parts' loops.
  std::vector<Var> vars;
  std::vector<Expr> index(t.shape().size());
  for (size_t k = 0; k < layout.parts.size(); ++k) {
    const auto& p = layout.parts[k];
    vars.push_back(Var::make("p" + std::to_string(k)));
    Expr term = p.inner == 1
                    ? Expr(vars.back())
                    : vars.back() * ir::make_const(DataType::int32(), static_cast<double>(p.inner));
    auto& slot = index[static_cast<size_t>(p.dim)];
    slot = slot ? slot + term : term;
  }
  Expr cond;
  for (size_t d = 0; d < index.size(); ++d) {
    if (!index[d]) index[d] = ir::make_const(DataType::int32(), 0);
    int64_t span = 1;
    for (const auto& p : layout.parts) {
      if (p.dim == static_cast<int>(d)) span *= p.extent;
    }
    if (span > t.shape()[d] || (layout.parts.empty() && t.shape()[d] > 1)) {
      Expr in = index[d] < ir::make_const(DataType::int32(), static_cast<double>(t.shape()[d]));
      cond = cond ? ir::logical_and(cond, in) : in;
    }
  }
  Expr flat;
  int64_t stride = 1;
  for (size_t k = vars.size(); k-- > 0;) {
    Expr term = stride == 1
                    ? Expr(vars[k])
                    : vars[k] * ir::make_const(DataType::int32(), static_cast<double>(stride));
    flat = flat ? flat + term : term;
    stride *= layout.parts[k].extent;
  }
  if (!flat) flat = ir::make_const(DataType::int32(), 0);
  Stmt copy = buffer_store(packed, flat, ir::buffer_load(original, flat_index(original, index)));
  Stmt body = cond ? if_then_else(ir::simplify(cond), copy,
                                  buffer_store(packed, flat, ir::make_const(t.dtype(), 0)))
                   : copy;
  // Inside a kernel the copy runs on every core: the outermost part with
  // more than one iteration is the parallel loop.
  size_t parallel_part = vars.size();
  for (size_t k = 0; parallel && k < vars.size(); ++k) {
    if (layout.parts[k].extent > 1) {
      parallel_part = k;
      break;
    }
  }
  for (size_t k = vars.size(); k-- > 0;) {
    body = for_loop(vars[k], ir::make_const(DataType::int32(), 0),
                    ir::make_const(DataType::int32(), static_cast<double>(layout.parts[k].extent)),
                    k == parallel_part ? ForKind::kParallel : ForKind::kSerial, body);
  }
  return body;
}

class Lowerer {
 public:
  explicit Lowerer(const LoopState& state) : state_(state), placements_(state.num_stages()) {}

  PrimFunc run(const std::string& name) {
    std::vector<Buffer> params;
    int num_inputs = 0;
    const auto& tensors = state_.dag().tensors();
    // Inputs the kernel packs itself (rewritten, not constant): packed first.
    std::vector<Stmt> packing;
    std::vector<Buffer> packed_buffers;
    for (const auto& input : tensors.inputs) {
      int s = state_.stage_named(input.name());
      TT_ICHECK(s >= 0, "input stage missing");
      if (!state_.stage(s).layout_rewrite) {
        placements_[s].buffer = make_buffer(s, input.shape(), "global");
      } else if (packed_outside(state_, s)) {
        placements_[s].packed = packed_layout(state_, s);
        placements_[s].buffer = make_buffer(s, {placements_[s].packed->elements()}, "global");
      } else {
        Buffer original = make_buffer(s, input.shape(), "global");
        placements_[s].packed = packed_layout(state_, s);
        Buffer packed = Buffer::make(unique_buffer_name(original->name + "_packed"), input.dtype(),
                                     {placements_[s].packed->elements()}, {1}, "local");
        packing.push_back(packing_nest(*placements_[s].packed, input, original, packed, true));
        packed_buffers.push_back(packed);
        placements_[s].buffer = packed;
        params.push_back(original);
        ++num_inputs;
        continue;
      }
      params.push_back(placements_[s].buffer);
      ++num_inputs;
    }
    for (const auto& output : tensors.outputs) {
      int s = -1;
      for (int i = 0; i < state_.num_stages(); ++i) {
        if (state_.stage(i).is_output && state_.stage(i).name() == output.name()) s = i;
      }
      TT_ICHECK(s >= 0, "output stage '", output.name(), "' missing");
      placements_[s].buffer = make_buffer(s, output.shape(), "global");
      params.push_back(placements_[s].buffer);
    }
    // Intermediate stages at the root get whole-tensor buffers around everything.
    std::vector<Buffer> root_buffers;
    for (int s = 0; s < state_.num_stages(); ++s) {
      const Stage& st = state_.stage(s);
      if (st.is_placeholder() || placements_[s].buffer) continue;
      if (st.location == ComputeLocation::kRoot) {
        placements_[s].buffer = make_buffer(s, st.tensor.shape(), "local");
        root_buffers.push_back(placements_[s].buffer);
      }
    }
    std::vector<Stmt> nests = std::move(packing);
    for (int s = 0; s < state_.num_stages(); ++s) {
      const Stage& st = state_.stage(s);
      if (!st.is_placeholder() && st.location == ComputeLocation::kRoot)
        nests.push_back(emit_stage(s));
    }
    Stmt body = seq(std::move(nests));
    for (auto it = root_buffers.rbegin(); it != root_buffers.rend(); ++it)
      body = allocate(*it, body);
    for (auto it = packed_buffers.rbegin(); it != packed_buffers.rend(); ++it)
      body = allocate(*it, body);
    return PrimFunc::make(c_identifier(name), std::move(params), num_inputs, body);
  }

 private:
  // Loop variables get distinct names in a kernel, so the printed IR and the
  // generated code read unambiguously.
  std::string unique_var_name(const std::string& base) {
    std::string name = base;
    for (int k = 1; used_var_names_.count(name) || used_names_.count(name); ++k) {
      name = base + "_" + std::to_string(k);
    }
    used_var_names_.insert(name);
    return name;
  }

  // Dense strides in the stage's storage order, else with dimension
  // `innermost` (when not -1) stored innermost and the others in order.
  Buffer make_buffer(int s, const std::vector<int64_t>& shape, const std::string& scope,
                     int innermost = -1) {
    const Stage& st = state_.stage(s);
    std::vector<int> order;                                // outer to inner
    if (scope != "global" && !st.storage_order.empty()) {  // argument layouts are the caller's
      TT_ICHECK(st.storage_order.size() == shape.size(), "storage order of '", st.name(),
                "' does not match its rank");
      order = st.storage_order;
    } else {
      for (int d = 0; d < static_cast<int>(shape.size()); ++d) {
        if (d != innermost) order.push_back(d);
      }
      if (innermost >= 0) order.push_back(innermost);
    }
    std::vector<int64_t> strides(shape.size(), 1);
    int64_t stride = 1;
    for (auto d = order.rbegin(); d != order.rend(); ++d) {
      int64_t& mine = strides[static_cast<size_t>(*d)];
      mine = stride;
      if (scope != "global") {  // argument layouts are the caller's: dense
        for (const auto& align : st.storage_align) {
          if (align.dim != *d) continue;
          while (mine % align.factor != align.offset) ++mine;
        }
      }
      stride = mine * shape[static_cast<size_t>(*d)];
    }
    return Buffer::make(unique_buffer_name(c_identifier(st.name())), st.tensor.dtype(), shape,
                        strides, scope);
  }

  // The buffer of a region computed inside another stage's loop (a register
  // tile's accumulators). Its innermost spatial loop's axis is stored
  // innermost (unless the schedule aligns or orders its storage): an NCHW
  // convolution's tile vectorized over output channels keeps each vector of
  // accumulators contiguous.
  Buffer make_region_buffer(int s, const std::vector<int64_t>& shape) {
    const Stage& st = state_.stage(s);
    const auto root = std::find(st.root.begin(), st.root.end(), st.innermost_spatial_root());
    const int inner = root == st.root.end() || !st.storage_align.empty() ||
                              root - st.root.begin() >= static_cast<int64_t>(shape.size())
                          ? -1
                          : static_cast<int>(root - st.root.begin());
    return make_buffer(s, shape, "local", inner);
  }

  std::string unique_buffer_name(std::string name) {
    while (used_names_.count(name)) name += "_";
    used_names_.insert(name);
    return name;
  }

  // Rewrites a stage's expression: its axes to their values, reads of inlined
  // stages to their expressions, other reads to buffer loads (or, when
  // `collect` names a stage, records the indices of reads of that stage).
  class Rewriter final : public ir::ExprMutator {
   public:
    Rewriter(Lowerer& lowerer, std::map<const ir::VarNode*, Expr> values, int collect = -1,
             std::vector<std::vector<Expr>>* collected = nullptr)
        : lowerer_(lowerer), values_(std::move(values)), collect_(collect), collected_(collected) {}

   protected:
    using ExprMutator::rewrite;
    Expr rewrite(const ir::VarNode& n, const Expr& self) override {
      auto it = values_.find(&n);
      return it == values_.end() ? self : it->second;
    }
    Expr rewrite(const ir::ProducerLoadNode& n, const Expr& self) override {
      std::vector<Expr> indices;
      mutate_all(n.indices, &indices);
      int s = lowerer_.stage_of(n.producer.get());
      const Stage& st = lowerer_.state_.stage(s);
      if (st.location == ComputeLocation::kInline) {
        auto op = st.tensor.compute_op();
        std::map<const ir::VarNode*, Expr> values = values_;
        for (size_t d = 0; d < op->axis.size(); ++d) values[op->axis[d]->var.get()] = indices[d];
        Rewriter inner(lowerer_, std::move(values), collect_, collected_);
        return inner.mutate(op->body);
      }
      if (s == collect_) {
        collected_->push_back(indices);
        return ir::producer_load(n.producer, indices);
      }
      if (collect_ >= 0) return ir::producer_load(n.producer, indices);
      return lowerer_.load(s, indices);
    }

   private:
    Lowerer& lowerer_;
    std::map<const ir::VarNode*, Expr> values_;
    int collect_;
    std::vector<std::vector<Expr>>* collected_;
  };

  int stage_of(const Object* tensor) {
    for (int s = 0; s < state_.num_stages(); ++s) {
      if (state_.stage(s).tensor.get() == tensor) return s;
    }
    TT_ICHECK(false, "read of a tensor that is no stage of the state");
    return -1;
  }

  Expr load(int s, const std::vector<Expr>& indices) {
    const Placement& p = placements_[s];
    TT_ICHECK(p.buffer, "stage '", state_.stage(s).name(), "' is read before it has a buffer");
    if (p.packed) return ir::buffer_load(p.buffer, p.packed->index(indices));
    std::vector<Expr> local = indices;
    for (size_t d = 0; d < p.region_min.size(); ++d) local[d] = indices[d] - p.region_min[d];
    return ir::buffer_load(p.buffer, flat_index(p.buffer, local));
  }

  // Everything known about the stage being emitted.
  struct StageContext {
    int stage = -1;
    const Stage* st = nullptr;
    Ref<te::ComputeOpNode> op;
    const ir::ReduceNode* red = nullptr;
    std::vector<int64_t> extent;                     // per iterator id
    std::vector<Var> loop_vars;                      // per leaf position
    ir::VarRanges ranges;                            // the stage's loop variables
    std::map<const ir::VarNode*, Expr> axis_values;  // op axes and reduce axes -> coordinates
    std::vector<Expr> predicates;
    std::set<const ir::VarNode*> reduce_vars;
    Expr store_index;
    int first_reduce = -1;
  };

  // The loops of one stage, with the stages computed at its loops inside.
  Stmt emit_stage(int s) {
    StageContext c;
    c.stage = s;
    c.st = &state_.stage(s);
    const Stage& st = *c.st;
    c.op = st.tensor.compute_op();
    if (c.op->body->kind() == ir::ExprKind::kReduce) {
      c.red = static_cast<const ir::ReduceNode*>(c.op->body.get());
    }
    Placement& place = placements_[s];
    const size_t n_spatial = c.op->axis.size();

    // Extents: root axes from the region (or the shape), then down the relations.
    c.extent.assign(st.iters.size(), 0);
    for (size_t r = 0; r < st.root.size(); ++r) {
      c.extent[st.root[r]] = r < n_spatial && !place.region_extent.empty()
                                 ? place.region_extent[r]
                                 : st.iters[st.root[r]].extent;
    }
    for (const auto& rel : st.relations) {
      if (rel.kind == IterRelation::Kind::kSplit) {
        split_extents(rel, st, c.extent);
      } else {
        int64_t product = 1;
        for (int in : rel.inputs) product *= c.extent[in];
        c.extent[rel.outputs[0]] = product;
      }
    }

    // Loop variables, and the value of every iterator from the leaves up.
    std::vector<Expr> value(st.iters.size());
    for (size_t k = 0; k < st.leaves.size(); ++k) {
      int id = st.leaves[k];
      Var v = Var::make(unique_var_name(c_identifier(st.iters[id].name)),
                        c.extent[id] > INT32_MAX ? DataType::int64() : DataType::int32());
      c.loop_vars.push_back(v);
      value[id] = v;
      c.ranges[v.get()] = c.extent[id];
      if (st.iters[id].kind == ir::IterKind::kReduce) {
        c.reduce_vars.insert(v.get());
        if (c.first_reduce < 0) c.first_reduce = static_cast<int>(k);
      }
    }
    for (auto it = st.relations.rbegin(); it != st.relations.rend(); ++it) {
      const IterRelation& rel = *it;
      if (rel.kind == IterRelation::Kind::kSplit) {
        Expr v = value[rel.outputs[0]];
        for (size_t k = 1; k < rel.outputs.size(); ++k) {
          v = v * ir::make_const(v.dtype(), static_cast<double>(c.extent[rel.outputs[k]])) +
              value[rel.outputs[k]];
        }
        value[rel.inputs[0]] = ir::simplify(v);
        int64_t covered = 1;
        for (int o : rel.outputs) covered *= c.extent[o];
        if (covered > c.extent[rel.inputs[0]]) {
          c.predicates.push_back(
              value[rel.inputs[0]] <
              ir::make_const(v.dtype(), static_cast<double>(c.extent[rel.inputs[0]])));
        }
      } else {
        Expr fused = value[rel.outputs[0]];
        int64_t inner = 1;
        for (int k = static_cast<int>(rel.inputs.size()) - 1; k >= 0; --k) {
          int in = rel.inputs[k];
          Expr v =
              inner == 1
                  ? fused
                  : ir::floordiv(fused, ir::make_const(fused.dtype(), static_cast<double>(inner)));
          if (k > 0)
            v = ir::floormod(v, ir::make_const(fused.dtype(), static_cast<double>(c.extent[in])));
          value[in] = ir::simplify(v);
          inner *= c.extent[in];
        }
      }
    }

    // Each axis's coordinate in the tensor; guards where a region overhangs it.
    std::vector<Expr> local_index;
    for (size_t r = 0; r < n_spatial; ++r) {
      Expr v = value[st.root[r]];
      local_index.push_back(v);
      Expr coord = place.region_min.empty() ? v : ir::simplify(place.region_min[r] + v);
      c.axis_values[c.op->axis[r]->var.get()] = coord;
      if (place.region_min.empty()) continue;
      int64_t dim = st.tensor.shape()[r];
      ir::VarRanges all = enclosing_;
      all.insert(c.ranges.begin(), c.ranges.end());
      auto b = ir::bound_of(coord, all);
      auto lo = b ? ir::as_const_int(b->min) : std::nullopt;
      if (!lo || *lo < 0) c.predicates.push_back(coord >= ir::make_const(coord.dtype(), 0));
      if (!lo || *lo + b->extent > dim) {
        c.predicates.push_back(coord < ir::make_const(coord.dtype(), static_cast<double>(dim)));
      }
    }
    if (c.red) {
      for (size_t r = 0; r < c.red->axis.size(); ++r) {
        c.axis_values[c.red->axis[r]->var.get()] = value[st.root[n_spatial + r]];
      }
    }
    if (!place.buffer) place.buffer = make_region_buffer(s, place.region_extent);
    c.store_index = flat_index(place.buffer, local_index);
    return build(c, 0, /*init_only=*/false);
  }

  Stmt guard(const StageContext& c, Stmt body, bool spatial_only) {
    const bool pad = computes_padding_safely(c, body);
    Expr cond;
    for (const auto& p : c.predicates) {
      bool uses_reduce = false;
      for (const auto* v : c.reduce_vars) uses_reduce |= ir::uses_var(p, v);
      if (spatial_only && uses_reduce) continue;
      if (pad && !uses_reduce) continue;
      cond = cond ? ir::logical_and(cond, p) : p;
    }
    return cond ? if_then_else(ir::simplify(cond), body) : body;
  }

  // A stage that writes a buffer of its own may compute the points past the
  // tensor's edge that a ragged tile covers instead of testing every point,
  // when at those points nothing it reads or writes leaves its buffer (the
  // inputs it reads are packed, with padding, or local) and nothing can
  // trap. Its consumers never read those points, and a register tile runs
  // without a branch per element. Reduction axes stay guarded: their
  // padding would add to the sums.
  bool computes_padding_safely(const StageContext& c, const Stmt& body) const {
    if (c.st->is_output) return false;
    ir::VarRanges all = enclosing_;
    all.insert(c.ranges.begin(), c.ranges.end());
    auto in_bounds = [&](const Buffer& b, const Expr& index) {
      auto bound = ir::bound_of(index, all);
      auto lo = bound ? ir::as_const_int(bound->min) : std::nullopt;
      return lo && *lo >= 0 && *lo + bound->extent <= b.storage_elements();
    };
    bool safe = true;
    auto check = [&](const Expr& e) {
      ir::visit_pre_order(e, [&](const Expr& x) {
        if (x->kind() == ir::ExprKind::kBufferLoad) {
          const auto& load = static_cast<const ir::BufferLoadNode&>(*x);
          safe = safe && in_bounds(load.buffer, load.index);
        } else if (x->kind() == ir::ExprKind::kBinary) {
          safe = safe && !ir::may_trap(static_cast<const ir::BinaryNode&>(*x));
        }
      });
    };
    visit_stmts(body, [&](const Stmt& st) {
      if (st->kind() == StmtKind::kBufferStore) {
        const auto& store = static_cast<const BufferStoreNode&>(*st);
        safe = safe && in_bounds(store.buffer, store.index);
      }
    });
    visit_stmt_exprs(body, check);
    return safe;
  }

  // The loops from leaf position `pos` inward. With init_only, the spatial
  // loops of a reduction's initialisation.
  Stmt build(StageContext& c, size_t pos, bool init_only) {
    const Stage& st = *c.st;
    const Buffer& buffer = placements_[c.stage].buffer;
    if (pos == st.leaves.size()) {
      Rewriter rewriter(*this, c.axis_values);
      if (!c.red) {
        return guard(c, buffer_store(buffer, c.store_index, rewriter.mutate(c.op->body)), false);
      }
      if (init_only) {
        Expr init = c.red->init ? rewriter.mutate(c.red->init)
                                : ir::reduce_identity(c.red->op, c.red->dtype);
        return guard(c, buffer_store(buffer, c.store_index, init), true);
      }
      Expr acc = ir::buffer_load(buffer, c.store_index);
      Stmt update = buffer_store(buffer, c.store_index,
                                 combine(c.red->op, acc, rewriter.mutate(c.red->source)));
      if (c.red->condition) update = if_then_else(rewriter.mutate(c.red->condition), update);
      return guard(c, update, false);
    }
    int id = st.leaves[pos];
    if (init_only && st.iters[id].kind == ir::IterKind::kReduce) return build(c, pos + 1, true);
    if (c.red && !init_only && static_cast<int>(pos) == c.first_reduce) {
      Stmt init_nest = build(c, pos, true);
      return seq({init_nest, build_loop(c, pos, false)});
    }
    return build_loop(c, pos, init_only);
  }

  // One loop (leaf `pos`), with the stages computed at it placed inside.
  Stmt build_loop(StageContext& c, size_t pos, bool init_only) {
    const Stage& st = *c.st;
    int id = st.leaves[pos];
    Var v = c.loop_vars[pos];
    enclosing_[v.get()] = c.extent[id];
    std::vector<Stmt> parts;
    std::vector<Buffer> buffers;
    if (!init_only) {
      for (int a : state_.attached_to(c.stage)) {
        if (state_.stage(a).attach_iter != id) continue;
        infer_region(a, c, pos);
        parts.push_back(emit_stage(a));
        buffers.push_back(placements_[a].buffer);
      }
    }
    Stmt body = build(c, pos + 1, init_only);
    if (!parts.empty()) {
      parts.push_back(body);
      body = seq(std::move(parts));
      for (auto it = buffers.rbegin(); it != buffers.rend(); ++it) body = allocate(*it, body);
    }
    const auto& iter = st.iters[id];
    if (iter.auto_unroll_max_step > 0) mark_unroll(body, iter.auto_unroll_max_step);
    enclosing_.erase(v.get());
    return for_loop(v, ir::make_const(v->dtype, 0),
                    ir::make_const(v->dtype, static_cast<double>(c.extent[id])),
                    for_kind(iter.annotation), body);
  }

  // The region of stage `a` that the stage of `c` reads inside its loop at
  // position `pos`: the loops after it vary, the others are held fixed.
  void infer_region(int a, const StageContext& c, size_t pos) {
    ir::VarRanges varying;
    for (size_t k = pos + 1; k < c.loop_vars.size(); ++k) {
      varying[c.loop_vars[k].get()] = c.ranges.at(c.loop_vars[k].get());
    }
    std::vector<std::vector<Expr>> reads;
    Rewriter collector(*this, c.axis_values, a, &reads);
    collector.mutate(c.op->body);
    const auto& shape = state_.stage(a).tensor.shape();
    Placement& p = placements_[a];
    p.region_min.clear();
    p.region_extent.clear();
    for (size_t d = 0; d < shape.size(); ++d) {
      std::optional<ir::IntBound> total;
      bool ok = !reads.empty();
      for (const auto& r : reads) {
        auto b = ir::bound_of(r[d], varying);
        if (!b) {
          ok = false;
          break;
        }
        if (!total) {
          total = b;
          continue;
        }
        auto diff = ir::const_difference(b->min, total->min);
        if (!diff) {
          ok = false;
          break;
        }
        int64_t lo = std::min<int64_t>(0, *diff);
        int64_t hi = std::max(total->extent, *diff + b->extent);
        if (*diff < 0) total->min = b->min;
        total->extent = hi - lo;
      }
      if (!ok || total->extent >= shape[d]) {
        p.region_min.push_back(ir::make_const(DataType::int32(), 0));
        p.region_extent.push_back(shape[d]);
      } else {
        p.region_min.push_back(ir::simplify(total->min));
        p.region_extent.push_back(total->extent);
      }
    }
    p.buffer = Buffer();  // made for the region when the stage is emitted
  }

  const LoopState& state_;
  std::vector<Placement> placements_;
  std::set<std::string> used_names_;      // buffers
  std::set<std::string> used_var_names_;  // loop variables
  ir::VarRanges enclosing_;               // loops around the point being emitted
};

}  // namespace

int64_t PackedLayout::elements() const {
  int64_t n = 1;
  for (const auto& p : parts) n *= p.extent;
  return n;
}

Expr PackedLayout::index(const std::vector<Expr>& indices) const {
  Expr flat;
  int64_t stride = 1;
  // The outermost part of a dimension needs no modulo: nothing lies beyond it.
  std::vector<bool> outermost(parts.size(), false);
  std::vector<bool> seen(indices.size(), false);
  for (size_t k = 0; k < parts.size(); ++k) {
    size_t d = static_cast<size_t>(parts[k].dim);
    if (!seen[d]) {
      outermost[k] = true;
      seen[d] = true;
    }
  }
  for (size_t k = parts.size(); k-- > 0;) {
    const Part& p = parts[k];
    Expr v = indices.at(static_cast<size_t>(p.dim));
    DataType t = v.dtype();
    if (p.inner != 1) v = ir::floordiv(v, ir::make_const(t, static_cast<double>(p.inner)));
    if (!outermost[k]) v = ir::floormod(v, ir::make_const(t, static_cast<double>(p.extent)));
    if (stride != 1) v = v * ir::make_const(t, static_cast<double>(stride));
    flat = flat ? flat + v : v;
    stride *= p.extent;
  }
  return flat ? ir::simplify(flat) : ir::make_const(DataType::int32(), 0);
}

PackedLayout packed_layout(const LoopState& state, int stage) {
  const Stage& placeholder = state.stage(stage);
  TT_ICHECK(placeholder.layout_rewrite, "'", placeholder.name(), "' is not layout-rewritten");
  std::vector<int> readers = state.consumers(stage);
  TT_ICHECK(readers.size() == 1, "a rewritten input has one reader");
  const Stage& reader = state.stage(readers[0]);
  auto op = reader.tensor.compute_op();
  // The reader's axes, in root order, by variable.
  std::map<const ir::VarNode*, int> root_of;
  for (size_t a = 0; a < op->axis.size(); ++a) root_of[op->axis[a]->var.get()] = reader.root[a];
  if (op->body->kind() == ir::ExprKind::kReduce) {
    const auto& red = static_cast<const ir::ReduceNode&>(*op->body);
    for (size_t r = 0; r < red.axis.size(); ++r) {
      root_of[red.axis[r]->var.get()] = reader.root[op->axis.size() + r];
    }
  }
  std::vector<ir::Expr> indices;
  ir::visit_pre_order(op->body, [&](const ir::Expr& e) {
    if (e->kind() != ir::ExprKind::kProducerLoad || !indices.empty()) return;
    const auto& load = static_cast<const ir::ProducerLoadNode&>(*e);
    if (load.producer.get() == placeholder.tensor.get()) indices = load.indices;
  });
  TT_ICHECK(!indices.empty() || placeholder.tensor.ndim() == 0, "the reader does not read it");
  // The parts of each root loop: the outputs of the splits below it, with
  // their strides within the axis (fuses stop the descent).
  std::map<int, std::pair<int, int64_t>> part_of;  // loop id -> (dim, inner)
  auto descend = [&](auto&& self, int id, int dim, int64_t inner) -> void {
    for (const auto& rel : reader.relations) {
      if (rel.kind != schedule::IterRelation::Kind::kSplit || rel.inputs[0] != id) continue;
      int64_t stride = inner;
      for (size_t k = rel.outputs.size(); k-- > 0;) {
        self(self, rel.outputs[k], dim, stride);
        stride *= reader.iters[rel.outputs[k]].extent;
      }
      return;
    }
    part_of[id] = {dim, inner};
  };
  PackedLayout layout;
  for (size_t d = 0; d < indices.size(); ++d) {
    if (indices[d]->kind() == ir::ExprKind::kVar) {
      auto it = root_of.find(static_cast<const ir::VarNode*>(indices[d].get()));
      TT_ICHECK(it != root_of.end(), "a rewritten input is read at a reader's axis");
      descend(descend, it->second, static_cast<int>(d), 1);
    } else {
      layout.parts.push_back({static_cast<int>(d), placeholder.tensor.shape()[d], 1});
    }
  }
  // The reader's loops in order, each fused loop as the loops it fused.
  std::vector<int> order;
  auto expand = [&](auto&& self, int id) -> void {
    for (const auto& rel : reader.relations) {
      if (rel.kind == schedule::IterRelation::Kind::kFuse && rel.outputs[0] == id) {
        for (int in : rel.inputs) self(self, in);
        return;
      }
    }
    order.push_back(id);
  };
  for (int leaf : reader.leaves) expand(expand, leaf);
  for (int id : order) {
    auto it = part_of.find(id);
    if (it == part_of.end()) continue;
    layout.parts.push_back({it->second.first, reader.iters[id].extent, it->second.second});
    part_of.erase(it);
  }
  TT_ICHECK(part_of.empty(), "a part of a rewritten input's axis is not among the reader's loops");
  return layout;
}

bool packed_outside(const LoopState& state, int stage) {
  const Stage& st = state.stage(stage);
  return st.layout_rewrite && state.dag().is_constant_input(state.dag().stage_of(st.tensor));
}

std::vector<Packer> lower_packers(const LoopState& state, const std::string& name) {
  std::vector<Packer> out;
  const auto& inputs = state.dag().tensors().inputs;
  for (size_t i = 0; i < inputs.size(); ++i) {
    int s = state.stage_named(inputs[i].name());
    if (s < 0 || !packed_outside(state, s)) continue;
    PackedLayout layout = packed_layout(state, s);
    const te::Tensor& t = inputs[i];
    Buffer original = Buffer::make(c_identifier(t.name()), t.dtype(), t.shape());
    Buffer packed =
        Buffer::make(c_identifier(t.name()) + "_packed", t.dtype(), {layout.elements()});
    Stmt body = packing_nest(layout, t, original, packed, false);
    std::string fname = c_identifier(name + "_pack" + std::to_string(i));
    out.push_back({static_cast<int>(i), PrimFunc::make(fname, {original, packed}, 1, body),
                   layout.elements()});
  }
  return out;
}

PrimFunc lower_schedule(const LoopState& state, const std::string& name) {
  Lowerer lowerer(state);
  return lowerer.run(name);
}

PrimFunc lower(const LoopState& state, const std::string& name) {
  return run_pipeline(lower_schedule(state, name));
}

}  // namespace tensortune::lower
