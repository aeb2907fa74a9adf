// The snapshots a request may pin with ?snapshot=N: the served one, the older ones the served
// snapshot keeps for word history (in memory already), and published ones loaded on demand into
// a small LRU cache. Private to api/.
#ifndef STREAMVEC_API_SRC_RETAINED_H_
#define STREAMVEC_API_SRC_RETAINED_H_

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <future>
#include <list>
#include <map>
#include <memory>
#include <mutex>
#include <vector>

#include "served.h"
#include "streamvec/api/serving_snapshot.h"
#include "streamvec/base/status.h"

namespace streamvec::api {

// Thread safety: all methods may be called from any thread at once (a mutex guards the cache;
// loads run outside it).
class RetainedSnapshots {
 public:
  // `capacity`: snapshots loaded from `source` kept at once (ServeOptions::pinned_snapshots; 0:
  // none are loaded, pins reach the served snapshot and its history only). Each costs what a
  // served snapshot does (about 2 x rows x dim floats) without an index.
  RetainedSnapshots(std::shared_ptr<SnapshotSource> source, size_t capacity);

  // What answers a request pinned to `version` while `current` (not null) is served: `current`
  // itself; a snapshot of its history (exact search); or one loaded from the source and cached
  // (exact search; evicting the least recently used one beyond the capacity). The first request
  // for a snapshot not in memory waits for its load (reading and preparing it); requests
  // for it meanwhile wait for the same load. Errors: NotFound naming the version and the
  // retained ones (newer than the served one, retired, never published, or capacity 0 and not in
  // memory); Corruption / IoError from the source (not cached: the next request tries again).
  StatusOr<std::shared_ptr<const Served>> Find(uint64_t version,
                                               const std::shared_ptr<const Served>& current);

  // Versions Find answers now without an error other than a load's, ascending: the served one,
  // its history, the cached ones and (capacity > 0) the source's published ones up to the served
  // one. Lists the source (reads its metadata files).
  std::vector<uint64_t> Versions(const Served& current);

  size_t cached() const;                            // snapshots loaded from the source and held now
  uint64_t loads() const { return loads_.load(); }  // loads from the source since start

 private:
  using Result = StatusOr<std::shared_ptr<const Served>>;
  struct Entry {
    std::shared_future<Result> loaded;
    std::list<uint64_t>::iterator lru;  // position in lru_
    uint64_t id = 0;                    // which load filled it
  };

  const std::shared_ptr<SnapshotSource> source_;
  const size_t capacity_;
  mutable std::mutex mu_;
  std::map<uint64_t, Entry> cache_;  // GUARDED_BY(mu_)
  std::list<uint64_t> lru_;          // GUARDED_BY(mu_): most recently used first
  uint64_t next_id_ = 0;             // GUARDED_BY(mu_)
  std::atomic<uint64_t> loads_{0};
};

}  // namespace streamvec::api

#endif  // STREAMVEC_API_SRC_RETAINED_H_
