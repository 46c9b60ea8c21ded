#include "tensortune/measure/mpi.h"

#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <filesystem>
#include <future>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <thread>

#include "tensortune/codegen/module.h"
#include "tensortune/ir/target.h"
#include "tensortune/measure/rank_protocol.h"
#include "tensortune/object/serialize.h"
#include "tensortune/support/build_info.h"
#include "tensortune/support/files.h"
#include "tensortune/support/hash.h"
#include "tensortune/support/host_cpu.h"
#include "tensortune/support/strings.h"

#if TENSORTUNE_WITH_MPI
// The C interface only: the C++ bindings are deprecated and not linked.
#define OMPI_SKIP_MPICXX 1
#define MPICH_SKIP_MPICXX 1
#include <mpi.h>
#endif

namespace tensortune::measure {

void MpiOptions::declare(FieldList<MpiOptions>& f) {
  f.def("runners_per_host", &MpiOptions::runners_per_host)
      .option("runners-per-host",
              "under mpirun: ranks of each host that time candidates, one at a time each")
      .range(1, 4096)
      .def("rank_timeout", &MpiOptions::rank_timeout)
      .option("rank-timeout",
              "under mpirun: seconds a rank with work may go unheard before its work goes to "
              "another rank")
      .range(2, 86400)
      .def("target_given", &MpiOptions::target_given);
}
TT_REGISTER_NODE(MpiOptions);

bool mpi_built() { return TENSORTUNE_WITH_MPI != 0; }

int64_t cluster_batch_size(int64_t at_least, int64_t build_workers) {
  return std::clamp<int64_t>(build_workers, at_least, std::max<int64_t>(at_least, 1024));
}

bool launched_by_mpi() {
  // Open MPI's mpirun, and PMIx/PMI launchers (Slurm's srun, MPICH's hydra).
  for (const char* name : {"OMPI_COMM_WORLD_SIZE", "PMIX_RANK", "PMI_RANK", "PMI_SIZE"}) {
    if (std::getenv(name)) return true;
  }
  return false;
}

// ---------------------------------------------------------------------------
// The messages (rank_protocol.h)

void RankInfo::declare(FieldList<RankInfo>& f) {
  f.def("protocol_version", &RankInfo::protocol_version)
      .def("build_id", &RankInfo::build_id)
      .def("rank", &RankInfo::rank)
      .def("host", &RankInfo::host)
      .def("cpu", &RankInfo::cpu)
      .def("cores", &RankInfo::cores);
}
TT_REGISTER_NODE(RankInfo);

void RankConfig::declare(FieldList<RankConfig>& f) {
  f.def("build", &RankConfig::build)
      .def("run", &RankConfig::run)
      .def("build_workers", &RankConfig::build_workers)
      .range(0, 1 << 20)
      .def("runner", &RankConfig::runner);
}
TT_REGISTER_NODE(RankConfig);

void RankCheck::declare(FieldList<RankCheck>& f) {
  f.def("task", &RankCheck::task)
      .def("pass_context", &RankCheck::pass_context)
      .def("build", &RankCheck::build)
      .validate([](const RankCheck& r) {
        TT_CHECK(r.task && (!r.build || r.pass_context), kInvalidArgument,
                 "a rank check needs a task, and a pass context to build");
      });
}
TT_REGISTER_NODE(RankCheck);

void ShippedLibrary::declare(FieldList<ShippedLibrary>& f) {
  f.def("sha256", &ShippedLibrary::sha256).def("base64", &ShippedLibrary::base64);
}
TT_REGISTER_NODE(ShippedLibrary);

void RankBuild::declare(FieldList<RankBuild>& f) {
  f.def("task", &RankBuild::task)
      .def("states", &RankBuild::states)
      .def("pass_context", &RankBuild::pass_context)
      .def("ship_libraries", &RankBuild::ship_libraries)
      .validate([](const RankBuild& r) {
        TT_CHECK(r.task && r.pass_context, kInvalidArgument,
                 "a rank build needs a task and a pass context");
        for (const auto& s : r.states) TT_CHECK(s, kInvalidArgument, "a null state");
      });
}
TT_REGISTER_NODE(RankBuild);

void RankBuildReply::declare(FieldList<RankBuildReply>& f) {
  f.def("results", &RankBuildReply::results)
      .def("libraries", &RankBuildReply::libraries)
      .validate([](const RankBuildReply& r) {
        for (const auto& b : r.results) TT_CHECK(b, kInvalidArgument, "a null build result");
        for (const auto& l : r.libraries) TT_CHECK(l, kInvalidArgument, "a null library");
      });
}
TT_REGISTER_NODE(RankBuildReply);

void RankRun::declare(FieldList<RankRun>& f) {
  f.def("task", &RankRun::task)
      .def("built", &RankRun::built)
      .def("best_s", &RankRun::best_s)
      .def("abandon_factor", &RankRun::abandon_factor)
      .def("libraries", &RankRun::libraries)
      .validate([](const RankRun& r) {
        TT_CHECK(r.task, kInvalidArgument, "a rank run needs a task");
        for (const auto& b : r.built) TT_CHECK(b, kInvalidArgument, "a null build result");
        for (const auto& l : r.libraries) TT_CHECK(l, kInvalidArgument, "a null library");
      });
}
TT_REGISTER_NODE(RankRun);

void RankRunReply::declare(FieldList<RankRunReply>& f) {
  f.def("outcomes", &RankRunReply::outcomes).validate([](const RankRunReply& r) {
    for (const auto& o : r.outcomes) TT_CHECK(o, kInvalidArgument, "a null run outcome");
  });
}
TT_REGISTER_NODE(RankRunReply);

void RankStop::declare(FieldList<RankStop>& f) {
  f.def("reason", &RankStop::reason).def("finalize", &RankStop::finalize);
}
TT_REGISTER_NODE(RankStop);

#if TENSORTUNE_WITH_MPI

namespace {

using Clock = std::chrono::steady_clock;

std::string frame(uint64_t id, const std::string& payload) {
  std::string out(sizeof id, '\0');
  std::memcpy(out.data(), &id, sizeof id);
  return out + payload;
}

std::pair<uint64_t, std::string_view> unframe(const std::string& message) {
  TT_CHECK(message.size() >= sizeof(uint64_t), kParse, "an MPI message of ", message.size(),
           " bytes is shorter than its 8-byte header");
  uint64_t id = 0;
  std::memcpy(&id, message.data(), sizeof id);
  return {id, std::string_view(message).substr(sizeof id)};
}

/// What a serving rank sends back for a request it could not serve.
std::string request_error(const std::exception& e) {
  RequestError error;
  if (auto* user = dynamic_cast<const UserError*>(&e)) {
    error.kind = std::string(error_kind_name(user->kind()));
  } else {
    error.kind = "internal";
  }
  error.message = e.what();
  return encode(error);
}

/// Where a runner writes libraries built on other hosts.
std::string shipped_dir(const LocalRunnerOptions& run) {
  std::string base =
      run.timing.cache_dir.empty() ? codegen::default_cache_dir() : run.timing.cache_dir;
  std::string dir = (std::filesystem::path(base) / "mpi-libraries").string();
  ensure_private_dir(dir, "the directory of libraries from other hosts");
  return dir;
}

}  // namespace

namespace {

enum Tag : int { kRequestTag = 1, kReplyTag = 2, kAliveTag = 3 };

/// Whether mpirun runs with --enable-recovery: a rank's death does not end the job.
bool recovery_mode() {
  const char* value = std::getenv("OMPI_MCA_orte_enable_recovery");
  return value && std::string(value) != "0" && std::string(value) != "false";
}

/// How long a serving rank waits without a word from rank 0 (which says it
/// is alive every second while it waits on the ranks, and is silent only
/// while it searches) before it concludes that rank 0 is gone.
constexpr std::chrono::minutes kOrphanTimeout{10};

/// Every MPI error is returned, never fatal: a lost peer is a fault to handle.
void check_mpi(int code, const char* what) {
  if (code == MPI_SUCCESS) return;
  char text[MPI_MAX_ERROR_STRING];
  int length = 0;
  MPI_Error_string(code, text, &length);
  fail(ErrorKind::kRuntime, "MPI ", what, " failed: ", std::string(text, length));
}

/// One message waiting for its source and tag, received whole.
std::optional<std::pair<MPI_Status, std::string>> receive_if_any(int source) {
  int ready = 0;
  MPI_Status status;
  check_mpi(MPI_Iprobe(source, MPI_ANY_TAG, MPI_COMM_WORLD, &ready, &status), "probe");
  if (!ready) return std::nullopt;
  int bytes = 0;
  MPI_Get_count(&status, MPI_BYTE, &bytes);
  std::string data(static_cast<size_t>(bytes), '\0');
  check_mpi(MPI_Recv(data.data(), bytes, MPI_BYTE, status.MPI_SOURCE, status.MPI_TAG,
                     MPI_COMM_WORLD, MPI_STATUS_IGNORE),
            "receive");
  return std::make_pair(status, std::move(data));
}

/// A send in flight, and its buffer, which must outlive it.
struct Sending {
  MPI_Request request = MPI_REQUEST_NULL;
  std::unique_ptr<std::string> data;
  int rank = 0;
  Clock::time_point since;
};

/// The sends of one process: each started at once, completed as the peer
/// takes it. A send to a rank that never takes it (stopped, dead) is left
/// behind with its buffer, never waited for.
class Sends {
 public:
  void start(int rank, int tag, std::string data) {
    TT_CHECK(data.size() < static_cast<size_t>(1) << 31, kRuntime, "an MPI message of ",
             data.size(), " bytes is too large to send");
    Sending s;
    s.data = std::make_unique<std::string>(std::move(data));
    s.rank = rank;
    s.since = Clock::now();
    if (MPI_Isend(s.data->data(), static_cast<int>(s.data->size()), MPI_BYTE, rank, tag,
                  MPI_COMM_WORLD, &s.request) != MPI_SUCCESS) {
      // A peer that is gone: found stuck by the next progress(), and lost.
      s.request = MPI_REQUEST_NULL;
      s.since = Clock::time_point::min();
      failed_.push_back(std::move(s));
      return;
    }
    pending_.push_back(std::move(s));
  }
  /// Completes what the peers took; returns the ranks with a send older than `limit`.
  std::set<int> progress(std::chrono::milliseconds limit) {
    std::set<int> stuck;
    for (const Sending& s : failed_) stuck.insert(s.rank);
    failed_.clear();
    for (auto it = pending_.begin(); it != pending_.end();) {
      int done = 0;
      MPI_Test(&it->request, &done, MPI_STATUS_IGNORE);
      if (done) {
        it = pending_.erase(it);
        continue;
      }
      if (Clock::now() - it->since > limit) stuck.insert(it->rank);
      ++it;
    }
    return stuck;
  }
  /// Gives up on the sends to `rank` (their buffers are kept: MPI may still read them).
  void abandon(int rank) {
    for (auto it = pending_.begin(); it != pending_.end();) {
      if (it->rank == rank) {
        abandoned_.push_back(std::move(*it));
        it = pending_.erase(it);
      } else {
        ++it;
      }
    }
  }
  /// Waits up to `limit` for every send still pending; whether all completed.
  bool drain(std::chrono::milliseconds limit) {
    auto start = Clock::now();
    while (!pending_.empty() && Clock::now() - start < limit) {
      progress(limit);
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    return pending_.empty();
  }

 private:
  std::deque<Sending> pending_;
  std::deque<Sending> abandoned_;
  std::deque<Sending> failed_;

 public:
  Sends() = default;
  Sends(const Sends&) = delete;
  Sends& operator=(const Sends&) = delete;
  /// MPI may still read the buffers of sends not completed: they are left
  /// to the end of the process.
  ~Sends() {
    for (auto* list : {&pending_, &abandoned_}) {
      for (Sending& s : *list) (void)s.data.release();
    }
  }
};

}  // namespace

MpiJob::MpiJob() {
  int initialized = 0;
  MPI_Initialized(&initialized);
  if (!initialized) {
    int provided = 0;
    // Only one thread of a process calls MPI (see mpi.h).
    check_mpi(MPI_Init_thread(nullptr, nullptr, MPI_THREAD_FUNNELED, &provided), "init");
    TT_CHECK(provided >= MPI_THREAD_FUNNELED, kRuntime,
             "this MPI library does not allow threads beside the one calling MPI "
             "(MPI_THREAD_FUNNELED), which tensortune's ranks need");
  }
  // mpirun binds each rank to a core or a socket by default; tensortune
  // places its own workers (one runner per host, builders on the cores
  // left), so a rank and the workers it starts may use the whole host, as
  // far as its cgroup allows (after MPI_Init, which may bind too,
  // and before host_cpu() is first probed).
  cpu_set_t all;
  CPU_ZERO(&all);
  long online = sysconf(_SC_NPROCESSORS_ONLN);
  for (long c = 0; c < online && c < CPU_SETSIZE; ++c) CPU_SET(static_cast<int>(c), &all);
  sched_setaffinity(0, sizeof all, &all);
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
  MPI_Comm_size(MPI_COMM_WORLD, &size_);
}

MpiJob::~MpiJob() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  // With a rank lost, MPI_Finalize could wait for it forever: leaving
  // without it makes mpirun end the job.
  if (!finalized && finalize_) MPI_Finalize();
}

// ---------------------------------------------------------------------------
// A serving rank

namespace {

/// A serving rank's builder and runner, and the requests they are working on.
class RankService {
 public:
  explicit RankService(int rank) : rank_(rank) {}

