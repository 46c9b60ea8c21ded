#include "tensortune/support/files.h"

#include <dirent.h>
#include <fcntl.h>
#include <pwd.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "tensortune/support/error.h"
#include "tensortune/support/hash.h"
#include "tensortune/support/subprocess.h"

namespace tensortune {

std::string unique_temp_suffix() {
  static std::atomic<uint64_t> counter{0};
  return ".tmp." + std::to_string(::getpid()) + "." + std::to_string(counter++);
}

namespace {

/// Tries `make` on `stem` + unique_temp_suffix() until it does not fail
/// with EEXIST (a few times at most); returns its result, `name` the last
/// name tried. A name this process never handed out before can still be
/// taken: by a killed process of the same id (a container's process 1,
/// which the sweep keeps, since that id runs), or by a live one of another
/// id namespace sharing the directory. Neither is touched: the next suffix.
template <class Make>
int with_fresh_name(const std::string& stem, std::string& name, Make make) {
  int rc = -1;
  for (int attempt = 0; attempt < 64; ++attempt) {
    name = stem + unique_temp_suffix();
    rc = make(name);
    if (rc >= 0 || errno != EEXIST) break;
  }
  return rc;
}

}  // namespace

void write_file_atomically(const std::string& path, std::string_view bytes) {
  std::string temp;
  // O_EXCL: never through a file or link that someone else put there.
  int fd = with_fresh_name(path, temp, [](const std::string& name) {
    return ::open(name.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0644);
  });
  TT_CHECK(fd >= 0, kIO, "cannot create '", temp, "': ", std::strerror(errno));
  try {
    write_all(fd, bytes, temp);
  } catch (...) {
    ::close(fd);
    ::unlink(temp.c_str());
    throw;
  }
  if (::close(fd) != 0) {
    int err = errno;
    ::unlink(temp.c_str());
    fail(ErrorKind::kIO, "cannot write '", temp, "': ", std::strerror(err));
  }
  if (std::rename(temp.c_str(), path.c_str()) != 0) {
    int err = errno;
    ::unlink(temp.c_str());
    fail(ErrorKind::kIO, "cannot rename '", temp, "' to '", path, "': ", std::strerror(err));
  }
}

std::optional<std::string> read_file_if_exists(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return std::nullopt;
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

void ensure_private_dir(const std::string& dir, std::string_view what) {
  TT_CHECK(!dir.empty(), kIO, what, ": the directory name is empty");
  for (size_t i = 1; i <= dir.size(); ++i) {
    if (i < dir.size() && dir[i] != '/') continue;
    std::string partial = dir.substr(0, i);
    if (::mkdir(partial.c_str(), 0700) != 0 && errno != EEXIST) {
      fail(ErrorKind::kIO, "cannot create ", what, " '", partial, "': ", std::strerror(errno));
    }
  }
  struct stat st {};
  TT_CHECK(::stat(dir.c_str(), &st) == 0, kIO, "cannot use ", what, " '", dir,
           "': ", std::strerror(errno));
  TT_CHECK(S_ISDIR(st.st_mode), kIO, what, " '", dir, "' is not a directory");
  if (st.st_uid != ::geteuid() || (st.st_mode & (S_IWGRP | S_IWOTH))) {
    char mode[8];
    std::snprintf(mode, sizeof mode, "%04o", static_cast<unsigned>(st.st_mode & 07777));
    struct passwd* pw = ::getpwuid(st.st_uid);
    fail(ErrorKind::kIO, what, " '", dir, "' is owned by ",
         pw ? std::string(pw->pw_name) : "uid " + std::to_string(st.st_uid), " with mode ", mode,
         "; tensortune uses only a directory owned by you (uid ", ::geteuid(),
         ") that no one else may write, since it loads code from it. Remove it, or set "
         "XDG_CACHE_HOME to a directory of your own");
  }
}

namespace {

/// Removes the directory `name` (relative to `parent_fd`) and the files in
/// it; what tensortune's children write there has no subdirectories, and
/// links are removed, never followed.
void remove_flat_dir(int parent_fd, const char* name) {
  int fd = ::openat(parent_fd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) return;
  if (DIR* d = ::fdopendir(fd)) {
    // Again while a pass removes something: a directory read while entries
    // go may skip some.
    for (bool removed = true; removed;) {
      removed = false;
      ::rewinddir(d);
      while (struct dirent* e = ::readdir(d)) {
        if (std::strcmp(e->d_name, ".") != 0 && std::strcmp(e->d_name, "..") != 0) {
          removed |= ::unlinkat(::dirfd(d), e->d_name, 0) == 0;
        }
      }
    }
    ::closedir(d);  // closes fd
  } else {
    ::close(fd);
  }
  ::unlinkat(parent_fd, name, AT_REMOVEDIR);
}

}  // namespace

void remove_stale_temp_files(const std::string& dir) {
  DIR* d = ::opendir(dir.c_str());
  if (!d) return;
  while (struct dirent* e = ::readdir(d)) {
    std::string_view name = e->d_name;
    size_t at = name.rfind(".tmp.");
    if (at == std::string_view::npos) continue;
    std::string_view rest = name.substr(at + 5);  // PID.N
    size_t dot = rest.find('.');
    if (dot == std::string_view::npos || dot == 0) continue;
    long long pid = 0;
    bool digits = true;
    for (char c : rest.substr(0, dot)) {
      digits &= c >= '0' && c <= '9';
      pid = pid * 10 + (c - '0');
      if (pid > 1 << 30) digits = false;
    }
    if (!digits || pid <= 0) continue;
    if (::kill(static_cast<pid_t>(pid), 0) == 0 || errno != ESRCH) continue;  // still running
    if (::unlinkat(::dirfd(d), e->d_name, 0) != 0 && errno == EISDIR) {
      remove_flat_dir(::dirfd(d), e->d_name);
    }
  }
  ::closedir(d);
}

ScratchDir::ScratchDir(const std::string& parent, std::string_view name) {
  int rc = with_fresh_name(parent + "/" + std::string(name), path_,
                           [](const std::string& dir) { return ::mkdir(dir.c_str(), 0700); });
  TT_CHECK(rc == 0, kIO, "cannot create the scratch directory '", path_,
           "': ", std::strerror(errno));
}

ScratchDir::~ScratchDir() { remove_flat_dir(AT_FDCWD, path_.c_str()); }

void write_cache_entry(const std::string& path, std::string_view bytes) {
  // The data first: a reader that finds the digest finds the data it names.
  write_file_atomically(path, bytes);
  write_file_atomically(path + ".sha256", sha256_hex(bytes));
}

std::optional<std::string> read_cache_entry(const std::string& path) {
  std::optional<std::string> digest = read_file_if_exists(path + ".sha256");
  if (!digest) return std::nullopt;
  std::optional<std::string> bytes = read_file_if_exists(path);
  if (!bytes || sha256_hex(*bytes) != *digest) return std::nullopt;
  return bytes;
}

bool read_all(int fd, std::string& out) {
  char buffer[1 << 16];
  for (;;) {
    ssize_t n = ::read(fd, buffer, sizeof buffer);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return false;
    if (n == 0) return true;
    out.append(buffer, static_cast<size_t>(n));
  }
}

FileDescriptor::~FileDescriptor() {
  if (fd_ >= 0) ::close(fd_);
}

FileDescriptor& FileDescriptor::operator=(FileDescriptor&& other) noexcept {
  if (this != &other) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = other.release();
  }
  return *this;
}

FileLock::FileLock(int fd, Mode mode, const std::string& path) : fd_(fd) {
  int op = mode == kExclusive ? LOCK_EX : LOCK_SH;
  while (::flock(fd, op) != 0) {
    if (errno == EINTR) continue;
    fail(ErrorKind::kIO, "cannot lock '", path, "': ", std::strerror(errno));
  }
}

FileLock::~FileLock() { ::flock(fd_, LOCK_UN); }

bool path_is_within(const std::string& inner, const std::string& outer) {
  namespace fs = std::filesystem;
  std::error_code ec;
  fs::path a = fs::weakly_canonical(fs::absolute(inner), ec);
  if (ec) return false;
  fs::path b = fs::weakly_canonical(fs::absolute(outer), ec);
  if (ec) return false;
  auto [i, o] = std::mismatch(a.begin(), a.end(), b.begin(), b.end());
  return o == b.end();
}

}  // namespace tensortune
