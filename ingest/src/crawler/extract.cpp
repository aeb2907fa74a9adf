// Readability-like main-text extraction (see extract.h for the algorithm and its sources).
#include "streamvec/ingest/crawler/extract.h"

#include <libxml/HTMLparser.h>
#include <libxml/tree.h>

#include <algorithm>
#include <cmath>
#include <iterator>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "encoding.h"
#include "hash.h"
#include "text_builder.h"

namespace streamvec::crawler {
namespace {

using internal::LowerName;

struct DocFree {
  void operator()(xmlDoc* d) const { xmlFreeDoc(d); }
};

std::string Attr(const xmlNode* n, const char* name) {
  xmlChar* v = xmlGetProp(n, BAD_CAST name);
  std::string out = v ? reinterpret_cast<const char*>(v) : "";
  xmlFree(v);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

// Readability's class/id patterns (Readability.js REGEXPS: unlikelyCandidates,
// okMaybeItsACandidate, positive, negative): alternations of literals, matched as substrings of
// the lowercased class and id (Attr lowercases). A plain scan: std::regex took a third of an
// extraction.
constexpr std::string_view kUnlikely[] = {
    "-ad-",         "ai2html",    "banner",     "breadcrumbs", "combx",  "comment",
    "community",    "cover-wrap", "disqus",     "extra",       "footer", "gdpr",
    "header",       "legends",    "menu",       "related",     "remark", "replies",
    "rss",          "shoutbox",   "sidebar",    "skyscraper",  "social", "sponsor",
    "supplemental", "ad-break",   "agegate",    "pagination",  "pager",  "popup",
    "yom-remote",   "share",      "newsletter", "subscribe",   "promo",  "cookie"};
constexpr std::string_view kMaybeCandidate[] = {"and",     "article", "body",  "column",
                                                "content", "main",    "shadow"};
constexpr std::string_view kPositive[] = {"article", "body", "content", "entry",      "hentry",
                                          "h-entry", "main", "page",    "pagination", "post",
                                          "text",    "blog", "story"};
// Besides these, "hid" as a whole space-separated word (the pattern's ^hid$, hid$, hid , ^hid ).
constexpr std::string_view kNegative[] = {
    "-ad-",       "hidden",  "banner",   "combx",  "comment",  "com-",     "contact",
    "foot",       "footer",  "footnote", "gdpr",   "masthead", "media",    "meta",
    "outbrain",   "promo",   "related",  "scroll", "share",    "shoutbox", "sidebar",
    "skyscraper", "sponsor", "shopping", "tags",   "tool",     "widget"};

template <size_t N>
bool ContainsAny(std::string_view s, const std::string_view (&needles)[N]) {
  return std::any_of(std::begin(needles), std::end(needles),
                     [&](std::string_view n) { return s.find(n) != std::string_view::npos; });
}

bool HasWord(std::string_view s, std::string_view word) {
  for (size_t p = s.find(word); p != std::string_view::npos; p = s.find(word, p + 1)) {
    const size_t e = p + word.size();
    if ((p == 0 || s[p - 1] == ' ') && (e == s.size() || s[e] == ' ')) return true;
  }
  return false;
}

bool IsNegative(std::string_view s) { return ContainsAny(s, kNegative) || HasWord(s, "hid"); }

bool IsChrome(const std::string& name) {
  static const char* kNames[] = {"script", "style",  "noscript", "iframe", "svg",    "form",
                                 "nav",    "header", "footer",   "aside",  "button", "select",
                                 "input",  "textarea", "object", "embed",  "link",   "meta",
                                 "template", "canvas", "dialog", "menu"};
  return std::any_of(std::begin(kNames), std::end(kNames),
                     [&](const char* n) { return name == n; });
}

// Removes page chrome and unlikely candidates. Iterative, so deep documents are safe.
void Prune(xmlNode* root) {
  std::vector<xmlNode*> remove;
  std::vector<xmlNode*> stack = {root};
  while (!stack.empty()) {
    xmlNode* n = stack.back();
    stack.pop_back();
    for (xmlNode* c = n->children; c; c = c->next) {
      if (c->type == XML_COMMENT_NODE) {
        remove.push_back(c);
        continue;
      }
      if (c->type != XML_ELEMENT_NODE) continue;
      const std::string name = LowerName(c);
      const std::string role = Attr(c, "role");
      const std::string match = Attr(c, "class") + " " + Attr(c, "id");
      const bool hidden = c->properties != nullptr &&
                          (xmlHasProp(c, BAD_CAST "hidden") != nullptr ||
                           Attr(c, "aria-hidden") == "true" ||
                           Attr(c, "style").find("display:none") != std::string::npos ||
                           Attr(c, "style").find("display: none") != std::string::npos);
      const bool unlikely = name != "body" && name != "a" && name != "article" && name != "main" &&
                            match.size() > 1 && ContainsAny(match, kUnlikely) &&
                            !ContainsAny(match, kMaybeCandidate);
      if (IsChrome(name) || hidden || unlikely || role == "navigation" || role == "menu" ||
          role == "menubar" || role == "complementary" || role == "dialog" ||
          role == "alert" || role == "banner" || role == "contentinfo") {
        remove.push_back(c);
      } else {
        stack.push_back(c);
      }
    }
  }
  for (xmlNode* n : remove) {
    xmlUnlinkNode(n);
    xmlFreeNode(n);
  }
}

struct Counts {
  size_t text = 0;       // bytes of text
  size_t link_text = 0;  // bytes of text inside <a>
  int commas = 0;
};

void Count(const xmlNode* node, bool in_link, Counts* c) {
  std::vector<std::pair<const xmlNode*, bool>> stack = {{node, in_link}};
  while (!stack.empty()) {
    auto [n, link] = stack.back();
    stack.pop_back();
    if (n->type == XML_TEXT_NODE && n->content) {
      const std::string_view t = reinterpret_cast<const char*>(n->content);
      size_t len = 0;
      for (char ch : t) {
        if (!std::isspace(static_cast<unsigned char>(ch))) ++len;
        if (ch == ',') ++c->commas;
      }
      // Full-width commas (U+FF0C) and ideographic commas (U+3001) count too.
      for (size_t p = t.find("\xEF\xBC\x8C"); p != std::string_view::npos;
           p = t.find("\xEF\xBC\x8C", p + 3)) {
        ++c->commas;
      }
      c->text += len;
      if (link) c->link_text += len;
      continue;
    }
    if (n->type != XML_ELEMENT_NODE && n->type != XML_HTML_DOCUMENT_NODE) continue;
    const bool is_link = link || LowerName(n) == "a";
    for (const xmlNode* ch = n->children; ch; ch = ch->next) stack.push_back({ch, is_link});
  }
}

double LinkDensity(const xmlNode* n) {
  Counts c;
  Count(n, false, &c);
  return c.text == 0 ? 0 : static_cast<double>(c.link_text) / c.text;
}

int ClassWeight(const xmlNode* n) {
  int w = 0;
  for (const char* attr : {"class", "id"}) {
    const std::string v = Attr(n, attr);
    if (v.empty()) continue;
    if (IsNegative(v)) w -= 25;
    if (ContainsAny(v, kPositive)) w += 25;
  }
  return w;
}

double TagWeight(const std::string& name) {
  if (name == "div" || name == "article" || name == "main" || name == "section") return 5;
  if (name == "pre" || name == "td" || name == "blockquote") return 3;
  if (name == "address" || name == "ol" || name == "ul" || name == "dl" || name == "dd" ||
      name == "dt" || name == "li" || name == "form") {
    return -3;
  }
  if (name.size() == 2 && name[0] == 'h' && name[1] >= '1' && name[1] <= '6') return -5;
  if (name == "th") return -5;
  return 0;
}

bool HasBlockChild(const xmlNode* n) {
  for (const xmlNode* c = n->children; c; c = c->next) {
    const std::string name = LowerName(c);
    if (name == "p" || name == "div" || name == "table" || name == "ul" || name == "ol" ||
        name == "pre" || name == "blockquote" || name == "section" || name == "article" ||
        (name.size() == 2 && name[0] == 'h' && std::isdigit(static_cast<unsigned char>(name[1])))) {
      return true;
    }
  }
  return false;
}

void CollectParagraphs(xmlNode* root, std::vector<xmlNode*>* out) {
  std::vector<xmlNode*> stack = {root};
  while (!stack.empty()) {
    xmlNode* n = stack.back();
    stack.pop_back();
    for (xmlNode* c = n->children; c; c = c->next) {
      if (c->type != XML_ELEMENT_NODE) continue;
      const std::string name = LowerName(c);
      if (name == "p" || name == "pre" || name == "td" ||
          ((name == "div" || name == "section") && !HasBlockChild(c))) {
        out->push_back(c);
      }
      stack.push_back(c);
    }
  }
}

// Drops lists, tables and divs inside the chosen content that are mostly links or empty
// (Readability's _cleanConditionally, simplified).
void CleanConditionally(xmlNode* root) {
  std::vector<xmlNode*> remove;
  std::vector<xmlNode*> stack = {root};
  while (!stack.empty()) {
    xmlNode* n = stack.back();
    stack.pop_back();
    for (xmlNode* c = n->children; c; c = c->next) {
      if (c->type != XML_ELEMENT_NODE) continue;
      const std::string name = LowerName(c);
      if (name == "ul" || name == "ol" || name == "div" || name == "table" || name == "section") {
        Counts counts;
        Count(c, false, &counts);
        const double density = counts.text ? double(counts.link_text) / counts.text : 0;
        const int weight = ClassWeight(c);
        if (weight < 0 || (counts.commas < 10 && ((weight < 25 && density > 0.3) ||
                                                  density > 0.5 || counts.text == 0))) {
          if (!(counts.text == 0 && xmlFirstElementChild(c) != nullptr &&
                LowerName(xmlFirstElementChild(c)) == "img")) {
            remove.push_back(c);
            continue;
          }
        }
      }
      stack.push_back(c);
    }
  }
  for (xmlNode* n : remove) {
    xmlUnlinkNode(n);
    xmlFreeNode(n);
  }
}

}  // namespace

StatusOr<Article> ExtractArticle(std::string_view html, std::string_view http_charset) {
  internal::InitLibXml();
  size_t skip = 0;
  const std::string encoding = internal::ChooseHtmlEncoding(html, http_charset, &skip);
  html.remove_prefix(skip);
  if (html.find_first_not_of(" \t\r\n") == std::string_view::npos) {
    return Status::InvalidArgument("empty document");
  }
  if (html.size() > static_cast<size_t>(INT32_MAX)) return Status::InvalidArgument("too large");
  std::unique_ptr<xmlDoc, DocFree> doc(
      htmlReadMemory(html.data(), static_cast<int>(html.size()), nullptr, encoding.c_str(),
                     HTML_PARSE_RECOVER | HTML_PARSE_NOERROR | HTML_PARSE_NOWARNING |
                         HTML_PARSE_NONET | HTML_PARSE_COMPACT));
  if (!doc) return Status::InvalidArgument("not HTML");
  xmlNode* root = xmlDocGetRootElement(doc.get());
  if (root == nullptr) return Status::InvalidArgument("empty document");
  Article article;
  article.lang = Attr(root, "lang");
  for (xmlNode* head = root->children; head; head = head->next) {
    if (LowerName(head) != "head") continue;
    for (xmlNode* t = head->children; t; t = t->next) {
      if (LowerName(t) == "title") {
        xmlChar* v = xmlNodeGetContent(t);
        internal::TextBuilder b;
        if (v != nullptr) b.AddText(reinterpret_cast<const char*>(v));
        xmlFree(v);
        article.title = b.Finish();
      }
    }
  }
  Prune(root);

  std::vector<xmlNode*> paragraphs;
  CollectParagraphs(root, &paragraphs);
  std::map<xmlNode*, double> scores;
  auto init = [&scores](xmlNode* n) {
    if (!scores.count(n)) scores[n] = TagWeight(LowerName(n)) + ClassWeight(n);
  };
  for (xmlNode* p : paragraphs) {
    Counts c;
    Count(p, false, &c);
    if (c.text < 25) continue;
    const double score = 1 + c.commas + std::min(std::floor(c.text / 100.0), 3.0);
    xmlNode* a = p->parent;
    for (int level = 0; a && a->type == XML_ELEMENT_NODE && level < 5; ++level, a = a->parent) {
      init(a);
      const double divider = level == 0 ? 1 : level == 1 ? 2 : level * 3;
      scores[a] += score / divider;
    }
  }
  xmlNode* top = nullptr;
  double top_score = 0;
  for (auto& [n, s] : scores) {
    s *= 1 - LinkDensity(n);
    if (top == nullptr || s > top_score) {
      top = n;
      top_score = s;
    }
  }
  if (top == nullptr) {
    top = root;
  } else {
    // Readability: if the top candidate is the only child, its parent is the article.
    while (top->parent && top->parent->type == XML_ELEMENT_NODE && LowerName(top->parent) != "body" &&
           xmlChildElementCount(top->parent) == 1) {
      top = top->parent;
    }
  }
  // Collect the top candidate and qualifying siblings, in document order.
  std::vector<xmlNode*> parts;
  const double threshold = std::max(10.0, top_score * 0.2);
  const std::string top_class = Attr(top, "class");
  if (top->parent != nullptr && top != root) {
    for (xmlNode* s = top->parent->children; s; s = s->next) {
      if (s->type != XML_ELEMENT_NODE) continue;
      bool append = s == top;
      if (!append) {
        double bonus = (!top_class.empty() && Attr(s, "class") == top_class) ? top_score * 0.2 : 0;
        auto it = scores.find(s);
        if (it != scores.end() && it->second + bonus >= threshold) append = true;
        if (!append && LowerName(s) == "p") {
          Counts c;
          Count(s, false, &c);
          const double density = c.text ? double(c.link_text) / c.text : 0;
          const std::string text = internal::NodeText(s);  // may be empty: Count counts bytes NodeText drops
          if ((c.text > 80 && density < 0.25) ||
              (c.text > 0 && c.text <= 80 && density == 0 &&
               (text.find(". ") != std::string::npos ||
                (!text.empty() && text.back() == '.')))) {
            append = true;
          }
        }
      }
      if (append) parts.push_back(s);
    }
  } else {
    parts.push_back(top);
  }
  internal::TextBuilder out;
  for (xmlNode* p : parts) {
    CleanConditionally(p);
    internal::AppendText(p, &out);
    out.BreakLine();
  }
  article.text = out.Finish();
  if (article.text.empty()) return Status::InvalidArgument("no text found");
  return article;
}

}  // namespace streamvec::crawler