  /// The reply to `request`, or nullopt when it is answered later (by
  /// finished()); throws for a request that cannot be served.
  std::optional<std::string> take(uint64_t id, const ObjectPtr& request) {
    if (std::dynamic_pointer_cast<const HelloRequest>(request)) {
      RankInfo info;
      info.protocol_version = kProtocolVersion;
      info.build_id = std::string(build_id());
      info.rank = rank_;
      info.host = host_name();
      info.cpu = ir::Target::parse("native").str();
      info.cores = host_cpu().cores;
      return encode(info);
    }
    if (auto config = std::dynamic_pointer_cast<const RankConfig>(request)) {
      config_ = *config;
      if (config->build_workers > 0) {
        LocalBuilderOptions build = config->build;
        build.parallelism = config->build_workers;
        builder_ = std::make_unique<LocalBuilder>(build);
      }
      if (config->runner) runner_ = std::make_unique<LocalRunner>(config->run);
      return encode(CheckReply{});
    }
    if (auto check = std::dynamic_pointer_cast<const RankCheck>(request)) {
      RankCheck c = *check;
      start(id, c.build, [this, c] {
        CheckReply reply;
        try {
          if (c.build) {
            need(builder_.get(), "build").check(c.task, c.pass_context);
          } else {
            need(runner_.get(), "run").check(c.task);
          }
        } catch (const UserError& e) {
          reply.problems.push_back(e.what());
        }
        return encode(reply);
      });
      return std::nullopt;
    }
    if (auto build = std::dynamic_pointer_cast<const RankBuild>(request)) {
      RankBuild b = *build;
      start(id, true, [this, b] { return encode(serve_build(b)); });
      return std::nullopt;
    }
    if (auto run = std::dynamic_pointer_cast<const RankRun>(request)) {
      RankRun r = *run;
      start(id, false, [this, r] { return encode(serve_run(r)); });
      return std::nullopt;
    }
    fail(ErrorKind::kParse, "a serving rank cannot take a request of type ", request->type_key());
  }

