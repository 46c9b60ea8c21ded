/// \file
/// The one JSON reader: strict RFC 8259 text to values, with no DOM unless
/// asked for one. load_string walks a saved graph with it (object/serialize.cc
/// hands each field's value to FieldInfo::read), and parse_json_text builds
/// an nlohmann::json DOM with it, so the two accept exactly the same text.
///
/// nlohmann::json is the value type the code passes around; its own parser is
/// not used. Its lexer alone took longer over a 10,000-record log than this
/// reader takes to read the log and build every record (bench/records_bench).
///
/// Strict means: no comments, no byte-order mark, no trailing commas, no
/// leading zeros or '+'; raw control characters, bad escapes, lone surrogates
/// and invalid UTF-8 in strings are errors; a key twice in one object is an
/// error; nesting deeper than kMaxJsonNesting is an error.
#pragma once

#include <array>
#include <bitset>
#include <charconv>
#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <string_view>

#include "tensortune/object/field_traits.h"
#include "tensortune/object/serialize.h"
#include "tensortune/support/strings.h"

namespace tensortune::detail {

/// The bytes a JSON string holds as they are: printable ASCII but '"' and '\\'.
/// A table, so the scanners test each byte once instead of four times.
inline constexpr std::array<bool, 256> kPlainStringByte = [] {
  std::array<bool, 256> plain{};
  for (int c = 0x20; c < 0x80; ++c) plain[c] = c != '"' && c != '\\';
  return plain;
}();

/// a == b, inlined: std::string_view's == calls memcmp, which costs more than
/// comparing the few bytes of a key or type name.
inline bool same_text(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (a[i] != b[i]) return false;
  }
  return true;
}

/// Reads JSON text front to back. Each read returns false on text it cannot
/// read and remembers the first such place and why (error()); the caller
/// decides whether that is an error or, for load_string, a form it leaves to
/// the DOM path.
class JsonText : public JsonReader {
 public:
  explicit JsonText(std::string_view text)
      : begin_(text.data()), p_(text.data()), end_(text.data() + text.size()) {}

  Kind peek() override {
    skip_ws();
    if (p_ == end_) return Kind::kInvalid;
    switch (*p_) {
      case 'n': return Kind::kNull;
      case 't':
      case 'f': return Kind::kBool;
      case '"': return Kind::kString;
      case '[': return Kind::kArray;
      case '{': return Kind::kObject;
      case '-': return Kind::kNumber;
      default: return is_digit(*p_) ? Kind::kNumber : Kind::kInvalid;
    }
  }

  bool read_null() override {
    skip_ws();
    return literal("null");
  }

  bool read_bool(bool& v) override {
    skip_ws();
    if (p_ != end_ && *p_ == 't') {
      v = true;
      return literal("true");
    }
    v = false;
    return literal("false");
  }

  bool read_int(JsonInt& v) override {
    Number n;
    return scan_number(n) && n.integer && to_int(n, v);
  }

  bool read_number(double& v) override {
    Number n;
    return scan_number(n) && to_double(n, v);
  }

  bool read_string(std::string_view& v) override {
    skip_ws();
    return scan_string(v);
  }

  bool begin_array() override {
    skip_ws();
    if (p_ == end_ || *p_ != '[') return unexpected("'['");
    if (!enter()) return false;
    ++p_;
    first_element_[depth_] = true;
    return true;
  }

  bool next_element() override {
    skip_ws();
    if (p_ != end_ && *p_ == ']') {
      ++p_;
      --depth_;
      return false;
    }
    if (first_element_[depth_]) {
      first_element_[depth_] = false;
      return true;
    }
    if (p_ == end_ || *p_ != ',') {
      failed_ = true;
      return unexpected("',' or ']'");
    }
    ++p_;
    return true;
  }

  /// Any value as a DOM, holding what nlohmann::json holds for it: integers
  /// as unsigned (non-negative) or signed when they fit 64 bits, other numbers
  /// as doubles; object keys unescaped.
  bool read_json(nlohmann::json& v) override {
    switch (peek()) {
      case Kind::kNull: v = nullptr; return read_null();
      case Kind::kBool: {
        bool b;
        if (!read_bool(b)) return false;
        v = b;
        return true;
      }
      case Kind::kString: {
        std::string_view s;
        if (!read_string(s)) return false;
        v = std::string(s);
        return true;
      }
      case Kind::kNumber: {
        Number n;
        if (!scan_number(n)) return false;
        JsonInt i;
        if (n.integer && to_int(n, i)) {
          if (i.is_unsigned) {
            v = i.u;
          } else {
            v = i.s;
          }
          return true;
        }
        double d;
        if (!to_double(n, d)) return false;
        v = d;
        return true;
      }
      case Kind::kArray: return read_json_array(v);
      case Kind::kObject: return read_json_object(v);
      case Kind::kInvalid: return unexpected("a value");
    }
    return false;
  }

