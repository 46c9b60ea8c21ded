// Command-line words (private to src/codegen/).
#pragma once

#include <cctype>
#include <string>
#include <vector>

namespace tensortune::codegen::detail {

/// The whitespace-separated words of `text` (a -compiler or -cflags value).
inline std::vector<std::string> split_words(const std::string& text) {
  std::vector<std::string> words;
  std::string word;
  for (char c : text) {
    if (std::isspace(static_cast<unsigned char>(c))) {
      if (!word.empty()) words.push_back(std::move(word));
      word.clear();
    } else {
      word += c;
    }
  }
  if (!word.empty()) words.push_back(std::move(word));
  return words;
}

}  // namespace tensortune::codegen::detail
