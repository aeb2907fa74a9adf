// Route dispatch, parameter checks and JSON bodies of the REST API (contract in api/README.md).
#include "routes.h"

#include <charconv>
#include <cmath>
#include <nlohmann/json.hpp>
#include <optional>
#include <string_view>
#include <utility>
#include <vector>

namespace streamvec::api {
namespace {

using nlohmann::json;

constexpr char kRouteList[] =
    "GET /v1/vectors/{word}, POST /v1/vectors, GET /v1/neighbors?word=W&k=N, "
    "GET /v1/similarity?w1=A&w2=B, GET /v1/snapshots, GET /healthz";
constexpr long kDefaultNeighbors = 10;

// JSON text of any string; bytes that are not UTF-8 (a client's malformed word) become U+FFFD
// instead of making the reply invalid JSON.
std::string Dump(const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }

void AppendString(std::string* out, std::string_view s) { *out += Dump(json(std::string(s))); }

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

HttpReply Error(int status, const std::string& message) {
  return HttpReply{status, Dump(json{{"error", message}}), ""};
}

HttpReply NoSnapshot() {
  return Error(503, "no snapshot loaded yet: the server is waiting for a trainer to publish one");
}

HttpReply UnknownWord(const ServingSnapshot& s, const std::string& word) {
  return Error(404, "word '" + word + "' is not in the vocabulary of snapshot " +
                        std::to_string(s.version()) + " (" + std::to_string(s.rows()) +
                        " words, exact match)");
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

std::string VectorReply(const ServingSnapshot& s, size_t row) {
  std::string out = "{\"word\":";
  AppendString(&out, s.word(row));
  out += ",\"vector\":";
  AppendVector(&out, s.vector(row), s.dim());
  out += ",\"snapshot\":" + std::to_string(s.version()) + "}";
  return out;
}

}  // namespace

Routes::Routes(std::function<std::shared_ptr<const ServingSnapshot>()> current,
               std::shared_ptr<SnapshotSource> source)
    : current_(std::move(current)), source_(std::move(source)) {}

HttpReply Routes::Handle(const HttpCall& call) const {
  const std::string& path = call.path;
  // Route, then method, then parameters, then the snapshot, then the words.
  const char* allowed = nullptr;
  enum class Route { kVector, kVectors, kNeighbors, kSimilarity, kSnapshots, kHealth } route;
  constexpr std::string_view kVectorPrefix = "/v1/vectors/";
  if (path.starts_with(kVectorPrefix) &&
      path.find('/', kVectorPrefix.size()) == std::string::npos) {
    route = Route::kVector, allowed = "GET";
  } else if (path == "/v1/vectors") {
    route = Route::kVectors, allowed = "POST";
  } else if (path == "/v1/neighbors") {
    route = Route::kNeighbors, allowed = "GET";
  } else if (path == "/v1/similarity") {
    route = Route::kSimilarity, allowed = "GET";
  } else if (path == "/v1/snapshots") {
    route = Route::kSnapshots, allowed = "GET";
  } else if (path == "/healthz") {
    route = Route::kHealth, allowed = "GET";
  } else {
    return Error(404, "no route " + call.method + " " + path + "; routes: " + kRouteList);
  }
  if (call.method != allowed) {
    HttpReply r =
        Error(405, "method " + call.method + " is not allowed on " + path + "; use " + allowed);
    r.allow = allowed;
    return r;
  }
  const std::optional<Query> query = ParseQuery(call.query);
  if (!query) return Error(400, "malformed percent-encoding in the query string");

  HttpReply error;
  switch (route) {
    case Route::kHealth: {
      const std::shared_ptr<const ServingSnapshot> s = current_();
      if (!s) return HttpReply{503, Dump(json{{"status", "no snapshot yet"}}), ""};
      return HttpReply{200, Dump(json{{"status", "ok"}, {"snapshot", s->version()}}), ""};
    }

    case Route::kVector: {
      const std::optional<std::string> word =
          PercentDecode(std::string_view(path).substr(kVectorPrefix.size()));
      if (!word) return Error(400, "malformed percent-encoding in the word of " + path);
      if (word->empty()) return Error(400, "missing word: use GET /v1/vectors/{word}");
      const std::shared_ptr<const ServingSnapshot> s = current_();
      if (!s) return NoSnapshot();
      const std::optional<size_t> row = s->Find(*word);
      if (!row) return UnknownWord(*s, *word);
      return HttpReply{200, VectorReply(*s, *row), ""};
    }

    case Route::kVectors: {
      if (call.body_too_large) {
        return Error(400, "request body is over " + std::to_string(kMaxBodyBytes) + " bytes");
      }
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
      const std::shared_ptr<const ServingSnapshot> s = current_();
      if (!s) return NoSnapshot();
      std::string out = "{\"vectors\":[";
      std::string missing = "[";
      bool first_vector = true, first_missing = true;
      for (const json& w : words) {
        const std::string& word = w.get_ref<const std::string&>();
        const std::optional<size_t> row = s->Find(word);
        if (row) {
          if (!first_vector) out += ',';
          first_vector = false;
          out += "{\"word\":";
          AppendString(&out, word);
          out += ",\"vector\":";
          AppendVector(&out, s->vector(*row), s->dim());
          out += '}';
        } else {
          if (!first_missing) missing += ',';
          first_missing = false;
          AppendString(&missing, word);
        }
      }
      out += "],\"missing\":" + missing + "],\"snapshot\":" + std::to_string(s->version()) + "}";
      return HttpReply{200, std::move(out), ""};
    }

    case Route::kNeighbors: {
      const std::optional<std::string> word = RequireWord(*query, "word", &error);
      if (!word) return error;
      long k = kDefaultNeighbors;
      if (const std::string* raw = query->Get("k")) {
        const char* end = raw->data() + raw->size();
        const auto r = std::from_chars(raw->data(), end, k);
        if (raw->empty() || r.ec != std::errc() || r.ptr != end || k < 1 || k > kMaxNeighbors) {
          return Error(400, "query parameter 'k' must be an integer in [1, " +
                                std::to_string(kMaxNeighbors) + "], got '" + *raw + "'");
        }
      }
      const std::shared_ptr<const ServingSnapshot> s = current_();
      if (!s) return NoSnapshot();
      const std::optional<size_t> row = s->Find(*word);
      if (!row) return UnknownWord(*s, *word);
      std::string out = "{\"word\":";
      AppendString(&out, *word);
      out += ",\"neighbors\":[";
      bool first = true;
      for (const ServingSnapshot::Neighbor& n : s->Neighbors(*row, static_cast<size_t>(k))) {
        if (!first) out += ',';
        first = false;
        out += "{\"word\":";
        AppendString(&out, s->word(n.row));
        out += ",\"similarity\":";
        AppendFloat(&out, n.similarity);
        out += '}';
      }
      out += "],\"snapshot\":" + std::to_string(s->version()) + "}";
      return HttpReply{200, std::move(out), ""};
    }

    case Route::kSimilarity: {
      const std::optional<std::string> w1 = RequireWord(*query, "w1", &error);
      if (!w1) return error;
      const std::optional<std::string> w2 = RequireWord(*query, "w2", &error);
      if (!w2) return error;
      const std::shared_ptr<const ServingSnapshot> s = current_();
      if (!s) return NoSnapshot();
      const std::optional<size_t> r1 = s->Find(*w1), r2 = s->Find(*w2);
      if (!r1) return UnknownWord(*s, *w1);
      if (!r2) return UnknownWord(*s, *w2);
      std::string out = "{\"w1\":";
      AppendString(&out, *w1);
      out += ",\"w2\":";
      AppendString(&out, *w2);
      out += ",\"similarity\":";
      AppendFloat(&out, s->Similarity(*r1, *r2));
      out += ",\"snapshot\":" + std::to_string(s->version()) + "}";
      return HttpReply{200, std::move(out), ""};
    }

    case Route::kSnapshots: {
      const std::shared_ptr<const ServingSnapshot> s = current_();
      StatusOr<std::vector<SnapshotInfo>> list = source_->List();
      if (!list.ok()) return Error(500, "listing snapshots: " + list.status().ToString());
      json snapshots = json::array();
      for (const SnapshotInfo& info : *list) {
        json entry = json::parse(info.metadata_json, nullptr, /*allow_exceptions=*/false);
        if (!entry.is_object()) entry = json{{"metadata_unreadable", info.metadata_json}};
        entry["version"] = info.version;
        entry["created_at"] = info.created_at;
        entry["served"] = s && s->version() == info.version;
        snapshots.push_back(std::move(entry));
      }
      json out = {{"snapshots", std::move(snapshots)}, {"served", nullptr}};
      if (s) {
        out["served"] = s->version();
        out["served_words"] = s->rows();
        out["served_dim"] = s->dim();
      }
      return HttpReply{200, Dump(out), ""};
    }
  }
  return Error(500, "unreachable route");
}

}  // namespace streamvec::api
