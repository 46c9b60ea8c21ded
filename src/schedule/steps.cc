#include "tensortune/schedule/steps.h"

#include <algorithm>
#include <cctype>
#include <numeric>
#include <set>

#include "tensortune/ir/expr_functor.h"
#include "tensortune/object/serialize.h"
#include "tensortune/support/strings.h"

namespace tensortune::schedule {
namespace {

// ---- validation helpers shared by the steps ----

Stage& scheduled_stage(LoopState& state, int index) {
  Stage& s = state.mutable_stage(index);
  TT_CHECK(!s.is_placeholder(), kInvalidArgument, "stage ", index, " ('", s.name(),
           "') is a placeholder and has no loops");
  return s;
}

int leaf_id(const Stage& s, int pos) {
  TT_CHECK(pos >= 0 && pos < static_cast<int>(s.leaves.size()), kInvalidArgument, "loop ", pos,
           " does not exist; stage '", s.name(), "' has loops 0..",
           static_cast<int>(s.leaves.size()) - 1);
  return s.leaves[pos];
}

bool has_attached(const LoopState& state, int stage, int iter_id) {
  for (int a : state.attached_to(stage)) {
    if (state.stage(a).attach_iter == iter_id) return true;
  }
  return false;
}

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

// Splits loop `pos` of `stage` into parts; the remainder part is outermost when
// remainder_outer, else innermost.
void split_loop(LoopState& state, int stage_index, int pos, const std::vector<int64_t>& lengths,
                bool remainder_outer) {
  Stage& s = scheduled_stage(state, stage_index);
  int id = leaf_id(s, pos);
  TT_CHECK(!lengths.empty(), kInvalidArgument, "a split needs at least one length");
  int64_t product = 1;
  for (int64_t l : lengths) {
    TT_CHECK(l > 0, kInvalidArgument, "split length ", l, " is not positive");
    TT_CHECK(product <= (int64_t{1} << 40) / l, kInvalidArgument, "split lengths are too large");
    product *= l;
  }
  TT_CHECK(!has_attached(state, stage_index, id), kInvalidArgument, "loop '", s.iters[id].name,
           "' has a stage computed at it; split before compute_at");
  TT_CHECK(s.iters[id].annotation == IterAnnotation::kNone, kInvalidArgument, "loop '",
           s.iters[id].name, "' is annotated; annotate after splitting");
  Iterator parent = s.iters[id];
  std::vector<int64_t> extents = lengths;
  int64_t rest = ceil_div(parent.extent, product);
  if (remainder_outer) {
    extents.insert(extents.begin(), rest);
  } else {
    extents.push_back(rest);
  }
  IterRelation rel{
      IterRelation::Kind::kSplit, {id}, {}, remainder_outer ? 0 : static_cast<int>(lengths.size())};
  for (size_t k = 0; k < extents.size(); ++k) {
    s.iters.push_back(
        {parent.name + "." + std::to_string(k), extents[k], parent.kind, IterAnnotation::kNone, 0});
    rel.outputs.push_back(static_cast<int>(s.iters.size()) - 1);
  }
  s.leaves.erase(s.leaves.begin() + pos);
  s.leaves.insert(s.leaves.begin() + pos, rel.outputs.begin(), rel.outputs.end());
  s.relations.push_back(std::move(rel));
}

const SplitStepNode& split_step_at(const std::vector<Step>& history, int index) {
  TT_CHECK(index >= 0 && index < static_cast<int>(history.size()), kInvalidArgument, "step ", index,
           " does not precede this one");
  auto split = history[index].as<SplitStepNode>();
  TT_CHECK(split, kInvalidArgument, "step ", index, " is a ", history[index]->type_key(),
           ", not a split step");
  return *split;
}

template <class NodeT>
Step finish(std::shared_ptr<NodeT> n) {
  return Step(std::move(n));
}

}  // namespace

std::string StepNode::str() const {
  nlohmann::json j = field_values(*this);
  std::string name(type_key());
  name = name.substr(name.find('.') + 1);
  if (name.size() > 4 && name.substr(name.size() - 4) == "Step") name.resize(name.size() - 4);
  // CamelCase type name to the snake_case primitive name.
  std::string snake;
  for (char c : name) {
    if (std::isupper(static_cast<unsigned char>(c)) && !snake.empty()) snake += '_';
    snake += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  }
  std::vector<std::string> args;
  for (const auto& [k, v] : j.items()) args.push_back(k + "=" + v.dump());
  return snake + "(" + join(args, ", ") + ")";
}

// ---- split family ----

void SplitStepNode::declare(FieldList<SplitStepNode>& f) {
  f.def("stage", &SplitStepNode::stage)
      .def("iter", &SplitStepNode::iter)
      .def("lengths", &SplitStepNode::lengths)
      .def("inner_to_outer", &SplitStepNode::inner_to_outer);
}
void SplitStepNode::apply(LoopState& state) const {
  split_loop(state, stage, iter, lengths, inner_to_outer);
}

void FollowSplitStepNode::declare(FieldList<FollowSplitStepNode>& f) {
  f.def("stage", &FollowSplitStepNode::stage)
      .def("iter", &FollowSplitStepNode::iter)
      .def("src_step", &FollowSplitStepNode::src_step)
      .def("n_split", &FollowSplitStepNode::n_split);
}
std::vector<int64_t> FollowSplitStepNode::lengths(const std::vector<Step>& history) const {
  const SplitStepNode& src = split_step_at(history, src_step);
  int n = static_cast<int>(src.lengths.size());
  TT_CHECK(n_split >= 1 && n_split <= n, kInvalidArgument, "n_split ", n_split, " must be in 1..",
           n, " (the lengths of step ", src_step, ")");
  std::vector<int64_t> out(src.lengths.begin(), src.lengths.begin() + n_split - 1);
  out.push_back(std::accumulate(src.lengths.begin() + n_split - 1, src.lengths.end(), int64_t{1},
                                std::multiplies<>()));
  return out;
}
void FollowSplitStepNode::apply(LoopState& state) const {
  split_loop(state, stage, iter, lengths(state.history()), true);
}

void FollowFusedSplitStepNode::declare(FieldList<FollowFusedSplitStepNode>& f) {
  f.def("stage", &FollowFusedSplitStepNode::stage)
      .def("iter", &FollowFusedSplitStepNode::iter)
      .def("src_steps", &FollowFusedSplitStepNode::src_steps)
      .def("level", &FollowFusedSplitStepNode::level)
      .def("factor_or_nparts", &FollowFusedSplitStepNode::factor_or_nparts);
}
int64_t FollowFusedSplitStepNode::length(const std::vector<Step>& history) const {
  TT_CHECK(!src_steps.empty(), kInvalidArgument, "no source steps to follow");
  int64_t product = 1;
  for (int index : src_steps) {
    const SplitStepNode& src = split_step_at(history, index);
    TT_CHECK(level >= 0 && level < static_cast<int>(src.lengths.size()), kInvalidArgument, "level ",
             level, " is not a length of step ", index);
    product *= src.lengths[level];
  }
  return product;
}
void FollowFusedSplitStepNode::apply(LoopState& state) const {
  split_loop(state, stage, iter, {length(state.history())}, factor_or_nparts);
}

// ---- loop order and shape ----

void ReorderStepNode::declare(FieldList<ReorderStepNode>& f) {
  f.def("stage", &ReorderStepNode::stage).def("order", &ReorderStepNode::order);
}
void ReorderStepNode::apply(LoopState& state) const {
  Stage& s = scheduled_stage(state, stage);
  std::vector<int> sorted = order;
  std::sort(sorted.begin(), sorted.end());
  std::vector<int> expected(s.leaves.size());
  std::iota(expected.begin(), expected.end(), 0);
  TT_CHECK(sorted == expected, kInvalidArgument, "order must list each of the ", s.leaves.size(),
           " loops of '", s.name(), "' exactly once");
  std::vector<int> leaves;
  for (int pos : order) leaves.push_back(s.leaves[pos]);
  s.leaves = std::move(leaves);
}

void FuseStepNode::declare(FieldList<FuseStepNode>& f) {
  f.def("stage", &FuseStepNode::stage).def("iters", &FuseStepNode::iters);
}
void FuseStepNode::apply(LoopState& state) const {
  Stage& s = scheduled_stage(state, stage);
  TT_CHECK(!iters.empty(), kInvalidArgument, "fuse needs at least one loop");
  for (size_t k = 0; k < iters.size(); ++k) {
    leaf_id(s, iters[k]);
    TT_CHECK(k == 0 || iters[k] == iters[k - 1] + 1, kInvalidArgument,
             "fused loops must be consecutive and in order");
  }
  ir::IterKind kind = s.iters[s.leaves[iters[0]]].kind;
  std::vector<std::string> names;
  int64_t extent = 1;
  IterRelation rel{IterRelation::Kind::kFuse, {}, {}, 0};
  for (int pos : iters) {
    int id = s.leaves[pos];
    const Iterator& it = s.iters[id];
    TT_CHECK(it.kind == kind, kInvalidArgument, "cannot fuse spatial and reduction loops ('",
             s.iters[s.leaves[iters[0]]].name, "' and '", it.name, "')");
    TT_CHECK(it.annotation == IterAnnotation::kNone, kInvalidArgument, "loop '", it.name,
             "' is annotated; annotate after fusing");
    // A stage computed inside the innermost fused loop is computed inside
    // the fused loop: the same points, in the same order.
    TT_CHECK(pos == iters.back() || !has_attached(state, stage, id), kInvalidArgument, "loop '",
             it.name, "' has a stage computed at it and is not the innermost of the fused loops");
    TT_CHECK(extent <= (int64_t{1} << 40) / std::max<int64_t>(it.extent, 1), kInvalidArgument,
             "fused extent is too large");
    extent *= it.extent;
    names.push_back(it.name);
    rel.inputs.push_back(id);
  }
  s.iters.push_back({join(names, "@"), extent, kind, IterAnnotation::kNone, 0});
  rel.outputs.push_back(static_cast<int>(s.iters.size()) - 1);
  const int innermost = s.leaves[iters.back()];
  for (int a : state.attached_to(stage)) {
    if (state.stage(a).attach_iter == innermost)
      state.mutable_stage(a).attach_iter = rel.outputs[0];
  }
  s.leaves.erase(s.leaves.begin() + iters.front(), s.leaves.begin() + iters.back() + 1);
  s.leaves.insert(s.leaves.begin() + iters.front(), rel.outputs[0]);
  s.relations.push_back(std::move(rel));
}

void AnnotationStepNode::declare(FieldList<AnnotationStepNode>& f) {
  f.def("stage", &AnnotationStepNode::stage)
      .def("iter", &AnnotationStepNode::iter)
      .def("annotation", &AnnotationStepNode::annotation);
}
void AnnotationStepNode::apply(LoopState& state) const {
  Stage& s = scheduled_stage(state, stage);
  Iterator& it = s.iters[leaf_id(s, iter)];
  if (annotation == IterAnnotation::kParallel || annotation == IterAnnotation::kVectorize) {
    TT_CHECK(it.kind == ir::IterKind::kSpatial, kInvalidArgument, "loop '", it.name,
             "' is a reduction loop and cannot be ",
             annotation == IterAnnotation::kParallel ? "parallel" : "vectorized");
  }
  it.annotation = annotation;
}

// ---- where stages are computed ----

namespace {

// True if stage `a` is (transitively) computed inside stage `b`.
bool attached_within(const LoopState& state, int a, int b) {
  for (int s = a; state.stage(s).location == ComputeLocation::kAt;) {
    s = state.stage(s).attach_stage;
    if (s == b) return true;
  }
  return false;
}

}  // namespace

void ComputeAtStepNode::declare(FieldList<ComputeAtStepNode>& f) {
  f.def("stage", &ComputeAtStepNode::stage)
      .def("target_stage", &ComputeAtStepNode::target_stage)
      .def("target_iter", &ComputeAtStepNode::target_iter);
}
void ComputeAtStepNode::apply(LoopState& state) const {
  Stage& s = scheduled_stage(state, stage);
  TT_CHECK(!s.is_output, kInvalidArgument, "'", s.name(),
           "' is an output of the workload and must be computed at the root");
  const Stage& target = scheduled_stage(state, target_stage);
  int target_id = leaf_id(target, target_iter);
  TT_CHECK(target.location != ComputeLocation::kInline, kInvalidArgument, "target stage '",
           target.name(), "' is inlined");
  std::vector<int> consumers = state.effective_consumers(stage);
  TT_CHECK(consumers.size() == 1 && consumers[0] == target_stage, kInvalidArgument, "'", s.name(),
           "' can only be computed at a loop of its only consumer",
           consumers.size() == 1 ? " '" + state.stage(consumers[0]).name() + "'" : std::string(),
           "; it has ", consumers.size(), " consumer(s)");
  TT_CHECK(!attached_within(state, target_stage, stage), kInvalidArgument, "this would compute '",
           s.name(), "' inside itself");
  s.location = ComputeLocation::kAt;
  s.attach_stage = target_stage;
  s.attach_iter = target_id;
}

void ComputeInlineStepNode::declare(FieldList<ComputeInlineStepNode>& f) {
  f.def("stage", &ComputeInlineStepNode::stage);
}
void ComputeInlineStepNode::apply(LoopState& state) const {
  Stage& s = scheduled_stage(state, stage);
  TT_CHECK(!s.is_output, kInvalidArgument, "'", s.name(), "' is an output and cannot be inlined");
  TT_CHECK(s.tensor.compute_op()->body->kind() != ir::ExprKind::kReduce, kInvalidArgument, "'",
           s.name(), "' has a reduction and cannot be inlined");
  TT_CHECK(state.attached_to(stage).empty(), kInvalidArgument, "stages are computed at loops of '",
           s.name(), "'; it cannot be inlined");
  s.location = ComputeLocation::kInline;
  s.attach_stage = s.attach_iter = -1;
}

void ComputeRootStepNode::declare(FieldList<ComputeRootStepNode>& f) {
  f.def("stage", &ComputeRootStepNode::stage);
}
void ComputeRootStepNode::apply(LoopState& state) const {
  Stage& s = scheduled_stage(state, stage);
  s.location = ComputeLocation::kRoot;
  s.attach_stage = s.attach_iter = -1;
}

// ---- steps that change the DAG ----

namespace {

te::Tensor copy_of(const te::Tensor& source, const std::string& name) {
  return te::compute(
      source.shape(),
      [&](const std::vector<ir::Var>& vars) {
        return source(std::vector<ir::Expr>(vars.begin(), vars.end()));
      },
      name, "copy");
}

void check_untransformed(const LoopState& state, int index, const char* what) {
  const Stage& s = state.stage(index);
  TT_CHECK(s.location != ComputeLocation::kInline, kInvalidArgument, "'", s.name(),
           "' is inlined; ", what, " it first");
  TT_CHECK(state.attached_to(index).empty(), kInvalidArgument, "stages are computed at loops of '",
           s.name(), "'; apply ", what, " before compute_at");
}

}  // namespace

void CacheReadStepNode::declare(FieldList<CacheReadStepNode>& f) {
  f.def("stage", &CacheReadStepNode::stage)
      .def("scope", &CacheReadStepNode::scope)
      .def("readers", &CacheReadStepNode::readers);
}
void CacheReadStepNode::apply(LoopState& state) const {
  const Stage& s = state.stage(stage);
  TT_CHECK(!readers.empty(), kInvalidArgument, "cache_read needs at least one reader");
  // Its readers change, so a placement that depends on them would break.
  TT_CHECK(s.location == ComputeLocation::kRoot, kInvalidArgument, "'", s.name(),
           "' is not computed at the root; apply cache_read before compute_at or compute_inline");
  std::vector<int> consumers = state.consumers(stage);
  for (int r : readers) {
    TT_CHECK(std::count(consumers.begin(), consumers.end(), r), kInvalidArgument, "stage ", r,
             " does not read '", s.name(), "'");
  }
  te::Tensor source = s.tensor;
  te::Tensor cache = copy_of(source, source.name() + "." + scope);
  state.insert_stage(stage + 1, LoopState::make_stage(cache));
  for (int r : readers) {
    int reader = r >= stage + 1 ? r + 1 : r;
    const te::Tensor& old = state.stage(reader).tensor;
    // Point this reader's loads of the source at the cache.
    class Redirect final : public ir::ExprMutator {
     public:
      Redirect(const te::Tensor& from, const te::Tensor& to) : from_(from), to_(to) {}

     protected:
      using ExprMutator::rewrite;
      ir::Expr rewrite(const ir::ProducerLoadNode& n, const ir::Expr& self) override {
        std::vector<ir::Expr> indices;
        mutate_all(n.indices, &indices);
        if (n.producer.get() != from_.get()) return ir::producer_load(n.producer, indices);
        return ir::producer_load(to_, indices);
      }

     private:
      const te::Tensor& from_;
      const te::Tensor& to_;
    } redirect(source, cache);
    auto op = make_node<te::ComputeOpNode>(*old.compute_op());
    op->body = redirect.mutate(old.compute_op()->body);
    auto tensor = make_node<te::TensorNode>(*old.get());
    tensor->op = te::Operation(op);
    state.replace_tensor(reader, te::Tensor(tensor));
  }
}

void CacheWriteStepNode::declare(FieldList<CacheWriteStepNode>& f) {
  f.def("stage", &CacheWriteStepNode::stage).def("scope", &CacheWriteStepNode::scope);
}

namespace {

/// Replaces stage `stage` by two: `producer` (a new stage before it, at the
/// root) and `consumer`, which takes the old stage's place, attachment and
/// output role and reads `producer`. cache_write and rfactor both do this.
void split_stage(LoopState& state, int stage, const te::Tensor& producer,
                 const te::Tensor& consumer) {
  const Stage& s = state.stage(stage);
  te::Tensor original = s.tensor;
  Stage replacement = LoopState::make_stage(consumer);
  replacement.location = s.location;
  replacement.attach_stage = s.attach_stage;
  replacement.attach_iter = s.attach_iter;
  replacement.is_output = s.is_output;
  Stage& target = state.mutable_stage(stage);
  target = std::move(replacement);
  target.tensor = original;  // replace_tensor below re-points the readers
  state.insert_stage(stage, LoopState::make_stage(producer));
  state.replace_tensor(stage + 1, consumer);
}

}  // namespace

void CacheWriteStepNode::apply(LoopState& state) const {
  Stage& s = scheduled_stage(state, stage);
  TT_CHECK(!s.is_transformed(), kInvalidArgument, "'", s.name(),
           "' already has split or fused loops; apply cache_write first");
  check_untransformed(state, stage, "cache_write");
  te::Tensor original = s.tensor;
  // The local stage computes exactly what the stage computed, under a new name.
  auto local_op = make_node<te::ComputeOpNode>(*original.compute_op());
  local_op->name = original.name() + "." + scope;
  auto local = make_node<te::TensorNode>(*original.get());
  local->name = local_op->name;
  local->op = te::Operation(local_op);
  te::Tensor local_tensor(local);
  te::Tensor copy = copy_of(local_tensor, original.name());
  split_stage(state, stage, local_tensor, copy);
}

void RfactorStepNode::declare(FieldList<RfactorStepNode>& f) {
  f.def("stage", &RfactorStepNode::stage)
      .def("iter", &RfactorStepNode::iter)
      .def("factor_iter", &RfactorStepNode::factor_iter);
}
void RfactorStepNode::apply(LoopState& state) const {
  Stage& s = scheduled_stage(state, stage);
  check_untransformed(state, stage, "rfactor");
  int id = leaf_id(s, iter);
  TT_CHECK(factor_iter == 0 || factor_iter == 1, kInvalidArgument,
           "factor_iter must be 0 (outer part) or 1 (inner part), got ", factor_iter);
  const IterRelation* split = nullptr;
  for (const auto& rel : s.relations) {
    if (rel.kind == IterRelation::Kind::kSplit &&
        std::count(rel.outputs.begin(), rel.outputs.end(), id)) {
      split = &rel;
    }
  }
  TT_CHECK(split && split->outputs.size() == 2 && s.iters[id].kind == ir::IterKind::kReduce,
           kInvalidArgument, "loop '", s.iters[id].name,
           "' must be one of the two parts of a split reduction axis");
  TT_CHECK(s.relations.size() == 1, kInvalidArgument, "'", s.name(),
           "' may have no other split or fuse than the one rfactor uses");
  int root_id = split->inputs[0];
  auto root_pos = std::find(s.root.begin(), s.root.end(), root_id) - s.root.begin();
  TT_CHECK(root_pos < static_cast<long>(s.root.size()), kInvalidArgument,
           "the split loop is not a root axis");

  const te::Tensor original = s.tensor;
  auto op = original.compute_op();
  const auto& red = static_cast<const ir::ReduceNode&>(*op->body);
  size_t red_index = static_cast<size_t>(root_pos) - op->axis.size();
  const ir::IterVar& k = red.axis[red_index];
  int64_t outer_extent = s.iters[split->outputs[0]].extent;
  int64_t inner_extent = s.iters[split->outputs[1]].extent;
  int64_t factor_extent = factor_iter == 0 ? outer_extent : inner_extent;
  int64_t other_extent = factor_iter == 0 ? inner_extent : outer_extent;

  // The partial stage: out.rf[f, axes...] = reduce over (other part, other axes).
  std::vector<int64_t> rf_shape = {factor_extent};
  rf_shape.insert(rf_shape.end(), original.shape().begin(), original.shape().end());
  ir::IterVar other = ir::IterVar::make(k->var->name + ".r", other_extent, ir::IterKind::kReduce);
  te::Tensor rf = te::compute(
      rf_shape,
      [&](const std::vector<ir::Var>& vars) {
        ir::Expr f = vars[0];
        ir::Expr outer = factor_iter == 0 ? f : other.expr();
        ir::Expr inner = factor_iter == 0 ? other.expr() : f;
        ir::Expr k_value =
            outer * ir::make_const(outer.dtype(), static_cast<double>(inner_extent)) + inner;
        auto rewrite = [&](const ir::Expr& e) {
          return ir::substitute(e, [&](const ir::VarNode& v) -> ir::Expr {
            if (&v == k->var.get()) return k_value;
            for (size_t d = 0; d < op->axis.size(); ++d) {
              if (&v == op->axis[d]->var.get()) return vars[d + 1];
            }
            return ir::Expr();
          });
        };
        std::vector<ir::IterVar> axes;
        for (size_t r = 0; r < red.axis.size(); ++r)
          axes.push_back(r == red_index ? other : red.axis[r]);
        ir::Expr cond = red.condition ? rewrite(red.condition) : ir::Expr();
        if (outer_extent * inner_extent > k->extent) {
          ir::Expr in_range =
              k_value < ir::make_const(k_value.dtype(), static_cast<double>(k->extent));
          cond = cond ? ir::logical_and(cond, in_range) : in_range;
        }
        return ir::reduce(red.op, rewrite(red.source), axes, cond);
      },
      original.name() + ".rf", op->tag + "_rf");
  ir::IterVar r = ir::IterVar::make(k->var->name + ".f", factor_extent, ir::IterKind::kReduce);
  te::Tensor final = te::compute(
      original.shape(),
      [&](const std::vector<ir::Var>& vars) {
        std::vector<ir::Expr> index = {r.expr()};
        index.insert(index.end(), vars.begin(), vars.end());
        return ir::reduce(red.op, rf(index), {r}, ir::Expr(), red.init);
      },
      original.name(), op->tag);
  split_stage(state, stage, rf, final);
}

// ---- storage and pragmas ----

void StorageAlignStepNode::declare(FieldList<StorageAlignStepNode>& f) {
  f.def("stage", &StorageAlignStepNode::stage)
      .def("iter", &StorageAlignStepNode::iter)
      .def("factor", &StorageAlignStepNode::factor)
      .def("offset", &StorageAlignStepNode::offset);
}
void StorageAlignStepNode::apply(LoopState& state) const {
  Stage& s = scheduled_stage(state, stage);
  int id = leaf_id(s, iter);
  auto op = s.tensor.compute_op();
  auto dim = std::find(s.root.begin(), s.root.end(), id) - s.root.begin();
  TT_CHECK(dim < static_cast<long>(op->axis.size()), kInvalidArgument, "loop '", s.iters[id].name,
           "' is not an unsplit spatial axis of '", s.name(), "'");
  TT_CHECK(factor > 0 && offset >= 0 && offset < factor, kInvalidArgument,
           "storage_align needs factor > 0 and 0 <= offset < factor, got factor ", factor,
           " offset ", offset);
  s.storage_align.push_back({static_cast<int>(dim), factor, offset});
}

void StorageOrderStepNode::declare(FieldList<StorageOrderStepNode>& f) {
  f.def("stage", &StorageOrderStepNode::stage).def("order", &StorageOrderStepNode::order);
}
void StorageOrderStepNode::apply(LoopState& state) const {
  Stage& s = scheduled_stage(state, stage);
  TT_CHECK(!s.is_output, kInvalidArgument, "'", s.name(),
           "' is an output of the workload: its layout is the caller's");
  const int rank = static_cast<int>(s.tensor.shape().size());
  std::vector<int> sorted = order;
  std::sort(sorted.begin(), sorted.end());
  std::vector<int> dims(static_cast<size_t>(rank));
  std::iota(dims.begin(), dims.end(), 0);
  TT_CHECK(sorted == dims, kInvalidArgument, "storage_order of '", s.name(), "' needs each of its ",
           rank, " dimensions 0..", rank - 1, " once, got ", nlohmann::json(order).dump());
  s.storage_order = order;
}

void PragmaStepNode::declare(FieldList<PragmaStepNode>& f) {
  f.def("stage", &PragmaStepNode::stage)
      .def("iter", &PragmaStepNode::iter)
      .def("pragma", &PragmaStepNode::pragma);
}
void PragmaStepNode::apply(LoopState& state) const {
  Stage& s = scheduled_stage(state, stage);
  Iterator& it = s.iters[leaf_id(s, iter)];
  const std::string prefix = "auto_unroll_max_step=";
  long long steps = 0;
  TT_CHECK(
      starts_with(pragma, prefix) && parse_int(pragma.substr(prefix.size()), &steps) && steps >= 0,
      kInvalidArgument, "unknown pragma '", pragma,
      "'; known pragmas: auto_unroll_max_step=N (N >= 0)");
  it.auto_unroll_max_step = steps;
}

void LayoutRewriteStepNode::declare(FieldList<LayoutRewriteStepNode>& f) {
  f.def("stage", &LayoutRewriteStepNode::stage);
}
void LayoutRewriteStepNode::apply(LoopState& state) const {
  TT_CHECK(stage >= 0 && stage < state.num_stages(), kInvalidArgument, "stage ", stage,
           " does not exist (the state has ", state.num_stages(), ")");
  Stage& s = state.mutable_stage(stage);
  TT_CHECK(s.is_placeholder(), kInvalidArgument, "'", s.name(),
           "' is not an input of the workload: only inputs are packed");
  TT_CHECK(!s.layout_rewrite, kInvalidArgument, "'", s.name(), "' is rewritten already");
  std::vector<int> consumers = state.consumers(stage);
  TT_CHECK(consumers.size() == 1, kInvalidArgument, "'", s.name(), "' has ", consumers.size(),
           " readers; a layout is rewritten for exactly one");
  const Stage& reader = state.stage(consumers[0]);
  TT_CHECK(reader.location != ComputeLocation::kInline, kInvalidArgument, "its reader '",
           reader.name(), "' is inlined");
  auto op = reader.tensor.compute_op();
  std::set<const ir::VarNode*> axes;
  for (const auto& iv : op->axis) axes.insert(iv->var.get());
  if (op->body->kind() == ir::ExprKind::kReduce) {
    for (const auto& iv : static_cast<const ir::ReduceNode&>(*op->body).axis) {
      axes.insert(iv->var.get());
    }
  }
  bool direct = true;
  ir::visit_pre_order(op->body, [&](const ir::Expr& e) {
    if (e->kind() != ir::ExprKind::kProducerLoad) return;
    const auto& load = static_cast<const ir::ProducerLoadNode&>(*e);
    if (load.producer.get() != s.tensor.get()) return;
    std::set<const ir::VarNode*> used;
    for (const auto& index : load.indices) {
      // Each axis at most once: a layout has one part per axis (A[i, i]
      // would lose a dimension).
      direct &= index->kind() == ir::ExprKind::kIntImm ||
                (index->kind() == ir::ExprKind::kVar &&
                 axes.count(static_cast<const ir::VarNode*>(index.get())) &&
                 used.insert(static_cast<const ir::VarNode*>(index.get())).second);
    }
  });
  TT_CHECK(direct, kInvalidArgument, "'", reader.name(), "' reads '", s.name(),
           "' at computed indices or at one axis twice; a layout is rewritten only for reads "
           "at distinct axes of the reader");
  s.layout_rewrite = true;
}

TT_REGISTER_NODE(SplitStepNode);
TT_REGISTER_NODE(FollowSplitStepNode);
TT_REGISTER_NODE(FollowFusedSplitStepNode);
TT_REGISTER_NODE(ReorderStepNode);
TT_REGISTER_NODE(FuseStepNode);
TT_REGISTER_NODE(AnnotationStepNode);
TT_REGISTER_NODE(ComputeAtStepNode);
TT_REGISTER_NODE(ComputeInlineStepNode);
TT_REGISTER_NODE(ComputeRootStepNode);
TT_REGISTER_NODE(CacheReadStepNode);
TT_REGISTER_NODE(CacheWriteStepNode);
TT_REGISTER_NODE(RfactorStepNode);
TT_REGISTER_NODE(StorageAlignStepNode);
TT_REGISTER_NODE(StorageOrderStepNode);
TT_REGISTER_NODE(PragmaStepNode);
TT_REGISTER_NODE(LayoutRewriteStepNode);

// ---- builders ----

Step split(int stage, int iter, std::vector<int64_t> lengths, bool inner_to_outer) {
  auto n = make_node<SplitStepNode>();
  n->stage = stage;
  n->iter = iter;
  n->lengths = std::move(lengths);
  n->inner_to_outer = inner_to_outer;
  return finish(n);
}
Step follow_split(int stage, int iter, int src_step, int n_split) {
  auto n = make_node<FollowSplitStepNode>();
  n->stage = stage;
  n->iter = iter;
  n->src_step = src_step;
  n->n_split = n_split;
  return finish(n);
}
Step follow_fused_split(int stage, int iter, std::vector<int> src_steps, int level,
                        bool factor_or_nparts) {
  auto n = make_node<FollowFusedSplitStepNode>();
  n->stage = stage;
  n->iter = iter;
  n->src_steps = std::move(src_steps);
  n->level = level;
  n->factor_or_nparts = factor_or_nparts;
  return finish(n);
}
Step reorder(int stage, std::vector<int> order) {
  auto n = make_node<ReorderStepNode>();
  n->stage = stage;
  n->order = std::move(order);
  return finish(n);
}
Step fuse(int stage, std::vector<int> iters) {
  auto n = make_node<FuseStepNode>();
  n->stage = stage;
  n->iters = std::move(iters);
  return finish(n);
}
Step annotate(int stage, int iter, IterAnnotation annotation) {
  auto n = make_node<AnnotationStepNode>();
  n->stage = stage;
  n->iter = iter;
  n->annotation = annotation;
  return finish(n);
}
Step compute_at(int stage, int target_stage, int target_iter) {
  auto n = make_node<ComputeAtStepNode>();
  n->stage = stage;
  n->target_stage = target_stage;
  n->target_iter = target_iter;
  return finish(n);
}
Step compute_inline(int stage) {
  auto n = make_node<ComputeInlineStepNode>();
  n->stage = stage;
  return finish(n);
}
Step compute_root(int stage) {
  auto n = make_node<ComputeRootStepNode>();
  n->stage = stage;
  return finish(n);
}
Step cache_read(int stage, std::string scope, std::vector<int> readers) {
  auto n = make_node<CacheReadStepNode>();
  n->stage = stage;
  n->scope = std::move(scope);
  n->readers = std::move(readers);
  return finish(n);
}
Step cache_write(int stage, std::string scope) {
  auto n = make_node<CacheWriteStepNode>();
  n->stage = stage;
  n->scope = std::move(scope);
  return finish(n);
}
Step rfactor(int stage, int iter, int factor_iter) {
  auto n = make_node<RfactorStepNode>();
  n->stage = stage;
  n->iter = iter;
  n->factor_iter = factor_iter;
  return finish(n);
}
Step storage_align(int stage, int iter, int64_t factor, int64_t offset) {
  auto n = make_node<StorageAlignStepNode>();
  n->stage = stage;
  n->iter = iter;
  n->factor = factor;
  n->offset = offset;
  return finish(n);
}
Step storage_order(int stage, std::vector<int> order) {
  auto n = make_node<StorageOrderStepNode>();
  n->stage = stage;
  n->order = std::move(order);
  return finish(n);
}
Step pragma(int stage, int iter, std::string pragma) {
  auto n = make_node<PragmaStepNode>();
  n->stage = stage;
  n->iter = iter;
  n->pragma = std::move(pragma);
  return finish(n);
}

Step layout_rewrite(int stage) {
  auto n = make_node<LayoutRewriteStepNode>();
  n->stage = stage;
  return finish(n);
}

}  // namespace tensortune::schedule
