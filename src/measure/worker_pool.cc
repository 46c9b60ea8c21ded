#include "tensortune/measure/worker_pool.h"

#include <signal.h>
#include <unistd.h>

#include <array>
#include <atomic>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <filesystem>
#include <mutex>
#include <optional>
#include <thread>

#include "tensortune/support/subprocess.h"

namespace tensortune::measure {

void WorkerPoolOptions::declare(FieldList<WorkerPoolOptions>& f) {
  f.def("num_workers", &WorkerPoolOptions::num_workers)
      .range(1, 4096)
      .def("worker_path", &WorkerPoolOptions::worker_path)
      .def("memory_limit_mb", &WorkerPoolOptions::memory_limit_mb)
      .option("memory-limit-mb", "address-space limit per worker (0: none)")
      .range(0, 1 << 30)
      .def("max_requests_per_worker", &WorkerPoolOptions::max_requests_per_worker)
      .option("worker-max-requests", "replace a worker after this many requests (0: never)")
      .range(0, 1 << 30)
      .def("env", &WorkerPoolOptions::env)
      .def("name", &WorkerPoolOptions::name)
      .def("handshake_timeout", &WorkerPoolOptions::handshake_timeout)
      .range(0.001, 86400);
}
TT_REGISTER_NODE(WorkerPoolOptions);

namespace {

using Clock = std::chrono::steady_clock;

// ---- the groups an interrupt handler must kill ----
// A fixed table of atomics: the handler may only do async-signal-safe work.

constexpr size_t kMaxLiveWorkers = 1024;
static_assert(std::atomic<pid_t>::is_always_lock_free, "the interrupt handler reads these");
std::array<std::atomic<pid_t>, kMaxLiveWorkers> g_live_groups{};

void register_group(pid_t pgid) {
  for (auto& slot : g_live_groups) {
    pid_t empty = 0;
    if (slot.compare_exchange_strong(empty, pgid)) return;
  }
  // Table full: the worker still dies with its parent (parent-death signal).
}

void unregister_group(pid_t pgid) {
  for (auto& slot : g_live_groups) {
    pid_t expected = pgid;
    if (slot.compare_exchange_strong(expected, 0)) return;
  }
}

extern "C" void kill_workers_and_reraise(int signo) {
  for (auto& slot : g_live_groups) {
    pid_t pgid = slot.load();
    if (pgid > 0) ::kill(-pgid, SIGKILL);
  }
  ::signal(signo, SIG_DFL);
  ::raise(signo);
}

std::string tail_of(const std::string& text, size_t keep = 2000) {
  return text.size() <= keep ? text : "..." + text.substr(text.size() - keep);
}

/// One request handed to a slot thread.
struct Job {
  const std::string* request = nullptr;
  std::chrono::milliseconds timeout{0};
  WorkerReply* reply = nullptr;
};

}  // namespace

std::string find_worker_program() {
  if (const char* env = std::getenv("TENSORTUNE_WORKER"); env && *env) return env;
  std::error_code ec;
  auto self = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (!ec) {
    auto next_to = self.parent_path() / "tensortune-worker";
    if (std::filesystem::exists(next_to, ec)) return next_to.string();
  }
  return "tensortune-worker";  // searched on PATH by posix_spawnp
}

void install_interrupt_cleanup() {
  static std::once_flag once;
  std::call_once(once, [] {
    for (int signo : {SIGINT, SIGTERM, SIGHUP}) {
      // An ignored signal stays ignored (nohup, background jobs of a script).
      struct sigaction old {};
      if (::sigaction(signo, nullptr, &old) == 0 && old.sa_handler == SIG_IGN) continue;
      struct sigaction action {};
      action.sa_handler = kill_workers_and_reraise;
      sigemptyset(&action.sa_mask);
      ::sigaction(signo, &action, nullptr);
    }
  });
}

struct WorkerPool::Impl {
  /// A worker and the thread that drives it.
  struct Slot {
    std::optional<Subprocess> worker;
    int served = 0;
    std::atomic<pid_t> pid{0};
    std::thread thread;
  };

  WorkerPoolOptions options;
  Handshake handshake;
  std::string program;
  std::vector<std::unique_ptr<Slot>> slots;
  std::mutex mutex;
  std::condition_variable work_ready, work_done;
  std::deque<Job> queue;
  size_t unfinished = 0;
  bool stopping = false;
  std::atomic<int64_t> started{0};

