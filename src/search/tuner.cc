#include "tensortune/search/tuner.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <memory>

#include "tensortune/object/serialize.h"
#include "tensortune/object/structural.h"
#include "tensortune/schedule/compute_dag.h"
#include "tensortune/search/default_schedule.h"
#include "tensortune/te/workload.h"

namespace tensortune::search {

void TuneOptions::declare(FieldList<TuneOptions>& f) {
  f.def("trials", &TuneOptions::trials)
      .option("trials", "new measurements in this run, over all tasks")
      .range(0, 1e12)
      .def("batch_size", &TuneOptions::batch_size)
      .option("batch-size", "candidates measured together")
      .range(1, 4096)
      .def("warm_up_batch", &TuneOptions::warm_up_batch)
      .option("warm-up-batch",
              "candidates in each task's first round when several tasks are tuned "
              "(0: max(8, trials / (4 x tasks)))")
      .range(0, 1 << 20)
      .def("log_path", &TuneOptions::log_path)
      .def("seed", &TuneOptions::seed)
      .option("seed", "random seed")
      .def("pass_context", &TuneOptions::pass_context)
      .def("any_pass_context", &TuneOptions::any_pass_context)
      .option("any-pass-context",
              "resume from records of the log built under any pass context, not only this one")
      .def("time_budget_s", &TuneOptions::time_budget_s)
      .option("time-budget", "stop after this many seconds (0: no limit)")
      .range(0, 1e9)
      .def("early_stopping", &TuneOptions::early_stopping)
      .option("early-stopping",
              "stop tuning a task after this many trials without improvement (0: never)")
      .range(0, 1e12)
      .def("weights", &TuneOptions::weights)
      .def("abandon_factor", &TuneOptions::abandon_factor)
      .option("abandon-factor",
              "time a candidate once when its first measurement is this many times slower than "
              "its task's best so far (0: time every candidate fully)")
      .range(0, 1e9)
      .def("confirm", &TuneOptions::confirm)
      .option("confirm",
              "at the end, measure each task's best N schedules (its default among them) again "
              "and judge them on all their costs; at most a tenth of the trials (0: none)")
      .range(0, 1000)
      .validate([](const TuneOptions& o) {
        TT_CHECK(o.abandon_factor == 0 || o.abandon_factor >= 1, kInvalidArgument,
                 "the abandon factor must be 0 (time every candidate fully) or at least 1 (a "
                 "candidate faster than the best must be timed fully), got ",
                 o.abandon_factor);
      });
}
TT_REGISTER_NODE(TuneOptions);

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

/// Folds one result into a task's summary.
void account(TaskSummary& summary, const measure::Record& record, bool this_run) {
  if (record.result.ok()) {
    if (!summary.best || record.result.median_cost() < summary.best->result.median_cost()) {
      summary.best = record;
      if (this_run) {
        summary.trials_since_improvement = 0;
        summary.improved = true;
      }
      return;
    }
  }
  if (!this_run) return;
  ++summary.trials_since_improvement;
  if (record.result.ok()) return;
  std::string code(measure::error_code_name(record.result.error_code));
  int64_t count = ++summary.errors[code];
  // Keep a message of the commonest code.
  int64_t top = 0;
  for (const auto& [name, n] : summary.errors) top = std::max(top, n);
  if (count == top && (summary.sample_error.empty() || count > 1)) {
    summary.sample_error = code + ": " + record.result.error_message;
  }
}

/// A builder that adds the time spent in it to `seconds`.
class TimedBuilder final : public measure::Builder {
 public:
  TimedBuilder(measure::Builder& inner, double& seconds) : inner_(inner), seconds_(seconds) {}
  void check(const te::Task& task, const ir::PassContext& context) override {
    inner_.check(task, context);
  }
  std::vector<measure::BuildResult> build(const te::Task& task,
                                          const std::vector<schedule::State>& states,
                                          const ir::PassContext& context) override {
    auto start = Clock::now();
    auto out = inner_.build(task, states, context);
    seconds_ += seconds_since(start);
    return out;
  }

