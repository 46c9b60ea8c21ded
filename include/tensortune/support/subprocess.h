/// \file
/// Child processes started with posix_spawn, pipes to them, and framed messages.
///
/// Workers are new programs, never forks of the tuner (DESIGN invariant 7):
/// Subprocess::spawn runs posix_spawn, so nothing of the parent's memory,
/// threads or locks reaches the child. What the child does get:
///  - its argv, and the parent's environment plus SpawnOptions::env (or only
///    SpawnOptions::env when inherit_env is false);
///  - stdin, stdout and stderr as chosen in SpawnOptions (by default a pipe
///    from the parent, a pipe to the parent, and a captured pipe), and no other
///    file descriptor: the parent's ends are close-on-exec and, on glibc, every
///    descriptor from 3 up is closed in the child;
///  - default signal dispositions and an empty signal mask, whatever the
///    parent ignores or blocks (an ignored SIGPIPE would otherwise survive exec);
///  - by default a process group of its own, so that kill() reaches whatever
///    it started too (a compiler and its sub-processes).
///
/// A Subprocess never leaves a zombie or a stray group behind: its destructor
/// kills the process group and reaps the child, and wait() kills what is left
/// of the group once the child itself has exited.
///
/// Captured streams are drained by the parent whenever it is inside one of
/// the blocking calls below (read_exact, write_all, wait), so a child that
/// writes a lot to stderr while the parent waits for its stdout cannot
/// deadlock. A kPipe stdout is only read when asked: a child must read its
/// whole request before it writes a long reply (as tensortune-worker does),
/// or a parent writing a long request must interleave reads. A captured stream keeps its first and
/// last kCaptureKeepBytes / 2 bytes, and notes how much it dropped between them.
///
/// Frames: a frame is an 8-byte little-endian unsigned length N followed by N
/// bytes of payload. A length above the reader's limit (kMaxFrameSize by
/// default) is rejected before anything is allocated, since it means the
/// stream is corrupt or the peer is not speaking this protocol. End of stream
/// before the first byte of a frame is the normal end (read_frame returns
/// std::nullopt); end of stream inside a frame is an error naming the number
/// of missing bytes.
///
/// SIGPIPE: writers here never raise SIGPIPE and never change the process's
/// disposition for it. During a write the calling thread blocks SIGPIPE, and a
/// SIGPIPE the write itself raised is consumed (sigtimedwait) before the mask
/// is restored; the write then fails with EPIPE, reported as an Error.
///
/// Errors are tensortune::Error of kind kIO naming the operation, the
/// syscall and the errno text; a timeout is a TimeoutError (also kIO) so that
/// callers can tell it apart by type.
///
/// A Subprocess is not thread-safe: one thread at a time drives it.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "tensortune/support/error.h"

namespace tensortune {

/// How long a blocking call may wait; std::nullopt waits for ever.
using Timeout = std::optional<std::chrono::milliseconds>;

/// Largest frame payload accepted by default: 1 GiB.
inline constexpr uint64_t kMaxFrameSize = uint64_t{1} << 30;

/// How much of a captured stream is kept (its head and its tail, half each).
inline constexpr size_t kCaptureKeepBytes = size_t{1} << 20;

namespace detail {
/// When a blocking call gives up: never, or `timeout` after it started.
struct Deadline {
  std::optional<std::chrono::steady_clock::time_point> at;
  std::chrono::milliseconds timeout{0};
  /// The deadline `timeout` from now (none for std::nullopt).
  static Deadline after(Timeout timeout);
  /// True once the deadline has passed (never for no deadline).
  bool passed() const;
  /// Milliseconds left, rounded up, for poll(2): -1 for no deadline, else >= 0.
  int poll_ms() const;
};
}  // namespace detail

/// A blocking call ran out of time. Kind kIO; the message names the operation.
class TimeoutError : public UserError {
 public:
  explicit TimeoutError(const std::string& message) : UserError(ErrorKind::kIO, message) {}
};

/// Owns a file descriptor and closes it on destruction; -1 when empty.
class UniqueFd {
 public:
  UniqueFd() = default;
  /// Takes ownership of `fd` (which may be -1).
  explicit UniqueFd(int fd) : fd_(fd) {}
  UniqueFd(UniqueFd&& other) noexcept : fd_(other.release()) {}
  UniqueFd& operator=(UniqueFd&& other) noexcept;
  UniqueFd(const UniqueFd&) = delete;
  UniqueFd& operator=(const UniqueFd&) = delete;
  ~UniqueFd() { reset(); }

