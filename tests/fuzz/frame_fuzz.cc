// libFuzzer harness for what a worker reads on its stdin: any bytes, read as
// frames (8-byte length, then the payload) with read_frame, and each payload
// decoded as a request with the object codec, as the worker decodes it
// before serving. Reading must end in frames, a clean end of stream or a
// user error; never a crash, a read past the bytes, an allocation of what
// the length claims before the bytes are there, or an internal error.
//
//   scripts/fuzz.sh [seconds]
#include <sys/mman.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>

#include "tensortune/measure/protocol.h"
#include "tensortune/object/serialize.h"
#include "tensortune/support/subprocess.h"

namespace {

[[noreturn]] void finding(const char* what, const char* detail) {
  std::fprintf(stderr, "frame_fuzz: %s: %s\n", what, detail);
  std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  // The bytes as a file the reader sees end after them, as a pipe would.
  int fd = ::memfd_create("frames", MFD_CLOEXEC);
  if (fd < 0) return 0;
  if (size > 0 && ::write(fd, data, size) != static_cast<ssize_t>(size)) {
    ::close(fd);
    return 0;
  }
  ::lseek(fd, 0, SEEK_SET);
  try {
    // A small limit, as a worker's own: lengths above it are refused unread.
    while (auto frame = tensortune::read_frame(fd, std::nullopt, 1 << 20, "fuzz input")) {
      try {
        tensortune::ObjectPtr request = tensortune::load_string(*frame);
        (void)tensortune::save_string(request);
      } catch (const tensortune::Error& e) {
        if (e.kind() == tensortune::ErrorKind::kInternal) finding("internal error", e.what());
      }
    }
  } catch (const tensortune::Error& e) {
    if (e.kind() == tensortune::ErrorKind::kInternal) finding("internal error", e.what());
  }
  ::close(fd);
  return 0;
}
