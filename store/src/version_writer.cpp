#include "version_writer.h"

#include <xxhash.h>

#include <filesystem>
#include <system_error>
#include <utility>

namespace streamvec::internal {
namespace {

// Memtable entries go to RocksDB in write batches of about this many bytes; small, since a batch
// is held whole (and, for a moment, twice) in memory.
constexpr size_t kBatchBytes = size_t{1} << 20;

}  // namespace

VersionWriter::VersionWriter(rocksdb::DB* db, const rocksdb::Options& options, std::string dir,
                             std::string ingest_dir, uint64_t version, const Manifest& current,
                             const std::set<uint64_t>& evacuate, bool reuse)
    : db_(db),
      options_(options),
      dir_(std::move(dir)),
      ingest_dir_(std::move(ingest_dir)),
      version_(version),
      current_(current),
      data_prefix_(DataPrefix(version)),
      small_prefix_(SmallPrefix(version)) {
  if (!reuse) return;
  for (const auto& [key, ref] : current.entries) {
    if (evacuate.count(ref.writer)) continue;
    by_content_.emplace(ContentKey{ref.size, ref.hash, ref.hash_high}, Stored(key, ref));
  }
}

EntryRef VersionWriter::Stored(const std::string& key, const EntryRef& ref) {
  EntryRef r = ref;
  if (r.stored_key.empty()) r.stored_key = key;
  return r;
}

Status VersionWriter::FlushBatch() {
  if (batch_.Count() == 0) return Status::Ok();
  // Without the write-ahead log: Finish flushes the memtables to table files before the
  // caller's commit (one write of the data, instead of the data twice and a sync of all of it).
  // A crash before that loses only this uncommitted version, which is invisible anyway.
  rocksdb::WriteOptions unlogged;
  unlogged.disableWAL = true;
  Status st = FromRocks(db_->Write(unlogged, &batch_), "state write to " + dir_);
  batch_.Clear();
  return st;
}

Status VersionWriter::Put(const std::string& key, std::string_view value) {
  namespace fs = std::filesystem;
  EntryRef ref;
  ref.writer = version_;
  ref.size = value.size();
  const XXH128_hash_t h = XXH3_128bits(value.data(), value.size());
  ref.hash = h.low64;
  ref.hash_high = h.high64;
  auto [slot, inserted] = manifest_.entries.emplace(key, ref);
  if (!inserted) return Status::InvalidArgument("snapshot entry '" + key + "' passed twice");
  passed_ += value.size();
  const ContentKey content{ref.size, ref.hash, ref.hash_high};
  if (auto same = by_content_.find(content); same != by_content_.end()) {
    slot->second = same->second;  // already on disk: refer to those bytes
    if (slot->second.stored_key == key) slot->second.stored_key.clear();
    return Status::Ok();
  }
  written_ += value.size();
  if (value.size() >= kDirectBytes) {
    const size_t slash = key.rfind('/');
    const std::string family = slash == std::string::npos ? "" : key.substr(0, slash + 1);
    DirectFile& f = direct_[family];
    if (!f.writer) {
      std::error_code ec;
      if (ingest_paths_.empty()) {
        fs::create_directories(ingest_dir_, ec);
        if (ec) return Status::IoError("cannot create " + ingest_dir_ + ": " + ec.message());
      }
      f.path = (fs::path(ingest_dir_) / (std::to_string(version_) + "-" +
                                         std::to_string(direct_.size()) + ".sst"))
                   .string();
      f.writer = std::make_unique<rocksdb::SstFileWriter>(rocksdb::EnvOptions(), options_);
      SV_RETURN_IF_ERROR(FromRocks(f.writer->Open(f.path), "state write to " + dir_));
      ingest_paths_.push_back(f.path);
    }
    std::string full_key = data_prefix_ + key;
    if (f.last_key.empty() || f.last_key < full_key) {
      SV_RETURN_IF_ERROR(
          FromRocks(f.writer->Put(full_key, rocksdb::Slice(value.data(), value.size())),
                    "state write to " + dir_));
      f.last_key = std::move(full_key);
      slot->second.direct = true;
      by_content_.emplace(content, Stored(key, slot->second));
      return Status::Ok();
    }
  }
  SV_RETURN_IF_ERROR(
      FromRocks(batch_.Put(small_prefix_ + key, rocksdb::Slice(value.data(), value.size())),
                "state write to " + dir_));
  by_content_.emplace(content, Stored(key, slot->second));
  if (batch_.GetDataSize() >= kBatchBytes) return FlushBatch();
  return Status::Ok();
}

Status VersionWriter::Finish() {
  Status st = FlushBatch();
  for (auto& [family, f] : direct_) {
    if (st.ok()) st = FromRocks(f.writer->Finish(), "state write to " + dir_);  // synced
  }
  direct_.clear();
  if (st.ok() && !ingest_paths_.empty()) {
    rocksdb::IngestExternalFileOptions ingest;
    ingest.move_files = true;  // hard links: no copy
    st = FromRocks(db_->IngestExternalFile(ingest_paths_, ingest), "state write to " + dir_);
  }
  if (st.ok()) st = FromRocks(db_->Flush(rocksdb::FlushOptions()), "state write to " + dir_);
  return st;
}

Manifest VersionWriter::TakeManifest() {
  for (const auto& [key, ref] : manifest_.entries) {
    if (ref.writer != version_ && !manifest_.written.count(ref.writer)) {
      auto w = current_.written.find(ref.writer);
      manifest_.written[ref.writer] = w == current_.written.end() ? 0 : w->second;
    }
  }
  if (written_ > 0) manifest_.written[version_] = written_;
  return std::move(manifest_);
}

}  // namespace streamvec::internal
