#include "tensortune/measure/model_timing.h"

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <set>
#include <thread>

#include "tensortune/measure/measurer.h"
#include "tensortune/object/serialize.h"
#include "tensortune/runtime/compiled_model.h"
#include "tensortune/support/host_cpu.h"
#include "tensortune/te/ndarray.h"

namespace tensortune::measure {

void CandidateStepNode::declare(FieldList<CandidateStepNode>& f) {
  f.def("step", &CandidateStepNode::step)
      .def("task", &CandidateStepNode::task)
      .def("functions", &CandidateStepNode::functions)
      .def("args", &CandidateStepNode::args)
      .validate([](const CandidateStepNode& s) {
        TT_CHECK(s.step >= 0 && s.task >= 0, kInvalidArgument,
                 "a candidate step needs a step and a task index >= 0");
        TT_CHECK(!s.functions.empty() && s.functions.size() == s.args.size(), kInvalidArgument,
                 "step ", s.step, ": one argument list per candidate function, and at least one");
      });
}

void ModelTimingRequest::declare(FieldList<ModelTimingRequest>& f) {
  f.def("model_dir", &ModelTimingRequest::model_dir)
      .def("steps", &ModelTimingRequest::steps)
      .def("timing", &ModelTimingRequest::timing)
      .def("rounds", &ModelTimingRequest::rounds)
      .def("margin", &ModelTimingRequest::margin)
      .def("min_share", &ModelTimingRequest::min_share)
      .def("threads", &ModelTimingRequest::threads)
      .validate([](const ModelTimingRequest& r) {
        TT_CHECK(r.rounds >= 1 && r.margin >= 0 && r.margin < 1 && r.min_share >= 0 &&
                     r.min_share <= 1 && r.threads >= 0,
                 kInvalidArgument,
                 "model timing: rounds must be >= 1, margin in [0, 1), min_share in [0, 1], "
                 "threads >= 0");
        TT_CHECK(r.timing, kInvalidArgument, "a model timing request needs runner options");
        for (const auto& s : r.steps) {
          TT_CHECK(s, kInvalidArgument, "a model timing request holds a null step");
        }
      });
}

void TaskChoiceNode::declare(FieldList<TaskChoiceNode>& f) {
  f.def("task", &TaskChoiceNode::task)
      .def("chosen", &TaskChoiceNode::chosen)
      .def("judged_seconds", &TaskChoiceNode::judged_seconds);
}

void ModelTimingReply::declare(FieldList<ModelTimingReply>& f) {
  f.def("tasks", &ModelTimingReply::tasks)
      .def("evaluations", &ModelTimingReply::evaluations)
      .def("seconds", &ModelTimingReply::seconds);
}

TT_REGISTER_NODE(CandidateStepNode);
TT_REGISTER_NODE(ModelTimingRequest);
TT_REGISTER_NODE(TaskChoiceNode);
TT_REGISTER_NODE(ModelTimingReply);

void ModelTimingOptions::declare(FieldList<ModelTimingOptions>& f) {
  f.def("candidates", &ModelTimingOptions::candidates)
      .option("candidates",
              "time each task's K best schedules of the log inside the model on this machine "
              "and keep the fastest there (1: the log's best, untimed)")
      .range(1, 16)
      .def("timing", &ModelTimingOptions::timing)
      .def("per_evaluation", &ModelTimingOptions::per_evaluation)
      .option("timeout",
              "seconds the timing worker may take per evaluation of the model; past it the "
              "worker is killed and every task keeps its log's best")
      .range(0.001, 86400)
      .def("pool", &ModelTimingOptions::pool)
      .validate([](const ModelTimingOptions& o) {
        validate(o.timing);
        validate(o.pool);
      });
}
TT_REGISTER_NODE(ModelTimingOptions);

namespace {

using Clock = std::chrono::steady_clock;

double median_of(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

/// The tasks of `request` in order of first appearance, each with its steps.
std::vector<std::pair<int64_t, std::vector<const CandidateStepNode*>>> tasks_of(
    const ModelTimingRequest& request, size_t plan_steps) {
  std::vector<std::pair<int64_t, std::vector<const CandidateStepNode*>>> tasks;
  std::set<int64_t> seen_steps;
  for (const auto& s : request.steps) {
    TT_CHECK(static_cast<size_t>(s->step) < plan_steps, kInvalidArgument, "candidate step ",
             s->step, " is beyond the model's ", plan_steps, " steps");
    TT_CHECK(seen_steps.insert(s->step).second, kInvalidArgument, "step ", s->step,
             " is listed twice");
    auto it =
        std::find_if(tasks.begin(), tasks.end(), [&](const auto& t) { return t.first == s->task; });
    if (it == tasks.end()) {
      tasks.push_back({s->task, {}});
      it = tasks.end() - 1;
    }
    TT_CHECK(it->second.empty() || it->second.front()->functions.size() == s->functions.size(),
             kInvalidArgument, "the steps of task ", s->task,
             " offer different numbers of candidates");
    it->second.push_back(s.get());
  }
  return tasks;
}

}  // namespace

ModelTimingReply time_candidates_in_model(const ModelTimingRequest& request) {
  auto start = Clock::now();
  runtime::CompiledModel model = runtime::CompiledModel::load(request.model_dir);
  model.set_threads(request.threads);
  const size_t steps = model.plan()->steps.size();
  auto tasks = tasks_of(request, steps);
  std::vector<int64_t> task_of_step(steps, -1);
  for (const auto& s : request.steps) task_of_step[static_cast<size_t>(s->step)] = s->task;
  auto put_in_place = [&](const std::vector<const CandidateStepNode*>& task_steps, size_t v) {
    for (const CandidateStepNode* s : task_steps) {
      model.set_step(static_cast<size_t>(s->step), s->functions[v], s->args[v]);
    }
  };
  // Every candidate is checked against the plan before any is timed, so a
  // request that does not fit the model fails whole, naming the step.
  for (const auto& [task, task_steps] : tasks) {
    for (size_t v = task_steps.front()->functions.size(); v-- > 0;) put_in_place(task_steps, v);
  }

  std::vector<te::NDArray> inputs;
  for (size_t i = 0; i < model.inputs().size(); ++i) {
    inputs.push_back(te::NDArray::random(model.inputs()[i].dtype, model.inputs()[i].shape,
                                         request.timing->seed + 1 + i));
  }
  std::vector<te::NDArray> outputs = model.make_outputs();
  // Twice the last cache level, written before a timed run, leaves none of
  // the model's data in any cache.
  std::vector<char> evictor;
  if (request.timing->flush_cache) {
    const HostCpu& cpu = host_cpu();
    int64_t largest = std::max({cpu.l1, cpu.l2, cpu.l3, int64_t{8} << 20});
    evictor.resize(static_cast<size_t>(2 * largest));
  }
  ModelTimingReply reply;
  // The median time of each step under the candidates in place now.
  auto evaluate = [&]() {
    if (request.timing->cooldown_ms > 0) {
      std::this_thread::sleep_for(std::chrono::milliseconds(request.timing->cooldown_ms));
    }
    model.run_into(inputs, outputs);  // caches in their steady state for these kernels
    std::vector<std::vector<double>> samples(steps);
    std::vector<double> seconds;
    for (int r = 0; r < request.timing->repeat; ++r) {
      for (size_t i = 0; i < evictor.size(); i += 64)
        evictor[i] = static_cast<char>(evictor[i] + 1);
      model.run_timed(inputs, outputs, seconds);
      for (size_t s = 0; s < seconds.size(); ++s) samples[s].push_back(seconds[s]);
    }
    ++reply.evaluations;
    std::vector<double> medians;
    for (auto& v : samples) medians.push_back(median_of(v));
    return medians;
  };

  std::vector<double> base = evaluate();
  double total = 0;
  std::vector<double> time_of(tasks.size(), 0.0);
  for (size_t s = 0; s < steps; ++s) {
    total += base[s];
    for (size_t t = 0; t < tasks.size(); ++t) {
      if (task_of_step[s] == tasks[t].first) time_of[t] += base[s];
    }
  }
  std::vector<size_t> order;
  for (size_t t = 0; t < tasks.size(); ++t) {
    if (tasks[t].second.front()->functions.size() > 1 && time_of[t] >= request.min_share * total) {
      order.push_back(t);
    }
  }
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return time_of[a] > time_of[b]; });

