// The language of a document's text, for the `lang` field the connectors and the crawler fill
// in when the source did not say it.
#ifndef STREAMVEC_INGEST_LANGUAGE_H_
#define STREAMVEC_INGEST_LANGUAGE_H_

#include <string>
#include <string_view>

namespace streamvec {

// CLD2 (Compact Language Detector 2, Debian's libcld2: a naive Bayes classifier over character
// n-grams, about 80 languages) on at most the first kLanguageSampleBytes of `text` (cut back to
// a UTF-8 boundary): the language's code ("en", "de", "ja", "zh", "zh-Hant", ...) when CLD2 finds
// it reliable, else "" (too short, mixed, or invalid UTF-8). Thread-safe.
std::string DetectLanguage(std::string_view text);

inline constexpr size_t kLanguageSampleBytes = 8192;

}  // namespace streamvec

#endif  // STREAMVEC_INGEST_LANGUAGE_H_
