#include "streamvec/store/state_store.h"

#include <rocksdb/db.h>
#include <rocksdb/env.h>
#include <rocksdb/file_system.h>
#include <rocksdb/convenience.h>
#include <rocksdb/options.h>
#include <rocksdb/utilities/checkpoint.h>
#include <rocksdb/write_batch.h>

#if defined(__GLIBC__)
#include <malloc.h>
#endif

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <system_error>
#include <vector>

#include "snapshot_layout.h"
#include "state_restore.h"
#include "streamvec/base/heap.h"
#include "version_writer.h"

namespace streamvec {
namespace {

using internal::CheckpointName;
using internal::FromRocks;
using internal::kCurrentKey;
using internal::kFormatKey;
using internal::kMetadataKey;
// Where a snapshot's table files are built (VersionWriter), inside the state directory (removed
// at open and after each snapshot).
constexpr char kIngestDir[] = "ingest";

std::string Prefix(uint64_t version) { return internal::SnapshotPrefix(version); }

// RocksDB refuses a second writer with an IOError on <dir>/LOCK: "lock hold by current process"
// (another DB object in this process) or "While lock file" (fcntl: another process).
bool IsLockConflict(const rocksdb::Status& s) {
  if (!s.IsIOError()) return false;
  const std::string m = s.ToString();
  return m.find("LOCK") != std::string::npos &&
         (m.find("lock hold by current process") != std::string::npos ||
          m.find("While lock file") != std::string::npos);
}

Status FsError(const std::string& what, const std::string& path, const std::error_code& ec) {
  return Status::IoError(what + " " + path + ": " + ec.message());
}

// A file system whose appends fail with NoSpace once a byte budget is spent
// (StateStoreOptions::fail_after_bytes): a full disk, as RocksDB sees one.
class BudgetFile : public rocksdb::FSWritableFileOwnerWrapper {
 public:
  BudgetFile(std::unique_ptr<rocksdb::FSWritableFile>&& file, std::atomic<int64_t>* budget)
      : FSWritableFileOwnerWrapper(std::move(file)), budget_(budget) {}
  rocksdb::IOStatus Append(const rocksdb::Slice& data, const rocksdb::IOOptions& options,
                           rocksdb::IODebugContext* dbg) override {
    if (!Spend(data.size())) return rocksdb::IOStatus::NoSpace("No space left on device");
    return target()->Append(data, options, dbg);
  }
  rocksdb::IOStatus Append(const rocksdb::Slice& data, const rocksdb::IOOptions& options,
                           const rocksdb::DataVerificationInfo& info,
                           rocksdb::IODebugContext* dbg) override {
    if (!Spend(data.size())) return rocksdb::IOStatus::NoSpace("No space left on device");
    return target()->Append(data, options, info, dbg);
  }
  rocksdb::IOStatus PositionedAppend(const rocksdb::Slice& data, uint64_t offset,
                                     const rocksdb::IOOptions& options,
                                     rocksdb::IODebugContext* dbg) override {
    if (!Spend(data.size())) return rocksdb::IOStatus::NoSpace("No space left on device");
    return target()->PositionedAppend(data, offset, options, dbg);
  }

 private:
  bool Spend(size_t n) {
    return budget_->fetch_sub(static_cast<int64_t>(n)) >= static_cast<int64_t>(n);
  }
  std::atomic<int64_t>* budget_;
};

class BudgetFileSystem : public rocksdb::FileSystemWrapper {
 public:
  explicit BudgetFileSystem(int64_t budget)
      : FileSystemWrapper(rocksdb::FileSystem::Default()), budget_(budget) {}
  const char* Name() const override { return "StreamvecBudgetFileSystem"; }
  rocksdb::IOStatus NewWritableFile(const std::string& f, const rocksdb::FileOptions& o,
                                    std::unique_ptr<rocksdb::FSWritableFile>* r,
                                    rocksdb::IODebugContext* dbg) override {
    rocksdb::IOStatus s = target()->NewWritableFile(f, o, r, dbg);
    if (s.ok()) *r = std::make_unique<BudgetFile>(std::move(*r), &budget_);
    return s;
  }
  rocksdb::IOStatus ReopenWritableFile(const std::string& f, const rocksdb::FileOptions& o,
                                       std::unique_ptr<rocksdb::FSWritableFile>* r,
                                       rocksdb::IODebugContext* dbg) override {
    rocksdb::IOStatus s = target()->ReopenWritableFile(f, o, r, dbg);
    if (s.ok()) *r = std::make_unique<BudgetFile>(std::move(*r), &budget_);
    return s;
  }

