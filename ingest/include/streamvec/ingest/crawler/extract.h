// Main-text extraction from an article page: what `--fetch-articles` and `streamvec extract` use.
//
// A Readability-like heuristic (after Mozilla's Readability.js and Kohlschütter et al. 2010,
// "Boilerplate Detection using Shallow Text Features"), on libxml2's HTML parser:
//   1. drop script, style, noscript, iframe, svg, form controls, comments, and the page chrome
//      (nav, header, footer, aside, elements whose role is navigation/complementary/...), and
//      elements whose class or id looks like boilerplate (comment, sidebar, share, related, ...)
//      unless it also looks like content (article, body, content, main, ...);
//   2. score every paragraph-like block (p, pre, td, text-only div) of 25+ characters by its
//      length and commas, credit its parent fully and its grandparent by half (further ancestors
//      less), weighted by tag and class;
//   3. pick the ancestor with the best score x (1 - link density) and merge its siblings that
//      score well or read like prose;
//   4. within the chosen block, drop lists, tables and divs that are mostly links.
// Input bytes are decoded per the BOM, the HTTP charset, <meta charset>, then UTF-8 or
// Windows-1252 (see feed.h). Output is UTF-8, one block per line.
//
// Thread safety: reentrant.
#ifndef STREAMVEC_INGEST_CRAWLER_EXTRACT_H_
#define STREAMVEC_INGEST_CRAWLER_EXTRACT_H_

#include <string>
#include <string_view>

#include "streamvec/base/status.h"

namespace streamvec::crawler {

struct Article {
  std::string title;  // <title> (or og:title), plain text; may be empty
  std::string lang;   // <html lang="..">; may be empty
  std::string text;   // the main text, blocks separated by '\n'
};

// Errors: InvalidArgument "empty document" or "no text found" (nothing readable in the page).
StatusOr<Article> ExtractArticle(std::string_view html, std::string_view http_charset = "");

}  // namespace streamvec::crawler

#endif  // STREAMVEC_INGEST_CRAWLER_EXTRACT_H_
