/// \file
/// NDArray: a dense, row-major, contiguous array of one scalar element type,
/// holding the element type's own bytes (float16 as 2-byte IEEE half, bfloat16
/// as the upper half of a float32, bool as one byte 0/1), 64-byte aligned, so
/// data() can be handed to compiled kernels as is. It is a value: copies are
/// deep. Element access goes through double (exact for every type except
/// 64-bit integers beyond 2^53; use get_int/set_int for those).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "tensortune/ir/dtype.h"

namespace tensortune::te {

using ir::DataType;

/// `value` converted to `dtype` exactly as a cast in the IR does
/// (ir::convert_scalar): floats round to nearest-even in their precision,
/// integers truncate toward zero and wrap around in their width, bool is
/// `value != 0`. The result is returned as a double.
double cast_value(DataType dtype, double value);

/// The IEEE binary16 bits nearest to `value` (round to nearest-even).
uint16_t float_to_half_bits(double value);
/// The value of IEEE binary16 bits.
double half_bits_to_double(uint16_t bits);
/// The bfloat16 bits nearest to `value` (round to nearest-even).
uint16_t float_to_bfloat16_bits(double value);
/// The value of bfloat16 bits.
double bfloat16_bits_to_double(uint16_t bits);

/// Absolute and relative tolerance: |actual - expected| <= atol + rtol * |expected|.
struct Tolerance {
  double atol = 0;
  double rtol = 0;
};

/// The tolerance for comparing results of `dtype` computed in different
/// orders (tiled, vectorised): exact for integers and bool; float64 1e-9;
/// float32 atol 1e-5, rtol 1e-4; float16 1e-2; bfloat16 atol 1e-2, rtol 4e-2.
Tolerance default_tolerance(DataType dtype);

/// A dense row-major array; see the file comment.
class NDArray {
 public:
  /// An empty array (no dtype, no storage); defined() is false.
  NDArray() = default;
  /// A zero-filled array; extents must be >= 0 and the type scalar.
  NDArray(DataType dtype, std::vector<int64_t> shape);
  /// A deep copy (new storage).
  NDArray(const NDArray& other);
  /// Takes the storage of `other`, which is left undefined.
  NDArray(NDArray&& other) noexcept;
  /// Becomes a deep copy of `other`.
  NDArray& operator=(const NDArray& other);
  /// Takes the storage of `other`, which is left undefined.
  NDArray& operator=(NDArray&& other) noexcept;

  /// An array filled by fill_random.
  static NDArray random(DataType dtype, std::vector<int64_t> shape, uint64_t seed,
                        double low = -1.0, double high = 1.0);

  /// False for a default-constructed (or moved-from) array.
  bool defined() const { return static_cast<bool>(data_); }
  /// The element type.
  DataType dtype() const { return dtype_; }
  /// The extents, outermost first.
  const std::vector<int64_t>& shape() const { return shape_; }
  /// Number of dimensions (0 for a scalar).
  int ndim() const { return static_cast<int>(shape_.size()); }
  /// Number of elements (1 for a 0-d array).
  int64_t size() const { return size_; }
  /// Bytes of storage: size() * dtype().bytes().
  size_t nbytes() const { return static_cast<size_t>(size_) * dtype_.bytes(); }
  /// The first element's bytes (64-byte aligned), row-major, for kernels to read and write.
  void* data() { return data_.get(); }
  /// The first element's bytes, read-only.
  const void* data() const { return data_.get(); }

  /// Element `flat` (row-major position) as a double; out of range is kInvalidArgument.
  double get(int64_t flat) const;
  /// Stores cast_value(dtype(), value) at `flat`.
  void set(int64_t flat, double value);
  /// A copy of this array in float type `dtype`, each element through
  /// set(): rounded once where `dtype` is narrower. From floats and integers
  /// of at most 32 bits only: get() is a double, which would drop a 64-bit
  /// integer's low bits before the rounding.
  NDArray converted(DataType dtype) const;
  /// Element `flat` of an integer or bool array, exactly.
  int64_t get_int(int64_t flat) const;
  /// Stores `value` wrapped to the integer type at `flat` (integer and bool arrays only).
  void set_int(int64_t flat, int64_t value);
  /// Element at a multi-dimensional index (checked like flat_index).
  double at(const std::vector<int64_t>& index) const { return get(flat_index(index)); }
  /// Row-major position of `index`; a wrong rank or an index out of bounds is kInvalidArgument.
  int64_t flat_index(const std::vector<int64_t>& index) const;
  /// The multi-dimensional index of row-major position `flat`.
  std::vector<int64_t> unflatten(int64_t flat) const;

  /// Sets every element to cast_value(dtype(), value).
  void fill(double value);
  /// Fills with values drawn uniformly from [low, high), reproducibly from
  /// `seed` on every platform: floats are then rounded to the type, integers
  /// are drawn from the integers in [ceil(low), floor(high)], bool is 0 or 1.
  void fill_random(uint64_t seed, double low = -1.0, double high = 1.0);

  /// "float32[2, 3]" for messages.
  std::string describe() const;

 private:
  struct Free {
    void operator()(std::byte* p) const;
  };
  DataType dtype_;
  std::vector<int64_t> shape_;
  int64_t size_ = 0;
  std::unique_ptr<std::byte[], Free> data_;
};

/// Largest |a - b| over all elements (infinity where exactly one is NaN or
/// the infinities differ); shapes and dtypes must match (else kInvalidArgument).
double max_abs_diff(const NDArray& a, const NDArray& b);

/// std::nullopt if every element of `actual` is within `tol` of `expected`
/// (NaN matches NaN, equal infinities match); otherwise a message naming the
/// first mismatching index, both values, the number of mismatches and the
/// largest difference. Mismatched shapes or dtypes are reported, not thrown.
std::optional<std::string> compare_arrays(const NDArray& actual, const NDArray& expected,
                                          Tolerance tol);

/// compare_arrays with default_tolerance(expected.dtype()) found nothing.
bool allclose(const NDArray& actual, const NDArray& expected);
/// compare_arrays with the given tolerance found nothing.
bool allclose(const NDArray& actual, const NDArray& expected, Tolerance tol);

}  // namespace tensortune::te
