// Private to store/: how the bytes of one new version of a StateStore reach RocksDB.
//
// A VersionWriter takes a version's entries one by one (Put) and decides, for each, whether its
// bytes are already on disk (the same size and XXH3-128 hash as an entry of the current version,
// under any key, or as one this version wrote already): then the entry refers to them. Otherwise
// the bytes are written under the writer's own prefix: entries of kDirectBytes or more into table
// files built directly (SstFileWriter, one per key family, keys ascending) under data/<version>/,
// a key range no other file holds, so RocksDB ingests them at the bottom level and never compacts
// them; smaller ones (and a large one out of order) through the memtables under
// small/<version>/, in write batches of about 1 MiB without the write-ahead log. Finish ingests
// the table files and flushes the memtables, making every byte durable before the caller's
// commit. Neither the manifest nor anything else becomes visible here: the caller commits.
//
// Thread safety: one thread at a time.
#ifndef STREAMVEC_STORE_SRC_VERSION_WRITER_H_
#define STREAMVEC_STORE_SRC_VERSION_WRITER_H_

#include <rocksdb/db.h>
#include <rocksdb/options.h>
#include <rocksdb/sst_file_writer.h>
#include <rocksdb/write_batch.h>

#include <cstdint>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "snapshot_layout.h"
#include "streamvec/base/status.h"

namespace streamvec::internal {

class VersionWriter {
 public:
  // `version`: the new version (its writer id). `current`: the current version's manifest, whose
  // bytes may be referred to, except those of writers in `evacuate` (written again); none when
  // `reuse` is false (a full rewrite). `ingest_dir`: where table files are built (created on
  // demand; the caller removes it). `options`: the database's, for the table files.
  VersionWriter(rocksdb::DB* db, const rocksdb::Options& options, std::string dir,
                std::string ingest_dir, uint64_t version, const Manifest& current,
                const std::set<uint64_t>& evacuate, bool reuse);

  // One entry. InvalidArgument for a key passed twice; IoError from RocksDB or the file system.
  Status Put(const std::string& key, std::string_view value);
  // Refers to an entry of the current version as it is (no bytes read or written).
  void Carry(const std::string& key, const EntryRef& ref) { manifest_.entries.emplace(key, ref); }
  bool Has(const std::string& key) const { return manifest_.entries.count(key) > 0; }

  // Finishes and ingests the table files, flushes the memtables. IoError naming the directory.
  Status Finish();

  // The new version's manifest (its entries, and the bytes each writer they refer to wrote,
  // from `current` for older writers): complete after Finish.
  Manifest TakeManifest();
  uint64_t written_bytes() const { return written_; }  // entry bytes written anew
  uint64_t passed_bytes() const { return passed_; }    // entry bytes passed to Put

 private:
  struct ContentKey {
    uint64_t size, low, high;
    bool operator==(const ContentKey& o) const {
      return size == o.size && low == o.low && high == o.high;
    }
  };
  struct ContentHash {
    size_t operator()(const ContentKey& k) const { return static_cast<size_t>(k.low ^ k.size); }
  };
  struct DirectFile {
    std::unique_ptr<rocksdb::SstFileWriter> writer;
    std::string path, last_key;
  };
  Status FlushBatch();
  // `ref` with its stored key filled in (the key its bytes were written under).
  static EntryRef Stored(const std::string& key, const EntryRef& ref);

  rocksdb::DB* db_;
  const rocksdb::Options& options_;
  const std::string dir_, ingest_dir_;
  const uint64_t version_;
  const Manifest& current_;
  const std::string data_prefix_, small_prefix_;
  Manifest manifest_;
  std::unordered_map<ContentKey, EntryRef, ContentHash> by_content_;
  std::map<std::string, DirectFile> direct_;  // by key family
  std::vector<std::string> ingest_paths_;
  rocksdb::WriteBatch batch_;
  uint64_t written_ = 0, passed_ = 0;
};

}  // namespace streamvec::internal

#endif  // STREAMVEC_STORE_SRC_VERSION_WRITER_H_
