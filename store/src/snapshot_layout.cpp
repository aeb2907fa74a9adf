#include "snapshot_layout.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <nlohmann/json.hpp>

namespace streamvec::internal {
namespace {

Status Errno(const std::string& what, const std::string& path, int err) {
  const std::string m = what + " " + path + ": " + std::strerror(err);
  return err == ENOENT ? Status::NotFound(m) : Status::IoError(m);
}

}  // namespace

std::string SnapshotPrefix(uint64_t version) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "snap/%016llx/", static_cast<unsigned long long>(version));
  return buf;
}

namespace {

void PutU64(std::string* out, uint64_t v) { out->append(reinterpret_cast<const char*>(&v), 8); }

bool GetU64(const std::string& in, size_t* pos, uint64_t* v) {
  if (in.size() - *pos < 8) return false;
  std::memcpy(v, in.data() + *pos, 8);
  *pos += 8;
  return true;
}

constexpr uint64_t kManifestMagic = 0x3274736566696e6dULL;  // "mnifst2" as little-endian bytes

}  // namespace

std::string EncodeManifest(const Manifest& m) {
  std::string out;
  out.reserve(16 + m.entries.size() * 48 + m.written.size() * 16);
  PutU64(&out, kManifestMagic);
  PutU64(&out, m.entries.size());
  for (const auto& [key, ref] : m.entries) {
    PutU64(&out, key.size());
    out += key;
    PutU64(&out, ref.writer);
    PutU64(&out, ref.size);
    PutU64(&out, ref.hash);
    PutU64(&out, ref.hash_high);
    out.push_back(ref.direct ? 1 : 0);
    PutU64(&out, ref.stored_key.size());
    out += ref.stored_key;
  }
  PutU64(&out, m.written.size());
  for (const auto& [writer, bytes] : m.written) {
    PutU64(&out, writer);
    PutU64(&out, bytes);
  }
  return out;
}

StatusOr<Manifest> DecodeManifest(const std::string& in, const std::string& where) {
  const Status bad = Status::Corruption("snapshot manifest in " + where + " is malformed");
  Manifest m;
  size_t pos = 0;
  uint64_t magic = 0, n = 0;
  if (!GetU64(in, &pos, &magic) || magic != kManifestMagic || !GetU64(in, &pos, &n)) return bad;
  for (uint64_t i = 0; i < n; ++i) {
    uint64_t len = 0;
    if (!GetU64(in, &pos, &len) || in.size() - pos < len) return bad;
    std::string key = in.substr(pos, len);
    pos += len;
    EntryRef ref;
    if (!GetU64(in, &pos, &ref.writer) || !GetU64(in, &pos, &ref.size) ||
        !GetU64(in, &pos, &ref.hash) || !GetU64(in, &pos, &ref.hash_high) || pos >= in.size()) {
      return bad;
    }
    ref.direct = in[pos++] != 0;
    uint64_t stored = 0;
    if (!GetU64(in, &pos, &stored) || in.size() - pos < stored) return bad;
    ref.stored_key = in.substr(pos, stored);
    pos += stored;
    m.entries.emplace(std::move(key), ref);
  }
  if (!GetU64(in, &pos, &n)) return bad;
  for (uint64_t i = 0; i < n; ++i) {
    uint64_t writer = 0, bytes = 0;
    if (!GetU64(in, &pos, &writer) || !GetU64(in, &pos, &bytes)) return bad;
    m.written[writer] = bytes;
  }
  if (pos != in.size()) return bad;
  return m;
}

std::string DataPrefix(uint64_t writer) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "data/%016llx/", static_cast<unsigned long long>(writer));
  return buf;
}

std::string SmallPrefix(uint64_t writer) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "small/%016llx/", static_cast<unsigned long long>(writer));
  return buf;
}

std::string EntryKey(const std::string& key, const EntryRef& ref) {
  return (ref.direct ? DataPrefix(ref.writer) : SmallPrefix(ref.writer)) +
         (ref.stored_key.empty() ? key : ref.stored_key);
}

