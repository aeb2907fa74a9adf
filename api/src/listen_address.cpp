#include "listen_address.h"

#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>

namespace streamvec::api {

std::string HostForUri(const std::string& host) {
  return host.find(':') != std::string::npos ? "[" + host + "]" : host;  // IPv6 literal
}

StatusOr<std::string> ListenerHost(const std::string& host) {
  if (host.find(':') == std::string::npos) return host;
  if (host == "::1") return std::string("+");
  return Status::InvalidArgument(
      "cannot listen on [" + host +
      "]: the HTTP listener (cpprestsdk) takes no IPv6 address "
      "but [::1]; listen on an IPv4 address or [::1] and put a reverse proxy in front "
      "(docs/nginx)");
}

bool ListeningOn(const std::string& host, int port) {
  addrinfo hints{};
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_NUMERICSERV;
  addrinfo* found = nullptr;
  if (getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &found) != 0) return false;
  bool accepted = false;
  for (addrinfo* a = found; a != nullptr && !accepted; a = a->ai_next) {
    const int fd = socket(a->ai_family, a->ai_socktype, a->ai_protocol);
    if (fd < 0) continue;
    accepted = connect(fd, a->ai_addr, a->ai_addrlen) == 0;
    close(fd);
  }
  freeaddrinfo(found);
  return accepted;
}

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

Status ListenOnPort(const std::string& host, int port, const std::function<Status(int)>& listen) {
  if (StatusOr<std::string> usable = ListenerHost(host); !usable.ok()) return usable.status();
  if (port != 0) return listen(port);
  Status listening;
  for (int attempt = 0; attempt < 8; ++attempt) {
    StatusOr<int> free_port = PickFreePort(host);
    if (!free_port.ok()) return free_port.status();
    listening = listen(*free_port);
    if (listening.ok()) break;
  }
  return listening;
}

}  // namespace streamvec::api
