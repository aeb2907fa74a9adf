#include "streamvec/ingest/crawler/robots.h"

#include <algorithm>
#include <cctype>
#include <cstdlib>

#include "ascii.h"

namespace streamvec::crawler {
namespace {

using internal::AsciiLower;

std::string_view TrimView(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return s;
}

// Decodes %XX escapes of unreserved characters (RFC 3986 2.3) so "/%7Efoo" matches "/~foo";
// other escapes stay encoded, with upper-case hex.
std::string NormalizePath(std::string_view p) {
  std::string out;
  for (size_t i = 0; i < p.size(); ++i) {
    if (p[i] == '%' && i + 2 < p.size() && std::isxdigit(static_cast<unsigned char>(p[i + 1])) &&
        std::isxdigit(static_cast<unsigned char>(p[i + 2]))) {
      const int v = std::strtol(std::string(p.substr(i + 1, 2)).c_str(), nullptr, 16);
      if (std::isalnum(v) || v == '-' || v == '.' || v == '_' || v == '~') {
        out.push_back(static_cast<char>(v));
      } else {
        out.push_back('%');
        out.push_back(static_cast<char>(std::toupper(static_cast<unsigned char>(p[i + 1]))));
        out.push_back(static_cast<char>(std::toupper(static_cast<unsigned char>(p[i + 2]))));
      }
      i += 2;
    } else {
      out.push_back(p[i]);
    }
  }
  return out;
}

// Does `pattern` ('*' = any run, trailing '$' = end) match a prefix of `path`? Iterative
// backtracking over the last '*' (linear-ish, no recursion).
bool Matches(std::string_view pattern, std::string_view path) {
  bool anchored = !pattern.empty() && pattern.back() == '$';
  if (anchored) pattern.remove_suffix(1);
  size_t p = 0, s = 0, star = std::string_view::npos, mark = 0;
  while (true) {
    if (p == pattern.size()) {
      if (!anchored || s == path.size()) return true;
    } else if (pattern[p] == '*') {
      star = p++;
      mark = s;
      continue;
    } else if (s < path.size() && pattern[p] == path[s]) {
      ++p;
      ++s;
      continue;
    }
    if (star == std::string_view::npos || mark >= path.size()) return false;
    p = star + 1;
    s = ++mark;
  }
}

}  // namespace

RobotsRules RobotsRules::DisallowAll() {
  RobotsRules r;
  r.disallow_all_ = true;
  return r;
}

RobotsRules RobotsRules::Parse(std::string_view text, std::string_view product_token) {
  text = text.substr(0, std::min<size_t>(text.size(), 500 << 10));
  const std::string token = AsciiLower(product_token);
  struct Group {
    std::vector<std::string> agents;
    std::vector<Rule> rules;
    double delay = 0;
  };
  std::vector<Group> groups;
  bool in_agents = false;  // consecutive user-agent lines share one group
  size_t pos = 0;
  while (pos <= text.size()) {
    size_t end = text.find_first_of("\r\n", pos);
    if (end == std::string_view::npos) end = text.size();
    std::string_view line = text.substr(pos, end - pos);
    pos = end + 1;
    if (const size_t hash = line.find('#'); hash != std::string_view::npos) {
      line = line.substr(0, hash);
    }
    const size_t colon = line.find(':');
    if (colon == std::string_view::npos) {
      if (end == text.size()) break;
      continue;
    }
    const std::string key = AsciiLower(TrimView(line.substr(0, colon)));
    const std::string_view value = TrimView(line.substr(colon + 1));
    if (key == "user-agent") {
      if (!in_agents || groups.empty()) groups.emplace_back();
      groups.back().agents.push_back(AsciiLower(value));
      in_agents = true;
    } else if (key == "allow" || key == "disallow") {
      in_agents = false;
      if (groups.empty()) continue;
      if (value.empty()) continue;  // "Disallow:" = allow everything
      groups.back().rules.push_back({key == "allow", NormalizePath(value)});
    } else if (key == "crawl-delay") {
      in_agents = false;
      if (!groups.empty()) groups.back().delay = std::atof(std::string(value).c_str());
    } else {
      in_agents = false;  // sitemap etc. end the user-agent run
    }
    if (end == text.size()) break;
  }
  // Most specific agent match: the longest matching group token; "*" only as a fallback.
  RobotsRules out;
  const Group* best = nullptr;
  size_t best_len = 0;
  const Group* star = nullptr;
  for (const Group& g : groups) {
    for (const std::string& a : g.agents) {
      if (a == "*") {
        if (!star) star = &g;
      } else if (!a.empty() && (token.rfind(a, 0) == 0 || a.rfind(token, 0) == 0) &&
                 a.size() > best_len) {
        best = &g;
        best_len = a.size();
      }
    }
  }
  if (!best) best = star;
  if (best) {
    out.rules_ = best->rules;
    out.crawl_delay_seconds_ = std::max(0.0, best->delay);
  }
  return out;
}

bool RobotsRules::Allowed(std::string_view path_and_query) const {
  if (disallow_all_) return false;
  const std::string path = NormalizePath(path_and_query.empty() ? "/" : path_and_query);
  if (path == "/robots.txt") return true;
  const Rule* best = nullptr;
  for (const Rule& r : rules_) {
    if (!Matches(r.pattern, path)) continue;
    if (!best || r.pattern.size() > best->pattern.size() ||
        (r.pattern.size() == best->pattern.size() && r.allow)) {
      best = &r;
    }
  }
  return best == nullptr || best->allow;
}

}  // namespace streamvec::crawler