  bool read_text(std::string_view& text) override {
    skip_ws();
    const char* start = p_;
    if (!skip_value()) return false;
    text = std::string_view(start, static_cast<size_t>(p_ - start));
    return true;
  }

  /// An object key and its ':'. With `plain_only`, a key with escapes is
  /// refused (load_string's walk compares keys as they are written).
  bool read_key(std::string_view& key, bool plain_only) {
    skip_ws();
    if (p_ == end_ || *p_ != '"') return unexpected("a string key");
    if (!scan_string(key)) return false;
    if (plain_only && escaped_) return false;
    return consume(':') || unexpected("':'");
  }

  /// Checks one value of any kind and moves past it.
  bool skip_value() {
    skip_ws();
    if (p_ == end_) return unexpected("a value");
    switch (*p_) {
      case '"': {
        std::string_view s;
        return scan_string(s);
      }
      case 'n': return literal("null");
      case 't': return literal("true");
      case 'f': return literal("false");
      case '[':
      case '{': {
        const char close = *p_ == '[' ? ']' : '}';
        if (!enter()) return false;
        ++p_;
        if (consume(close)) {
          --depth_;
          return true;
        }
        while (true) {
          if (close == '}') {
            std::string_view key;
            if (!read_key(key, false)) return false;
          }
          if (!skip_value()) return false;
          if (consume(',')) continue;
          if (consume(close)) break;
          return unexpected(close == '}' ? "',' or '}'" : "',' or ']'");
        }
        --depth_;
        return true;
      }
      default: {
        Number n;
        return scan_number(n);
      }
    }
  }

  /// Skips whitespace, then consumes `c` if it is next.
  bool consume(char c) {
    skip_ws();
    if (p_ == end_ || *p_ != c) return false;
    ++p_;
    return true;
  }

  /// True when only whitespace is left; otherwise records the error.
  bool at_end() {
    skip_ws();
    return p_ == end_ || unexpected("the end of the text");
  }

  /// Whether the last string read had escapes (its view is then of a scratch copy).
  bool escaped() const { return escaped_; }
  /// Whether next_element() met malformed text (it can only say "no more").
  bool failed() const { return failed_; }
  /// Nesting depth of the arrays and objects open at the cursor.
  int depth() const { return depth_; }
  void set_depth(int depth) { depth_ = depth; }
  const char* position() const { return p_; }
  void seek(const char* p) { p_ = p; }

  /// "at byte offset N: why" for the first place the text could not be read,
  /// N counting from 1 (as nlohmann::json's parser, which this replaced, did).
  std::string error() const {
    const char* at = error_at_ ? error_at_ : p_;
    return "at byte offset " + std::to_string(at - begin_ + 1) + ": " + error_why_;
  }

 private:
  struct Number {
    const char* begin;
    const char* end;
    bool integer;  ///< no fraction, no exponent
  };

  static bool is_digit(char c) { return c >= '0' && c <= '9'; }

  /// Records the first error (at `at`, default the cursor) and returns false.
  bool error_here(std::string why, const char* at = nullptr) {
    if (!error_at_) {
      error_at_ = at ? at : p_;
      error_why_ = std::move(why);
    }
    return false;
  }

  /// "expected X, found Y", Y being the next byte (or the end of the text).
  bool unexpected(std::string_view expected) {
    std::string found;
    if (p_ == end_) {
      found = "the end of the text";
    } else if (auto c = static_cast<unsigned char>(*p_); c >= 0x20 && c < 0x7f) {
      found = std::string("'") + static_cast<char>(c) + "'";
    } else {
      static constexpr char kHex[] = "0123456789abcdef";
      found = std::string("byte 0x") + kHex[c >> 4] + kHex[c & 15];
    }
    return error_here("expected " + std::string(expected) + ", found " + found);
  }

  bool enter() {
    if (depth_ >= kMaxJsonNesting) {
      return error_here("nested deeper than " + std::to_string(kMaxJsonNesting) + " levels");
    }
    ++depth_;
    return true;
  }

  void skip_ws() {
    while (p_ != end_ && (*p_ == ' ' || *p_ == '\n' || *p_ == '\r' || *p_ == '\t')) ++p_;
  }

  bool literal(std::string_view word) {
    if (static_cast<size_t>(end_ - p_) < word.size() ||
        std::memcmp(p_, word.data(), word.size()) != 0) {
      return unexpected("a value");
    }
    p_ += word.size();
    return true;
  }

