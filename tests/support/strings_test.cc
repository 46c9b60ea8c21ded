// String helpers: text made safe for JSON.
#include <gtest/gtest.h>

#include "common/test_util.h"
#include "tensortune/support/strings.h"

namespace tensortune {
namespace {

const std::string kReplacement = "\xEF\xBF\xBD";

TEST(ValidUtf8, KeepsWellFormedTextAsItIs) {
  for (std::string s : {std::string(""), std::string("plain ascii\n"), std::string("caf\xC3\xA9"),
                        std::string("\xE2\x82\xAC 5"), std::string("\xF0\x9F\x98\x80"),
                        std::string("nul\0inside", 10)}) {
    EXPECT_EQ(valid_utf8(s), s);
  }
}

TEST(ValidUtf8, ReplacesEveryByteThatIsNotPartOfACharacter) {
  EXPECT_EQ(valid_utf8("a\xFF"
                       "b"),
            "a" + kReplacement + "b");
  // A character cut in the middle (a message shortened at a byte count).
  EXPECT_EQ(valid_utf8("caf\xC3"), "caf" + kReplacement);
  EXPECT_EQ(valid_utf8("\xE2\x82"), kReplacement + kReplacement);
  // Overlong forms, surrogates and code points above U+10FFFF are not UTF-8.
  EXPECT_EQ(valid_utf8("\xC0\xAF"), kReplacement + kReplacement);
  EXPECT_EQ(valid_utf8("\xED\xA0\x80"), kReplacement + kReplacement + kReplacement);
  EXPECT_EQ(valid_utf8("\xF4\x90\x80\x80"),
            kReplacement + kReplacement + kReplacement + kReplacement);
  // The output is always valid: replacing again changes nothing.
  std::string messy = "x\x80\xC3\xA9\xF0\x9F\x98y\xFE";
  EXPECT_EQ(valid_utf8(valid_utf8(messy)), valid_utf8(messy));
}

TEST(Base64, MatchesRfc4648AndRoundTripsEveryByte) {
  // RFC 4648 section 10's test vectors.
  const std::pair<const char*, const char*> vectors[] = {{"", ""},
                                                         {"f", "Zg=="},
                                                         {"fo", "Zm8="},
                                                         {"foo", "Zm9v"},
                                                         {"foob", "Zm9vYg=="},
                                                         {"fooba", "Zm9vYmE="},
                                                         {"foobar", "Zm9vYmFy"}};
  for (const auto& [plain, coded] : vectors) {
    EXPECT_EQ(base64_encode(plain), coded);
    EXPECT_EQ(base64_decode(coded), plain);
  }
  std::string all;
  for (int i = 0; i < 256; ++i) all.push_back(static_cast<char>(i));
  for (size_t n = 0; n <= all.size(); n += 37) {
    std::string part = all.substr(0, n);
    EXPECT_EQ(base64_decode(base64_encode(part)), part) << n;
  }
}

TEST(Base64, RejectsWhatIsNotBase64) {
  EXPECT_TT_ERROR(base64_decode("Zm9"), kParse, "base64");       // length not a multiple of 4
  EXPECT_TT_ERROR(base64_decode("Zm9*"), kParse, "base64");      // a character outside the alphabet
  EXPECT_TT_ERROR(base64_decode("Z==="), kParse, "base64");      // too much padding
  EXPECT_TT_ERROR(base64_decode("Zg==Zg=="), kParse, "base64");  // padding in the middle
}

}  // namespace
}  // namespace tensortune
