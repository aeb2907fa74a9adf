#include "streamvec/api/metrics_endpoint.h"

#include <cpprest/http_listener.h>
#include <spdlog/spdlog.h>

#include <chrono>
#include <exception>
#include <utility>

#include "listen_address.h"
#include "replies_in_flight.h"
#include "streamvec/api/prometheus.h"

namespace streamvec::api {
namespace {

namespace http = web::http;
using http::experimental::listener::http_listener;

void Reply(RepliesInFlight::Ticket& ticket, http::http_request& request, http::status_code code,
           const std::string& content_type, std::string body) {
  http::http_response response(code);
  response.headers().set_content_type(content_type);
  if (code == http::status_codes::MethodNotAllowed) response.headers().add("Allow", "GET");
  response.set_body(std::move(body), content_type);
  ticket.Reply(request, response);
}

}  // namespace

struct MetricsEndpoint::Impl {
  std::function<std::string()> text;
  std::unique_ptr<http_listener> listener;
  RepliesInFlight replies;
  int port = 0;
  double start_time = 0;  // Unix seconds

  void Handle(http::http_request request) {
    RepliesInFlight::Ticket ticket = replies.Take();
    try {
      if (request.method() != http::methods::GET) {
        Reply(ticket, request, http::status_codes::MethodNotAllowed, "application/json",
              R"({"error":"method not allowed: /metrics answers GET"})");
      } else if (request.relative_uri().path() != "/metrics") {
        Reply(ticket, request, http::status_codes::NotFound, "application/json",
              R"({"error":"not found: this endpoint serves GET /metrics only"})");
      } else {
        std::string out = text();
        AppendMetric(&out, "streamvec_process_start_time_seconds", "gauge",
                     "Start time of the process since the Unix epoch, seconds.", start_time);
        Reply(ticket, request, http::status_codes::OK, "text/plain; version=0.0.4; charset=utf-8",
              std::move(out));
      }
    } catch (const std::exception& e) {
      spdlog::warn("metrics: cannot reply: {}", e.what());
    }
  }

  Status Listen(const std::string& host, int port_to_try) {
    const std::string url = "http://" + HostForUri(host) + ":" + std::to_string(port_to_try) + "/";
    StatusOr<std::string> listener_host = ListenerHost(host);
    if (!listener_host.ok()) return listener_host.status();
    try {
      auto l = std::make_unique<http_listener>("http://" + *listener_host + ":" +
                                               std::to_string(port_to_try) + "/");
      l->support([this](http::http_request r) { Handle(std::move(r)); });
      // cpprest answers OPTIONS and TRACE itself (TRACE echoing the headers) unless told not to.
      l->support(http::methods::OPTIONS, [this](http::http_request r) { Handle(std::move(r)); });
      l->support(http::methods::TRCE, [this](http::http_request r) { Handle(std::move(r)); });
      l->open().wait();
      if (*listener_host != host && !ListeningOn(host, port_to_try)) {
        l->close().wait();
        return Status::IoError("--metrics: cannot listen on " + url +
                               ": the HTTP listener bound "
                               "another loopback address (the resolver lists 127.0.0.1 first)");
      }
      listener = std::move(l);
      port = port_to_try;
      return Status::Ok();
    } catch (const std::exception& e) {
      return Status::IoError("--metrics: cannot listen on " + url + ": " + e.what());
    }
  }
};

StatusOr<std::unique_ptr<MetricsEndpoint>> MetricsEndpoint::Start(
    const std::string& host, int port, std::function<std::string()> text) {
  if (host.empty()) return Status::InvalidArgument("--metrics: the host is empty");
  auto impl = std::make_unique<Impl>();
  impl->text = std::move(text);
  impl->start_time = std::chrono::duration<double>(
                         std::chrono::system_clock::now().time_since_epoch()).count();
  Impl* raw = impl.get();
  SV_RETURN_IF_ERROR(
      ListenOnPort(host, port, [raw, &host](int p) { return raw->Listen(host, p); }));
  return std::unique_ptr<MetricsEndpoint>(new MetricsEndpoint(std::move(impl)));
}

MetricsEndpoint::MetricsEndpoint(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

MetricsEndpoint::~MetricsEndpoint() {
  if (impl_->listener) impl_->replies.CloseAfterDraining(*impl_->listener, "metrics");
}

int MetricsEndpoint::port() const { return impl_->port; }

}  // namespace streamvec::api
