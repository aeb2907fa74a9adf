// libFuzzer target: WhitespaceTokenizer with word segmentation (the ICU path) and NormalizeText
// on arbitrary bytes, fed in chunks whose size the first byte picks. Every token must be valid
// UTF-8 without NUL and at most max_token_bytes long; ICU's path must not be quadratic
// (libFuzzer's -timeout catches a slow input). Bits 6-7 of the first byte pick
// max_segment_bytes (16, 64, 256, 1024), so short inputs reach the cap's paths too.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "streamvec/tokenizer/normalize.h"
#include "streamvec/tokenizer/whitespace_tokenizer.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const size_t chunk = 1 + data[0] % 64;
  const int cap = data[0] >> 6;
  std::string_view text(reinterpret_cast<const char*>(data) + 1, size - 1);
  streamvec::TokenizerOptions options;
  options.max_token_bytes = 64;
  options.max_segment_bytes = size_t{16} << (2 * cap);
  for (int pass = 0; pass < 2; ++pass) {
    const std::string normalized = pass == 1 ? streamvec::NormalizeText(text) : std::string();
    const std::string_view in = pass == 1 ? std::string_view(normalized) : text;
    // One tokenizer a cap and pass for the whole run (Finish empties it after each input):
    // ICU's break iterator is made once, as in a trainer.
    static streamvec::WhitespaceTokenizer* tokenizers[4][2] = {};
    if (tokenizers[cap][pass] == nullptr) {
      tokenizers[cap][pass] = new streamvec::WhitespaceTokenizer(options);  // kept to the end
    }
    streamvec::WhitespaceTokenizer& t = *tokenizers[cap][pass];
    auto on_token = [&](std::string_view w) {
      if (w.empty() || w.size() > options.max_token_bytes || !streamvec::IsValidToken(w)) {
        std::abort();
      }
    };
    for (size_t i = 0; i < in.size(); i += chunk) t.Feed(in.substr(i, chunk), on_token, [] {});
    t.Finish(on_token);
  }
  return 0;
}
