/// \file
/// Small string helpers used across layers.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace tensortune {

/// Splits `text` at every `sep`; empty pieces are kept.
std::vector<std::string> split(std::string_view text, char sep);

/// Joins `parts` with `sep` between them.
std::string join(const std::vector<std::string>& parts, std::string_view sep);

/// `text` without leading and trailing whitespace.
std::string_view trim(std::string_view text);

/// True if `text` starts with `prefix`.
inline bool starts_with(std::string_view text, std::string_view prefix) {
  return text.substr(0, prefix.size()) == prefix;
}

/// Parses a whole string as a signed 64-bit integer; false if it is not one.
bool parse_int(std::string_view text, long long* out);

/// Parses a whole string as a double; false if it is not one.
bool parse_double(std::string_view text, double* out);

/// Formats a double so that parsing it back gives the same value (shortest form).
std::string format_double(double value);

/// `bytes` in base64 (RFC 4648, with padding).
std::string base64_encode(std::string_view bytes);
/// The bytes `text` encodes in base64; a kParse error for anything else.
std::string base64_decode(std::string_view text);

/// `text` with every byte that is not part of well-formed UTF-8 replaced by
/// U+FFFD, so that it can be put into JSON (compiler output, a message cut
/// in the middle of a character).
std::string valid_utf8(std::string_view text);

/// The length of the well-formed UTF-8 sequence that starts at `p` (before
/// `end`), or 0 if there is none. RFC 3629's table: no overlong forms, no
/// surrogates, nothing above U+10FFFF.
size_t utf8_sequence_length(const char* p, const char* end);

}  // namespace tensortune
