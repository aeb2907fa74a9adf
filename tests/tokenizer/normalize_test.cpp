#include "streamvec/tokenizer/normalize.h"

#include <gtest/gtest.h>
#include <utf8proc.h>

#include <random>
#include <string>
#include <vector>

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

// The plain per-code-point normaliser (decode everything with utf8proc, classify and map each
// code point, encode): the oracle of NormalizeText's ASCII fast path.
enum class RefKind { kWord, kJoiner, kSpace, kNewline };

RefKind RefClassify(utf8proc_int32_t cp) {
  if (cp == '\n') return RefKind::kNewline;
  if (cp == '\'' || cp == 0x2019 || cp == '-') return RefKind::kJoiner;
  switch (utf8proc_category(cp)) {
    case UTF8PROC_CATEGORY_LU:
    case UTF8PROC_CATEGORY_LL:
    case UTF8PROC_CATEGORY_LT:
    case UTF8PROC_CATEGORY_LM:
    case UTF8PROC_CATEGORY_LO:
    case UTF8PROC_CATEGORY_MN:
    case UTF8PROC_CATEGORY_MC:
    case UTF8PROC_CATEGORY_ME:
    case UTF8PROC_CATEGORY_ND:
    case UTF8PROC_CATEGORY_NL:
    case UTF8PROC_CATEGORY_NO:
      return RefKind::kWord;
    default:
      return RefKind::kSpace;
  }
}

std::string ReferenceNormalize(std::string_view text) {
  std::vector<utf8proc_int32_t> cps;
  const auto* p = reinterpret_cast<const utf8proc_uint8_t*>(text.data());
  utf8proc_ssize_t left = static_cast<utf8proc_ssize_t>(text.size());
  while (left > 0) {
    utf8proc_int32_t cp = 0;
    utf8proc_ssize_t n = utf8proc_iterate(p, left, &cp);
    if (n <= 0) {
      cp = ' ';
      n = 1;
    }
    cps.push_back(cp);
    p += n;
    left -= n;
  }
  std::string out;
  utf8proc_uint8_t buf[4];
  for (size_t i = 0; i < cps.size(); ++i) {
    utf8proc_int32_t cp = cps[i];
    switch (RefClassify(cp)) {
      case RefKind::kWord:
        cp = utf8proc_tolower(cp);
        break;
      case RefKind::kJoiner: {
        const bool inside = i > 0 && i + 1 < cps.size() &&
                            RefClassify(cps[i - 1]) == RefKind::kWord &&
                            RefClassify(cps[i + 1]) == RefKind::kWord;
        cp = !inside ? ' ' : (cp == 0x2019 ? '\'' : cp);
        break;
      }
      case RefKind::kNewline:
        break;
      case RefKind::kSpace:
        cp = ' ';
        break;
    }
    const utf8proc_ssize_t n = utf8proc_encode_char(cp, buf);
    out.append(reinterpret_cast<const char*>(buf), static_cast<size_t>(n));
  }
  return out;
}

TEST(NormalizeTextTest, MatchesThePerCodePointReferenceOnRandomText) {
  // Pieces that exercise every branch: ASCII letters, digits, joiners between and beside
  // words, punctuation, controls, newlines, multi-byte letters (cased and not), a right single
  // quote, a combining mark, an emoji, and invalid or truncated UTF-8.
  const std::vector<std::string> pieces = {
      "a", "Z", "q", "7", "'", "-", " ", ",", "!", "\"", "\n", "\t", std::string("\0", 1),
      "\x7F", "\xC3\x84", "\xC3\xA9", "\xCE\xA3", "\xE2\x80\x99", "\xCC\x81",
      "\xF0\x9F\x98\x80", "\xD9\xA1", "\xE6\x97\xA5", "\xFF", "\xC3", "\xE2\x80", "\x80"};
  std::mt19937 rng(20261124);
  for (int round = 0; round < 2000; ++round) {
    std::string text;
    const int n = static_cast<int>(rng() % 40);
    for (int i = 0; i < n; ++i) text += pieces[rng() % pieces.size()];
    ASSERT_EQ(NormalizeText(text), ReferenceNormalize(text)) << "input: " << text;
  }
}

}  // namespace
}  // namespace streamvec