  /// Replies finished since the last call, with their request ids.
  std::vector<std::pair<uint64_t, std::string>> finished() {
    std::vector<std::pair<uint64_t, std::string>> out;
    for (auto it = working_.begin(); it != working_.end();) {
      if (it->second.wait_for(std::chrono::seconds(0)) != std::future_status::ready) {
        ++it;
        continue;
      }
      try {
        out.emplace_back(it->first, it->second.get());
      } catch (const std::exception& e) {
        out.emplace_back(it->first, request_error(e));
      }
      it = working_.erase(it);
    }
    return out;
  }

  bool idle() const { return working_.empty(); }

 private:
  template <class T>
  static T& need(T* part, const char* what) {
    TT_CHECK(part, kRuntime, "this rank was given no ", what, " work to do");
    return *part;
  }

  /// Runs `work` on a thread of its own, after any earlier work of the same
  /// kind (builds on one lane, runs on another).
  void start(uint64_t id, bool build_lane, std::function<std::string()> work) {
    std::mutex& lane = build_lane ? build_lane_ : run_lane_;
    working_.emplace(id, std::async(std::launch::async, [&lane, work = std::move(work)] {
                       std::lock_guard<std::mutex> hold(lane);
                       return work();
                     }));
  }

  RankBuildReply serve_build(const RankBuild& request) {
    std::vector<BuildResult> built =
        need(builder_.get(), "build").build(request.task, request.states, request.pass_context);
    RankBuildReply reply;
    std::set<std::string> shipped;
    for (BuildResult& b : built) {
      b.rank = rank_;
      if (request.ship_libraries && !b.library.empty() && shipped.insert(b.library_sha256).second) {
        std::optional<std::string> bytes = read_file_if_exists(b.library);
        TT_CHECK(bytes && sha256_hex(*bytes) == b.library_sha256, kIO, "the library ", b.library,
                 " that this rank just built cannot be read back whole");
        auto library = make_node<ShippedLibrary>();
        library->sha256 = b.library_sha256;
        library->base64 = base64_encode(*bytes);
        reply.libraries.emplace_back(std::move(library));
      }
      reply.results.emplace_back(make_node<BuildResult>(std::move(b)));
    }
    return reply;
  }

