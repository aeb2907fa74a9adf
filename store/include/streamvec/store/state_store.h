// Durable, versioned snapshots of a learner's state in a RocksDB directory.
//
// A snapshot is a set of (key, bytes) entries written by a caller-supplied fill function. Each
// version has a manifest saying where each of its entries' bytes are; a single synced
// WriteBatch commits a version (its "meta/current", metadata and manifest). Until that batch
// commits, readers (and a process restarted after a crash, a full disk or a failed fill) see the
// previous snapshot unchanged; a half-written version is removed by the next write.
//
// Incremental: an entry whose bytes equal those of the same key in the current version (same
// size and XXH3-64 hash) is not written again; the new version refers to the bytes an earlier
// version wrote. Callers keep entries small (tens of KiB: a few dozen rows) so that a slow
// stream, which changes few rows, writes few bytes. A snapshot may also carry the current
// version's entries it does not pass (SnapshotWriteOptions::keep_unwritten: a serving
// publication over the last recovery checkpoint). A writer's bytes are dropped once no entry of
// the current version refers to them; a writer whose bytes are mostly superseded (what it wrote
// over kRewriteRatio times what is still live: dead entries share its table files with live
// ones) is evacuated by the next snapshot, which writes its live entries again, so the bytes on
// disk behind a version stay within kRewriteRatio times its distinct bytes.
//
// Entries of 8 KiB or more (rows, noise table: nearly all the bytes) go to table files written
// directly (RocksDB's SstFileWriter, one per key family such as "input/", keys ascending) and
// ingested in one step, each into a key range of its own, so compaction never rewrites them;
// smaller ones go through the memtables in write batches of about 1 MiB, without the write-ahead
// log (the flush before the commit makes them durable). Either way a snapshot needs no second
// copy of the model in memory.
//
// A directory is accepted only if it is empty (a new store is created), or a RocksDB database
// whose "meta/format" entry is kStateFormat (or the first layout, "streamvec-state v1", read as
// it is and upgraded by the next snapshot). Anything else (a directory of other files, another
// program's RocksDB, a damaged database) is an error and is never written to. Published
// checkpoints live in its "checkpoints/" subdirectory (see snapshot_reader.h). One writer at a
// time: RocksDB's LOCK file refuses a second one, in this process or another.
//
// Thread safety: a StateStore is used from one thread at a time. RocksDB types stay out of this
// header.
#ifndef STREAMVEC_STORE_STATE_STORE_H_
#define STREAMVEC_STORE_STATE_STORE_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "streamvec/base/status.h"

namespace streamvec {

// Value of the "meta/format" entry of every streamvec state directory.
inline constexpr char kStateFormat[] = "streamvec-state v2";

// A writer is evacuated when it wrote more than this many times the bytes of it still live.
inline constexpr double kRewriteRatio = 1.5;

// Receives one entry of a snapshot.
using SnapshotSink = std::function<Status(const std::string& key, std::string_view value)>;

struct StateStoreOptions {
  // Published checkpoints kept for readers (the newest `retain`); >= 1. See SnapshotReader.
  int retain = 3;
  // kCreateOrOpen: when the live database is damaged (RocksDB refuses it as corrupt: a truncated
  // or missing table file, a damaged CURRENT or MANIFEST; or its CURRENT file is missing while
  // checkpoints exist), rebuild it from the newest intact published checkpoint, as RepairState
  // (state_check.h) does, and open that; restore() says what happened. false: such a directory
  // is refused (Corruption) and left as it is.
  bool restore_damaged = false;
  // For tests: once this many bytes have been appended to files of the store (since Open), every
  // further append fails as on a full disk (ENOSPC), inside RocksDB. 0: no limit.
  uint64_t fail_after_bytes = 0;
};

struct SnapshotWriteOptions {
  // Entries of the current version that the fill does not pass are kept, unchanged, in the new
  // one (no bytes written). false: the new version holds exactly what the fill passes.
  bool keep_unwritten = false;
  // Write every entry's bytes even where the current version holds the same.
  bool full_rewrite = false;
};

// What the last WriteSnapshot did, in bytes of entry values.
struct SnapshotWriteStats {
  uint64_t entry_bytes = 0;    // of the entries the new version holds
  uint64_t written_bytes = 0;  // written anew by it
  uint64_t passed_bytes = 0;   // passed by the fill (written or found unchanged)
  uint64_t disk_bytes = 0;     // on disk behind the new version (live and superseded entries)
  bool full_rewrite = false;   // every entry was written (asked, or a first-layout store)
};

// What StateStore::Open did when it found the live database damaged
// (StateStoreOptions::restore_damaged).
struct StateRestore {
  bool restored = false;             // the live database was rebuilt from a checkpoint
  std::string damage;                // why the live database was refused
  uint64_t version = 0;              // the snapshot it was rebuilt from (the newest intact)
  std::vector<std::string> skipped;  // newer checkpoints passed over: "snapshot <v>: <why>"
  std::string moved_to;              // where the damaged files and checkpoints were moved
  // One line for a log: what was damaged, the snapshot resumed from, what was skipped and why.
  std::string Describe() const;
};

class StateStore {
 public:
  enum class Mode {
    kCreateOrOpen,  // create the directory (or use an empty one), or open an existing store
    kReadOnly,      // open an existing store for reading; NotFound if there is none
  };

