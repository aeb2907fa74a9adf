#include "metrics.h"

#include <charconv>
#include <cmath>

namespace streamvec::api {

std::string PromNumber(double v) {
  if (std::isnan(v)) return "NaN";
  if (std::isinf(v)) return v > 0 ? "+Inf" : "-Inf";
  char buf[32];
  const auto r = std::to_chars(buf, buf + sizeof buf, v);
  return std::string(buf, r.ptr);
}

std::string EscapeLabel(std::string_view value) {
  std::string out;
  out.reserve(value.size());
  for (char c : value) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '"') {
      out += "\\\"";
    } else if (c == '\n') {
      out += "\\n";
    } else {
      out += c;
    }
  }
  return out;
}

void AppendMetricHeader(std::string* out, std::string_view name, std::string_view type,
                        std::string_view help) {
  out->append("# HELP ").append(name).append(" ").append(help).append("\n");
  out->append("# TYPE ").append(name).append(" ").append(type).append("\n");
}

void AppendMetric(std::string* out, std::string_view name, std::string_view type,
                  std::string_view help, double value, std::string_view labels) {
  AppendMetricHeader(out, name, type, help);
  out->append(name);
  if (!labels.empty()) out->append("{").append(labels).append("}");
  out->append(" ").append(PromNumber(value)).append("\n");
}

void RequestMetrics::Observe(const std::string& route, int status, std::string_view error_kind,
                             double seconds) {
  std::lock_guard<std::mutex> lock(mu_);
  Histogram& h = latency_[route];
  size_t b = 0;
  while (b < kBuckets.size() && seconds > kBuckets[b]) ++b;
  if (b < kBuckets.size()) ++h.counts[b];
  ++h.count;
  h.sum += seconds;
  ++requests_[{route, status}];
  if (!error_kind.empty()) ++errors_[std::string(error_kind)];
}

void RequestMetrics::AppendPrometheus(std::string* out) const {
  std::lock_guard<std::mutex> lock(mu_);
  *out +=
      "# HELP streamvec_http_request_duration_seconds Time to handle a request, by route "
      "template.\n# TYPE streamvec_http_request_duration_seconds histogram\n";
  for (const auto& [route, h] : latency_) {
    const std::string label = "route=\"" + EscapeLabel(route) + "\"";
    uint64_t cumulative = 0;
    for (size_t b = 0; b < kBuckets.size(); ++b) {
      cumulative += h.counts[b];
      *out += "streamvec_http_request_duration_seconds_bucket{" + label + ",le=\"" +
              PromNumber(kBuckets[b]) + "\"} " + std::to_string(cumulative) + "\n";
    }
    *out += "streamvec_http_request_duration_seconds_bucket{" + label + ",le=\"+Inf\"} " +
            std::to_string(h.count) + "\n";
    *out +=
        "streamvec_http_request_duration_seconds_sum{" + label + "} " + PromNumber(h.sum) + "\n";
    *out += "streamvec_http_request_duration_seconds_count{" + label + "} " +
            std::to_string(h.count) + "\n";
  }
  *out +=
      "# HELP streamvec_http_requests_total Requests answered, by route template and status.\n"
      "# TYPE streamvec_http_requests_total counter\n";
  for (const auto& [key, n] : requests_) {
    *out += "streamvec_http_requests_total{route=\"" + EscapeLabel(key.first) + "\",status=\"" +
            std::to_string(key.second) + "\"} " + std::to_string(n) + "\n";
  }
  *out +=
      "# HELP streamvec_http_errors_total Error replies, by kind (bad_request, not_found, "
      "unknown_route, ...).\n# TYPE streamvec_http_errors_total counter\n";
  for (const auto& [kind, n] : errors_) {
    *out += "streamvec_http_errors_total{kind=\"" + EscapeLabel(kind) + "\"} " + std::to_string(n) +
            "\n";
  }
}

}  // namespace streamvec::api
