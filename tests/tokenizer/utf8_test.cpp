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

}  // namespace
}  // namespace streamvec