  // Errors: NotFound (kReadOnly and no store at dir), FailedPrecondition naming the directory
  // when it holds something that is not a streamvec state, FailedPrecondition "state directory
  // <dir> is in use by another process" when another process or another StateStore of this
  // process has it open for writing (RocksDB's LOCK; kReadOnly never conflicts), Corruption /
  // IoError from RocksDB with its message. A kCreateOrOpen open whose current snapshot has no
  // published checkpoint (a crash or a failed publish) publishes it (see last_publish_error()).
  // With StateStoreOptions::restore_damaged, a damaged live database is rebuilt from the newest
  // intact checkpoint (restore()); when none is intact, the Corruption says so.
  static StatusOr<std::unique_ptr<StateStore>> Open(const std::string& dir, Mode mode,
                                                    const StateStoreOptions& options = {});
  ~StateStore();

  // 0 when no snapshot was committed yet, else the version of the current one.
  uint64_t version() const;

  // Writes a new snapshot: `fill` passes every entry to the sink it is given. On success the
  // new snapshot replaces the previous one atomically (synced to disk). If fill or a write fails,
  // the previous snapshot stays current and intact, and the error is returned.
  // `metadata_json` (a JSON object: offsets, words trained, vocabulary size, model settings) is
  // stored with the snapshot in the same commit; the store sets "version" (the new version) and
  // "created_at" (unix seconds, a double) in it, replacing keys of those names. Anything but a
  // JSON object is InvalidArgument, and nothing is written.
  // After the commit the snapshot is published as a RocksDB checkpoint for SnapshotReader (see
  // snapshot_reader.h) and checkpoints beyond StateStoreOptions::retain are removed, oldest
  // first. Publishing comes after the commit point: its failure (disk full, permissions) does
  // not undo the snapshot, WriteSnapshot still returns OK and the failure is reported by
  // last_publish_error(); readers keep seeing the previous published snapshot.
  // `options`: keep_unwritten and full_rewrite (see SnapshotWriteOptions). A key passed twice
  // by one fill is InvalidArgument. Afterwards the process's freed memory goes back to the kernel
  // (glibc's malloc_trim), unless the process keeps it for reuse (FreedMemoryKeptForReuse,
  // base/heap.h).
  Status WriteSnapshot(const std::function<Status(const SnapshotSink&)>& fill,
                       const std::string& metadata_json = "{}",
                       const SnapshotWriteOptions& options = {});

  // Of the last successful WriteSnapshot (zeros before the first).
  SnapshotWriteStats last_write_stats() const;

  // The metadata of the current snapshot (NotFound if none), as SnapshotReader reports it: the
  // caller's object with "version" and "created_at". A snapshot written before metadata existed
  // reports {"version": v, "created_at": 0}.
  StatusOr<std::string> CurrentMetadata() const;

  // The outcome of the most recent publish (after a commit, or at Open): OK if it succeeded or
  // none was attempted, else the error (IoError naming the checkpoint directory). The next
  // successful publish clears it.
  Status last_publish_error() const;

  // What Open restored (restored == false when the live database opened as it was).
  const StateRestore& restore() const;

  // An entry of the current snapshot. NotFound if there is no snapshot or no such key.
  StatusOr<std::string> Get(const std::string& key) const;

 private:
  struct Impl;
  explicit StateStore(std::unique_ptr<Impl> impl);
  // Open without restore_damaged's rebuild.
  static StatusOr<std::unique_ptr<StateStore>> OpenOnce(const std::string& dir, Mode mode,
                                                        const StateStoreOptions& options);
  std::unique_ptr<Impl> impl_;
};

}  // namespace streamvec

#endif  // STREAMVEC_STORE_STATE_STORE_H_
