// A small HTTP/1.1 server on 127.0.0.1 (ephemeral port) for the crawler tests, on plain POSIX
// sockets: one request per connection (Connection: close), a thread per connection, a handler
// that builds each response. Responses can be truncated (Content-Length larger than the bytes
// sent) or slow (a pause after the first bytes) to exercise the fetcher's limits.
#ifndef STREAMVEC_TESTS_CRAWLER_TEST_HTTP_SERVER_H_
#define STREAMVEC_TESTS_CRAWLER_TEST_HTTP_SERVER_H_

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cctype>
#include <chrono>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace streamvec::crawler::testing {

struct HttpRequest {
  std::string method;
  std::string path;                            // with the query
  std::map<std::string, std::string> headers;  // lower-case names
};

struct HttpResponse {
  int status = 200;
  std::vector<std::pair<std::string, std::string>> headers;
  std::string body;
  size_t send_only = std::string::npos;  // send this many body bytes, then close (truncated)
  int pause_ms_after_first_bytes = 0;    // slow body: pause after the first 16 bytes
};

class TestHttpServer {
 public:
  using Handler = std::function<HttpResponse(const HttpRequest&)>;

  explicit TestHttpServer(Handler handler) : handler_(std::move(handler)) {
    listen_fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    int one = 1;
    ::setsockopt(listen_fd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    addr.sin_port = 0;
    ::bind(listen_fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr));
    ::listen(listen_fd_, 64);
    socklen_t len = sizeof(addr);
    ::getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&addr), &len);
    port_ = ntohs(addr.sin_port);
    thread_ = std::thread([this] { AcceptLoop(); });
  }

  ~TestHttpServer() {
    stop_ = true;
    thread_.join();
    std::vector<std::thread> workers;
    {
      std::lock_guard<std::mutex> lock(mu_);
      workers.swap(workers_);
    }
    for (std::thread& t : workers) t.join();
    ::close(listen_fd_);
  }

  int port() const { return port_; }
  std::string Url(const std::string& path) const {
    return "http://127.0.0.1:" + std::to_string(port_) + path;
  }
  // Requests served so far for `path` (any method).
  int Hits(const std::string& path) {
    std::lock_guard<std::mutex> lock(mu_);
    return hits_[path];
  }
  std::vector<HttpRequest> Requests() {
    std::lock_guard<std::mutex> lock(mu_);
    return requests_;
  }

 private:
  void AcceptLoop() {
    while (!stop_) {
      pollfd p{listen_fd_, POLLIN, 0};
      if (::poll(&p, 1, 20) <= 0) continue;
      const int fd = ::accept(listen_fd_, nullptr, nullptr);
      if (fd < 0) continue;
      std::lock_guard<std::mutex> lock(mu_);
      workers_.emplace_back([this, fd] { Serve(fd); });
    }
  }

  void Serve(int fd) {
    std::string in;
    char buf[4096];
    while (in.find("\r\n\r\n") == std::string::npos && in.size() < 65536 && !stop_) {
      pollfd p{fd, POLLIN, 0};
      if (::poll(&p, 1, 20) <= 0) continue;
      const ssize_t n = ::recv(fd, buf, sizeof(buf), 0);
      if (n <= 0) break;
      in.append(buf, static_cast<size_t>(n));
    }
    HttpRequest req;
    const size_t line_end = in.find("\r\n");
    const std::string first = in.substr(0, line_end);
    const size_t sp1 = first.find(' '), sp2 = first.rfind(' ');
    if (sp1 != std::string::npos && sp2 > sp1) {
      req.method = first.substr(0, sp1);
      req.path = first.substr(sp1 + 1, sp2 - sp1 - 1);
    }
    size_t pos = line_end == std::string::npos ? in.size() : line_end + 2;
    while (pos < in.size()) {
      const size_t e = in.find("\r\n", pos);
      if (e == std::string::npos || e == pos) break;
      const std::string line = in.substr(pos, e - pos);
      const size_t colon = line.find(':');
      if (colon != std::string::npos) {
        std::string name = line.substr(0, colon);
        for (char& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
        std::string value = line.substr(colon + 1);
        value.erase(0, value.find_first_not_of(' '));
        req.headers[name] = value;
      }
      pos = e + 2;
    }
    {
      std::lock_guard<std::mutex> lock(mu_);
      ++hits_[req.path];
      requests_.push_back(req);
    }
    const HttpResponse resp = handler_(req);
    std::string head = "HTTP/1.1 " + std::to_string(resp.status) + " X\r\n";
    bool has_length = false;
    for (const auto& [k, v] : resp.headers) {
      head += k + ": " + v + "\r\n";
      if (k == "Content-Length") has_length = true;
    }
    if (!has_length) head += "Content-Length: " + std::to_string(resp.body.size()) + "\r\n";
    head += "Connection: close\r\n\r\n";
    SendAll(fd, head);
    if (req.method != "HEAD") {
      std::string body = resp.body.substr(0, resp.send_only);
      if (resp.pause_ms_after_first_bytes > 0) {
        const size_t first_part = std::min<size_t>(16, body.size());
        SendAll(fd, body.substr(0, first_part));
        const auto until = std::chrono::steady_clock::now() +
                           std::chrono::milliseconds(resp.pause_ms_after_first_bytes);
        while (!stop_ && std::chrono::steady_clock::now() < until) {
          std::this_thread::sleep_for(std::chrono::milliseconds(10));
        }
        body = body.substr(first_part);
      }
      SendAll(fd, body);
    }
    ::shutdown(fd, SHUT_WR);
    ::close(fd);
  }

  static void SendAll(int fd, const std::string& data) {
    size_t sent = 0;
    while (sent < data.size()) {
      const ssize_t n = ::send(fd, data.data() + sent, data.size() - sent, MSG_NOSIGNAL);
      if (n <= 0) return;
      sent += static_cast<size_t>(n);
    }
  }

  Handler handler_;
  int listen_fd_ = -1;
  int port_ = 0;
  std::atomic<bool> stop_{false};
  std::thread thread_;
  std::mutex mu_;
  std::vector<std::thread> workers_;
  std::map<std::string, int> hits_;
  std::vector<HttpRequest> requests_;
};

}  // namespace streamvec::crawler::testing

#endif  // STREAMVEC_TESTS_CRAWLER_TEST_HTTP_SERVER_H_
