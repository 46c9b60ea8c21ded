#include "tensortune/support/strings.h"

#include <array>
#include <cerrno>
#include <charconv>
#include <cstddef>
#include <cstdint>
#include <cstdlib>

#include "tensortune/support/error.h"

namespace tensortune {

std::vector<std::string> split(std::string_view text, char sep) {
  std::vector<std::string> parts;
  size_t start = 0;
  while (true) {
    size_t pos = text.find(sep, start);
    if (pos == std::string_view::npos) {
      parts.emplace_back(text.substr(start));
      return parts;
    }
    parts.emplace_back(text.substr(start, pos - start));
    start = pos + 1;
  }
}

std::string join(const std::vector<std::string>& parts, std::string_view sep) {
  std::string out;
  for (size_t i = 0; i < parts.size(); ++i) {
    if (i) out += sep;
    out += parts[i];
  }
  return out;
}

std::string_view trim(std::string_view text) {
  const char* ws = " \t\r\n";
  size_t b = text.find_first_not_of(ws);
  if (b == std::string_view::npos) return {};
  size_t e = text.find_last_not_of(ws);
  return text.substr(b, e - b + 1);
}

bool parse_int(std::string_view text, long long* out) {
  if (text.empty()) return false;
  const char* first = text.data();
  if (*first == '+') ++first;
  auto [ptr, ec] = std::from_chars(first, text.data() + text.size(), *out);
  return ec == std::errc() && ptr == text.data() + text.size();
}

bool parse_double(std::string_view text, double* out) {
  if (text.empty()) return false;
  std::string copy(text);
  char* end = nullptr;
  errno = 0;
  *out = std::strtod(copy.c_str(), &end);
  return end == copy.c_str() + copy.size() && errno != ERANGE;
}

std::string format_double(double value) {
  char buf[64];
  auto [ptr, ec] = std::to_chars(buf, buf + sizeof buf, value);
  return std::string(buf, ptr);
}

size_t utf8_sequence_length(const char* p, const char* end) {
  auto at = [&](ptrdiff_t k, unsigned lo, unsigned hi) {
    if (end - p <= k) return false;
    auto c = static_cast<unsigned char>(p[k]);
    return c >= lo && c <= hi;
  };
  auto c = static_cast<unsigned char>(p[0]);
  if (c < 0x80) return 1;
  if (c >= 0xc2 && c <= 0xdf) return at(1, 0x80, 0xbf) ? 2 : 0;
  if (c == 0xe0) return at(1, 0xa0, 0xbf) && at(2, 0x80, 0xbf) ? 3 : 0;
  if ((c >= 0xe1 && c <= 0xec) || c == 0xee || c == 0xef) {
    return at(1, 0x80, 0xbf) && at(2, 0x80, 0xbf) ? 3 : 0;
  }
  if (c == 0xed) return at(1, 0x80, 0x9f) && at(2, 0x80, 0xbf) ? 3 : 0;
  if (c == 0xf0) return at(1, 0x90, 0xbf) && at(2, 0x80, 0xbf) && at(3, 0x80, 0xbf) ? 4 : 0;
  if (c >= 0xf1 && c <= 0xf3) {
    return at(1, 0x80, 0xbf) && at(2, 0x80, 0xbf) && at(3, 0x80, 0xbf) ? 4 : 0;
  }
  if (c == 0xf4) return at(1, 0x80, 0x8f) && at(2, 0x80, 0xbf) && at(3, 0x80, 0xbf) ? 4 : 0;
  return 0;
}

std::string valid_utf8(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  const char* p = text.data();
  const char* end = p + text.size();
  while (p != end) {
    size_t n = utf8_sequence_length(p, end);
    if (n == 0) {
      out += "\xEF\xBF\xBD";  // U+FFFD REPLACEMENT CHARACTER
      ++p;
      continue;
    }
    out.append(p, n);
    p += n;
  }
  return out;
}

namespace {
constexpr char kBase64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
}  // namespace

std::string base64_encode(std::string_view bytes) {
  std::string out;
  out.reserve((bytes.size() + 2) / 3 * 4);
  const auto* p = reinterpret_cast<const unsigned char*>(bytes.data());
  size_t i = 0;
  for (; i + 2 < bytes.size(); i += 3) {
    uint32_t v = (uint32_t{p[i]} << 16) | (uint32_t{p[i + 1]} << 8) | p[i + 2];
    out += kBase64[v >> 18];
    out += kBase64[(v >> 12) & 63];
    out += kBase64[(v >> 6) & 63];
    out += kBase64[v & 63];
  }
  if (i < bytes.size()) {
    uint32_t v = uint32_t{p[i]} << 16;
    if (i + 1 < bytes.size()) v |= uint32_t{p[i + 1]} << 8;
    out += kBase64[v >> 18];
    out += kBase64[(v >> 12) & 63];
    out += i + 1 < bytes.size() ? kBase64[(v >> 6) & 63] : '=';
    out += '=';
  }
  return out;
}

std::string base64_decode(std::string_view text) {
  static const std::array<int8_t, 256> value = [] {
    std::array<int8_t, 256> v{};
    v.fill(-1);
    for (int k = 0; k < 64; ++k) v[static_cast<unsigned char>(kBase64[k])] = static_cast<int8_t>(k);
    return v;
  }();
  TT_CHECK(text.size() % 4 == 0, kParse, "base64 text of ", text.size(),
           " characters (not a multiple of 4)");
  std::string out;
  out.reserve(text.size() / 4 * 3);
  for (size_t i = 0; i < text.size(); i += 4) {
    int pad = (text[i + 3] == '=') + (text[i + 2] == '=');
    TT_CHECK(pad == 0 || i + 4 == text.size(), kParse, "base64 padding before the end");
    uint32_t v = 0;
    for (int k = 0; k < 4; ++k) {
      char c = text[i + static_cast<size_t>(k)];
      int d = (c == '=' && k >= 4 - pad) ? 0 : value[static_cast<unsigned char>(c)];
      TT_CHECK(d >= 0, kParse, "'", std::string(1, c), "' at ", i + static_cast<size_t>(k),
               " is not a base64 character");
      v = (v << 6) | static_cast<uint32_t>(d);
    }
    out += static_cast<char>(v >> 16);
    if (pad < 2) out += static_cast<char>((v >> 8) & 255);
    if (pad < 1) out += static_cast<char>(v & 255);
  }
  return out;
}

}  // namespace tensortune
