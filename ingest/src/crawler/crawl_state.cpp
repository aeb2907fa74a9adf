#include "crawl_state.h"

#include <rocksdb/db.h>
#include <rocksdb/options.h>
#include <rocksdb/write_batch.h>

namespace streamvec::crawler::internal {

StatusOr<std::unique_ptr<CrawlState>> CrawlState::Open(const std::string& dir) {
  std::unique_ptr<CrawlState> state(new CrawlState());
  if (dir.empty()) return state;
  rocksdb::Options options;
  options.create_if_missing = true;
  options.max_open_files = 64;
  options.keep_log_file_num = 2;
  rocksdb::DB* db = nullptr;
  const rocksdb::Status s = rocksdb::DB::Open(options, dir, &db);
  if (!s.ok()) return Status::IoError("crawler state " + dir + ": " + s.ToString());
  state->db_.reset(db);
  return state;
}

CrawlState::~CrawlState() = default;

bool CrawlState::Contains(const std::string& key) const {
  if (!db_) return memory_.count(key) > 0;
  std::string value;
  return db_->Get(rocksdb::ReadOptions(), key, &value).ok();
}

std::string CrawlState::Get(const std::string& key) const {
  if (!db_) {
    auto it = memory_.find(key);
    return it == memory_.end() ? "" : it->second;
  }
  std::string value;
  return db_->Get(rocksdb::ReadOptions(), key, &value).ok() ? value : "";
}

Status CrawlState::Put(const std::vector<std::pair<std::string, std::string>>& pairs) {
  if (pairs.empty()) return Status::Ok();
  if (!db_) {
    for (const auto& [k, v] : pairs) memory_[k] = v;
    return Status::Ok();
  }
  rocksdb::WriteBatch batch;
  for (const auto& [k, v] : pairs) batch.Put(k, v);
  rocksdb::WriteOptions wo;
  wo.sync = true;
  const rocksdb::Status s = db_->Write(wo, &batch);
  if (!s.ok()) return Status::IoError("crawler state write: " + s.ToString());
  return Status::Ok();
}

}  // namespace streamvec::crawler::internal
