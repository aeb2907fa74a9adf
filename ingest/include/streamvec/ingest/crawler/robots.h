// robots.txt (RFC 9309): which paths a crawler may fetch.
//
// The group for the most specific matching user-agent token is used (our product token,
// "streamvec-crawler", matched case-insensitively as a prefix of the group's token or vice versa),
// else the "*" group, else everything is allowed. Within the group the longest matching Allow or
// Disallow rule wins, Allow on a tie; '*' and a trailing '$' are honoured. Crawl-delay (seconds,
// non-standard) is reported. Paths are compared after percent-decoding of unreserved characters.
// Thread safety: immutable after Parse; safe to share.
#ifndef STREAMVEC_INGEST_CRAWLER_ROBOTS_H_
#define STREAMVEC_INGEST_CRAWLER_ROBOTS_H_

#include <string>
#include <string_view>
#include <vector>

namespace streamvec::crawler {

class RobotsRules {
 public:
  // Everything allowed (no robots.txt, or it was 4xx).
  RobotsRules() = default;
  // Everything disallowed (robots.txt unreachable or 5xx, RFC 9309 section 2.3.1.4).
  static RobotsRules DisallowAll();
  // Parses `text` (at most the first 500 KiB are read) for `product_token`
  // ("streamvec-crawler").
  static RobotsRules Parse(std::string_view text, std::string_view product_token);

  // `path_and_query` is the URL's path plus "?query" ("/a/b?x=1"); "" means "/".
  bool Allowed(std::string_view path_and_query) const;
  // Crawl-delay of the chosen group in seconds, or 0 when none.
  double crawl_delay_seconds() const { return crawl_delay_seconds_; }

 private:
  struct Rule {
    bool allow;
    std::string pattern;
  };
  std::vector<Rule> rules_;
  double crawl_delay_seconds_ = 0;
  bool disallow_all_ = false;
};

}  // namespace streamvec::crawler

#endif  // STREAMVEC_INGEST_CRAWLER_ROBOTS_H_