  /// A number token by JSON's grammar (what follows it is the caller's concern).
  bool scan_number(Number& n) {
    skip_ws();
    const char* q = p_;
    auto bad = [&] { return error_here("invalid number", q); };
    if (q != end_ && *q == '-') ++q;
    if (q == end_ || !is_digit(*q)) return p_ == q ? unexpected("a value") : bad();
    if (*q == '0') {
      ++q;
    } else {
      while (q != end_ && is_digit(*q)) ++q;
    }
    n.integer = true;
    if (q != end_ && *q == '.') {
      ++q;
      n.integer = false;
      if (q == end_ || !is_digit(*q)) return bad();
      while (q != end_ && is_digit(*q)) ++q;
    }
    if (q != end_ && (*q == 'e' || *q == 'E')) {
      ++q;
      n.integer = false;
      if (q != end_ && (*q == '+' || *q == '-')) ++q;
      if (q == end_ || !is_digit(*q)) return bad();
      while (q != end_ && is_digit(*q)) ++q;
    }
    n.begin = p_;
    n.end = q;
    p_ = q;
    return true;
  }

  /// An integer token that fits 64 bits; false (recording no error) for
  /// larger ones, which are read as doubles.
  static bool to_int(const Number& n, JsonInt& v) {
    if (!n.integer) return false;
    bool negative = *n.begin == '-';
    uint64_t m = 0;
    for (const char* q = n.begin + negative; q != n.end; ++q) {
      auto d = static_cast<uint64_t>(*q - '0');
      if (m > (std::numeric_limits<uint64_t>::max() - d) / 10) return false;
      m = m * 10 + d;
    }
    if (!negative) {
      v = {true, m, 0};
      return true;
    }
    if (m > uint64_t{1} << 63) return false;
    v = {false, 0, static_cast<int64_t>(0 - m)};  // modular, so -2^63 works too
    return true;
  }

  /// A number correctly rounded to a double; too large a magnitude is an
  /// error, too small one reads as the nearest subnormal or zero.
  bool to_double(const Number& n, double& v) {
    JsonInt i;
    if (n.integer && to_int(n, i)) {
      v = i.is_unsigned ? static_cast<double>(i.u) : static_cast<double>(i.s);
      return true;
    }
    auto [end, ec] = std::from_chars(n.begin, n.end, v);
    if (ec == std::errc::result_out_of_range) {
      // from_chars leaves v alone then; strtod tells overflow from underflow.
      v = std::strtod(std::string(n.begin, n.end).c_str(), nullptr);
    } else if (ec != std::errc() || end != n.end) {
      return error_here("invalid number", n.begin);
    }
    if (!std::isfinite(v)) {
      return error_here(
          "number overflow: " + std::string(n.begin, n.end) + " is beyond the range of a double",
          n.begin);
    }
    return true;
  }

  bool hex4(uint32_t& v) {
    if (end_ - p_ < 4) return error_here("a \\u escape needs four hex digits");
    v = 0;
    for (int k = 0; k < 4; ++k) {
      char c = *p_++;
      uint32_t d;
      if (is_digit(c)) {
        d = static_cast<uint32_t>(c - '0');
      } else if (c >= 'a' && c <= 'f') {
        d = static_cast<uint32_t>(c - 'a' + 10);
      } else if (c >= 'A' && c <= 'F') {
        d = static_cast<uint32_t>(c - 'A' + 10);
      } else {
        return error_here("a \\u escape needs four hex digits", p_ - 1);
      }
      v = v * 16 + d;
    }
    return true;
  }

  static void append_utf8(std::string& out, uint32_t cp) {
    if (cp < 0x80) {
      out += static_cast<char>(cp);
    } else if (cp < 0x800) {
      out += static_cast<char>(0xc0 | (cp >> 6));
      out += static_cast<char>(0x80 | (cp & 0x3f));
    } else if (cp < 0x10000) {
      out += static_cast<char>(0xe0 | (cp >> 12));
      out += static_cast<char>(0x80 | ((cp >> 6) & 0x3f));
      out += static_cast<char>(0x80 | (cp & 0x3f));
    } else {
      out += static_cast<char>(0xf0 | (cp >> 18));
      out += static_cast<char>(0x80 | ((cp >> 12) & 0x3f));
      out += static_cast<char>(0x80 | ((cp >> 6) & 0x3f));
      out += static_cast<char>(0x80 | (cp & 0x3f));
    }
  }