  Impl(WorkerPoolOptions o, Handshake h) : options(std::move(o)), handshake(std::move(h)) {
    TT_CHECK(options.num_workers >= 1, kInvalidArgument,
             "a worker pool needs at least one worker, got ", options.num_workers);
    program = options.worker_path.empty() ? find_worker_program() : options.worker_path;
    try {
      for (int64_t i = 0; i < options.num_workers; ++i) {
        slots.push_back(std::make_unique<Slot>());
        Slot* slot = slots.back().get();
        slot->thread = std::thread([this, slot] { serve(*slot); });
      }
    } catch (...) {
      stop();  // joins the threads already started; a joinable thread would terminate()
      throw;
    }
  }

  ~Impl() { stop(); }

  void stop() {
    {
      std::lock_guard<std::mutex> lock(mutex);
      stopping = true;
    }
    work_ready.notify_all();
    for (auto& slot : slots) {
      if (slot->thread.joinable()) slot->thread.join();
    }
  }

  /// The slot thread: takes jobs until the pool stops, then retires its worker.
  void serve(Slot& slot) {
    for (;;) {
      Job job;
      {
        std::unique_lock<std::mutex> lock(mutex);
        work_ready.wait(lock, [&] { return stopping || !queue.empty(); });
        if (queue.empty()) break;  // stopping
        job = queue.front();
        queue.pop_front();
      }
      try {
        *job.reply = handle(slot, *job.request, job.timeout);
      } catch (const std::exception& e) {
        // Never let an exception end the thread: run() waits for this reply.
        job.reply->status = WorkerReply::Status::kLost;
        job.reply->message = options.name + ": " + e.what();
        try {
          retire(slot, true);
        } catch (const std::exception&) {
          slot.worker.reset();  // the destructor kills and reaps
          slot.pid = 0;
        }
      }
      {
        std::lock_guard<std::mutex> lock(mutex);
        --unfinished;
      }
      work_done.notify_all();
    }
    retire(slot);
  }

  void start(Slot& slot) {
    SpawnOptions spawn;
    spawn.env = options.env;
    spawn.name = options.name;
    std::vector<std::string> argv = {
        program,
        "--serve",
        "--parent-pid",
        std::to_string(::getpid()),
        "--memory-limit-bytes",
        std::to_string(static_cast<uint64_t>(options.memory_limit_mb) << 20)};
    try {
      slot.worker.emplace(Subprocess::spawn(argv, spawn));
    } catch (const UserError& e) {
      fail(ErrorKind::kRuntime, "cannot start ", options.name, " '", program, "': ", e.what());
    }
    slot.served = 0;
    slot.pid = slot.worker->pid();
    register_group(slot.worker->pid());
    ++started;
    if (!handshake.request.empty()) shake_hands(slot);
  }

  /// Sends the handshake to the slot's new worker; a kRuntime error saying
  /// why when it is refused (the worker is retired first).
  void shake_hands(Slot& slot) {
    Subprocess& worker = *slot.worker;
    std::string why;
    try {
      worker.write_frame(handshake.request, options.handshake_timeout);
      std::optional<std::string> reply = worker.read_frame(options.handshake_timeout);
      if (!reply) {
        why = "it ended without answering";
      } else if (handshake.accept) {
        why = handshake.accept(*reply);
      }
    } catch (const TimeoutError&) {
      why = "it gave no answer within the handshake timeout";
    } catch (const UserError& e) {
      why = e.what();
    }
    if (why.empty()) return;
    std::string err = tail_of(worker.take_stderr_text());
    std::string describe = worker.describe();
    retire(slot, true);
    fail(ErrorKind::kRuntime, options.name, " '", program, "' refused (", describe, "): ", why,
         err.empty() ? "" : "\nstderr:\n" + err);
  }

  /// Ends the slot's worker: politely (end of input) when it is idle and
  /// well, else by killing its group. Either way it is reaped.
  void retire(Slot& slot, bool kill = false) {
    if (!slot.worker) return;
    if (!kill && slot.worker->running()) {
      slot.worker->close_stdin();
      if (!slot.worker->wait_for(std::chrono::seconds(2))) kill = true;
    }
    if (kill) slot.worker->kill(SIGKILL);
    // Unregistered before the reap: after it the pid may be reused, and the
    // interrupt handler must not kill a stranger's group.
    unregister_group(slot.worker->pid());
    slot.worker->wait();
    slot.worker.reset();
    slot.pid = 0;
  }

