/// \file
/// Transform steps: the schedule primitives, each a serialisable value that
/// validates itself against a LoopState and applies to it. Stage and iterator
/// arguments are positions in the state the step is applied to: `stage` is a
/// stage index, `iter` a position in that stage's current loop order.
///
/// A schedule (State) is nothing but a list of steps; replaying it on the
/// compute DAG in any process gives an equal LoopState.
#pragma once

#include <string>
#include <vector>

#include "tensortune/schedule/loop_state.h"

namespace tensortune::schedule {

/// Base of all steps.
struct StepNode : Object {
  int stage = 0;
  /// Checks the step against `state` and applies it; throws kInvalidArgument
  /// naming what is wrong (the caller adds the step's index).
  virtual void apply(LoopState& state) const = 0;
  /// Python-like text, e.g. `split(stage=2, iter=0, lengths=[8, 4])`.
  std::string str() const;
};
using Step = Ref<StepNode>;

/// Splits a loop into parts with the given inner extents (outer to inner). With
/// inner_to_outer the outermost part takes the remaining extent (ceil-divided:
/// a non-divisible extent is guarded in lowering); otherwise the innermost does.
struct SplitStepNode : StepNode {
  int iter = 0;
  std::vector<int64_t> lengths;
  bool inner_to_outer = true;
  TT_NODE(SplitStepNode, "schedule.SplitStep")
  static void declare(FieldList<SplitStepNode>& f);
  void apply(LoopState& state) const override;
};

/// Splits like an earlier split step: its first n_split-1 lengths, then the
/// product of the rest (n_split lengths in all).
struct FollowSplitStepNode : StepNode {
  int iter = 0;
  int src_step = 0;
  int n_split = 1;
  TT_NODE(FollowSplitStepNode, "schedule.FollowSplitStep")
  static void declare(FieldList<FollowSplitStepNode>& f);
  void apply(LoopState& state) const override;
  /// The lengths this step splits by, given the steps applied before it.
  std::vector<int64_t> lengths(const std::vector<Step>& history) const;
};

/// Splits in two by the product of the lengths at `level` of earlier split
/// steps (the loops fused from them): as the inner factor when factor_or_nparts,
/// else as the number of outer parts.
struct FollowFusedSplitStepNode : StepNode {
  int iter = 0;
  std::vector<int> src_steps;
  int level = 0;
  bool factor_or_nparts = true;
  TT_NODE(FollowFusedSplitStepNode, "schedule.FollowFusedSplitStep")
  static void declare(FieldList<FollowFusedSplitStepNode>& f);
  void apply(LoopState& state) const override;
  int64_t length(const std::vector<Step>& history) const;
};

/// Reorders the loops: `order` lists every current position once, outer to inner.
struct ReorderStepNode : StepNode {
  std::vector<int> order;
  TT_NODE(ReorderStepNode, "schedule.ReorderStep")
  static void declare(FieldList<ReorderStepNode>& f);
  void apply(LoopState& state) const override;
};

/// Fuses consecutive loops (all spatial or all reduction) into one.
struct FuseStepNode : StepNode {
  std::vector<int> iters;
  TT_NODE(FuseStepNode, "schedule.FuseStep")
  static void declare(FieldList<FuseStepNode>& f);
  void apply(LoopState& state) const override;
};

/// Marks a loop parallel (spatial loops), vectorized or unrolled.
struct AnnotationStepNode : StepNode {
  int iter = 0;
  IterAnnotation annotation = IterAnnotation::kNone;
  TT_NODE(AnnotationStepNode, "schedule.AnnotationStep")
  static void declare(FieldList<AnnotationStepNode>& f);
  void apply(LoopState& state) const override;
};

/// Computes the stage inside loop `target_iter` of its only consumer `target_stage`.
struct ComputeAtStepNode : StepNode {
  int target_stage = 0;
  int target_iter = 0;
  TT_NODE(ComputeAtStepNode, "schedule.ComputeAtStep")
  static void declare(FieldList<ComputeAtStepNode>& f);
  void apply(LoopState& state) const override;
};

/// Substitutes the stage's expression into its consumers (injective, non-output stages).
struct ComputeInlineStepNode : StepNode {
  TT_NODE(ComputeInlineStepNode, "schedule.ComputeInlineStep")
  static void declare(FieldList<ComputeInlineStepNode>& f);
  void apply(LoopState& state) const override;
};

/// Computes the stage at the root again (undoes compute_at / compute_inline).
struct ComputeRootStepNode : StepNode {
  TT_NODE(ComputeRootStepNode, "schedule.ComputeRootStep")
  static void declare(FieldList<ComputeRootStepNode>& f);
  void apply(LoopState& state) const override;
};

/// Adds a stage copying the stage's tensor, read by `readers` instead of it;
/// inserted right after the stage.
struct CacheReadStepNode : StepNode {
  std::string scope = "local";
  std::vector<int> readers;
  TT_NODE(CacheReadStepNode, "schedule.CacheReadStep")
  static void declare(FieldList<CacheReadStepNode>& f);
  void apply(LoopState& state) const override;
};

/// Splits an untransformed stage into a stage computing into a local buffer
/// (inserted before it) and the stage copying that buffer out.
struct CacheWriteStepNode : StepNode {
  std::string scope = "local";
  TT_NODE(CacheWriteStepNode, "schedule.CacheWriteStep")
  static void declare(FieldList<CacheWriteStepNode>& f);
  void apply(LoopState& state) const override;
};

/// Factors a reduction: loop `iter` must be one of the two parts of a split
/// reduction axis; a new stage (inserted before) keeps part `factor_iter`
/// (0: outer, 1: inner) as a spatial axis and reduces the other; the stage
/// then reduces over that axis.
struct RfactorStepNode : StepNode {
  int iter = 0;
  int factor_iter = 1;
  TT_NODE(RfactorStepNode, "schedule.RfactorStep")
  static void declare(FieldList<RfactorStepNode>& f);
  void apply(LoopState& state) const override;
};

/// Pads the stride of the buffer dimension of loop `iter` (an unsplit spatial
/// axis) so that stride % factor == offset.
struct StorageAlignStepNode : StepNode {
  int iter = 0;
  int64_t factor = 1;
  int64_t offset = 0;
  TT_NODE(StorageAlignStepNode, "schedule.StorageAlignStep")
  static void declare(FieldList<StorageAlignStepNode>& f);
  void apply(LoopState& state) const override;
};

/// Stores the stage's buffer with its dimensions in `order` (outer to inner, a
/// permutation of its axes), so that a reader walks contiguously the
/// dimension it reduces over: an NCHW convolution's padded input stored
/// channels-last. An output keeps the caller's layout, so it is refused.
struct StorageOrderStepNode : StepNode {
  std::vector<int> order;
  TT_NODE(StorageOrderStepNode, "schedule.StorageOrderStep")
  static void declare(FieldList<StorageOrderStepNode>& f);
  void apply(LoopState& state) const override;
};

/// A pragma on a loop: `auto_unroll_max_step=N` (unroll the loops below it
/// whose combined trip count is at most N).
struct PragmaStepNode : StepNode {
  int iter = 0;
  std::string pragma;
  TT_NODE(PragmaStepNode, "schedule.PragmaStep")
  static void declare(FieldList<PragmaStepNode>& f);
  void apply(LoopState& state) const override;
};

/// Stores an input packed in the order its only consumer's loops read it,
/// so that the tiles read it contiguously (Ansor's layout rewrite). A
/// constant input (a weight: ComputeDAG::is_constant_input) is packed by a
/// separate function (lower::lower_packers) run once on the weights; any
/// other input the kernel packs itself when it starts, as a GEMM library
/// packs its operands. The layout follows the consumer's loops as they are
/// when the state is lowered. The consumer must read it at its own axes (or
/// constants).
struct LayoutRewriteStepNode : StepNode {
  TT_NODE(LayoutRewriteStepNode, "schedule.LayoutRewriteStep")
  static void declare(FieldList<LayoutRewriteStepNode>& f);
  void apply(LoopState& state) const override;
};

// ---- builders (no validation: LoopState::apply validates) ----
Step split(int stage, int iter, std::vector<int64_t> lengths, bool inner_to_outer = true);
Step follow_split(int stage, int iter, int src_step, int n_split);
Step follow_fused_split(int stage, int iter, std::vector<int> src_steps, int level,
                        bool factor_or_nparts);
Step reorder(int stage, std::vector<int> order);
Step fuse(int stage, std::vector<int> iters);
Step annotate(int stage, int iter, IterAnnotation annotation);
Step compute_at(int stage, int target_stage, int target_iter);
Step compute_inline(int stage);
Step compute_root(int stage);
Step cache_read(int stage, std::string scope, std::vector<int> readers);
Step cache_write(int stage, std::string scope);
Step rfactor(int stage, int iter, int factor_iter);
Step storage_align(int stage, int iter, int64_t factor, int64_t offset);
Step storage_order(int stage, std::vector<int> order);
Step pragma(int stage, int iter, std::string pragma);
Step layout_rewrite(int stage);

}  // namespace tensortune::schedule
