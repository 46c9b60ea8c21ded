#include "tensortune/schedule/compute_dag.h"

#include <algorithm>
#include <set>

#include "tensortune/ir/expr_functor.h"
#include "tensortune/te/printer.h"

namespace tensortune::schedule {
namespace {

bool contains_reduce(const ir::Expr& e) {
  bool found = false;
  ir::visit_pre_order(e, [&](const ir::Expr& x) { found |= x->kind() == ir::ExprKind::kReduce; });
  return found;
}

// Loads in `e` as (tensor, variables its indices use).
std::vector<std::pair<const Object*, std::set<const Object*>>> loads_of(const ir::Expr& e) {
  std::vector<std::pair<const Object*, std::set<const Object*>>> loads;
  ir::visit_pre_order(e, [&](const ir::Expr& x) {
    if (x->kind() != ir::ExprKind::kProducerLoad) return;
    const auto& load = static_cast<const ir::ProducerLoadNode&>(*x);
    std::set<const Object*> vars;
    for (const auto& index : load.indices) {
      ir::visit_pre_order(index, [&](const ir::Expr& v) {
        if (v->kind() == ir::ExprKind::kVar) vars.insert(v.get());
      });
    }
    loads.emplace_back(load.producer.get(), std::move(vars));
  });
  return loads;
}

}  // namespace

ComputeDAG::ComputeDAG(te::WorkloadTensors tensors) : tensors_(std::move(tensors)) {
  TT_CHECK(!tensors_.outputs.empty(), kInvalidArgument, "a compute DAG needs at least one output");
  // Declared inputs come first, in their order, even those no output reads.
  std::set<const Object*> seen;
  for (const auto& t : tensors_.inputs) {
    if (seen.insert(t.get()).second) stages_.push_back(t);
  }
  for (const auto& t : te::post_order_tensors(tensors_.outputs)) {
    if (seen.insert(t.get()).second) stages_.push_back(t);
  }
  analysis_.resize(stages_.size());
  for (size_t i = 0; i < stages_.size(); ++i) {
    const te::Tensor& t = stages_[i];
    StageAnalysis& a = analysis_[i];
    a.is_placeholder = t.is_placeholder();
    a.is_output = std::any_of(tensors_.outputs.begin(), tensors_.outputs.end(),
                              [&](const te::Tensor& o) { return o.same_as(t); });
    for (const auto& producer : te::input_tensors(t)) {
      int p = stage_of(producer);
      TT_ICHECK(p >= 0 && p < static_cast<int>(i), "producer after consumer");
      a.producers.push_back(p);
      analysis_[p].consumers.push_back(static_cast<int>(i));
    }
    if (a.is_placeholder) continue;
    const ir::Expr& body = t.compute_op()->body;
    a.has_reduction = body->kind() == ir::ExprKind::kReduce;
    const ir::Expr& inner =
        a.has_reduction ? static_cast<const ir::ReduceNode&>(*body).source : body;
    bool nested = contains_reduce(inner);
    if (a.has_reduction) {
      const auto& r = static_cast<const ir::ReduceNode&>(*body);
      nested |= contains_reduce(r.condition) || contains_reduce(r.init);
    }
    TT_CHECK(!nested, kInvalidArgument, "stage '", t.name(),
             "' has a reduction inside its expression; a reduction must be the whole body of a "
             "compute (split it into its own stage)");
    a.is_injective = !a.has_reduction;
    a.can_inline = a.is_injective && !a.is_output;
    if (a.has_reduction) {
      auto loads = loads_of(inner);
      std::set<const Object*> tensors_read;
      bool reuse = false;
      for (const auto& [tensor, vars] : loads) {
        tensors_read.insert(tensor);
        for (const auto& iv : t.compute_op()->axis) reuse |= !vars.count(iv->var.get());
      }
      a.needs_multi_level_tiling = tensors_read.size() >= 2 && reuse;
    }
  }
  flops_ = te::flop_count(tensors_.outputs);
}

int ComputeDAG::stage_of(const te::Tensor& tensor) const {
  for (size_t i = 0; i < stages_.size(); ++i) {
    if (stages_[i].same_as(tensor)) return static_cast<int>(i);
  }
  return -1;
}

int ComputeDAG::stage_named(std::string_view name) const {
  for (size_t i = 0; i < stages_.size(); ++i) {
    if (stages_[i].name() == name) return static_cast<int>(i);
  }
  return -1;
}

bool ComputeDAG::is_constant_input(int stage) const {
  if (stage < 0 || stage >= num_stages()) return false;
  for (int c : tensors_.constant_inputs) {
    if (tensors_.inputs.at(static_cast<size_t>(c)).same_as(stages_[stage])) return true;
  }
  return false;
}

std::string ComputeDAG::str() const { return te::print_stages(tensors_.outputs); }

}  // namespace tensortune::schedule