 private:
  std::atomic<int64_t> budget_;
};

// Removes published checkpoints beyond the newest `retain` and any newer than `current` (a live
// directory restored from an older copy), and leftovers of interrupted publishes or removals.
// A checkpoint is first renamed to "<name>.deleting", so it leaves the published set in one
// step; a reader that already opened it keeps its open files (SnapshotReader opens every table
// file up front).
Status PruneCheckpoints(const std::filesystem::path& root, uint64_t current, int retain) {
  namespace fs = std::filesystem;
  std::error_code ec;
  std::vector<uint64_t> published;
  std::vector<fs::path> leftovers;
  for (fs::directory_iterator it(root, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    uint64_t v = 0;
    if (internal::ParseCheckpointName(name, &v)) {
      published.push_back(v);
    } else if (name.ends_with(internal::kPartialSuffix) ||
               name.ends_with(internal::kDeletingSuffix)) {
      leftovers.push_back(it->path());
    }
  }
  if (ec) return FsError("cannot list", root.string(), ec);
  std::sort(published.begin(), published.end());
  std::vector<uint64_t> drop;
  size_t kept = 0;
  for (auto it = published.rbegin(); it != published.rend(); ++it) {
    if (*it > current || kept >= static_cast<size_t>(retain)) {
      drop.push_back(*it);
    } else {
      ++kept;
    }
  }
  Status result;
  for (uint64_t v : drop) {
    const fs::path from = root / CheckpointName(v);
    const fs::path to = root / (CheckpointName(v) + internal::kDeletingSuffix);
    fs::remove_all(to, ec);
    fs::rename(from, to, ec);
    if (ec) {
      if (result.ok()) result = FsError("cannot retire checkpoint", from.string(), ec);
      continue;
    }
    leftovers.push_back(to);
  }
  for (const fs::path& p : leftovers) {
    fs::remove_all(p, ec);
    if (ec && result.ok()) result = FsError("cannot remove", p.string(), ec);
  }
  return result;
}

}  // namespace

struct StateStore::Impl {
  std::string dir;
  std::unique_ptr<rocksdb::Env> env;  // only with a test budget; outlives db
  std::unique_ptr<rocksdb::DB> db;
  uint64_t version = 0;
  std::string metadata;  // of `version`; empty when version == 0
  bool read_only = false;
  int retain = 3;
  Status publish_error;
  rocksdb::Options options;  // the database's, for the table files of snapshots
  std::string format;        // meta/format as stored
  bool has_manifest = false;  // false: no version yet, or one of the first layout (snap/<v>/)
  internal::Manifest manifest;  // of `version`
  SnapshotWriteStats last_stats;
  StateRestore restore;  // what Open rebuilt, if anything