StatusOr<std::string> ReadEntry(rocksdb::DB* db, uint64_t version, const Manifest* manifest,
                                const std::string& key, const std::string& where) {
  std::string db_key;
  if (manifest != nullptr) {
    auto it = manifest->entries.find(key);
    if (it == manifest->entries.end()) {
      return Status::NotFound("entry '" + key + "' not found in version " +
                              std::to_string(version));
    }
    db_key = EntryKey(key, it->second);
  } else {
    db_key = SnapshotPrefix(version) + key;
  }
  std::string value;
  rocksdb::Status s = db->Get(rocksdb::ReadOptions(), db_key, &value);
  if (s.IsNotFound()) {
    if (manifest != nullptr) {
      return Status::Corruption("entry '" + key + "' of version " + std::to_string(version) +
                                " is in the manifest of " + where + " but its bytes are missing");
    }
    return Status::NotFound("entry '" + key + "' not found in version " + std::to_string(version));
  }
  if (!s.ok()) return FromRocks(s, "read from " + where);
  return value;
}

std::string CheckpointName(uint64_t version) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%020llu", static_cast<unsigned long long>(version));
  return buf;
}

bool ParseCheckpointName(const std::string& name, uint64_t* version) {
  if (name.size() != 20) return false;
  uint64_t v = 0;
  for (char c : name) {
    if (c < '0' || c > '9') return false;
    const uint64_t d = static_cast<uint64_t>(c - '0');
    if (v > (UINT64_MAX - d) / 10) return false;
    v = v * 10 + d;
  }
  *version = v;
  return true;
}

StatusOr<SnapshotInfo> ParseSnapshotInfo(const std::string& json, const std::string& path) {
  nlohmann::json meta = nlohmann::json::parse(json, nullptr, /*allow_exceptions=*/false);
  if (meta.is_discarded() || !meta.is_object() || !meta.contains("version") ||
      !meta["version"].is_number_unsigned() || !meta.contains("created_at") ||
      !meta["created_at"].is_number()) {
    return Status::Corruption("snapshot metadata " + path +
                              " is not a JSON object with version and created_at");
  }
  SnapshotInfo info;
  info.version = meta["version"].get<uint64_t>();
  info.created_at = meta["created_at"].get<double>();
  info.metadata_json = json;
  return info;
}

Status FromRocks(const rocksdb::Status& s, const std::string& what) {
  if (s.ok()) return Status::Ok();
  const std::string m = what + ": " + s.ToString();
  if (s.IsCorruption()) return Status::Corruption(m);
  if (s.IsNotFound()) return Status::NotFound(m);
  return Status::IoError(m);
}

Status WriteFileSynced(const std::string& path, const std::string& contents) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return Errno("cannot create", path, errno);
  size_t done = 0;
  while (done < contents.size()) {
    const ssize_t n = ::write(fd, contents.data() + done, contents.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      const int err = errno;
      ::close(fd);
      return Errno("cannot write", path, err);
    }
    done += static_cast<size_t>(n);
  }
  if (::fsync(fd) != 0) {
    const int err = errno;
    ::close(fd);
    return Errno("cannot sync", path, err);
  }
  if (::close(fd) != 0) return Errno("cannot close", path, errno);
  return Status::Ok();
}

Status SyncDir(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return Errno("cannot open directory", path, errno);
  const int rc = ::fsync(fd);
  const int err = errno;
  ::close(fd);
  return rc == 0 ? Status::Ok() : Errno("cannot sync directory", path, err);
}

StatusOr<std::string> ReadWholeFile(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return Errno("cannot open", path, errno);
  std::string out;
  char buf[8192];
  for (;;) {
    const ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      const int err = errno;
      ::close(fd);
      return Errno("cannot read", path, err);
    }
    if (n == 0) break;
    out.append(buf, static_cast<size_t>(n));
  }
  ::close(fd);
  return out;
}

}  // namespace streamvec::internal
