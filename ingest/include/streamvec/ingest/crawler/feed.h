// Feed parsing: RSS 0.90/0.91/0.92/2.0, RSS 1.0 (RDF) and Atom 1.0 (and 0.3) documents into items.
//
// Parsing is strict XML (libxml2, no recovery): a document that is not well-formed is rejected
// with libxml2's reason and position, never half-read. No network access and no external
// entities are loaded (XML_PARSE_NONET, no DTD loading, no entity substitution beyond the
// predefined and internal ones; libxml2's entity-amplification guard applies).
//
// Encoding, first rule that applies (RFC 7303 / WHATWG):
//   1. a byte-order mark (UTF-8, UTF-16LE/BE);
//   2. the HTTP charset (Content-Type: ...; charset=X), when the caller passes one;
//   3. the XML declaration's encoding="X";
//   4. UTF-8 (XML 1.0 section 4.3.3); other bytes are then a well-formedness error, reported
//      ("Input is not proper UTF-8") like any other.
// ISO-8859-1, Latin-1 and US-ASCII are decoded as Windows-1252 (their superset, as browsers do),
// so "smart quotes" in mislabelled feeds come out right. All returned strings are UTF-8.
//
// Thread safety: the functions are reentrant (libxml2 is initialised once, thread-safely).
#ifndef STREAMVEC_INGEST_CRAWLER_FEED_H_
#define STREAMVEC_INGEST_CRAWLER_FEED_H_

#include <string>
#include <string_view>
#include <vector>

#include "streamvec/base/status.h"

namespace streamvec::crawler {

enum class FeedFormat { kRss, kRdf, kAtom };

struct FeedItem {
  std::string id;            // guid / atom:id / rdf:about, else the link, else "sha256:<hex>"
                             // of title + text; never empty
  std::string link;          // absolute URL of the item's page (resolved against xml:base and
                             // the feed URL; a permalink guid or rdf:about when no link); may be
                             // empty
  std::string title;         // plain text (HTML titles converted)
  std::string text;          // the longer of content:encoded / atom:content and description /
                             // summary; HTML converted to plain text (blocks on their own lines)
  std::string published_at;  // RFC 3339 UTC ("2024-05-01T10:00:00Z"), from pubDate, dc:date,
                             // published or updated; empty when absent or unparseable
};

struct Feed {
  FeedFormat format = FeedFormat::kRss;
  std::string title;
  std::string link;
  std::vector<FeedItem> items;  // in document order
};

// Parses one feed document. `base_url` (the URL it was fetched from; may be empty) resolves
// relative links; `http_charset` is the charset parameter of the HTTP Content-Type ("" if none).
// Errors (InvalidArgument): "not well-formed XML: <libxml2 message> (line L, column C)",
// "not a feed: root element <catalog>", "empty document".
StatusOr<Feed> ParseFeed(std::string_view body, std::string_view base_url = "",
                         std::string_view http_charset = "");

// Converts an HTML fragment or document (UTF-8) to plain text: scripts, styles and comments
// dropped, character references decoded, runs of whitespace collapsed to one space, block
// elements (p, div, li, h1..h6, br, tr, ...) on their own lines. Never fails: broken HTML is read
// the way libxml2's HTML parser recovers it.
std::string HtmlToText(std::string_view html);

// Parses an RFC 822 / RFC 1123 date ("Wed, 02 Oct 2002 13:00:00 GMT", "+0200", "EST") or an
// ISO 8601 / RFC 3339 date-time ("2003-12-13T18:30:02.25+01:00", "2003-12-13") and returns it as
// RFC 3339 UTC with second precision, or "" when it cannot be parsed.
std::string NormalizeDate(std::string_view text);

}  // namespace streamvec::crawler

#endif  // STREAMVEC_INGEST_CRAWLER_FEED_H_
