// The tolerance a compiled kernel is checked at.
#include <gtest/gtest.h>

#include "tensortune/codegen/kernel_check.h"

namespace tensortune::codegen {
namespace {

te::WorkloadTensors named(const std::string& name, const std::string& args) {
  return te::workload_tensors(te::make_named_workload_from_text(name, args));
}

TEST(KernelCheck, AbsoluteToleranceGrowsWithTheLongestReduction) {
  const ir::DataType f32 = ir::DataType::float32();
  EXPECT_DOUBLE_EQ(check_tolerance(named("relu", "64"), f32).atol, 1e-5);
  EXPECT_DOUBLE_EQ(check_tolerance(named("matmul", "8,8,64"), f32).atol, 1e-5);
  // 512 terms in another order (an rfactor of k) differ by ~1e-5 already.
  EXPECT_DOUBLE_EQ(check_tolerance(named("matmul", "8,8,512"), f32).atol, 8e-5);
  EXPECT_DOUBLE_EQ(check_tolerance(named("matmul", "8,8,512"), f32).rtol, 1e-4);
  // 64 channels times a 3x3 window.
  EXPECT_DOUBLE_EQ(check_tolerance(named("conv2d_nchw", "1,64,8,8,4,3,3,1,1"), f32).atol, 9e-5);
  EXPECT_EQ(check_tolerance(named("matmul", "8,8,512,int32"), ir::DataType::int32()).atol, 0);
}

}  // namespace
}  // namespace tensortune::codegen
