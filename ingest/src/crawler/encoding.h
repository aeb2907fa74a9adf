// Character-encoding decisions shared by the feed parser and the HTML extractor (private).
#ifndef STREAMVEC_INGEST_SRC_CRAWLER_ENCODING_H_
#define STREAMVEC_INGEST_SRC_CRAWLER_ENCODING_H_

#include <string>
#include <string_view>

namespace streamvec::crawler::internal {

// The libxml2 encoding name to force for an XML document, following feed.h's rules (BOM, HTTP
// charset, XML declaration, else UTF-8). `*skip` is set to the number of
// leading bytes to drop (a UTF-8 BOM).
std::string ChooseXmlEncoding(std::string_view body, std::string_view http_charset, size_t* skip);

// The same for HTML: BOM, HTTP charset, <meta charset> / <meta http-equiv content="...charset=">
// in the first 4 KiB (overridden by UTF-8 when the bytes are valid multi-byte UTF-8), then UTF-8
// when valid, else Windows-1252.
std::string ChooseHtmlEncoding(std::string_view body, std::string_view http_charset,
                               size_t* skip);

// Maps a label to the name libxml2 should use: ISO-8859-1 / Latin-1 / US-ASCII -> WINDOWS-1252,
// "utf8" -> UTF-8, others upper-cased. "" for an empty or implausible label.
std::string NormalizeCharset(std::string_view label);

// The charset parameter of a Content-Type header value ("text/xml; charset=utf-8" -> "utf-8").
std::string CharsetFromContentType(std::string_view content_type);

}  // namespace streamvec::crawler::internal

#endif  // STREAMVEC_INGEST_SRC_CRAWLER_ENCODING_H_
