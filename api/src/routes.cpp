// Route table, dispatch, parameter checks and JSON bodies of the REST API (contract in
// api/README.md). The same table drives dispatch, the 404 route list and /openapi.json.
#include "routes.h"

#include <xxhash.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <limits>
#include <optional>
#include <sstream>
#include <string_view>
#include <tuple>
#include <utility>
#include <vector>

namespace streamvec::api {
namespace {

using nlohmann::json;

enum class Route {
  kVector,
  kVectors,
  kNeighbors,
  kNeighborsByVector,
  kMostSimilar,
  kAnalogy,
  kSimilarity,
  kDoesntMatch,
  kNSimilarity,
  kMostSimilarCosmul,
  kRank,
  kWords,
  kWord,
  kHistory,
  kSnapshots,
  kHealth,
  kMetrics,
  kOpenApi,
  kAdminSnapshot,
  kAdminPause,
  kAdminResume,
  kDashboard,
  kStatic,
};

struct Param {
  const char* name;
  const char* in;  // "path" | "query"
  bool required;
  const char* type;  // "string" | "integer"
  const char* description;
  long minimum = 0;  // integers: the accepted range in the OpenAPI schema (0, 0: none)
  long maximum = 0;
};

struct RouteSpec {
  Route id;
  const char* method;
  const char* path;  // template; {name} matches one path segment
  const char* summary;
  std::vector<Param> params;
  const char* body = nullptr;  // JSON body description (POST)
  const char* produces = "application/json";
};

// The routes that answer from a snapshot: each takes ?snapshot=N and answers with an ETag.
bool AnswersFromASnapshot(Route id) {
  switch (id) {
    case Route::kVector:
    case Route::kVectors:
    case Route::kNeighbors:
    case Route::kNeighborsByVector:
    case Route::kMostSimilar:
    case Route::kAnalogy:
    case Route::kSimilarity:
    case Route::kDoesntMatch:
    case Route::kNSimilarity:
    case Route::kMostSimilarCosmul:
    case Route::kRank:
    case Route::kWords:
    case Route::kWord:
    case Route::kHistory:
      return true;
    default:
      return false;
  }
}

// `routes` with the snapshot parameter added to those that answer from a snapshot.
std::vector<RouteSpec> WithSnapshot(std::vector<RouteSpec> routes) {
  for (RouteSpec& r : routes) {
    if (!AnswersFromASnapshot(r.id)) continue;
    r.params.push_back({"snapshot", "query", false, "integer",
                        "answer from this retained snapshot (GET /v1/snapshots lists the "
                        "published ones); default: the served one",
                        1, std::numeric_limits<int64_t>::max()});
  }
  return routes;
}

const std::vector<RouteSpec>& Table() {
  static const std::vector<RouteSpec> table = WithSnapshot({
      {Route::kVector,
       "GET",
       "/v1/vectors/{word}",
       "The vector of a word, as trained",
       {{"word", "path", true, "string", "exact, case-sensitive, percent-encoded"}}},
      {Route::kVectors,
       "POST",
       "/v1/vectors",
       "Vectors of up to 1000 words",
       {},
       "{\"words\": [\"w\", ...]}"},
      {Route::kNeighbors,
       "GET",
       "/v1/neighbors",
       "The k nearest words by cosine",
       {{"word", "query", true, "string", "query word (excluded)"},
        {"k", "query", false, "integer", "1..1000, default 10", 1, kMaxNeighbors}}},
      {Route::kNeighborsByVector,
       "POST",
       "/v1/neighbors",
       "The k nearest words to a raw vector",
       {},
       "{\"vector\": [dim numbers], \"k\": 10, \"restrict_vocab\": N}"},
      {Route::kMostSimilar,
       "GET",
       "/v1/most_similar",
       "gensim most_similar: cosine to the mean of unit(+positive) and unit(-negative)",
       {{"positive", "query", false, "string", "comma-separated words"},
        {"negative", "query", false, "string", "comma-separated words"},
        {"topn", "query", false, "integer", "1..1000, default 10", 1, kMaxNeighbors},
        {"restrict_vocab", "query", false, "integer", "only the N most frequent words", 1,
         std::numeric_limits<int32_t>::max()}}},
      {Route::kAnalogy,
       "GET",
       "/v1/analogy",
       "3CosAdd analogy a:b :: c:? (b - a + c)",
       {{"a", "query", true, "string", ""},
        {"b", "query", true, "string", ""},
        {"c", "query", true, "string", ""},
        {"topn", "query", false, "integer", "1..1000, default 10", 1, kMaxNeighbors}}},
      {Route::kSimilarity,
       "GET",
       "/v1/similarity",
       "Cosine similarity of two words",
       {{"w1", "query", true, "string", ""}, {"w2", "query", true, "string", ""}}},
      {Route::kDoesntMatch,
       "GET",
       "/v1/doesnt_match",
       "gensim doesnt_match: the word furthest from the mean of the words' unit vectors "
       "(unknown words are ignored and listed)",
       {{"words", "query", true, "string", "comma-separated words"}}},
      {Route::kNSimilarity,
       "GET",
       "/v1/n_similarity",
       "gensim n_similarity: cosine between the means of two word sets' vectors (unknown "
       "words are ignored and listed)",
       {{"ws1", "query", true, "string", "comma-separated words"},
        {"ws2", "query", true, "string", "comma-separated words"}}},
      {Route::kMostSimilarCosmul,
       "GET",
       "/v1/most_similar_cosmul",
       "gensim most_similar_cosmul: 3CosMul (Levy and Goldberg 2014, eq. 4): the product of the "
       "positive words' shifted cosines over the negative ones' (exact scan)",
       {{"positive", "query", false, "string", "comma-separated words"},
        {"negative", "query", false, "string", "comma-separated words"},
        {"topn", "query", false, "integer", "1..1000, default 10", 1, kMaxNeighbors}}},
      {Route::kRank,
       "GET",
       "/v1/rank",
       "gensim rank: 1 + the number of words closer to w1 than w2 is (exact scan)",
       {{"w1", "query", true, "string", ""}, {"w2", "query", true, "string", ""}}},
      {Route::kWords,
       "GET",
       "/v1/words",
       "The vocabulary in count order (count descending, ties in the snapshot's order), "
       "optionally only the words starting with a prefix: for browsing and autocomplete",
       {{"prefix", "query", false, "string", "exact, case-sensitive byte prefix; empty: all"},
        {"limit", "query", false, "integer", "words in the page, 1..1000, default 100", 1,
         kMaxWordsPage},
        {"offset", "query", false, "integer", "matching words skipped, default 0", 0,
         kMaxWordsOffset}}},
      {Route::kWord,
       "GET",
       "/v1/words/{word}",
       "A word's count, rank in count order and the first snapshot this server saw it in",
       {{"word", "path", true, "string", "exact, case-sensitive, percent-encoded"}}},
      {Route::kHistory,
       "GET",
       "/v1/words/{word}/history",
       "A word's cosine to itself across retained snapshots (Procrustes-aligned) and its "
       "neighbours then and now",
       {{"word", "path", true, "string", ""},
        {"k", "query", false, "integer", "neighbours per snapshot, 1..1000, default 10", 1,
         kMaxNeighbors}}},
      {Route::kSnapshots,
       "GET",
       "/v1/snapshots",
       "Published snapshots with metadata, quality figures and which one is served",
       {}},
      {Route::kHealth, "GET", "/healthz", "200 once a snapshot is served, else 503", {}},
      {Route::kMetrics,
       "GET",
       "/metrics",
       "Prometheus metrics (text format 0.0.4)",
       {},
       nullptr,
       "text/plain"},
      {Route::kOpenApi, "GET", "/openapi.json", "This document", {}},
      {Route::kAdminSnapshot,
       "POST",
       "/v1/admin/snapshot",
       "Ask the trainer for a snapshot now (Authorization: Bearer token)",
       {}},
      {Route::kAdminPause, "POST", "/v1/admin/ingest/pause", "Pause ingestion (bearer token)", {}},
      {Route::kAdminResume,
       "POST",
       "/v1/admin/ingest/resume",
       "Resume ingestion (bearer token)",
       {}},
      {Route::kDashboard, "GET", "/", "The dashboard page", {}, nullptr, "text/html"},
      {Route::kStatic,
       "GET",
       "/static/{file}",
       "Dashboard assets (script, chart library)",
       {{"file", "path", true, "string", ""}},
       nullptr,
       "application/javascript"},
  });
  return table;
}

constexpr long kDefaultNeighbors = 10;

// JSON text of any string; bytes that are not UTF-8 (a client's malformed word) become U+FFFD
// instead of making the reply invalid JSON.
std::string Dump(const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }

// A JSON string: printable ASCII other than '"' and '\\' as it is (most words); anything else
// through nlohmann's serializer (escapes, invalid UTF-8 replaced), as Dump writes it.
void AppendString(std::string* out, std::string_view s) {
  const bool plain = std::all_of(s.begin(), s.end(), [](char c) {
    const auto u = static_cast<unsigned char>(c);
    return u >= 0x20 && u < 0x7f && c != '"' && c != '\\';
  });
  if (!plain) {
    *out += Dump(json(std::string(s)));
    return;
  }
  *out += '"';
  out->append(s);
  *out += '"';
}

void AppendStrings(std::string* out, const std::vector<std::string>& list) {
  *out += '[';
  for (size_t i = 0; i < list.size(); ++i) {
    if (i > 0) *out += ',';
    AppendString(out, list[i]);
  }
  *out += ']';
}

// Shortest decimal that reads back to the same float32; null for NaN and infinities.
void AppendFloat(std::string* out, float v) {
  if (!std::isfinite(v)) {
    *out += "null";
    return;
  }
  char buf[32];
  const auto r = std::to_chars(buf, buf + sizeof buf, v);
  out->append(buf, r.ptr);
}

void AppendVector(std::string* out, const float* v, int dim) {
  *out += '[';
  for (int j = 0; j < dim; ++j) {
    if (j > 0) *out += ',';
    AppendFloat(out, v[j]);
  }
  *out += ']';
}

const char* KindOf(int status) {
  switch (status) {
    case 400:
      return "bad_request";
    case 401:
      return "unauthorized";
    case 403:
      return "forbidden";
    case 404:
      return "not_found";
    case 405:
      return "method_not_allowed";
    case 501:
      return "not_implemented";
    case 503:
      return "no_snapshot";
    default:
      return "internal";
  }
}

HttpReply Error(int status, const std::string& message) {
  HttpReply r;
  r.status = status;
  r.body = Dump(json{{"error", message}});
  r.error_kind = KindOf(status);
  return r;
}

HttpReply NoSnapshot() {
  return Error(503, "no snapshot loaded yet: the server is waiting for a trainer to publish one");
}

// A word for a message: at most 200 bytes of it (a cut sequence is replaced when dumped).
std::string Shown(const std::string& word) {
  return word.size() <= 200 ? word : word.substr(0, 200) + "...";
}

HttpReply UnknownWord(const ServingSnapshot& s, const std::string& word) {
  HttpReply r = Error(404, "word '" + Shown(word) + "' is not in the vocabulary of snapshot " +
                               std::to_string(s.version()) + " (" + std::to_string(s.rows()) +
                               " words, exact match)");
  r.error_kind = "unknown_word";
  return r;
}

int HexDigit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// Percent-decoding (RFC 3986). '+' stays '+': words never hold spaces, and "c++" is a word.
std::optional<std::string> PercentDecode(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] != '%') {
      out += s[i];
      continue;
    }
    if (i + 2 >= s.size()) return std::nullopt;  // '%' needs two hex digits
    const int hi = HexDigit(s[i + 1]), lo = HexDigit(s[i + 2]);
    if (hi < 0 || lo < 0) return std::nullopt;
    out += static_cast<char>(hi * 16 + lo);
    i += 2;
  }
  return out;
}

