/// \file
/// Tuning across the ranks of an MPI job (docs/mpi.md). Under `mpirun -n N
/// tensortune tune ...` rank 0 tunes (search, cost model, record log) and
/// every other rank serves its builds and runs: a serving rank holds a
/// LocalBuilder and, on the first ranks of each host, a LocalRunner, so each
/// candidate is still built and timed in a spawned worker of that rank.
///
/// What crosses a rank boundary is a reflected value (object/serialize.h),
/// as between a tuner and its workers; the handshake (protocol version and
/// build identity) runs per rank before any work. Rank 0 calls MPI from one
/// thread, a serving rank from its main thread; a serving rank reports that
/// it is alive at least every second, so one that is killed or stopped is
/// found out within MpiOptions::rank_timeout and its work goes to another.
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "tensortune/measure/measurer.h"

namespace tensortune::measure {

/// Whether this tensortune was built with MPI (CMake found it).
bool mpi_built();
/// Whether this process was started by an MPI launcher (mpirun, srun), as
/// its environment says; only then is MPI initialised at all.
bool launched_by_mpi();

/// How rank 0 uses the other ranks; its fields are flags of tune.
struct MpiOptions : Object {
  /// Ranks of each host that time candidates (one worker each), so that two
  /// timings never share a host unless asked; the host's other cores build.
  int64_t runners_per_host = 1;
  /// A rank with work that has not been heard of for this long is lost: its
  /// work goes to another rank and it gets no more.
  std::chrono::milliseconds rank_timeout{std::chrono::seconds(10)};
  /// The user named the target: runner hosts with different CPUs may time
  /// candidates for it (otherwise such a job is refused).
  bool target_given = false;

  TT_NODE(MpiOptions, "measure.MpiOptions")
  static void declare(FieldList<MpiOptions>& f);
};

/// The candidates per round of a job with `build_workers` in all, when the
/// user did not choose: one per build worker (at least `at_least`, at most
/// 1024), so that every worker has work and rank 0's search, which costs
/// about the same per round whatever its size, is spread over more
/// candidates (bench/mpi_projection.cc found this the first bottleneck).
int64_t cluster_batch_size(int64_t at_least, int64_t build_workers);

/// One rank as rank 0 sees it after the handshake.
struct RankSummary {
  int rank = 0;
  std::string host;
  std::string cpu;  ///< the host's native target
  int64_t cores = 0;
  int64_t build_workers = 0;
  bool runner = false;
  bool lost = false;
};

/// This process's part in an MPI job: MPI is initialised on construction
/// and finalised on destruction. Throws a kRuntime error when tensortune
/// was built without MPI.
class MpiJob {
 public:
  MpiJob();
  ~MpiJob();
  MpiJob(const MpiJob&) = delete;
  MpiJob& operator=(const MpiJob&) = delete;

  int rank() const { return rank_; }
  int size() const { return size_; }
  /// On a rank other than 0: serves rank 0 until it says stop; the exit code.
  int serve();
  /// Leave without MPI_Finalize, which could wait forever for a lost rank
  /// (MpiCluster calls it); mpirun then ends the job.
  void skip_finalize() { finalize_ = false; }

 private:
  int rank_ = 0;
  int size_ = 1;
  bool finalize_ = true;
};

/// Rank 0's builder and runner over the other ranks of `job`.
class MpiCluster {
 public:
  /// Handshakes with every other rank and gives each its role; a kRuntime
  /// error naming the ranks and hosts when one is refused (another protocol
  /// version or build) or when runner hosts differ without options.target_given.
  MpiCluster(MpiJob& job, const LocalBuilderOptions& build, const LocalRunnerOptions& run,
             const MpiOptions& options);
  /// Tells every rank still there to stop.
  ~MpiCluster();
  MpiCluster(const MpiCluster&) = delete;
  MpiCluster& operator=(const MpiCluster&) = delete;

  Builder& builder();
  Runner& runner();
  /// Every serving rank, in rank order.
  std::vector<RankSummary> ranks() const;
  /// The native target of the runner hosts (all equal unless target_given).
  std::string runner_cpu() const;
  /// Ends the job with exit code `code` when a rank was lost, since
  /// MPI_Finalize could wait for it forever: the ranks left are stopped
  /// without finalising, then MPI_Abort, or under mpirun --enable-recovery
  /// (where Open MPI 4.1's MPI_Abort ends rank 0 alone) an exit of rank 0.
  [[noreturn]] void end_after_loss(int code);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace tensortune::measure
