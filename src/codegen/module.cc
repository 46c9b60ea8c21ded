#include "tensortune/codegen/module.h"

#include <dlfcn.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>

#include "codegen/words.h"
#include "tensortune/codegen/c_codegen.h"
#include "tensortune/support/files.h"
#include "tensortune/support/hash.h"
#include "tensortune/support/strings.h"
#include "tensortune/support/subprocess.h"

namespace tensortune::codegen {

/// A dlopen handle, closed when the last module copy using it goes.
struct Module::Library {
  void* handle = nullptr;
  std::string path;
  ~Library() {
    if (handle) dlclose(handle);
  }
};

namespace {

/// How much of the compiler's stderr an error message quotes.
constexpr size_t kMaxDiagnosticBytes = 16 * 1024;
/// How many generated source lines an error message quotes.
constexpr size_t kMaxQuotedLines = 8;

bool file_exists(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

/// Creates `dir` and its missing parents (like mkdir -p), private to the user.
void make_dirs(const std::string& dir) {
  std::string partial;
  for (size_t i = 0; i <= dir.size(); ++i) {
    if (i < dir.size() && dir[i] != '/') continue;
    partial = dir.substr(0, i);
    if (partial.empty()) continue;
    if (::mkdir(partial.c_str(), 0700) != 0 && errno != EEXIST) {
      fail(ErrorKind::kIO, "cannot create the module cache directory '", partial,
           "': ", std::strerror(errno));
    }
  }
  struct stat st {};
  TT_CHECK(::stat(dir.c_str(), &st) == 0 && S_ISDIR(st.st_mode), kIO, "module cache '", dir,
           "' is not a directory");
}

std::string hex(uint64_t v) {
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(v));
  return buf;
}

/// The cache key: 128 bits from two differently seeded stable hashes.
std::string cache_key(const std::string& source, const std::vector<std::string>& compiler,
                      const std::vector<std::string>& flags) {
  std::string blob = "tensortune module v1";
  blob += '\0';
  blob += source;
  for (const auto* list : {&compiler, &flags}) {
    blob += '\0';
    for (const auto& word : *list) blob += word + '\x1f';
  }
  return hex(hash_string(blob)) + hex(hash_combine(0x6d6f64756c65ULL, hash_string("#" + blob)));
}

/// The lines of `source` that diagnostics about `source_path` name ("path:12:5: error: ...").
std::string quote_source_lines(const std::string& diagnostics, const std::string& source_path,
                               const std::string& source) {
  std::vector<int64_t> lines;
  std::string needle = source_path + ":";
  for (size_t at = diagnostics.find(needle); at != std::string::npos;
       at = diagnostics.find(needle, at + 1)) {
    size_t start = at + needle.size(), end = start;
    while (end < diagnostics.size() && std::isdigit(static_cast<unsigned char>(diagnostics[end]))) {
      ++end;
    }
    long long line = 0;
    if (end == start ||
        !parse_int(std::string_view(diagnostics).substr(start, end - start), &line)) {
      continue;
    }
    if (std::find(lines.begin(), lines.end(), line) == lines.end()) lines.push_back(line);
    if (lines.size() == kMaxQuotedLines) break;
  }
  if (lines.empty()) return "";
  std::vector<std::string> source_lines = split(source, '\n');
  std::string out = "\ngenerated source lines named by the compiler:";
  for (int64_t line : lines) {
    if (line < 1 || line > static_cast<int64_t>(source_lines.size())) continue;
    out += "\n  " + std::to_string(line) + " | " + source_lines[static_cast<size_t>(line - 1)];
  }
  return out;
}

std::string excerpt(const std::string& text) {
  if (text.size() <= kMaxDiagnosticBytes) return text;
  return text.substr(0, kMaxDiagnosticBytes) + "\n[... " +
         std::to_string(text.size() - kMaxDiagnosticBytes) + " more bytes of diagnostics]";
}

/// Runs the compiler; throws kRuntime with its diagnostics on any failure.
void run_compiler(const std::vector<std::string>& argv, const std::string& source_path,
                  const std::string& source, const ModuleOptions& options) {
  RunResult result;
  try {
    SpawnOptions spawn;
    spawn.new_process_group = options.compiler_in_own_group;
    result = run_captured(argv, spawn, options.compile_timeout);
  } catch (const Error& e) {
    fail(ErrorKind::kRuntime, "cannot run the C compiler '", argv[0], "': ", e.what());
  }
  std::string command = join(argv, " ");
  if (result.timed_out) {
    fail(ErrorKind::kRuntime, "the C compiler ran longer than ", options.compile_timeout.count(),
         " ms and was killed: ", command, "\n", excerpt(result.err));
  }
  if (!result.status.success()) {
    std::string diagnostics = result.err + result.out;
    fail(ErrorKind::kRuntime, "compiling ", source_path, " failed (", result.status.str(),
         "): ", command, "\n", excerpt(diagnostics),
         quote_source_lines(diagnostics, source_path, source));
  }
}

/// OpenMP runtimes keep their worker threads after a parallel region ends.
/// Unloading the runtime together with the last module that needed it would
/// unmap the code those threads sleep in, and crash the process later; so a
/// runtime that a module brought in stays loaded (RTLD_NOLOAD: nothing is
/// loaded that is not there already, and the handle is never closed).
void pin_openmp_runtime() {
  for (const char* runtime : {"libgomp.so.1", "libomp.so", "libomp.so.5", "libiomp5.so"}) {
    ::dlopen(runtime, RTLD_LAZY | RTLD_NOLOAD | RTLD_NODELETE);
  }
}

}  // namespace

std::string default_cache_dir() {
  const char* xdg = std::getenv("XDG_CACHE_HOME");
  if (xdg && *xdg) return std::string(xdg) + "/tensortune";
  return "/tmp/tensortune-cache-" + std::to_string(::getuid());
}

Module Module::load(const std::string& library_path) {
  ::dlerror();
  void* handle = ::dlopen(library_path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!handle) {
    const char* why = ::dlerror();
    fail(ErrorKind::kRuntime, "cannot load '", library_path, "': ", why ? why : "unknown error");
  }
  pin_openmp_runtime();
  auto library = std::make_shared<Library>();
  library->handle = handle;
  library->path = library_path;
  Module m;
  m.library_ = std::move(library);
  return m;
}

Module Module::compile(const std::string& source, const std::vector<std::string>& compiler,
                       const std::vector<std::string>& flags, const ModuleOptions& options) {
  TT_CHECK(!compiler.empty() && !compiler[0].empty(), kInvalidArgument,
           "the C compiler command is empty");
  std::string dir = options.cache_dir.empty() ? default_cache_dir() : options.cache_dir;
  make_dirs(dir);
  std::string stem = dir + "/tt-" + cache_key(source, compiler, flags);
  std::string source_path = stem + ".c", library_path = stem + ".so";

  if (file_exists(library_path)) {
    try {
      Module m = load(library_path);
      m.source_path_ = source_path;
      m.from_cache_ = true;
      return m;
    } catch (const Error&) {
      // Unloadable (damaged by something outside tensortune): build it again below.
    }
  }

  write_file_atomically(source_path, source);
  std::string temp_library = library_path + unique_temp_suffix();
  // Libraries (-lm) go after the source: with --as-needed linkers, a library
  // named before the code that uses it is dropped.
  std::vector<std::string> argv = compiler, libraries;
  for (const auto& flag : flags) (starts_with(flag, "-l") ? libraries : argv).push_back(flag);
  argv.insert(argv.end(), {"-o", temp_library, source_path});
  argv.insert(argv.end(), libraries.begin(), libraries.end());
  try {
    run_compiler(argv, source_path, source, options);
  } catch (...) {
    std::remove(temp_library.c_str());
    throw;
  }
  if (std::rename(temp_library.c_str(), library_path.c_str()) != 0) {
    int err = errno;
    std::remove(temp_library.c_str());
    fail(ErrorKind::kIO, "cannot rename '", temp_library, "' to '", library_path,
         "': ", std::strerror(err));
  }
  Module m = load(library_path);
  m.source_path_ = source_path;
  return m;
}

const std::string& Module::library_path() const {
  TT_CHECK(library_, kInvalidArgument, "the module is empty");
  return library_->path;
}

void* Module::find(const std::string& symbol) const {
  void* address = ::dlsym(library_->handle, symbol.c_str());
  if (!address) return nullptr;
  // dlsym also searches the libraries this one depends on (libm's exp is
  // not a kernel): keep only symbols this library defines. glibc names an
  // object by the path it was opened with; the inode covers another path to it.
  Dl_info info{};
  if (!::dladdr(address, &info) || !info.dli_fname) return nullptr;
  if (library_->path == info.dli_fname) return address;
  struct stat a {
  }, b{};
  bool same_file = ::stat(info.dli_fname, &a) == 0 && ::stat(library_->path.c_str(), &b) == 0 &&
                   a.st_ino == b.st_ino && a.st_dev == b.st_dev;
  return same_file ? address : nullptr;
}

KernelFn Module::get(const std::string& name) const {
  TT_CHECK(library_, kInvalidArgument, "get('", name, "') on an empty module");
  void* address = find(c_function_name(name));
  if (!address && c_function_name(name) != name) address = find(name);
  TT_CHECK(address, kNotFound, "no function '", name, "' in module ", library_->path);
  return reinterpret_cast<KernelFn>(address);
}

bool Module::has(const std::string& name) const {
  if (!library_) return false;
  return find(c_function_name(name)) || (c_function_name(name) != name && find(name));
}

}  // namespace tensortune::codegen