  RankRunReply serve_run(const RankRun& request) {
    LocalRunner& runner = need(runner_.get(), "run");
    // Libraries built on other hosts are written here first, checked
    // against their hash: the run worker checks it again before loading.
    std::map<std::string, std::string> written;
    for (const auto& library : request.libraries) {
      std::string bytes = base64_decode(library->base64);
      TT_CHECK(sha256_hex(bytes) == library->sha256, kParse,
               "a library sent by rank 0 does not match its SHA-256 ", library->sha256);
      std::string path =
          (std::filesystem::path(shipped_dir(config_.run)) / (library->sha256 + ".so")).string();
      if (!std::filesystem::exists(path)) write_file_atomically(path, bytes);
      written[library->sha256] = path;
    }
    std::vector<BuildResult> built;
    for (const auto& b : request.built) {
      built.push_back(*b);
      if (auto it = written.find(built.back().library_sha256); it != written.end()) {
        built.back().library = it->second;
      }
    }
    RunHints hints;
    hints.best_s = request.best_s;
    hints.abandon_factor = request.abandon_factor;
    RankRunReply reply;
    for (RunOutcome& o : runner.run(request.task, built, hints)) {
      o.rank = rank_;
      reply.outcomes.emplace_back(make_node<RunOutcome>(std::move(o)));
    }
    return reply;
  }

  int rank_;
  RankConfig config_;
  std::unique_ptr<LocalBuilder> builder_;
  std::unique_ptr<LocalRunner> runner_;
  std::mutex build_lane_, run_lane_;
  std::map<uint64_t, std::future<std::string>> working_;
};

}  // namespace

int MpiJob::serve() {
  TT_CHECK(rank_ != 0, kInternal, "rank 0 tunes; it does not serve");
  RankService service(rank_);
  Sends sends;
  auto last_alive = Clock::now() - std::chrono::hours(1);
  std::string stop_reason;
  bool stopping = false, finalize = true;
  auto last_from_zero = Clock::now();
  // Plain mpirun ends the job when rank 0 dies; only under recovery can a
  // serving rank outlive it.
  const bool recovery = recovery_mode();
  while (!stopping || !service.idle()) {
    bool busy = false;
    if (!stopping) {
      if (auto message = receive_if_any(0)) {
        busy = true;
        last_from_zero = Clock::now();
        auto& [status, data] = *message;
        if (status.MPI_TAG != kRequestTag) continue;
        uint64_t id = 0;
        std::string reply;
        try {
          auto [request_id, payload] = unframe(data);
          id = request_id;
          ObjectPtr request = load_string(payload);
          if (auto stop = std::dynamic_pointer_cast<const RankStop>(request)) {
            stopping = true;
            stop_reason = stop->reason;
            finalize = stop->finalize;
            continue;
          }
          if (auto answer = service.take(id, request)) reply = *answer;
        } catch (const std::exception& e) {
          reply = request_error(e);
        }
        if (!reply.empty()) sends.start(0, kReplyTag, frame(id, reply));
      }
    }
    for (auto& [id, reply] : service.finished()) {
      busy = true;
      sends.start(0, kReplyTag, frame(id, reply));
    }
    // Alive at least every second, busy or not (mpi.h).
    if (Clock::now() - last_alive > std::chrono::milliseconds(500)) {
      sends.start(0, kAliveTag, std::string());
      last_alive = Clock::now();
    }
    sends.progress(std::chrono::hours(1));
    if (recovery && Clock::now() - last_from_zero > kOrphanTimeout) {
      // Rank 0 is gone and mpirun (--enable-recovery) did not end the job.
      std::fprintf(stderr, "rank %d: no word from rank 0 for %lld s: leaving\n", rank_,
                   static_cast<long long>(
                       std::chrono::duration_cast<std::chrono::seconds>(kOrphanTimeout).count()));
      std::fflush(stderr);
      std::_Exit(1);
    }
    if (!busy) std::this_thread::sleep_for(std::chrono::microseconds(500));
  }
  sends.drain(std::chrono::seconds(10));
  if (!stop_reason.empty()) {
    std::fprintf(stderr, "rank %d: stopped by rank 0: %s\n", rank_, stop_reason.c_str());
  }
  const int code = stop_reason.empty() ? 0 : 1;
  if (!finalize) {
    std::fflush(stderr);
    std::_Exit(code);
  }
  return code;
}

// ---------------------------------------------------------------------------
// Rank 0

namespace {

struct Rank {
  RankSummary summary;
  Clock::time_point last_heard;
  bool building = false;  ///< a RankBuild or build check in flight
  bool running = false;   ///< a RankRun or run check in flight
};

/// A library a rank built, kept for runners on other hosts.
struct KeptLibrary {
  std::string base64;
  std::string host;
};

}  // namespace

struct MpiCluster::Impl {
  MpiJob* job = nullptr;
  MpiOptions options;
  LocalBuilderOptions build;
  LocalRunnerOptions run;
  std::vector<Rank> ranks;  ///< index = rank; ranks[0] is this one
  Sends sends;
  uint64_t next_id = 1;
  std::map<uint64_t, int> waiting;               ///< request id -> rank
  std::map<uint64_t, std::string> replies;       ///< request id -> payload
  std::map<std::string, KeptLibrary> libraries;  ///< by SHA-256
  std::deque<std::string> library_order;
  bool ship_libraries = false;
  std::string runner_cpu;
  std::set<std::string> build_checked, run_checked;

  class ClusterBuilder;
  class ClusterRunner;
  std::unique_ptr<Builder> builder;
  std::unique_ptr<Runner> runner;

  std::string where(int rank) const {
    return "rank " + std::to_string(rank) + " on " + ranks[rank].summary.host;
  }

