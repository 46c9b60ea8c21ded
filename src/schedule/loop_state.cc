#include "tensortune/schedule/loop_state.h"

#include <algorithm>
#include <map>
#include <sstream>

#include "tensortune/ir/expr_functor.h"
#include "tensortune/object/structural.h"
#include "tensortune/schedule/steps.h"

namespace tensortune::schedule {
namespace {

// Rewrites reads of replaced tensors to their replacements.
class ReadRewriter final : public ir::ExprMutator {
 public:
  explicit ReadRewriter(const std::map<const Object*, te::Tensor>& replaced)
      : replaced_(replaced) {}

 protected:
  using ExprMutator::rewrite;
  ir::Expr rewrite(const ir::ProducerLoadNode& n, const ir::Expr& self) override {
    std::vector<ir::Expr> indices;
    bool changed = mutate_all(n.indices, &indices);
    auto it = replaced_.find(n.producer.get());
    if (it == replaced_.end()) return changed ? ir::producer_load(n.producer, indices) : self;
    return ir::producer_load(it->second, indices);
  }

 private:
  const std::map<const Object*, te::Tensor>& replaced_;
};

// The same compute with a new body (axes, name, tag and attributes kept).
te::Tensor with_body(const te::Tensor& t, ir::Expr body) {
  auto old_op = t.compute_op();
  auto op = make_node<te::ComputeOpNode>(*old_op);
  op->body = std::move(body);
  auto tensor = make_node<te::TensorNode>(*t.get());
  tensor->op = te::Operation(op);
  return te::Tensor(tensor);
}

bool reads(const te::Tensor& consumer, const Object* producer) {
  if (consumer.is_placeholder()) return false;
  for (const auto& input : te::input_tensors(consumer)) {
    if (input.get() == producer) return true;
  }
  return false;
}

}  // namespace

int Stage::leaf_position(int id) const {
  auto it = std::find(leaves.begin(), leaves.end(), id);
  return it == leaves.end() ? -1 : static_cast<int>(it - leaves.begin());
}

int Stage::innermost_spatial_root() const {
  int id = -1;
  for (int leaf : leaves) {
    if (iters[leaf].kind == ir::IterKind::kSpatial) id = leaf;
  }
  // Relations come in the order they were applied: back up through them.
  for (auto rel = relations.rbegin(); id >= 0 && rel != relations.rend(); ++rel) {
    if (std::count(rel->outputs.begin(), rel->outputs.end(), id)) id = rel->inputs.back();
  }
  return id;
}

Stage LoopState::make_stage(const te::Tensor& tensor) {
  Stage s;
  s.tensor = tensor;
  if (tensor.is_placeholder()) return s;
  auto op = tensor.compute_op();
  auto add = [&](const ir::IterVar& iv) {
    s.iters.push_back({iv->var->name, iv->extent, iv->kind, IterAnnotation::kNone, 0});
    s.root.push_back(static_cast<int>(s.iters.size()) - 1);
  };
  for (const auto& iv : op->axis) add(iv);
  if (op->body->kind() == ir::ExprKind::kReduce) {
    for (const auto& iv : static_cast<const ir::ReduceNode&>(*op->body).axis) add(iv);
  }
  s.leaves = s.root;
  return s;
}

LoopState::LoopState(const ComputeDAG& dag) : dag_(dag) {
  for (int i = 0; i < dag.num_stages(); ++i) {
    stages_.push_back(make_stage(dag.stages()[i]));
    stages_.back().is_output = dag.analysis(i).is_output;
  }
}

const Stage& LoopState::stage(int index) const {
  TT_CHECK(index >= 0 && index < num_stages(), kInvalidArgument, "stage ", index,
           " does not exist; the state has stages 0..", num_stages() - 1);
  return stages_[index];
}

Stage& LoopState::mutable_stage(int index) {
  stage(index);  // validates
  return stages_[index];
}

int LoopState::stage_named(std::string_view name) const {
  for (int i = 0; i < num_stages(); ++i) {
    if (stages_[i].name() == name) return i;
  }
  return -1;
}

std::vector<int> LoopState::consumers(int index) const {
  std::vector<int> out;
  const Object* t = stages_.at(index).tensor.get();
  for (int j = 0; j < num_stages(); ++j) {
    if (reads(stages_[j].tensor, t)) out.push_back(j);
  }
  return out;
}

std::vector<int> LoopState::effective_consumers(int index) const {
  std::vector<int> out;
  for (int c : consumers(index)) {
    if (stages_[c].location == ComputeLocation::kInline) {
      for (int cc : effective_consumers(c)) out.push_back(cc);
    } else {
      out.push_back(c);
    }
  }
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

std::vector<int> LoopState::attached_to(int index) const {
  std::vector<int> out;
  for (int j = 0; j < num_stages(); ++j) {
    if (stages_[j].location == ComputeLocation::kAt && stages_[j].attach_stage == index) {
      out.push_back(j);
    }
  }
  return out;
}

void LoopState::apply(const Step& step) {
  TT_CHECK(step, kInvalidArgument, "step ", history_.size(), " is null");
  LoopState next = *this;
  try {
    step->apply(next);
  } catch (const UserError& e) {
    fail(e.kind(), "step ", history_.size(), ", ", step->str(), ": ", e.what());
  }
  next.history_.push_back(step);
  *this = std::move(next);
}

void LoopState::insert_stage(int index, Stage stage) {
  TT_ICHECK(index >= 0 && index <= num_stages(), "bad insertion index");
  for (auto& s : stages_) {
    if (s.attach_stage >= index) ++s.attach_stage;
  }
  stages_.insert(stages_.begin() + index, std::move(stage));
}

void LoopState::replace_tensor(int index, const te::Tensor& replacement) {
  std::map<const Object*, te::Tensor> replaced;
  replaced.emplace(stages_.at(index).tensor.get(), replacement);
  stages_[index].tensor = replacement;
  ReadRewriter rewriter(replaced);
  for (int j = index + 1; j < num_stages(); ++j) {
    te::Tensor& t = stages_[j].tensor;
    bool affected = false;
    for (const auto& [old, _] : replaced) affected |= reads(t, old);
    if (!affected) continue;
    te::Tensor rebuilt = with_body(t, rewriter.mutate(t.compute_op()->body));
    replaced.emplace(t.get(), rebuilt);
    t = rebuilt;
  }
}

namespace {

void print_stage(const LoopState& state, int index, int depth, std::ostringstream& os);

void print_loops(const LoopState& state, int index, int depth, std::ostringstream& os) {
  const Stage& s = state.stage(index);
  std::vector<int> attached = state.attached_to(index);
  for (int id : s.leaves) {
    const Iterator& it = s.iters[id];
    os << std::string(2 * depth, ' ') << "for " << it.name << " in 0.." << it.extent;
    if (it.kind == ir::IterKind::kReduce) os << " reduce";
    if (it.annotation != IterAnnotation::kNone) {
      os << " " << EnumNames<IterAnnotation>::names[static_cast<int>(it.annotation)];
    }
    if (it.auto_unroll_max_step) os << " auto_unroll_max_step=" << it.auto_unroll_max_step;
    os << "\n";
    ++depth;
    for (int a : attached) {
      if (state.stage(a).attach_iter == id) print_stage(state, a, depth, os);
    }
  }
  os << std::string(2 * depth, ' ') << s.name() << " = ...\n";
}

void print_stage(const LoopState& state, int index, int depth, std::ostringstream& os) {
  const Stage& s = state.stage(index);
  os << std::string(2 * depth, ' ') << "stage " << index << " " << s.name();
  if (s.is_output) os << " (output)";
  os << ":\n";
  print_loops(state, index, depth + 1, os);
}

}  // namespace

std::string LoopState::str() const {
  std::ostringstream os;
  std::vector<std::string> placeholders, inlined;
  for (const auto& s : stages_) {
    if (s.is_placeholder()) placeholders.push_back(s.name());
    if (s.location == ComputeLocation::kInline) inlined.push_back(s.name());
  }
  if (!placeholders.empty()) os << "placeholders: " << join(placeholders, ", ") << "\n";
  if (!inlined.empty()) os << "inlined: " << join(inlined, ", ") << "\n";
  for (int i = 0; i < num_stages(); ++i) {
    const Stage& s = stages_[i];
    if (!s.is_placeholder() && s.location == ComputeLocation::kRoot) print_stage(*this, i, 0, os);
  }
  return os.str();
}

bool LoopState::operator==(const LoopState& other) const {
  if (num_stages() != other.num_stages()) return false;
  for (int i = 0; i < num_stages(); ++i) {
    const Stage& a = stages_[i];
    const Stage& b = other.stages_[i];
    if (a.iters != b.iters || a.root != b.root || a.leaves != b.leaves ||
        a.relations != b.relations || a.location != b.location ||
        a.attach_stage != b.attach_stage || a.attach_iter != b.attach_iter ||
        a.storage_align != b.storage_align || a.storage_order != b.storage_order ||
        a.is_output != b.is_output || a.layout_rewrite != b.layout_rewrite ||
        !structural_equal(a.tensor, b.tensor)) {
      return false;
    }
  }
  return true;
}

}  // namespace tensortune::schedule
