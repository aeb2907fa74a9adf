// Private to store/: the checks behind VerifyState and the rebuild of a damaged live database
// from a published checkpoint, shared by RepairState and StateStore::Open (restore_damaged).
#ifndef STREAMVEC_STORE_SRC_STATE_RESTORE_H_
#define STREAMVEC_STORE_SRC_STATE_RESTORE_H_

#include <cstdint>
#include <memory>
#include <string>

#include "streamvec/base/status.h"
#include "streamvec/store/state_store.h"

namespace streamvec::internal {

// Holds the LOCK file of a state directory (the fcntl lock RocksDB's writer takes) while it
// lives, so no writer opens the directory meanwhile.
class StateLock {
 public:
  // FailedPrecondition "state directory <dir> is in use by another process" when a writer (of
  // this process or another) holds it; IoError when the lock file cannot be created.
  static StatusOr<std::unique_ptr<StateLock>> Acquire(const std::string& dir);
  ~StateLock();
  StateLock(const StateLock&) = delete;
  StateLock& operator=(const StateLock&) = delete;

 private:
  StateLock() = default;
  void* lock_ = nullptr;  // rocksdb::FileLock
};

// Reads all of the RocksDB database in `db_dir` (see state_check.h: open, block checksums,
// format mark, meta/current, manifest, every entry's size and hash). `expect_version` 0: any;
// otherwise meta/current must equal it. *version: meta/current (0 when none); *metadata: the
// stored meta/snapshot (empty when absent). Corruption / IoError naming db_dir.
Status CheckDatabase(const std::string& db_dir, uint64_t expect_version, uint64_t* version,
                     std::string* metadata);

// CheckDatabase of checkpoint `ckpt_dir` (published snapshot `version`), with its metadata.json.
Status CheckCheckpoint(const std::string& ckpt_dir, uint64_t version);

// Rebuilds the live database of `dir` from its newest intact checkpoint: the live database's
// files (every plain file in `dir` but LOCK) and the newer, damaged checkpoints go under
// dir/damaged/<time>/; the checkpoint's table files are hard-linked into `dir`, the rest copied,
// CURRENT last. The caller holds the StateLock. `damage`: why the live database is refused.
// Corruption when no checkpoint is intact (nothing changed); IoError from the file system.
StatusOr<StateRestore> RestoreFromNewestIntact(const std::string& dir, const std::string& damage);

}  // namespace streamvec::internal

#endif  // STREAMVEC_STORE_SRC_STATE_RESTORE_H_
