#include "tensortune/search/tuner.h"

#include <algorithm>
#include <chrono>
#include <memory>

#include "tensortune/schedule/compute_dag.h"
#include "tensortune/te/workload.h"

namespace tensortune::search {
namespace {

/// Folds one result into a task's summary.
void account(TaskSummary& summary, const measure::Record& record, bool this_run) {
  if (record.result.ok()) {
    if (!summary.best || record.result.mean_cost() < summary.best->result.mean_cost()) {
      summary.best = record;
    }
    return;
  }
  if (!this_run) return;
  std::string code(measure::error_code_name(record.result.error_code));
  int64_t count = ++summary.errors[code];
  // Keep a message of the commonest code.
  int64_t top = 0;
  for (const auto& [name, n] : summary.errors) top = std::max(top, n);
  if (count == top && (summary.sample_error.empty() || count > 1)) {
    summary.sample_error = code + ": " + record.result.error_message;
  }
}

}  // namespace

TuneReport tune(const std::vector<te::Task>& tasks, const PolicyFactory& make_policy,
                measure::Builder& builder, measure::Runner& runner, const TuneOptions& options,
                const TuneHooks& hooks) {
  TT_CHECK(options.trials >= 0, kInvalidArgument, "trials must be >= 0, got ", options.trials);
  TT_CHECK(options.batch_size >= 1, kInvalidArgument, "batch size must be >= 1, got ",
           options.batch_size);
  auto start = std::chrono::steady_clock::now();
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
  std::vector<measure::Record> logged;
  if (!options.log_path.empty()) {
    logged = measure::load_records(options.log_path, /*print_warnings=*/true, /*missing_ok=*/true)
                 .records;
  }
  for (size_t t = 0; t < tasks.size(); ++t) {
    TaskSummary summary;
    summary.task = tasks[t];
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
    }
    // Each task gets its own stream of random numbers. A resumed run starts
    // a new stream (the seed mixed with what the log holds): replaying the
    // first run's stream would only propose what is measured already.
    uint64_t seed = options.seed + 0x9e3779b97f4a7c15ULL * (t + 1) +
                    0xbf58476d1ce4e5b9ULL * static_cast<uint64_t>(summary.resumed);
    policies.push_back(make_policy(tasks[t], seed));
    if (!states.empty()) policies.back()->update(states, results);
    report.tasks.push_back(std::move(summary));
  }

  std::unique_ptr<measure::RecordWriter> writer;
  if (!options.log_path.empty()) writer = std::make_unique<measure::RecordWriter>(options.log_path);
  auto elapsed = [&] {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  };
  RoundRobinScheduler round_robin;
  TaskScheduler& choose = hooks.scheduler ? *hooks.scheduler : round_robin;
  while (report.trials < options.trials) {
    std::optional<size_t> next = choose.next(report.tasks);
    if (!next) break;
    size_t t = *next;
    TaskSummary& summary = report.tasks[t];
    size_t want =
        static_cast<size_t>(std::min<int64_t>(options.batch_size, options.trials - report.trials));
    std::vector<schedule::State> states = policies[t]->propose(want);
    if (states.empty()) {
      summary.exhausted = true;
      continue;
    }
    auto results = measure::measure_candidates(
        tasks[t], states, context, builder, runner,
        [&](const measure::MeasureInput& input, const measure::MeasureResult& result) {
          measure::Record record{input, result};
          if (writer) writer->write(record);
          account(summary, record, true);
          ++summary.trials;
          ++report.trials;
          if (hooks.result) hooks.result(input, result);
        });
    policies[t]->update(states, results);
    report.elapsed_s = elapsed();
    if (hooks.progress) hooks.progress(summary, report);
  }
  report.elapsed_s = elapsed();
  return report;
}

}  // namespace tensortune::search
