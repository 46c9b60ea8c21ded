#include "tensortune/support/error.h"

namespace tensortune {

std::string_view error_kind_name(ErrorKind kind) {
  switch (kind) {
    case ErrorKind::kInvalidArgument: return "invalid argument";
    case ErrorKind::kNotFound: return "not found";
    case ErrorKind::kParse: return "parse error";
    case ErrorKind::kTypeMismatch: return "type mismatch";
    case ErrorKind::kIO: return "i/o error";
    case ErrorKind::kRuntime: return "runtime error";
    case ErrorKind::kInternal: return "internal error";
  }
  return "error";
}

namespace detail {
void throw_internal(const char* file, int line, const char* cond, const std::string& message) {
  throw Error(ErrorKind::kInternal, concat("internal error at ", file, ":", line, ": check '", cond,
                                           "' failed", message.empty() ? "" : ": ", message,
                                           " (this is a bug in tensortune; please report it)"));
}
}  // namespace detail

}  // namespace tensortune