// Decoded query parameters; the first occurrence of a name wins.
struct Query {
  std::vector<std::pair<std::string, std::string>> params;
  const std::string* Get(std::string_view name) const {
    for (const auto& [k, v] : params) {
      if (k == name) return &v;
    }
    return nullptr;
  }
};

std::optional<Query> ParseQuery(std::string_view raw) {
  Query q;
  while (!raw.empty()) {
    const size_t amp = raw.find('&');
    const std::string_view part = raw.substr(0, amp);
    raw = amp == std::string_view::npos ? std::string_view() : raw.substr(amp + 1);
    if (part.empty()) continue;
    const size_t eq = part.find('=');
    std::optional<std::string> key = PercentDecode(part.substr(0, eq));
    std::optional<std::string> value =
        PercentDecode(eq == std::string_view::npos ? std::string_view() : part.substr(eq + 1));
    if (!key || !value) return std::nullopt;
    q.params.emplace_back(std::move(*key), std::move(*value));
  }
  return q;
}

// A required, non-empty word parameter; sets *error otherwise.
std::optional<std::string> RequireWord(const Query& q, const char* name, HttpReply* error) {
  const std::string* v = q.Get(name);
  if (v == nullptr || v->empty()) {
    *error = Error(400, std::string("missing query parameter '") + name + "' (a word)");
    return std::nullopt;
  }
  return *v;
}

// An optional integer parameter in [lo, hi]; `fallback` when absent. Sets *error when invalid.
std::optional<long> IntParam(const Query& q, const char* name, long lo, long hi, long fallback,
                             HttpReply* error) {
  const std::string* raw = q.Get(name);
  if (raw == nullptr) return fallback;
  long v = 0;
  const char* end = raw->data() + raw->size();
  const auto r = std::from_chars(raw->data(), end, v);
  if (raw->empty() || r.ec != std::errc() || r.ptr != end || v < lo || v > hi) {
    *error =
        Error(400, std::string("query parameter '") + name + "' must be an integer in [" +
                       std::to_string(lo) + ", " + std::to_string(hi) + "], got '" + *raw + "'");
    return std::nullopt;
  }
  return v;
}

// Comma-separated words; empty items are an error.
std::optional<std::vector<std::string>> WordList(const Query& q, const char* name,
                                                 HttpReply* error) {
  std::vector<std::string> words;
  const std::string* raw = q.Get(name);
  if (raw == nullptr || raw->empty()) return words;
  std::string_view rest = *raw;
  while (true) {
    const size_t comma = rest.find(',');
    const std::string_view w = rest.substr(0, comma);
    if (w.empty()) {
      *error = Error(400, std::string("query parameter '") + name +
                              "' holds an empty word (comma-separated words expected)");
      return std::nullopt;
    }
    words.emplace_back(w);
    if (comma == std::string_view::npos) break;
    rest = rest.substr(comma + 1);
  }
  if (words.size() > kMaxBatchWords) {
    *error = Error(400, std::string("too many words in '") + name + "'");
    return std::nullopt;
  }
  return words;
}

std::string VectorReply(const ServingSnapshot& s, const std::string& word, const float* vector,
                        const char* source) {
  std::string out = "{\"word\":";
  AppendString(&out, word);
  out += ",\"vector\":";
  AppendVector(&out, vector, s.dim());
  out += ",\"source\":\"" + std::string(source) + "\"";
  out += ",\"snapshot\":" + std::to_string(s.version()) + "}";
  return out;
}

