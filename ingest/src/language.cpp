#include "streamvec/ingest/language.h"

#include <cld2/public/compact_lang_det.h>

namespace streamvec {

std::string DetectLanguage(std::string_view text) {
  if (text.size() > kLanguageSampleBytes) {
    size_t n = kLanguageSampleBytes;
    while (n > 0 && (static_cast<unsigned char>(text[n]) & 0xC0) == 0x80) --n;  // a lead byte
    text = text.substr(0, n);
  }
  bool reliable = false;
  int valid_prefix = 0;
  const CLD2::Language lang = CLD2::DetectLanguageCheckUTF8(
      text.data(), static_cast<int>(text.size()), /*is_plain_text=*/true, &reliable, &valid_prefix);
  if (!reliable || lang == CLD2::UNKNOWN_LANGUAGE) return "";
  return CLD2::LanguageCode(lang);
}

}  // namespace streamvec