 private:
  measure::Builder& inner_;
  double& seconds_;
};

/// A runner that adds the time spent in it to `seconds`.
class TimedRunner final : public measure::Runner {
 public:
  TimedRunner(measure::Runner& inner, double& seconds) : inner_(inner), seconds_(seconds) {}
  void check(const te::Task& task) override { inner_.check(task); }
  std::vector<measure::RunOutcome> run(const te::Task& task,
                                       const std::vector<measure::BuildResult>& built,
                                       const measure::RunHints& hints) override {
    auto start = Clock::now();
    auto out = inner_.run(task, built, hints);
    seconds_ += seconds_since(start);
    return out;
  }
  void run_each(
      const te::Task& task, const std::vector<measure::BuildResult>& built,
      const measure::RunHints& hints,
      const std::function<void(size_t, const measure::RunOutcome&)>& on_outcome) override {
    // The caller's time between outcomes (writing records) is not the runner's.
    auto start = Clock::now();
    inner_.run_each(task, built, hints, [&](size_t i, const measure::RunOutcome& outcome) {
      seconds_ += seconds_since(start);
      on_outcome(i, outcome);
      start = Clock::now();
    });
    seconds_ += seconds_since(start);
  }

 private:
  measure::Runner& inner_;
  double& seconds_;
};

/// TuneOptions::confirm: the best few schedules of each task measured again
/// back to back, the most weighted tasks first, while `reserve` trials last;
/// each task's best is then taken from all its costs, pooled per schedule.
void confirm_best(const std::vector<te::Task>& tasks, const TuneOptions& options,
                  const measure::ContextMatch& match, int64_t reserve,
                  std::vector<std::vector<measure::Record>>& measured, measure::Builder& builder,
                  measure::Runner& runner, measure::RecordWriter* writer, const TuneHooks& hooks,
                  Clock::time_point start, TuneReport& report) {
  std::vector<size_t> order;
  for (size_t t = 0; t < tasks.size(); ++t) {
    if (report.tasks[t].best_latency()) order.push_back(t);
  }
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return report.tasks[a].weight * *report.tasks[a].best_latency() >
           report.tasks[b].weight * *report.tasks[b].best_latency();
  });
  int64_t left = reserve;
  for (size_t t : order) {
    if (options.time_budget_s > 0 && seconds_since(start) >= options.time_budget_s) break;
    // The distinct schedules by pooled median cost, best first.
    std::vector<measure::Record> accepted;
    for (const measure::Record& r : measured[t]) {
      if (match.accepts(r.result)) accepted.push_back(r);
    }
    std::vector<measure::Record> pooled = measure::pool_by_schedule(accepted);
    std::stable_sort(pooled.begin(), pooled.end(),
                     [](const measure::Record& a, const measure::Record& b) {
                       return a.result.median_cost() < b.result.median_cost();
                     });
    const int64_t want = std::min<int64_t>(options.confirm, left);
    // The best schedules, with places kept for the default: one, or two if
    // it was never measured, so that it counts among the finalists
    // (measure::best_for prefers schedules measured more than once).
    schedule::State fallback = default_schedule(tasks[t]);
    const bool default_measured = std::any_of(
        pooled.begin(), pooled.end(),
        [&](const measure::Record& p) { return structural_equal(p.input.state, fallback); });
    const int64_t default_places = std::min<int64_t>(default_measured ? 1 : 2, want);
    std::vector<schedule::State> states;
    for (const measure::Record& p : pooled) {
      if (static_cast<int64_t>(states.size()) + default_places >= want) break;
      if (!structural_equal(p.input.state, fallback)) states.push_back(p.input.state);
    }
    for (int64_t i = 0; i < default_places; ++i) states.push_back(fallback);
    if (states.size() < 2) continue;  // nothing to choose between
    TaskSummary& summary = report.tasks[t];
    measure::RunHints hints;
    hints.abandon_factor = 0;  // timed fully: these are the ones to tell apart
    measure::measure_candidates(
        tasks[t], states, report.pass_context, builder, runner,
        [&](const measure::MeasureInput& input, const measure::MeasureResult& result) {
          measure::Record record{input, result};
          if (writer) writer->write(record);
          if (result.ok()) measured[t].push_back(record);
          report.time.kernel_s += result.kernel_seconds;
          ++summary.trials;
          ++report.trials;
          ++summary.confirm_trials;
          if (hooks.result) hooks.result(input, result);
        },
        hints);
    left -= static_cast<int64_t>(states.size());
    if (auto best = measure::best_for(measured[t], tasks[t], match)) summary.best = *best;
    report.elapsed_s = seconds_since(start);
    if (hooks.progress) hooks.progress(summary, report);
    if (left < 2) break;
  }
}

}  // namespace

