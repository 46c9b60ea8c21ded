#include "tensortune/ir/dtype.h"

#include "tensortune/support/error.h"
#include "tensortune/support/strings.h"

namespace tensortune::ir {
namespace {

constexpr const char* kValidNames =
    "float16, bfloat16, float32, float64, int8, int16, int32, int64, uint8, uint16, uint32, "
    "uint64, bool (optionally with lanes, e.g. float32x8)";

bool valid_bits(DataType::Code code, int bits) {
  switch (code) {
    case DataType::Code::kFloat: return bits == 16 || bits == 32 || bits == 64;
    case DataType::Code::kBFloat: return bits == 16;
    case DataType::Code::kInt:
    case DataType::Code::kUInt: return bits == 8 || bits == 16 || bits == 32 || bits == 64;
    case DataType::Code::kBool: return bits == 1;
  }
  return false;
}

}  // namespace

DataType DataType::parse(std::string_view name) {
  std::string_view base = name;
  long long lanes = 1;
  if (auto x = name.rfind('x'); x != std::string_view::npos && x > 0) {
    if (!parse_int(name.substr(x + 1), &lanes) || lanes < 1 || lanes > 1024) {
      fail(ErrorKind::kInvalidArgument, "invalid data type '", name,
           "': bad lane count; valid: ", kValidNames);
    }
    base = name.substr(0, x);
  }
  Code code;
  std::string_view digits;
  if (base == "bool") {
    return DataType(Code::kBool, 1, static_cast<int>(lanes));
  } else if (starts_with(base, "bfloat")) {
    code = Code::kBFloat;
    digits = base.substr(6);
  } else if (starts_with(base, "float")) {
    code = Code::kFloat;
    digits = base.substr(5);
  } else if (starts_with(base, "uint")) {
    code = Code::kUInt;
    digits = base.substr(4);
  } else if (starts_with(base, "int")) {
    code = Code::kInt;
    digits = base.substr(3);
  } else {
    fail(ErrorKind::kInvalidArgument, "unknown data type '", name, "'; valid: ", kValidNames);
  }
  long long bits = 0;
  if (!parse_int(digits, &bits) || !valid_bits(code, static_cast<int>(bits))) {
    fail(ErrorKind::kInvalidArgument, "unknown data type '", name, "'; valid: ", kValidNames);
  }
  return DataType(code, static_cast<int>(bits), static_cast<int>(lanes));
}

std::string DataType::str() const {
  std::string out;
  switch (code_) {
    case Code::kInt: out = "int" + std::to_string(bits_); break;
    case Code::kUInt: out = "uint" + std::to_string(bits_); break;
    case Code::kFloat: out = "float" + std::to_string(bits_); break;
    case Code::kBFloat: out = "bfloat" + std::to_string(bits_); break;
    case Code::kBool: out = "bool"; break;
  }
  if (lanes_ != 1) out += "x" + std::to_string(lanes_);
  return out;
}

DataType DataType::from_json(const nlohmann::json& j) {
  if (!j.is_string()) {
    fail(ErrorKind::kTypeMismatch, "expected a data type name (string), got ", j.dump());
  }
  return parse(j.get<std::string>());
}

}  // namespace tensortune::ir
