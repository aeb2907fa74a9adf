// Server: cpprestsdk listener + snapshot polling thread. With metrics_endpoint.cpp, the only
// translation units of api/ that include cpprest (slow to compile; its U() macro is turned off
// for this target).
#include "streamvec/api/server.h"

#include <cpprest/http_listener.h>
#include <pplx/threadpool.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstring>
#include <exception>
#include <filesystem>
#include <mutex>
#include <nlohmann/json.hpp>
#include <thread>

#include "listen_address.h"
#include "replies_in_flight.h"
#include "routes.h"
#include "service.h"

namespace streamvec::api {
namespace {

namespace http = web::http;
using http::experimental::listener::http_listener;

// Reads at most kMaxBodyBytes + 1 bytes of the body: a client cannot make the server buffer more.
void ReadBody(http::http_request& request, HttpCall* call) {
  const auto length = request.headers().content_length();
  if (length > kMaxBodyBytes) {
    call->body_too_large = true;  // declared too large: not read at all
    return;
  }
  auto buffer = request.body().streambuf();
  char chunk[64 * 1024];
  while (true) {
    const size_t n = buffer.getn(reinterpret_cast<uint8_t*>(chunk), sizeof chunk).get();
    if (n == 0) break;
    if (call->body.size() + n > kMaxBodyBytes) {
      call->body_too_large = true;
      call->body.clear();
      return;
    }
    call->body.append(chunk, n);
  }
}

}  // namespace

struct Server::Impl {
  ServeOptions options;
  Service service;
  std::unique_ptr<http_listener> listener;
  RepliesInFlight replies;
  int port = 0;
  bool stopped = false;  // GUARDED_BY(stop_mu)
  std::mutex stop_mu;

  Impl(const ServeOptions& o, std::shared_ptr<SnapshotSource> s)
      : options(o), service(o, std::move(s)) {}

  // The one place where request exceptions become an HTTP error.
  void Handle(http::http_request request) {
    RepliesInFlight::Ticket ticket = replies.Take();
    HttpReply reply;
    try {
      HttpCall call;
      call.method = request.method();
      const web::uri& uri = request.request_uri();
      call.path = uri.path();
      call.query = uri.query();
      if (request.headers().has(http::header_names::authorization)) {
        call.authorization = request.headers()[http::header_names::authorization];
      }
      if (request.headers().has(http::header_names::if_none_match)) {
        call.if_none_match = request.headers()[http::header_names::if_none_match];
      }
      if (!options.cors_origin.empty() && call.method == http::methods::OPTIONS) {
        reply.status = 204;  // CORS preflight
        reply.route = "preflight";
      } else {
        if (call.method == http::methods::POST) ReadBody(request, &call);
        reply = service.Handle(call);
      }
    } catch (const std::exception& e) {
      reply = HttpReply{};
      reply.status = 500;
      reply.body = nlohmann::json{{"error", std::string("internal error: ") + e.what()}}.dump(
          -1, ' ', false, nlohmann::json::error_handler_t::replace);
    }
    try {
      http::http_response response(static_cast<http::status_code>(reply.status));
      if (reply.status != 204 && reply.status != 304) {
        response.set_body(std::move(reply.body), reply.content_type);
      }
      if (!reply.allow.empty()) response.headers().add(http::header_names::allow, reply.allow);
      if (!reply.etag.empty()) response.headers().add(http::header_names::etag, reply.etag);
      if (!options.cors_origin.empty()) {
        response.headers().add("Access-Control-Allow-Origin", options.cors_origin);
        response.headers().add("Access-Control-Allow-Methods", "GET, POST, OPTIONS");
        response.headers().add("Access-Control-Allow-Headers",
                               "Content-Type, Authorization, If-None-Match");
        response.headers().add("Access-Control-Expose-Headers", "ETag");
      }
      ticket.Reply(request, response);
    } catch (const std::exception& e) {
      spdlog::warn("serve: cannot reply: {}", e.what());
    }
  }

