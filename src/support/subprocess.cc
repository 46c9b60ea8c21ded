#include "tensortune/support/subprocess.h"

#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <spawn.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <system_error>

extern char** environ;

namespace tensortune {
namespace {

using Clock = std::chrono::steady_clock;

[[noreturn]] void fail_errno(std::string_view what, std::string_view syscall, int err) {
  fail(ErrorKind::kIO, what, ": ", syscall, " failed: ", std::system_category().message(err));
}

/// Blocks SIGPIPE in this thread for its lifetime, and consumes the SIGPIPE a
/// failed write raised (see the file comment of subprocess.h). This keeps the
/// process's disposition untouched, which a library has no business changing.
class SigpipeGuard {
 public:
  SigpipeGuard() {
    sigemptyset(&pipe_set_);
    sigaddset(&pipe_set_, SIGPIPE);
    pthread_sigmask(SIG_BLOCK, &pipe_set_, &old_mask_);
    sigset_t pending;
    sigpending(&pending);
    // A SIGPIPE pending from before is not ours to swallow.
    was_pending_ = sigismember(&pending, SIGPIPE) == 1;
  }
  SigpipeGuard(const SigpipeGuard&) = delete;
  SigpipeGuard& operator=(const SigpipeGuard&) = delete;
  ~SigpipeGuard() {
    int saved_errno = errno;
    if (saw_epipe_ && !was_pending_) {
      const timespec zero{0, 0};
      while (sigtimedwait(&pipe_set_, nullptr, &zero) < 0 && errno == EINTR) {
      }
    }
    pthread_sigmask(SIG_SETMASK, &old_mask_, nullptr);
    errno = saved_errno;
  }
  /// A write failed with EPIPE, so it raised a SIGPIPE at this thread.
  void saw_epipe() { saw_epipe_ = true; }

 private:
  sigset_t pipe_set_;
  sigset_t old_mask_;
  bool was_pending_ = false;
  bool saw_epipe_ = false;
};

void set_nonblocking(int fd) {
  int flags = fcntl(fd, F_GETFL);
  if (flags < 0 || fcntl(fd, F_SETFL, flags | O_NONBLOCK) < 0) {
    fail_errno("pipe", "fcntl(O_NONBLOCK)", errno);
  }
}

/// A pipe whose ends are close-on-exec, so no other child inherits them.
void make_pipe(UniqueFd* read_end, UniqueFd* write_end) {
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) < 0) fail_errno("pipe", "pipe2", errno);
  read_end->reset(fds[0]);
  write_end->reset(fds[1]);
}

/// Moves a child-side descriptor above 2. dup2(fd, fd) in the child would
/// leave close-on-exec set, so a pipe end that happens to be 0, 1 or 2 (the
/// parent closed its own) must not be dup2'ed onto itself.
void move_above_stdio(UniqueFd* fd) {
  if (fd->get() > 2) return;
  int moved = fcntl(fd->get(), F_DUPFD_CLOEXEC, 3);
  if (moved < 0) fail_errno("pipe", "fcntl(F_DUPFD_CLOEXEC)", errno);
  fd->reset(moved);
}

std::string encode_header(uint64_t size) {
  std::string header(8, '\0');
  for (int i = 0; i < 8; ++i) header[i] = static_cast<char>((size >> (8 * i)) & 0xff);
  return header;
}

uint64_t decode_header(const char* header) {
  uint64_t size = 0;
  for (int i = 7; i >= 0; --i) size = (size << 8) | static_cast<unsigned char>(header[i]);
  return size;
}

void check_frame_size(size_t size) {
  if (size > kMaxFrameSize) {
    fail(ErrorKind::kInvalidArgument, "frame payload of ", size, " bytes exceeds the limit of ",
         kMaxFrameSize, " bytes");
  }
}

