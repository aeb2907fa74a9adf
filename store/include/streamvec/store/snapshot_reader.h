// Read side of a state directory: published snapshots, opened without ever blocking the writer.
//
// Each snapshot a StateStore commits is published as a RocksDB checkpoint (hard links of its
// table files) under the state directory, with its metadata. A reader (`streamvec serve`, another
// process or thread) opens the newest published checkpoint read-only; the live database and its
// LOCK stay the writer's. Only the newest StateStoreOptions::retain checkpoints are kept: a
// reader loads what it needs soon after opening (api/ copies the embedding into memory) and
// reopens the newest one to follow the writer.
//
// Layout: <state_dir>/checkpoints/<version as 20 zero-padded digits>/ holds metadata.json (the
// SnapshotInfo::metadata_json, readable without RocksDB) and db/ (the RocksDB checkpoint). It
// is built as "<name>.partial/" and renamed into place, so a listed checkpoint is complete. A
// reader opens every table file up front (and writes nothing into the checkpoint), so one the
// writer retires after OpenNewest stays readable for as long as the reader lives.
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
  // Published snapshots of `state_dir`, oldest first (empty if none yet). A checkpoint whose
  // metadata.json is not a JSON object with version and created_at, or names another version
  // (a damaged file), is left out, and described in `damaged` ("<path>: <reason>") when given.
  // Errors: NotFound when state_dir is not a streamvec state directory; IoError from listing.
  static StatusOr<std::vector<SnapshotInfo>> List(const std::string& state_dir,
                                                  std::vector<std::string>* damaged = nullptr);

  // Opens the newest published snapshot that opens: of those List gives (damaged metadata is
  // skipped), a checkpoint whose database does not open (a missing or truncated table file, a
  // damaged RocksDB MANIFEST, another version or format inside) is skipped too, and the next
  // newest tried; each skipped one is described in `skipped` ("<path>: <reason>") when given. A
  // checkpoint the writer retires while it is being opened is passed over the same way (listing
  // again up to three times), but not described. Errors: NotFound if none is published yet (or no
  // state directory), Corruption / IoError from RocksDB with the checkpoint's path when no listed
  // checkpoint opens.
  static StatusOr<std::unique_ptr<SnapshotReader>> OpenNewest(
      const std::string& state_dir, std::vector<std::string>* skipped = nullptr);

  // Opens published snapshot `version` (an older one a reader wants again). Errors: NotFound
  // naming the version when it is not published (never written, retired by the writer's
  // retention, damaged metadata, or retired while it is being opened); otherwise as OpenNewest.
  static StatusOr<std::unique_ptr<SnapshotReader>> Open(const std::string& state_dir,
                                                        uint64_t version);

  ~SnapshotReader();
  const SnapshotInfo& info() const;
  uint64_t version() const { return info().version; }

  // An entry of this snapshot (the key given to the writer's sink). NotFound if absent.
  StatusOr<std::string> Get(const std::string& key) const;

 private:
  struct Impl;
  explicit SnapshotReader(std::unique_ptr<Impl> impl);
  static StatusOr<std::unique_ptr<SnapshotReader>> OpenListed(const std::string& state_dir,
                                                              const SnapshotInfo& info,
                                                              bool* retired);
  std::unique_ptr<Impl> impl_;
};

}  // namespace streamvec

#endif  // STREAMVEC_STORE_SNAPSHOT_READER_H_
