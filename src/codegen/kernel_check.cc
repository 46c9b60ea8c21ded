#include "tensortune/codegen/kernel_check.h"

#include <algorithm>

#include "tensortune/te/evaluator.h"

namespace tensortune::codegen {

te::Tolerance check_tolerance(const te::WorkloadTensors& tensors, ir::DataType dtype) {
  te::Tolerance tol = te::default_tolerance(dtype);
  if (!dtype.is_float()) return tol;
  // A sum of n terms taken in another order (tiles, vectors, rfactor)
  // differs by about n rounding errors of its partial sums: beyond 64 terms
  // the absolute tolerance grows with the longest reduction of the DAG.
  int64_t longest = 1;
  for (const te::Tensor& t : te::post_order_tensors(tensors.outputs)) {
    auto op = t.compute_op();
    if (!op || op->body->kind() != ir::ExprKind::kReduce) continue;
    int64_t n = 1;
    for (const auto& axis : static_cast<const ir::ReduceNode&>(*op->body).axis) n *= axis->extent;
    longest = std::max(longest, n);
  }
  tol.atol *= std::max<double>(1.0, static_cast<double>(longest) / 64.0);
  return tol;
}

std::vector<te::NDArray> reference_outputs(const te::WorkloadTensors& tensors,
                                           const std::vector<te::NDArray>& inputs) {
  return te::evaluate(tensors.outputs, tensors.inputs, inputs);
}

KernelCheck check_kernel(KernelFn kernel, const te::WorkloadTensors& tensors,
                         const std::vector<te::NDArray>& inputs,
                         const std::vector<te::NDArray>& expected) {
  std::vector<te::NDArray> outputs;
  for (const auto& t : tensors.outputs) {
    outputs.emplace_back(t.dtype(), t.shape());
    outputs.back().fill(-12345.0);
  }
  // The kernel takes non-const pointers; it does not write its inputs.
  std::vector<void*> args;
  for (const auto& a : inputs)
    args.push_back(const_cast<void*>(static_cast<const void*>(a.data())));
  for (auto& a : outputs) args.push_back(a.data());
  KernelCheck check;
  check.return_code = kernel(args.data());
  for (size_t o = 0; o < outputs.size(); ++o) {
    check.max_error = std::max(check.max_error, te::max_abs_diff(outputs[o], expected[o]));
    auto diff =
        te::compare_arrays(outputs[o], expected[o], check_tolerance(tensors, expected[o].dtype()));
    if (diff && check.mismatch.empty())
      check.mismatch = "output " + std::to_string(o) + ": " + *diff;
  }
  if (check.return_code != 0 && check.mismatch.empty()) {
    check.mismatch = "kernel returned " + std::to_string(check.return_code);
  }
  return check;
}

}  // namespace tensortune::codegen