  WorkerReply handle(Slot& slot, const std::string& request, std::chrono::milliseconds timeout) {
    WorkerReply reply;
    if (!slot.worker) {
      try {
        start(slot);
      } catch (const UserError& e) {
        reply.status = WorkerReply::Status::kNotStarted;
        reply.message = e.what();
        return reply;
      }
    }
    Subprocess& worker = *slot.worker;
    worker.take_stderr_text();  // what earlier requests wrote is not this one's
    auto stderr_now = [&] { return tail_of(worker.take_stderr_text()); };
    auto begin = Clock::now();
    auto left = [&] {
      auto spent = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - begin);
      return std::max(std::chrono::milliseconds(1), timeout - spent);
    };
    std::optional<std::string> payload;
    std::string broken;
    try {
      worker.write_frame(request, left());
      payload = worker.read_frame(left());
    } catch (const TimeoutError&) {
      reply.status = WorkerReply::Status::kTimeout;
      char limit[32];
      std::snprintf(limit, sizeof limit, "%g", static_cast<double>(timeout.count()) / 1000.0);
      reply.message =
          options.name + " gave no reply within " + limit + " s; killed " + worker.describe();
      std::string err = stderr_now();
      if (!err.empty()) reply.message += "\nstderr:\n" + err;
      reply.seconds = std::chrono::duration<double>(Clock::now() - begin).count();
      retire(slot, true);
      return reply;
    } catch (const UserError& e) {
      broken = e.what();  // a torn frame or a closed pipe: the worker died
    }
    reply.seconds = std::chrono::duration<double>(Clock::now() - begin).count();
    if (payload) {
      reply.payload = std::move(*payload);
      if (options.max_requests_per_worker > 0 && ++slot.served >= options.max_requests_per_worker) {
        retire(slot);
      }
      return reply;
    }
    // End of stream or a broken pipe: the worker is gone or going.
    auto status = worker.wait_for(std::chrono::seconds(2));
    bool killed_here = false;
    if (!status) {
      // Alive but not speaking the protocol (a torn or garbled frame).
      worker.kill(SIGKILL);
      status = worker.wait();
      killed_here = true;
    }
    std::string err = stderr_now();
    std::string describe = worker.describe();
    retire(slot, true);
    reply.signal = status->signal;
    if (killed_here) {
      reply.status = WorkerReply::Status::kCrashed;
      reply.message = describe + " broke the protocol and was killed";
    } else if (status->signal == SIGKILL) {
      reply.status = WorkerReply::Status::kLost;
      reply.message = describe + " was killed (signal 9) by something outside the pool";
    } else {
      reply.status = WorkerReply::Status::kCrashed;
      reply.message = describe + " died during the request: " + status->str();
    }
    if (!broken.empty()) reply.message += " (" + broken + ")";
    if (!err.empty()) reply.message += "\nstderr:\n" + err;
    return reply;
  }
};

WorkerPool::WorkerPool(WorkerPoolOptions options, Handshake handshake)
    : impl_(std::make_unique<Impl>(std::move(options), std::move(handshake))) {}

WorkerPool::~WorkerPool() = default;

std::vector<WorkerReply> WorkerPool::run(const std::vector<std::string>& requests,
                                         std::chrono::milliseconds timeout) {
  std::vector<WorkerReply> replies(requests.size());
  if (requests.empty()) return replies;
  std::unique_lock<std::mutex> lock(impl_->mutex);
  for (size_t i = 0; i < requests.size(); ++i) {
    impl_->queue.push_back(Job{&requests[i], timeout, &replies[i]});
  }
  impl_->unfinished += requests.size();
  impl_->work_ready.notify_all();
  impl_->work_done.wait(lock, [&] { return impl_->unfinished == 0; });
  return replies;
}

std::vector<pid_t> WorkerPool::worker_pids() const {
  std::vector<pid_t> pids;
  for (const auto& slot : impl_->slots) {
    if (pid_t pid = slot->pid.load(); pid > 0) pids.push_back(pid);
  }
  return pids;
}

int64_t WorkerPool::workers_started() const { return impl_->started.load(); }

const WorkerPoolOptions& WorkerPool::options() const { return impl_->options; }

}  // namespace tensortune::measure