/// Reads one frame through `read_upto(out, size)`, which returns fewer than
/// `size` bytes only at end of stream.
template <class ReadUpto>
std::optional<std::string> read_frame_with(ReadUpto&& read_upto, uint64_t max_size,
                                           std::string_view what) {
  char header[8];
  size_t got = read_upto(header, sizeof header);
  if (got == 0) return std::nullopt;
  if (got < sizeof header) {
    fail(ErrorKind::kIO, what, ": end of stream inside a frame header: ", sizeof header - got,
         " of 8 bytes missing");
  }
  uint64_t size = decode_header(header);
  if (size > max_size) {
    fail(ErrorKind::kIO, what, ": frame of ", size, " bytes exceeds the limit of ", max_size,
         " bytes (a corrupt stream, or a peer that does not speak the frame protocol)");
  }
  // Grow in chunks rather than trusting the header with one big allocation.
  constexpr uint64_t kChunk = uint64_t{16} << 20;
  std::string payload;
  uint64_t done = 0;
  while (done < size) {
    uint64_t chunk = std::min(size - done, kChunk);
    payload.resize(done + chunk);
    size_t n = read_upto(payload.data() + done, chunk);
    done += n;
    if (n < chunk) {
      fail(ErrorKind::kIO, what, ": end of stream inside a frame of ", size,
           " bytes: ", size - done, " bytes missing");
    }
  }
  return payload;
}

/// Waits for `events` on one descriptor; false when the deadline passed first.
bool poll_one(int fd, short events, const detail::Deadline& deadline, std::string_view what) {
  while (true) {
    pollfd p{fd, events, 0};
    int r = ::poll(&p, 1, deadline.poll_ms());
    if (r > 0) return true;
    if (r < 0 && errno != EINTR) fail_errno(what, "poll", errno);
    if (deadline.passed()) return false;
  }
}

[[noreturn]] void fail_timeout(std::string_view what, std::string_view doing,
                               const detail::Deadline& deadline) {
  throw TimeoutError(
      detail::concat(what, ": timed out after ", deadline.timeout.count(), " ms ", doing));
}

size_t read_upto_fd(int fd, char* out, size_t size, const detail::Deadline& deadline,
                    std::string_view what) {
  size_t got = 0;
  while (got < size) {
    // With a deadline, wait first: a blocking read would not honour it.
    if (deadline.at && !poll_one(fd, POLLIN, deadline, what)) {
      fail_timeout(what, "waiting to read", deadline);
    }
    ssize_t r = ::read(fd, out + got, size - got);
    if (r > 0) {
      got += static_cast<size_t>(r);
    } else if (r == 0) {
      break;
    } else if (errno == EAGAIN || errno == EWOULDBLOCK) {
      if (!deadline.at) poll_one(fd, POLLIN, deadline, what);
    } else if (errno != EINTR) {
      fail_errno(what, "read", errno);
    }
  }
  return got;
}

ExitStatus decode_wait_status(int status) {
  ExitStatus s;
  if (WIFSIGNALED(status)) {
    s.signal = WTERMSIG(status);
  } else {
    s.code = WEXITSTATUS(status);
  }
  return s;
}

