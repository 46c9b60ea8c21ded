#include "tensortune/te/npy.h"

#include <algorithm>
#include <cstring>

#include "tensortune/support/error.h"
#include "tensortune/support/strings.h"

namespace tensortune::te {
namespace {

/// The .npy types, each with ours: one table for reading and writing.
constexpr std::pair<const char*, DataType> kNpyTypes[] = {
    {"<f4", DataType::float32()}, {"<f8", DataType::float64()}, {"<f2", DataType::float16()},
    {"<i8", DataType::int64()},   {"<i4", DataType::int32()},   {"<i2", DataType::int_(16)},
    {"|i1", DataType::int_(8)},   {"<u8", DataType::uint(64)},  {"<u4", DataType::uint(32)},
    {"<u2", DataType::uint(16)},  {"|u1", DataType::uint(8)},   {"|b1", DataType::boolean()}};

std::string descr_of(DataType t) {
  for (const auto& [d, type] : kNpyTypes) {
    if (type == t) return d;
  }
  fail(ErrorKind::kInvalidArgument, "no .npy type for ", t.str());
}

DataType dtype_of(const std::string& descr, const std::string& what) {
  for (const auto& [d, t] : kNpyTypes) {
    if (descr == d) return t;
  }
  fail(ErrorKind::kParse, what, ": .npy dtype '", descr,
       "' is not supported (little-endian float16/32/64, int8/16/32/64, uint8/16/32/64, bool)");
}

/// The value of `key` in the header dictionary text.
std::string header_value(const std::string& header, const std::string& key,
                         const std::string& what) {
  size_t k = header.find("'" + key + "'");
  TT_CHECK(k != std::string::npos, kParse, what, ": the .npy header has no '", key, "'");
  size_t colon = header.find(':', k);
  TT_CHECK(colon != std::string::npos, kParse, what, ": malformed .npy header");
  size_t start = header.find_first_not_of(' ', colon + 1);
  TT_CHECK(start != std::string::npos, kParse, what, ": malformed .npy header");
  size_t end = header[start] == '(' ? header.find(')', start) : header.find_first_of(",}", start);
  TT_CHECK(end != std::string::npos && end > start, kParse, what, ": malformed .npy header");
  if (header[start] == '(') ++end;
  return header.substr(start, end - start);
}

}  // namespace

std::string npy_bytes(const NDArray& bf16_or_other) {
  // NumPy has no bfloat16: written as float32, which holds every value exactly.
  NDArray widened;
  if (bf16_or_other.dtype() == DataType::bfloat16()) {
    widened = bf16_or_other.converted(DataType::float32());
  }
  const NDArray& a = widened.defined() ? widened : bf16_or_other;
  std::string shape = "(";
  for (size_t d = 0; d < a.shape().size(); ++d) shape += std::to_string(a.shape()[d]) + ", ";
  if (a.shape().size() > 1) shape.resize(shape.size() - 2);
  if (a.shape().size() == 1) shape.resize(shape.size() - 1);
  shape += ")";
  std::string header =
      "{'descr': '" + descr_of(a.dtype()) + "', 'fortran_order': False, 'shape': " + shape + ", }";
  // Magic, version, header length, then the header padded to 64 bytes with a newline.
  size_t total = 10 + header.size() + 1;
  header.append((64 - total % 64) % 64, ' ');
  header += '\n';
  std::string out = "\x93NUMPY";
  out += '\x01';
  out += '\x00';
  out += static_cast<char>(header.size() & 0xff);
  out += static_cast<char>((header.size() >> 8) & 0xff);
  out += header;
  out.append(static_cast<const char*>(a.data()), a.nbytes());
  return out;
}

NDArray parse_npy(std::string_view bytes, const std::string& what) {
  TT_CHECK(bytes.size() >= 10 && bytes.substr(0, 6) == "\x93NUMPY", kParse, what,
           ": not a .npy file");
  unsigned major = static_cast<unsigned char>(bytes[6]);
  size_t header_len, offset;
  if (major == 1) {
    header_len = static_cast<unsigned char>(bytes[8]) |
                 (static_cast<size_t>(static_cast<unsigned char>(bytes[9])) << 8);
    offset = 10;
  } else {
    TT_CHECK((major == 2 || major == 3) && bytes.size() >= 12, kParse, what, ": .npy version ",
             major, " is not supported");
    header_len = 0;
    for (int i = 0; i < 4; ++i)
      header_len |= static_cast<size_t>(static_cast<unsigned char>(bytes[8 + i])) << (8 * i);
    offset = 12;
  }
  TT_CHECK(offset + header_len <= bytes.size(), kParse, what, ": truncated .npy header");
  std::string header(bytes.substr(offset, header_len));
  TT_CHECK(header_value(header, "fortran_order", what) == "False", kParse, what,
           ": Fortran-order .npy arrays are not supported");
  std::string descr = header_value(header, "descr", what);
  TT_CHECK(descr.size() >= 2 && (descr.front() == '\'' || descr.front() == '"'), kParse, what,
           ": malformed .npy dtype");
  DataType dtype = dtype_of(descr.substr(1, descr.size() - 2), what);
  std::string shape_text = header_value(header, "shape", what);
  std::vector<int64_t> shape;
  for (const std::string& part : split(shape_text.substr(1, shape_text.size() - 2), ',')) {
    std::string_view t = trim(part);
    if (t.empty()) continue;
    long long v = 0;
    TT_CHECK(parse_int(t, &v) && v >= 0, kParse, what, ": malformed .npy shape ", shape_text);
    shape.push_back(v);
  }
  // The size from the header, checked against the data before anything is
  // allocated: a corrupt shape must not ask for terabytes.
  size_t data = offset + header_len;
  size_t available = bytes.size() - data, expected = dtype.bytes();
  if (std::find(shape.begin(), shape.end(), 0) != shape.end()) expected = 0;
  for (int64_t d : shape) {
    if (expected == 0) break;
    TT_CHECK(expected <= SIZE_MAX / static_cast<size_t>(d), kParse, what, ": the .npy shape ",
             shape_text, " is larger than its ", available, " bytes of data");
    expected *= static_cast<size_t>(d);
  }
  TT_CHECK(available == expected, kParse, what, ": the .npy data is ", available,
           " bytes, the header's ", descr, " ", shape_text, " needs ", expected);
  NDArray a(dtype, shape);
  std::memcpy(a.data(), bytes.data() + data, a.nbytes());
  return a;
}

NDArray as_npy_holds(NDArray a, DataType wanted) {
  if (wanted != DataType::bfloat16()) return a;
  if (a.dtype() == DataType::float32()) return a.converted(wanted);
  if (a.dtype() == DataType::uint(16)) {
    NDArray bits(wanted, a.shape());
    std::memcpy(bits.data(), a.data(), a.nbytes());
    return bits;
  }
  return a;
}

}  // namespace tensortune::te
