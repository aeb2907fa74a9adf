#include "streamvec/kafka/document.h"

#include <nlohmann/json.hpp>

namespace streamvec {
namespace {

bool IsSpace(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v';
}

Status ReadString(const nlohmann::json& j, const char* field, bool required, std::string* out) {
  const auto it = j.find(field);
  if (it == j.end() || it->is_null()) {
    if (required) return Status::InvalidArgument(std::string("field '") + field + "' is missing");
    return Status::Ok();
  }
  if (!it->is_string()) {
    return Status::InvalidArgument(std::string("field '") + field + "' must be a string");
  }
  *out = it->get<std::string>();
  if (required && out->empty()) {
    return Status::InvalidArgument(std::string("field '") + field + "' is empty");
  }
  return Status::Ok();
}

}  // namespace

std::string DocumentToJson(const Document& doc) {
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

StatusOr<Document> ParseDocument(std::string_view json) {
  if (json.size() > kMaxDocumentMessageBytes) {
    return Status::InvalidArgument("message is " + std::to_string(json.size()) +
                                   " bytes, over the limit of " +
                                   std::to_string(kMaxDocumentMessageBytes));
  }
  nlohmann::json j = nlohmann::json::parse(json, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) {
    // Parse again with exceptions for the position and reason of the error.
    try {
      const nlohmann::json unused = nlohmann::json::parse(json);
      (void)unused;
    } catch (const nlohmann::json::exception& e) {
      return Status::InvalidArgument(std::string("not JSON (") + e.what() + ")");
    }
    return Status::InvalidArgument("not JSON");
  }
  if (!j.is_object()) return Status::InvalidArgument("not a JSON object");
  Document doc;
  SV_RETURN_IF_ERROR(ReadString(j, "id", true, &doc.id));
  SV_RETURN_IF_ERROR(ReadString(j, "source", true, &doc.source));
  SV_RETURN_IF_ERROR(ReadString(j, "text", true, &doc.text));
  SV_RETURN_IF_ERROR(ReadString(j, "url", false, &doc.url));
  SV_RETURN_IF_ERROR(ReadString(j, "title", false, &doc.title));
  SV_RETURN_IF_ERROR(ReadString(j, "lang", false, &doc.lang));
  SV_RETURN_IF_ERROR(ReadString(j, "published_at", false, &doc.published_at));
  SV_RETURN_IF_ERROR(ReadString(j, "fetched_at", false, &doc.fetched_at));
  if (doc.text.size() > kMaxDocumentTextBytes) {
    return Status::InvalidArgument("text is " + std::to_string(doc.text.size()) +
                                   " bytes, over the limit of " +
                                   std::to_string(kMaxDocumentTextBytes));
  }
  if (const auto it = j.find("offset"); it != j.end() && !it->is_null()) {
    if (!it->is_number_integer() || it->get<int64_t>() < 0) {
      return Status::InvalidArgument("field 'offset' must be a non-negative integer");
    }
    doc.offset = it->get<int64_t>();
  }
  if (const auto it = j.find("start"); it != j.end() && !it->is_null()) {
    if (!it->is_number_integer() || it->get<int64_t>() < 0) {
      return Status::InvalidArgument("field 'start' must be a non-negative integer");
    }
    doc.start = it->get<int64_t>();
    if (doc.offset < 0 || doc.start > doc.offset) {
      return Status::InvalidArgument("field 'start' needs an 'offset' at or after it");
    }
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

std::string DocsTopic(const std::string& prefix) { return prefix + ".docs"; }
std::string RejectedTopic(const std::string& prefix) { return prefix + ".rejected"; }

}  // namespace streamvec