  uint64_t send(int rank, const Object& message) {
    uint64_t id = next_id++;
    sends.start(rank, kRequestTag, frame(id, encode(message)));
    waiting[id] = rank;
    if (ranks[rank].last_heard < Clock::now()) ranks[rank].last_heard = Clock::now();
    return id;
  }

  Clock::time_point last_alive;

  /// Forgets what earlier calls left in flight (a call that ended in an
  /// error): each Builder or Runner call starts with every live rank free.
  void forget_in_flight() {
    for (Rank& r : ranks) r.building = r.running = false;
    waiting.clear();
    replies.clear();
  }

  bool any_lost() const {
    return std::any_of(ranks.begin(), ranks.end(), [](const Rank& r) { return r.summary.lost; });
  }

  /// Tells every rank still there to stop (why, when it is a failure). With
  /// a rank lost none of them finalises, this one included (MpiJob).
  void stop_all(const std::string& reason) {
    RankStop stop;
    stop.reason = reason;
    stop.finalize = !any_lost();
    for (size_t r = 1; r < ranks.size(); ++r) {
      if (!ranks[r].summary.lost)
        sends.start(static_cast<int>(r), kRequestTag, frame(0, encode(stop)));
    }
    sends.drain(std::chrono::seconds(10));
    if (!stop.finalize) job->skip_finalize();
  }

  /// Receives whatever has arrived; tells the ranks that rank 0 is alive.
  void poll() {
    if (Clock::now() - last_alive > std::chrono::seconds(1)) {
      for (size_t r = 1; r < ranks.size(); ++r) {
        if (!ranks[r].summary.lost) sends.start(static_cast<int>(r), kAliveTag, std::string());
      }
      last_alive = Clock::now();
    }
    while (auto message = receive_if_any(MPI_ANY_SOURCE)) {
      auto& [status, data] = *message;
      int from = status.MPI_SOURCE;
      if (from <= 0 || from >= static_cast<int>(ranks.size()) || ranks[from].summary.lost) continue;
      ranks[from].last_heard = Clock::now();
      if (status.MPI_TAG != kReplyTag) continue;
      try {
        auto [id, payload] = unframe(data);
        auto it = waiting.find(id);
        // A reply to a request given up on (its rank was lost, then came
        // back) is dropped: that work was given to another rank.
        if (it == waiting.end() || it->second != from) continue;
        waiting.erase(it);
        replies[id] = std::string(payload);
      } catch (const UserError& e) {
        std::fprintf(stderr, "warning: %s sent a message that is not one: %s\n",
                     where(from).c_str(), e.what());
      }
    }
  }

  /// Marks `rank` lost and forgets its requests; the caller re-queues them.
  void lose(int rank, const std::string& why) {
    Rank& r = ranks[rank];
    if (r.summary.lost) return;
    r.summary.lost = true;
    r.building = r.running = false;
    sends.abandon(rank);
    for (auto it = waiting.begin(); it != waiting.end();) {
      it = it->second == rank ? waiting.erase(it) : std::next(it);
    }
    std::fprintf(stderr, "warning: %s is lost (%s); its work goes to the other ranks\n",
                 where(rank).c_str(), why.c_str());
  }

  /// Waits until one of `ids` is answered or its rank is lost; returns the
  /// ids answered (in `replies`) and lost (no longer in `waiting`).
  void wait_any(const std::vector<uint64_t>& ids) {
    auto any_done = [&] {
      for (uint64_t id : ids) {
        if (replies.count(id) || !waiting.count(id)) return true;
      }
      return false;
    };
    while (true) {
      poll();
      if (any_done()) return;
      auto now = Clock::now();
      for (int rank : sends.progress(options.rank_timeout)) lose(rank, "it takes no messages");
      for (uint64_t id : ids) {
        auto it = waiting.find(id);
        if (it == waiting.end()) continue;
        if (now - ranks[it->second].last_heard > options.rank_timeout) {
          lose(it->second,
               "not heard of for " +
                   format_double(std::chrono::duration<double>(options.rank_timeout).count()) +
                   " s");
        }
      }
      if (any_done()) return;
      std::this_thread::sleep_for(std::chrono::microseconds(200));
    }
  }

  /// `payload` from `rank` decoded as a T; an error names the rank.
  template <class T>
  T decode_from(int rank, const std::string& payload, const char* what) const {
    try {
      return decode<T>(payload, what);
    } catch (const UserError& e) {
      fail(e.kind(), where(rank), ": ", e.what());
    }
  }

  /// The reply to `id`, taken; nullopt when its rank was lost.
  std::optional<std::string> take_reply(uint64_t id) {
    auto it = replies.find(id);
    if (it == replies.end()) return std::nullopt;
    std::string payload = std::move(it->second);
    replies.erase(it);
    return payload;
  }

  /// Sends `message` to each of `to` and waits for every reply (or loss).
  std::map<int, std::string> ask_all(const std::vector<int>& to, const Object& message) {
    std::map<uint64_t, int> asked;
    for (int rank : to) asked[send(rank, message)] = rank;
    return await_all(asked);
  }

  /// The replies to `asked` (request id -> rank) by rank, once each came or
  /// its rank was lost.
  std::map<int, std::string> await_all(std::map<uint64_t, int> asked) {
    std::map<int, std::string> answers;
    std::vector<uint64_t> open;
    for (auto& [id, rank] : asked) open.push_back(id);
    while (!open.empty()) {
      wait_any(open);
      std::vector<uint64_t> still;
      for (uint64_t id : open) {
        if (auto reply = take_reply(id)) {
          answers[asked[id]] = std::move(*reply);
        } else if (waiting.count(id)) {
          still.push_back(id);
        }
      }
      open = std::move(still);
    }
    return answers;
  }

