#include "tensortune/measure/measurer.h"

#include <algorithm>
#include <cstdio>
#include <optional>
#include <thread>

#include "tensortune/object/serialize.h"
#include "tensortune/object/structural.h"
#include "tensortune/support/build_info.h"
#include "tensortune/support/host_cpu.h"
#include "tensortune/support/strings.h"

namespace tensortune::measure {

void LocalBuilderOptions::declare(FieldList<LocalBuilderOptions>& f) {
  f.def("parallelism", &LocalBuilderOptions::parallelism)
      .option("parallelism", "build workers (0: one per core)")
      .range(0, 1024)
      .def("timeout", &LocalBuilderOptions::timeout)
      .option("build-timeout", "seconds building one candidate may take")
      .range(0.001, 86400)
      .def("candidates_per_request", &LocalBuilderOptions::candidates_per_request)
      .option("candidates-per-build", "candidates compiled together by one compiler run")
      .range(1, 1024)
      .def("cache_dir", &LocalBuilderOptions::cache_dir)
      .def("pool", &LocalBuilderOptions::pool)
      .def_added_later("simulate", &LocalBuilderOptions::simulate)
      .validate([](const LocalBuilderOptions& o) { validate(o.pool); });
}
TT_REGISTER_NODE(LocalBuilderOptions);

void LocalRunnerOptions::declare(FieldList<LocalRunnerOptions>& f) {
  f.def("timing", &LocalRunnerOptions::timing)
      .def("timeout", &LocalRunnerOptions::timeout)
      .option("timeout", "seconds a run of one candidate may take")
      .range(0.001, 86400)
      .def("prepare_timeout", &LocalRunnerOptions::prepare_timeout)
      .range(0.001, 86400 * 7)
      .def("pin_threads", &LocalRunnerOptions::pin_threads)
      .option("pin-threads", "bind the kernel's threads to CPUs (TT_PIN_THREADS=1)")
      .def("pool", &LocalRunnerOptions::pool)
      .validate([](const LocalRunnerOptions& o) {
        validate(o.timing);
        validate(o.pool);
      });
}
TT_REGISTER_NODE(LocalRunnerOptions);
namespace {

using Clock = std::chrono::steady_clock;

/// `options` once they are checked (the option sets they hold too), so
/// that no pool is started from options that are out of range.
template <class Options>
Options checked(Options options, const char* what) {
  try {
    validate(options);
  } catch (const UserError& e) {
    fail(e.kind(), what, ": ", e.what());
  }
  return options;
}

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
  // Read by the kernels' thread pool (codegen/c_helpers/thread_pool.c).
  if (options.pin_threads) pool.env.emplace_back("TT_PIN_THREADS", "1");
  return pool;
}

/// The error code a failed worker exchange means for a build or a run.
ErrorCode code_for(const WorkerReply& reply, bool building) {
  switch (reply.status) {
    case WorkerReply::Status::kOk: return ErrorCode::kNoError;
    case WorkerReply::Status::kTimeout:
      return building ? ErrorCode::kBuildTimeout : ErrorCode::kRunTimeout;
    case WorkerReply::Status::kCrashed:
      return building ? ErrorCode::kUnknownError : ErrorCode::kRuntimeError;
    case WorkerReply::Status::kLost:
    case WorkerReply::Status::kNotStarted: return ErrorCode::kDeviceLost;
  }
  return ErrorCode::kUnknownError;
}

/// Asks the pool's worker whether it can take `request`'s task; a kRuntime
/// error naming what it lacks otherwise.
void check_with_worker(WorkerPool& pool, const CheckRequest& request) {
  const std::string& name = pool.options().name;
  WorkerReply reply = pool.run({encode(request)}, std::chrono::minutes(2))[0];
  std::string why;
  if (reply.status != WorkerReply::Status::kOk) {
    if (reply.status == WorkerReply::Status::kNotStarted) fail(ErrorKind::kRuntime, reply.message);
    why = reply.message;
  } else {
    try {
      CheckReply answer = decode<CheckReply>(reply.payload, "check reply");
      why = join(answer.problems, "; ");
    } catch (const UserError& e) {
      // A request the worker cannot even load names what it lacks: an
      // unknown workload, instrument, config option or target kind.
      why = std::string(e.what()) +
            ". Anything registered only in this program must be compiled into "
            "tensortune-worker as well";
    }
  }
  if (!why.empty()) {
    fail(ErrorKind::kRuntime, "the ", name, " cannot take ", request.task.workload_key(), " on ",
         request.task->target.str(), ": ", why);
  }
}

}  // namespace