  /// The descriptor, or -1.
  int get() const { return fd_; }
  explicit operator bool() const { return fd_ >= 0; }
  /// Gives up ownership and returns the descriptor.
  int release() {
    int fd = fd_;
    fd_ = -1;
    return fd;
  }
  /// Closes the descriptor (EINTR from close is not retried: the fd is gone on Linux).
  void reset(int fd = -1);

 private:
  int fd_ = -1;
};

/// What one of the child's standard streams is connected to.
enum class StreamMode {
  kPipe,     ///< a pipe to or from the parent, driven with write_all / read_exact / frames
  kCapture,  ///< (stdout, stderr) a pipe the parent drains into a buffer: stdout_text / stderr_text
  kInherit,  ///< the parent's own stream
  kNull,     ///< /dev/null
};

/// How to start a child.
struct SpawnOptions {
  /// Variables set in the child, replacing the parent's value of the same name.
  std::vector<std::pair<std::string, std::string>> env;
  /// Start from the parent's environment (true) or from `env` alone (false).
  bool inherit_env = true;
  /// Put the child in a new process group, so kill() also reaches its own children.
  bool new_process_group = true;
  /// Working directory of the child; empty keeps the parent's.
  std::string working_dir;
  StreamMode stdin_mode = StreamMode::kPipe;      ///< kPipe, kInherit or kNull
  StreamMode stdout_mode = StreamMode::kPipe;     ///< any mode
  StreamMode stderr_mode = StreamMode::kCapture;  ///< kCapture, kInherit or kNull
  /// A short name for messages (default: the base name of argv[0]).
  std::string name;
};

/// How a child ended.
struct ExitStatus {
  int code = 0;    ///< the exit code, when it exited
  int signal = 0;  ///< the signal that terminated it, or 0 if it exited
  /// True if it exited (with any code) rather than being killed by a signal.
  bool exited() const { return signal == 0; }
  /// True if it exited with code 0.
  bool success() const { return signal == 0 && code == 0; }
  /// "exit code 3" or "signal 9 (Killed)".
  std::string str() const;
  bool operator==(const ExitStatus&) const = default;
};

/// A running (or finished, not yet destroyed) child process. Move-only.
class Subprocess {
 public:
  /// Starts `argv` (argv[0] is searched in the parent's PATH when it has no
  /// '/'). Throws kInvalidArgument for empty argv or a mode a stream cannot
  /// have, and kIO when posix_spawn fails (e.g. no such program).
  static Subprocess spawn(const std::vector<std::string>& argv, const SpawnOptions& options = {});

  Subprocess(Subprocess&& other) noexcept;
  Subprocess& operator=(Subprocess&& other) noexcept;
  Subprocess(const Subprocess&) = delete;
  Subprocess& operator=(const Subprocess&) = delete;
  /// Kills the process group (SIGKILL) if the child still runs, then reaps it.
  ~Subprocess();

  /// The child's process id (still valid for messages after it was reaped).
  pid_t pid() const { return pid_; }
  /// "name (pid N)", for messages.
  std::string describe() const;

  /// Writes all of `data` to the child's stdin (kPipe). Throws kIO if the
  /// child closed it (EPIPE) and TimeoutError when `timeout` passes first.
  void write_all(std::string_view data, Timeout timeout = std::nullopt);
  /// Reads exactly `size` bytes of the child's stdout (kPipe) into `out`.
  /// Returns false on end of stream before the first byte; end of stream
  /// after it is a kIO error naming the missing byte count. TimeoutError
  /// when `timeout` passes first.
  bool read_exact(char* out, size_t size, Timeout timeout = std::nullopt);
  /// Closes the child's stdin, so that it sees end of stream. Idempotent.
  void close_stdin();

  /// Sends one frame to the child's stdin; see the file comment.
  void write_frame(std::string_view payload, Timeout timeout = std::nullopt);
  /// Reads one frame from the child's stdout; std::nullopt at a clean end of
  /// stream. `timeout` bounds the whole frame, header and payload.
  std::optional<std::string> read_frame(Timeout timeout = std::nullopt,
                                        uint64_t max_size = kMaxFrameSize);

