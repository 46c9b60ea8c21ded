// tensortune-worker: the build/measure worker, started by the tuner with
// posix_spawn. It reads framed requests on stdin and writes one framed reply
// per request on stdout (support/subprocess.h describes frames); stdout
// carries nothing else, and diagnostics go to stderr, which the parent
// captures into its error messages.
//
// Modes:
//   --serve [--parent-pid P] [--memory-limit-bytes N]
//                build and run requests (measure/protocol.h, served by
//                measure/worker_service.h). With --parent-pid the worker
//                kills its whole process group (itself and any compiler it
//                runs) when its parent dies, and exits at once if P is already
//                gone; with --memory-limit-bytes it caps its own address
//                space, which its compilers and kernels inherit (a run request
//                caps it further, to what the candidate may need). Core dumps
//                are always off.
//   --roundtrip  each request is a saved object graph; the reply is the same
//                graph loaded and saved again, or {"error": ..., "kind": ...}
//                for a request that does not load. Used by the process-boundary
//                tests to check that values survive a real process boundary.
//
// Exit status: 0 at end of input, 1 when the stream itself breaks (a torn
// frame, a closed stdout), 2 for bad command-line arguments.
#include <sys/resource.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string>
#include <string_view>

#include "tensortune/measure/worker_service.h"
#include "tensortune/object/serialize.h"
#include "tensortune/support/build_info.h"
#include "tensortune/support/subprocess.h"

namespace {

using tensortune::Error;
using tensortune::ErrorKind;

/// {"error": message, "kind": kind name}. Messages may quote a cut-off piece
/// of the request, so invalid UTF-8 is replaced rather than thrown on.
std::string error_reply(std::string_view message, ErrorKind kind) {
  return nlohmann::json{{"error", message}, {"kind", tensortune::error_kind_name(kind)}}.dump(
      -1, ' ', false, nlohmann::json::error_handler_t::replace);
}

/// The reply to one round-trip request: every failure is data, not an exit.
std::string roundtrip_reply(std::string_view request) {
  try {
    return tensortune::save_string(tensortune::load_string(request));
  } catch (const Error& e) {
    return error_reply(e.what(), e.kind());
  } catch (const std::exception& e) {
    // Anything else is a bug in tensortune; the worker reports it and goes on.
    return error_reply(std::string("unexpected exception: ") + e.what(), ErrorKind::kInternal);
  }
}

/// Parses a non-negative integer argument; exits with status 2 when it is not one.
unsigned long long parse_count(const char* flag, const char* text) {
  char* end = nullptr;
  unsigned long long value = std::strtoull(text, &end, 10);
  if (!*text || *end) {
    std::fprintf(stderr, "tensortune-worker: %s takes a non-negative integer, got '%s'\n", flag,
                 text);
    std::exit(2);
  }
  return value;
}

/// Applies --parent-pid and --memory-limit-bytes to this process.
void confine(pid_t parent, unsigned long long memory_limit) {
  if (parent > 0) tensortune::measure::die_with_parent(parent);
  // No core files: a crashing candidate is routine here, and dumping a
  // large address space would take longer than the run timeout allows.
  struct rlimit no_core {};
  if (setrlimit(RLIMIT_CORE, &no_core) != 0)
    std::perror("tensortune-worker: setrlimit(RLIMIT_CORE)");
  if (memory_limit > 0 && !tensortune::kAddressSanitizer) {
    struct rlimit limit {};
    limit.rlim_cur = limit.rlim_max = memory_limit;
    if (setrlimit(RLIMIT_AS, &limit) != 0) std::perror("tensortune-worker: setrlimit");
  }
}

int usage() {
  std::fprintf(stderr,
               "usage: tensortune-worker --serve [--parent-pid P] [--memory-limit-bytes N]\n"
               "       tensortune-worker --roundtrip\n");
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) return usage();
  std::string_view mode = argv[1];
  if (mode != "--serve" && mode != "--roundtrip") return usage();
  pid_t parent = 0;
  unsigned long long memory_limit = 0;
  for (int i = 2; i < argc; ++i) {
    std::string_view flag = argv[i];
    if (i + 1 >= argc || mode != "--serve") return usage();
    if (flag == "--parent-pid") {
      parent = static_cast<pid_t>(parse_count(argv[i], argv[i + 1]));
    } else if (flag == "--memory-limit-bytes") {
      memory_limit = parse_count(argv[i], argv[i + 1]);
    } else {
      return usage();
    }
    ++i;
  }
  confine(parent, memory_limit);
  // Frames go to a private copy of stdout, and fd 1 becomes stderr: whatever
  // a kernel or library prints cannot corrupt the reply stream, and lands in
  // the error messages the pool quotes.
  int replies = dup(1);
  if (replies < 0 || dup2(2, 1) < 0) {
    std::perror("tensortune-worker: dup");
    return 1;
  }
  try {
    while (auto request =
               tensortune::read_frame(0, std::nullopt, tensortune::kMaxFrameSize, "worker stdin")) {
      std::string reply = mode == "--serve" ? tensortune::measure::serve_request(*request)
                                            : roundtrip_reply(*request);
      tensortune::write_frame(replies, reply, "worker stdout");
    }
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "tensortune-worker: %s\n", e.what());
    return 1;
  }
}
