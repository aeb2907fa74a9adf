#include "streamvec/kafka/document.h"

#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>
#include <simdjson.h>

#include <algorithm>
#include <nlohmann/json.hpp>
#include <tuple>

namespace streamvec {
namespace {

bool IsSpace(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v';
}

}  // namespace

std::string DocumentToJson(const Document& doc) {
  const std::string* strings[] = {&doc.id,   &doc.source,       &doc.url,        &doc.title,
                                  &doc.text, &doc.lang,         &doc.published_at, &doc.fetched_at};
  bool valid = true;
  for (const std::string* s : strings) valid = valid && simdjson::validate_utf8(s->data(), s->size());
  if (valid) {
    // RapidJSON's writer escapes at about 1.2 GB/s here: nlohmann/json's per-byte escaping
    // (180 MB/s) was 71% of ingest's CPU.
    rapidjson::StringBuffer buffer;
    buffer.Reserve(doc.text.size() + doc.id.size() + doc.source.size() + 256);
    rapidjson::Writer<rapidjson::StringBuffer> w(buffer);
    auto field = [&w](const char* key, const std::string& value, bool always) {
      if (!always && value.empty()) return;
      w.Key(key);
      w.String(value.data(), static_cast<rapidjson::SizeType>(value.size()));
    };
    w.StartObject();
    field("id", doc.id, true);
    field("source", doc.source, true);
    field("url", doc.url, false);
    field("title", doc.title, false);
    field("text", doc.text, true);
    field("lang", doc.lang, false);
    field("published_at", doc.published_at, false);
    field("fetched_at", doc.fetched_at, false);
    if (doc.offset >= 0) {
      w.Key("offset");
      w.Int64(doc.offset);
    }
    if (doc.start >= 0) {
      w.Key("start");
      w.Int64(doc.start);
    }
    w.EndObject();
    return std::string(buffer.GetString(), buffer.GetSize());
  }
  nlohmann::json j;
  j["id"] = doc.id;
  j["source"] = doc.source;
  if (!doc.url.empty()) j["url"] = doc.url;
  if (!doc.title.empty()) j["title"] = doc.title;
  j["text"] = doc.text;
  if (!doc.lang.empty()) j["lang"] = doc.lang;
  if (!doc.published_at.empty()) j["published_at"] = doc.published_at;
  if (!doc.fetched_at.empty()) j["fetched_at"] = doc.fetched_at;
  if (doc.offset >= 0) j["offset"] = doc.offset;
  if (doc.start >= 0) j["start"] = doc.start;
  // Invalid UTF-8 is replaced rather than thrown on: ParseDocument rejects nothing we write.
  return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

namespace {

// The reason nlohmann/json gives for text that simdjson refused (its messages name the
// position); simdjson's own error name when nlohmann accepts it (a limit of simdjson's, such as
// nesting deeper than 1024).
Status NotJson(std::string_view json, simdjson::error_code e) {
  try {
    const nlohmann::json unused = nlohmann::json::parse(json);
    (void)unused;
  } catch (const nlohmann::json::exception& ex) {
    return Status::InvalidArgument(std::string("not JSON (") + ex.what() + ")");
  }
  return Status::InvalidArgument(std::string("not JSON (") + simdjson::error_message(e) + ")");
}

// Reads an optional or required string field's value; null is "absent".
Status ReadString(simdjson::dom::element value, std::string_view field, std::string* out) {
  if (value.is_null()) {
    out->clear();
    return Status::Ok();
  }
  std::string_view v;
  if (value.get_string().get(v) != simdjson::SUCCESS) {
    return Status::InvalidArgument("field '" + std::string(field) + "' must be a string");
  }
  out->assign(v);
  return Status::Ok();
}

Status ReadOffset(simdjson::dom::element value, std::string_view field, int64_t* out) {
  if (value.is_null()) {
    *out = -1;
    return Status::Ok();
  }
  int64_t v = -1;
  if (value.get_int64().get(v) != simdjson::SUCCESS || v < 0) {
    return Status::InvalidArgument("field '" + std::string(field) +
                                   "' must be a non-negative integer");
  }
  *out = v;
  return Status::Ok();
}

}  // namespace

StatusOr<Document> ParseDocument(std::string_view json) {
  if (json.size() > kMaxDocumentMessageBytes) {
    return Status::InvalidArgument("message is " + std::to_string(json.size()) +
                                   " bytes, over the limit of " +
                                   std::to_string(kMaxDocumentMessageBytes));
  }
  // simdjson's DOM parser validates the whole message (structure and UTF-8) at several GB/s;
  // nlohmann/json's parser ran at about 115 MB/s here, a sixth of the Kafka trainer's thread.
  // One parser per thread keeps its buffers between messages.
  thread_local simdjson::dom::parser parser;
  simdjson::dom::element root;
  if (const simdjson::error_code e = parser.parse(json.data(), json.size()).get(root);
      e != simdjson::SUCCESS) {
    return NotJson(json, e);
  }
  simdjson::dom::object object;
  if (root.get_object().get(object) != simdjson::SUCCESS) {
    return Status::InvalidArgument("not a JSON object");
  }
  // Every field once, in order (a repeated key: the last one counts, as in nlohmann/json).
  Document doc;
  bool has_id = false, has_source = false, has_text = false;
  for (const simdjson::dom::key_value_pair field : object) {
    const std::string_view key = field.key;
    if (key == "id") {
      SV_RETURN_IF_ERROR(ReadString(field.value, key, &doc.id));
      has_id = !field.value.is_null();
    } else if (key == "source") {
      SV_RETURN_IF_ERROR(ReadString(field.value, key, &doc.source));
      has_source = !field.value.is_null();
    } else if (key == "text") {
      SV_RETURN_IF_ERROR(ReadString(field.value, key, &doc.text));
      has_text = !field.value.is_null();
    } else if (key == "url") {
      SV_RETURN_IF_ERROR(ReadString(field.value, key, &doc.url));
    } else if (key == "title") {
      SV_RETURN_IF_ERROR(ReadString(field.value, key, &doc.title));
    } else if (key == "lang") {
      SV_RETURN_IF_ERROR(ReadString(field.value, key, &doc.lang));
    } else if (key == "published_at") {
      SV_RETURN_IF_ERROR(ReadString(field.value, key, &doc.published_at));
    } else if (key == "fetched_at") {
      SV_RETURN_IF_ERROR(ReadString(field.value, key, &doc.fetched_at));
    } else if (key == "offset") {
      SV_RETURN_IF_ERROR(ReadOffset(field.value, key, &doc.offset));
    } else if (key == "start") {
      SV_RETURN_IF_ERROR(ReadOffset(field.value, key, &doc.start));
    }
  }
  for (const auto& [present, value, name] :
       {std::tuple{has_id, &doc.id, "id"}, std::tuple{has_source, &doc.source, "source"},
        std::tuple{has_text, &doc.text, "text"}}) {
    if (!present) return Status::InvalidArgument(std::string("field '") + name + "' is missing");
    if (value->empty()) return Status::InvalidArgument(std::string("field '") + name + "' is empty");
  }
  if (doc.text.size() > kMaxDocumentTextBytes) {
    return Status::InvalidArgument("text is " + std::to_string(doc.text.size()) +
                                   " bytes, over the limit of " +
                                   std::to_string(kMaxDocumentTextBytes));
  }
  if (doc.start >= 0 && (doc.offset < 0 || doc.start > doc.offset)) {
    return Status::InvalidArgument("field 'start' needs an 'offset' at or after it");
  }
  return doc;
}

std::vector<std::pair<size_t, size_t>> SplitText(std::string_view text, size_t max_bytes) {
  std::vector<std::pair<size_t, size_t>> pieces;
  if (max_bytes == 0) max_bytes = 1;
  size_t i = 0;
  const size_t n = text.size();
  while (i < n) {
    while (i < n && IsSpace(text[i])) ++i;
    if (i >= n) break;
    size_t end = i + max_bytes;
    if (end >= n) {
      end = n;
    } else {
      // Back up to the last whitespace inside the piece.
      size_t cut = end;
      while (cut > i && !IsSpace(text[cut])) --cut;
      if (cut > i) {
        end = cut;
      } else {
        // One word longer than max_bytes: cut at a character boundary.
        while (end > i && (static_cast<unsigned char>(text[end]) & 0xC0) == 0x80) --end;
        if (end == i) end = i + max_bytes;
      }
    }
    size_t last = end;
    while (last > i && IsSpace(text[last - 1])) --last;
    if (last > i) pieces.emplace_back(i, last - i);
    i = end;
  }
  return pieces;
}

std::string RejectionToJson(const std::string& reason, const std::string& origin,
                            std::string_view payload) {
  nlohmann::json j;
  j["reason"] = reason;
  j["origin"] = origin;
  j["payload"] = std::string(payload.substr(0, 4096));
  return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

void SourcePositions::Cover(const std::string& source, int64_t start, int64_t end) {
  int64_t& pos = positions_[source];
  if (start < 0) {
    pos = std::max(pos, end);
    return;
  }
  if (start > pos) {
    int64_t& later_end = ahead_[source][start];
    later_end = std::max(later_end, end);
    return;
  }
  pos = std::max(pos, end);
  const auto it = ahead_.find(source);
  if (it == ahead_.end()) return;
  std::map<int64_t, int64_t>& later = it->second;
  while (!later.empty() && later.begin()->first <= pos) {
    pos = std::max(pos, later.begin()->second);
    later.erase(later.begin());
  }
  if (later.empty()) ahead_.erase(it);
}

void SourcePositions::Reset(const std::string& source, int64_t position) {
  positions_[source] = position;
  ahead_.erase(source);
}

std::string DocsTopic(const std::string& prefix) { return prefix + ".docs"; }
std::string RejectedTopic(const std::string& prefix) { return prefix + ".rejected"; }
std::string TrainersGroup(const std::string& prefix) { return prefix + ".trainers"; }

}  // namespace streamvec