double TuneReport::weighted_latency() const {
  double total = 0;
  for (const auto& t : tasks) {
    if (auto latency = t.best_latency()) total += t.weight * *latency;
  }
  return total;
}

TuneReport tune(const std::vector<te::Task>& tasks, const PolicyFactory& make_policy,
                measure::Builder& builder, measure::Runner& runner, const TuneOptions& options,
                const TuneHooks& hooks) {
  try {
    validate(options);
  } catch (const UserError& e) {
    fail(e.kind(), "tune options: ", e.what());
  }
  TT_CHECK(options.weights.empty() || options.weights.size() == tasks.size(), kInvalidArgument,
           "got ", options.weights.size(), " task weights for ", tasks.size(), " tasks");
  for (double w : options.weights) {
    TT_CHECK(std::isfinite(w) && w > 0, kInvalidArgument, "a task weight must be > 0, got ", w);
  }
  auto start = Clock::now();
  TuneReport report;
  report.pass_context = options.pass_context ? options.pass_context : ir::PassContext::current();
  const ir::PassContext& context = report.pass_context;
  measure::ContextMatch match = options.any_pass_context ? measure::ContextMatch::any()
                                                         : measure::ContextMatch::only(context);

  // Before anything is measured: a task the workers cannot take stops the run here.
  for (const auto& task : tasks) {
    builder.check(task, context);
    runner.check(task);
  }

  std::vector<std::unique_ptr<SearchPolicy>> policies;
  std::vector<std::vector<measure::Record>> measured(tasks.size());  // per task, for confirm
  std::vector<measure::Record> logged;
  if (!options.log_path.empty()) {
    logged = measure::load_records(options.log_path, /*print_warnings=*/true, /*missing_ok=*/true)
                 .records;
  }
  for (size_t t = 0; t < tasks.size(); ++t) {
    TaskSummary summary;
    summary.task = tasks[t];
    summary.weight = options.weights.empty() ? 1.0 : options.weights[t];
    summary.flops = schedule::ComputeDAG(te::workload_tensors(tasks[t]->workload)).flop_count();
    measure::ResumeSet resumed = measure::resume_set(logged, tasks[t], match);
    summary.other_context_records = resumed.other_context_records;
    summary.other_contexts = resumed.other_contexts;
    std::vector<schedule::State> states;
    std::vector<measure::MeasureResult> results;
    for (const measure::Record* r : resumed.records) {
      states.push_back(r->input.state);
      results.push_back(r->result);
      account(summary, *r, false);
      ++summary.resumed;
      if (r->result.ok()) measured[t].push_back(*r);
    }
    // Each task gets its own stream of random numbers. A resumed run starts
    // a new stream (the seed mixed with what the log holds): replaying the
    // first run's stream would only propose what is measured already.
    uint64_t seed = options.seed + 0x9e3779b97f4a7c15ULL * (t + 1) +
                    0xbf58476d1ce4e5b9ULL * static_cast<uint64_t>(summary.resumed);
    policies.push_back(make_policy(tasks[t], seed));
    if (!states.empty()) {
      auto learn = Clock::now();
      policies.back()->update(states, results);
      report.time.training_s += seconds_since(learn);
    }
    report.tasks.push_back(std::move(summary));
  }

  std::unique_ptr<measure::RecordWriter> writer;
  if (!options.log_path.empty()) writer = std::make_unique<measure::RecordWriter>(options.log_path);
  TimedBuilder timed_builder(builder, report.time.build_s);
  TimedRunner timed_runner(runner, report.time.run_s);
  RoundRobinScheduler round_robin;
  TaskScheduler& choose = hooks.scheduler ? *hooks.scheduler : round_robin;
  const auto loop_start = Clock::now();
  report.stop_reason = "trials";
  const int64_t reserve =
      std::min<int64_t>(options.confirm * static_cast<int64_t>(tasks.size()), options.trials / 10);
  const size_t warm_up = static_cast<size_t>(
      options.warm_up_batch > 0
          ? options.warm_up_batch
          : std::max<int64_t>(
                8,
                options.trials / (4 * std::max<int64_t>(1, static_cast<int64_t>(tasks.size())))));
  // Searches until `held_back` trials of the budget are left.
  auto search = [&](int64_t held_back) {
    while (report.trials < options.trials - held_back) {
      double elapsed = seconds_since(start);
      size_t want = static_cast<size_t>(
          std::min<int64_t>(options.batch_size, options.trials - held_back - report.trials));
      if (options.time_budget_s > 0) {
        double left = options.time_budget_s - elapsed;
        // What a trial has cost so far decides how many fit in what is left.
        if (report.trials > 0) {
          double per_trial = seconds_since(loop_start) / static_cast<double>(report.trials);
          left -= static_cast<double>(held_back) * per_trial;
          want = std::min(want, static_cast<size_t>(std::max(0.0, std::floor(left / per_trial))));
        } else {
          // Nothing is known of a trial's cost yet: a small first batch.
          want = std::min<size_t>(want, 4);
        }
        if (left <= 0 || want == 0) {
          report.stop_reason = "time budget";
          break;
        }
      }
      std::optional<size_t> next = choose.next(report.tasks);
      if (!next) {
        report.stop_reason = "every task done";
        break;
      }
      size_t t = *next;
      TaskSummary& summary = report.tasks[t];
      if (tasks.size() > 1 && summary.rounds == 0 && summary.resumed == 0) {
        want = std::min(want, warm_up);
      }
      auto search_start = Clock::now();
      std::vector<schedule::State> states = policies[t]->propose(want);
      report.time.search_s += seconds_since(search_start);
      if (states.empty()) {
        summary.exhausted = true;
        continue;
      }
      measure::RunHints hints;
      hints.abandon_factor = options.abandon_factor;
      if (auto best = summary.best_latency()) hints.best_s = *best;
      auto results = measure::measure_candidates(
          tasks[t], states, context, timed_builder, timed_runner,
          [&](const measure::MeasureInput& input, const measure::MeasureResult& result) {
            measure::Record record{input, result};
            if (writer) writer->write(record);
            account(summary, record, true);
            if (result.ok()) measured[t].push_back(record);
            report.time.kernel_s += result.kernel_seconds;
            ++summary.trials;
            ++report.trials;
            if (hooks.result) hooks.result(input, result);
          },
          hints);
      auto learn = Clock::now();
      policies[t]->update(states, results);
      report.time.training_s += seconds_since(learn);
      ++summary.rounds;
      if (options.early_stopping > 0 &&
          summary.trials_since_improvement >= options.early_stopping) {
        summary.early_stopped = true;
      }
      report.elapsed_s = seconds_since(start);
      if (hooks.progress) hooks.progress(summary, report);
    }
  };
  search(reserve);
  if (reserve > 0 && report.stop_reason != "time budget") {
    confirm_best(tasks, options, match, reserve, measured, timed_builder, timed_runner,
                 writer.get(), hooks, start, report);
    // Trials the confirmation did not need (too few distinct schedules) go to the search.
    if (report.stop_reason == "trials") search(0);
  }
  report.elapsed_s = seconds_since(start);
  const TimeSplit& t = report.time;
  report.time.other_s =
      std::max(0.0, report.elapsed_s - t.search_s - t.training_s - t.build_s - t.run_s);
  return report;
}

}  // namespace tensortune::search
