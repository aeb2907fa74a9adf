#include "streamvec/ingest/crawler/fetcher.h"

#include <arpa/inet.h>
#include <curl/curl.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <mutex>

#include "ascii.h"

namespace streamvec::crawler {
namespace {

using internal::AsciiLower;
using internal::TrimAsciiWhitespace;

void InitCurl() {
  static std::once_flag once;
  std::call_once(once, [] { curl_global_init(CURL_GLOBAL_DEFAULT); });
}

struct UrlParts {
  bool ok = false;
  std::string scheme, host, port, path, query;
};

UrlParts ParseUrl(const std::string& url) {
  UrlParts parts;
  InitCurl();
  CURLU* h = curl_url();
  if (h == nullptr) return parts;
  if (curl_url_set(h, CURLUPART_URL, url.c_str(), CURLU_NON_SUPPORT_SCHEME) == CURLUE_OK) {
    parts.ok = true;
    auto get = [h](CURLUPart part, unsigned flags) {
      char* v = nullptr;
      std::string out;
      if (curl_url_get(h, part, &v, flags) == CURLUE_OK && v != nullptr) out = v;
      curl_free(v);
      return out;
    };
    parts.scheme = AsciiLower(get(CURLUPART_SCHEME, 0));
    parts.host = AsciiLower(get(CURLUPART_HOST, 0));
    parts.port = get(CURLUPART_PORT, 0);
    parts.path = get(CURLUPART_PATH, 0);
    parts.query = get(CURLUPART_QUERY, 0);
  }
  curl_url_cleanup(h);
  return parts;
}

bool V4Public(uint32_t a) {  // host byte order
  auto in = [a](uint32_t net, int bits) {
    return bits == 0 || (a >> (32 - bits)) == (net >> (32 - bits));
  };
  return !(in(0x00000000, 8) ||    // 0.0.0.0/8 "this network"
           in(0x0A000000, 8) ||    // 10/8
           in(0x64400000, 10) ||   // 100.64/10 CGNAT (also Alibaba's metadata 100.100.100.200)
           in(0x7F000000, 8) ||    // loopback
           in(0xA9FE0000, 16) ||   // link-local incl. 169.254.169.254 metadata
           in(0xAC100000, 12) ||   // 172.16/12
           in(0xC0000000, 24) ||   // 192.0.0/24 IETF protocol assignments
           in(0xC0000200, 24) ||   // 192.0.2/24 TEST-NET-1
           in(0xC0A80000, 16) ||   // 192.168/16
           in(0xC6120000, 15) ||   // 198.18/15 benchmarking
           in(0xC6336400, 24) ||   // 198.51.100/24 TEST-NET-2
           in(0xCB007100, 24) ||   // 203.0.113/24 TEST-NET-3
           in(0xE0000000, 4) ||    // multicast
           in(0xF0000000, 4));     // reserved + broadcast
}

}  // namespace

bool IsPublicAddress(const struct sockaddr* addr) {
  if (addr == nullptr) return false;
  if (addr->sa_family == AF_INET) {
    const auto* v4 = reinterpret_cast<const sockaddr_in*>(addr);
    return V4Public(ntohl(v4->sin_addr.s_addr));
  }
  if (addr->sa_family != AF_INET6) return false;
  const unsigned char* b = reinterpret_cast<const sockaddr_in6*>(addr)->sin6_addr.s6_addr;
  auto v4_at = [b](int offset) {
    return (uint32_t{b[offset]} << 24) | (uint32_t{b[offset + 1]} << 16) |
           (uint32_t{b[offset + 2]} << 8) | uint32_t{b[offset + 3]};
  };
  static const unsigned char kMapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
  static const unsigned char kNat64[12] = {0, 0x64, 0xff, 0x9b, 0, 0, 0, 0, 0, 0, 0, 0};
  if (std::memcmp(b, kMapped, 12) == 0 || std::memcmp(b, kNat64, 12) == 0) {
    return V4Public(v4_at(12));
  }
  bool all_zero_but_last = std::all_of(b, b + 15, [](unsigned char c) { return c == 0; });
  if (all_zero_but_last && (b[15] == 0 || b[15] == 1)) return false;  // :: and ::1
  if ((b[0] & 0xfe) == 0xfc) return false;                          // fc00::/7 unique local
  if (b[0] == 0xfe && (b[1] & 0xc0) == 0x80) return false;           // fe80::/10 link-local
  if (b[0] == 0xfe && (b[1] & 0xc0) == 0xc0) return false;           // fec0::/10 site-local
  if (b[0] == 0xff) return false;                                    // multicast
  if (b[0] == 0x20 && b[1] == 0x01 && b[2] == 0x0d && b[3] == 0xb8) return false;  // 2001:db8::/32
  if (b[0] == 0x20 && b[1] == 0x02) return V4Public(v4_at(2));       // 6to4 embeds an IPv4
  return (b[0] & 0xe0) == 0x20;  // only global unicast 2000::/3
}

std::string UrlHost(const std::string& url) { return ParseUrl(url).host; }
std::string UrlScheme(const std::string& url) { return ParseUrl(url).scheme; }

std::string UrlOrigin(const std::string& url) {
  const UrlParts p = ParseUrl(url);
  if (!p.ok || p.host.empty()) return "";
  std::string origin = p.scheme + "://" + p.host;
  if (!p.port.empty()) origin += ":" + p.port;
  return origin;
}

std::string UrlPathAndQuery(const std::string& url) {
  const UrlParts p = ParseUrl(url);
  std::string out = p.path.empty() ? "/" : p.path;
  if (!p.query.empty()) out += "?" + p.query;
  return out;
}

std::string ResolveUrl(const std::string& base, const std::string& ref) {
  InitCurl();
  CURLU* h = curl_url();
  if (h == nullptr) return "";
  std::string out;
  if (curl_url_set(h, CURLUPART_URL, base.c_str(), CURLU_NON_SUPPORT_SCHEME) == CURLUE_OK &&
      curl_url_set(h, CURLUPART_URL, ref.c_str(), CURLU_NON_SUPPORT_SCHEME) == CURLUE_OK) {
    char* v = nullptr;
    if (curl_url_get(h, CURLUPART_URL, &v, 0) == CURLUE_OK && v != nullptr) out = v;
    curl_free(v);
  }
  curl_url_cleanup(h);
  return out;
}

const char* FetchErrorName(FetchError error) {
  switch (error) {
    case FetchError::kNone: return "none";
    case FetchError::kBadUrl: return "bad_url";
    case FetchError::kBlocked: return "blocked";
    case FetchError::kDns: return "dns";
    case FetchError::kConnect: return "connect";
    case FetchError::kTimeout: return "timeout";
    case FetchError::kTooLarge: return "too_large";
    case FetchError::kTruncated: return "truncated";
    case FetchError::kTooManyRedirects: return "redirects";
    case FetchError::kHttpStatus: return "http_status";
    case FetchError::kRobots: return "robots";
    case FetchError::kIo: return "io";
  }
  return "unknown";
}

struct Fetcher::Impl {
  CURL* curl = nullptr;
  // Per transfer:
  FetchResponse* response = nullptr;
  int64_t max_body = 0;
  bool too_large = false;
  std::string blocked_address;  // set by the open-socket callback when it refused an address
  const FetchOptions* options = nullptr;

