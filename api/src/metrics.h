// Request metrics of the REST server in Prometheus text exposition format 0.0.4
// (https://prometheus.io/docs/instrumenting/exposition_formats/): latency histograms per route,
// requests by route and status, errors by kind. Private to api/.
#ifndef STREAMVEC_API_SRC_METRICS_H_
#define STREAMVEC_API_SRC_METRICS_H_

#include <array>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <string_view>
#include <utility>

#include "streamvec/api/prometheus.h"

namespace streamvec::api {

// Thread safety: Observe and AppendPrometheus may be called from any thread (one mutex; a few
// map updates per request).
class RequestMetrics {
 public:
  // route: the route template ("/v1/vectors/{word}", "unknown"); status: HTTP status;
  // error_kind: empty for a success, else e.g. "bad_request"; seconds: handling time.
  void Observe(const std::string& route, int status, std::string_view error_kind, double seconds);
  void AppendPrometheus(std::string* out) const;

  // Upper bounds (seconds) of the latency histogram buckets; +Inf is implied.
  static constexpr std::array<double, 12> kBuckets = {0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025,
                                                      0.05,   0.1,   0.25,   0.5,   1.0,  2.5};

 private:
  struct Histogram {
    std::array<uint64_t, kBuckets.size()> counts{};  // not cumulative
    uint64_t count = 0;
    double sum = 0;
  };
  mutable std::mutex mu_;
  std::map<std::string, Histogram> latency_;                  // GUARDED_BY(mu_)
  std::map<std::pair<std::string, int>, uint64_t> requests_;  // GUARDED_BY(mu_)
  std::map<std::string, uint64_t> errors_;                    // GUARDED_BY(mu_)
};

}  // namespace streamvec::api

#endif  // STREAMVEC_API_SRC_METRICS_H_