void AppendNeighbors(std::string* out, const ServingSnapshot& s,
                     const std::vector<ServingSnapshot::Neighbor>& ns) {
  *out += '[';
  bool first = true;
  for (const ServingSnapshot::Neighbor& n : ns) {
    if (!first) *out += ',';
    first = false;
    *out += "{\"word\":";
    AppendString(out, s.word(n.row));
    *out += ",\"similarity\":";
    AppendFloat(out, n.similarity);
    *out += '}';
  }
  *out += ']';
}

json NeighborsJson(const ServingSnapshot& s, const std::vector<ServingSnapshot::Neighbor>& ns) {
  std::string text;
  AppendNeighbors(&text, s, ns);
  return json::parse(text);
}

HttpReply Json(std::string body) {
  HttpReply r;
  r.body = std::move(body);
  return r;
}

// Matches a raw path against a template ({x} = one segment, possibly empty).
bool Matches(std::string_view templ, std::string_view path) {
  while (true) {
    if (templ.empty() || path.empty()) return templ.empty() && path.empty();
    if (templ[0] != '/' || path[0] != '/') return false;
    templ.remove_prefix(1);
    path.remove_prefix(1);
    const size_t ts = templ.find('/'), ps = path.find('/');
    const std::string_view tseg = templ.substr(0, ts), pseg = path.substr(0, ps);
    if (!(tseg.starts_with('{') && tseg.ends_with('}')) && tseg != pseg) return false;
    templ = ts == std::string_view::npos ? std::string_view() : templ.substr(ts);
    path = ps == std::string_view::npos ? std::string_view() : path.substr(ps);
    if (templ.empty() != path.empty()) return false;
  }
}

// Segment `index` (0-based, after the leading '/') of a raw path, percent-decoded.
std::optional<std::string> PathSegment(std::string_view path, size_t index) {
  size_t start = 1;
  for (size_t i = 0; i < index; ++i) {
    start = path.find('/', start);
    if (start == std::string_view::npos) return std::string();
    ++start;
  }
  const size_t end = path.find('/', start);
  return PercentDecode(path.substr(start, end == std::string_view::npos ? end : end - start));
}

// A word's vector for a route that takes words: the table's row, or for a word outside the
// vocabulary the snapshot's character model's vector (docs/char-model.md).
struct Resolved {
  std::vector<float> vector;   // dim floats, as trained
  std::optional<size_t> row;   // the table row; nullopt: from the character model
  const char* source() const { return row ? "table" : "char-lstm"; }
  // The unit-length vector (all zeros for a zero vector).
  std::vector<float> Unit() const {
    double norm = 0;
    for (float v : vector) norm += static_cast<double>(v) * v;
    norm = std::sqrt(norm);
    std::vector<float> unit(vector.size(), 0.0f);
    if (norm > 0 && std::isfinite(norm)) {
      for (size_t j = 0; j < unit.size(); ++j) unit[j] = static_cast<float>(vector[j] / norm);
    }
    return unit;
  }
};

// Sets *error: 404 for a word outside the vocabulary of a snapshot without a character model
// (as before there was one), 400 for a word the character model refuses (empty, invalid UTF-8,
// a control character, over kMaxCharModelWordBytes).
std::optional<Resolved> ResolveWord(const ServingSnapshot& s, const std::string& word,
                                    HttpReply* error) {
  Resolved r;
  const Status st = s.WordVector(word, &r.vector, &r.row);
  if (st.ok()) return r;
  if (st.code() == StatusCode::kNotFound) {
    *error = UnknownWord(s, word);
  } else {
    *error = Error(400, "word '" + Shown(word) + "' is not in the vocabulary and the character "
                        "model cannot read it: " + st.message());
    error->error_kind = "bad_word";
  }
  return std::nullopt;
}

double Cosine(const std::vector<float>& a, const std::vector<float>& b) {
  double ab = 0, aa = 0, bb = 0;
  for (size_t j = 0; j < a.size(); ++j) {
    ab += static_cast<double>(a[j]) * b[j];
    aa += static_cast<double>(a[j]) * a[j];
    bb += static_cast<double>(b[j]) * b[j];
  }
  return aa > 0 && bb > 0 ? ab / std::sqrt(aa * bb) : 0.0;
}

// Words -> unit-vector mean (gensim KeyedVectors.most_similar): unit(sum of +/- unit rows).
// Words outside the vocabulary take the character model's vectors (`sources` says which).
struct Combined {
  std::vector<float> query;
  std::vector<size_t> exclude;
  json sources = json::object();  // word -> "table" | "char-lstm"
};

std::optional<Combined> Combine(const ServingSnapshot& s, const std::vector<std::string>& positive,
                                const std::vector<std::string>& negative, HttpReply* error) {
  Combined c;
  const size_t dim = static_cast<size_t>(s.dim());
  std::vector<double> sum(dim, 0.0);
  std::vector<float> unit(dim);
  for (int sign : {1, -1}) {
    for (const std::string& w : sign > 0 ? positive : negative) {
      const std::optional<Resolved> r = ResolveWord(s, w, error);
      if (!r) return std::nullopt;
      if (r->row) {
        s.UnitVector(*r->row, unit.data());
        c.exclude.push_back(*r->row);
      } else {
        unit = r->Unit();
      }
      c.sources[w] = r->source();
      for (size_t j = 0; j < dim; ++j) sum[j] += sign * static_cast<double>(unit[j]);
    }
  }
  double norm = 0;
  for (double v : sum) norm += v * v;
  norm = std::sqrt(norm);
  c.query.resize(dim);
  for (size_t j = 0; j < dim; ++j) c.query[j] = norm > 0 ? static_cast<float>(sum[j] / norm) : 0.0f;
  return c;
}

bool ConstantTimeEquals(std::string_view a, std::string_view b) {
  unsigned char diff = a.size() == b.size() ? 0 : 1;
  for (size_t i = 0; i < a.size(); ++i) diff |= a[i] ^ b[i % (b.empty() ? 1 : b.size())];
  return diff == 0 && !b.empty();
}

