/// \file
/// The loop structure a schedule gives a compute DAG.
///
/// A schedule is its list of transform steps (steps.h); a LoopState is what
/// replaying them on the DAG produces: for every stage, its iterators (every
/// one ever created, by stable id), the relations between them (splits and
/// fuses), the current loop order, annotations, and where the stage is
/// computed (at the root, inlined into its consumers, or inside a loop of
/// another stage). Steps that change the DAG itself (cache_read, cache_write,
/// rfactor) insert stages, so stage indices in later steps refer to the DAG as
/// it is at that point. Lowering reads a LoopState and nothing else.
///
/// Iterator extents here are those of the stage's own shape; when a stage is
/// computed at another's loop, lowering infers the region it must cover and
/// recomputes its loop extents from that (lower/lower.cc).
#pragma once

#include <string>
#include <vector>

#include "tensortune/schedule/compute_dag.h"

namespace tensortune::schedule {

enum class IterAnnotation { kNone, kParallel, kVectorize, kUnroll };

/// One loop of a stage.
struct Iterator {
  std::string name;
  int64_t extent = 0;
  ir::IterKind kind = ir::IterKind::kSpatial;
  IterAnnotation annotation = IterAnnotation::kNone;
  /// pragma auto_unroll_max_step on this loop: unroll the loops below it
  /// whose combined trip count is at most this (0: no pragma).
  int64_t auto_unroll_max_step = 0;
  bool operator==(const Iterator&) const = default;
};

/// How iterators derive from one another.
struct IterRelation {
  enum class Kind { kSplit, kFuse };
  Kind kind = Kind::kSplit;
  std::vector<int> inputs;   ///< split: {parent}; fuse: the fused loops, outer to inner
  std::vector<int> outputs;  ///< split: the parts, outer to inner; fuse: {fused}
  /// split: which part takes the remaining (ceil-divided) extent; the others
  /// have fixed lengths. Lowering recomputes that part's extent when the
  /// parent's extent is inferred anew.
  int remainder = 0;
  bool operator==(const IterRelation&) const = default;
};

enum class ComputeLocation { kRoot, kInline, kAt };

/// storage_align: the stride of dimension `dim` of the stage's buffer is
/// padded so that stride % factor == offset.
struct StorageAlign {
  int dim = 0;
  int64_t factor = 0;
  int64_t offset = 0;
  bool operator==(const StorageAlign&) const = default;
};

/// The schedule of one stage.
struct Stage {
  te::Tensor tensor;  ///< what the stage computes, in the DAG as rewritten so far
  std::vector<Iterator> iters;
  std::vector<int> root;    ///< ids of the op's axes, then of its reduction axes
  std::vector<int> leaves;  ///< ids of the loops, outer to inner
  std::vector<IterRelation> relations;
  ComputeLocation location = ComputeLocation::kRoot;
  int attach_stage = -1;  ///< with kAt: the stage whose loop holds this one
  int attach_iter = -1;   ///< with kAt: the id of that loop in attach_stage
  std::vector<StorageAlign> storage_align;
  /// storage_order: the buffer's dimensions outer to inner (empty: in order).
  std::vector<int> storage_order;
  bool is_output = false;
  /// A constant input stored pre-packed in the order its consumer's loops
  /// read it (layout_rewrite; lower::packed_layout gives the layout).
  bool layout_rewrite = false;

  bool is_placeholder() const { return tensor.is_placeholder(); }
  const std::string& name() const { return tensor.name(); }
  /// Position of iterator `id` in the loop order, or -1 when it is not a loop.
  int leaf_position(int id) const;
  /// The root iterator (id) of the innermost spatial loop, of fused loops the
  /// inner one's; -1 if the stage has no spatial loop.
  int innermost_spatial_root() const;
  /// True if any relation was applied (the loops are no longer the op's axes).
  bool is_transformed() const { return !relations.empty(); }
};

class StepNode;

/// Stages and their loops after a sequence of steps; a value.
class LoopState {
 public:
  /// The initial (naive) state: every stage at the root with the op's axes as loops.
  explicit LoopState(const ComputeDAG& dag);

  const ComputeDAG& dag() const { return dag_; }
  const std::vector<Stage>& stages() const { return stages_; }
  const Stage& stage(int index) const;
  int num_stages() const { return static_cast<int>(stages_.size()); }
  /// The index of the stage named `name`, or -1.
  int stage_named(std::string_view name) const;
  /// The stages whose bodies read stage `index`.
  std::vector<int> consumers(int index) const;
  /// The stages that read stage `index`, looking through inlined stages (an
  /// inlined stage's readers read what it read), sorted, each once.
  std::vector<int> effective_consumers(int index) const;
  /// The stages that are computed at a loop of stage `index`.
  std::vector<int> attached_to(int index) const;
  /// Steps applied so far, in order.
  const std::vector<Ref<StepNode>>& history() const { return history_; }

  /// Validates `step` against this state and applies it; an invalid step is a
  /// kInvalidArgument error naming the step index and what is wrong, and
  /// leaves the state unchanged.
  void apply(const Ref<StepNode>& step);

  /// A readable loop nest, e.g. `for i.0 (0, 8) parallel` lines per stage.
  std::string str() const;

  /// Same stages, loops, relations and attachments (the DAG compared structurally).
  bool operator==(const LoopState& other) const;

  // ---- used by the steps (steps.cc) ----
  Stage& mutable_stage(int index);
  /// Inserts a new stage at `index` (stages from there shift by one) and
  /// re-points attachments and consumers' reads.
  void insert_stage(int index, Stage stage);
  /// Replaces stage `index`'s tensor by `replacement` everywhere it is read,
  /// rebuilding the consumers' operations (their loops are unchanged).
  void replace_tensor(int index, const te::Tensor& replacement);
  /// A fresh stage for `tensor` with the op's axes as loops.
  static Stage make_stage(const te::Tensor& tensor);

 private:
  ComputeDAG dag_;
  std::vector<Stage> stages_;
  std::vector<Ref<StepNode>> history_;
};

}  // namespace tensortune::schedule

namespace tensortune {
template <>
struct EnumNames<schedule::IterAnnotation> {
  static constexpr std::array<std::string_view, 4> names = {"none", "parallel", "vectorize",
                                                            "unroll"};
};
}  // namespace tensortune
