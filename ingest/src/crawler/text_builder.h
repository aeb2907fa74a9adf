// Turning libxml2 trees (HTML or XML) into plain text (private to the crawler).
#ifndef STREAMVEC_INGEST_SRC_CRAWLER_TEXT_BUILDER_H_
#define STREAMVEC_INGEST_SRC_CRAWLER_TEXT_BUILDER_H_

#include <libxml/tree.h>

#include <string>
#include <string_view>

namespace streamvec::crawler::internal {

// Accumulates text with HTML whitespace rules: runs of whitespace become one space, block
// boundaries become one newline, no leading or trailing whitespace on a line.
class TextBuilder {
 public:
  void AddText(std::string_view text);
  void BreakLine();  // ends the current line (no empty lines are produced)
  std::string Finish();  // the text, trimmed

 private:
  std::string out_;
  bool pending_space_ = false;
};

// True for element names (lower-case, HTML) that start a new line: p, div, li, h1, br, tr, ...
bool IsBlockElement(std::string_view name);
// True for elements whose content is never text: script, style, noscript, template, head, ...
bool IsInvisibleElement(std::string_view name);

// Appends the text of `node` and its descendants (elements by local name, case-insensitive;
// comments, processing instructions and invisible elements skipped; entity references expanded).
void AppendText(const xmlNode* node, TextBuilder* out);

// Convenience: the text of one subtree.
std::string NodeText(const xmlNode* node);

// Lower-case local name of an element ("" for other nodes).
std::string LowerName(const xmlNode* node);

}  // namespace streamvec::crawler::internal

#endif  // STREAMVEC_INGEST_SRC_CRAWLER_TEXT_BUILDER_H_
