// Schedules lowered by lower::lower (the pipeline included), compiled
// together into one module and run against the reference evaluator: the
// passes and the C generator on the IR that lowering really produces.
#include <gtest/gtest.h>

#include "codegen/codegen_test_util.h"
#include "tensortune/codegen/build.h"
#include "tensortune/schedule/state.h"
#include "tensortune/schedule/steps.h"
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
  return {{data, kernel}, {te::conv2d_nchw(data, kernel, te::Conv2dAttrsNode::uniform(1, 1))}};
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
  for (const auto& c : cases()) {
    std::vector<StateCheck> checks =
        verify_states(c.tensors, {c.state}, testing::test_target(), ir::PassContext::make(), 7,
                      testing::shared_cache_options());
    const StateCheck& check = checks[0];
    ASSERT_TRUE(check.build.ok()) << c.name << ": " << check.build.error;
    EXPECT_TRUE(check.check->ok()) << c.name << ": " << check.check->mismatch << "\n"
                                   << check.build.module.source_path();
  }
}

}  // namespace
}  // namespace tensortune::codegen
