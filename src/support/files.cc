#include "tensortune/support/files.h"

#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>

#include "tensortune/support/error.h"

namespace tensortune {

std::string unique_temp_suffix() {
  static std::atomic<uint64_t> counter{0};
  return ".tmp." + std::to_string(::getpid()) + "." + std::to_string(counter++);
}

void write_file_atomically(const std::string& path, std::string_view bytes) {
  std::string temp = path + unique_temp_suffix();
  {
    std::ofstream out(temp, std::ios::binary | std::ios::trunc);
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    out.close();
    if (!out) {
      std::remove(temp.c_str());
      fail(ErrorKind::kIO, "cannot write '", temp, "'");
    }
  }
  if (std::rename(temp.c_str(), path.c_str()) != 0) {
    int err = errno;
    std::remove(temp.c_str());
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

}  // namespace tensortune
