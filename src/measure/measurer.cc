#include "tensortune/measure/measurer.h"

#include <algorithm>
#include <optional>
#include <thread>

namespace tensortune::measure {
namespace {

WorkerPoolOptions builder_pool(const LocalBuilderOptions& options) {
  WorkerPoolOptions pool = options.pool;
  int cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  pool.num_workers = options.parallelism > 0 ? options.parallelism : cores;
  if (pool.name == "worker") pool.name = "build worker";
  return pool;
}

WorkerPoolOptions runner_pool(const LocalRunnerOptions& options) {
  WorkerPoolOptions pool = options.pool;
  pool.num_workers = 1;
  if (pool.name == "worker") pool.name = "run worker";
  if (options.pin_threads) {
    pool.env.emplace_back("OMP_PROC_BIND", "close");
    pool.env.emplace_back("OMP_PLACES", "cores");
  }
  return pool;
}

/// The error code a failed worker exchange means for a build or a run.
ErrorCode code_for(const WorkerReply& reply, bool building) {
  switch (reply.status) {
    case WorkerReply::Status::kOk: return ErrorCode::kNoError;
    case WorkerReply::Status::kTimeout: return building ? ErrorCode::kBuildTimeout : ErrorCode::kRunTimeout;
    case WorkerReply::Status::kCrashed:
      return building ? ErrorCode::kUnknownError : ErrorCode::kRuntimeError;
    case WorkerReply::Status::kLost:
    case WorkerReply::Status::kNotStarted: return ErrorCode::kDeviceLost;
  }
  return ErrorCode::kUnknownError;
}

}  // namespace

LocalBuilder::LocalBuilder(LocalBuilderOptions options, ir::PassContext context)
    : options_(std::move(options)), context_(std::move(context)), pool_(builder_pool(options_)) {
  TT_CHECK(options_.candidates_per_request >= 1, kInvalidArgument,
           "candidates_per_request must be >= 1, got ", options_.candidates_per_request);
}

std::vector<BuildResult> LocalBuilder::build(const te::Task& task,
                                             const std::vector<schedule::State>& states) {
  std::vector<BuildResult> results(states.size());
  // Groups small enough that every worker gets work.
  size_t workers = static_cast<size_t>(pool_.options().num_workers);
  size_t group = std::min<size_t>(options_.candidates_per_request,
                                  std::max<size_t>(1, (states.size() + workers - 1) / workers));
  std::vector<std::pair<size_t, size_t>> ranges;
  for (size_t begin = 0; begin < states.size(); begin += group) {
    ranges.emplace_back(begin, std::min(states.size(), begin + group));
  }
  std::vector<std::pair<size_t, size_t>> retry;  // groups to build again one by one
  build_ranges(task, states, ranges, results, &retry);
  if (!retry.empty()) {
    // One candidate that hangs the compiler or kills the worker must not take
    // the others of its group with it: each gets a request of its own.
    std::vector<std::pair<size_t, size_t>> singles;
    for (auto [begin, end] : retry) {
      for (size_t i = begin; i < end; ++i) singles.emplace_back(i, i + 1);
    }
    build_ranges(task, states, singles, results, nullptr);
  }
  return results;
}

void LocalBuilder::build_ranges(const te::Task& task, const std::vector<schedule::State>& states,
                                const std::vector<std::pair<size_t, size_t>>& ranges,
                                std::vector<BuildResult>& results,
                                std::vector<std::pair<size_t, size_t>>* retry) {
  std::vector<std::string> requests;
  size_t largest = 1;
  for (auto [begin, end] : ranges) {
    std::vector<schedule::State> part(states.begin() + begin, states.begin() + end);
    requests.push_back(make_build_request(task, part, context_, options_.cache_dir));
    largest = std::max(largest, end - begin);
  }
  // A group whose compile fails is compiled again one by one in the worker:
  // twice the time of the group.
  auto timeout = options_.timeout * static_cast<int64_t>(largest > 1 ? 2 * largest : 1);
  std::vector<WorkerReply> replies = pool_.run(requests, timeout);
  uint64_t expected_hash = context_.hash();
  for (size_t r = 0; r < replies.size(); ++r) {
    auto [begin, end] = ranges[r];
    const WorkerReply& reply = replies[r];
    if (reply.status == WorkerReply::Status::kNotStarted) fail(ErrorKind::kRuntime, reply.message);
    if (reply.status != WorkerReply::Status::kOk && retry && end - begin > 1) {
      retry->emplace_back(begin, end);
      continue;
    }
    std::vector<BuildResult> part;
    if (reply.status == WorkerReply::Status::kOk) {
      try {
        part = parse_build_reply(reply.payload, end - begin);
      } catch (const Error& e) {
        BuildResult bad;
        bad.error_code = ErrorCode::kUnknownError;
        bad.error_message = std::string("unreadable build reply: ") + e.what();
        part.assign(end - begin, bad);
      }
      for (auto& b : part) {
        // DESIGN invariant 6: what is measured is built under the tuner's context.
        if (b.error_code == ErrorCode::kNoError && b.pass_context_hash != expected_hash) {
          b.error_code = ErrorCode::kUnknownError;
          b.error_message = "the build worker lowered under a different PassContext than the tuner's";
        }
      }
    } else {
      BuildResult failed;
      failed.error_code = code_for(reply, true);
      failed.error_message = shorten_message(reply.message);
      failed.build_seconds = reply.seconds / static_cast<double>(end - begin);
      part.assign(end - begin, failed);
    }
    std::move(part.begin(), part.end(), results.begin() + begin);
  }
}

LocalRunner::LocalRunner(LocalRunnerOptions options)
    : options_(std::move(options)), pool_(runner_pool(options_)) {
  const RunnerOptions& t = options_.timing;
  int64_t least_ms = static_cast<int64_t>(t.repeat) * (t.min_repeat_ms + t.cooldown_ms);
  TT_CHECK(least_ms < options_.timeout.count(), kInvalidArgument, "a run takes at least repeat x (min_repeat_ms + ",
           "cooldown_ms) = ", least_ms, " ms, which does not fit in the run timeout of ",
           options_.timeout.count(), " ms; raise the timeout or lower those");
}

void LocalRunner::prepare(const te::Task& task) {
  // Again whenever the worker may be new (a crash, a timeout, recycling): the
  // reference then comes from the cache directory, or is evaluated again, but
  // never inside a candidate's timeout.
  std::string key = task.workload_key();
  if (prepared_key_ == key && prepared_workers_ == pool_.workers_started()) return;
  WorkerReply reply = pool_.run({make_prepare_request(task, options_.timing)}, options_.prepare_timeout)[0];
  std::string why;
  if (reply.status != WorkerReply::Status::kOk) {
    why = reply.message;
  } else {
    try {
      RunOutcome ready = parse_run_reply(reply.payload, /*expect_costs=*/false);
      if (ready.error_code != ErrorCode::kNoError) why = ready.error_message;
    } catch (const Error& e) {
      why = std::string("unreadable reply: ") + e.what();
    }
  }
  // Without the reference no candidate can be checked: stop rather than
  // record every candidate of the task as failed.
  if (!why.empty()) {
    fail(ErrorKind::kRuntime, "cannot prepare the reference outputs of ", key, " for --check: ", why);
  }
  prepared_key_ = key;
  prepared_workers_ = pool_.workers_started();
}

std::vector<RunOutcome> LocalRunner::run(const te::Task& task, const std::vector<BuildResult>& built) {
  std::vector<RunOutcome> outcomes(built.size());
  std::vector<std::string> requests;
  std::vector<size_t> which;
  for (size_t i = 0; i < built.size(); ++i) {
    if (built[i].error_code != ErrorCode::kNoError) {
      outcomes[i].error_code = built[i].error_code;
      outcomes[i].error_message = built[i].error_message;
      continue;
    }
    requests.push_back(make_run_request(task, built[i], options_.timing));
    which.push_back(i);
  }
  if (options_.timing.check && !requests.empty()) prepare(task);
  std::vector<WorkerReply> replies = pool_.run(requests, options_.timeout);
  for (size_t r = 0; r < replies.size(); ++r) {
    if (replies[r].status == WorkerReply::Status::kNotStarted) fail(ErrorKind::kRuntime, replies[r].message);
    RunOutcome& out = outcomes[which[r]];
    if (replies[r].status == WorkerReply::Status::kOk) {
      try {
        out = parse_run_reply(replies[r].payload);
      } catch (const Error& e) {
        out.error_code = ErrorCode::kUnknownError;
        out.error_message = std::string("unreadable run reply: ") + e.what();
      }
    } else {
      out.error_code = code_for(replies[r], false);
      out.error_message = shorten_message(replies[r].message);
      out.run_seconds = replies[r].seconds;
    }
  }
  return outcomes;
}

MeasureResult make_result(const BuildResult& built, const RunOutcome& ran) {
  MeasureResult r;
  r.error_code = ran.error_code;
  r.error_message = shorten_message(ran.error_message);
  r.costs = ran.costs;
  r.build_seconds = built.build_seconds;
  r.run_seconds = ran.run_seconds;
  r.timestamp = unix_time_now();
  r.pass_context_hash = built.pass_context_hash;
  r.max_error = ran.max_error;
  return r;
}

std::vector<MeasureResult> measure_candidates(const te::Task& task,
                                              const std::vector<schedule::State>& states,
                                              Builder& builder, Runner& runner,
                                              const ResultCallback& on_result) {
  std::vector<BuildResult> built = builder.build(task, states);
  std::vector<MeasureResult> results(states.size());
  auto report = [&](size_t i, const RunOutcome& ran) {
    results[i] = make_result(built[i], ran);
    if (on_result) on_result(MeasureInput{task, states[i]}, results[i]);
  };
  // Failed builds are reported at once, and each run as it ends: an
  // interrupted tuner loses at most the candidate being run.
  for (size_t i = 0; i < states.size(); ++i) {
    if (built[i].error_code != ErrorCode::kNoError) report(i, runner.run(task, {built[i]})[0]);
  }
  for (size_t i = 0; i < states.size(); ++i) {
    if (built[i].error_code == ErrorCode::kNoError) report(i, runner.run(task, {built[i]})[0]);
  }
  return results;
}

std::vector<MeasureResult> measure_candidates(const te::Task& task,
                                              const std::vector<schedule::State>& states,
                                              Builder& builder, Runner& runner, RecordWriter& log) {
  return measure_candidates(task, states, builder, runner,
                            [&](const MeasureInput& input, const MeasureResult& result) {
                              log.write(Record{input, result});
                            });
}

}  // namespace tensortune::measure