std::optional<std::string> ReadFile(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return std::nullopt;
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

HttpReply Admin(const RouteContext& ctx, const HttpCall& call, const AdminHook& hook,
                const char* action) {
  const std::string& token = ctx.options->admin_token;
  if (token.empty()) {
    return Error(403, "admin routes are disabled: no admin token is configured");
  }
  constexpr std::string_view kBearer = "Bearer ";
  const std::string_view auth = call.authorization;
  if (!auth.starts_with(kBearer) || !ConstantTimeEquals(auth.substr(kBearer.size()), token)) {
    return Error(401,
                 "admin routes need 'Authorization: Bearer <token>' with the configured token");
  }
  if (!hook) return Error(501, std::string(action) + " is not available in this process");
  const Status s = hook();
  if (!s.ok()) return Error(500, std::string(action) + " failed: " + s.ToString());
  return Json(Dump(json{{"status", "ok"}, {"action", action}}));
}

// The snapshot a query answers from: ?snapshot=N when given (a retained one, retained.h), else
// the served one. Null with *error set: 400 for a bad N, 503 before a first snapshot, 404
// (naming N and listing the retained ones) when N is not retained, 500 when it cannot be read.
std::shared_ptr<const Served> ServedFor(const RouteContext& ctx, const Query& q, HttpReply* error) {
  const std::optional<long> pinned =
      IntParam(q, "snapshot", 1, std::numeric_limits<int64_t>::max(), 0, error);
  if (!pinned) return nullptr;
  std::shared_ptr<const Served> current = ctx.current();
  if (!current) {
    *error = NoSnapshot();
    return nullptr;
  }
  const uint64_t version = static_cast<uint64_t>(*pinned);
  if (version == 0 || version == current->snapshot->version()) return current;
  if (ctx.retained == nullptr) {
    *error = Error(404, "snapshot " + std::to_string(version) + " is not retained; serving " +
                            std::to_string(current->snapshot->version()));
    error->error_kind = "unknown_snapshot";
    return nullptr;
  }
  StatusOr<std::shared_ptr<const Served>> found = ctx.retained->Find(version, current);
  if (found.ok()) return std::move(*found);
  if (found.status().code() != StatusCode::kNotFound) {
    *error = Error(500, found.status().ToString());
    return nullptr;
  }
  *error = Error(404, found.status().message());
  error->body = Dump(json{{"error", found.status().message()},
                          {"snapshot", version},
                          {"retained", ctx.retained->Versions(*current)}});
  error->error_kind = "unknown_snapshot";
  return nullptr;
}

// GET /v1/words: a page of the words starting with `prefix`, in count order.
HttpReply WordsPage(const ServingSnapshot& s, const std::string& prefix, size_t limit,
                    size_t offset) {
  std::string page = "[";
  size_t matches = 0;
  for (const uint32_t row : s.rows_by_count()) {
    const std::string& w = s.word(row);
    if (!w.starts_with(prefix)) continue;
    if (matches >= offset && matches - offset < limit) {
      if (page.size() > 1) page += ',';
      page += "{\"word\":";
      AppendString(&page, w);
      page += ",\"count\":";
      if (s.has_counts()) {
        page += Dump(json(s.count(row)));
      } else {
        page += "null";
      }
      page += ",\"rank\":" + std::to_string(s.rank(row)) + "}";
    }
    ++matches;
  }
  page += ']';
  std::string out = "{\"prefix\":";
  AppendString(&out, prefix);
  out += ",\"offset\":" + std::to_string(offset) + ",\"limit\":" + std::to_string(limit) +
         ",\"total\":" + std::to_string(matches) + ",\"words\":" + page +
         ",\"snapshot\":" + std::to_string(s.version()) + "}";
  return Json(std::move(out));
}

HttpReply Answer(const RouteContext& ctx, const RouteSpec& spec, const HttpCall& call,
                 uint64_t* answered_from) {
  const std::string& path = call.path;
  const std::optional<Query> query = ParseQuery(call.query);
  if (!query) return Error(400, "malformed percent-encoding in the query string");
  if (call.body_too_large) {
    return Error(400, "request body is over " + std::to_string(kMaxBodyBytes) + " bytes");
  }

  HttpReply error;
  // Called once a route's own parameters are checked (they are answered 400 first).
  const auto served_for = [&](HttpReply* e) {
    std::shared_ptr<const Served> served = ServedFor(ctx, *query, e);
    if (served) *answered_from = served->snapshot->version();
    return served;
  };
  switch (spec.id) {
    case Route::kHealth: {
      const std::shared_ptr<const Served> s = ctx.current();
      if (!s) {
        HttpReply r = Json(Dump(json{{"status", "no snapshot yet"}}));
        r.status = 503;
        r.error_kind = "no_snapshot";
        return r;
      }
      return Json(Dump(json{{"status", "ok"}, {"snapshot", s->snapshot->version()}}));
    }

    case Route::kVector: {
      const std::optional<std::string> word = PathSegment(path, 2);
      if (!word) return Error(400, "malformed percent-encoding in the word of " + path);
      if (word->empty()) return Error(400, "missing word: use GET /v1/vectors/{word}");
      const std::shared_ptr<const Served> s = served_for(&error);
      if (!s) return error;
      const std::optional<Resolved> r = ResolveWord(*s->snapshot, *word, &error);
      if (!r) return error;
      return Json(VectorReply(*s->snapshot, *word, r->vector.data(), r->source()));
    }

    case Route::kVectors: {
      json body;
      try {
        body = json::parse(call.body);
      } catch (const json::exception& e) {
        return Error(400, std::string("malformed JSON body: ") + e.what());
      }
      if (!body.is_object() || !body.contains("words") || !body["words"].is_array()) {
        return Error(400, "body must be a JSON object {\"words\": [\"word\", ...]}");
      }
      const json& words = body["words"];
      if (words.size() > kMaxBatchWords) {
        return Error(400, std::to_string(words.size()) + " words in one request; at most " +
                              std::to_string(kMaxBatchWords));
      }
      for (size_t i = 0; i < words.size(); ++i) {
        if (!words[i].is_string()) {
          return Error(400, "words[" + std::to_string(i) + "] is not a string");
        }
      }
      const std::shared_ptr<const Served> served = served_for(&error);
      if (!served) return error;
      const ServingSnapshot& s = *served->snapshot;
      std::string out = "{\"vectors\":[";
      std::string missing = "[";
      bool first_vector = true, first_missing = true;
      std::vector<float> vector;
      std::optional<size_t> row;
      for (const json& w : words) {
        const std::string& word = w.get_ref<const std::string&>();
        // A word outside the vocabulary: the character model's vector when the snapshot has
        // one and it reads the word, else listed in "missing".
        if (s.WordVector(word, &vector, &row).ok()) {
          if (!first_vector) out += ',';
          first_vector = false;
          out += "{\"word\":";
          AppendString(&out, word);
          out += ",\"vector\":";
          AppendVector(&out, vector.data(), s.dim());
          out += row ? ",\"source\":\"table\"}" : ",\"source\":\"char-lstm\"}";
        } else {
          if (!first_missing) missing += ',';
          first_missing = false;
          AppendString(&missing, word);
        }
      }
      out += "],\"missing\":" + missing + "],\"snapshot\":" + std::to_string(s.version()) + "}";
      return Json(std::move(out));
    }

    case Route::kNeighbors: {
      const std::optional<std::string> word = RequireWord(*query, "word", &error);
      if (!word) return error;
      const std::optional<long> k =
          IntParam(*query, "k", 1, kMaxNeighbors, kDefaultNeighbors, &error);
      if (!k) return error;
      const std::shared_ptr<const Served> served = served_for(&error);
      if (!served) return error;
      const ServingSnapshot& s = *served->snapshot;
      const std::optional<Resolved> r = ResolveWord(s, *word, &error);
      if (!r) return error;
      std::vector<float> unit(static_cast<size_t>(s.dim()));
      if (r->row) {
        s.UnitVector(*r->row, unit.data());
      } else {
        unit = r->Unit();
      }
      const size_t self[] = {r->row.value_or(0)};
      std::string out = "{\"word\":";
      AppendString(&out, *word);
      out += ",\"neighbors\":";
      AppendNeighbors(
          &out, s,
          served->Nearest(unit.data(), static_cast<size_t>(*k),
                          r->row ? std::span<const size_t>(self) : std::span<const size_t>(),
                          s.rows(), r->row));
      out += ",\"source\":\"" + std::string(r->source()) + "\"";
      out += ",\"snapshot\":" + std::to_string(s.version()) + "}";
      return Json(std::move(out));
    }

    case Route::kNeighborsByVector: {
      json body;
      try {
        body = json::parse(call.body);
      } catch (const json::exception& e) {
        return Error(400, std::string("malformed JSON body: ") + e.what());
      }
      if (!body.is_object() || !body.contains("vector") || !body["vector"].is_array()) {
        return Error(400, "body must be a JSON object {\"vector\": [numbers], \"k\": N}");
      }
      long k = kDefaultNeighbors;
      if (body.contains("k")) {
        if (!body["k"].is_number_integer() || body["k"].get<long>() < 1 ||
            body["k"].get<long>() > kMaxNeighbors) {
          return Error(400, "'k' must be an integer in [1, " + std::to_string(kMaxNeighbors) + "]");
        }
        k = body["k"].get<long>();
      }
      size_t limit = static_cast<size_t>(-1);
      if (body.contains("restrict_vocab")) {
        if (!body["restrict_vocab"].is_number_integer() || body["restrict_vocab"].get<long>() < 1) {
          return Error(400, "'restrict_vocab' must be a positive integer");
        }
        limit = body["restrict_vocab"].get<size_t>();
      }
      const json& v = body["vector"];
      std::vector<double> query_vector;
      query_vector.reserve(v.size());
      for (size_t i = 0; i < v.size(); ++i) {
        if (!v[i].is_number() || !std::isfinite(v[i].get<double>())) {
          return Error(400, "vector[" + std::to_string(i) + "] is not a finite number");
        }
        query_vector.push_back(v[i].get<double>());
      }
      const std::shared_ptr<const Served> served = served_for(&error);
      if (!served) return error;
      const ServingSnapshot& s = *served->snapshot;
      if (query_vector.size() != static_cast<size_t>(s.dim())) {
        return Error(400, "vector has " + std::to_string(query_vector.size()) +
                              " numbers; snapshot " + std::to_string(s.version()) + " has dim " +
                              std::to_string(s.dim()));
      }
      // The length, scaled by the largest magnitude first: components near 1e200 would overflow
      // the sum of squares (and call a vector of them "all zeros").
      double scale = 0;
      for (double x : query_vector) scale = std::max(scale, std::abs(x));
      if (!(scale > 0)) return Error(400, "vector has no direction (all zeros)");
      double norm = 0;
      for (double x : query_vector) norm += (x / scale) * (x / scale);
      norm = std::sqrt(norm);
      std::vector<float> unit(query_vector.size());
      for (size_t j = 0; j < unit.size(); ++j) {
        unit[j] = static_cast<float>((query_vector[j] / scale) / norm);
      }
      std::string out = "{\"neighbors\":";
      AppendNeighbors(&out, s, served->Nearest(unit.data(), static_cast<size_t>(k), {}, limit));
      out += ",\"snapshot\":" + std::to_string(s.version()) + "}";
      return Json(std::move(out));
    }

    case Route::kMostSimilar:
    case Route::kAnalogy: {
      std::vector<std::string> positive, negative;
      if (spec.id == Route::kMostSimilar) {
        std::optional<std::vector<std::string>> p = WordList(*query, "positive", &error);
        if (!p) return error;
        std::optional<std::vector<std::string>> n = WordList(*query, "negative", &error);
        if (!n) return error;
        if (p->empty() && n->empty()) {
          return Error(400, "give at least one word in 'positive' or 'negative'");
        }
        positive = std::move(*p);
        negative = std::move(*n);
      } else {
        const std::optional<std::string> a = RequireWord(*query, "a", &error);
        if (!a) return error;
        const std::optional<std::string> b = RequireWord(*query, "b", &error);
        if (!b) return error;
        const std::optional<std::string> c = RequireWord(*query, "c", &error);
        if (!c) return error;
        positive = {*b, *c};  // b - a + c (3CosAdd)
        negative = {*a};
      }
      const std::optional<long> topn =
          IntParam(*query, "topn", 1, kMaxNeighbors, kDefaultNeighbors, &error);
      if (!topn) return error;
      const std::optional<long> restrict_vocab =
          IntParam(*query, "restrict_vocab", 1, std::numeric_limits<long>::max(),
                   std::numeric_limits<long>::max(), &error);
      if (!restrict_vocab) return error;
      const std::shared_ptr<const Served> served = served_for(&error);
      if (!served) return error;
      const ServingSnapshot& s = *served->snapshot;
      std::optional<Combined> c = Combine(s, positive, negative, &error);
      if (!c) return error;
      const bool exact = !served->UsesIndex() || static_cast<size_t>(*restrict_vocab) < s.rows();
      // One table word's neighbours: the index's search starts at that word's row.
      const std::optional<size_t> query_row =
          positive.size() == 1 && negative.empty() && c->exclude.size() == 1
              ? std::optional<size_t>(c->exclude[0])
              : std::nullopt;
      const auto results = served->Nearest(c->query.data(), static_cast<size_t>(*topn), c->exclude,
                                           static_cast<size_t>(*restrict_vocab), query_row);
      // Written directly (the hot route): the keys in the order nlohmann's object dumps them.
      std::string out = "{";
      if (spec.id == Route::kMostSimilar) {
        out += "\"negative\":";
        AppendStrings(&out, negative);
        out += ",\"positive\":";
        AppendStrings(&out, positive);
      } else {
        out += "\"a\":";
        AppendString(&out, negative[0]);
        out += ",\"answer\":";
        if (results.empty()) {
          out += "null";
        } else {
          AppendString(&out, s.word(results[0].row));
        }
        out += ",\"b\":";
        AppendString(&out, positive[0]);
        out += ",\"c\":";
        AppendString(&out, positive[1]);
      }
      out += ",\"results\":";
      AppendNeighbors(&out, s, results);
      out += exact ? ",\"search\":\"exact\"" : ",\"search\":\"hnsw\"";
      out += ",\"snapshot\":" + std::to_string(s.version());
      out += ",\"sources\":" + Dump(c->sources) + "}";
      return Json(std::move(out));
    }

    case Route::kDoesntMatch:
    case Route::kNSimilarity: {
      const bool doesnt_match = spec.id == Route::kDoesntMatch;
      std::vector<std::vector<std::string>> lists;
      for (const char* name : doesnt_match ? std::vector<const char*>{"words"}
                                           : std::vector<const char*>{"ws1", "ws2"}) {
        std::optional<std::vector<std::string>> l = WordList(*query, name, &error);
        if (!l) return error;
        if (l->empty()) return Error(400, std::string("give at least one word in '") + name + "'");
        lists.push_back(std::move(*l));
      }
      const std::shared_ptr<const Served> served = served_for(&error);
      if (!served) return error;
      const ServingSnapshot& s = *served->snapshot;
      const size_t dim = static_cast<size_t>(s.dim());
      // gensim ignores the words it does not know (and says so in its log); so do we, in 'ignored'.
      json ignored = json::array();
      std::vector<std::vector<size_t>> rows(lists.size());
      for (size_t l = 0; l < lists.size(); ++l) {
        for (const std::string& w : lists[l]) {
          const std::optional<size_t> r = s.Find(w);
          if (r) {
            rows[l].push_back(*r);
          } else {
            ignored.push_back(w);
          }
        }
        if (rows[l].empty()) {
          HttpReply r = Error(404, "none of the words in '" +
                                       std::string(doesnt_match ? "words" : l == 0 ? "ws1" : "ws2") +
                                       "' is in the vocabulary of snapshot " +
                                       std::to_string(s.version()));
          r.error_kind = "unknown_word";
          return r;
        }
      }
      json out;
      if (doesnt_match) {
        // The unit vectors' mean, normalised; the word of least cosine with it (ties: the first
        // in gensim's sorted order, the smaller word).
        std::vector<std::vector<float>> units(rows[0].size(), std::vector<float>(dim));
        std::vector<double> mean(dim, 0.0);
        for (size_t i = 0; i < rows[0].size(); ++i) {
          s.UnitVector(rows[0][i], units[i].data());
          for (size_t j = 0; j < dim; ++j) mean[j] += units[i][j];
        }
        double norm = 0;
        for (double& v : mean) {
          v /= static_cast<double>(rows[0].size());
          norm += v * v;
        }
        norm = std::sqrt(norm);
        json sims = json::array();
        size_t worst = 0;
        double worst_sim = std::numeric_limits<double>::infinity();
        for (size_t i = 0; i < rows[0].size(); ++i) {
          double d = 0;
          for (size_t j = 0; j < dim; ++j) d += units[i][j] * (norm > 0 ? mean[j] / norm : 0.0);
          const std::string& w = s.word(rows[0][i]);
          if (d < worst_sim || (d == worst_sim && w < s.word(rows[0][worst]))) {
            worst_sim = d;
            worst = i;
          }
          sims.push_back({{"word", w}, {"similarity", d}});
        }
        out = {{"word", s.word(rows[0][worst])}, {"similarities", std::move(sims)}};
      } else {
        // Means of the raw vectors (gensim's get_mean_vector, pre_normalize=False), then cosine.
        std::vector<double> mean[2];
        for (size_t l = 0; l < 2; ++l) {
          mean[l].assign(dim, 0.0);
          for (size_t r : rows[l]) {
            const float* v = s.vector(r);
            for (size_t j = 0; j < dim; ++j) mean[l][j] += v[j];
          }
          for (double& v : mean[l]) v /= static_cast<double>(rows[l].size());
        }
        double dot = 0, n0 = 0, n1 = 0;
        for (size_t j = 0; j < dim; ++j) {
          dot += mean[0][j] * mean[1][j];
          n0 += mean[0][j] * mean[0][j];
          n1 += mean[1][j] * mean[1][j];
        }
        const double cos = n0 > 0 && n1 > 0 ? dot / std::sqrt(n0 * n1) : 0.0;
        out = {{"ws1", lists[0]}, {"ws2", lists[1]}, {"similarity", cos}};
      }
      out["ignored"] = std::move(ignored);
      out["snapshot"] = s.version();
      return Json(Dump(out));
    }

    case Route::kMostSimilarCosmul: {
      std::optional<std::vector<std::string>> positive = WordList(*query, "positive", &error);
      if (!positive) return error;
      std::optional<std::vector<std::string>> negative = WordList(*query, "negative", &error);
      if (!negative) return error;
      if (positive->empty()) return Error(400, "give at least one word in 'positive'");
      const std::optional<long> topn =
          IntParam(*query, "topn", 1, kMaxNeighbors, kDefaultNeighbors, &error);
      if (!topn) return error;
      const std::shared_ptr<const Served> served = served_for(&error);
      if (!served) return error;
      const ServingSnapshot& s = *served->snapshot;
      const size_t dim = static_cast<size_t>(s.dim());
      // Levy and Goldberg 2014, eq. 4, with cosines shifted to [0, 1] (their footnote 7), as
      // gensim: prod_pos (1 + cos) / 2 / (prod_neg (1 + cos) / 2 + 1e-6), the input words left out.
      std::vector<std::vector<float>> pos, neg;
      std::vector<size_t> exclude;
      for (auto [list, out] : {std::pair{&*positive, &pos}, std::pair{&*negative, &neg}}) {
        for (const std::string& w : *list) {
          const std::optional<size_t> r = s.Find(w);
          if (!r) return UnknownWord(s, w);
          out->emplace_back(dim);
          s.UnitVector(*r, out->back().data());
          exclude.push_back(*r);
        }
      }
      std::vector<ServingSnapshot::Neighbor> scored;
      scored.reserve(s.rows());
      for (size_t r = 0; r < s.rows(); ++r) {
        if (std::find(exclude.begin(), exclude.end(), r) != exclude.end()) continue;
        double num = 1.0, den = 1.0;
        for (const std::vector<float>& q : pos) num *= (1.0 + s.UnitDot(r, q.data())) / 2.0;
        for (const std::vector<float>& q : neg) den *= (1.0 + s.UnitDot(r, q.data())) / 2.0;
        scored.push_back({r, static_cast<float>(num / ((neg.empty() ? 1.0 : den) + 1e-6))});
      }
      const size_t k = std::min(scored.size(), static_cast<size_t>(*topn));
      std::partial_sort(scored.begin(), scored.begin() + static_cast<ptrdiff_t>(k), scored.end(),
                        ServingSnapshot::Neighbor::Better);
      scored.resize(k);
      json results = json::array();
      for (const ServingSnapshot::Neighbor& n : scored) {
        results.push_back({{"word", s.word(n.row)}, {"score", n.similarity}});
      }
      return Json(Dump(json{{"positive", *positive},
                            {"negative", *negative},
                            {"results", std::move(results)},
                            {"search", "exact"},
                            {"snapshot", s.version()}}));
    }

    case Route::kSimilarity:
    case Route::kRank: {
      const std::optional<std::string> w1 = RequireWord(*query, "w1", &error);
      if (!w1) return error;
      const std::optional<std::string> w2 = RequireWord(*query, "w2", &error);
      if (!w2) return error;
      const std::shared_ptr<const Served> served = served_for(&error);
      if (!served) return error;
      const ServingSnapshot& s = *served->snapshot;
      if (spec.id == Route::kSimilarity) {
        // Either word may come from the character model (docs/char-model.md).
        const std::optional<Resolved> v1 = ResolveWord(s, *w1, &error);
        if (!v1) return error;
        const std::optional<Resolved> v2 = ResolveWord(s, *w2, &error);
        if (!v2) return error;
        std::string out = "{\"w1\":";
        AppendString(&out, *w1);
        out += ",\"w2\":";
        AppendString(&out, *w2);
        out += ",\"similarity\":";
        AppendFloat(&out, v1->row && v2->row
                              ? s.Similarity(*v1->row, *v2->row)
                              : static_cast<float>(Cosine(v1->vector, v2->vector)));
        out += ",\"sources\":{\"w1\":\"" + std::string(v1->source()) + "\",\"w2\":\"" +
               v2->source() + "\"}";
        out += ",\"snapshot\":" + std::to_string(s.version()) + "}";
        return Json(std::move(out));
      }
      const std::optional<size_t> r1 = s.Find(*w1), r2 = s.Find(*w2);
      if (!r1) return UnknownWord(s, *w1);
      if (!r2) return UnknownWord(s, *w2);
      // gensim: 1 + the words other than w1 at a smaller cosine distance from w1 than w2.
      std::vector<float> unit(static_cast<size_t>(s.dim()));
      s.UnitVector(*r1, unit.data());
      const float target = s.UnitDot(*r2, unit.data());
      size_t closer = 0;
      for (size_t r = 0; r < s.rows(); ++r) {
        if (r != *r1 && s.UnitDot(r, unit.data()) > target) ++closer;
      }
      return Json(Dump(json{{"w1", *w1},
                            {"w2", *w2},
                            {"rank", closer + 1},
                            {"similarity", target},
                            {"snapshot", s.version()}}));
    }

    case Route::kWords: {
      const std::string* prefix = query->Get("prefix");
      const std::optional<long> limit =
          IntParam(*query, "limit", 1, kMaxWordsPage, kDefaultWordsPage, &error);
      if (!limit) return error;
      const std::optional<long> offset = IntParam(*query, "offset", 0, kMaxWordsOffset, 0, &error);
      if (!offset) return error;
      const std::shared_ptr<const Served> served = served_for(&error);
      if (!served) return error;
      return WordsPage(*served->snapshot, prefix != nullptr ? *prefix : std::string(),
                       static_cast<size_t>(*limit), static_cast<size_t>(*offset));
    }

    case Route::kWord: {
      const std::optional<std::string> word = PathSegment(path, 2);
      if (!word) return Error(400, "malformed percent-encoding in the word of " + path);
      if (word->empty()) return Error(400, "missing word: use GET /v1/words/{word}");
      const std::shared_ptr<const Served> served = served_for(&error);
      if (!served) return error;
      const ServingSnapshot& s = *served->snapshot;
      const std::optional<size_t> row = s.Find(*word);
      if (!row) return UnknownWord(s, *word);
      json out = {{"word", *word},
                  {"count", s.has_counts() ? json(s.count(*row)) : json(nullptr)},
                  {"rank", s.rank(*row)},
                  {"vocabulary_size", s.rows()}};
      // The first snapshot of the word's unbroken run among those this server served; exact
      // unless the run reaches back to the first snapshot it loaded (the word may be older).
      if (served->first_seen != nullptr) {
        const uint64_t first = (*served->first_seen)[*row];
        out["first_snapshot"] = first;
        out["first_snapshot_exact"] = first != served->first_loaded;
      } else {  // loaded for a pin, outside the served chain: only "since this one" is known
        out["first_snapshot"] = s.version();
        out["first_snapshot_exact"] = false;
      }
      out["snapshot"] = s.version();
      return Json(Dump(out));
    }

    case Route::kHistory: {
      const std::optional<std::string> word = PathSegment(path, 2);
      if (!word) return Error(400, "malformed percent-encoding in the word of " + path);
      if (word->empty()) return Error(400, "missing word: use GET /v1/words/{word}/history");
      const std::optional<long> k =
          IntParam(*query, "k", 1, kMaxNeighbors, kDefaultNeighbors, &error);
      if (!k) return error;
      const std::shared_ptr<const Served> served = served_for(&error);
      if (!served) return error;
      const ServingSnapshot& now = *served->snapshot;
      const std::optional<size_t> row = now.Find(*word);
      if (!row) return UnknownWord(now, *word);
      const size_t dim = static_cast<size_t>(now.dim());
      std::vector<float> unit_now(dim), unit_then(dim), rotated(dim);
      now.UnitVector(*row, unit_now.data());
      // Pinned to an older snapshot: the served chain's snapshots older than it, aligned to it
      // now (one Procrustes fit each).
      std::vector<HistoryEntry> pinned_history;
      const std::shared_ptr<const Served> current = ctx.current();
      if (current != nullptr && served != current && served->history.empty()) {
        for (const HistoryEntry& h : current->history) {
          if (h.snapshot->version() >= now.version() || h.snapshot->dim() != now.dim()) continue;
          pinned_history.push_back(
              {h.snapshot, AlignProcrustes(*h.snapshot, now, ctx.options->procrustes_top_words),
               h.first_seen});
        }
      }
      json history = json::array();
      for (const HistoryEntry& h : pinned_history.empty() ? served->history : pinned_history) {
        const ServingSnapshot& then = *h.snapshot;
        json entry = {{"snapshot", then.version()},
                      {"created_at", then.info().created_at},
                      {"aligned_on_words", h.alignment.shared_words}};
        const std::optional<size_t> old_row = then.Find(*word);
        if (!old_row) {
          entry["cosine_to_now"] = nullptr;
          entry["neighbors"] = json::array();
        } else {
          then.UnitVector(*old_row, unit_then.data());
          Rotate(h.alignment.rotation, unit_then.data(), now.dim(), rotated.data());
          double dot = 0;
          for (size_t j = 0; j < dim; ++j) dot += static_cast<double>(rotated[j]) * unit_now[j];
          entry["cosine_to_now"] = std::clamp(dot, -1.0, 1.0);
          const size_t self[] = {*old_row};
          entry["neighbors"] = NeighborsJson(
              then,
              then.NearestToVector(unit_then.data(), static_cast<size_t>(*k), self, then.rows()));
        }
        history.push_back(std::move(entry));
      }
      const size_t self[] = {*row};
      json out = {
          {"word", *word},
          {"snapshot", now.version()},
          {"history", std::move(history)},
          {"neighbors", NeighborsJson(now, served->Nearest(unit_now.data(), static_cast<size_t>(*k),
                                                           self, now.rows()))}};
      return Json(Dump(out));
    }

    case Route::kSnapshots: {
      const std::shared_ptr<const Served> served = ctx.current();
      StatusOr<std::vector<SnapshotInfo>> list = ctx.source->List();
      if (!list.ok()) return Error(500, "listing snapshots: " + list.status().ToString());
      json snapshots = json::array();
      const uint64_t served_version = served ? served->snapshot->version() : 0;
      for (const SnapshotInfo& info : *list) {
        json entry = json::parse(info.metadata_json, nullptr, /*allow_exceptions=*/false);
        if (!entry.is_object()) entry = json{{"metadata_unreadable", info.metadata_json}};
        entry["version"] = info.version;
        entry["created_at"] = info.created_at;
        entry["served"] = served && served_version == info.version;
        if (ctx.evaluation_of) {
          json e = ctx.evaluation_of(info.version);
          if (e.is_object()) {
            for (auto it = e.begin(); it != e.end(); ++it) entry[it.key()] = it.value();
          }
        }
        snapshots.push_back(std::move(entry));
      }
      json out = {{"snapshots", std::move(snapshots)}, {"served", nullptr}};
      if (served) {
        out["served"] = served_version;
        out["served_words"] = served->snapshot->rows();
        out["served_dim"] = served->snapshot->dim();
      }
      return Json(Dump(out));
    }

    case Route::kMetrics: {
      HttpReply r = Json(ctx.metrics ? ctx.metrics() : std::string());
      r.content_type = "text/plain; version=0.0.4; charset=utf-8";
      return r;
    }

    case Route::kOpenApi: {
      // The document depends on the route table only: built and dumped once (about 40 KB).
      static const std::string document = Dump(Routes::OpenApi());
      return Json(document);
    }

    case Route::kAdminSnapshot:
      return Admin(ctx, call, ctx.options->on_snapshot, "snapshot");
    case Route::kAdminPause:
      return Admin(ctx, call, ctx.options->on_pause_ingest, "ingest/pause");
    case Route::kAdminResume:
      return Admin(ctx, call, ctx.options->on_resume_ingest, "ingest/resume");

    case Route::kDashboard:
    case Route::kStatic: {
      const std::string& root = ctx.options->web_root;
      if (root.empty())
        return Error(404, "no dashboard: the server was started without a web root");
      // Only these files are served: no path from the request reaches the file system.
      static const std::vector<std::tuple<std::string, std::string, std::string>> kFiles = {
          {"index.html", "index.html", "text/html; charset=utf-8"},
          {"dashboard.js", "dashboard.js", "application/javascript; charset=utf-8"},
          {"uPlot.iife.min.js", "node_modules/uplot/dist/uPlot.iife.min.js",
           "application/javascript; charset=utf-8"},
          {"uPlot.min.css", "node_modules/uplot/dist/uPlot.min.css", "text/css; charset=utf-8"},
      };
      std::string name = "index.html";
      if (spec.id == Route::kStatic) {
        const std::optional<std::string> file = PathSegment(path, 1);
        name = file ? *file : "";
      }
      for (const auto& [file, relative, type] : kFiles) {
        if (file != name) continue;
        std::optional<std::string> content = ReadFile(std::filesystem::path(root) / relative);
        if (!content) {
          return Error(404, "dashboard file " + relative + " is missing under " + root +
                                " (scripts/install-deps runs npm ci in web/)");
        }
        HttpReply r = Json(std::move(*content));
        r.content_type = type;
        return r;
      }
      return Error(404, "no static file '" + name + "'");
    }
  }
  return Error(500, "unreachable route");
}

// Strong entity tag of a 200: "<snapshot>-<XXH3-64 of the body, hex>" ("<hash>" for answers
// not from a snapshot). The body decides it, so an answer that could differ for the same
// snapshot (a newer HNSW index attached to it) gets another tag, and so does another snapshot.
std::string EntityTag(const HttpReply& r) {
  char hash[17];
  std::snprintf(hash, sizeof hash, "%016llx",
                static_cast<unsigned long long>(XXH3_64bits(r.body.data(), r.body.size())));
  return "\"" + (r.snapshot != 0 ? std::to_string(r.snapshot) + "-" : std::string()) + hash + "\"";
}

// True when If-None-Match (a comma-separated list of entity tags, or *) holds `etag`, by weak
// comparison (RFC 9110, 13.1.2): a W/ prefix is ignored.
bool NoneMatch(std::string_view header, std::string_view etag) {
  while (!header.empty()) {
    const size_t comma = header.find(',');
    std::string_view tag = header.substr(0, comma);
    header = comma == std::string_view::npos ? std::string_view() : header.substr(comma + 1);
    while (!tag.empty() && (tag.front() == ' ' || tag.front() == '\t')) tag.remove_prefix(1);
    while (!tag.empty() && (tag.back() == ' ' || tag.back() == '\t')) tag.remove_suffix(1);
    if (tag.starts_with("W/")) tag.remove_prefix(2);
    if (tag == "*" || tag == etag) return true;
  }
  return false;
}

}  // namespace

