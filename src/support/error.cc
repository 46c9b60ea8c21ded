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

UserError::UserError(ErrorKind kind, const std::string& message) : Error(kind, message) {
  // A bug must not pass for bad input: InternalError is the only kInternal.
  if (kind == ErrorKind::kInternal) {
    throw InternalError("internal error thrown as a user error: " + message);
  }
}

namespace detail {
void throw_internal(const char* file, int line, const char* cond, const std::string& message) {
  throw InternalError(concat("internal error at ", file, ":", line, ": check '", cond, "' failed",
                             message.empty() ? "" : ": ", message,
                             " (this is a bug in tensortune; please report it)"));
}
}  // namespace detail

}  // namespace tensortune
