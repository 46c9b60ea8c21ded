/// \file
/// Calling a compiled kernel of a workload once and comparing what it wrote
/// with the reference evaluator: the one check `tensortune verify`, the
/// runner's --check and the correctness tests share.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "tensortune/codegen/module.h"
#include "tensortune/te/ndarray.h"
#include "tensortune/te/workload.h"

namespace tensortune::codegen {

/// What one checked call found.
struct KernelCheck {
  int32_t return_code = 0;
  double max_error = 0;  ///< largest absolute difference over all outputs
  std::string
      mismatch;  ///< the first difference beyond tolerance, or the bad return code; "" when ok
  bool ok() const { return mismatch.empty(); }
};

/// The reference outputs of `tensors` for `inputs` (te::evaluate).
std::vector<te::NDArray> reference_outputs(const te::WorkloadTensors& tensors,
                                           const std::vector<te::NDArray>& inputs);

/// te::default_tolerance(dtype), its absolute part scaled by the longest
/// reduction of `tensors` over 64 terms: a sum of n terms in another order
/// differs by about n rounding errors.
te::Tolerance check_tolerance(const te::WorkloadTensors& tensors, ir::DataType dtype);

/// Calls `kernel` (parameters: the inputs, then the outputs) with outputs
/// filled with a sentinel, so elements it never writes show up, and compares
/// each output with `expected` at check_tolerance of its dtype.
KernelCheck check_kernel(KernelFn kernel, const te::WorkloadTensors& tensors,
                         const std::vector<te::NDArray>& inputs,
                         const std::vector<te::NDArray>& expected);

}  // namespace tensortune::codegen