  // Tasks far enough apart in the plan are timed in the same evaluations:
  // a task's candidates change its calls and the calls after them (which
  // read what they wrote), so two tasks whose calls are more than two steps
  // apart judge disjoint calls that neither's candidates change. On
  // EfficientNet-B0 this takes a fifth of the evaluations one task at a time did.
  auto apart = [&](size_t a, size_t b) {
    for (const CandidateStepNode* x : tasks[a].second) {
      for (const CandidateStepNode* y : tasks[b].second) {
        if (std::abs(x->step - y->step) <= 2) return false;
      }
    }
    return true;
  };
  // A task joins a group after every group holding a task near it, so the
  // larger of two neighbours is still decided first and the smaller judged
  // with its choice in place, as when they were timed one by one.
  std::vector<std::vector<size_t>> groups;
  for (size_t t : order) {
    auto fits = [&](const std::vector<size_t>& g) {
      return std::all_of(g.begin(), g.end(), [&](size_t u) { return apart(t, u); });
    };
    auto first = groups.begin();
    for (auto g = groups.begin(); g != groups.end(); ++g) {
      if (!fits(*g)) first = g + 1;
    }
    auto g = std::find_if(first, groups.end(), fits);
    if (g == groups.end()) {
      groups.push_back({t});
    } else {
      g->push_back(t);
    }
  }

