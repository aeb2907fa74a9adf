#include "streamvec/tokenizer/whitespace_tokenizer.h"

#include <string>
#include <vector>

#include <gtest/gtest.h>

namespace streamvec {
namespace {

// Tokens and "\n" markers from feeding `text` in chunks of `chunk` bytes.
std::vector<std::string> Tokenize(const std::string& text, size_t chunk,
                                  WhitespaceTokenizer* tok) {
  std::vector<std::string> out;
  auto on_token = [&](std::string_view w) { out.emplace_back(w); };
  auto on_line = [&] { out.emplace_back("\n"); };
  for (size_t i = 0; i < text.size(); i += chunk) {
    tok->Feed(std::string_view(text).substr(i, chunk), on_token, on_line);
  }
  tok->Finish(on_token);
  return out;
}

TEST(WhitespaceTokenizerTest, SplitsOnWhitespaceAndReportsLineEnds) {
  WhitespaceTokenizer tok;
  auto t = Tokenize("the  cat\tsat\r\non the\vmat\n\nend", 1 << 20, &tok);
  std::vector<std::string> want = {"the", "cat", "sat", "\n", "on", "the", "mat", "\n", "\n", "end"};
  EXPECT_EQ(t, want);
  EXPECT_EQ(tok.stats().tokens, 7u);
  EXPECT_EQ(tok.stats().lines, 3u);
}

TEST(WhitespaceTokenizerTest, ChunkBoundariesDoNotChangeTokens) {
  const std::string text = "über straße 東京 naïve words\nacross chunk boundaries çà";
  WhitespaceTokenizer whole;
  const auto expected = Tokenize(text, text.size(), &whole);
  for (size_t chunk = 1; chunk < 12; ++chunk) {
    WhitespaceTokenizer tok;
    EXPECT_EQ(Tokenize(text, chunk, &tok), expected) << "chunk " << chunk;
    EXPECT_EQ(tok.stats().invalid_utf8_tokens, 0u);
  }
}

TEST(WhitespaceTokenizerTest, InvalidUtf8TokensAreSkippedAndCountedWithOffset) {
  // In chunks of 3 bytes (tokens carried across chunks) and in one chunk (tokens classified
  // while they are scanned).
  const std::string text = std::string("good bad\xff\xfe more \xc3 ok nul") + '\0' + "x end";
  for (size_t chunk : {size_t{3}, text.size()}) {
    WhitespaceTokenizer tok;
    auto t = Tokenize(text, chunk, &tok);
    std::vector<std::string> want = {"good", "more", "ok", "end"};
    EXPECT_EQ(t, want) << "chunk " << chunk;
    EXPECT_EQ(tok.stats().invalid_utf8_tokens, 3u) << "chunk " << chunk;
    EXPECT_EQ(tok.stats().first_skipped_offset, 5u) << "chunk " << chunk;
  }
}

TEST(WhitespaceTokenizerTest, OverlongTokensAreSkippedEvenAcrossChunks) {
  TokenizerOptions options;
  options.max_token_bytes = 10;
  WhitespaceTokenizer tok(options);
  const std::string text = "short " + std::string(25, 'x') + " tail " + std::string(10, 'y');
  auto t = Tokenize(text, 4, &tok);
  std::vector<std::string> want = {"short", "tail", std::string(10, 'y')};
  EXPECT_EQ(t, want);
  EXPECT_EQ(tok.stats().overlong_tokens, 1u);
  EXPECT_EQ(tok.stats().first_skipped_offset, 6u);
}

TEST(IsValidTokenTest, AcceptsUtf8RejectsMalformed) {
  EXPECT_TRUE(IsValidToken("plain"));
  EXPECT_TRUE(IsValidToken("Zürich"));
  EXPECT_TRUE(IsValidToken("日本語"));
  EXPECT_FALSE(IsValidToken("\xc3\x28"));
  EXPECT_FALSE(IsValidToken("\xed\xa0\x80"));  // UTF-16 surrogate
  EXPECT_FALSE(IsValidToken(std::string("a\0b", 3)));
}

}  // namespace
}  // namespace streamvec
