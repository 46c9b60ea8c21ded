#include "tensortune/te/ndarray.h"

#include <sys/mman.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <sstream>
#include <utility>

#include "tensortune/ir/scalar_semantics.h"
#include "tensortune/support/error.h"
#include "tensortune/support/shape.h"
#include "tensortune/support/strings.h"

namespace tensortune::te {
namespace {

constexpr size_t kAlignment = 64;  // a cache line; enough for any SIMD load
constexpr size_t kHugePage = size_t{2} << 20;

/// Zeroed memory for `bytes` (a multiple of kAlignment). An array of a huge
/// page or more is aligned to huge pages and asks the kernel for them
/// (transparent huge pages in "madvise" mode, Debian's default): a model's
/// weights stream from memory on every inference, and with 4 KiB pages each
/// 4 KiB of them costs a TLB miss, which a virtual machine's nested page
/// walk makes expensive.
std::byte* allocate_zeroed(size_t bytes) {
  if (bytes < kHugePage) {
    auto* p = static_cast<std::byte*>(std::aligned_alloc(kAlignment, bytes));
    if (p) std::memset(p, 0, bytes);
    return p;
  }
  size_t rounded = (bytes + kHugePage - 1) / kHugePage * kHugePage;
  auto* p = static_cast<std::byte*>(std::aligned_alloc(kHugePage, rounded));
  if (!p) return nullptr;
  // Advice, not a requirement: where huge pages are off this fails and
  // the array keeps small pages.
  (void)::madvise(p, rounded, MADV_HUGEPAGE);
  std::memset(p, 0, bytes);
  return p;
}

int64_t wrap_signed(uint64_t x, int bits) {
  if (bits >= 64) return static_cast<int64_t>(x);
  uint64_t mask = (uint64_t{1} << bits) - 1;
  x &= mask;
  if (x >> (bits - 1)) x |= ~mask;
  return static_cast<int64_t>(x);
}

uint64_t wrap_unsigned(uint64_t x, int bits) {
  return bits >= 64 ? x : x & ((uint64_t{1} << bits) - 1);
}

// splitmix64: a tiny generator whose stream is the same on every platform
// (std::uniform_*_distribution are not specified bit for bit).
struct SplitMix {
  uint64_t state;
  uint64_t next() {
    uint64_t z = (state += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
  }
  double uniform() { return static_cast<double>(next() >> 11) * 0x1.0p-53; }
};

}  // namespace

double cast_value(DataType dtype, double value) {
  TT_CHECK(dtype.is_scalar(), kTypeMismatch, "cast to vector type ", dtype.str(),
           " of a scalar value");
  // The ir's own conversion, so stored values agree with constant folding.
  return ir::convert_scalar(DataType::float64(), dtype, value);
}

uint16_t float_to_half_bits(double value) {
  double v = ir::round_to_float(DataType::float16(), value);
  uint16_t sign = std::signbit(v) ? 0x8000 : 0;
  if (std::isnan(v)) return 0x7e00;
  v = std::fabs(v);
  if (std::isinf(v)) return sign | 0x7c00;
  if (v == 0) return sign;
  if (v < 0x1.0p-14) return sign | static_cast<uint16_t>(std::ldexp(v, 24));  // subnormal
  int e = 0;
  double m = std::frexp(v, &e);  // v = m * 2^e, m in [0.5, 1)
  auto mantissa = static_cast<uint16_t>(std::ldexp(m, 11)) & 0x3ff;
  return sign | static_cast<uint16_t>((e - 1 + 15) << 10) | mantissa;
}

double half_bits_to_double(uint16_t bits) {
  double sign = (bits & 0x8000) ? -1.0 : 1.0;
  int exp = (bits >> 10) & 0x1f;
  int mant = bits & 0x3ff;
  if (exp == 0x1f) return mant ? std::nan("") : sign * INFINITY;
  if (exp == 0) return sign * std::ldexp(mant, -24);
  return sign * std::ldexp(1024 + mant, exp - 25);
}

uint16_t float_to_bfloat16_bits(double value) {
  double v = ir::round_to_float(DataType::bfloat16(), value);
  if (std::isnan(v)) return std::signbit(v) ? 0xffc0 : 0x7fc0;
  // A bfloat16 value is exactly a float32 whose low 16 bits are zero.
  auto f = static_cast<float>(v);
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  return static_cast<uint16_t>(u >> 16);
}

double bfloat16_bits_to_double(uint16_t bits) {
  uint32_t u = static_cast<uint32_t>(bits) << 16;
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}

Tolerance default_tolerance(DataType dtype) {
  switch (dtype.code()) {
    case DataType::Code::kFloat:
      if (dtype.bits() == 64) return {1e-9, 1e-9};
      if (dtype.bits() == 32) return {1e-5, 1e-4};
      return {1e-2, 1e-2};
    case DataType::Code::kBFloat: return {1e-2, 4e-2};
    case DataType::Code::kInt:
    case DataType::Code::kUInt:
    case DataType::Code::kBool: return {0, 0};
  }
  return {0, 0};
}

void NDArray::Free::operator()(std::byte* p) const { std::free(p); }

NDArray::NDArray(DataType dtype, std::vector<int64_t> shape)
    : dtype_(dtype), shape_(std::move(shape)) {
  TT_CHECK(dtype.is_scalar(), kTypeMismatch, "an NDArray holds scalars, not ", dtype.str());
  size_ = 1;
  for (int64_t d : shape_) {
    TT_CHECK(d >= 0, kInvalidArgument, "NDArray shape ", shape_text(shape_),
             " has a negative extent");
    TT_CHECK(d == 0 || size_ <= std::numeric_limits<int64_t>::max() / 8 / d, kInvalidArgument,
             "NDArray shape ", shape_text(shape_), " is too large");
    size_ *= d;
  }
  size_t bytes = std::max<size_t>(nbytes(), 1);
  bytes = (bytes + kAlignment - 1) / kAlignment * kAlignment;  // aligned_alloc wants a multiple
  std::byte* p = allocate_zeroed(bytes);
  TT_CHECK(p, kRuntime, "cannot allocate ", bytes, " bytes for NDArray ", describe());
  data_.reset(p);
}

NDArray::NDArray(const NDArray& other) : dtype_(other.dtype_), shape_(other.shape_) {
  if (!other.defined()) return;
  NDArray copy(other.dtype_, other.shape_);
  std::memcpy(copy.data(), other.data(), other.nbytes());
  *this = std::move(copy);
}

NDArray::NDArray(NDArray&& other) noexcept
    : dtype_(other.dtype_),
      shape_(std::exchange(other.shape_, {})),
      size_(std::exchange(other.size_, 0)),
      data_(std::move(other.data_)) {}

NDArray& NDArray::operator=(NDArray&& other) noexcept {
  if (this != &other) {
    dtype_ = other.dtype_;
    shape_ = std::exchange(other.shape_, {});
    size_ = std::exchange(other.size_, 0);
    data_ = std::move(other.data_);
  }
  return *this;
}

NDArray& NDArray::operator=(const NDArray& other) {
  if (this != &other) {
    NDArray copy(other);
    *this = std::move(copy);
  }
  return *this;
}

NDArray NDArray::random(DataType dtype, std::vector<int64_t> shape, uint64_t seed, double low,
                        double high) {
  NDArray out(dtype, std::move(shape));
  out.fill_random(seed, low, high);
  return out;
}

NDArray NDArray::converted(DataType dtype) const {
  TT_ICHECK(dtype.is_float() && (dtype_.is_float() || dtype_.bits() <= 32),
            "converted() makes float arrays of floats and narrow integers, not ", dtype_.str(),
            " to ", dtype.str());
  NDArray out(dtype, shape_);
  for (int64_t i = 0; i < size_; ++i) out.set(i, get(i));
  return out;
}

double NDArray::get(int64_t flat) const {
  TT_CHECK(flat >= 0 && flat < size_, kInvalidArgument, "element ", flat,
           " is out of range for NDArray ", describe());
  const std::byte* p = data_.get() + flat * dtype_.bytes();
  switch (dtype_.code()) {
    case DataType::Code::kFloat:
      if (dtype_.bits() == 64) {
        double v;
        std::memcpy(&v, p, 8);
        return v;
      }
      if (dtype_.bits() == 32) {
        float v;
        std::memcpy(&v, p, 4);
        return v;
      } else {
        uint16_t v;
        std::memcpy(&v, p, 2);
        return half_bits_to_double(v);
      }
    case DataType::Code::kBFloat: {
      uint16_t v;
      std::memcpy(&v, p, 2);
      return bfloat16_bits_to_double(v);
    }
    case DataType::Code::kInt:
    case DataType::Code::kUInt:
    case DataType::Code::kBool:
      if (dtype_.is_uint() && dtype_.bits() == 64) {
        uint64_t v;
        std::memcpy(&v, p, 8);
        return static_cast<double>(v);
      }
      return static_cast<double>(get_int(flat));
  }
  return 0;
}

void NDArray::set(int64_t flat, double value) {
  TT_CHECK(flat >= 0 && flat < size_, kInvalidArgument, "element ", flat,
           " is out of range for NDArray ", describe());
  std::byte* p = data_.get() + flat * dtype_.bytes();
  switch (dtype_.code()) {
    case DataType::Code::kFloat:
      if (dtype_.bits() == 64) {
        std::memcpy(p, &value, 8);
      } else if (dtype_.bits() == 32) {
        auto v = static_cast<float>(value);
        std::memcpy(p, &v, 4);
      } else {
        uint16_t v = float_to_half_bits(value);
        std::memcpy(p, &v, 2);
      }
      return;
    case DataType::Code::kBFloat: {
      uint16_t v = float_to_bfloat16_bits(value);
      std::memcpy(p, &v, 2);
      return;
    }
    case DataType::Code::kInt:
    case DataType::Code::kUInt:
    case DataType::Code::kBool:
      if (dtype_.is_bool()) {
        set_int(flat, value != 0 ? 1 : 0);
      } else {
        set_int(flat, static_cast<int64_t>(cast_value(dtype_, value)));
      }
      return;
  }
}

int64_t NDArray::get_int(int64_t flat) const {
  TT_CHECK(flat >= 0 && flat < size_, kInvalidArgument, "element ", flat,
           " is out of range for NDArray ", describe());
  TT_CHECK(dtype_.is_integer() || dtype_.is_bool(), kTypeMismatch,
           "get_int on a non-integer NDArray ", describe());
  const std::byte* p = data_.get() + flat * dtype_.bytes();
  uint64_t raw = 0;
  std::memcpy(&raw, p, dtype_.bytes());  // little-endian: the low bytes
  return dtype_.is_int() ? wrap_signed(raw, dtype_.bits())
                         : static_cast<int64_t>(wrap_unsigned(raw, dtype_.bytes() * 8));
}

void NDArray::set_int(int64_t flat, int64_t value) {
  TT_CHECK(flat >= 0 && flat < size_, kInvalidArgument, "element ", flat,
           " is out of range for NDArray ", describe());
  TT_CHECK(dtype_.is_integer() || dtype_.is_bool(), kTypeMismatch,
           "set_int on a non-integer NDArray ", describe());
  std::byte* p = data_.get() + flat * dtype_.bytes();
  uint64_t raw = dtype_.is_bool() ? (value != 0 ? 1 : 0) : static_cast<uint64_t>(value);
  std::memcpy(p, &raw, dtype_.bytes());  // little-endian: the low bytes
}

int64_t NDArray::flat_index(const std::vector<int64_t>& index) const {
  TT_CHECK(index.size() == shape_.size(), kInvalidArgument, "index ", shape_text(index), " has ",
           index.size(), " dimensions, NDArray ", describe(), " has ", shape_.size());
  int64_t flat = 0;
  for (size_t d = 0; d < index.size(); ++d) {
    TT_CHECK(index[d] >= 0 && index[d] < shape_[d], kInvalidArgument, "index ", shape_text(index),
             " is out of bounds for NDArray ", describe());
    flat = flat * shape_[d] + index[d];
  }
  return flat;
}

std::vector<int64_t> NDArray::unflatten(int64_t flat) const {
  std::vector<int64_t> index(shape_.size());
  for (size_t d = shape_.size(); d-- > 0;) {
    index[d] = shape_[d] ? flat % shape_[d] : 0;
    flat = shape_[d] ? flat / shape_[d] : 0;
  }
  return index;
}

void NDArray::fill(double value) {
  for (int64_t i = 0; i < size_; ++i) set(i, value);
}

void NDArray::fill_random(uint64_t seed, double low, double high) {
  TT_CHECK(low <= high, kInvalidArgument, "fill_random: low ", low, " is above high ", high);
  SplitMix rng{seed};
  if (dtype_.is_float()) {
    for (int64_t i = 0; i < size_; ++i) set(i, low + (high - low) * rng.uniform());
  } else if (dtype_.is_bool()) {
    for (int64_t i = 0; i < size_; ++i) set_int(i, static_cast<int64_t>(rng.next() >> 63));
  } else {
    double lo = std::ceil(low), hi = std::floor(high);
    TT_CHECK(lo <= hi, kInvalidArgument, "fill_random: no integer in [", low, ", ", high, "]");
    auto count = static_cast<uint64_t>(hi - lo) + 1;
    for (int64_t i = 0; i < size_; ++i) {
      set(i, lo + static_cast<double>(rng.next() % count));
    }
  }
}

std::string NDArray::describe() const {
  if (!defined() && size_ == 0 && shape_.empty()) return "(undefined)";
  return dtype_.str() + shape_text(shape_);
}

double max_abs_diff(const NDArray& a, const NDArray& b) {
  TT_CHECK(a.dtype() == b.dtype() && a.shape() == b.shape(), kInvalidArgument,
           "max_abs_diff of NDArrays ", a.describe(), " and ", b.describe());
  double worst = 0;
  for (int64_t i = 0; i < a.size(); ++i) {
    double x = a.get(i), y = b.get(i);
    if (std::isnan(x) && std::isnan(y)) continue;
    if (x == y) continue;  // equal infinities included
    double d = std::fabs(x - y);
    if (std::isnan(d)) d = INFINITY;
    worst = std::max(worst, d);
  }
  return worst;
}

namespace {
/// NaN matches only NaN, and an infinity only the same infinity: the
/// tolerance rtol * |inf| would otherwise accept any value, of either sign.
bool values_match(double x, double y, Tolerance tol) {
  if (std::isnan(x) || std::isnan(y)) return std::isnan(x) && std::isnan(y);
  if (std::isinf(x) || std::isinf(y)) return x == y;
  return std::fabs(x - y) <= tol.atol + tol.rtol * std::fabs(y);
}
}  // namespace

std::optional<std::string> compare_arrays(const NDArray& actual, const NDArray& expected,
                                          Tolerance tol) {
  if (actual.dtype() != expected.dtype() || actual.shape() != expected.shape()) {
    return "got an NDArray " + actual.describe() + ", expected " + expected.describe();
  }
  int64_t mismatches = 0, first = -1;
  double worst = 0;
  for (int64_t i = 0; i < actual.size(); ++i) {
    double x = actual.get(i), y = expected.get(i);
    if (values_match(x, y, tol)) continue;
    ++mismatches;
    if (first < 0) first = i;
    double d = std::fabs(x - y);
    worst = std::max(worst, std::isnan(d) ? INFINITY : d);
  }
  if (mismatches == 0) return std::nullopt;
  std::ostringstream os;
  os.precision(9);
  os << mismatches << " of " << actual.size() << " elements of " << expected.describe()
     << " differ (atol " << tol.atol << ", rtol " << tol.rtol << "); first at "
     << shape_text(actual.unflatten(first)) << ": got " << actual.get(first) << ", expected "
     << expected.get(first) << "; largest difference " << worst;
  return os.str();
}

bool allclose(const NDArray& actual, const NDArray& expected) {
  return !compare_arrays(actual, expected, default_tolerance(expected.dtype()));
}

bool allclose(const NDArray& actual, const NDArray& expected, Tolerance tol) {
  return !compare_arrays(actual, expected, tol);
}

}  // namespace tensortune::te
