#include "common/schedule_check.h"

#include "tensortune/lower/interpreter.h"
#include "tensortune/lower/lower.h"
#include "tensortune/object/serialize.h"
#include "tensortune/te/evaluator.h"

namespace tensortune::testing {

::testing::AssertionResult schedule_matches_reference(const te::WorkloadTensors& tensors,
                                                      const schedule::State& state, uint64_t seed) {
  schedule::ComputeDAG dag(tensors);
  std::string steps = save_string(state);
  lower::PrimFunc f;
  std::vector<lower::Packer> packers;
  try {
    schedule::LoopState loops = schedule::replay(dag, state);
    f = lower::lower_schedule(loops, "kernel");
    packers = lower::lower_packers(loops, "kernel");
  } catch (const Error& e) {
    return ::testing::AssertionFailure() << "lowering failed: " << e.what() << "\nstate: " << steps;
  }
  std::vector<te::NDArray> inputs = te::random_inputs(tensors.inputs, seed);
  std::vector<te::NDArray> expected = te::evaluate(tensors.outputs, tensors.inputs, inputs);
  std::vector<te::NDArray> outputs;
  for (const auto& t : tensors.outputs) {
    outputs.emplace_back(t.dtype(), t.shape());
    outputs.back().fill(-12345.0);  // a sentinel: unwritten elements show up
  }
  // Layout-rewritten inputs are packed first, as a compiled model does once.
  std::vector<te::NDArray> packed(inputs.size());
  std::vector<te::NDArray*> args;
  for (auto& a : inputs) args.push_back(&a);
  for (auto& a : outputs) args.push_back(&a);
  try {
    for (const auto& p : packers) {
      packed[p.input] = te::NDArray(inputs[p.input].dtype(), {p.elements});
      lower::interpret(p.func, {&inputs[p.input], &packed[p.input]});
      args[p.input] = &packed[p.input];
    }
    lower::interpret(f, args);
  } catch (const Error& e) {
    return ::testing::AssertionFailure()
           << "interpreting failed: " << e.what() << "\nstate: " << steps << "\n"
           << lower::to_string(f);
  }
  for (size_t i = 0; i < outputs.size(); ++i) {
    if (auto diff = te::compare_arrays(outputs[i], expected[i],
                                       te::default_tolerance(expected[i].dtype()))) {
      return ::testing::AssertionFailure()
             << "output " << i << " differs: " << *diff << "\nstate: " << steps << "\n"
             << lower::to_string(f);
    }
  }
  return ::testing::AssertionSuccess();
}

}  // namespace tensortune::testing
