// Text normalisation for natural text (feeds, articles, paragraphs) before whitespace
// tokenisation, so that "The", "the" and "the," are one word.
//
// First, NFKC with Unicode case folding (utf8proc: compatibility decomposition, canonical
// composition, full case folding) of each run of non-ASCII characters together with the ASCII
// letter or digit before it (so a combining mark composes with its base): full-width and
// compatibility forms become the plain word ("ＡＢＣ" and "ﬁ" are "abc" and "fi"), "Straße" is
// "strasse". Pure ASCII text skips this step; a run that is not valid UTF-8 is not folded.
// Then per Unicode code point (utf8proc, Unicode 15 tables): letters are lowercased (simple case
// mapping, utf8proc_tolower); punctuation (categories Pc Pd Ps Pe Pi Pf Po) and symbols (Sm Sc Sk
// So) become a space, except an apostrophe or hyphen between two letters or digits ("don't",
// "state-of-the-art" stay one word); control characters other than '\n' become a space; letters,
// marks and digits are kept. Invalid UTF-8 bytes become a space. Newlines are kept (they end
// sentences). This is the spirit of word2vec's demo preprocessing (text8: lowercase, no
// punctuation) for any script. Scripts written without spaces are split into words later, by
// the tokenizer (word_segmenter.h).
#ifndef STREAMVEC_TOKENIZER_NORMALIZE_H_
#define STREAMVEC_TOKENIZER_NORMALIZE_H_

#include <string>
#include <string_view>

namespace streamvec {

// Returns the normalised text (UTF-8). Never fails; O(n).
std::string NormalizeText(std::string_view text);

}  // namespace streamvec

#endif  // STREAMVEC_TOKENIZER_NORMALIZE_H_
