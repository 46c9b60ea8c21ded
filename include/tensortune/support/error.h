/// \file
/// The two error families of tensortune: user errors (bad input, reported as
/// one clear line naming what was wrong and what would be valid) and internal
/// errors (a broken invariant of tensortune itself: a bug).
#pragma once

#include <sstream>
#include <stdexcept>
#include <string>
#include <string_view>

namespace tensortune {

/// What kind of mistake a user error reports; tests assert on it.
enum class ErrorKind {
  kInvalidArgument,  ///< a value is out of its valid set
  kNotFound,         ///< a name is not registered / a file does not exist
  kParse,            ///< text or JSON could not be read
  kTypeMismatch,     ///< a value has the wrong type
  kIO,               ///< the operating system refused a file or process operation
  kRuntime,          ///< something failed while running (a compiler, a kernel)
  kInternal,         ///< a tensortune invariant broke: a bug
};

/// Name of an error kind, e.g. "invalid argument".
std::string_view error_kind_name(ErrorKind kind);

/// The base of both error families; only a program's outermost handler
/// catches it.
class Error : public std::runtime_error {
 public:
  ErrorKind kind() const { return kind_; }

 protected:
  Error(ErrorKind kind, const std::string& message) : std::runtime_error(message), kind_(kind) {}

 private:
  ErrorKind kind_;
};

/// Bad input, or a candidate that fails: what the user is told about, and
/// what a candidate boundary catches.
class UserError : public Error {
 public:
  UserError(ErrorKind kind, const std::string& message);
};

/// A broken invariant of tensortune (kind kInternal): a bug, never caught
/// as a candidate's failure.
class InternalError : public Error {
 public:
  explicit InternalError(const std::string& message) : Error(ErrorKind::kInternal, message) {}
};

namespace detail {
template <class... Parts>
std::string concat(const Parts&... parts) {
  std::ostringstream os;
  (os << ... << parts);
  return os.str();
}
[[noreturn]] void throw_internal(const char* file, int line, const char* cond,
                                 const std::string& message);
}  // namespace detail

/// Throws an error whose message is the concatenation of `parts`: an
/// InternalError for kInternal (an error a worker reported, rethrown), a
/// UserError otherwise.
template <class... Parts>
[[noreturn]] void fail(ErrorKind kind, const Parts&... parts) {
  if (kind == ErrorKind::kInternal) throw InternalError(detail::concat(parts...));
  throw UserError(kind, detail::concat(parts...));
}

}  // namespace tensortune

/// Checks an internal invariant; on failure throws an InternalError with file:line.
#define TT_ICHECK(cond, ...)                                                                       \
  do {                                                                                             \
    if (!(cond))                                                                                   \
      ::tensortune::detail::throw_internal(                                                        \
          __FILE__, __LINE__, #cond, ::tensortune::detail::concat("" __VA_OPT__(, ) __VA_ARGS__)); \
  } while (0)

/// Checks a condition on user input; on failure throws a user error of `kind`.
#define TT_CHECK(cond, kind, ...)                                                \
  do {                                                                           \
    if (!(cond)) ::tensortune::fail(::tensortune::ErrorKind::kind, __VA_ARGS__); \
  } while (0)
