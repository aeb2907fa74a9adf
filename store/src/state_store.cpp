#include "streamvec/store/state_store.h"

#include <rocksdb/db.h>
#include <rocksdb/env.h>
#include <rocksdb/file_system.h>
#include <rocksdb/options.h>
#include <rocksdb/write_batch.h>

#include <atomic>
#include <cstdio>
#include <filesystem>
#include <system_error>

namespace streamvec {
namespace {

constexpr char kFormatKey[] = "meta/format";
constexpr char kCurrentKey[] = "meta/current";
constexpr size_t kBatchBytes = size_t{4} << 20;

std::string Prefix(uint64_t version) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "snap/%016llx/", static_cast<unsigned long long>(version));
  return buf;
}

Status FromRocks(const rocksdb::Status& s, const std::string& what) {
  if (s.ok()) return Status::Ok();
  const std::string m = what + ": " + s.ToString();
  if (s.IsCorruption()) return Status::Corruption(m);
  if (s.IsNotFound()) return Status::NotFound(m);
  return Status::IoError(m);
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

}  // namespace

struct StateStore::Impl {
  std::string dir;
  std::unique_ptr<rocksdb::Env> env;  // only with a test budget; outlives db
  std::unique_ptr<rocksdb::DB> db;
  uint64_t version = 0;
  bool read_only = false;
};

StateStore::StateStore(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
StateStore::~StateStore() = default;

StatusOr<std::unique_ptr<StateStore>> StateStore::Open(const std::string& dir, Mode mode,
                                                       const StateStoreOptions& store_options) {
  namespace fs = std::filesystem;
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
  // 64 MiB default x 2 memtables showed up as RSS steps at each snapshot).
  options.write_buffer_size = size_t{8} << 20;
  options.max_write_buffer_number = 2;
  auto impl = std::make_unique<Impl>();
  if (store_options.fail_after_bytes > 0) {
    impl->env = rocksdb::NewCompositeEnv(std::make_shared<BudgetFileSystem>(
        static_cast<int64_t>(store_options.fail_after_bytes)));
    options.env = impl->env.get();
  }
  rocksdb::DB* raw = nullptr;
  rocksdb::Status s = mode == Mode::kReadOnly
                          ? rocksdb::DB::OpenForReadOnly(options, dir, &raw)
                          : rocksdb::DB::Open(options, dir, &raw);
  if (!s.ok()) return FromRocks(s, "cannot open state directory " + dir);
  impl->dir = dir;
  impl->db.reset(raw);
  impl->read_only = mode == Mode::kReadOnly;
  std::string format;
  s = impl->db->Get(rocksdb::ReadOptions(), kFormatKey, &format);
  if (s.IsNotFound() && empty) {
    rocksdb::WriteOptions wo;
    wo.sync = true;
    SV_RETURN_IF_ERROR(FromRocks(impl->db->Put(wo, kFormatKey, kStateFormat),
                                 "cannot initialise state directory " + dir));
  } else if (s.IsNotFound() || (s.ok() && format != kStateFormat)) {
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
  return std::unique_ptr<StateStore>(new StateStore(std::move(impl)));
}

uint64_t StateStore::version() const { return impl_->version; }

Status StateStore::WriteSnapshot(const std::function<Status(const SnapshotSink&)>& fill,
                                 const std::string& metadata_json) {
  (void)metadata_json;  // TODO(store): stored and published with the checkpoint
  Impl& m = *impl_;
  if (m.read_only) return Status::FailedPrecondition("state store opened read-only");
  const uint64_t next = m.version + 1;
  const std::string prefix = Prefix(next);
  const std::string end = Prefix(next + 1);
  rocksdb::DB* db = m.db.get();
  // Remove what a failed earlier attempt may have left under this version.
  SV_RETURN_IF_ERROR(FromRocks(
      db->DeleteRange(rocksdb::WriteOptions(), db->DefaultColumnFamily(), prefix, end),
      "state write to " + m.dir));
  rocksdb::WriteBatch batch;
  auto flush = [&]() -> Status {
    if (batch.Count() == 0) return Status::Ok();
    Status st = FromRocks(db->Write(rocksdb::WriteOptions(), &batch), "state write to " + m.dir);
    batch.Clear();
    return st;
  };
  SnapshotSink sink = [&](const std::string& key, std::string_view value) -> Status {
    SV_RETURN_IF_ERROR(FromRocks(batch.Put(prefix + key, rocksdb::Slice(value.data(), value.size())),
                                 "state write to " + m.dir));
    if (batch.GetDataSize() >= kBatchBytes) return flush();
    return Status::Ok();
  };
  Status st = fill(sink);
  if (st.ok()) st = flush();
  if (st.ok()) {
    // The commit point: one synced batch switches to the new version and drops the old one.
    rocksdb::WriteBatch commit;
    rocksdb::WriteOptions wo;
    wo.sync = true;
    st = FromRocks(commit.Put(kCurrentKey, std::to_string(next)), "state write to " + m.dir);
    if (st.ok() && m.version > 0) {
      st = FromRocks(commit.DeleteRange(Prefix(m.version), Prefix(m.version + 1)),
                     "state write to " + m.dir);
    }
    if (st.ok()) st = FromRocks(db->Write(wo, &commit), "state commit to " + m.dir);
  }
  if (!st.ok()) {
    // Best effort: the partial version is invisible anyway and is removed by the next attempt.
    (void)db->DeleteRange(rocksdb::WriteOptions(), db->DefaultColumnFamily(), prefix, end);
    return st;
  }
  m.version = next;
  // Moves the snapshot out of the memtables into table files (and frees them); a failure here
  // loses nothing (the WAL holds the data), so it is not an error of the snapshot.
  (void)db->Flush(rocksdb::FlushOptions());
  return Status::Ok();
}

StatusOr<std::string> StateStore::CurrentMetadata() const {
  return Status::NotFound("snapshot metadata: not implemented yet");
}

StatusOr<std::string> StateStore::Get(const std::string& key) const {
  if (impl_->version == 0) return Status::NotFound("no snapshot in " + impl_->dir);
  std::string value;
  rocksdb::Status s =
      impl_->db->Get(rocksdb::ReadOptions(), Prefix(impl_->version) + key, &value);
  if (s.IsNotFound()) return Status::NotFound("state entry '" + key + "' not found");
  if (!s.ok()) return FromRocks(s, "state read from " + impl_->dir);
  return value;
}

}  // namespace streamvec
