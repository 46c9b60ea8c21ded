/// \file
/// A pool of tensortune-worker processes that answers framed requests.
///
/// Workers are started with posix_spawn (support/subprocess.h), each in a
/// process group of its own, and reused across requests. Each worker slot
/// has a thread of its own that lives as long as the pool: it starts the
/// worker (so the worker's parent-death signal, which Linux ties to the
/// starting thread, fires only when the pool goes), sends requests and reads
/// replies. A request that runs past its timeout gets its worker's whole
/// group killed (the worker and whatever it started, e.g. a compiler); a
/// worker that dies is reported with its exit status and stderr and started
/// again on the next request. Workers are recycled after a number of
/// requests. Each worker limits its own address space (setrlimit) and asks
/// to be told when its parent dies (prctl), then kills its whole process
/// group: neither a runaway candidate nor a `kill -9` of the tuner leaves a
/// worker, or a compiler a worker was running, behind. A pool may require a
/// handshake of every new worker before it is given work.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "tensortune/object/object.h"

namespace tensortune::measure {

/// How a pool starts and recycles its workers; its limits are flags of
/// measure and tune.
struct WorkerPoolOptions : Object {
  int64_t num_workers = 1;
  /// The worker program; empty takes $TENSORTUNE_WORKER, then
  /// tensortune-worker next to the running executable, then on PATH.
  std::string worker_path;
  /// Address-space limit per worker (RLIMIT_AS); 0 for none.
  int64_t memory_limit_mb = 8192;
  /// Requests a worker serves before it is replaced; 0 never replaces it.
  int64_t max_requests_per_worker = 200;
  /// Extra environment of the workers (e.g. TT_PIN_THREADS for pinned runs).
  std::vector<std::pair<std::string, std::string>> env;
  /// A short name for messages ("builder", "runner").
  std::string name = "worker";
  /// How long a new worker may take to answer the handshake.
  std::chrono::milliseconds handshake_timeout{std::chrono::seconds(30)};

  TT_NODE(WorkerPoolOptions, "measure.WorkerPoolOptions")
  static void declare(FieldList<WorkerPoolOptions>& f);
};

/// What a pool sends every worker as soon as it starts, before any request,
/// when `request` is not empty. `accept` gets the reply and returns "" to
/// accept the worker, or why it is refused: then the worker is killed and the
/// request it was started for is answered kNotStarted with that reason (so no
/// candidate is charged for a worker that cannot serve it).
struct Handshake {
  std::string request;
  std::function<std::string(const std::string& reply)> accept;
};

/// The answer to one request.
struct WorkerReply {
  enum class Status {
    kOk,          ///< payload holds the reply
    kTimeout,     ///< the request ran past its timeout; the worker was killed
    kCrashed,     ///< the worker died during the request (signal or exit)
    kLost,        ///< the worker was killed by someone else, or the pool failed around it
    kNotStarted,  ///< the worker program could not be started
  };
  Status status = Status::kOk;
  std::string payload;  ///< the reply (kOk)
  std::string message;  ///< what happened otherwise, with the worker's stderr
  int signal = 0;       ///< the signal that ended the worker (kCrashed, kLost)
  double seconds = 0;   ///< from sending the request to the answer (queueing excluded)
};

/// Finds the worker program as WorkerPoolOptions::worker_path describes.
std::string find_worker_program();

class WorkerPool {
 public:
  explicit WorkerPool(WorkerPoolOptions options, Handshake handshake = {});
  /// Kills every worker's group and reaps them.
  ~WorkerPool();
  WorkerPool(const WorkerPool&) = delete;
  WorkerPool& operator=(const WorkerPool&) = delete;

  /// Answers every request, at most num_workers at a time, in order of the
  /// input. `timeout` counts from when a worker took the request, so time
  /// spent queueing for a free worker is never charged to it.
  std::vector<WorkerReply> run(const std::vector<std::string>& requests,
                               std::chrono::milliseconds timeout);

  /// Process ids of the workers running now.
  std::vector<pid_t> worker_pids() const;
  /// Workers started so far (first starts, restarts and recycling).
  int64_t workers_started() const;
  const WorkerPoolOptions& options() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

/// Installs SIGINT, SIGTERM and SIGHUP handlers that kill the process group
/// of every live pool worker and then end the process with the same signal,
/// so an interrupted tuner leaves no workers behind. A signal the process
/// ignores (nohup) stays ignored. Idempotent.
void install_interrupt_cleanup();

}  // namespace tensortune::measure