  std::vector<int> live(bool runners) const {
    std::vector<int> out;
    for (size_t r = 1; r < ranks.size(); ++r) {
      const RankSummary& s = ranks[r].summary;
      if (!s.lost && (runners ? s.runner : s.build_workers > 0)) out.push_back(static_cast<int>(r));
    }
    return out;
  }

  std::string lost_text() const {
    std::vector<std::string> lost;
    for (size_t r = 1; r < ranks.size(); ++r) {
      if (ranks[r].summary.lost) lost.push_back(where(static_cast<int>(r)));
    }
    return lost.empty() ? "none" : join(lost, ", ");
  }

  void keep_library(const ShippedLibrary& library, const std::string& host) {
    if (libraries.count(library.sha256)) return;
    libraries[library.sha256] = {library.base64, host};
    library_order.push_back(library.sha256);
    // build() starts each batch afresh; this only bounds one batch.
    while (library_order.size() > 4096) {
      libraries.erase(library_order.front());
      library_order.pop_front();
    }
  }

  void check(const std::vector<int>& to, const RankCheck& request, const char* what) {
    forget_in_flight();
    std::vector<std::string> problems;
    for (auto& [rank, payload] : ask_all(to, request)) {
      for (const std::string& p :
           decode_from<CheckReply>(rank, payload, "rank check reply").problems) {
        problems.push_back(where(rank) + ": " + p);
      }
    }
    TT_CHECK(problems.empty(), kRuntime, "the ", what, " ranks cannot take ",
             request.task.workload_key(), ": ", join(problems, "; "));
  }
};

class MpiCluster::Impl::ClusterBuilder final : public Builder {
 public:
  explicit ClusterBuilder(Impl& c) : c_(c) {}

  void check(const te::Task& task, const ir::PassContext& context) override {
    std::string key = task_key(task) + " " + Hash64(context.hash()).str();
    if (c_.build_checked.count(key)) return;
    RankCheck request;
    request.task = task;
    request.pass_context = context;
    request.build = true;
    c_.check(c_.live(false), request, "build");
    c_.build_checked.insert(key);
  }

  std::vector<BuildResult> build(const te::Task& task, const std::vector<schedule::State>& states,
                                 const ir::PassContext& context) override {
    check(task, context);
    c_.forget_in_flight();
    // A batch's libraries are all run before the next batch is built.
    c_.libraries.clear();
    c_.library_order.clear();
    std::vector<BuildResult> results(states.size());
    std::deque<std::pair<size_t, size_t>> queue;  // ranges not yet given to a rank
    // Each rank takes a share the size of its workers, so that all are busy
    // and none gets more than its workers can build in one round.
    int64_t workers = 0;
    for (int r : c_.live(false)) workers += c_.ranks[r].summary.build_workers;
    size_t per_worker = std::max<size_t>(
        1, std::min<size_t>(c_.build.candidates_per_request,
                            (states.size() + workers - 1) / std::max<int64_t>(1, workers)));
    std::map<uint64_t, std::pair<int, std::pair<size_t, size_t>>> out;  // id -> rank, range
    size_t next = 0;
    auto next_range = [&](int rank) -> std::optional<std::pair<size_t, size_t>> {
      if (!queue.empty()) {
        auto r = queue.front();
        queue.pop_front();
        return r;
      }
      if (next >= states.size()) return std::nullopt;
      size_t size = per_worker * static_cast<size_t>(c_.ranks[rank].summary.build_workers);
      std::pair<size_t, size_t> r{next, std::min(states.size(), next + size)};
      next = r.second;
      return r;
    };
    while (next < states.size() || !queue.empty() || !out.empty()) {
      std::vector<int> builders = c_.live(false);
      if (builders.empty()) {
        // Nothing is left to build on: a typed error for each, never a hang.
        BuildResult lost;
        lost.error_code = ErrorCode::kDeviceLost;
        lost.error_message = "no rank is left to build it (lost: " + c_.lost_text() + ")";
        for (auto [id, job] : out) queue.push_back(job.second);
        out.clear();
        queue.emplace_back(next, states.size());
        for (auto [begin, end] : queue) {
          for (size_t i = begin; i < end; ++i) results[i] = lost;
        }
        break;
      }
      for (int rank : builders) {
        if (c_.ranks[rank].building) continue;
        auto range = next_range(rank);
        if (!range) break;
        RankBuild request;
        request.task = task;
        request.states.assign(states.begin() + range->first, states.begin() + range->second);
        request.pass_context = context;
        request.ship_libraries = c_.ship_libraries;
        out[c_.send(rank, request)] = {rank, *range};
        c_.ranks[rank].building = true;
      }
      std::vector<uint64_t> ids;
      for (auto& [id, job] : out) ids.push_back(id);
      c_.wait_any(ids);
      for (uint64_t id : ids) {
        auto [rank, range] = out[id];
        std::optional<std::string> reply = c_.take_reply(id);
        if (!reply && c_.waiting.count(id)) continue;  // still working
        out.erase(id);
        if (!reply) {  // its rank was lost: the range goes to another
          queue.push_front(range);
          continue;
        }
        c_.ranks[rank].building = false;
        auto answer = c_.decode_from<RankBuildReply>(rank, *reply, "rank build reply");
        TT_CHECK(answer.results.size() == range.second - range.first, kRuntime, c_.where(rank),
                 " replied with ", answer.results.size(), " build results for ",
                 range.second - range.first, " candidates");
        for (const auto& library : answer.libraries) {
          c_.keep_library(*library, c_.ranks[rank].summary.host);
        }
        for (size_t i = range.first; i < range.second; ++i) {
          results[i] = *answer.results[i - range.first];
        }
      }
    }
    return results;
  }

 private:
  Impl& c_;
};

class MpiCluster::Impl::ClusterRunner final : public Runner {
 public:
  explicit ClusterRunner(Impl& c) : c_(c) {}

  void check(const te::Task& task) override {
    std::string key = task.workload_key();
    if (c_.run_checked.count(key)) return;
    RankCheck request;
    request.task = task;
    c_.check(c_.live(true), request, "runner");
    c_.run_checked.insert(key);
  }

