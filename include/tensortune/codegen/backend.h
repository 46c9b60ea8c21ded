/// \file
/// Code generation by target kind: the one entry point from lowered kernels
/// to a compiled module. A back end is registered for a target kind ("c"
/// today; CUDA and others later) and generates each kernel once, so that the
/// source of any subset of the kernels it was given can be compiled without
/// generating them again: a batch of candidates that fails to compile is
/// compiled one by one from the same generated text.
#pragma once

#include <cstddef>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "tensortune/codegen/module.h"
#include "tensortune/ir/target.h"
#include "tensortune/lower/stmt.h"

namespace tensortune::codegen {

/// Part of a module's source that compiles on its own, and the kernels it holds.
struct SourceUnit {
  std::string text;
  std::vector<size_t> kernels;  ///< indices from KernelSources::add
};

/// Kernels generated for one target by its kind's back end.
class KernelSources {
 public:
  virtual ~KernelSources() = default;
  /// Generates `f` under the current PassContext and returns its index. A
  /// kernel the back end cannot express is a kInvalidArgument error naming
  /// it, and adds nothing.
  virtual size_t add(const lower::PrimFunc& f) = 0;
  /// The source of one module holding the kernels `which` (indices from add).
  virtual std::string source(const std::vector<size_t>& which) const = 0;
  /// Compiles a source() into a loaded module (or takes it from the cache).
  virtual Module compile(const std::string& source, const ModuleOptions& options) const = 0;
  /// The module source(which) builds, as at most `count` translation units
  /// of about equal size that compile separately and link together; fewer
  /// when there are fewer kernels or too little source to be worth it.
  virtual std::vector<SourceUnit> units(const std::vector<size_t>& which, size_t count) const = 0;
  /// Compiles units() into one loaded module (Module::compile_units).
  virtual Module compile_units(const std::vector<SourceUnit>& units,
                               const ModuleOptions& options) const = 0;
  /// How many kernels were added.
  virtual size_t size() const = 0;
};

/// A back end: what generates and compiles code for one target kind.
struct BackendInfo {
  std::string target_kind;
  std::string doc;  ///< one line
  std::function<std::unique_ptr<KernelSources>(const ir::Target& target)> make;
};

/// Registers a back end (at static initialisation); a second one for the
/// same kind is an internal error.
void register_backend(BackendInfo info);
/// The target kinds this build generates code for, sorted.
std::vector<std::string> backend_kinds();
/// True if a back end is registered for `kind`.
bool has_backend(std::string_view kind);
/// A fresh KernelSources for `target`; a kind without a back end is a
/// kNotFound error naming it and the kinds this build generates code for.
/// Kernels added under a PassContext with testing.inject_fault carry that
/// fault (src/codegen/fault_injection.h wraps every back end).
std::unique_ptr<KernelSources> kernel_sources(const ir::Target& target);

/// Generates `funcs` for `target` and builds them into one module with a
/// single compiler run, which amortises the compiler's fixed start-up cost
/// over several kernels; get(f->name) then returns each kernel.
Module build_module(const std::vector<lower::PrimFunc>& funcs, const ir::Target& target,
                    const ModuleOptions& options = {});

/// Builds the kernels `which` into one module from units() compiled
/// options.jobs at a time and cached one by one: what a compiled model uses,
/// whose hundreds of kernels would be one long compiler run.
Module build_in_units(const KernelSources& sources, const std::vector<size_t>& which,
                      const ModuleOptions& options = {});

}  // namespace tensortune::codegen

/// In one .cc file: registers a back end built by the expression `make_info`.
#define TT_REGISTER_BACKEND(make_info)                               \
  static const bool TT_CONCAT(tt_backend_registered_, __COUNTER__) = \
      (::tensortune::codegen::register_backend(make_info), true)
