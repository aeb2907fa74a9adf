// Helpers shared by the crawler tests: fixture paths and file reading.
#ifndef STREAMVEC_TESTS_CRAWLER_CRAWLER_TEST_UTIL_H_
#define STREAMVEC_TESTS_CRAWLER_CRAWLER_TEST_UTIL_H_

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

namespace streamvec::crawler::testing {

// tests/data/feeds (the copied fixtures).
inline std::filesystem::path FeedsDir() {
  return std::filesystem::path(STREAMVEC_TEST_DATA) / "feeds";
}
// tests/crawler/data (expectations derived once, see feed_expectations.tsv).
inline std::filesystem::path CrawlerDataDir() {
  return std::filesystem::path(STREAMVEC_TEST_DATA) / ".." / "crawler" / "data";
}
// The shared data folder's feeds (beside the checkout), when present.
inline std::filesystem::path SharedFeedsDir() {
  return std::filesystem::path(STREAMVEC_TEST_DATA) / ".." / ".." / ".." / "shared" / "data" /
         "feeds";
}

inline std::string ReadFile(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

}  // namespace streamvec::crawler::testing

#endif  // STREAMVEC_TESTS_CRAWLER_CRAWLER_TEST_UTIL_H_
