#include "tensortune/codegen/build.h"

#include <chrono>
#include <exception>

#include "tensortune/codegen/backend.h"
#include "tensortune/lower/lower.h"
#include "tensortune/lower/pipeline.h"
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
  } catch (const UserError& e) {
    b.error_kind = e.kind();
    b.error = e.what();
  } catch (const std::bad_alloc&) {
    throw;  // the worker's memory, not this state: the whole request says so
  } catch (const std::exception& e) {
    // A bug of tensortune is never this state's failure: the request fails
    // as a whole, naming the stage.
    throw InternalError(std::string("internal error of tensortune (a bug, not a fault of this "
                                    "candidate) at ") +
                        std::string(build_stage_name(stage)) + ": " + e.what());
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
  std::vector<std::vector<size_t>> extra_kernels(states.size());
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
      ok = attempt(b, BuildStage::kLower, [&] {
        std::vector<lower::Packer> packers = lower::lower_packers(*loops, b.function);
        lower::PrimFunc kernel = lower::lower(*loops, b.function);
        std::vector<size_t> packer_indices;
        for (auto& p : packers) {
          packer_indices.push_back(sources->add(lower::run_pipeline(p.func)));
          b.packers.push_back({p.input, p.func->name, p.elements});
        }
        index_in_sources[i] = sources->add(kernel);
        extra_kernels[i] = std::move(packer_indices);
      });
      b.instruments = guard.instrument_results();
    }
    b.seconds = seconds_since(start);
    if (ok) pending.push_back(i);
  }

  auto compile = [&](const std::vector<size_t>& which) {
    std::vector<size_t> kernels;
    for (size_t i : which) {
      kernels.push_back(index_in_sources[i]);
      kernels.insert(kernels.end(), extra_kernels[i].begin(), extra_kernels[i].end());
    }
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
    } catch (const UserError&) {
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

std::vector<te::NDArray> pack_inputs(const Module& module, const std::vector<PackerInfo>& packers,
                                     const std::vector<te::NDArray>& inputs) {
  std::vector<te::NDArray> out = inputs;
  for (const auto& p : packers) {
    TT_CHECK(p.input >= 0 && p.input < static_cast<int>(inputs.size()) && p.elements > 0,
             kInvalidArgument, "packer ", p.function, " of input ", p.input, " does not fit the ",
             inputs.size(), " inputs");
    te::NDArray packed(inputs[p.input].dtype(), {p.elements});
    void* args[] = {const_cast<void*>(inputs[p.input].data()), packed.data()};
    int32_t rc = module.get(p.function)(args);
    TT_CHECK(rc == 0, kRuntime, "packer ", p.function, " returned ", rc);
    out[p.input] = std::move(packed);
  }
  return out;
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
    const StateBuild& b = checks[i].build;
    checks[i].check = check_kernel(b.module.get(b.function), tensors,
                                   pack_inputs(b.module, b.packers, inputs), expected);
  }
  return checks;
}

}  // namespace tensortune::codegen