  static size_t OnBody(char* data, size_t size, size_t n, void* user) {
    auto* self = static_cast<Impl*>(user);
    const size_t bytes = size * n;
    if (static_cast<int64_t>(self->response->body.size() + bytes) > self->max_body) {
      self->too_large = true;
      return 0;  // aborts the transfer with CURLE_WRITE_ERROR
    }
    self->response->body.append(data, bytes);
    return bytes;
  }

  static size_t OnHeader(char* data, size_t size, size_t n, void* user) {
    auto* self = static_cast<Impl*>(user);
    const size_t bytes = size * n;
    std::string line(data, bytes);
    if (line.rfind("HTTP/", 0) == 0) {  // a new response (after 100 Continue): start over
      FetchResponse* r = self->response;
      r->content_type.clear();
      r->etag.clear();
      r->last_modified.clear();
      r->retry_after_seconds = -1;
      return bytes;
    }
    const size_t colon = line.find(':');
    if (colon == std::string::npos) return bytes;
    const std::string name = AsciiLower(TrimAsciiWhitespace(line.substr(0, colon)));
    const std::string value = TrimAsciiWhitespace(line.substr(colon + 1));
    FetchResponse* r = self->response;
    if (name == "content-type") {
      r->content_type = value;
    } else if (name == "etag") {
      r->etag = value;
    } else if (name == "last-modified") {
      r->last_modified = value;
    } else if (name == "location") {
      self->location = value;
    } else if (name == "retry-after") {
      char* end = nullptr;
      const double seconds = std::strtod(value.c_str(), &end);
      if (end != value.c_str() && *end == '\0') {
        r->retry_after_seconds = std::max(0.0, seconds);
      } else {
        const time_t when = curl_getdate(value.c_str(), nullptr);
        if (when > 0) r->retry_after_seconds = std::max<double>(0, when - time(nullptr));
      }
    }
    return bytes;
  }

