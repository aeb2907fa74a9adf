// RetainedSnapshots: ?snapshot=N resolved against the served chain and an LRU of loaded ones.
#include "retained.h"

#include <algorithm>
#include <exception>
#include <string>
#include <utility>

namespace streamvec::api {
namespace {

// A view of an older snapshot: no index (the exact scan answers) and no history.
std::shared_ptr<const Served> View(std::shared_ptr<const ServingSnapshot> snapshot,
                                   std::shared_ptr<const FirstSeen> first_seen,
                                   uint64_t first_loaded) {
  auto view = std::make_shared<Served>();
  view->snapshot = std::move(snapshot);
  view->first_seen = std::move(first_seen);
  view->first_loaded = first_loaded;
  return view;
}

std::string Join(const std::vector<uint64_t>& versions) {
  std::string out;
  for (uint64_t v : versions) out += (out.empty() ? "" : ", ") + std::to_string(v);
  return out.empty() ? "none" : out;
}

}  // namespace

RetainedSnapshots::RetainedSnapshots(std::shared_ptr<SnapshotSource> source, size_t capacity)
    : source_(std::move(source)), capacity_(capacity) {}

size_t RetainedSnapshots::cached() const {
  std::lock_guard<std::mutex> lock(mu_);
  return cache_.size();
}

std::vector<uint64_t> RetainedSnapshots::Versions(const Served& current) {
  const uint64_t served = current.snapshot->version();
  std::vector<uint64_t> out = {served};
  for (const HistoryEntry& h : current.history) out.push_back(h.snapshot->version());
  if (capacity_ > 0) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      for (const auto& [version, entry] : cache_) out.push_back(version);
    }
    if (StatusOr<std::vector<SnapshotInfo>> list = source_->List(); list.ok()) {
      for (const SnapshotInfo& info : *list) {
        if (info.version <= served) out.push_back(info.version);
      }
    }
  }
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

StatusOr<std::shared_ptr<const Served>> RetainedSnapshots::Find(
    uint64_t version, const std::shared_ptr<const Served>& current) {
  const uint64_t served = current->snapshot->version();
  if (version == served) return current;
  for (const HistoryEntry& h : current->history) {
    if (h.snapshot->version() == version) {
      return View(h.snapshot, h.first_seen, current->first_loaded);
    }
  }
  const auto not_retained = [&](const std::string& why) {
    return Status::NotFound("snapshot " + std::to_string(version) + " " + why +
                            "; retained snapshots: " + Join(Versions(*current)));
  };
  if (version > served) {
    return not_retained("is not served (the served snapshot is " + std::to_string(served) + ")");
  }
  if (capacity_ == 0) return not_retained("is not retained in memory");

  std::shared_future<Result> loaded;
  std::promise<Result> promise;
  bool load = false;
  uint64_t id = 0;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = cache_.find(version);
    if (it != cache_.end()) {
      lru_.splice(lru_.begin(), lru_, it->second.lru);
      loaded = it->second.loaded;
    } else {
      load = true;
      id = ++next_id_;
      loaded = promise.get_future().share();
      lru_.push_front(version);
      cache_[version] = Entry{loaded, lru_.begin(), id};
      while (cache_.size() > capacity_) {  // requests holding an evicted one keep it alive
        cache_.erase(lru_.back());
        lru_.pop_back();
      }
    }
  }
  if (load) {
    Result result = Status::Internal("not loaded");
    try {
      StatusOr<std::shared_ptr<const ServingSnapshot>> snapshot = source_->Load(version);
      if (snapshot.ok()) {
        ++loads_;
        result = View(std::move(*snapshot), nullptr, 0);
      } else if (snapshot.status().code() == StatusCode::kNotFound) {
        result = not_retained("is not retained (" + snapshot.status().message() + ")");
      } else {
        result = snapshot.status();
      }
    } catch (const std::exception& e) {  // e.g. bad_alloc
      result = Status::Internal("loading snapshot " + std::to_string(version) + ": " + e.what());
    }
    if (!result.ok()) {  // not cached: a retry loads again
      std::lock_guard<std::mutex> lock(mu_);
      auto it = cache_.find(version);
      if (it != cache_.end() && it->second.id == id) {
        lru_.erase(it->second.lru);
        cache_.erase(it);
      }
    }
    promise.set_value(std::move(result));
  }
  return loaded.get();
}

}  // namespace streamvec::api