  Status Listen(int port_to_try) {
    const std::string url =
        "http://" + HostForUri(options.host) + ":" + std::to_string(port_to_try) + "/";
    StatusOr<std::string> listener_host = ListenerHost(options.host);
    if (!listener_host.ok()) return listener_host.status();
    try {
      auto l = std::make_unique<http_listener>("http://" + *listener_host + ":" +
                                               std::to_string(port_to_try) + "/");
      l->support([this](http::http_request r) { Handle(std::move(r)); });
      // cpprest answers OPTIONS itself unless told otherwise: CORS preflights (or 405) are ours.
      l->support(http::methods::OPTIONS, [this](http::http_request r) { Handle(std::move(r)); });
      // cpprest also answers TRACE itself, echoing the request's headers (Authorization,
      // Cookie): ours too, so it gets the 405 every unsupported method gets.
      l->support(http::methods::TRCE, [this](http::http_request r) { Handle(std::move(r)); });
      l->open().wait();
      if (*listener_host != options.host && !ListeningOn(options.host, port_to_try)) {
        l->close().wait();
        return Status::IoError("cannot listen on " + url +
                               ": the HTTP listener bound another "
                               "loopback address (this system's resolver lists 127.0.0.1 first)");
      }
      listener = std::move(l);
      port = port_to_try;
      return Status::Ok();
    } catch (const std::exception& e) {
      return Status::IoError("cannot listen on " + url + ": " + e.what());
    }
  }
};

Server::Server(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

Server::~Server() { Stop(); }

Status InitializeHttpThreads(size_t threads) {
  if (threads < 1 || threads > 1024) {
    return Status::InvalidArgument("--http-threads must be in [1, 1024], not " +
                                   std::to_string(threads));
  }
  try {
    crossplat::threadpool::initialize_with_threads(threads);
  } catch (const std::exception& e) {
    return Status::FailedPrecondition(std::string("HTTP threads already started: ") + e.what());
  }
  return Status::Ok();
}

StatusOr<std::unique_ptr<Server>> Server::Start(const ServeOptions& options) {
  if (options.state_dir.empty()) return Status::InvalidArgument("state_dir is empty");
  return Start(options, NewStateDirSnapshotSource(options.state_dir));
}

StatusOr<std::unique_ptr<Server>> Server::Start(const ServeOptions& options,
                                                std::shared_ptr<SnapshotSource> source) {
  if (source == nullptr) return Status::InvalidArgument("snapshot source is null");
  if (options.host.empty()) return Status::InvalidArgument("host is empty");
  if (options.port < 0 || options.port > 65535) {
    return Status::InvalidArgument("port " + std::to_string(options.port) +
                                   " is outside [0, 65535]");
  }
  if (!(options.poll_interval_s > 0) || !std::isfinite(options.poll_interval_s)) {
    return Status::InvalidArgument("poll_interval_s must be > 0 seconds");
  }
  for (const std::string& f : options.similarity_files) {
    if (!std::filesystem::is_regular_file(f)) {
      return Status::InvalidArgument("similarity file '" + f + "' does not exist");
    }
  }
  if (!options.analogy_file.empty() && !std::filesystem::is_regular_file(options.analogy_file)) {
    return Status::InvalidArgument("analogy file '" + options.analogy_file + "' does not exist");
  }
  if (options.index_nice < 0 || options.index_nice > 19) {
    return Status::InvalidArgument("index_nice " + std::to_string(options.index_nice) +
                                   " is outside [0, 19]");
  }
  if (!(options.index_rebuild_interval_s >= 0)) {
    return Status::InvalidArgument("index_rebuild_interval_s must be >= 0 seconds");
  }
  if (options.quality_gate_drop >= 0 && options.similarity_files.empty()) {
    return Status::InvalidArgument("the quality gate needs at least one similarity file");
  }
  auto impl = std::make_unique<Impl>(options, std::move(source));
  impl->service.PollOnce();  // serve the newest snapshot from the first request when there is one
  SV_RETURN_IF_ERROR(
      ListenOnPort(options.host, options.port, [&impl](int port) { return impl->Listen(port); }));
  impl->service.StartPolling();
  return std::unique_ptr<Server>(new Server(std::move(impl)));
}

int Server::port() const { return impl_->port; }

uint64_t Server::snapshot_version() const { return impl_->service.snapshot_version(); }

void Server::Stop() {
  {
    std::lock_guard<std::mutex> lock(impl_->stop_mu);
    if (impl_->stopped) return;
    impl_->stopped = true;
  }
  impl_->service.StopPolling();
  if (impl_->listener) impl_->replies.CloseAfterDraining(*impl_->listener, "serve");
}

}  // namespace streamvec::api
