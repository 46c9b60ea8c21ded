/// \file
/// Readable rendering of tensor programs, one line per stage.
#pragma once

#include <string>
#include <vector>

#include "tensortune/te/tensor.h"

namespace tensortune::te {

/// Every stage `outputs` depend on, producers first, as
/// `C[i, j] = sum((A[i, k] * B[k, j]), axis=[k:64])  # matmul`.
std::string print_stages(const std::vector<Tensor>& outputs);

}  // namespace tensortune::te
