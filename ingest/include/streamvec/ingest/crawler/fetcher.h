// Fetching one URL safely: http/https through libcurl, file:// confined to a directory.
//
// Safety rules (SSRF): only http, https and (when FetchOptions::allow_file_dir is set) file URLs
// under that directory (after resolving symlinks and ".."); no connection to a loopback, private
// (RFC 1918, fc00::/7), CGNAT (100.64/10), link-local (169.254/16, fe80::/10, cloud metadata
// 169.254.169.254, fd00:ec2::254), multicast, unspecified or reserved address unless
// allow_private. The check runs on the address libcurl is about to connect to (after DNS, so a
// name resolving to 10.x is refused and DNS rebinding gains nothing), on every hop: redirects are
// followed here, not by libcurl, each one checked again (scheme, address, robots.txt by the
// caller). Proxies from the environment are ignored.
//
// Limits: connect and total timeouts, a minimum transfer speed (a body that trickles slower than
// low_speed_bytes_per_second for low_speed_seconds is abandoned), max_body_bytes (after
// decompression; Content-Length is checked up front), max_redirects. A body shorter than its
// Content-Length is an error (kTruncated), never parsed.
//
// Thread safety: a Fetcher may be used by one thread at a time; separate Fetchers are
// independent.
#ifndef STREAMVEC_INGEST_CRAWLER_FETCHER_H_
#define STREAMVEC_INGEST_CRAWLER_FETCHER_H_

#include <sys/socket.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace streamvec::crawler {

inline constexpr char kUserAgent[] = "streamvec-crawler/0.1 (+https://github.com/streamvec)";
inline constexpr char kRobotsToken[] = "streamvec-crawler";

struct FetchOptions {
  std::string user_agent = kUserAgent;
  double connect_timeout_seconds = 10;  // TCP + TLS handshake
  double timeout_seconds = 30;          // whole transfer of one hop
  int64_t low_speed_bytes_per_second = 64;  // slower than this for low_speed_seconds: abandoned
  int low_speed_seconds = 10;
  int64_t max_body_bytes = int64_t{8} << 20;  // per response, after decompression
  int max_redirects = 5;
  bool allow_private = false;        // allow loopback/private/link-local/metadata addresses
  // Exact IP literals exempt from the private-address rule even without allow_private (a known
  // internal feed host; the tests use "127.0.0.1" to prove that other private hops are refused).
  std::vector<std::string> allow_addresses;
  std::string allow_file_dir;        // file:// URLs allowed under this directory; "" = refused
};

enum class FetchError {
  kNone,
  kBadUrl,        // unparseable URL or a scheme other than http/https/(allowed) file
  kBlocked,       // a private/loopback/... address, or a file outside allow_file_dir
  kDns,           // the name did not resolve
  kConnect,       // connection refused / unreachable / TLS failure
  kTimeout,       // connect or total timeout, or the body was too slow
  kTooLarge,      // the body exceeded max_body_bytes
  kTruncated,     // the connection closed before Content-Length bytes arrived
  kTooManyRedirects,
  kHttpStatus,    // a 4xx/5xx status (the response is still returned)
  kRobots,        // FetchRequest::before_hop refused a hop (robots.txt)
  kIo,            // other transfer or file errors
};

// Short stable name of an error kind ("timeout", "blocked", ...) for logs and metrics.
const char* FetchErrorName(FetchError error);

struct FetchRequest {
  std::string url;
  std::string if_none_match;      // ETag from the previous response ("" = none)
  std::string if_modified_since;  // Last-Modified from the previous response ("" = none)
  // Called before every http(s) hop (the first URL and each redirect target) with its URL;
  // returning false stops with kRobots. The crawler uses it for robots.txt and per-host delays.
  std::function<bool(const std::string& url)> before_hop;
};

struct FetchResponse {
  FetchError error = FetchError::kNone;
  std::string error_message;  // what went wrong, naming the URL or address; "" when none
  int status = 0;             // HTTP status of the last hop (200, 304, 404, ...); 200 for files
  std::string final_url;      // URL after redirects
  std::string body;
  std::string content_type;   // Content-Type header value
  std::string etag;
  std::string last_modified;
  double retry_after_seconds = -1;  // Retry-After (delta seconds or HTTP date); -1 when absent
  int redirects = 0;          // hops followed
  bool ok() const { return error == FetchError::kNone; }
};

class Fetcher {
 public:
  explicit Fetcher(FetchOptions options);
  ~Fetcher();
  Fetcher(const Fetcher&) = delete;
  Fetcher& operator=(const Fetcher&) = delete;

  // Fetches request.url following redirects (each hop checked, conditional headers sent only to
  // the first URL). Never throws; errors are in the response. A 304 is not an error. Blocks for
  // at most about (max_redirects + 1) x timeout_seconds.
  FetchResponse Fetch(const FetchRequest& request);

  // Single hop, no redirect following (used for robots.txt and by Fetch). Also never throws.
  FetchResponse FetchOnce(const FetchRequest& request);

  const FetchOptions& options() const { return options_; }

 private:
  FetchResponse FetchFile(const std::string& url);
  FetchOptions options_;
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// True when a connection to `addr` is allowed without allow_private: not loopback, private,
// CGNAT, link-local (incl. metadata), multicast, unspecified, broadcast, documentation or
// reserved; IPv4-mapped and NAT64 IPv6 addresses are judged by their IPv4 address.
bool IsPublicAddress(const struct sockaddr* addr);

// Host (lower-case, without port and brackets) and scheme of an absolute URL; "" when unparseable.
std::string UrlHost(const std::string& url);
std::string UrlScheme(const std::string& url);
// "scheme://host[:port]" of an http(s) URL, the key for politeness and robots.txt.
std::string UrlOrigin(const std::string& url);
// Path and query ("/a?b") of a URL; "/" when empty.
std::string UrlPathAndQuery(const std::string& url);
// `ref` resolved against `base` (RFC 3986); "" when either cannot be parsed.
std::string ResolveUrl(const std::string& base, const std::string& ref);

}  // namespace streamvec::crawler

#endif  // STREAMVEC_INGEST_CRAWLER_FETCHER_H_
