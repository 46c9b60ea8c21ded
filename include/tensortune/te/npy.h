/// \file
/// NumPy's .npy files (format 1.0, little-endian, C order) for arrays of the
/// types NDArray holds: the inputs and outputs of compiled models.
#pragma once

#include <string>

#include "tensortune/te/ndarray.h"

namespace tensortune::te {

/// `a` as the bytes of a .npy file; bfloat16, which NumPy lacks, as float32.
std::string npy_bytes(const NDArray& a);
/// The array in the .npy `bytes`; a kParse error naming `what` for
/// anything else (another version, Fortran order, big-endian, a dtype
/// NDArray does not hold, a truncated file).
NDArray parse_npy(std::string_view bytes, const std::string& what);
/// `a` as `wanted` where NumPy has no such type: a float32 array as bfloat16
/// (rounded to nearest even), or a uint16 array as the bfloat16 its bits are
/// (how ONNX's test data stores it). Any other `a` is returned unchanged.
NDArray as_npy_holds(NDArray a, DataType wanted);

}  // namespace tensortune::te