Handshake hello_handshake() {
  Handshake handshake;
  handshake.request = encode(HelloRequest{});
  handshake.accept = [](const std::string& reply) -> std::string {
    WorkerInfo info;
    try {
      info = decode<WorkerInfo>(reply, "handshake reply");
    } catch (const UserError& e) {
      return "its answer to the handshake is not one this tensortune understands (a worker of "
             "another version, or not a tensortune-worker at all): " +
             std::string(e.what());
    }
    if (info.protocol_version != kProtocolVersion) {
      return "it speaks protocol version " + std::to_string(info.protocol_version) +
             ", this tuner " + std::to_string(kProtocolVersion);
    }
    if (info.build_id != build_id()) {
      return "it was built from other sources (\"" + info.build_id + "\", this tuner is \"" +
             std::string(build_id()) +
             "\"); use the tensortune-worker built with this tensortune, or set "
             "TENSORTUNE_WORKER to it";
    }
    return "";
  };
  return handshake;
}

LocalBuilder::LocalBuilder(LocalBuilderOptions options)
    : options_(checked(std::move(options), "builder options")),
      pool_(builder_pool(options_), hello_handshake()) {}

void LocalBuilder::check(const te::Task& task, const ir::PassContext& context) {
  TT_CHECK(context, kInvalidArgument, "building needs a pass context");
  std::string key = task_key(task) + " " + Hash64(context.hash()).str();
  if (checked_.count(key)) return;
  CheckRequest request;
  request.task = task;
  request.pass_context = context;
  request.workload_hash = workload_hash(task);
  request.build = true;
  check_with_worker(pool_, request);
  checked_.insert(key);
}

std::vector<BuildResult> LocalBuilder::build(const te::Task& task,
                                             const std::vector<schedule::State>& states,
                                             const ir::PassContext& context) {
  check(task, context);
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
  build_ranges(task, states, context, ranges, results, &retry);
  if (!retry.empty()) {
    // One candidate that hangs the compiler or kills the worker must not take
    // the others of its group with it: each gets a request of its own.
    std::vector<std::pair<size_t, size_t>> singles;
    for (auto [begin, end] : retry) {
      for (size_t i = begin; i < end; ++i) singles.emplace_back(i, i + 1);
    }
    build_ranges(task, states, context, singles, results, nullptr);
  }
  for (auto& r : results) r.host = host_name();
  // Never silent: an error of tensortune's own is not the candidate's.
  std::set<std::string> warned;
  for (const auto& r : results) {
    if (r.error_code == ErrorCode::kUnknownError && warned.insert(r.error_message).second) {
      std::fprintf(stderr, "warning: %s: %s\n", pool_.options().name.c_str(),
                   r.error_message.c_str());
    }
  }
  return results;
}