  // Drops the bytes of every writer the current manifest does not refer to (data/ table files
  // at once, small/ entries by a range deletion), and anything of the first layout.
  void DropUnreferenced();
  // Publishes `version` (already committed) as checkpoints/<version>: metadata.json and a
  // RocksDB checkpoint are built in "<name>.partial/", synced, and renamed into place, so a
  // reader sees the whole checkpoint or none. Then prunes old checkpoints.
  Status Publish();
};

Status StateStore::Impl::Publish() {
  namespace fs = std::filesystem;
  std::error_code ec;
  const fs::path root = fs::path(dir) / internal::kCheckpointsDir;
  const std::string name = CheckpointName(version);
  const fs::path final_dir = root / name;
  const fs::path partial = root / (name + internal::kPartialSuffix);
  if (!fs::exists(final_dir / internal::kMetadataFile, ec)) {
    const bool root_existed = fs::is_directory(root, ec);
    fs::create_directories(root, ec);
    if (ec) return FsError("cannot create checkpoint directory", root.string(), ec);
    if (!root_existed) SV_RETURN_IF_ERROR(internal::SyncDir(dir));
    // Not a published checkpoint (no metadata): whatever sits under its name is debris.
    fs::remove_all(final_dir, ec);
    fs::remove_all(partial, ec);
    fs::create_directory(partial, ec);
    if (ec) return FsError("cannot create checkpoint directory", partial.string(), ec);
    Status st = internal::WriteFileSynced((partial / internal::kMetadataFile).string(), metadata);
    if (st.ok()) {
      rocksdb::Checkpoint* raw = nullptr;
      st = FromRocks(rocksdb::Checkpoint::Create(db.get(), &raw),
                     "cannot checkpoint " + partial.string());
      std::unique_ptr<rocksdb::Checkpoint> checkpoint(raw);
      // Flushes the memtables first (log_size_for_flush 0), links the table files, copies the
      // MANIFEST, and renames its own staging directory into place.
      if (st.ok()) {
        st = FromRocks(checkpoint->CreateCheckpoint((partial / internal::kCheckpointDb).string()),
                       "cannot checkpoint " + partial.string());
      }
    }
    if (st.ok()) st = internal::SyncDir(partial.string());
    if (st.ok()) {
      fs::rename(partial, final_dir, ec);
      if (ec) st = FsError("cannot publish checkpoint", final_dir.string(), ec);
    }
    if (st.ok()) st = internal::SyncDir(root.string());
    if (!st.ok()) {
      fs::remove_all(partial, ec);  // best effort; the next publish removes it too
      return st;
    }
  }
  return PruneCheckpoints(root, version, retain);
}

StateStore::StateStore(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
StateStore::~StateStore() = default;

StatusOr<std::unique_ptr<StateStore>> StateStore::Open(const std::string& dir, Mode mode,
                                                       const StateStoreOptions& store_options) {
  namespace fs = std::filesystem;
  StatusOr<std::unique_ptr<StateStore>> store = OpenOnce(dir, mode, store_options);
  if (store.ok() || mode != Mode::kCreateOrOpen || !store_options.restore_damaged) return store;
  // Damaged: RocksDB (or our own meta entries) says corrupt, or CURRENT is gone while
  // checkpoints remain. Anything else (in use, a foreign directory, permissions) is not.
  std::error_code ec;
  const bool has_checkpoints = fs::is_directory(fs::path(dir) / internal::kCheckpointsDir, ec);
  const bool damaged = store.status().code() == StatusCode::kCorruption ||
                       (!fs::exists(fs::path(dir) / "CURRENT", ec) && has_checkpoints);
  if (!damaged || !has_checkpoints) return store;
  StatusOr<StateRestore> restore = Status::Internal("no restore attempted");
  {
    StatusOr<std::unique_ptr<internal::StateLock>> lock = internal::StateLock::Acquire(dir);
    if (!lock.ok()) return lock.status();
    restore = internal::RestoreFromNewestIntact(dir, store.status().message());
  }
  if (!restore.ok()) {
    return Status(store.status().code(),
                  store.status().message() + "; " + restore.status().message());
  }
  store = OpenOnce(dir, mode, store_options);
  if (store.ok()) (*store)->impl_->restore = std::move(restore).value();
  return store;
}

std::string StateRestore::Describe() const {
  if (!restored) return "";
  std::string out = "the live database was damaged (" + damage + "); resumed from snapshot " +
                    std::to_string(version) + ", its newest intact checkpoint";
  for (const std::string& s : skipped) out += "; skipped " + s;
  return out + "; the damaged files are kept in " + moved_to;
}

const StateRestore& StateStore::restore() const { return impl_->restore; }

StatusOr<std::unique_ptr<StateStore>> StateStore::OpenOnce(const std::string& dir, Mode mode,
                                                           const StateStoreOptions& store_options) {
  namespace fs = std::filesystem;
  if (store_options.retain < 1) {
    return Status::InvalidArgument("StateStoreOptions::retain must be >= 1, got " +
                                   std::to_string(store_options.retain));
  }
  std::error_code ec;
  const bool exists = fs::exists(dir, ec);
  if (exists && !fs::is_directory(dir, ec)) {
    return Status::FailedPrecondition("state directory " + dir + " is not a directory");
  }
  const bool empty = !exists || fs::is_empty(dir, ec);
  if (mode == Mode::kReadOnly && empty) {
    return Status::NotFound("no streamvec state in " + dir);
  }
  if (!empty && !fs::exists(fs::path(dir) / "CURRENT", ec)) {
    return Status::FailedPrecondition("state directory " + dir +
                                      " is not empty and holds no streamvec state (no RocksDB "
                                      "CURRENT file); refusing to use it");
  }
  rocksdb::Options options;
  options.create_if_missing = empty;
  options.paranoid_checks = true;
  options.compression = rocksdb::kNoCompression;  // float rows barely compress
  options.max_open_files = 64;
  // Snapshots stream through the memtables: small ones keep the process's memory flat (the
  // 64 MiB default x 2 memtables showed up as RSS steps at each snapshot; 8 MiB x 2 still as
  // 20-40 MB spikes, with the 4-16 MiB values the learner wrote then).
  options.write_buffer_size = size_t{4} << 20;
  options.max_write_buffer_number = 2;
  auto impl = std::make_unique<Impl>();
  impl->retain = store_options.retain;
  if (store_options.fail_after_bytes > 0) {
    impl->env = rocksdb::NewCompositeEnv(
        std::make_shared<BudgetFileSystem>(static_cast<int64_t>(store_options.fail_after_bytes)));
    options.env = impl->env.get();
  }
  rocksdb::DB* raw = nullptr;
  rocksdb::Status s = mode == Mode::kReadOnly ? rocksdb::DB::OpenForReadOnly(options, dir, &raw)
                                              : rocksdb::DB::Open(options, dir, &raw);
  if (IsLockConflict(s)) {
    return Status::FailedPrecondition("state directory " + dir + " is in use by another process (" +
                                      s.ToString() + ")");
  }
  if (!s.ok()) return FromRocks(s, "cannot open state directory " + dir);
  impl->dir = dir;
  impl->db.reset(raw);
  impl->read_only = mode == Mode::kReadOnly;
  impl->options = options;
  if (!impl->read_only) {
    // Table files of a snapshot interrupted before their ingestion.
    fs::remove_all(fs::path(dir) / kIngestDir, ec);
  }
  std::string& format = impl->format;
  s = impl->db->Get(rocksdb::ReadOptions(), kFormatKey, &format);
  if (s.IsNotFound() && empty) {
    rocksdb::WriteOptions wo;
    wo.sync = true;
    SV_RETURN_IF_ERROR(FromRocks(impl->db->Put(wo, kFormatKey, kStateFormat),
                                 "cannot initialise state directory " + dir));
    format = kStateFormat;
  } else if (s.IsNotFound() || (s.ok() && format != kStateFormat &&
                                  format != internal::kStateFormatV1)) {
    return Status::FailedPrecondition("state directory " + dir +
                                      " is a RocksDB database but not a streamvec state (format '" +
                                      format + "', expected '" + kStateFormat + "')");
  } else if (!s.ok()) {
    return FromRocks(s, "cannot read state directory " + dir);
  }
  std::string current;
  s = impl->db->Get(rocksdb::ReadOptions(), kCurrentKey, &current);
  if (s.ok()) {
    try {
      impl->version = std::stoull(current);
    } catch (const std::exception&) {
      return Status::Corruption("state directory " + dir + ": bad meta/current '" + current + "'");
    }
  } else if (!s.IsNotFound()) {
    return FromRocks(s, "cannot read state directory " + dir);
  }
  if (impl->version > 0) {
    s = impl->db->Get(rocksdb::ReadOptions(), kMetadataKey, &impl->metadata);
    if (s.IsNotFound()) {
      // A state written before snapshots carried metadata.
      impl->metadata = nlohmann::json{{"version", impl->version}, {"created_at", 0.0}}.dump();
    } else if (!s.ok()) {
      return FromRocks(s, "cannot read state directory " + dir);
    }
    std::string manifest;
    s = impl->db->Get(rocksdb::ReadOptions(), internal::kManifestKey, &manifest);
    if (s.ok()) {
      StatusOr<internal::Manifest> decoded = internal::DecodeManifest(manifest, dir);
      if (!decoded.ok()) return decoded.status();
      impl->manifest = std::move(*decoded);
      impl->has_manifest = true;
    } else if (!s.IsNotFound()) {
      return FromRocks(s, "cannot read state directory " + dir);
    } else if (format != internal::kStateFormatV1) {
      return Status::Corruption("state directory " + dir + ": version " +
                                std::to_string(impl->version) + " has no manifest");
    }
    // What a crash left behind: bytes of a version never committed, of versions superseded
    // before their removal.
    if (!impl->read_only && impl->has_manifest) impl->DropUnreferenced();
    // A crash (or a failed publish) between a commit and its publish: publish it now.
    if (!impl->read_only) impl->publish_error = impl->Publish();
  }
  return std::unique_ptr<StateStore>(new StateStore(std::move(impl)));
}

uint64_t StateStore::version() const { return impl_->version; }

namespace {

// Table files wholly inside [from, to) go at once, without compaction (a writer's data/ files
// are: ingested into a range of their own).
void DropFiles(rocksdb::DB* db, const std::string& from, const std::string& to) {
  const rocksdb::Slice b(from), e(to);
  (void)rocksdb::DeleteFilesInRange(db, db->DefaultColumnFamily(), &b, &e, /*include_end=*/false);
}

// Drops every byte a writer (version) stored: its data/ table files, and its small/ entries by a
// range deletion. data/ holds only ingested table files, so dropping them leaves nothing behind
// (no range deletion there: its tombstone would span newer writers' ranges and make their
// ingestion overlap). Best effort: what stays is unreferenced and dropped by a later call.
void DropWriter(rocksdb::DB* db, uint64_t writer) {
  DropFiles(db, internal::DataPrefix(writer), internal::DataPrefix(writer + 1));
  (void)db->DeleteRange(rocksdb::WriteOptions(), db->DefaultColumnFamily(),
                        internal::SmallPrefix(writer), internal::SmallPrefix(writer + 1));
}

}  // namespace

void StateStore::Impl::DropUnreferenced() {
  rocksdb::DB* d = db.get();
  std::set<uint64_t> live;
  for (const auto& [key, ref] : manifest.entries) live.insert(ref.writer);
  // Every writer present under data/ or small/ that no entry refers to.
  std::unique_ptr<rocksdb::Iterator> it(d->NewIterator(rocksdb::ReadOptions()));
  for (const bool direct : {true, false}) {
    const std::string root = direct ? "data/" : "small/";
    for (it->Seek(root); it->Valid() && it->key().starts_with(root);) {
      const std::string hex = it->key().ToString().substr(root.size(), 16);
      uint64_t w = 0;
      try {
        w = std::stoull(hex, nullptr, 16);
      } catch (const std::exception&) {
        break;  // not ours; leave it
      }
      if (!live.count(w)) DropWriter(d, w);
      it->Seek(direct ? internal::DataPrefix(w + 1) : internal::SmallPrefix(w + 1));
    }
  }
  // The first layout's entries, once a version with a manifest is current.
  DropFiles(d, "snap/", "snap0");
  it->Seek("snap/");
  if (it->Valid() && it->key().starts_with("snap/")) {
    (void)d->DeleteRange(rocksdb::WriteOptions(), d->DefaultColumnFamily(), "snap/", "snap0");
  }
  for (auto w = manifest.written.begin(); w != manifest.written.end();) {
    w = live.count(w->first) ? std::next(w) : manifest.written.erase(w);
  }
}

Status StateStore::WriteSnapshot(const std::function<Status(const SnapshotSink&)>& fill,
                                 const std::string& metadata_json,
                                 const SnapshotWriteOptions& write_options) {
  Impl& m = *impl_;
  if (m.read_only) return Status::FailedPrecondition("state store opened read-only");
  const uint64_t next = m.version + 1;
  std::string metadata;
  {
    nlohmann::json meta = nlohmann::json::parse(metadata_json, nullptr, /*allow_exceptions=*/false);
    if (meta.is_discarded() || !meta.is_object()) {
      return Status::InvalidArgument("snapshot metadata must be a JSON object, got '" +
                                     metadata_json.substr(0, 80) + "'");
    }
    meta["version"] = next;
    meta["created_at"] =
        std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
    metadata = meta.dump();  // parse() accepted only valid UTF-8, so dump() cannot throw
  }
  rocksdb::DB* db = m.db.get();
  const std::string data_prefix = internal::DataPrefix(next);
  const std::string small_prefix = internal::SmallPrefix(next);
  // Remove what a failed earlier attempt may have left under this version.
  {
    std::unique_ptr<rocksdb::Iterator> it(db->NewIterator(rocksdb::ReadOptions()));
    for (const std::string& p : {data_prefix, small_prefix}) {
      it->Seek(p);
      if (!it->status().ok()) return FromRocks(it->status(), "state read from " + m.dir);
      if (it->Valid() && it->key().starts_with(p)) {
        DropWriter(db, next);
        break;
      }
    }
  }
  // Entries whose bytes are on disk already are referred to, not written: unless asked, or the
  // current version is of the first layout. A writer whose bytes are mostly superseded (its live
  // ones under 1/kRewriteRatio of what it wrote: they share its table files with dead ones) is
  // evacuated: its live entries are written again, and its files go at the commit. So the bytes
  // on disk behind a version stay under kRewriteRatio times its distinct bytes.
  const bool full = write_options.full_rewrite || !m.has_manifest;
  std::set<uint64_t> evacuate;
  {
    std::map<uint64_t, uint64_t> live;
    std::set<std::pair<uint64_t, std::string>> seen;
    for (const auto& [key, ref] : m.manifest.entries) {
      if (seen.emplace(ref.writer, ref.stored_key.empty() ? key : ref.stored_key).second) {
        live[ref.writer] += ref.size;
      }
    }
    for (const auto& [writer, bytes] : m.manifest.written) {
      if (static_cast<double>(live[writer]) * kRewriteRatio < static_cast<double>(bytes)) {
        evacuate.insert(writer);
      }
    }
  }
  namespace fs = std::filesystem;
  std::error_code ec;
  const fs::path ingest_dir = fs::path(m.dir) / kIngestDir;
  internal::VersionWriter writer(db, m.options, m.dir, ingest_dir.string(), next, m.manifest,
                                 evacuate, /*reuse=*/!full);
  SnapshotSink sink = [&writer](const std::string& key, std::string_view value) {
    return writer.Put(key, value);
  };
  Status st = fill(sink);
  // The current version's entries the fill did not pass, carried over.
  if (st.ok() && write_options.keep_unwritten && m.version > 0) {
    if (m.has_manifest) {
      // Carried as they are, except from an evacuated writer or in a full rewrite: written anew
      // (read back first), or the old files they live in would stay.
      for (const auto& [key, ref] : m.manifest.entries) {
        if (!st.ok()) break;
        if (writer.Has(key)) continue;
        if (!full && !evacuate.count(ref.writer)) {
          writer.Carry(key, ref);
          continue;
        }
        StatusOr<std::string> value = internal::ReadEntry(db, m.version, &m.manifest, key, m.dir);
        st = value.ok() ? writer.Put(key, *value) : value.status();
      }
    } else {
      // First layout: copy the bytes (once; the new version has a manifest).
      const std::string old_prefix = Prefix(m.version);
      std::unique_ptr<rocksdb::Iterator> it(db->NewIterator(rocksdb::ReadOptions()));
      for (it->Seek(old_prefix); st.ok() && it->Valid() && it->key().starts_with(old_prefix);
           it->Next()) {
        const std::string key = it->key().ToString().substr(old_prefix.size());
        if (writer.Has(key)) continue;
        st = writer.Put(key, std::string_view(it->value().data(), it->value().size()));
      }
      if (st.ok()) st = FromRocks(it->status(), "state read from " + m.dir);
    }
  }
  if (st.ok()) st = writer.Finish();
  fs::remove_all(ingest_dir, ec);
  internal::Manifest next_manifest = writer.TakeManifest();
  SnapshotWriteStats stats;
  stats.full_rewrite = full;
  stats.written_bytes = writer.written_bytes();
  stats.passed_bytes = writer.passed_bytes();
  for (const auto& [key, ref] : next_manifest.entries) stats.entry_bytes += ref.size;
  for (const auto& [w, bytes] : next_manifest.written) stats.disk_bytes += bytes;
  if (st.ok()) {
    // The commit point: one synced batch switches to the new version, with its metadata and
    // manifest.
    rocksdb::WriteBatch commit;
    rocksdb::WriteOptions wo;
    wo.sync = true;
    st = FromRocks(commit.Put(kCurrentKey, std::to_string(next)), "state write to " + m.dir);
    if (st.ok()) st = FromRocks(commit.Put(kMetadataKey, metadata), "state write to " + m.dir);
    if (st.ok()) {
      st = FromRocks(commit.Put(internal::kManifestKey, internal::EncodeManifest(next_manifest)),
                     "state write to " + m.dir);
    }
    if (st.ok() && m.format != kStateFormat) {
      st = FromRocks(commit.Put(kFormatKey, kStateFormat), "state write to " + m.dir);
    }
    if (st.ok()) st = FromRocks(db->Write(wo, &commit), "state commit to " + m.dir);
  }
  if (!st.ok()) {
    // Best effort: the partial version is invisible anyway and is removed by the next attempt.
    DropWriter(db, next);
    return st;
  }
  m.format = kStateFormat;
  m.version = next;
  m.metadata = std::move(metadata);
  m.manifest = std::move(next_manifest);
  m.has_manifest = true;
  m.last_stats = stats;
  m.DropUnreferenced();
  // After the commit point: a failed publish leaves the committed snapshot (what a restart
  // resumes from) as it is; readers keep the previous checkpoint, and the next publish retries.
  m.publish_error = m.Publish();
#if defined(__GLIBC__)
  // A snapshot's transient buffers (write batches, memtables, table building on RocksDB's
  // threads, the caller's copies) are freed by now; glibc keeps freed memory in its arenas,
  // which showed up as resident memory creeping up snapshot after snapshot. Hand it back, unless
  // the process keeps freed memory for reuse (base/heap.h: the Kafka trainer, the parameter
  // node): there the next snapshot's copies would fault every page in again (page faults were
  // about a quarter of a distributed trainer's time, docs/distributed.md).
  if (!FreedMemoryKeptForReuse()) malloc_trim(0);
#endif
  return Status::Ok();
}

SnapshotWriteStats StateStore::last_write_stats() const { return impl_->last_stats; }

StatusOr<std::string> StateStore::CurrentMetadata() const {
  if (impl_->version == 0) return Status::NotFound("no snapshot in " + impl_->dir);
  return impl_->metadata;
}

Status StateStore::last_publish_error() const { return impl_->publish_error; }

StatusOr<std::string> StateStore::Get(const std::string& key) const {
  if (impl_->version == 0) return Status::NotFound("no snapshot in " + impl_->dir);
  StatusOr<std::string> v =
      internal::ReadEntry(impl_->db.get(), impl_->version,
                          impl_->has_manifest ? &impl_->manifest : nullptr, key, impl_->dir);
  if (!v.ok() && v.status().code() == StatusCode::kNotFound) {
    return Status::NotFound("state entry '" + key + "' not found");
  }
  return v;
}

}  // namespace streamvec
