// Server: cpprestsdk listener + snapshot polling thread. The only translation unit of api/ that
// includes cpprest (slow to compile; its U() macro is turned off for this target).
#include "streamvec/api/server.h"

#include <cpprest/http_listener.h>
#include <netdb.h>
#include <netinet/in.h>
#include <spdlog/spdlog.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstring>
#include <exception>
#include <mutex>
#include <nlohmann/json.hpp>
#include <thread>

#include "routes.h"

namespace streamvec::api {
namespace {

namespace http = web::http;
using http::experimental::listener::http_listener;

std::string HostForUri(const std::string& host) {
  return host.find(':') != std::string::npos ? "[" + host + "]" : host;  // IPv6 literal
}

// A port that is free on `host` right now: bind port 0 and read back what the kernel chose. Another
// process may take it before the listener binds; Start retries then.
StatusOr<int> PickFreePort(const std::string& host) {
  addrinfo hints{};
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  if (const int rc = getaddrinfo(host.c_str(), "0", &hints, &found); rc != 0) {
    return Status::IoError("cannot resolve host '" + host + "': " + gai_strerror(rc));
  }
  int port = -1;
  std::string error = "no address";
  for (addrinfo* a = found; a != nullptr && port < 0; a = a->ai_next) {
    const int fd = socket(a->ai_family, a->ai_socktype, a->ai_protocol);
    if (fd < 0) continue;
    sockaddr_storage bound{};
    socklen_t len = sizeof bound;
    if (bind(fd, a->ai_addr, a->ai_addrlen) == 0 &&
        getsockname(fd, reinterpret_cast<sockaddr*>(&bound), &len) == 0) {
      port = bound.ss_family == AF_INET6 ? ntohs(reinterpret_cast<sockaddr_in6*>(&bound)->sin6_port)
                                         : ntohs(reinterpret_cast<sockaddr_in*>(&bound)->sin_port);
    } else {
      error = std::strerror(errno);
    }
    close(fd);
  }
  freeaddrinfo(found);
  if (port < 0) return Status::IoError("cannot bind a port on '" + host + "': " + error);
  return port;
}

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
  std::shared_ptr<SnapshotSource> source;
  std::atomic<std::shared_ptr<const ServingSnapshot>> current;
  Routes routes;
  std::unique_ptr<http_listener> listener;
  int port = 0;

  std::thread poller;
  std::mutex mu;
  std::condition_variable wake;
  bool stopping = false;   // GUARDED_BY(mu)
  std::string last_error;  // only touched by the polling thread (and Start, before it runs)

  Impl(const ServeOptions& o, std::shared_ptr<SnapshotSource> s)
      : options(o), source(std::move(s)), routes([this] { return current.load(); }, source) {}

  // One check for a newer snapshot. Errors are logged once each and never stop serving: the
  // previous snapshot stays in place and the next poll tries again.
  void PollOnce() {
    const std::shared_ptr<const ServingSnapshot> old = current.load();
    StatusOr<std::shared_ptr<const ServingSnapshot>> next = Status::Internal("not loaded");
    try {
      next = source->LoadNewerThan(old ? old->version() : 0);
    } catch (const std::exception& e) {  // e.g. bad_alloc for a huge embedding
      next = Status::Internal(std::string("loading a snapshot: ") + e.what());
    }
    if (!next.ok()) {
      if (next.status().message() != last_error) {
        last_error = next.status().message();
        spdlog::warn("serve: {} (still serving snapshot {})", next.status().ToString(),
                     old ? old->version() : 0);
      }
      return;
    }
    last_error.clear();
    if (*next == nullptr) return;
    spdlog::info("serve: now serving snapshot {} ({} words x {})", (*next)->version(),
                 (*next)->rows(), (*next)->dim());
    current.store(std::move(*next));
  }

  void PollLoop() {
    const auto interval = std::chrono::duration<double>(options.poll_interval_s);
    std::unique_lock<std::mutex> lock(mu);
    while (!wake.wait_for(lock, interval, [this] { return stopping; })) {
      lock.unlock();
      PollOnce();
      lock.lock();
    }
  }

  // The one place where request exceptions become an HTTP error.
  void Handle(http::http_request request) {
    HttpReply reply;
    try {
      HttpCall call;
      call.method = request.method();
      const web::uri& uri = request.request_uri();
      call.path = uri.path();
      call.query = uri.query();
      if (call.method == http::methods::POST) ReadBody(request, &call);
      reply = routes.Handle(call);
    } catch (const std::exception& e) {
      reply = HttpReply{500,
                        nlohmann::json{{"error", std::string("internal error: ") + e.what()}}.dump(
                            -1, ' ', false, nlohmann::json::error_handler_t::replace),
                        ""};
    }
    try {
      http::http_response response(static_cast<http::status_code>(reply.status));
      response.set_body(std::move(reply.body), "application/json");
      if (!reply.allow.empty()) response.headers().add(http::header_names::allow, reply.allow);
      // A client that went away makes the reply task fail: observe it, or pplx terminates.
      request.reply(response).then([](pplx::task<void> t) {
        try {
          t.get();
        } catch (...) {
        }
      });
    } catch (const std::exception& e) {
      spdlog::warn("serve: cannot reply: {}", e.what());
    }
  }

  Status Listen(int port_to_try) {
    const std::string url =
        "http://" + HostForUri(options.host) + ":" + std::to_string(port_to_try) + "/";
    try {
      auto l = std::make_unique<http_listener>(url);
      l->support([this](http::http_request r) { Handle(std::move(r)); });
      l->open().wait();
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
  auto impl = std::make_unique<Impl>(options, std::move(source));
  impl->PollOnce();  // serve the newest snapshot from the first request when there is one
  Status listening;
  if (options.port != 0) {
    listening = impl->Listen(options.port);
  } else {
    for (int attempt = 0; attempt < 8; ++attempt) {  // another process may take a picked port
      StatusOr<int> port = PickFreePort(options.host);
      if (!port.ok()) return port.status();
      listening = impl->Listen(*port);
      if (listening.ok()) break;
    }
  }
  if (!listening.ok()) return listening;
  Impl* raw = impl.get();
  impl->poller = std::thread([raw] { raw->PollLoop(); });
  return std::unique_ptr<Server>(new Server(std::move(impl)));
}

int Server::port() const { return impl_->port; }

uint64_t Server::snapshot_version() const {
  const std::shared_ptr<const ServingSnapshot> s = impl_->current.load();
  return s ? s->version() : 0;
}

void Server::Stop() {
  {
    std::lock_guard<std::mutex> lock(impl_->mu);
    if (impl_->stopping) return;
    impl_->stopping = true;
  }
  impl_->wake.notify_all();
  if (impl_->poller.joinable()) impl_->poller.join();
  if (impl_->listener) {
    try {
      impl_->listener->close().wait();
    } catch (const std::exception& e) {
      spdlog::warn("serve: closing the listener: {}", e.what());
    }
  }
}

}  // namespace streamvec::api