  std::vector<Ref<TaskChoiceNode>> choice_of(tasks.size());
  for (const std::vector<size_t>& group : groups) {
    // Per task of the group: the steps it is judged on (its calls and the
    // calls after them), and each candidate's score in each round.
    std::vector<std::set<size_t>> judged(group.size());
    std::vector<std::vector<std::vector<double>>> scores(group.size());
    size_t most = 0;
    for (size_t g = 0; g < group.size(); ++g) {
      const auto& task_steps = tasks[group[g]].second;
      for (const CandidateStepNode* s : task_steps) {
        judged[g].insert(static_cast<size_t>(s->step));
        if (static_cast<size_t>(s->step) + 1 < steps) {
          judged[g].insert(static_cast<size_t>(s->step) + 1);
        }
      }
      scores[g].resize(task_steps.front()->functions.size());
      most = std::max(most, scores[g].size());
    }
    for (int round = 0; round < request.rounds; ++round) {
      for (size_t v = 0; v < most; ++v) {
        // A task with fewer candidates has the log's best in place meanwhile.
        for (size_t g = 0; g < group.size(); ++g) {
          put_in_place(tasks[group[g]].second, v < scores[g].size() ? v : 0);
        }
        std::vector<double> medians = evaluate();
        for (size_t g = 0; g < group.size(); ++g) {
          if (v >= scores[g].size()) continue;
          double sum = 0;
          for (size_t s : judged[g]) sum += medians[s];
          scores[g][v].push_back(sum);
        }
      }
    }
    for (size_t g = 0; g < group.size(); ++g) {
      const std::vector<std::vector<double>>& sc = scores[g];
      std::vector<double> score;
      for (const auto& x : sc) score.push_back(median_of(x));
      size_t best = 0;
      for (size_t v = 1; v < sc.size(); ++v) {
        bool every_round = true;
        for (int r = 0; r < request.rounds; ++r) every_round &= sc[v][r] < sc[0][r];
        if (every_round && score[v] < score[0] * (1 - request.margin) && score[v] < score[best]) {
          best = v;
        }
      }
      put_in_place(tasks[group[g]].second, best);
      auto choice = make_node<TaskChoiceNode>();
      choice->task = tasks[group[g]].first;
      choice->chosen = static_cast<int64_t>(best);
      choice->judged_seconds = score;
      choice_of[group[g]] = Ref<TaskChoiceNode>(std::move(choice));
    }
  }
  for (size_t t : order) reply.tasks.push_back(choice_of[t]);
  reply.seconds = std::chrono::duration<double>(Clock::now() - start).count();
  return reply;
}

ModelTimingOutcome time_in_model_worker(const ModelTimingRequest& request,
                                        const ModelTimingOptions& options) {
  WorkerPoolOptions pool_options = options.pool;
  pool_options.num_workers = 1;
  if (pool_options.name == "worker") pool_options.name = "model timing worker";
  WorkerPool pool(pool_options, hello_handshake());
  // One evaluation, then rounds of every candidate of every task, and
  // loading: one more evaluation's worth.
  int64_t evaluations = 2;
  std::set<int64_t> counted;
  for (const auto& s : request.steps) {
    if (counted.insert(s->task).second) {
      evaluations += request.rounds * static_cast<int64_t>(s->functions.size());
    }
  }
  WorkerReply reply = pool.run({encode(request)}, options.per_evaluation * evaluations)[0];
  ModelTimingOutcome outcome;
  switch (reply.status) {
    case WorkerReply::Status::kOk:
      try {
        outcome.reply = decode<ModelTimingReply>(reply.payload, "model timing reply");
      } catch (const UserError& e) {
        outcome.error_code = ErrorCode::kRuntimeError;
        outcome.error_message = e.what();
      }
      return outcome;
    case WorkerReply::Status::kTimeout: outcome.error_code = ErrorCode::kRunTimeout; break;
    case WorkerReply::Status::kCrashed: outcome.error_code = ErrorCode::kRuntimeError; break;
    case WorkerReply::Status::kLost:
    case WorkerReply::Status::kNotStarted: outcome.error_code = ErrorCode::kDeviceLost; break;
  }
  outcome.error_message = reply.message;
  return outcome;
}

}  // namespace tensortune::measure
