/// \file
/// A tuning task: one workload on one target (its host inside), with the
/// hardware parameters the search assumes. A value: it saves, loads and
/// compares like every node, so any process can re-create it exactly.
#pragma once

#include <string>

#include "tensortune/ir/target.h"
#include "tensortune/te/workload.h"

namespace tensortune::te {

struct TaskNode : Object {
  Workload workload;
  ir::Target target;
  ir::HardwareParams hardware_params;
  TT_NODE(TaskNode, "te.Task")
  static void declare(FieldList<TaskNode>& f);
};

class Task : public Ref<TaskNode> {
 public:
  using Ref<TaskNode>::Ref;
  /// A task; hardware parameters default to those the target describes.
  static Task make(Workload workload, ir::Target target,
                   ir::HardwareParams hardware_params = ir::HardwareParams());
  /// The workload's stable key (see workload.h).
  std::string workload_key() const { return te::workload_key(get()->workload); }
};

}  // namespace tensortune::te