void LocalBuilder::build_ranges(const te::Task& task, const std::vector<schedule::State>& states,
                                const ir::PassContext& context,
                                const std::vector<std::pair<size_t, size_t>>& ranges,
                                std::vector<BuildResult>& results,
                                std::vector<std::pair<size_t, size_t>>* retry) {
  std::vector<std::string> requests;
  size_t largest = 1;
  BuildRequest request;
  request.task = task;
  request.pass_context = context;
  request.cache_dir = options_.cache_dir;
  request.workload_hash = workload_hash(task);
  request.simulate = options_.simulate;
  for (auto [begin, end] : ranges) {
    request.states.assign(states.begin() + begin, states.begin() + end);
    requests.push_back(encode(request));
    largest = std::max(largest, end - begin);
  }
  // A group whose compile fails is compiled again one by one in the worker:
  // twice the time of the group.
  auto timeout = options_.timeout * static_cast<int64_t>(largest > 1 ? 2 * largest : 1);
  std::vector<WorkerReply> replies = pool_.run(requests, timeout);
  Hash64 expected_context(context.hash());
  Hash64 expected_task(structural_hash(task));
  auto expected_nodes = static_cast<int64_t>(post_order(ObjectPtr(task.ptr())).size());
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
      BuildResult bad;
      bad.error_code = ErrorCode::kUnknownError;
      try {
        BuildReply answer = decode<BuildReply>(reply.payload, "build reply");
        if (answer.results.size() != end - begin) {
          bad.error_message = "the build worker replied with " +
                              std::to_string(answer.results.size()) + " results for " +
                              std::to_string(end - begin) + " candidates";
        } else if (!(answer.task_hash == expected_task)) {
          // DESIGN invariant 4: the task (its target's host included) is a value.
          bad.error_message = "the build worker received a different task than was sent (hash " +
                              answer.task_hash.str() + ", sent " + expected_task.str() + ")";
        } else if (answer.task_nodes != expected_nodes) {
          // DESIGN invariant 2: a shared node arrives shared.
          bad.error_message = "the build worker's copy of the task has " +
                              std::to_string(answer.task_nodes) + " distinct nodes, the tuner's " +
                              std::to_string(expected_nodes) + ": sharing was lost on the way";
        } else {
          for (const auto& b : answer.results) part.push_back(*b);
        }
      } catch (const UserError& e) {
        bad.error_message = e.what();
      }
      if (part.empty()) part.assign(end - begin, bad);
      for (auto& b : part) {
        // DESIGN invariant 6: what is measured is built under the tuner's context.
        if (b.error_code == ErrorCode::kNoError && !(b.pass_context_hash == expected_context)) {
          b.error_code = ErrorCode::kUnknownError;
          b.error_message =
              "the build worker lowered under a different PassContext than the tuner's";
        }
      }
    } else {
      BuildResult failed;
      failed.error_code = code_for(reply, true);
      failed.error_message = shorten_message(reply.message);
      failed.build_seconds = reply.seconds / static_cast<double>(end - begin);
      failed.pass_context_hash = expected_context;
      part.assign(end - begin, failed);
    }
    std::move(part.begin(), part.end(), results.begin() + begin);
  }
}

LocalRunner::LocalRunner(LocalRunnerOptions options)
    : options_(checked(std::move(options), "runner options")),
      pool_(runner_pool(options_), hello_handshake()) {
  const RunnerOptions& t = options_.timing;
  int64_t least_ms = static_cast<int64_t>(t.repeat) * (t.min_repeat_ms + t.cooldown_ms);
  TT_CHECK(least_ms < options_.timeout.count(), kInvalidArgument,
           "a run takes at least repeat x (min_repeat_ms + cooldown_ms) = ", least_ms,
           " ms, which does not fit in the run timeout of ", options_.timeout.count(),
           " ms; raise the timeout or lower those");
  timing_ = Ref<RunnerOptions>(make_node<RunnerOptions>(options_.timing));
}

void LocalRunner::check(const te::Task& task) {
  std::string key = task.workload_key();
  if (checked_.count(key)) return;
  CheckRequest request;
  request.task = task;
  request.workload_hash = workload_hash(task);
  check_with_worker(pool_, request);
  checked_.insert(key);
}

void LocalRunner::prepare(const te::Task& task) {
  // Again whenever the worker may be new (a crash, a timeout, recycling): the
  // reference then comes from the cache directory, or is evaluated again, but
  // never inside a candidate's timeout.
  std::string key = task.workload_key();
  if (prepared_key_ == key && prepared_workers_ == pool_.workers_started()) return;
  PrepareRequest request;
  request.task = task;
  request.options = timing_;
  request.workload_hash = workload_hash(task);
  WorkerReply reply = pool_.run({encode(request)}, options_.prepare_timeout)[0];
  std::string why;
  if (reply.status != WorkerReply::Status::kOk) {
    why = reply.message;
  } else {
    try {
      RunOutcome ready = decode<RunOutcome>(reply.payload, "prepare reply");
      if (ready.error_code != ErrorCode::kNoError) why = ready.error_message;
    } catch (const UserError& e) {
      why = e.what();
    }
  }
  // Without the reference no candidate can be checked: stop rather than
  // record every candidate of the task as failed.
  if (!why.empty()) {
    fail(ErrorKind::kRuntime, "cannot prepare the reference outputs of ", key,
         " for --check: ", why);
  }
  prepared_key_ = key;
  prepared_workers_ = pool_.workers_started();
}

