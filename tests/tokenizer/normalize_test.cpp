#include "streamvec/tokenizer/normalize.h"

#include <gtest/gtest.h>

namespace streamvec {
namespace {

TEST(NormalizeTextTest, LowercasesAndDropsPunctuation) {
  EXPECT_EQ(NormalizeText("The cat, the CAT; \"the\" cat!"), "the cat  the cat   the  cat ");
}

TEST(NormalizeTextTest, KeepsApostrophesAndHyphensInsideWords) {
  EXPECT_EQ(NormalizeText("Don't use state-of-the-art -- 'quotes'"),
            "don't use state-of-the-art     quotes ");
  EXPECT_EQ(NormalizeText("it\xE2\x80\x99s"), "it's");  // right single quotation mark
}

TEST(NormalizeTextTest, HandlesOtherScriptsAndKeepsNewlines) {
  EXPECT_EQ(NormalizeText("Größe ÄRGER\nΣΟΦΊΑ."), "größe ärger\nσοφία ");
  EXPECT_EQ(NormalizeText("Привет, мир"), "привет  мир");
  EXPECT_EQ(NormalizeText("1984 ١٢٣"), "1984 ١٢٣");  // digits of any script are kept
}

TEST(NormalizeTextTest, InvalidBytesBecomeSpaces) {
  EXPECT_EQ(NormalizeText(std::string("ab\xFF" "cd", 5)), "ab cd");
  EXPECT_EQ(NormalizeText(std::string("x\0y", 3)), "x y");
}

}  // namespace
}  // namespace streamvec
