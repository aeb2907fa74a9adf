// UTF-8 validation shared by the tokenizer, the connectors and the crawler (utf8proc).
#ifndef STREAMVEC_TOKENIZER_UTF8_H_
#define STREAMVEC_TOKENIZER_UTF8_H_

#include <cstddef>
#include <string_view>

namespace streamvec {

// Byte index of the first byte of `text` that does not start a well-formed UTF-8 sequence
// (RFC 3629: overlong forms, surrogates and code points over U+10FFFF are ill-formed; checked by
// utf8proc_iterate), or std::string_view::npos when all of `text` is valid UTF-8. A sequence cut
// off by the end of `text` is reported at its first byte. NUL is valid here (see IsValidToken).
// O(n); ASCII is checked eight bytes at a time.
size_t FindInvalidUtf8(std::string_view text);

// Byte index of the first control byte that text never holds: C0 controls other than the
// whitespace ones (tab, line feed, vertical tab, form feed, carriage return) and DEL, that is
// 0x00-0x08, 0x0E-0x1F and 0x7F; std::string_view::npos if none. A NUL or an escape in a line
// marks binary data (an executable, an image) given as text. O(n).
size_t FindControlByte(std::string_view text);

}  // namespace streamvec

#endif  // STREAMVEC_TOKENIZER_UTF8_H_
