#include "tensortune/graph/partition.h"

#include <map>

#include "tensortune/graph/passes.h"
#include "tensortune/schedule/compute_dag.h"

namespace tensortune::graph {

Partition partition_model(const Graph& model, const ir::Target& target) {
  Partition p;
  p.target = target;
  p.graph = model;
  try {
    p.graph = optimize(model, target);
  } catch (const UserError& e) {
    // The graph as given is still whole: nothing can have changed it.
    p.fallback_reason = e.what();
    p.graph = model;
  }
  p.groups = fuse_groups(p.graph);
  std::map<std::string, int64_t> task_of_key;
  for (const FusedGroup& g : p.groups) {
    if (g.is_view()) {
      p.task_of_group.push_back(-1);
      continue;
    }
    te::Workload w = group_workload(g);
    std::string key = te::workload_key(w);
    auto [it, added] = task_of_key.emplace(key, static_cast<int64_t>(p.tasks.size()));
    p.task_of_group.push_back(it->second);
    if (!added) {
      ++p.tasks[static_cast<size_t>(it->second)].occurrences;
      continue;
    }
    PartitionTask t;
    t.task = te::Task::make(w, target);
    t.workload_key = std::move(key);
    t.description = g.description();
    t.occurrences = 1;
    t.flops = schedule::ComputeDAG(te::workload_tensors(w)).flop_count();
    p.tasks.push_back(std::move(t));
  }
  return p;
}

}  // namespace tensortune::graph
