// GET /metrics on its own HTTP listener: the `--metrics HOST:PORT` of the long-running processes
// that do not serve the REST API (`train --brokers`, `ingest`, `crawl`), for Prometheus to scrape.
#ifndef STREAMVEC_API_METRICS_ENDPOINT_H_
#define STREAMVEC_API_METRICS_ENDPOINT_H_

#include <functional>
#include <memory>
#include <string>

#include "streamvec/base/status.h"

namespace streamvec::api {

class MetricsEndpoint {
 public:
  // Listens on http://HOST:PORT/ (cpprestsdk; port 0 picks a free one). GET /metrics answers 200
  // with `text()` (Prometheus text format 0.0.4, called on a listener thread for every scrape:
  // it must be thread-safe) followed by streamvec_process_start_time_seconds; any other path is
  // a 404 and any other method a 405, both JSON. Errors: IoError when the address cannot be
  // bound (in use, not local), InvalidArgument for an empty host.
  static StatusOr<std::unique_ptr<MetricsEndpoint>> Start(const std::string& host, int port,
                                                          std::function<std::string()> text);
  ~MetricsEndpoint();  // closes the listener once replies in flight are written (at most 2 s)
  MetricsEndpoint(const MetricsEndpoint&) = delete;
  MetricsEndpoint& operator=(const MetricsEndpoint&) = delete;

  int port() const;  // the bound port

 private:
  struct Impl;
  explicit MetricsEndpoint(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace streamvec::api

#endif  // STREAMVEC_API_METRICS_ENDPOINT_H_