std::string base_name(const std::string& path) {
  size_t slash = path.rfind('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

/// RAII for the posix_spawn attribute objects.
struct SpawnActions {
  posix_spawn_file_actions_t actions;
  SpawnActions() { posix_spawn_file_actions_init(&actions); }
  ~SpawnActions() { posix_spawn_file_actions_destroy(&actions); }
  SpawnActions(const SpawnActions&) = delete;
  SpawnActions& operator=(const SpawnActions&) = delete;
};
struct SpawnAttr {
  posix_spawnattr_t attr;
  SpawnAttr() { posix_spawnattr_init(&attr); }
  ~SpawnAttr() { posix_spawnattr_destroy(&attr); }
  SpawnAttr(const SpawnAttr&) = delete;
  SpawnAttr& operator=(const SpawnAttr&) = delete;
};

void check_spawn_call(int rc, std::string_view call) {
  if (rc != 0) fail_errno("spawn", call, rc);
}

std::vector<std::string> child_environment(const SpawnOptions& options) {
  std::vector<std::string> env;
  auto overridden = [&](std::string_view entry) {
    std::string_view name = entry.substr(0, entry.find('='));
    return std::any_of(options.env.begin(), options.env.end(),
                       [&](const auto& kv) { return kv.first == name; });
  };
  if (options.inherit_env) {
    for (char** e = environ; e && *e; ++e) {
      if (!overridden(*e)) env.emplace_back(*e);
    }
  }
  for (size_t i = 0; i < options.env.size(); ++i) {
    const std::string& name = options.env[i].first;
    const std::string& value = options.env[i].second;
    if (name.empty() || name.find('=') != std::string::npos) {
      fail(ErrorKind::kInvalidArgument, "environment variable name '", name,
           "' is empty or contains '='");
    }
    // A later entry for the same name wins.
    bool later = std::any_of(options.env.begin() + static_cast<std::ptrdiff_t>(i) + 1,
                             options.env.end(), [&](const auto& kv) { return kv.first == name; });
    if (!later) env.push_back(name + "=" + value);
  }
  return env;
}

std::string_view mode_name(StreamMode mode) {
  switch (mode) {
    case StreamMode::kPipe: return "pipe";
    case StreamMode::kCapture: return "capture";
    case StreamMode::kInherit: return "inherit";
    case StreamMode::kNull: return "null";
  }
  return "?";
}

}  // namespace

// ---- Deadline, UniqueFd, ExitStatus ----

namespace detail {
Deadline Deadline::after(Timeout timeout) {
  Deadline d;
  if (timeout) {
    d.timeout = *timeout;
    d.at = Clock::now() + *timeout;
  }
  return d;
}

bool Deadline::passed() const { return at && Clock::now() >= *at; }

int Deadline::poll_ms() const {
  if (!at) return -1;
  auto left = std::chrono::ceil<std::chrono::milliseconds>(*at - Clock::now()).count();
  return static_cast<int>(std::clamp<int64_t>(left, 0, 1 << 30));
}
}  // namespace detail

UniqueFd& UniqueFd::operator=(UniqueFd&& other) noexcept {
  if (this != &other) reset(other.release());
  return *this;
}

void UniqueFd::reset(int fd) {
  if (fd_ >= 0 && fd_ != fd) ::close(fd_);
  fd_ = fd;
}

std::string ExitStatus::str() const {
  if (signal == 0) return "exit code " + std::to_string(code);
  const char* description = strsignal(signal);
  return "signal " + std::to_string(signal) + " (" + (description ? description : "unknown") + ")";
}

// ---- Subprocess ----

void Subprocess::Capture::append(const char* data, size_t size) {
  constexpr size_t kHalf = kCaptureKeepBytes / 2;
  if (head.size() < kHalf) {
    size_t take = std::min(size, kHalf - head.size());
    head.append(data, take);
    data += take;
    size -= take;
  }
  if (size == 0) return;
  tail.append(data, size);
  // Trim only when the tail is twice its budget, so trimming stays amortised O(1).
  if (tail.size() > 2 * kHalf) {
    size_t cut = tail.size() - kHalf;
    tail.erase(0, cut);
    dropped += cut;
  }
}

std::string Subprocess::Capture::text() const {
  constexpr size_t kHalf = kCaptureKeepBytes / 2;
  size_t extra = tail.size() > kHalf ? tail.size() - kHalf : 0;
  if (dropped + extra == 0) return head + tail;
  return head + "\n[... " + std::to_string(dropped + extra) + " bytes dropped ...]\n" +
         tail.substr(extra);
}

Subprocess Subprocess::spawn(const std::vector<std::string>& argv, const SpawnOptions& options) {
  if (argv.empty() || argv[0].empty()) {
    fail(ErrorKind::kInvalidArgument, "cannot start a process: the argument list is empty");
  }
  auto check_mode = [&](std::string_view stream, StreamMode mode, bool capture_ok, bool pipe_ok) {
    if ((mode == StreamMode::kCapture && !capture_ok) || (mode == StreamMode::kPipe && !pipe_ok)) {
      fail(ErrorKind::kInvalidArgument, "cannot start '", argv[0], "': ", stream,
           " cannot be in mode '", mode_name(mode), "'");
    }
  };
  check_mode("stdin", options.stdin_mode, false, true);
  check_mode("stderr", options.stderr_mode, true, false);

  Subprocess p;
  p.name_ = options.name.empty() ? base_name(argv[0]) : options.name;
  SpawnActions actions;
  SpawnAttr attr;
  UniqueFd child_ends[3];

  // Streams: pipes (parent end close-on-exec and non-blocking), /dev/null or inherited.
  const StreamMode modes[3] = {options.stdin_mode, options.stdout_mode, options.stderr_mode};
  for (int stream = 0; stream < 3; ++stream) {
    switch (modes[stream]) {
      case StreamMode::kPipe:
      case StreamMode::kCapture: {
        UniqueFd parent_end;
        if (stream == 0) {
          make_pipe(&child_ends[0], &parent_end);
        } else {
          make_pipe(&parent_end, &child_ends[stream]);
        }
        set_nonblocking(parent_end.get());
        move_above_stdio(&child_ends[stream]);
        check_spawn_call(
            posix_spawn_file_actions_adddup2(&actions.actions, child_ends[stream].get(), stream),
            "posix_spawn_file_actions_adddup2");
        if (stream == 0) {
          p.stdin_ = std::move(parent_end);
        } else if (modes[stream] == StreamMode::kPipe) {
          p.stdout_ = std::move(parent_end);
        } else {
          (stream == 1 ? p.stdout_capture_ : p.stderr_capture_).fd = std::move(parent_end);
        }
        break;
      }
      case StreamMode::kNull:
        check_spawn_call(posix_spawn_file_actions_addopen(&actions.actions, stream, "/dev/null",
                                                          stream == 0 ? O_RDONLY : O_WRONLY, 0),
                         "posix_spawn_file_actions_addopen");
        break;
      case StreamMode::kInherit: break;
    }
  }
  if (!options.working_dir.empty()) {
    check_spawn_call(
        posix_spawn_file_actions_addchdir_np(&actions.actions, options.working_dir.c_str()),
        "posix_spawn_file_actions_addchdir_np");
  }
#if defined(__GLIBC__) && (__GLIBC__ > 2 || (__GLIBC__ == 2 && __GLIBC_MINOR__ >= 34))
  // Descriptors other code opened without close-on-exec must not leak into workers.
  check_spawn_call(posix_spawn_file_actions_addclosefrom_np(&actions.actions, 3),
                   "posix_spawn_file_actions_addclosefrom_np");
#endif

  // Signals: default dispositions and an empty mask, whatever the parent set.
  short flags = POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF;
  sigset_t none, all;
  sigemptyset(&none);
  sigfillset(&all);
  check_spawn_call(posix_spawnattr_setsigmask(&attr.attr, &none), "posix_spawnattr_setsigmask");
  check_spawn_call(posix_spawnattr_setsigdefault(&attr.attr, &all),
                   "posix_spawnattr_setsigdefault");
  if (options.new_process_group) {
    flags |= POSIX_SPAWN_SETPGROUP;
    check_spawn_call(posix_spawnattr_setpgroup(&attr.attr, 0), "posix_spawnattr_setpgroup");
  }
  check_spawn_call(posix_spawnattr_setflags(&attr.attr, flags), "posix_spawnattr_setflags");

  std::vector<std::string> env = child_environment(options);
  std::vector<char*> envp;
  for (auto& e : env) envp.push_back(e.data());
  envp.push_back(nullptr);
  std::vector<std::string> args = argv;
  std::vector<char*> argvp;
  for (auto& a : args) argvp.push_back(a.data());
  argvp.push_back(nullptr);

  pid_t pid = -1;
  const bool search_path = argv[0].find('/') == std::string::npos;
  // glibc's posix_spawn reports a failed exec (no such file, not executable)
  // as its return value, so a missing program is an error here, not an exit code.
  int rc =
      search_path
          ? posix_spawnp(&pid, argvp[0], &actions.actions, &attr.attr, argvp.data(), envp.data())
          : posix_spawn(&pid, argvp[0], &actions.actions, &attr.attr, argvp.data(), envp.data());
  if (rc != 0) {
    fail(ErrorKind::kIO, "cannot start '", argv[0],
         "': ", search_path ? "posix_spawnp" : "posix_spawn",
         " failed: ", std::system_category().message(rc));
  }
  p.pid_ = pid;
  p.own_group_ = options.new_process_group;
#ifdef SYS_pidfd_open
  // A pidfd becomes readable when the child exits, so wait() can poll it
  // together with the captured streams; without one, wait() polls on a tick.
  long pidfd = syscall(SYS_pidfd_open, pid, 0);
  if (pidfd >= 0) p.pidfd_.reset(static_cast<int>(pidfd));
#endif
  return p;
}

Subprocess::Subprocess(Subprocess&& other) noexcept { *this = std::move(other); }

Subprocess& Subprocess::operator=(Subprocess&& other) noexcept {
  if (this == &other) return *this;
  destroy();
  pid_ = std::exchange(other.pid_, -1);
  name_ = std::move(other.name_);
  own_group_ = other.own_group_;
  status_ = std::exchange(other.status_, std::nullopt);
  stdin_ = std::move(other.stdin_);
  stdout_ = std::move(other.stdout_);
  pidfd_ = std::move(other.pidfd_);
  stdout_capture_ = std::move(other.stdout_capture_);
  stderr_capture_ = std::move(other.stderr_capture_);
  return *this;
}

Subprocess::~Subprocess() { destroy(); }

void Subprocess::destroy() noexcept {
  if (pid_ > 0 && !status_) {
    signal_child(SIGKILL);
    int status = 0;
    while (::waitpid(pid_, &status, 0) < 0 && errno == EINTR) {
    }
    status_ = decode_wait_status(status);
  }
  pid_ = -1;
  stdin_.reset();
  stdout_.reset();
  pidfd_.reset();
  stdout_capture_.fd.reset();
  stderr_capture_.fd.reset();
}

std::string Subprocess::describe() const { return name_ + " (pid " + std::to_string(pid_) + ")"; }

void Subprocess::drain_captures() {
  char buffer[64 * 1024];
  for (Capture* c : {&stdout_capture_, &stderr_capture_}) {
    while (c->fd) {
      ssize_t r = ::read(c->fd.get(), buffer, sizeof buffer);
      if (r > 0) {
        c->append(buffer, static_cast<size_t>(r));
      } else if (r == 0) {
        c->fd.reset();
      } else if (errno == EAGAIN || errno == EWOULDBLOCK) {
        break;
      } else if (errno != EINTR) {
        int err = errno;
        c->fd.reset();
        fail_errno(describe() + (c == &stdout_capture_ ? " stdout" : " stderr"), "read", err);
      }
    }
  }
}

bool Subprocess::poll_with_captures(int fd, short events, const detail::Deadline& deadline) {
  while (true) {
    pollfd fds[3] = {{fd, events, 0},
                     {stdout_capture_.fd.get(), POLLIN, 0},
                     {stderr_capture_.fd.get(), POLLIN, 0}};
    int r = ::poll(fds, 3, deadline.poll_ms());
    if (r < 0) {
      if (errno == EINTR) continue;
      fail_errno(describe(), "poll", errno);
    }
    if (fds[1].revents || fds[2].revents) drain_captures();
    if (fd >= 0 && fds[0].revents) return true;
    if (deadline.passed()) return false;
  }
}

void Subprocess::write_stdin(std::string_view data, const detail::Deadline& deadline) {
  if (!stdin_) fail(ErrorKind::kInvalidArgument, describe(), ": stdin is closed or not a pipe");
  SigpipeGuard guard;
  size_t done = 0;
  while (done < data.size()) {
    ssize_t w = ::write(stdin_.get(), data.data() + done, data.size() - done);
    if (w >= 0) {
      done += static_cast<size_t>(w);
    } else if (errno == EAGAIN || errno == EWOULDBLOCK) {
      if (!poll_with_captures(stdin_.get(), POLLOUT, deadline)) {
        fail_timeout(describe() + " stdin", "waiting to write", deadline);
      }
    } else if (errno == EPIPE) {
      guard.saw_epipe();
      fail(ErrorKind::kIO, describe(),
           " stdin: write failed: ", std::system_category().message(EPIPE),
           " (the child exited or closed its stdin)");
    } else if (errno != EINTR) {
      fail_errno(describe() + " stdin", "write", errno);
    }
  }
}

size_t Subprocess::read_stdout(char* out, size_t size, const detail::Deadline& deadline) {
  if (!stdout_) fail(ErrorKind::kInvalidArgument, describe(), ": stdout is not a pipe");
  size_t got = 0;
  while (got < size) {
    ssize_t r = ::read(stdout_.get(), out + got, size - got);
    if (r > 0) {
      got += static_cast<size_t>(r);
    } else if (r == 0) {
      break;
    } else if (errno == EAGAIN || errno == EWOULDBLOCK) {
      if (!poll_with_captures(stdout_.get(), POLLIN, deadline)) {
        fail_timeout(describe() + " stdout", "waiting to read", deadline);
      }
    } else if (errno != EINTR) {
      fail_errno(describe() + " stdout", "read", errno);
    }
  }
  return got;
}

void Subprocess::write_all(std::string_view data, Timeout timeout) {
  write_stdin(data, detail::Deadline::after(timeout));
}

bool Subprocess::read_exact(char* out, size_t size, Timeout timeout) {
  size_t got = read_stdout(out, size, detail::Deadline::after(timeout));
  if (got == 0 && size > 0) return false;
  if (got < size) {
    fail(ErrorKind::kIO, describe(), " stdout: end of stream after ", got, " of ", size, " bytes (",
         size - got, " bytes missing)");
  }
  return true;
}

void Subprocess::close_stdin() { stdin_.reset(); }

void Subprocess::write_frame(std::string_view payload, Timeout timeout) {
  check_frame_size(payload.size());
  detail::Deadline deadline = detail::Deadline::after(timeout);
  std::string header = encode_header(payload.size());
  // Small frames go out in one write.
  if (payload.size() <= 64 * 1024) {
    write_stdin(header.append(payload), deadline);
  } else {
    write_stdin(header, deadline);
    write_stdin(payload, deadline);
  }
}

std::optional<std::string> Subprocess::read_frame(Timeout timeout, uint64_t max_size) {
  detail::Deadline deadline = detail::Deadline::after(timeout);
  return read_frame_with([&](char* out, size_t size) { return read_stdout(out, size, deadline); },
                         max_size, describe() + " stdout");
}

bool Subprocess::reap_if_exited() {
  if (status_) return true;
  if (pid_ <= 0) fail(ErrorKind::kInvalidArgument, "no process to wait for (moved from)");
  siginfo_t info;
  std::memset(&info, 0, sizeof info);
  // WNOWAIT leaves the child a zombie, so its pid (which is also its group id)
  // cannot be reused while we kill the rest of the group.
  while (::waitid(P_PID, static_cast<id_t>(pid_), &info, WEXITED | WNOHANG | WNOWAIT) < 0) {
    if (errno != EINTR) fail_errno(describe(), "waitid", errno);
  }
  if (info.si_pid == 0) return false;
  if (own_group_) ::kill(-pid_, SIGKILL);
  int status = 0;
  while (::waitpid(pid_, &status, 0) < 0) {
    if (errno != EINTR) fail_errno(describe(), "waitpid", errno);
  }
  status_ = decode_wait_status(status);
  pidfd_.reset();
  drain_captures();
  return true;
}

std::optional<ExitStatus> Subprocess::wait_until(const detail::Deadline& deadline) {
  auto tick = std::chrono::milliseconds(1);
  while (true) {
    if (reap_if_exited()) return status_;
    if (deadline.passed()) return std::nullopt;
    if (pidfd_) {
      poll_with_captures(pidfd_.get(), POLLIN, deadline);
    } else {
      // No pidfd: poll the captured streams on a growing tick.
      tick = std::min(tick * 2, std::chrono::milliseconds(50));
      detail::Deadline step = detail::Deadline::after(tick);
      if (deadline.at && *deadline.at < *step.at) step = deadline;
      poll_with_captures(-1, 0, step);
    }
  }
}

ExitStatus Subprocess::wait() { return *wait_until(detail::Deadline()); }

std::optional<ExitStatus> Subprocess::wait_for(std::chrono::milliseconds timeout) {
  return wait_until(detail::Deadline::after(timeout));
}

std::optional<ExitStatus> Subprocess::try_wait() {
  drain_captures();
  if (reap_if_exited()) return status_;
  return std::nullopt;
}

int Subprocess::signal_child(int signal) noexcept {
  int rc = ::kill(own_group_ ? -pid_ : pid_, signal);
  // A child that joined another process group (setpgid) is not reached
  // through its own; without this, reaping it could block for ever.
  if (own_group_ && ::getpgid(pid_) != pid_) rc = ::kill(pid_, signal);
  return rc;
}

void Subprocess::kill(int signal) {
  if (status_ || pid_ <= 0) return;
  if (signal_child(signal) < 0 && errno != ESRCH) fail_errno(describe(), "kill", errno);
}

std::string Subprocess::stderr_text() {
  drain_captures();
  return stderr_capture_.text();
}

std::string Subprocess::take_stderr_text() {
  drain_captures();
  std::string text = stderr_capture_.text();
  stderr_capture_.head.clear();
  stderr_capture_.tail.clear();
  stderr_capture_.dropped = 0;
  return text;
}

std::string Subprocess::stdout_text() {
  drain_captures();
  return stdout_capture_.text();
}

RunResult run_captured(const std::vector<std::string>& argv, SpawnOptions options,
                       Timeout timeout) {
  options.stdin_mode = StreamMode::kNull;
  options.stdout_mode = StreamMode::kCapture;
  options.stderr_mode = StreamMode::kCapture;
  Subprocess p = Subprocess::spawn(argv, options);
  RunResult result;
  std::optional<ExitStatus> status = timeout ? p.wait_for(*timeout) : p.wait();
  if (!status) {
    result.timed_out = true;
    p.kill(SIGKILL);
    status = p.wait();
  }
  result.status = *status;
  result.out = p.stdout_text();
  result.err = p.stderr_text();
  return result;
}

// ---- plain descriptors ----

void write_all(int fd, std::string_view data, std::string_view what) {
  SigpipeGuard guard;
  size_t done = 0;
  while (done < data.size()) {
    ssize_t w = ::write(fd, data.data() + done, data.size() - done);
    if (w >= 0) {
      done += static_cast<size_t>(w);
    } else if (errno == EAGAIN || errno == EWOULDBLOCK) {
      poll_one(fd, POLLOUT, detail::Deadline(), what);
    } else if (errno == EPIPE) {
      guard.saw_epipe();
      fail_errno(what, "write", EPIPE);
    } else if (errno != EINTR) {
      fail_errno(what, "write", errno);
    }
  }
}

bool read_exact(int fd, char* out, size_t size, Timeout timeout, std::string_view what) {
  size_t got = read_upto_fd(fd, out, size, detail::Deadline::after(timeout), what);
  if (got == 0 && size > 0) return false;
  if (got < size) {
    fail(ErrorKind::kIO, what, ": end of stream after ", got, " of ", size, " bytes (", size - got,
         " bytes missing)");
  }
  return true;
}

void write_frame(int fd, std::string_view payload, std::string_view what) {
  check_frame_size(payload.size());
  std::string header = encode_header(payload.size());
  if (payload.size() <= 64 * 1024) {
    write_all(fd, header.append(payload), what);
  } else {
    write_all(fd, header, what);
    write_all(fd, payload, what);
  }
}

std::optional<std::string> read_frame(int fd, Timeout timeout, uint64_t max_size,
                                      std::string_view what) {
  detail::Deadline deadline = detail::Deadline::after(timeout);
  return read_frame_with(
      [&](char* out, size_t size) { return read_upto_fd(fd, out, size, deadline, what); }, max_size,
      what);
}

}  // namespace tensortune
