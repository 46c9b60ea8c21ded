// Schedules lowered by lower::lower (the pipeline included), compiled
// together into one module and run against the reference evaluator: the
// passes and the C generator on the IR that lowering really produces.
#include <gtest/gtest.h>

#include "codegen/codegen_test_util.h"
#include "tensortune/codegen/c_codegen.h"
#include "tensortune/lower/lower.h"
#include "tensortune/schedule/state.h"
#include "tensortune/schedule/steps.h"
#include "tensortune/te/evaluator.h"
#include "tensortune/te/ops.h"

namespace tensortune::codegen {
namespace {

using schedule::IterAnnotation;
using schedule::State;

struct Case {
  std::string name;
  te::WorkloadTensors tensors;
  State state;
};

te::WorkloadTensors matmul_tensors(int64_t m, int64_t n, int64_t k) {
  te::Tensor a = te::placeholder({m, k}, ir::DataType::float32(), "A");
  te::Tensor b = te::placeholder({k, n}, ir::DataType::float32(), "B");
  return {{a, b}, {te::matmul(a, b)}};
}

te::WorkloadTensors conv_tensors() {
  te::Tensor data = te::placeholder({1, 3, 9, 9}, ir::DataType::float32(), "data");
  te::Tensor kernel = te::placeholder({8, 3, 3, 3}, ir::DataType::float32(), "kernel");
  return {{data, kernel}, {te::conv2d_nchw(data, kernel, te::Conv2dAttrs::uniform(1, 1))}};
}

// Stage indices of the matmul DAG: 0 A, 1 B, 2 matmul.
constexpr int kMatmul = 2;

std::vector<Case> cases() {
  using schedule::annotate;
  using schedule::cache_write;
  using schedule::compute_at;
  using schedule::reorder;
  using schedule::split;
  std::vector<Case> out;
  out.push_back({"naive", matmul_tensors(5, 7, 3), State::make()});
  // i.0 i.1 j.0 j.1 k -> i.0 j.0 k i.1 j.1, j.1 (16) vectorized, i.0 parallel.
  out.push_back({"tiled", matmul_tensors(16, 32, 9),
                 State::make({split(kMatmul, 0, {4}), split(kMatmul, 2, {16}),
                              reorder(kMatmul, {0, 2, 4, 1, 3}),
                              annotate(kMatmul, 4, IterAnnotation::kVectorize),
                              annotate(kMatmul, 0, IterAnnotation::kParallel)})});
  // Non-divisible: guards inside the vectorized loop.
  out.push_back({"ragged", matmul_tensors(10, 20, 7),
                 State::make({split(kMatmul, 0, {4}), split(kMatmul, 2, {8}),
                              reorder(kMatmul, {0, 2, 4, 1, 3}),
                              annotate(kMatmul, 4, IterAnnotation::kVectorize),
                              annotate(kMatmul, 3, IterAnnotation::kUnroll)})});
  // A local accumulator computed at the tile loop of the copy-out stage.
  out.push_back(
      {"cache_write", matmul_tensors(12, 16, 6),
       State::make({cache_write(kMatmul, "local"), split(3, 0, {4}), split(3, 2, {8}),
                    reorder(3, {0, 2, 1, 3}), compute_at(2, 3, 1), split(2, 2, {2}),
                    reorder(2, {2, 0, 3, 1}), annotate(3, 3, IterAnnotation::kVectorize)})});
  out.push_back({"conv", conv_tensors(), State::make()});
  return out;
}

TEST(LoweredSchedules, CompiledKernelsMatchTheReference) {
  std::vector<Case> all = cases();
  std::vector<lower::PrimFunc> funcs;
  for (const auto& c : all) {
    schedule::ComputeDAG dag(c.tensors);
    funcs.push_back(lower::lower(schedule::replay(dag, c.state), c.name));
  }
  Module module = build_module(funcs, testing::test_target(), testing::shared_cache_options());
  std::string source = generate_c(funcs, testing::test_target());
  for (const auto& c : all) {
    std::vector<te::NDArray> inputs = te::random_inputs(c.tensors.inputs, 7);
    std::vector<te::NDArray> expected = te::evaluate(c.tensors.outputs, c.tensors.inputs, inputs);
    std::vector<te::NDArray> outputs;
    std::vector<void*> args;
    for (auto& a : inputs) args.push_back(a.data());
    for (const auto& t : c.tensors.outputs) {
      outputs.emplace_back(t.dtype(), t.shape());
      outputs.back().fill(-12345.0);
    }
    for (auto& a : outputs) args.push_back(a.data());
    ASSERT_EQ(module.get(c.name)(args.data()), 0) << c.name;
    for (size_t i = 0; i < outputs.size(); ++i) {
      auto diff =
          te::compare_arrays(outputs[i], expected[i], te::default_tolerance(expected[i].dtype()));
      EXPECT_FALSE(diff) << c.name << ": " << *diff << "\n" << source;
    }
  }
}

}  // namespace
}  // namespace tensortune::codegen