  std::vector<RunOutcome> run(const te::Task& task, const std::vector<BuildResult>& built,
                              const RunHints& hints) override {
    std::vector<RunOutcome> outcomes(built.size());
    std::vector<size_t> good;
    std::vector<BuildResult> to_run;
    for (size_t i = 0; i < built.size(); ++i) {
      if (built[i].error_code != ErrorCode::kNoError) {
        outcomes[i] = not_run(built[i]);
      } else {
        good.push_back(i);
        to_run.push_back(built[i]);
      }
    }
    run_each(task, to_run, hints,
             [&](size_t k, const RunOutcome& outcome) { outcomes[good[k]] = outcome; });
    return outcomes;
  }

  void run_each(const te::Task& task, const std::vector<BuildResult>& built, const RunHints& hints,
                const std::function<void(size_t, const RunOutcome&)>& on_outcome) override {
    if (built.empty()) return;
    check(task);
    c_.forget_in_flight();
    std::vector<std::optional<RunOutcome>> done(built.size());
    std::deque<size_t> queue;  // given back by lost ranks
    size_t next = 0, reported = 0;
    std::map<uint64_t, std::pair<int, size_t>> out;  // id -> rank, candidate
    auto report = [&] {
      while (reported < built.size() && done[reported]) {
        on_outcome(reported, *done[reported]);
        ++reported;
      }
    };
    while (reported < built.size()) {
      std::vector<int> runners = c_.live(true);
      if (runners.empty()) {
        for (auto& [id, job] : out) queue.push_back(job.second);
        out.clear();
        while (next < built.size()) queue.push_back(next++);
        for (size_t i : queue) {
          RunOutcome lost;
          lost.error_code = ErrorCode::kDeviceLost;
          lost.error_message = "no rank is left to run it (lost: " + c_.lost_text() + ")";
          done[i] = lost;
        }
        report();
        return;
      }
      // One candidate per runner at a time: the first free takes the next.
      for (int rank : runners) {
        if (c_.ranks[rank].running) continue;
        size_t i;
        if (!queue.empty()) {
          i = queue.front();
          queue.pop_front();
        } else if (next < built.size()) {
          i = next++;
        } else {
          break;
        }
        RankRun request;
        request.task = task;
        request.built.emplace_back(make_node<BuildResult>(built[i]));
        request.best_s = hints.best_s;
        request.abandon_factor = hints.abandon_factor;
        auto kept = c_.libraries.find(built[i].library_sha256);
        if (kept != c_.libraries.end() && kept->second.host != c_.ranks[rank].summary.host) {
          auto library = make_node<ShippedLibrary>();
          library->sha256 = kept->first;
          library->base64 = kept->second.base64;
          request.libraries.emplace_back(std::move(library));
        }
        out[c_.send(rank, request)] = {rank, i};
        c_.ranks[rank].running = true;
      }
      std::vector<uint64_t> ids;
      for (auto& [id, job] : out) ids.push_back(id);
      if (ids.empty()) continue;
      c_.wait_any(ids);
      for (uint64_t id : ids) {
        auto [rank, i] = out[id];
        std::optional<std::string> reply = c_.take_reply(id);
        if (!reply && c_.waiting.count(id)) continue;
        out.erase(id);
        if (!reply) {
          queue.push_front(i);
          continue;
        }
        c_.ranks[rank].running = false;
        auto answer = c_.decode_from<RankRunReply>(rank, *reply, "rank run reply");
        TT_CHECK(answer.outcomes.size() == 1, kRuntime, c_.where(rank), " replied with ",
                 answer.outcomes.size(), " outcomes for one candidate");
        done[i] = *answer.outcomes[0];
      }
      report();
    }
  }

