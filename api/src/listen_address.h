// Where the API's HTTP listeners bind (private to api/): the host as a URI writes it, and binding
// a port, picking a free one for port 0.
#ifndef STREAMVEC_API_SRC_LISTEN_ADDRESS_H_
#define STREAMVEC_API_SRC_LISTEN_ADDRESS_H_

#include <functional>
#include <string>

#include "streamvec/base/status.h"

namespace streamvec::api {

// `host` for a URI: an IPv6 literal in brackets.
std::string HostForUri(const std::string& host);

// The host to give cpprestsdk's HTTP listener for `host`. Its asio listener splits "HOST:PORT"
// at the first ':', so it cannot take an IPv6 literal: "::1" is given as "+", the wildcard it
// resolves with no host name and without AI_PASSIVE, which getaddrinfo answers with the
// loopback addresses, ::1 first where the system has IPv6 (ListeningOn checks it after the
// bind). Any other host is given as it is. Errors: InvalidArgument for another IPv6 literal
// (bind an IPv4 address, or ::1, and put a reverse proxy in front).
StatusOr<std::string> ListenerHost(const std::string& host);

// Whether a TCP connection to host:port is accepted now (connected and closed at once).
bool ListeningOn(const std::string& host, int port);

// A port that is free on `host` right now: bind port 0 and read back what the kernel chose.
// Errors: IoError (the host does not resolve, nothing can be bound).
StatusOr<int> PickFreePort(const std::string& host);

// Calls listen(port), or for port 0 listen(a free port), again with another free port up to 8
// times while it fails (another process may take a picked port first). Returns its last status,
// or ListenerHost's error for a host the listener cannot take.
Status ListenOnPort(const std::string& host, int port, const std::function<Status(int)>& listen);

}  // namespace streamvec::api

#endif  // STREAMVEC_API_SRC_LISTEN_ADDRESS_H_
