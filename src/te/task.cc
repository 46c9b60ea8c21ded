#include "tensortune/te/task.h"

namespace tensortune::te {

void TaskNode::declare(FieldList<TaskNode>& f) {
  f.def("workload", &TaskNode::workload)
      .def("target", &TaskNode::target)
      .def("hardware_params", &TaskNode::hardware_params)
      .validate([](const TaskNode& n) {
        TT_CHECK(n.workload, kInvalidArgument, "a task needs a workload");
        TT_CHECK(n.target, kInvalidArgument, "a task needs a target");
        TT_CHECK(n.hardware_params, kInvalidArgument, "a task needs hardware parameters");
      });
}

TT_REGISTER_NODE(TaskNode);

Task Task::make(Workload workload, ir::Target target, ir::HardwareParams hardware_params) {
  TT_CHECK(workload, kInvalidArgument, "a task needs a workload");
  TT_CHECK(target, kInvalidArgument, "a task needs a target");
  auto n = make_node<TaskNode>();
  n->hardware_params = hardware_params ? hardware_params : ir::hardware_params(target);
  n->workload = std::move(workload);
  n->target = std::move(target);
  return Task(n);
}

}  // namespace tensortune::te
