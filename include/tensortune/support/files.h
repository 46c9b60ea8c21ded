/// \file
/// Files that several processes read and write at once (caches of compiled
/// modules and reference outputs, record logs), and the rules that make
/// them safe to read back: a cache lives in a directory private to the
/// user, and each entry carries the SHA-256 it is checked against.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace tensortune {

/// A suffix no other writer uses (this process id and a counter), for a
/// temporary file next to the one being written.
std::string unique_temp_suffix();

/// Writes `bytes` to `path` through a temporary file and a rename, so readers
/// see either no file or the whole of it. kIO error naming the path on failure.
void write_file_atomically(const std::string& path, std::string_view bytes);

/// The whole file, or nullopt when it cannot be opened.
std::optional<std::string> read_file_if_exists(const std::string& path);

/// Whether `inner` is `outer` or lies inside it, both resolved (absolute,
/// symbolic links followed as far as they exist); false when either cannot
/// be resolved. How every command checks that an output is not an input.
bool path_is_within(const std::string& inner, const std::string& outer);

/// Creates `dir` and its missing parents with mode 0700, then checks that
/// `dir` is a directory owned by this user that neither group nor others
/// may write: otherwise a kIO error naming `what`, the path, its owner and
/// its mode, since another user could then plant what is read from it.
void ensure_private_dir(const std::string& dir, std::string_view what);

/// Removes the temporary files and scratch directories (NAME.tmp.PID.N,
/// unique_temp_suffix) in `dir` whose process no longer runs: what a killed
/// writer left.
void remove_stale_temp_files(const std::string& dir);

/// A directory `parent`/NAME.tmp.PID.N, mode 0700, for a child process's
/// own temporary files (its TMPDIR), so none lands in a shared /tmp. It is
/// removed with the files in it when this object is destroyed;
/// remove_stale_temp_files removes one whose process was killed.
class ScratchDir {
 public:
  ScratchDir(const std::string& parent, std::string_view name);
  ~ScratchDir();
  ScratchDir(const ScratchDir&) = delete;
  ScratchDir& operator=(const ScratchDir&) = delete;
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

/// Writes a cache entry: `bytes` at `path` and their SHA-256 at
/// `path`.sha256, each through write_file_atomically.
void write_cache_entry(const std::string& path, std::string_view bytes);

/// The bytes of the cache entry at `path`, or nullopt when it is missing,
/// incomplete, or does not match the SHA-256 written with it.
std::optional<std::string> read_cache_entry(const std::string& path);

/// Appends the rest of `fd` to `out`; false with errno set on failure.
bool read_all(int fd, std::string& out);

/// Owns a file descriptor: closes it when destroyed.
class FileDescriptor {
 public:
  explicit FileDescriptor(int fd = -1) : fd_(fd) {}
  ~FileDescriptor();
  FileDescriptor(FileDescriptor&& other) noexcept : fd_(other.release()) {}
  FileDescriptor& operator=(FileDescriptor&& other) noexcept;
  int get() const { return fd_; }
  int release() {
    int fd = fd_;
    fd_ = -1;
    return fd;
  }

 private:
  int fd_;
};

/// An advisory lock (flock) on an open file, held while the object lives.
/// Blocks until granted; a kIO error naming `path` when it cannot be taken.
class FileLock {
 public:
  enum Mode { kShared, kExclusive };
  FileLock(int fd, Mode mode, const std::string& path);
  ~FileLock();
  FileLock(const FileLock&) = delete;
  FileLock& operator=(const FileLock&) = delete;

 private:
  int fd_;
};

}  // namespace tensortune
