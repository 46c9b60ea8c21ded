#include "tensortune/codegen/backend.h"

#include <map>
#include <mutex>
#include <numeric>

#include "codegen/fault_injection.h"
#include "tensortune/support/strings.h"

namespace tensortune::codegen {
namespace {

struct BackendRegistry {
  std::mutex mutex;
  std::map<std::string, BackendInfo, std::less<>> backends;
};

BackendRegistry& registry() {
  static BackendRegistry r;
  return r;
}

}  // namespace

void register_backend(BackendInfo info) {
  TT_ICHECK(!info.target_kind.empty() && info.make, "a back end needs a target kind and a factory");
  BackendRegistry& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  TT_ICHECK(!r.backends.count(info.target_kind), "a second back end for target kind '",
            info.target_kind, "'");
  std::string kind = info.target_kind;
  r.backends.emplace(std::move(kind), std::move(info));
}

std::vector<std::string> backend_kinds() {
  BackendRegistry& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  std::vector<std::string> kinds;
  for (const auto& [kind, info] : r.backends) kinds.push_back(kind);
  return kinds;
}

bool has_backend(std::string_view kind) {
  BackendRegistry& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  return r.backends.find(kind) != r.backends.end();
}

std::unique_ptr<KernelSources> kernel_sources(const ir::Target& target) {
  TT_CHECK(target, kInvalidArgument, "code generation needs a target");
  std::function<std::unique_ptr<KernelSources>(const ir::Target&)> make;
  {
    BackendRegistry& r = registry();
    std::lock_guard<std::mutex> lock(r.mutex);
    auto it = r.backends.find(target->kind);
    if (it != r.backends.end()) make = it->second.make;
  }
  if (!make) {
    fail(ErrorKind::kNotFound, "no code generator for target kind '", target->kind,
         "' (this build generates code for: ", join(backend_kinds(), ", "), ")");
  }
  return detail::with_fault_injection(make(target));
}

Module build_module(const std::vector<lower::PrimFunc>& funcs, const ir::Target& target,
                    const ModuleOptions& options) {
  std::unique_ptr<KernelSources> sources = kernel_sources(target);
  for (const auto& f : funcs) sources->add(f);
  std::vector<size_t> all(sources->size());
  std::iota(all.begin(), all.end(), size_t{0});
  return sources->compile(sources->source(all), options);
}

Module build_in_units(const KernelSources& sources, const std::vector<size_t>& which,
                      const ModuleOptions& options) {
  // More units than compiler runs at once: the largest go first, and the
  // runs end close together.
  return sources.compile_units(sources.units(which, 4 * compiler_jobs(options)), options);
}

}  // namespace tensortune::codegen
