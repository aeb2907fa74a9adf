#include "text_builder.h"

#include <array>
#include <cctype>

namespace streamvec::crawler::internal {
namespace {

bool IsSpace(unsigned char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v';
}

bool InList(std::string_view name, std::initializer_list<std::string_view> list) {
  for (std::string_view n : list) {
    if (n == name) return true;
  }
  return false;
}

}  // namespace

void TextBuilder::AddText(std::string_view text) {
  for (size_t i = 0; i < text.size(); ++i) {
    const unsigned char c = static_cast<unsigned char>(text[i]);
    // U+00A0 (no-break space, C2 A0) counts as whitespace for word boundaries.
    if (IsSpace(c) || (c == 0xC2 && i + 1 < text.size() &&
                       static_cast<unsigned char>(text[i + 1]) == 0xA0)) {
      if (c == 0xC2) ++i;
      pending_space_ = true;
      continue;
    }
    if (pending_space_ && !out_.empty() && out_.back() != '\n') out_.push_back(' ');
    pending_space_ = false;
    out_.push_back(static_cast<char>(c));
  }
}

void TextBuilder::BreakLine() {
  pending_space_ = false;
  if (!out_.empty() && out_.back() != '\n') out_.push_back('\n');
}

std::string TextBuilder::Finish() {
  while (!out_.empty() && (out_.back() == '\n' || out_.back() == ' ')) out_.pop_back();
  return std::move(out_);
}

bool IsBlockElement(std::string_view name) {
  return InList(name, {"p", "div", "br", "li", "ul", "ol", "dl", "dt", "dd", "h1", "h2", "h3",
                       "h4", "h5", "h6", "tr", "td", "th", "table", "blockquote", "pre",
                       "section", "article", "header", "footer", "nav", "aside", "main",
                       "figure", "figcaption", "hr", "address", "form", "fieldset", "details",
                       "summary", "caption", "center", "body", "html"});
}

bool IsInvisibleElement(std::string_view name) {
  return InList(name, {"script", "style", "noscript", "template", "head", "title", "iframe",
                       "object", "embed", "svg", "math", "canvas", "select", "button",
                       "textarea", "input", "option"});
}

std::string LowerName(const xmlNode* node) {
  if (node == nullptr || node->type != XML_ELEMENT_NODE || node->name == nullptr) return "";
  std::string name(reinterpret_cast<const char*>(node->name));
  for (char& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return name;
}

void AppendText(const xmlNode* node, TextBuilder* out) {
  // Iterative pre-order walk: deep (hostile) documents must not overflow the stack.
  const xmlNode* const root = node;
  const xmlNode* cur = node;
  while (cur != nullptr) {
    bool descend = false;
    switch (cur->type) {
      case XML_TEXT_NODE:
      case XML_CDATA_SECTION_NODE:
        if (cur->content != nullptr) {
          out->AddText(reinterpret_cast<const char*>(cur->content));
        }
        break;
      case XML_ENTITY_REF_NODE: {
        // Internal entities: their replacement text (children hold the parsed content).
        const xmlNode* ent = cur->children;
        if (ent != nullptr && ent->type == XML_ENTITY_DECL) {
          const auto* decl = reinterpret_cast<const xmlEntity*>(ent);
          if (decl->content != nullptr) out->AddText(reinterpret_cast<const char*>(decl->content));
        }
        break;
      }
      case XML_ELEMENT_NODE: {
        const std::string name = LowerName(cur);
        if (IsInvisibleElement(name)) break;
        if (IsBlockElement(name)) out->BreakLine();
        descend = cur->children != nullptr;
        break;
      }
      case XML_DOCUMENT_NODE:
      case XML_HTML_DOCUMENT_NODE:
        descend = cur->children != nullptr;
        break;
      default:
        break;
    }
    if (descend) {
      cur = cur->children;
      continue;
    }
    // Next sibling, or climb up (closing blocks) until one exists.
    while (cur != root && cur->next == nullptr) {
      cur = cur->parent;
      if (cur == nullptr) return;
      if (IsBlockElement(LowerName(cur))) out->BreakLine();
    }
    if (cur == root) break;
    cur = cur->next;
  }
}

std::string NodeText(const xmlNode* node) {
  TextBuilder b;
  AppendText(node, &b);
  return b.Finish();
}

}  // namespace streamvec::crawler::internal
