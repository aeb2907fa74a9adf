// RSS / RDF / Atom into FeedItems with libxml2 (strict XML, namespace-aware by URI).
#include <libxml/HTMLparser.h>
#include <libxml/parser.h>
#include <libxml/tree.h>
#include <libxml/uri.h>
#include <libxml/xmlerror.h>

#include <cctype>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <memory>
#include <string>

#include "ascii.h"
#include "encoding.h"
#include "hash.h"
#include "streamvec/ingest/crawler/feed.h"
#include "text_builder.h"

namespace streamvec::crawler {
namespace {

using internal::AsciiLower;
using internal::TrimAsciiWhitespace;

using internal::LowerName;
using internal::NodeText;

constexpr const char* kAtomNs = "http://www.w3.org/2005/Atom";
constexpr const char* kAtom03Ns = "http://purl.org/atom/ns#";
constexpr const char* kContentNs = "http://purl.org/rss/1.0/modules/content/";
constexpr const char* kDcNs = "http://purl.org/dc/elements/1.1/";
constexpr const char* kRdfNs = "http://www.w3.org/1999/02/22-rdf-syntax-ns#";

struct DocFree {
  void operator()(xmlDoc* d) const { xmlFreeDoc(d); }
};
struct CtxtFree {
  void operator()(xmlParserCtxt* c) const { xmlFreeParserCtxt(c); }
};
struct XmlCharFree {
  void operator()(xmlChar* c) const { xmlFree(c); }
};
using XmlString = std::unique_ptr<xmlChar, XmlCharFree>;

std::string Str(const xmlChar* s) { return s ? reinterpret_cast<const char*>(s) : ""; }

std::string_view NsHref(const xmlNode* n) {
  return n->ns && n->ns->href ? reinterpret_cast<const char*>(n->ns->href) : "";
}

bool IsAtomNs(const xmlNode* n) {
  const std::string_view ns = NsHref(n);
  return ns == kAtomNs || ns == kAtom03Ns;
}

// Element named `local` (exact case) in namespace `ns` ("" = no namespace or any RSS namespace).
bool Is(const xmlNode* n, const char* local, std::string_view ns = "") {
  if (n->type != XML_ELEMENT_NODE || std::strcmp(reinterpret_cast<const char*>(n->name), local))
    return false;
  if (ns.empty()) {
    // RSS 0.9x/2.0 elements have no namespace; RSS 1.0 / 0.90 use their own; Atom is excluded.
    const std::string_view h = NsHref(n);
    return h.empty() || h == "http://purl.org/rss/1.0/" || h == "http://my.netscape.com/rdf/simple/0.9/" ||
           h == "http://backend.userland.com/rss2";
  }
  return NsHref(n) == ns;
}

std::string Attr(const xmlNode* n, const char* name, const char* ns = nullptr) {
  XmlString v(ns ? xmlGetNsProp(n, BAD_CAST name, BAD_CAST ns) : xmlGetNoNsProp(n, BAD_CAST name));
  return Str(v.get());
}

// Raw character content of an element (entities expanded), trimmed.
std::string RawText(const xmlNode* n) {
  XmlString v(xmlNodeGetContent(n));
  return TrimAsciiWhitespace(Str(v.get()));
}

// Absolute form of `ref` against the node's base (xml:base chain and the document URL).
std::string Resolve(const xmlNode* n, const std::string& ref) {
  if (ref.empty()) return ref;
  XmlString base(xmlNodeGetBase(n->doc, n));
  if (!base) return ref;
  XmlString abs(xmlBuildURI(BAD_CAST ref.c_str(), base.get()));
  return abs ? Str(abs.get()) : ref;
}

bool LooksLikeHtml(const std::string& s) {
  return s.find('<') != std::string::npos || s.find('&') != std::string::npos;
}

// Text of an Atom text construct (type="text" | "html" | "xhtml").
std::string AtomText(const xmlNode* n) {
  const std::string type = Attr(n, "type");
  if (type == "xhtml" || type == "application/xhtml+xml") return NodeText(n);
  const std::string raw = RawText(n);
  if (type == "html" || type == "text/html") {
    return HtmlToText(raw);
  }
  // Plain text: collapse whitespace the same way.
  internal::TextBuilder b;
  b.AddText(raw);
  return b.Finish();
}

// RSS description / content:encoded are HTML (escaped or CDATA) by convention.
std::string RssHtmlText(const xmlNode* n) {
  const std::string raw = RawText(n);
  if (!LooksLikeHtml(raw)) {
    internal::TextBuilder b;
    b.AddText(raw);
    return b.Finish();
  }
  return HtmlToText(raw);
}

void FinishItem(FeedItem* item) {
  if (item->id.empty()) item->id = item->link;
  if (item->id.empty()) item->id = "sha256:" + internal::Sha256Hex(item->title + "\n" + item->text);
}

FeedItem ParseRssItem(const xmlNode* item_node) {
  FeedItem item;
  std::string description, encoded, guid, date, dc_date;
  const xmlNode* guid_node = nullptr;
  for (const xmlNode* c = item_node->children; c; c = c->next) {
    if (c->type != XML_ELEMENT_NODE) continue;
    if (Is(c, "title")) {
      item.title = RssHtmlText(c);
    } else if (Is(c, "link")) {
      item.link = Resolve(c, RawText(c));
    } else if (Is(c, "guid")) {
      guid = RawText(c);
      guid_node = c;
    } else if (Is(c, "description")) {
      description = RssHtmlText(c);
    } else if (Is(c, "encoded", kContentNs)) {
      encoded = RssHtmlText(c);
    } else if (Is(c, "pubDate")) {
      date = RawText(c);
    } else if (Is(c, "date", kDcNs)) {
      dc_date = RawText(c);
    }
  }
  if (item.link.empty()) {
    // RSS 1.0 items name themselves with rdf:about; RSS 2.0 permalink guids are links.
    const std::string about = Attr(item_node, "about", kRdfNs);
    if (!about.empty()) item.link = Resolve(item_node, about);
  }
  if (item.link.empty() && !guid.empty() && Attr(guid_node, "isPermaLink") != "false" &&
      (guid.rfind("http://", 0) == 0 || guid.rfind("https://", 0) == 0)) {
    item.link = guid;  // RSS 2.0: a guid is a permalink unless isPermaLink="false"
  }
  item.id = !guid.empty() ? guid : Attr(item_node, "about", kRdfNs);
  // The full text when it says more than the summary (some feeds put "..." in content:encoded).
  item.text = encoded.size() >= description.size() ? encoded : description;
  item.published_at = NormalizeDate(!date.empty() ? date : dc_date);
  FinishItem(&item);
  return item;
}

FeedItem ParseAtomEntry(const xmlNode* entry) {
  FeedItem item;
  std::string summary, content, published, updated, alternate, any_link;
  for (const xmlNode* c = entry->children; c; c = c->next) {
    if (c->type != XML_ELEMENT_NODE || !IsAtomNs(c)) continue;
    const char* name = reinterpret_cast<const char*>(c->name);
    if (!std::strcmp(name, "title")) {
      item.title = AtomText(c);
    } else if (!std::strcmp(name, "id")) {
      item.id = RawText(c);
    } else if (!std::strcmp(name, "link")) {
      const std::string rel = Attr(c, "rel");
      const std::string href = Resolve(c, TrimAsciiWhitespace(Attr(c, "href")));
      if ((rel.empty() || rel == "alternate") && alternate.empty()) alternate = href;
      if (any_link.empty()) any_link = href;
    } else if (!std::strcmp(name, "summary")) {
      summary = AtomText(c);
    } else if (!std::strcmp(name, "content")) {
      if (Attr(c, "src").empty()) content = AtomText(c);
    } else if (!std::strcmp(name, "published") || !std::strcmp(name, "issued")) {
      published = RawText(c);
    } else if (!std::strcmp(name, "updated") || !std::strcmp(name, "modified")) {
      updated = RawText(c);
    }
  }
  item.link = !alternate.empty() ? alternate : any_link;
  item.text = content.size() >= summary.size() ? content : summary;
  item.published_at = NormalizeDate(!published.empty() ? published : updated);
  FinishItem(&item);
  return item;
}

void ParseRssChannelFields(const xmlNode* channel, Feed* feed) {
  for (const xmlNode* c = channel->children; c; c = c->next) {
    if (Is(c, "title") && feed->title.empty()) feed->title = RssHtmlText(c);
    if (Is(c, "link") && feed->link.empty()) feed->link = Resolve(c, RawText(c));
  }
}

std::string ErrorText(xmlParserCtxt* ctxt) {
  const xmlError* e = xmlCtxtGetLastError(ctxt);
  if (e == nullptr || e->message == nullptr) return "not well-formed XML";
  std::string msg = TrimAsciiWhitespace(e->message);
  for (char& c : msg) {
    if (c == '\n') c = ' ';
  }
  char pos[64];
  std::snprintf(pos, sizeof(pos), " (line %d, column %d)", e->line, e->int2);
  return "not well-formed XML: " + msg + pos;
}

int DigitsAt(std::string_view s, size_t pos, size_t n) {
  if (pos + n > s.size()) return -1;
  int v = 0;
  for (size_t i = 0; i < n; ++i) {
    if (!std::isdigit(static_cast<unsigned char>(s[pos + i]))) return -1;
    v = v * 10 + (s[pos + i] - '0');
  }
  return v;
}

std::string FormatUtc(int64_t t) {
  const time_t tt = static_cast<time_t>(t);
  struct tm tm;
  if (gmtime_r(&tt, &tm) == nullptr) return "";
  char buf[32];
  if (tm.tm_year + 1900 < 1 || tm.tm_year + 1900 > 9999) return "";
  std::strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

bool ValidFields(int year, int mon, int day, int h, int m, int s) {
  return year >= 1 && year <= 9999 && mon >= 1 && mon <= 12 && day >= 1 && day <= 31 && h >= 0 &&
         h <= 24 && m >= 0 && m <= 59 && s >= 0 && s <= 60;
}

int64_t ToEpoch(int year, int mon, int day, int h, int m, int s) {
  struct tm tm = {};
  tm.tm_year = year - 1900;
  tm.tm_mon = mon - 1;
  tm.tm_mday = day;
  tm.tm_hour = h;
  tm.tm_min = m;
  tm.tm_sec = s;
  return static_cast<int64_t>(timegm(&tm));
}

std::string ParseIso(std::string_view s) {
  const int year = DigitsAt(s, 0, 4);
  if (year < 0 || s.size() < 10 || s[4] != '-' || s[7] != '-') return "";
  const int mon = DigitsAt(s, 5, 2), day = DigitsAt(s, 8, 2);
  int h = 0, m = 0, sec = 0;
  size_t i = 10;
  int64_t offset = 0;
  if (i < s.size() && (s[i] == 'T' || s[i] == 't' || s[i] == ' ')) {
    h = DigitsAt(s, i + 1, 2);
    if (h < 0 || i + 3 >= s.size() || s[i + 3] != ':') return "";
    m = DigitsAt(s, i + 4, 2);
    if (m < 0) return "";
    i += 6;
    if (i < s.size() && s[i] == ':') {
      sec = DigitsAt(s, i + 1, 2);
      if (sec < 0) return "";
      i += 3;
    }
    if (i < s.size() && (s[i] == '.' || s[i] == ',')) {
      ++i;
      while (i < s.size() && std::isdigit(static_cast<unsigned char>(s[i]))) ++i;
    }
    if (i < s.size() && (s[i] == '+' || s[i] == '-')) {
      const int oh = DigitsAt(s, i + 1, 2);
      size_t j = i + 3;
      if (j < s.size() && s[j] == ':') ++j;
      const int om = j < s.size() ? DigitsAt(s, j, 2) : 0;
      if (oh < 0 || om < 0) return "";
      offset = (s[i] == '-' ? -1 : 1) * (oh * 3600 + om * 60);
    }
  }
  if (!ValidFields(year, mon, day, h, m, sec)) return "";
  return FormatUtc(ToEpoch(year, mon, day, h, m, sec) - offset);
}

std::string ParseRfc822(std::string_view s) {
  static const char* kMonths[] = {"jan", "feb", "mar", "apr", "may", "jun",
                                  "jul", "aug", "sep", "oct", "nov", "dec"};
  // Tokenize on spaces and commas.
  std::string tokens[8];
  int n = 0;
  std::string cur;
  for (size_t i = 0; i <= s.size() && n < 8; ++i) {
    const char c = i < s.size() ? s[i] : ' ';
    if (c == ' ' || c == ',' || c == '\t') {
      if (!cur.empty()) tokens[n++] = cur;
      cur.clear();
    } else {
      cur.push_back(static_cast<char>(std::tolower(static_cast<unsigned char>(c))));
    }
  }
  int t = 0;
  if (t < n && !std::isdigit(static_cast<unsigned char>(tokens[t][0]))) ++t;  // weekday
  if (t + 2 >= n) return "";
  const int day = DigitsAt(tokens[t], 0, tokens[t].size() > 2 ? 0 : tokens[t].size());
  int mon = -1;
  for (int k = 0; k < 12; ++k) {
    if (tokens[t + 1].compare(0, 3, kMonths[k]) == 0) mon = k + 1;
  }
  int year = DigitsAt(tokens[t + 2], 0, tokens[t + 2].size() > 4 ? 0 : tokens[t + 2].size());
  if (year >= 0 && tokens[t + 2].size() == 2) year += year < 50 ? 2000 : 1900;
  int h = 0, m = 0, sec = 0;
  int64_t offset = 0;
  if (t + 3 < n) {
    const std::string& tm = tokens[t + 3];
    h = DigitsAt(tm, 0, 2);
    m = tm.size() >= 5 && tm[2] == ':' ? DigitsAt(tm, 3, 2) : -1;
    if (tm.size() >= 8 && tm[5] == ':') sec = DigitsAt(tm, 6, 2);
    if (h < 0 || m < 0 || sec < 0) return "";
    if (t + 4 < n) {
      const std::string& z = tokens[t + 4];
      if ((z[0] == '+' || z[0] == '-') && z.size() == 5) {
        const int oh = DigitsAt(z, 1, 2), om = DigitsAt(z, 3, 2);
        if (oh >= 0 && om >= 0) offset = (z[0] == '-' ? -1 : 1) * (oh * 3600 + om * 60);
      } else {
        static const struct {
          const char* name;
          int hours;
        } kZones[] = {{"est", -5}, {"edt", -4}, {"cst", -6}, {"cdt", -5}, {"mst", -7},
                      {"mdt", -6}, {"pst", -8}, {"pdt", -7}, {"cet", 1},  {"cest", 2}};
        for (const auto& zone : kZones) {
          if (z == zone.name) offset = zone.hours * 3600;
        }
      }
    }
  }
  if (day < 0 || mon < 0 || year < 0 || !ValidFields(year, mon, day, h, m, sec)) return "";
  return FormatUtc(ToEpoch(year, mon, day, h, m, sec) - offset);
}

}  // namespace

std::string NormalizeDate(std::string_view text) {
  std::string s = TrimAsciiWhitespace(std::string(text));
  if (s.empty() || s.size() > 64) return "";
  if (s.size() >= 10 && std::isdigit(static_cast<unsigned char>(s[0])) && s[4] == '-') {
    return ParseIso(s);
  }
  return ParseRfc822(s);
}

std::string HtmlToText(std::string_view html) {
  if (html.empty()) return "";
  internal::InitLibXml();
  htmlDocPtr doc = htmlReadMemory(html.data(), static_cast<int>(html.size()), nullptr, "UTF-8",
                                  HTML_PARSE_RECOVER | HTML_PARSE_NOERROR | HTML_PARSE_NOWARNING |
                                      HTML_PARSE_NONET | HTML_PARSE_NOIMPLIED);
  if (doc == nullptr) return "";
  std::unique_ptr<xmlDoc, DocFree> owner(doc);
  return NodeText(reinterpret_cast<xmlNode*>(doc));
}

StatusOr<Feed> ParseFeed(std::string_view body, std::string_view base_url,
                         std::string_view http_charset) {
  internal::InitLibXml();
  size_t skip = 0;
  const std::string encoding = internal::ChooseXmlEncoding(body, http_charset, &skip);
  body.remove_prefix(skip);
  if (body.find_first_not_of(" \t\r\n") == std::string_view::npos) {
    return Status::InvalidArgument("empty document");
  }
  if (body.size() > static_cast<size_t>(INT32_MAX)) {
    return Status::InvalidArgument("document too large");
  }
  std::unique_ptr<xmlParserCtxt, CtxtFree> ctxt(xmlNewParserCtxt());
  if (!ctxt) return Status::Internal("libxml2: out of memory");
  const std::string url(base_url);
  xmlDoc* raw = xmlCtxtReadMemory(ctxt.get(), body.data(), static_cast<int>(body.size()),
                                  url.empty() ? nullptr : url.c_str(), encoding.c_str(),
                                  XML_PARSE_NONET | XML_PARSE_NOERROR | XML_PARSE_NOWARNING |
                                      XML_PARSE_NOCDATA);
  std::unique_ptr<xmlDoc, DocFree> doc(raw);
  if (!doc || !ctxt->wellFormed) return Status::InvalidArgument(ErrorText(ctxt.get()));
  const xmlNode* root = xmlDocGetRootElement(doc.get());
  if (root == nullptr) return Status::InvalidArgument("empty document");

  Feed feed;
  const std::string root_name = reinterpret_cast<const char*>(root->name);
  if (root_name == "feed" && (IsAtomNs(root) || NsHref(root).empty())) {
    feed.format = FeedFormat::kAtom;
    for (const xmlNode* c = root->children; c; c = c->next) {
      if (c->type != XML_ELEMENT_NODE) continue;
      const std::string_view name = reinterpret_cast<const char*>(c->name);
      if (name == "entry") {
        feed.items.push_back(ParseAtomEntry(c));
      } else if (name == "title" && feed.title.empty()) {
        feed.title = AtomText(c);
      } else if (name == "link" && feed.link.empty() &&
                 (Attr(c, "rel").empty() || Attr(c, "rel") == "alternate")) {
        feed.link = Resolve(c, Attr(c, "href"));
      }
    }
  } else if (root_name == "entry" && IsAtomNs(root)) {
    feed.format = FeedFormat::kAtom;  // a lone Atom Entry Document (RFC 4287 section 4.1.2)
    feed.items.push_back(ParseAtomEntry(root));
  } else if (root_name == "rss" || root_name == "RDF" || root_name == "rdf") {
    feed.format = root_name == "rss" ? FeedFormat::kRss : FeedFormat::kRdf;
    // RSS 0.9x/2.0: rss/channel/item; RSS 0.90/1.0: items are siblings of the channel.
    for (const xmlNode* c = root->children; c; c = c->next) {
      if (Is(c, "channel")) {
        ParseRssChannelFields(c, &feed);
        for (const xmlNode* i = c->children; i; i = i->next) {
          if (Is(i, "item")) feed.items.push_back(ParseRssItem(i));
        }
      } else if (Is(c, "item")) {
        feed.items.push_back(ParseRssItem(c));
      }
    }
  } else {
    return Status::InvalidArgument("not a feed: root element <" + root_name + ">");
  }
  return feed;
}

}  // namespace streamvec::crawler
