#include "tensortune/schedule/state.h"

namespace tensortune::schedule {

void StateNode::declare(FieldList<StateNode>& f) {
  f.def("steps", &StateNode::steps).validate([](const StateNode& n) {
    for (size_t i = 0; i < n.steps.size(); ++i) {
      TT_CHECK(n.steps[i], kInvalidArgument, "step ", i, " is null");
    }
  });
}

TT_REGISTER_NODE(StateNode);

State State::make(std::vector<Step> steps) {
  auto n = make_node<StateNode>();
  n->steps = std::move(steps);
  return State(n);
}

State State::with(Step step) const {
  std::vector<Step> steps = get()->steps;
  steps.push_back(std::move(step));
  return make(std::move(steps));
}

LoopState replay(const ComputeDAG& dag, const State& state) {
  LoopState loops(dag);
  if (!state) return loops;
  for (const auto& step : state.steps()) loops.apply(step);
  return loops;
}

}  // namespace tensortune::schedule