  /// A string token, unescaped: a view of the text when it has no escapes
  /// (escaped_ false), else of scratch_.
  bool scan_string(std::string_view& v) {
    escaped_ = false;
    if (p_ == end_ || *p_ != '"') return unexpected("a string");
    const char* start = p_ + 1;
    // A local cursor: stores to p_ in the loop would not be kept in a register.
    const char* q = start;
    while (true) {
      while (q != end_ && kPlainStringByte[static_cast<unsigned char>(*q)]) ++q;
      if (q == end_) return error_here("unterminated string", p_);
      auto c = static_cast<unsigned char>(*q);
      if (c == '"') {
        v = std::string_view(start, static_cast<size_t>(q - start));
        p_ = q + 1;
        return true;
      }
      if (c == '\\') break;
      if (c < 0x80) return error_here("a control character in a string must be escaped", q);
      size_t n = utf8_sequence_length(q, end_);
      if (!n) return error_here("invalid UTF-8 in a string", q);
      q += n;
    }
    const char* open = p_;
    p_ = q;
    escaped_ = true;
    scratch_.assign(start, p_);
    while (true) {
      if (p_ == end_) return error_here("unterminated string", open);
      auto c = static_cast<unsigned char>(*p_);
      if (c == '"') {
        ++p_;
        v = scratch_;
        return true;
      }
      if (c < 0x20) return error_here("a control character in a string must be escaped");
      if (c >= 0x80) {
        size_t n = utf8_sequence_length(p_, end_);
        if (!n) return error_here("invalid UTF-8 in a string");
        scratch_.append(p_, n);
        p_ += n;
        continue;
      }
      ++p_;
      if (c != '\\') {
        scratch_ += static_cast<char>(c);
        continue;
      }
      if (p_ == end_) return error_here("unterminated string", open);
      switch (*p_++) {
        case '"': scratch_ += '"'; break;
        case '\\': scratch_ += '\\'; break;
        case '/': scratch_ += '/'; break;
        case 'b': scratch_ += '\b'; break;
        case 'f': scratch_ += '\f'; break;
        case 'n': scratch_ += '\n'; break;
        case 'r': scratch_ += '\r'; break;
        case 't': scratch_ += '\t'; break;
        case 'u': {
          const char* escape = p_ - 2;
          uint32_t cp;
          if (!hex4(cp)) return false;
          if (cp >= 0xd800 && cp <= 0xdbff) {
            // A high surrogate must be followed by an escaped low one.
            uint32_t low;
            if (end_ - p_ < 2 || p_[0] != '\\' || p_[1] != 'u') {
              return error_here("a high surrogate escape without its low half", escape);
            }
            p_ += 2;
            if (!hex4(low)) return false;
            if (low < 0xdc00 || low > 0xdfff) {
              return error_here("a high surrogate escape without its low half", escape);
            }
            cp = 0x10000 + ((cp - 0xd800) << 10) + (low - 0xdc00);
          } else if (cp >= 0xdc00 && cp <= 0xdfff) {
            return error_here("a low surrogate escape without its high half", escape);
          }
          append_utf8(scratch_, cp);
          break;
        }
        default: return error_here("invalid escape in a string", p_ - 2);
      }
    }
  }

  bool read_json_array(nlohmann::json& v) {
    if (!enter()) return false;
    ++p_;  // '['
    v = nlohmann::json::array();
    if (consume(']')) {
      --depth_;
      return true;
    }
    while (true) {
      nlohmann::json element;
      if (!read_json(element)) return false;
      v.push_back(std::move(element));
      if (consume(',')) continue;
      if (consume(']')) break;
      return unexpected("',' or ']'");
    }
    --depth_;
    return true;
  }

  bool read_json_object(nlohmann::json& v) {
    if (!enter()) return false;
    ++p_;  // '{'
    v = nlohmann::json::object();
    if (consume('}')) {
      --depth_;
      return true;
    }
    while (true) {
      skip_ws();
      const char* key_at = p_;
      std::string_view key_view;
      if (!read_key(key_view, false)) return false;
      std::string key(key_view);  // the value's strings reuse scratch_
      if (v.contains(key)) {
        // The key is valid UTF-8: the string scan checked it.
        return error_here("the key \"" + key + "\" appears twice in one object", key_at);
      }
      nlohmann::json value;
      if (!read_json(value)) return false;
      v.emplace(std::move(key), std::move(value));
      if (consume(',')) continue;
      if (consume('}')) break;
      return unexpected("',' or '}'");
    }
    --depth_;
    return true;
  }

  const char* begin_;
  const char* p_;
  const char* end_;
  int depth_ = 0;
  bool failed_ = false;
  bool escaped_ = false;                            ///< whether the last scan_string met an escape
  std::string scratch_;                             ///< the last escaped string, unescaped
  std::bitset<kMaxJsonNesting + 1> first_element_;  ///< per open array: no element read yet
  const char* error_at_ = nullptr;
  std::string error_why_;
};

}  // namespace tensortune::detail
