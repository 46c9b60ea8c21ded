/// \file
/// A schedule as a value: its transform steps. This is what records, build
/// requests and `--state` files hold; replay() turns it into loops.
#pragma once

#include <vector>

#include "tensortune/schedule/steps.h"

namespace tensortune::schedule {

/// A schedule: the steps, in order. The empty list is the naive schedule.
struct StateNode : Object {
  std::vector<Step> steps;
  TT_NODE(StateNode, "schedule.State")
  static void declare(FieldList<StateNode>& f);
};

class State : public Ref<StateNode> {
 public:
  using Ref<StateNode>::Ref;
  /// A state holding `steps`.
  static State make(std::vector<Step> steps = {});
  /// This state with one more step.
  State with(Step step) const;
  const std::vector<Step>& steps() const { return get()->steps; }
};

/// Replays `state` on `dag`; an invalid step is a kInvalidArgument error that
/// names the step's index and text ("step 3, reorder(...): ...").
LoopState replay(const ComputeDAG& dag, const State& state);

}  // namespace tensortune::schedule