  static curl_socket_t OnOpenSocket(void* user, curlsocktype purpose, curl_sockaddr* address) {
    auto* self = static_cast<Impl*>(user);
    const sockaddr* sa = &address->addr;
    char text[INET6_ADDRSTRLEN] = "?";
    if (sa->sa_family == AF_INET) {
      inet_ntop(AF_INET, &reinterpret_cast<const sockaddr_in*>(sa)->sin_addr, text, sizeof(text));
    } else if (sa->sa_family == AF_INET6) {
      inet_ntop(AF_INET6, &reinterpret_cast<const sockaddr_in6*>(sa)->sin6_addr, text,
                sizeof(text));
    }
    const bool exempt = std::find(self->options->allow_addresses.begin(),
                                  self->options->allow_addresses.end(),
                                  std::string(text)) != self->options->allow_addresses.end();
    if (!self->options->allow_private && !exempt && !IsPublicAddress(sa)) {
      self->blocked_address = text;
      return CURL_SOCKET_BAD;
    }
    return socket(address->family, address->socktype, address->protocol);
  }

  std::string location;
};

Fetcher::Fetcher(FetchOptions options) : options_(std::move(options)), impl_(new Impl) {
  InitCurl();
  impl_->options = &options_;
}

Fetcher::~Fetcher() {
  if (impl_->curl != nullptr) curl_easy_cleanup(impl_->curl);
}

FetchResponse Fetcher::FetchFile(const std::string& url) {
  namespace fs = std::filesystem;
  FetchResponse r;
  r.final_url = url;
  if (options_.allow_file_dir.empty()) {
    r.error = FetchError::kBadUrl;
    r.error_message = url + ": file URLs are not allowed (no --allow-file-dir)";
    return r;
  }
  CURLU* h = curl_url();
  std::string path;
  if (curl_url_set(h, CURLUPART_URL, url.c_str(), CURLU_NON_SUPPORT_SCHEME) == CURLUE_OK) {
    char* v = nullptr;
    if (curl_url_get(h, CURLUPART_PATH, &v, CURLU_URLDECODE) == CURLUE_OK && v) path = v;
    curl_free(v);
  }
  curl_url_cleanup(h);
  std::error_code ec;
  const fs::path dir = fs::weakly_canonical(options_.allow_file_dir, ec);
  const fs::path file = fs::weakly_canonical(path, ec);
  const std::string dir_s = dir.string() + (dir.string().back() == '/' ? "" : "/");
  if (path.empty() || ec || file.string().rfind(dir_s, 0) != 0) {
    r.error = FetchError::kBlocked;
    r.error_message = url + ": outside the allowed directory " + dir.string();
    return r;
  }
  std::ifstream in(file, std::ios::binary);
  if (!in) {
    r.error = FetchError::kIo;
    r.error_message = url + ": cannot open " + file.string() + ": " + std::strerror(errno);
    return r;
  }
  std::string body;
  char chunk[1 << 16];
  while (in && static_cast<int64_t>(body.size()) <= options_.max_body_bytes) {
    in.read(chunk, sizeof(chunk));
    body.append(chunk, static_cast<size_t>(in.gcount()));
  }
  const size_t used = body.size();
  if (static_cast<int64_t>(used) > options_.max_body_bytes) {
    r.error = FetchError::kTooLarge;
    r.error_message = url + ": larger than " + std::to_string(options_.max_body_bytes) + " bytes";
    return r;
  }
  r.status = 200;
  r.body = std::move(body);
  return r;
}

FetchResponse Fetcher::FetchOnce(const FetchRequest& request) {
  const UrlParts parts = ParseUrl(request.url);
  if (parts.ok && parts.scheme == "file") return FetchFile(request.url);
  FetchResponse r;
  r.final_url = request.url;
  if (!parts.ok || (parts.scheme != "http" && parts.scheme != "https") || parts.host.empty()) {
    r.error = FetchError::kBadUrl;
    r.error_message = request.url + ": not an http, https or file URL";
    return r;
  }
  if (request.before_hop && !request.before_hop(request.url)) {
    r.error = FetchError::kRobots;
    r.error_message = request.url + ": disallowed by robots.txt";
    return r;
  }
  if (impl_->curl == nullptr) impl_->curl = curl_easy_init();
  CURL* c = impl_->curl;
  if (c == nullptr) {
    r.error = FetchError::kIo;
    r.error_message = "libcurl: cannot create a handle";
    return r;
  }
  curl_easy_reset(c);
  impl_->response = &r;
  impl_->max_body = options_.max_body_bytes;
  impl_->too_large = false;
  impl_->blocked_address.clear();
  impl_->location.clear();
  curl_slist* headers = nullptr;
  if (!request.if_none_match.empty()) {
    headers = curl_slist_append(headers, ("If-None-Match: " + request.if_none_match).c_str());
  }
  if (!request.if_modified_since.empty()) {
    headers = curl_slist_append(headers,
                                ("If-Modified-Since: " + request.if_modified_since).c_str());
  }
  char error_buffer[CURL_ERROR_SIZE] = "";
  curl_easy_setopt(c, CURLOPT_URL, request.url.c_str());
  curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, "http,https");
  curl_easy_setopt(c, CURLOPT_FOLLOWLOCATION, 0L);
  curl_easy_setopt(c, CURLOPT_PROXY, "");
  curl_easy_setopt(c, CURLOPT_NOPROXY, "*");
  curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(c, CURLOPT_USERAGENT, options_.user_agent.c_str());
  curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT_MS,
                   static_cast<long>(options_.connect_timeout_seconds * 1000));
  curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, static_cast<long>(options_.timeout_seconds * 1000));
  curl_easy_setopt(c, CURLOPT_LOW_SPEED_LIMIT,
                   static_cast<long>(options_.low_speed_bytes_per_second));
  curl_easy_setopt(c, CURLOPT_LOW_SPEED_TIME, static_cast<long>(options_.low_speed_seconds));
  curl_easy_setopt(c, CURLOPT_MAXFILESIZE_LARGE,
                   static_cast<curl_off_t>(options_.max_body_bytes));
  curl_easy_setopt(c, CURLOPT_ACCEPT_ENCODING, "");  // gzip, deflate, br, zstd; limit applies after
  curl_easy_setopt(c, CURLOPT_HTTPHEADER, headers);
  curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, &Impl::OnBody);
  curl_easy_setopt(c, CURLOPT_WRITEDATA, impl_.get());
  curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, &Impl::OnHeader);
  curl_easy_setopt(c, CURLOPT_HEADERDATA, impl_.get());
  curl_easy_setopt(c, CURLOPT_OPENSOCKETFUNCTION, &Impl::OnOpenSocket);
  curl_easy_setopt(c, CURLOPT_OPENSOCKETDATA, impl_.get());
  curl_easy_setopt(c, CURLOPT_ERRORBUFFER, error_buffer);
  const CURLcode code = curl_easy_perform(c);
  curl_slist_free_all(headers);
  curl_easy_setopt(c, CURLOPT_ERRORBUFFER, nullptr);
  long status = 0;
  curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);
  r.status = static_cast<int>(status);
  impl_->response = nullptr;
  const std::string detail = error_buffer[0] ? error_buffer : curl_easy_strerror(code);
  if (code != CURLE_OK) {
    if (!impl_->blocked_address.empty()) {
      r.error = FetchError::kBlocked;
      r.error_message = request.url + ": refused to connect to non-public address " +
                        impl_->blocked_address + " (use --allow-private to allow)";
    } else if (impl_->too_large || code == CURLE_FILESIZE_EXCEEDED) {
      r.error = FetchError::kTooLarge;
      r.error_message = request.url + ": body larger than " +
                        std::to_string(options_.max_body_bytes) + " bytes";
    } else if (code == CURLE_COULDNT_RESOLVE_HOST) {
      r.error = FetchError::kDns;
      r.error_message = request.url + ": " + detail;
    } else if (code == CURLE_OPERATION_TIMEDOUT) {
      r.error = FetchError::kTimeout;
      r.error_message = request.url + ": " + detail;
    } else if (code == CURLE_PARTIAL_FILE) {
      r.error = FetchError::kTruncated;
      r.error_message = request.url + ": truncated body: " + detail;
    } else if (code == CURLE_COULDNT_CONNECT || code == CURLE_SSL_CONNECT_ERROR ||
               code == CURLE_PEER_FAILED_VERIFICATION || code == CURLE_SEND_ERROR ||
               code == CURLE_RECV_ERROR || code == CURLE_GOT_NOTHING) {
      r.error = FetchError::kConnect;
      r.error_message = request.url + ": " + detail;
    } else {
      r.error = FetchError::kIo;
      r.error_message = request.url + ": " + detail;
    }
    r.body.clear();
    return r;
  }
  if (r.status >= 400) {
    r.error = FetchError::kHttpStatus;
    r.error_message = request.url + ": http " + std::to_string(r.status);
  }
  return r;
}

FetchResponse Fetcher::Fetch(const FetchRequest& request) {
  FetchRequest hop = request;
  int redirects = 0;
  while (true) {
    FetchResponse r = FetchOnce(hop);
    r.redirects = redirects;
    const bool redirect = r.ok() && (r.status == 301 || r.status == 302 || r.status == 303 ||
                                     r.status == 307 || r.status == 308);
    if (!redirect) return r;
    const std::string location = impl_->location;
    if (location.empty()) return r;  // a 3xx without Location: hand it back as is
    if (redirects >= options_.max_redirects) {
      r.error = FetchError::kTooManyRedirects;
      r.error_message = request.url + ": more than " + std::to_string(options_.max_redirects) +
                        " redirects";
      return r;
    }
    const std::string next = ResolveUrl(hop.url, location);
    const std::string scheme = UrlScheme(next);
    if (next.empty() || (scheme != "http" && scheme != "https")) {
      r.error = FetchError::kBlocked;
      r.error_message = hop.url + ": redirect to a disallowed URL: " + location;
      return r;
    }
    ++redirects;
    hop.url = next;
    hop.if_none_match.clear();  // validators belong to the first URL
    hop.if_modified_since.clear();
  }
}

}  // namespace streamvec::crawler
