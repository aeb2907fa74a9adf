// Read side of a state directory: published snapshots, opened without ever blocking the writer.
//
// Each snapshot a StateStore commits is published as a RocksDB checkpoint (hard links of its
// table files) under the state directory, with its metadata. A reader (`streamvec serve`, another
// process or thread) opens the newest published checkpoint read-only; the live database and its
// LOCK stay the writer's. Only the newest StateStoreOptions::retain checkpoints are kept: a
// reader loads what it needs soon after opening (api/ copies the embedding into memory) and
// reopens the newest one to follow the writer.
//
// Thread safety: a SnapshotReader may be used from several threads for Get (RocksDB reads are
// thread-safe); List and OpenNewest are safe to call while a writer commits.
#ifndef STREAMVEC_STORE_SNAPSHOT_READER_H_
#define STREAMVEC_STORE_SNAPSHOT_READER_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "streamvec/base/status.h"

namespace streamvec {

// One published snapshot.
struct SnapshotInfo {
  uint64_t version = 0;       // StateStore version, increasing by one per snapshot
  double created_at = 0;      // unix time in seconds when it was committed
  std::string metadata_json;  // the JSON object given to WriteSnapshot, with "version" and
                              // "created_at" added
};

class SnapshotReader {
 public:
  // Published snapshots of `state_dir`, oldest first (empty if none yet). Errors: NotFound when
  // state_dir is not a streamvec state directory.
  static StatusOr<std::vector<SnapshotInfo>> List(const std::string& state_dir);

  // Opens the newest published snapshot. Errors: NotFound if none is published yet (or no state
  // directory), Corruption / IoError from RocksDB with the checkpoint's path.
  static StatusOr<std::unique_ptr<SnapshotReader>> OpenNewest(const std::string& state_dir);

  ~SnapshotReader();
  const SnapshotInfo& info() const;
  uint64_t version() const { return info().version; }

  // An entry of this snapshot (the key given to the writer's sink). NotFound if absent.
  StatusOr<std::string> Get(const std::string& key) const;

 private:
  struct Impl;
  explicit SnapshotReader(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace streamvec

#endif  // STREAMVEC_STORE_SNAPSHOT_READER_H_
