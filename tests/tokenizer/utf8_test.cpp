#include "streamvec/tokenizer/utf8.h"

#include <gtest/gtest.h>

namespace streamvec {
namespace {

TEST(Utf8Test, FindInvalidUtf8FindsTheFirstBadByte) {
  EXPECT_EQ(FindInvalidUtf8("plain ascii"), std::string_view::npos);
  EXPECT_EQ(FindInvalidUtf8("caf\xC3\xA9 \xF0\x9F\x98\x80"), std::string_view::npos);
  EXPECT_EQ(FindInvalidUtf8("ab\xFFz"), 2u);
  EXPECT_EQ(FindInvalidUtf8("ab\xC0\xAF"), 2u);          // overlong '/'
  EXPECT_EQ(FindInvalidUtf8("x\xED\xA0\x80"), 1u);       // surrogate U+D800
  EXPECT_EQ(FindInvalidUtf8("x\xF4\x90\x80\x80"), 1u);   // over U+10FFFF
  EXPECT_EQ(FindInvalidUtf8("abc\xE2\x82"), 3u);         // cut off by the end
  EXPECT_EQ(FindInvalidUtf8("\xC3\xA9\x80"), 2u);        // stray continuation byte
}

// A bad byte or a multi-byte character at every position of two eight-byte words and the tail
// (the ASCII fast path reads eight bytes at a time).
TEST(Utf8Test, FindInvalidUtf8FindsABadByteAtEveryPositionOfAWord) {
  for (size_t at = 0; at < 19; ++at) {
    std::string text(19, 'a');
    text[at] = '\xFF';
    EXPECT_EQ(FindInvalidUtf8(text), at) << "0xFF at " << at;
    std::string good(19, 'a');
    good.replace(at, 1, "\xC3\xA9");  // e acute
    EXPECT_EQ(FindInvalidUtf8(good), std::string_view::npos) << "U+00E9 at " << at;
    good.push_back('\xC3');  // cut off by the end
    EXPECT_EQ(FindInvalidUtf8(good), good.size() - 1) << "U+00E9 at " << at;
  }
}

// Every byte value in every position of a word-sized window, and at the tail.
TEST(FindControlByteTest, FindsEveryControlByteAndNothingElse) {
  for (int c = 0; c < 256; ++c) {
    const bool control = (c < 0x20 && (c < 0x09 || c > 0x0D)) || c == 0x7F;
    for (size_t at : {0u, 3u, 7u, 8u, 13u, 17u}) {
      std::string text(18, 'a');
      text[at] = static_cast<char>(c);
      EXPECT_EQ(FindControlByte(text), control ? at : std::string_view::npos)
          << "byte " << c << " at " << at;
    }
  }
  EXPECT_EQ(FindControlByte("tab\there\r and \xC3\xA9t\xC3\xA9 \xFF"), std::string_view::npos);
  EXPECT_EQ(FindControlByte(std::string("two\ttabs\tthen a ") + '\0'), 16u);
  EXPECT_EQ(FindControlByte(""), std::string_view::npos);
}

}  // namespace
}  // namespace streamvec
