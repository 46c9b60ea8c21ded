/// \file
/// Scalar and vector data types: float32, float16, bfloat16, float64, int8..int64,
/// uint8..uint64 and bool, each with a lane count (float32x8 is 8 float32 lanes).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

namespace tensortune::ir {

/// A data type value; saved as its name ("float32", "int64x4", "bool").
class DataType {
 public:
  enum class Code : uint8_t { kInt, kUInt, kFloat, kBFloat, kBool };
  static constexpr const char* kTypeName = "dtype";

  constexpr DataType() = default;
  constexpr DataType(Code code, int bits, int lanes = 1)
      : code_(code), bits_(static_cast<uint8_t>(bits)), lanes_(static_cast<uint16_t>(lanes)) {}

  static constexpr DataType float32(int lanes = 1) { return {Code::kFloat, 32, lanes}; }
  static constexpr DataType float16(int lanes = 1) { return {Code::kFloat, 16, lanes}; }
  static constexpr DataType float64(int lanes = 1) { return {Code::kFloat, 64, lanes}; }
  static constexpr DataType bfloat16(int lanes = 1) { return {Code::kBFloat, 16, lanes}; }
  static constexpr DataType int_(int bits, int lanes = 1) { return {Code::kInt, bits, lanes}; }
  static constexpr DataType uint(int bits, int lanes = 1) { return {Code::kUInt, bits, lanes}; }
  static constexpr DataType int32(int lanes = 1) { return {Code::kInt, 32, lanes}; }
  static constexpr DataType int64(int lanes = 1) { return {Code::kInt, 64, lanes}; }
  static constexpr DataType boolean(int lanes = 1) { return {Code::kBool, 1, lanes}; }

  /// Parses a type name such as "float32" or "int8x16"; an unknown name is an
  /// error listing the valid ones.
  static DataType parse(std::string_view name);

  Code code() const { return code_; }
  int bits() const { return bits_; }
  int lanes() const { return lanes_; }
  int bytes() const { return (bits_ + 7) / 8; }
  bool is_float() const { return code_ == Code::kFloat || code_ == Code::kBFloat; }
  bool is_int() const { return code_ == Code::kInt; }
  bool is_uint() const { return code_ == Code::kUInt; }
  /// Signed or unsigned integer (not bool).
  bool is_integer() const { return code_ == Code::kInt || code_ == Code::kUInt; }
  bool is_bool() const { return code_ == Code::kBool; }
  bool is_scalar() const { return lanes_ == 1; }
  DataType with_lanes(int lanes) const { return {code_, bits_, lanes}; }
  DataType element_of() const { return with_lanes(1); }

  std::string str() const;
  nlohmann::json to_json() const { return str(); }
  static DataType from_json(const nlohmann::json& j);
  uint64_t hash() const { return (uint64_t(code_) << 32) | (uint64_t(bits_) << 16) | lanes_; }
  bool operator==(const DataType&) const = default;

 private:
  Code code_ = Code::kFloat;
  uint8_t bits_ = 32;
  uint16_t lanes_ = 1;
};

}  // namespace tensortune::ir