 private:
  Impl& c_;
};

MpiCluster::MpiCluster(MpiJob& job, const LocalBuilderOptions& build, const LocalRunnerOptions& run,
                       const MpiOptions& options)
    : impl_(std::make_unique<Impl>()) {
  TT_CHECK(job.rank() == 0, kInternal, "only rank 0 tunes");
  Impl& c = *impl_;
  c.job = &job;
  c.options = options;
  c.build = build;
  c.run = run;
  c.ranks.resize(static_cast<size_t>(job.size()));
  for (int r = 0; r < job.size(); ++r) {
    c.ranks[r].summary.rank = r;
    c.ranks[r].last_heard = Clock::now();
  }
  c.ranks[0].summary.host = host_name();
  std::vector<int> others;
  for (int r = 1; r < job.size(); ++r) others.push_back(r);
  auto refuse_all = [&](const std::string& why) {
    c.stop_all(why);
    fail(ErrorKind::kRuntime, why);
  };

  // The handshake, per rank: a rank of another build is refused by name.
  std::map<int, std::string> hellos = c.ask_all(others, HelloRequest{});
  std::vector<std::string> refused;
  for (int r : others) {
    auto it = hellos.find(r);
    if (it == hellos.end()) {
      refused.push_back("rank " + std::to_string(r) + " did not answer the handshake");
      continue;
    }
    RankInfo info;
    try {
      info = decode<RankInfo>(it->second, "rank handshake reply");
    } catch (const UserError& e) {
      refused.push_back("rank " + std::to_string(r) +
                        " answered the handshake with something this tensortune does not "
                        "understand (another version?): " +
                        e.what());
      continue;
    }
    RankSummary& s = c.ranks[r].summary;
    s.host = info.host;
    s.cpu = info.cpu;
    s.cores = info.cores;
    if (info.protocol_version != kProtocolVersion) {
      refused.push_back(c.where(r) + " speaks protocol version " +
                        std::to_string(info.protocol_version) + ", rank 0 " +
                        std::to_string(kProtocolVersion));
    } else if (info.build_id != build_id()) {
      refused.push_back(c.where(r) + " runs another build of tensortune (\"" + info.build_id +
                        "\", rank 0 \"" + std::string(build_id()) + "\")");
    }
  }
  if (!refused.empty()) refuse_all("refused: " + join(refused, "; "));

  // Roles: the first runners_per_host serving ranks of each host time
  // candidates; the host's other cores build, shared by its serving ranks.
  std::map<std::string, std::vector<int>> by_host;
  for (int r : others) by_host[c.ranks[r].summary.host].push_back(r);
  for (auto& [host, ranks] : by_host) {
    int64_t runners = std::min<int64_t>(options.runners_per_host, ranks.size());
    int64_t cores = c.ranks[ranks[0]].summary.cores;
    int64_t builders =
        build.parallelism > 0 ? build.parallelism : std::max<int64_t>(1, cores - runners);
    for (size_t k = 0; k < ranks.size(); ++k) {
      RankSummary& s = c.ranks[ranks[k]].summary;
      s.runner = static_cast<int64_t>(k) < runners;
      s.build_workers = builders / static_cast<int64_t>(ranks.size()) +
                        (static_cast<int64_t>(k) < builders % static_cast<int64_t>(ranks.size()));
    }
  }
  // A record's target must be the machine that timed it.
  std::map<std::string, std::vector<std::string>> cpus;  // cpu -> hosts
  for (int r : others) {
    const RankSummary& s = c.ranks[r].summary;
    if (!s.runner) continue;
    auto& hosts = cpus[s.cpu];
    if (std::find(hosts.begin(), hosts.end(), s.host) == hosts.end()) hosts.push_back(s.host);
  }
  if (!options.target_given) {
    std::string local_cpu = ir::Target::parse("native").str();
    if (cpus.size() > 1 || (cpus.size() == 1 && cpus.begin()->first != local_cpu)) {
      std::vector<std::string> lines{"rank 0 (" + c.ranks[0].summary.host + "): " + local_cpu};
      for (auto& [cpu, hosts] : cpus) lines.push_back(join(hosts, ", ") + ": " + cpu);
      refuse_all(
          "the runner hosts and rank 0 do not share one CPU, so the native target would not be "
          "the machine that times the candidates (" +
          join(lines, "; ") + "); give --target for the runners' machine, or use hosts alike");
    }
  }
  c.runner_cpu = cpus.empty() ? "" : cpus.begin()->first;
  std::set<std::string> hosts;
  for (int r : others) hosts.insert(c.ranks[r].summary.host);
  c.ship_libraries = hosts.size() > 1;

  // Each rank its own role; the replies are CheckReplies naming what a rank lacks.
  std::map<uint64_t, int> configured;
  for (int r : others) {
    RankConfig config;
    config.build = build;
    config.run = run;
    config.build_workers = c.ranks[r].summary.build_workers;
    config.runner = c.ranks[r].summary.runner;
    configured[c.send(r, config)] = r;
  }
  std::vector<std::string> problems;
  for (auto& [rank, payload] : c.await_all(configured)) {
    try {
      for (auto& p : c.decode_from<CheckReply>(rank, payload, "rank configuration reply").problems)
        problems.push_back(c.where(rank) + ": " + p);
    } catch (const UserError& e) {
      problems.push_back(e.what());
    }
  }
  if (!problems.empty()) refuse_all("a rank cannot serve: " + join(problems, "; "));
  if (c.live(false).empty() || c.live(true).empty()) {
    refuse_all("the job has no rank left to build or to run (lost: " + c.lost_text() + ")");
  }
  c.builder = std::make_unique<Impl::ClusterBuilder>(c);
  c.runner = std::make_unique<Impl::ClusterRunner>(c);
}

MpiCluster::~MpiCluster() {
  // Reached at the end of a run, or by an error (which main reports).
  impl_->stop_all(std::uncaught_exceptions() > 0 ? "rank 0 stopped on an error" : "");
}

void MpiCluster::end_after_loss(int code) {
  std::fflush(stdout);
  std::fflush(stderr);
  // Plain mpirun: MPI_Abort ends every rank, the stopped ones too, and
  // mpirun exits with `code`. Under recovery it ends this rank alone, so the
  // others are told to leave first.
  if (!recovery_mode()) MPI_Abort(MPI_COMM_WORLD, code);
  impl_->stop_all("");
  std::_Exit(code);
}

Builder& MpiCluster::builder() { return *impl_->builder; }
Runner& MpiCluster::runner() { return *impl_->runner; }
std::string MpiCluster::runner_cpu() const { return impl_->runner_cpu; }

std::vector<RankSummary> MpiCluster::ranks() const {
  std::vector<RankSummary> out;
  for (size_t r = 1; r < impl_->ranks.size(); ++r) out.push_back(impl_->ranks[r].summary);
  return out;
}

#else  // !TENSORTUNE_WITH_MPI

namespace {
[[noreturn]] void no_mpi() {
  fail(ErrorKind::kRuntime,
       "this tensortune was built without MPI: install Open MPI (Debian: libopenmpi-dev "
       "openmpi-bin) and build again to tune under mpirun");
}
}  // namespace

MpiJob::MpiJob() { no_mpi(); }
MpiJob::~MpiJob() = default;
int MpiJob::serve() { no_mpi(); }

struct MpiCluster::Impl {};
MpiCluster::MpiCluster(MpiJob&, const LocalBuilderOptions&, const LocalRunnerOptions&,
                       const MpiOptions&) {
  no_mpi();
}
MpiCluster::~MpiCluster() = default;
Builder& MpiCluster::builder() { no_mpi(); }
Runner& MpiCluster::runner() { no_mpi(); }
std::vector<RankSummary> MpiCluster::ranks() const { return {}; }
std::string MpiCluster::runner_cpu() const { return ""; }
void MpiCluster::end_after_loss(int code) { std::_Exit(code); }

#endif  // TENSORTUNE_WITH_MPI

}  // namespace tensortune::measure
