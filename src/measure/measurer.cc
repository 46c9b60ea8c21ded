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
    case WorkerReply::Status::kLost: return ErrorCode::kDeviceLost;
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
  // Groups small enough that every worker gets work.
  size_t workers = static_cast<size_t>(pool_.options().num_workers);
  size_t group = std::min<size_t>(options_.candidates_per_request,
                                  std::max<size_t>(1, (states.size() + workers - 1) / workers));
  std::vector<std::string> requests;
  std::vector<std::pair<size_t, size_t>> ranges;
  for (size_t begin = 0; begin < states.size(); begin += group) {
    size_t end = std::min(states.size(), begin + group);
    std::vector<schedule::State> part(states.begin() + begin, states.begin() + end);
    requests.push_back(make_build_request(task, part, context_, options_.cache_dir));
    ranges.emplace_back(begin, end);
  }
  auto timeout = options_.timeout * static_cast<int64_t>(group);
  std::vector<WorkerReply> replies = pool_.run(requests, timeout);
  std::vector<BuildResult> results(states.size());
  for (size_t r = 0; r < replies.size(); ++r) {
    auto [begin, end] = ranges[r];
    std::vector<BuildResult> part;
    if (replies[r].status == WorkerReply::Status::kOk) {
      try {
        part = parse_build_reply(replies[r].payload, end - begin);
      } catch (const Error& e) {
        BuildResult bad;
        bad.error_code = ErrorCode::kUnknownError;
        bad.error_message = std::string("unreadable build reply: ") + e.what();
        part.assign(end - begin, bad);
      }
    } else {
      BuildResult failed;
      failed.error_code = code_for(replies[r], true);
      failed.error_message = shorten_message(replies[r].message);
      failed.build_seconds = replies[r].seconds / static_cast<double>(end - begin);
      part.assign(end - begin, failed);
    }
    std::move(part.begin(), part.end(), results.begin() + begin);
  }
  return results;
}

LocalRunner::LocalRunner(LocalRunnerOptions options)
    : options_(std::move(options)), pool_(runner_pool(options_)) {}

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
  if (options_.timing.check && !requests.empty() && !prepared_.count(task.workload_key())) {
    // The reference can take far longer than a candidate's timeout allows:
    // evaluate it once, under a timeout of its own, into the cache directory.
    WorkerReply prep = pool_.run({make_prepare_request(task, options_.timing)}, options_.prepare_timeout)[0];
    std::optional<RunOutcome> failed;
    if (prep.status != WorkerReply::Status::kOk) {
      failed.emplace();
      failed->error_code = code_for(prep, false);
      failed->error_message = "preparing the reference outputs failed: " + shorten_message(prep.message);
    } else {
      RunOutcome ready;
      try {
        ready = parse_run_reply(prep.payload, /*expect_costs=*/false);
      } catch (const Error& e) {
        ready.error_code = ErrorCode::kUnknownError;
        ready.error_message = std::string("unreadable reply: ") + e.what();
      }
      if (ready.error_code != ErrorCode::kNoError) {
        failed = ready;
        failed->error_message = "preparing the reference outputs failed: " + ready.error_message;
      }
    }
    if (failed) {
      for (size_t i : which) outcomes[i] = *failed;
      return outcomes;
    }
    prepared_.insert(task.workload_key());
  }
  std::vector<WorkerReply> replies = pool_.run(requests, options_.timeout);
  for (size_t r = 0; r < replies.size(); ++r) {
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
  std::vector<RunOutcome> ran = runner.run(task, built);
  std::vector<MeasureResult> results(states.size());
  for (size_t i = 0; i < states.size(); ++i) {
    MeasureResult& r = results[i];
    r = make_result(built[i], ran[i]);
    if (on_result) on_result(MeasureInput{task, states[i]}, r);
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