Routes::Routes(RouteContext context) : ctx_(std::move(context)) {}

namespace {

// The JSON schema of a POST route's body, its limits as constraints.
json BodySchema(Route id) {
  const json k = {{"type", "integer"}, {"minimum", 1}, {"maximum", kMaxNeighbors}};
  switch (id) {
    case Route::kVectors:
      return {{"type", "object"},
              {"required", {"words"}},
              {"properties",
               {{"words",
                 {{"type", "array"},
                  {"minItems", 1},
                  {"maxItems", kMaxBatchWords},
                  {"items", {{"type", "string"}}}}}}}};
    case Route::kNeighborsByVector:
      return {{"type", "object"},
              {"required", {"vector"}},
              {"properties",
               {{"vector",
                 {{"type", "array"},
                  {"description", "the served dimension's count of finite numbers, not all 0"},
                  {"items", {{"type", "number"}}}}},
                {"k", k},
                {"restrict_vocab", {{"type", "integer"}, {"minimum", 1}}}}}};
    default:
      return {{"type", "object"}};
  }
}

}  // namespace

json Routes::OpenApi() {
  const json error_body = {
      {"application/json",
       {{"schema",
         {{"type", "object"},
          {"required", {"error"}},
          {"properties", {{"error", {{"type", "string"}}}}}}}}}};
  json paths = json::object();
  for (const RouteSpec& r : Table()) {
    json op = {{"summary", r.summary}, {"operationId", std::string(r.method) + " " + r.path}};
    json params = json::array();
    for (const Param& p : r.params) {
      json schema = {{"type", p.type}};
      if (p.minimum != 0 || p.maximum != 0) {
        schema["minimum"] = p.minimum;
        schema["maximum"] = p.maximum;
      }
      params.push_back({{"name", p.name},
                        {"in", p.in},
                        {"required", p.required},
                        {"description", p.description},
                        {"schema", std::move(schema)}});
    }
    if (!params.empty()) op["parameters"] = std::move(params);
    if (r.body != nullptr) {
      op["requestBody"] = {
          {"required", true},
          {"description", std::string(r.body) + " (at most " + std::to_string(kMaxBodyBytes) +
                              " bytes; read as JSON whatever the Content-Type)"},
          {"content", {{"application/json", {{"schema", BodySchema(r.id)}}}}}};
    }
    op["responses"] = {
        {"200",
         {{"description", "OK"},
          {"headers",
           {{"ETag",
             {{"description",
               "strong entity tag of this answer: the snapshot it came from and a hash of the "
               "body (conditional GET with If-None-Match)"},
              {"schema", {{"type", "string"}}}}}}},
          {"content", {{r.produces, json::object()}}}}},
        {"4XX",
         {{"description", "a bad request: the reason in 'error'"}, {"content", error_body}}}};
    if (std::string_view(r.method) == "GET") {
      op["responses"]["304"] = {
          {"description", "Not Modified: If-None-Match holds this answer's ETag (no body)"}};
    }
    if (AnswersFromASnapshot(r.id)) {
      op["responses"]["404"] = {
          {"description",
           "a word not in the vocabulary, or ?snapshot=N not retained (then also 'snapshot' and "
           "'retained', the versions that are)"},
          {"content", error_body}};
    }
    const std::string path = r.path;
    const bool admin = path.rfind("/v1/admin/", 0) == 0;
    const bool needs_snapshot =
        path.rfind("/v1/", 0) == 0 && !admin && r.id != Route::kSnapshots;
    if (needs_snapshot || r.id == Route::kHealth) {
      op["responses"]["503"] = {
          {"description", "no snapshot is served yet (a trainer has not published one)"},
          {"content", error_body}};
    }
    if (admin) {
      op["security"] = json::array({{{"adminBearer", json::array()}}});
      op["responses"]["401"] = {{"description", "missing or wrong bearer token"},
                                {"content", error_body}};
      op["responses"]["403"] = {{"description", "admin routes disabled: no token configured"},
                                {"content", error_body}};
      op["responses"]["501"] = {{"description", "the action is not available in this process"},
                                {"content", error_body}};
    }
    std::string method = r.method;
    for (char& ch : method) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
    paths[r.path][method] = std::move(op);
  }
  return {
      {"openapi", "3.0.3"},
      {"info",
       {{"title", "streamvec"},
        {"version", "1"},
        {"description", "Word embeddings learned from a text stream, served while they learn"}}},
      {"paths", std::move(paths)},
      {"components",
       {{"securitySchemes",
         {{"adminBearer",
           {{"type", "http"},
            {"scheme", "bearer"},
            {"description",
             "The token of --admin-token-file or $STREAMVEC_ADMIN_TOKEN; without one the admin "
             "routes answer 403"}}}}}}}};
}