  /// Waits for the child to exit and reaps it, draining captured streams
  /// meanwhile; then kills what is left of its process group. Returns the
  /// same status when called again.
  ExitStatus wait();
  /// wait() for at most `timeout`; std::nullopt if the child still runs then.
  std::optional<ExitStatus> wait_for(std::chrono::milliseconds timeout);
  /// The status if the child has exited (reaping it), std::nullopt if it still runs.
  std::optional<ExitStatus> try_wait();
  /// True until the child has been reaped.
  bool running() const { return !status_; }

  /// Sends `signal` to the child's process group (or to the child alone when
  /// it has no group of its own; to the child as well when it left its group).
  /// Does nothing once the child has been reaped.
  void kill(int signal);

  /// What the child wrote to stderr so far (kCapture), draining what is ready.
  std::string stderr_text();
  /// stderr_text(), then forgets it: the next call returns only what came
  /// after (a long-lived worker's stderr, request by request).
  std::string take_stderr_text();
  /// What the child wrote to stdout so far (kCapture), draining what is ready.
  std::string stdout_text();

 private:
  struct Capture {
    UniqueFd fd;
    std::string head, tail;  ///< first and last kCaptureKeepBytes / 2 bytes
    uint64_t dropped = 0;    ///< bytes dropped between head and tail
    void append(const char* data, size_t size);
    std::string text() const;
  };

  Subprocess() = default;
  /// Reads whatever is ready on the captured streams without blocking.
  void drain_captures();
  /// Waits until `fd` (may be -1) has `events`, draining the captured streams
  /// meanwhile; false when the deadline passed first.
  bool poll_with_captures(int fd, short events, const detail::Deadline& deadline);
  /// Writes all of `data` to stdin before `deadline`.
  void write_stdin(std::string_view data, const detail::Deadline& deadline);
  /// Reads up to `size` bytes of stdout, stopping early only at end of stream.
  size_t read_stdout(char* out, size_t size, const detail::Deadline& deadline);
  std::optional<ExitStatus> wait_until(const detail::Deadline& deadline);
  /// Reaps the child if it has exited (killing the rest of its group first).
  bool reap_if_exited();
  /// Sends `signal` to the group, and to the child itself if it left the group.
  int signal_child(int signal) noexcept;
  void destroy() noexcept;

  pid_t pid_ = -1;
  std::string name_;
  bool own_group_ = false;
  std::optional<ExitStatus> status_;
  UniqueFd stdin_;
  UniqueFd stdout_;
  UniqueFd pidfd_;  ///< readable once the child exits; empty where pidfd_open is unavailable
  Capture stdout_capture_;
  Capture stderr_capture_;
};

/// The outcome of run_captured.
struct RunResult {
  ExitStatus status;
  bool timed_out = false;  ///< the child was killed because `timeout` passed
  std::string out, err;    ///< captured stdout and stderr
};

/// Runs `argv` to completion with stdin from /dev/null and stdout and stderr
/// captured; after `timeout` the process group is killed (timed_out is set).
RunResult run_captured(const std::vector<std::string>& argv, SpawnOptions options = {},
                       Timeout timeout = std::nullopt);

/// Writes all of `data` to `fd`, retrying on EINTR and short writes, without
/// raising SIGPIPE. Throws kIO naming `what` (e.g. "worker stdout") on error.
void write_all(int fd, std::string_view data, std::string_view what = "fd");

/// Reads exactly `size` bytes from `fd`. Returns false on end of stream before
/// the first byte; end of stream after it is a kIO error naming the missing
/// byte count. With a timeout, TimeoutError when it passes first.
bool read_exact(int fd, char* out, size_t size, Timeout timeout = std::nullopt,
                std::string_view what = "fd");

/// Writes one frame (8-byte little-endian length, then the payload) to `fd`.
/// A payload above kMaxFrameSize is a kInvalidArgument error.
void write_frame(int fd, std::string_view payload, std::string_view what = "fd");

/// Reads one frame from `fd`; std::nullopt at a clean end of stream (before
/// the first header byte). `timeout` bounds the whole frame. A length above
/// `max_size`, or end of stream inside the frame, is a kIO error.
std::optional<std::string> read_frame(int fd, Timeout timeout = std::nullopt,
                                      uint64_t max_size = kMaxFrameSize,
                                      std::string_view what = "fd");

}  // namespace tensortune
