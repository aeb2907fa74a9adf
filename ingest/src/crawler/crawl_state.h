// The crawler's persistent state (private): dedup keys and conditional-GET validators in RocksDB,
// or in memory when no directory is given. Thread safety: one thread at a time.
#ifndef STREAMVEC_INGEST_SRC_CRAWLER_CRAWL_STATE_H_
#define STREAMVEC_INGEST_SRC_CRAWLER_CRAWL_STATE_H_

#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "streamvec/base/status.h"

namespace rocksdb {
class DB;
}

namespace streamvec::crawler::internal {

class CrawlState {
 public:
  // Opens (creating) a RocksDB at `dir`; "" keeps everything in memory.
  // Errors: IoError naming the directory (e.g. locked by another crawler).
  static StatusOr<std::unique_ptr<CrawlState>> Open(const std::string& dir);
  ~CrawlState();

  bool Contains(const std::string& key) const;
  std::string Get(const std::string& key) const;  // "" when absent
  // Writes all pairs in one synced batch.
  Status Put(const std::vector<std::pair<std::string, std::string>>& pairs);

 private:
  CrawlState() = default;
  std::unique_ptr<rocksdb::DB> db_;
  std::map<std::string, std::string> memory_;
};

}  // namespace streamvec::crawler::internal

#endif  // STREAMVEC_INGEST_SRC_CRAWLER_CRAWL_STATE_H_
