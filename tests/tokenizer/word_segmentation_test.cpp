// Word segmentation of scripts written without spaces (ICU's UAX #29 word boundaries with its
// dictionaries) inside the whitespace tokenizer.
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "streamvec/tokenizer/whitespace_tokenizer.h"
#include "streamvec/tokenizer/word_segmenter.h"

namespace streamvec {
namespace {

std::vector<std::string> Tokens(std::string_view text, TokenizerOptions options = {},
                                TokenizerStats* stats = nullptr, size_t chunk = 0) {
  WhitespaceTokenizer t(options);
  std::vector<std::string> out;
  auto on_token = [&out](std::string_view w) { out.emplace_back(w); };
  if (chunk == 0) chunk = text.size() + 1;
  for (size_t i = 0; i < text.size(); i += chunk) t.Feed(text.substr(i, chunk), on_token, [] {});
  t.Finish(on_token);
  if (stats) *stats = t.stats();
  return out;
}

using V = std::vector<std::string>;

// The expected words are ICU 72's boundaries (Debian 12), which the issue takes as the reference.
TEST(WordSegmentationTest, SplitsScriptsWrittenWithoutSpaces) {
  EXPECT_EQ(Tokens("私は東京に住んでいます。"), (V{"私", "は", "東京", "に", "住", "んで", "い", "ます"}));
  EXPECT_EQ(Tokens("すべての人間は、生まれながらにして自由である。"),
            (V{"すべて", "の", "人間", "は", "生まれながら", "にし", "て", "自由", "で", "ある"}));
  EXPECT_EQ(Tokens("東京タワーは高い。"), (V{"東京タワー", "は", "高い"}));
  EXPECT_EQ(Tokens("人人生而自由，在尊严和权利上一律平等。"),
            (V{"人", "人生", "而", "自由", "在", "尊严", "和", "权利", "上", "一律", "平等"}));
  EXPECT_EQ(Tokens("他们赋有理性和良心。"), (V{"他们", "赋", "有", "理性", "和", "良心"}));
  EXPECT_EQ(Tokens("มนุษย์ทั้งหลายเกิดมามีอิสระ"),
            (V{"มนุษย์", "ทั้ง", "หลาย", "เกิด", "มา", "มี", "อิสระ"}));
  EXPECT_EQ(Tokens("ทุกคนมีสิทธิ"), (V{"ทุก", "คน", "มี", "สิทธิ"}));
  EXPECT_EQ(Tokens("我爱北京天安门"), (V{"我", "爱", "北京", "天安门"}));
  EXPECT_EQ(Tokens("ฉันรักประเทศไทย"), (V{"ฉัน", "รัก", "ประเทศไทย"}));
  // Amharic ends words with U+1361, not a space.
  EXPECT_EQ(Tokens("የሰው፡ልጅ፡ሁሉ"), (V{"የሰው", "ልጅ", "ሁሉ"}));
}

TEST(WordSegmentationTest, OtherTokensKeepTheWhitespacePath) {
  // Latin, Cyrillic, Arabic and Korean tokens are whole whitespace tokens (punctuation kept).
  EXPECT_EQ(Tokens("The fox, Привет мир! مرحبا بالعالم 안녕하세요 세계"),
            (V{"The", "fox,", "Привет", "мир!", "مرحبا", "بالعالم", "안녕하세요", "세계"}));
  // A mixed token is split where ICU puts the boundaries.
  EXPECT_EQ(Tokens("iPhoneを買った"), (V{"iPhone", "を", "買", "っ", "た"}));
}

TEST(WordSegmentationTest, UrlsAndNumbersStayWhole) {
  EXPECT_EQ(Tokens("詳細はhttps://example.com/a?b=1を参照"),
            (V{"詳細", "は", "https://example.com/a?b=1", "を", "参照"}));
  EXPECT_EQ(Tokens("価格は1,234.5円"), (V{"価格", "は", "1,234.5", "円"}));
}

TEST(WordSegmentationTest, ChunkBoundariesDoNotChangeTheWords) {
  const std::string text = "私は東京に住んでいます。 我爱北京天安门 ฉันรักประเทศไทย";
  for (size_t chunk : {1, 2, 3, 5, 7}) {
    EXPECT_EQ(Tokens(text, {}, nullptr, chunk), Tokens(text)) << "chunk " << chunk;
  }
}

TEST(WordSegmentationTest, InvalidUtf8IsStillRejectedWithItsOffset) {
  TokenizerStats st;
  const V tokens = Tokens(std::string("ok 東京\xFF" "大阪 fine"), {}, &st);
  EXPECT_EQ(tokens, (V{"ok", "fine"}));
  EXPECT_EQ(st.invalid_utf8_tokens, 1u);
  EXPECT_EQ(st.first_skipped_offset, 3u);
}

TEST(WordSegmentationTest, LongRunsAreSplitOrSkippedSafely) {
  // 300 KB of ideographs without a space: split into words, none over max_token_bytes.
  std::string run;
  while (run.size() < 300000) run += "人人生而自由在尊严和权利上一律平等";
  TokenizerStats st;
  const V words = Tokens(run, {}, &st, 4096);
  EXPECT_GT(words.size(), 10000u);
  for (const std::string& w : words) ASSERT_LE(w.size(), 1000u);
  EXPECT_EQ(st.overlong_tokens, 0u);
  // Over max_segment_bytes: skipped as one overlong token, without buffering all of it.
  TokenizerOptions small;
  small.max_segment_bytes = 100000;
  const V none = Tokens(run, small, &st, 4096);
  EXPECT_TRUE(none.empty());
  EXPECT_EQ(st.overlong_tokens, 1u);
  // And segmentation off: the whitespace path's overlong rule.
  TokenizerOptions off;
  off.segment_words = false;
  EXPECT_TRUE(Tokens(run, off, &st).empty());
  EXPECT_EQ(st.overlong_tokens, 1u);
}

// The UDHR in four scripts without spaces between words: no token over 64 characters.
TEST(WordSegmentationTest, UdhrTokensAreWordsNotSentences) {
  for (const char* lang : {"ja", "zh-hans", "th", "am"}) {
    std::ifstream in(std::string(STREAMVEC_TEST_DATA) + "/multilingual/udhr-" + lang + ".txt");
    ASSERT_TRUE(in) << lang;
    std::stringstream ss;
    ss << in.rdbuf();
    TokenizerStats st;
    const V tokens = Tokens(ss.str(), {}, &st);
    EXPECT_GT(tokens.size(), 900u) << lang;
    EXPECT_EQ(st.overlong_tokens + st.invalid_utf8_tokens, 0u) << lang;
    for (const std::string& t : tokens) {
      size_t chars = 0;
      for (unsigned char c : t) chars += (c & 0xC0) != 0x80;
      EXPECT_LE(chars, 64u) << lang << ": " << t;
    }
  }
}

TEST(WordSegmentationTest, NeedsSegmentationOnlyForThoseScripts) {
  EXPECT_TRUE(NeedsWordSegmentation("東京"));
  EXPECT_TRUE(NeedsWordSegmentation("abcカタカナ"));
  EXPECT_TRUE(NeedsWordSegmentation("ไทย"));
  EXPECT_FALSE(NeedsWordSegmentation("hello"));
  EXPECT_FALSE(NeedsWordSegmentation("Привет"));
  EXPECT_FALSE(NeedsWordSegmentation("안녕하세요"));
  EXPECT_FALSE(NeedsWordSegmentation("مرحبا"));
}

}  // namespace
}  // namespace streamvec
