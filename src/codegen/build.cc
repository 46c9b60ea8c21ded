#include "tensortune/codegen/build.h"

#include <chrono>
#include <exception>

#include "tensortune/codegen/backend.h"
#include "tensortune/lower/lower.h"
#include "tensortune/te/evaluator.h"

namespace tensortune::codegen {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

/// Runs `body`, recording a failure at `stage` on `b`; false when it failed.
template <class F>
bool attempt(StateBuild& b, BuildStage stage, F&& body) {
  try {
    body();
    return true;
  } catch (const Error& e) {
    b.error_kind = e.kind();
    b.error = e.what();
  } catch (const std::exception& e) {
    // Not a user error: whatever threw it is a bug of tensortune.
    b.error_kind = ErrorKind::kInternal;
    b.error = std::string("unexpected exception: ") + e.what();
  }
  b.stage = stage;
  return false;
}

}  // namespace

std::string_view build_stage_name(BuildStage stage) {
  switch (stage) {
    case BuildStage::kBuilt: return "built";
    case BuildStage::kReplay: return "replay";
    case BuildStage::kLower: return "lower";
    case BuildStage::kCompile: return "compile";
  }
  return "?";
}

std::vector<StateBuild> build_states(const schedule::ComputeDAG& dag,
                                     const std::vector<schedule::State>& states,
                                     const ir::Target& target, const ir::PassContext& context,
                                     const ModuleOptions& options, const std::string& prefix) {
  std::vector<StateBuild> builds(states.size());
  std::unique_ptr<KernelSources> sources;
  StateBuild no_backend;
  if (!attempt(no_backend, BuildStage::kLower, [&] { sources = kernel_sources(target); })) {
    // No back end for the target kind: no state can build, and each says why.
    for (auto& b : builds) b = no_backend;
    return builds;
  }
  std::vector<size_t> pending, index_in_sources(states.size(), 0);
  for (size_t i = 0; i < states.size(); ++i) {
    StateBuild& b = builds[i];
    auto start = Clock::now();
    std::optional<schedule::LoopState> loops;
    bool ok =
        attempt(b, BuildStage::kReplay, [&] { loops.emplace(schedule::replay(dag, states[i])); });
    if (ok) {
      // A guard per state: its instruments see this state's passes alone.
      ir::PassContextGuard guard(context);
      b.function = prefix + std::to_string(i);
      ok = attempt(b, BuildStage::kLower,
                   [&] { index_in_sources[i] = sources->add(lower::lower(*loops, b.function)); });
      b.instruments = guard.instrument_results();
    }
    b.seconds = seconds_since(start);
    if (ok) pending.push_back(i);
  }

  auto compile = [&](const std::vector<size_t>& which) {
    std::vector<size_t> kernels;
    for (size_t i : which) kernels.push_back(index_in_sources[i]);
    return sources->compile(sources->source(kernels), options);
  };
  if (pending.size() > 1) {
    auto start = Clock::now();
    try {
      Module m = compile(pending);
      double share = seconds_since(start) / static_cast<double>(pending.size());
      for (size_t i : pending) {
        builds[i].module = m;
        builds[i].seconds += share;
      }
      return builds;
    } catch (const Error&) {
      // One by one below, so that each error lands on its state.
    }
  }
  for (size_t i : pending) {
    StateBuild& b = builds[i];
    auto start = Clock::now();
    attempt(b, BuildStage::kCompile, [&] { b.module = compile({i}); });
    b.seconds += seconds_since(start);
  }
  return builds;
}

std::vector<StateCheck> verify_states(const te::WorkloadTensors& tensors,
                                      const std::vector<schedule::State>& states,
                                      const ir::Target& target, const ir::PassContext& context,
                                      uint64_t seed, const ModuleOptions& options) {
  schedule::ComputeDAG dag(tensors);
  std::vector<StateBuild> builds = build_states(dag, states, target, context, options);
  std::vector<te::NDArray> inputs = te::random_inputs(tensors.inputs, seed);
  std::vector<te::NDArray> expected;
  std::vector<StateCheck> checks(builds.size());
  for (size_t i = 0; i < builds.size(); ++i) {
    checks[i].build = std::move(builds[i]);
    if (!checks[i].build.ok()) continue;
    if (expected.empty()) expected = reference_outputs(tensors, inputs);
    checks[i].check = check_kernel(checks[i].build.module.get(checks[i].build.function), tensors,
                                   inputs, expected);
  }
  return checks;
}

}  // namespace tensortune::codegen
