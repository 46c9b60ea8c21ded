// tensortune-worker: the build/measure worker, started by the tuner with
// posix_spawn. It reads framed requests on stdin and writes one framed reply
// per request on stdout (support/subprocess.h describes frames); stdout
// carries nothing else, and diagnostics go to stderr, which the parent
// captures into its error messages.
//
// Modes:
//   --roundtrip  each request is a saved object graph; the reply is the same
//                graph loaded and saved again, or {"error": ..., "kind": ...}
//                for a request that does not load. Used by the process-boundary
//                tests to check that values survive a real process boundary.
//
// Exit status: 0 at end of input, 1 when the stream itself breaks (a torn
// frame, a closed stdout), 2 for bad command-line arguments.
#include <cstdio>
#include <exception>
#include <string>
#include <string_view>

#include "tensortune/object/serialize.h"
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

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2 || std::string_view(argv[1]) != "--roundtrip") {
    std::fprintf(stderr, "usage: tensortune-worker --roundtrip\n");
    return 2;
  }
  try {
    while (auto request = tensortune::read_frame(0, std::nullopt, tensortune::kMaxFrameSize,
                                                 "worker stdin")) {
      tensortune::write_frame(1, roundtrip_reply(*request), "worker stdout");
    }
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "tensortune-worker: %s\n", e.what());
    return 1;
  }
}
