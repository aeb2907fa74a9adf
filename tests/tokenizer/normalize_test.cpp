#include "streamvec/tokenizer/normalize.h"

#include <gtest/gtest.h>
#include <utf8proc.h>

#include <cctype>
#include <cstdlib>
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
  // Unicode case folding: ß folds to ss, final sigma to sigma.
  EXPECT_EQ(NormalizeText("Größe ÄRGER\nΣΟΦΊΑ."), "grösse ärger\nσοφία ");
  EXPECT_EQ(NormalizeText("Привет, мир"), "привет  мир");
  EXPECT_EQ(NormalizeText("1984 ١٢٣"), "1984 ١٢٣");  // digits of any script are kept
}

// NFKC: full-width and compatibility forms become the plain word; a combining mark composes
// with the ASCII letter before it; case folding lowercases beyond ASCII's simple mapping.
TEST(NormalizeTextTest, CompatibilityFormsAndCaseFoldOntoOneWord) {
  EXPECT_EQ(NormalizeText("ＡＢＣ ａｂｃ abc"), "abc abc abc");  // full-width letters
  EXPECT_EQ(NormalizeText("ﬁne fine"), "fine fine");            // the fi ligature
  EXPECT_EQ(NormalizeText("cafe\xCC\x81 café"), "café café");    // e + U+0301 is é
  EXPECT_EQ(NormalizeText("Straße STRASSE"), "strasse strasse");
  EXPECT_EQ(NormalizeText("ｶﾀｶﾅ カタカナ"), "カタカナ カタカナ");  // half-width katakana
  EXPECT_EQ(NormalizeText("x²"), "x2");                           // superscript digit
  // A run with invalid UTF-8 is not folded (only lowercased); its bad bytes become spaces.
  EXPECT_EQ(NormalizeText(std::string("Ａ\xFF" "b", 5)), "ａ b");
}

TEST(NormalizeTextTest, InvalidBytesBecomeSpaces) {
  EXPECT_EQ(NormalizeText(std::string("ab\xFF" "cd", 5)), "ab cd");
  EXPECT_EQ(NormalizeText(std::string("x\0y", 3)), "x y");
}

// NormalizeText's fold as its documentation states it: NFKC with case folding of each maximal
// run of non-ASCII bytes, taken with the ASCII letter or digit before it; a run that is not valid
// UTF-8 is kept as it is.
std::string ReferenceFold(const std::string& text) {
  std::string out;
  size_t i = 0;
  while (i < text.size()) {
    if (static_cast<unsigned char>(text[i]) < 0x80) {
      out += text[i++];
      continue;
    }
    size_t start = i, end = i;
    while (end < text.size() && static_cast<unsigned char>(text[end]) >= 0x80) ++end;
    if (start > 0 && std::isalnum(static_cast<unsigned char>(text[start - 1]))) {
      out.pop_back();
      --start;
    }
    const std::string run = text.substr(start, end - start);
    utf8proc_uint8_t* folded =
        utf8proc_NFKC_Casefold(reinterpret_cast<const utf8proc_uint8_t*>(run.c_str()));
    out += folded != nullptr ? std::string(reinterpret_cast<const char*>(folded)) : run;
    std::free(folded);
    i = end;
  }
  return out;
}

// The plain per-code-point normaliser (decode everything with utf8proc, classify and map each
// code point, encode) after ReferenceFold: the oracle of NormalizeText's fast paths.
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

std::string ReferenceNormalize(std::string_view raw) {
  const std::string folded = ReferenceFold(std::string(raw));
  const std::string_view text = folded;
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