std::vector<RunOutcome> LocalRunner::run(const te::Task& task,
                                         const std::vector<BuildResult>& built,
                                         const RunHints& hints) {
  std::vector<RunOutcome> outcomes(built.size());
  std::vector<std::string> requests;
  std::vector<size_t> which;
  RunRequest request;
  request.task = task;
  request.options = timing_;
  request.abandon_above_s = hints.abandon_above_s();
  for (size_t i = 0; i < built.size(); ++i) {
    if (built[i].error_code != ErrorCode::kNoError) {
      outcomes[i] = not_run(built[i]);
      continue;
    }
    if (requests.empty()) request.workload_hash = workload_hash(task);
    request.library = built[i].library;
    request.library_sha256 = built[i].library_sha256;
    request.function = built[i].function;
    request.packed_inputs = built[i].packed_inputs;
    request.packers = built[i].packers;
    request.packed_elements = built[i].packed_elements;
    request.program_hash = built[i].program_hash;
    requests.push_back(encode(request));
    which.push_back(i);
  }
  if (requests.empty()) return outcomes;
  check(task);
  if (options_.timing.check) prepare(task);
  std::vector<WorkerReply> replies = pool_.run(requests, options_.timeout);
  for (size_t r = 0; r < replies.size(); ++r) {
    if (replies[r].status == WorkerReply::Status::kNotStarted)
      fail(ErrorKind::kRuntime, replies[r].message);
    RunOutcome& out = outcomes[which[r]];
    if (replies[r].status == WorkerReply::Status::kOk) {
      try {
        out = decode<RunOutcome>(replies[r].payload, "run reply");
        TT_CHECK(!out.costs.empty() || out.error_code != ErrorCode::kNoError, kParse,
                 "the run reply says NO_ERROR but has no costs");
      } catch (const UserError& e) {
        out = RunOutcome();
        out.error_code = ErrorCode::kUnknownError;
        out.error_message = shorten_message(e.what());
      }
    } else {
      out.error_code = code_for(replies[r], false);
      out.error_message = shorten_message(replies[r].message);
      out.run_seconds = replies[r].seconds;
    }
    out.host = host_name();
  }
  return outcomes;
}

RunOutcome not_run(const BuildResult& built) {
  RunOutcome out;
  out.error_code = built.error_code;
  out.error_message = built.error_message;
  out.host = built.host;
  out.rank = built.rank;
  return out;
}

MeasureResult make_result(const BuildResult& built, const RunOutcome& ran) {
  MeasureResult r;
  r.error_code = ran.error_code;
  r.error_message = shorten_message(ran.error_message);
  r.costs = ran.costs;
  r.build_seconds = built.build_seconds;
  r.run_seconds = ran.run_seconds;
  r.kernel_seconds = ran.kernel_seconds;
  r.timestamp = unix_time_now();
  r.pass_context_hash = built.pass_context_hash;
  r.max_error = ran.max_error;
  r.instruments = built.instruments;
  // A runner that does not say where it ran (a test's) leaves the builder's.
  const bool ran_it = !ran.host.empty();
  r.host = ran_it ? ran.host : built.host;
  r.rank = ran_it ? ran.rank : built.rank;
  return r;
}

std::vector<MeasureResult> measure_candidates(const te::Task& task,
                                              const std::vector<schedule::State>& states,
                                              const ir::PassContext& context, Builder& builder,
                                              Runner& runner, const ResultCallback& on_result,
                                              const RunHints& hints) {
  std::vector<BuildResult> built = builder.build(task, states, context);
  std::vector<MeasureResult> results(states.size());
  // The best so far includes this batch's: a first batch, which knows no
  // best before it, abandons hopeless candidates too.
  RunHints now = hints;
  auto report = [&](size_t i, const RunOutcome& ran) {
    results[i] = make_result(built[i], ran);
    if (results[i].ok() && (now.best_s <= 0 || results[i].median_cost() < now.best_s)) {
      now.best_s = results[i].median_cost();
    }
    if (on_result) on_result(MeasureInput{task, states[i]}, results[i]);
  };
  // Failed builds are reported at once, and each run as it ends: an
  // interrupted tuner loses at most the candidate being run.
  for (size_t i = 0; i < states.size(); ++i) {
    if (built[i].error_code != ErrorCode::kNoError) report(i, not_run(built[i]));
  }
  std::vector<size_t> good;
  std::vector<BuildResult> to_run;
  for (size_t i = 0; i < states.size(); ++i) {
    if (built[i].error_code != ErrorCode::kNoError) continue;
    good.push_back(i);
    to_run.push_back(built[i]);
  }
  runner.run_each(task, to_run, now,
                  [&](size_t k, const RunOutcome& ran) { report(good[k], ran); });
  return results;
}

}  // namespace tensortune::measure