HttpReply Routes::Handle(const HttpCall& call) const {
  HttpReply reply = [&]() -> HttpReply {
    const std::string& path = call.path;
    // Route, then method, then parameters, then the snapshot, then the words.
    const RouteSpec* spec = nullptr;
    std::string allowed;
    for (const RouteSpec& r : Table()) {
      if (!Matches(r.path, path)) continue;
      if (call.method == r.method) {
        spec = &r;
        break;
      }
      allowed += (allowed.empty() ? "" : ", ") + std::string(r.method);
    }
    if (spec == nullptr && allowed.empty()) {
      // {"error": "no route ...; routes: <list>", "routes": [...]}; the list and the array are
      // the table's, made once (scanners ask for unknown paths all day).
      static const auto [list, routes_json] = [] {
        json routes = json::array();
        std::string l;
        for (const RouteSpec& r : Table()) {
          routes.push_back(std::string(r.method) + " " + r.path);
          l += (l.empty() ? "" : ", ") + std::string(r.method) + " " + r.path;
        }
        return std::pair<std::string, std::string>(l, Dump(routes));
      }();
      HttpReply r;
      r.status = 404;
      r.body =
          "{\"error\":" + Dump(json("no route " + call.method + " " + path + "; routes: " + list)) +
          ",\"routes\":" + routes_json + "}";
      r.error_kind = "unknown_route";
      return r;
    }
    if (spec == nullptr) {
      HttpReply r =
          Error(405, "method " + call.method + " is not allowed on " + path + "; use " + allowed);
      r.allow = allowed;
      for (const RouteSpec& t : Table()) {
        if (Matches(t.path, path)) r.route = t.path;
      }
      return r;
    }
    uint64_t answered_from = 0;
    HttpReply r = Answer(ctx_, *spec, call, &answered_from);
    r.route = spec->path;
    if (r.status != 200) return r;
    r.snapshot = answered_from;
    r.etag = EntityTag(r);
    if (call.method == "GET" && NoneMatch(call.if_none_match, r.etag)) {
      r.status = 304;  // the client's copy is current: no body
      r.body.clear();
    }
    return r;
  }();
  return reply;
}

}  // namespace streamvec::api
