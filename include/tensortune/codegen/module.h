/// \file
/// Compiled modules: C source built into a shared library by an external C
/// compiler and loaded with dlopen, with an on-disk cache.
///
/// The cache holds one library per key, a stable hash of (source, compiler
/// command, flags), as `tt-<key>.so` with its SHA-256 in `tt-<key>.so.sha256`
/// and its source in `tt-<key>.c`. A module built from several translation
/// units (compile_units) also caches each unit's object, `tt-<key>.o`: a
/// unit whose text is the same is not compiled again (a model compiled
/// again with the same kernels, or a unit another model shares). A key already in the cache whose
/// library matches its hash is loaded without running the compiler; one that does not is built
/// again. The directory must be the user's own and writable by no one else (support/files.h,
/// ensure_private_dir), since what is loaded from it runs. Files are written under a temporary name
/// and renamed into place, so processes that build the same module at the same time never see a
/// partial file; what a killed one left is removed by the next. The compiler's identity is its
/// command, not its version: clear the cache after upgrading it.
///
/// Compiler runs are child processes started with posix_spawn (support/
/// subprocess.h, docs/architecture.md invariant 7), their stderr captured. A compiler
/// that fails, cannot be started or runs past the timeout is a kRuntime
/// error quoting its diagnostics and the generated source lines they name.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace tensortune::codegen {

/// A compiled kernel: args[i] is the data pointer of the kernel's params[i];
/// returns 0 on success.
using KernelFn = int32_t (*)(void** args);

/// A generated library states what each kernel takes beside it, as
/// `const int64_t <prefix><C symbol>[] = {count, bytes of each argument...}`.
inline constexpr const char* kArgumentBytesPrefix = "tt_argument_bytes__";

/// How modules are compiled and cached.
struct ModuleOptions {
  /// The cache directory (created when missing); empty means default_cache_dir().
  std::string cache_dir;
  /// How long one compiler run may take before it is killed.
  std::chrono::milliseconds compile_timeout{std::chrono::minutes(2)};
  /// Start the compiler in a process group of its own (so the timeout kills
  /// its sub-processes too). A worker turns this off: its compiler then
  /// stays in the worker's group, and whoever kills the worker's group
  /// (the pool, on a build timeout) kills the compiler with it.
  bool compiler_in_own_group = true;
  /// Compiler runs at once in compile_units (0: the cores this process may use).
  int jobs = 0;
};

/// How many compiler runs compile_units starts at once: options.jobs, or
/// the cores this process may use when it is 0.
size_t compiler_jobs(const ModuleOptions& options);

/// $XDG_CACHE_HOME/tensortune when XDG_CACHE_HOME is an absolute path, else
/// $HOME/.cache/tensortune (the home directory of the user's account when
/// HOME is unset). Never a shared temporary directory.
std::string default_cache_dir();

/// A loaded shared library of kernels. Copies share the library, which is
/// unloaded when the last copy goes; function pointers from get() are valid
/// as long as a copy lives.
class Module {
 public:
  /// An empty module (defined() is false).
  Module() = default;

  /// Builds `source` with the command `compiler` (program and leading
  /// arguments) and `flags` (those naming libraries, -l..., are placed after
  /// the source), or takes the library from the cache, and loads it.
  static Module compile(const std::string& source, const std::vector<std::string>& compiler,
                        const std::vector<std::string>& flags, const ModuleOptions& options = {});
  /// Builds the translation units `units` into one library as compile()
  /// builds one source: each unit to an object, `options.jobs` compiler runs
  /// at once, then one link. Every object and the library are cached. A
  /// single unit is compile().
  static Module compile_units(const std::vector<std::string>& units,
                              const std::vector<std::string>& compiler,
                              const std::vector<std::string>& flags,
                              const ModuleOptions& options = {});
  /// Loads the shared library at `library_path` if its bytes have the
  /// SHA-256 `sha256` (as compile() wrote them); otherwise, or when it does
  /// not load, a kRuntime error naming it.
  static Module load_checked(const std::string& library_path, const std::string& sha256);
  /// Loads a shared library from its bytes, through an anonymous memory file:
  /// what is loaded is exactly what the caller checked, whatever happens to
  /// the file it came from. `name` names it in errors.
  static Module load_bytes(std::string_view bytes, const std::string& name);

  /// The kernel called `name` (a kernel name as generate_c was given it, or a
  /// C symbol); a kNotFound error when the library defines no such function.
  KernelFn get(const std::string& name) const;
  /// True if get(name) would succeed.
  bool has(const std::string& name) const;
  /// The bytes each argument of kernel `name` spans, as the library states
  /// them (kArgumentBytesPrefix); nullopt when it states nothing for it.
  std::optional<std::vector<int64_t>> argument_bytes(const std::string& name) const;

  /// False for a default-constructed module.
  bool defined() const { return static_cast<bool>(library_); }
  /// Path of the file the library was loaded from (its bytes, checked).
  const std::string& library_path() const;
  /// The SHA-256 of the library's bytes, for load_checked in another process.
  const std::string& sha256() const;
  /// Path of the C source it was built from (empty for load(), and for a
  /// library linked from several units).
  const std::string& source_path() const { return source_path_; }
  /// True if compile() found the library in the cache and ran no compiler.
  bool from_cache() const { return from_cache_; }

 private:
  struct Library;
  void* find(const std::string& symbol) const;

  std::shared_ptr<const Library> library_;
  std::string source_path_;
  bool from_cache_ = false;
};

}  // namespace tensortune::codegen
