#include "tensortune/codegen/module.h"

#include <dlfcn.h>
#include <elf.h>
#include <fcntl.h>
#include <pwd.h>
#include <sys/mman.h>
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
#include <mutex>
#include <set>
#include <system_error>
#include <thread>

#include "codegen/words.h"
#include "tensortune/codegen/c_codegen.h"
#include "tensortune/support/files.h"
#include "tensortune/support/hash.h"
#include "tensortune/support/host_cpu.h"
#include "tensortune/support/strings.h"
#include "tensortune/support/subprocess.h"

namespace tensortune::codegen {

/// A dlopen handle, closed when the last module copy using it goes.
struct Module::Library {
  void* handle = nullptr;
  std::string path;    ///< the name it was opened by (what dladdr reports)
  std::string file;    ///< the file its bytes came from
  std::string sha256;  ///< of those bytes
  int memory_fd = -1;  ///< the anonymous file of load_bytes
  ~Library() {
    if (handle) dlclose(handle);
    if (memory_fd >= 0) ::close(memory_fd);
  }
};

namespace {

/// How much of the compiler's stderr an error message quotes.
constexpr size_t kMaxDiagnosticBytes = 16 * 1024;
/// How many generated source lines an error message quotes.
constexpr size_t kMaxQuotedLines = 8;

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
/// Its temporary files go to `scratch_dir`, not to a shared /tmp.
void run_compiler(const std::vector<std::string>& argv, const std::string& source_path,
                  const std::string& source, const ModuleOptions& options,
                  const std::string& scratch_dir, const char* action = "compiling") {
  RunResult result;
  try {
    SpawnOptions spawn;
    spawn.new_process_group = options.compiler_in_own_group;
    spawn.env = {{"TMPDIR", scratch_dir}};
    result = run_captured(argv, spawn, options.compile_timeout);
  } catch (const UserError& e) {
    fail(ErrorKind::kRuntime, "cannot run the C compiler '", argv[0], "': ", e.what());
  }
  std::string command = join(argv, " ");
  if (result.timed_out) {
    fail(ErrorKind::kRuntime, "the C compiler ran longer than ", options.compile_timeout.count(),
         " ms and was killed: ", command, "\n", excerpt(result.err));
  }
  if (!result.status.success()) {
    std::string diagnostics = result.err + result.out;
    fail(ErrorKind::kRuntime, action, " ", source_path, " failed (", result.status.str(),
         "): ", command, "\n", excerpt(diagnostics),
         quote_source_lines(diagnostics, source_path, source));
  }
}

/// Runs the compiler command `argv`, which writes the file `temp`, and puts
/// what it wrote in the cache at `cache_path`; `temp` is gone afterwards,
/// whatever happened. Returns the bytes. `source_path` and `source` name
/// what was compiled in errors (run_compiler).
std::string build_cache_entry(const std::vector<std::string>& argv, const std::string& temp,
                              const std::string& cache_path, const std::string& source_path,
                              const std::string& source, const ModuleOptions& options,
                              const char* action = "compiling") {
  std::optional<std::string> built;
  try {
    // Next to the entry: the cache directory is private and swept of what
    // killed compilers leave (open_cache_dir).
    ScratchDir scratch(cache_path.substr(0, cache_path.rfind('/')), "cc");
    run_compiler(argv, source_path, source, options, scratch.path(), action);
    built = read_file_if_exists(temp);
    TT_CHECK(built, kIO, "the compiler wrote no '", temp, "'");
    write_cache_entry(cache_path, *built);
  } catch (...) {
    std::remove(temp.c_str());
    throw;
  }
  std::remove(temp.c_str());
  return std::move(*built);
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
  if (xdg && *xdg == '/') return std::string(xdg) + "/tensortune";
  const char* home = std::getenv("HOME");
  if (home && *home == '/') return std::string(home) + "/.cache/tensortune";
  struct passwd* pw = ::getpwuid(::geteuid());
  TT_CHECK(pw && pw->pw_dir && *pw->pw_dir == '/', kIO,
           "no cache directory: neither XDG_CACHE_HOME nor HOME is set, and this user has no "
           "home directory; set XDG_CACHE_HOME");
  return std::string(pw->pw_dir) + "/.cache/tensortune";
}

namespace {

/// Checks (and creates) the cache directory, once sweeping it.
void open_cache_dir(const std::string& dir) {
  ensure_private_dir(dir, "the module cache");
  // Once per directory and process: what killed writers left behind.
  static std::mutex mutex;
  static std::set<std::string> swept;
  std::lock_guard<std::mutex> lock(mutex);
  if (swept.insert(dir).second) remove_stale_temp_files(dir);
}

}  // namespace

Module Module::load_checked(const std::string& path, const std::string& sha256) {
  std::optional<std::string> bytes = read_file_if_exists(path);
  TT_CHECK(bytes, kRuntime, "cannot load '", path, "': it cannot be read");
  std::string digest = sha256_hex(*bytes);
  TT_CHECK(digest == sha256, kRuntime, "cannot load '", path, "': its SHA-256 is ", digest,
           ", not the ", sha256, " it was built with (changed since)");
  return load_bytes(*bytes, path);
}

namespace {

/// Refuses bytes the dynamic loader would map past their end (a truncated
/// library: touching such a page is SIGBUS, not an error): an x86-64 or
/// AArch64 ELF shared object whose headers and loaded segments all lie
/// inside `bytes`.
void check_elf(std::string_view bytes, const std::string& name) {
  auto bad = [&](const char* why) {
    fail(ErrorKind::kRuntime, "cannot load '", name, "': not a whole shared library (", why, ", ",
         bytes.size(), " bytes)");
  };
  Elf64_Ehdr eh;
  if (bytes.size() < sizeof eh) bad("shorter than an ELF header");
  std::memcpy(&eh, bytes.data(), sizeof eh);
  if (std::memcmp(eh.e_ident, ELFMAG, SELFMAG) != 0) bad("no ELF magic");
  if (eh.e_ident[EI_CLASS] != ELFCLASS64) bad("not 64-bit ELF");
  if (eh.e_type != ET_DYN) bad("not a shared object");
  const uint64_t size = bytes.size();
  auto inside = [&](uint64_t offset, uint64_t length) {
    return offset <= size && length <= size - offset;
  };
  if (eh.e_phentsize != sizeof(Elf64_Phdr) ||
      !inside(eh.e_phoff, uint64_t{eh.e_phnum} * sizeof(Elf64_Phdr))) {
    bad("program headers outside the file");
  }
  if (eh.e_shnum != 0 && (eh.e_shentsize != sizeof(Elf64_Shdr) ||
                          !inside(eh.e_shoff, uint64_t{eh.e_shnum} * sizeof(Elf64_Shdr)))) {
    bad("section headers outside the file");
  }
  for (uint16_t i = 0; i < eh.e_phnum; ++i) {
    Elf64_Phdr ph;
    std::memcpy(&ph, bytes.data() + eh.e_phoff + i * sizeof ph, sizeof ph);
    if (ph.p_type != PT_LOAD && ph.p_type != PT_DYNAMIC && ph.p_type != PT_NOTE &&
        ph.p_type != PT_GNU_EH_FRAME && ph.p_type != PT_TLS) {
      continue;
    }
    if (!inside(ph.p_offset, ph.p_filesz)) bad("a segment lies past the end of the file");
  }
}

}  // namespace

Module Module::load_bytes(std::string_view bytes, const std::string& name) {
  check_elf(bytes, name);
  std::string base = name.substr(name.rfind('/') + 1);
  int fd = ::memfd_create(base.c_str(), MFD_CLOEXEC);
  TT_CHECK(fd >= 0, kRuntime, "cannot load '", name, "': memfd_create: ", std::strerror(errno));
  FileDescriptor owned(fd);
  write_all(fd, bytes, "the memory file of '" + name + "'");
  // The loader knows a library by the name it was opened with: a library
  // of an earlier memory file with this descriptor's number that is still
  // loaded would be handed back instead of this one. Such a number is
  // skipped (the descriptors tried stay open until the load is done).
  std::vector<FileDescriptor> skipped;
  std::string path = "/proc/self/fd/" + std::to_string(owned.get());
  while (void* stale = ::dlopen(path.c_str(), RTLD_NOW | RTLD_NOLOAD)) {
    ::dlclose(stale);
    int other = ::fcntl(owned.get(), F_DUPFD_CLOEXEC, owned.get() + 1);
    TT_CHECK(other >= 0, kRuntime, "cannot load '", name, "': ", std::strerror(errno));
    skipped.push_back(std::move(owned));
    owned = FileDescriptor(other);
    path = "/proc/self/fd/" + std::to_string(other);
  }
  ::dlerror();
  void* handle = ::dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!handle) {
    const char* why = ::dlerror();
    fail(ErrorKind::kRuntime, "cannot load '", name, "': ", why ? why : "unknown error");
  }
  pin_openmp_runtime();
  auto library = std::make_shared<Library>();
  library->handle = handle;
  library->path = path;
  library->file = name;
  library->sha256 = sha256_hex(bytes);
  library->memory_fd = owned.release();
  Module m;
  m.library_ = std::move(library);
  return m;
}

Module Module::compile(const std::string& source, const std::vector<std::string>& compiler,
                       const std::vector<std::string>& flags, const ModuleOptions& options) {
  TT_CHECK(!compiler.empty() && !compiler[0].empty(), kInvalidArgument,
           "the C compiler command is empty");
  std::string dir = options.cache_dir.empty() ? default_cache_dir() : options.cache_dir;
  open_cache_dir(dir);
  std::string stem = dir + "/tt-" + cache_key(source, compiler, flags);
  std::string source_path = stem + ".c", library_path = stem + ".so";

  // A cached library is loaded only when it matches the hash written with
  // it, and from the bytes that were checked; anything else is built again.
  if (std::optional<std::string> cached = read_cache_entry(library_path)) {
    try {
      Module m = load_bytes(*cached, library_path);
      m.source_path_ = source_path;
      m.from_cache_ = true;
      return m;
    } catch (const UserError&) {
      // A library this loader refuses: build it again below.
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
  std::string built =
      build_cache_entry(argv, temp_library, library_path, source_path, source, options);
  Module m = load_bytes(built, library_path);
  m.source_path_ = source_path;
  return m;
}

Module Module::compile_units(const std::vector<std::string>& units,
                             const std::vector<std::string>& compiler,
                             const std::vector<std::string>& flags, const ModuleOptions& options) {
  TT_CHECK(!units.empty(), kInvalidArgument, "a module needs at least one translation unit");
  if (units.size() == 1) return compile(units[0], compiler, flags, options);
  TT_CHECK(!compiler.empty() && !compiler[0].empty(), kInvalidArgument,
           "the C compiler command is empty");
  std::string dir = options.cache_dir.empty() ? default_cache_dir() : options.cache_dir;
  open_cache_dir(dir);
  // Objects are compiled with every flag but the linker's; the link takes
  // the same code-generation flags.
  std::vector<std::string> code_flags, libraries;
  for (const auto& flag : flags) {
    if (starts_with(flag, "-l")) {
      libraries.push_back(flag);
    } else if (flag != "-shared") {
      code_flags.push_back(flag);
    }
  }
  std::vector<std::string> object_flags = code_flags;
  object_flags.push_back("-c");
  std::vector<std::string> stems;
  std::string keys = "linked units";
  for (const auto& unit : units) {
    std::string key = cache_key(unit, compiler, object_flags);
    stems.push_back(dir + "/tt-" + key);
    keys += '\n' + key;
  }
  std::string library_path = dir + "/tt-" + cache_key(keys, compiler, flags) + ".so";
  if (std::optional<std::string> cached = read_cache_entry(library_path)) {
    try {
      Module m = load_bytes(*cached, library_path);
      m.from_cache_ = true;
      return m;
    } catch (const UserError&) {
      // A library this loader refuses: link it again below.
    }
  }

  // The largest units first, so that the last to finish is a small one.
  std::vector<size_t> order(units.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return units[a].size() > units[b].size(); });
  auto build_object = [&](size_t i) {
    std::string object_path = stems[i] + ".o";
    if (read_cache_entry(object_path)) return;
    std::string source_path = stems[i] + ".c", temp_object = object_path + unique_temp_suffix();
    write_file_atomically(source_path, units[i]);
    std::vector<std::string> argv = compiler;
    argv.insert(argv.end(), object_flags.begin(), object_flags.end());
    argv.insert(argv.end(), {"-o", temp_object, source_path});
    build_cache_entry(argv, temp_object, object_path, source_path, units[i], options);
  };
  const size_t jobs = std::min(units.size(), compiler_jobs(options));
  std::atomic<size_t> next{0};
  std::mutex failure_mutex;
  std::exception_ptr failure;
  auto work = [&] {
    for (size_t k = next++; k < order.size(); k = next++) {
      {
        std::lock_guard<std::mutex> lock(failure_mutex);
        if (failure) return;
      }
      try {
        build_object(order[k]);
      } catch (...) {
        std::lock_guard<std::mutex> lock(failure_mutex);
        if (!failure) failure = std::current_exception();
      }
    }
  };
  std::vector<std::thread> threads;
  try {
    for (size_t t = 1; t < jobs; ++t) threads.emplace_back(work);
  } catch (const std::system_error&) {
    // No more threads: the ones started, and this one, do the rest.
  }
  work();
  for (auto& t : threads) t.join();
  if (failure) std::rethrow_exception(failure);

  // The link reads each object where the cache keeps it, checked just now;
  // the library it writes is checked again when loaded from its bytes.
  std::string temp_library = library_path + unique_temp_suffix();
  std::vector<std::string> argv = compiler;
  argv.insert(argv.end(), code_flags.begin(), code_flags.end());
  argv.insert(argv.end(), {"-shared", "-o", temp_library});
  for (const auto& stem : stems) argv.push_back(stem + ".o");
  argv.insert(argv.end(), libraries.begin(), libraries.end());
  return load_bytes(
      build_cache_entry(argv, temp_library, library_path, library_path, "", options, "linking"),
      library_path);
}

size_t compiler_jobs(const ModuleOptions& options) {
  return static_cast<size_t>(options.jobs > 0 ? options.jobs : host_cpu().cores);
}

const std::string& Module::sha256() const {
  TT_CHECK(library_, kInvalidArgument, "the module is empty");
  return library_->sha256;
}

const std::string& Module::library_path() const {
  TT_CHECK(library_, kInvalidArgument, "the module is empty");
  return library_->file;
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

std::optional<std::vector<int64_t>> Module::argument_bytes(const std::string& name) const {
  if (!library_) return std::nullopt;
  const auto* stated =
      static_cast<const int64_t*>(find(kArgumentBytesPrefix + c_function_name(name)));
  if (!stated || stated[0] < 0 || stated[0] > 4096) return std::nullopt;
  return std::vector<int64_t>(stated + 1, stated + 1 + stated[0]);
}

bool Module::has(const std::string& name) const {
  if (!library_) return false;
  return find(c_function_name(name)) || (c_function_name(name) != name && find(name));
}

}  // namespace tensortune::codegen
