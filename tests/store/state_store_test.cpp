#include "streamvec/store/state_store.h"

#include "streamvec/base/heap.h"
#include "streamvec/store/snapshot_reader.h"

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <algorithm>
#include <functional>
#include <memory>
#include <map>
#include <string>
#include <vector>

#include <rocksdb/db.h>

#include <gtest/gtest.h>

#include "../heap_testing.h"

namespace streamvec {
namespace {

namespace fs = std::filesystem;

class StateStoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = fs::temp_directory_path() / ("streamvec_state_store_" + std::to_string(::getpid()));
    fs::remove_all(root_);
    fs::create_directories(root_);
    dir_ = (root_ / "state").string();
  }
  void TearDown() override { fs::remove_all(root_); }

  static Status WriteEntries(StateStore& store, const std::map<std::string, std::string>& e) {
    return store.WriteSnapshot([&e](const SnapshotSink& sink) {
      for (const auto& [k, v] : e) SV_RETURN_IF_ERROR(sink(k, v));
      return Status::Ok();
    });
  }

  fs::path root_;
  std::string dir_;
};

using heap_testing::kSanitizerAllocator;
using heap_testing::MinorFaults;

// Allocates `mib` MiB in blocks of 32 KiB (a snapshot's row chunks) and one block more, writes
// every page, and frees all but the last block: it stays as a pin above the others, so that
// free() does not hand them back itself as the heap's top. Returns the pin, to free later.
void* TouchAndFreeBelowAPin(int mib) {
  std::vector<char*> blocks;
  for (int i = 0; i <= mib * 32; ++i) {
    auto* b = static_cast<volatile char*>(std::malloc(size_t{32} << 10));
    for (size_t j = 0; j < (size_t{32} << 10); j += 4096) b[j] = 1;
    blocks.push_back(const_cast<char*>(b));
  }
  void* pin = blocks.back();
  blocks.pop_back();
  for (char* b : blocks) std::free(b);
  return pin;
}

// Minor page faults of writing 64 MiB of fresh 32 KiB blocks after a snapshot, where 64 MiB of
// such blocks were freed just before it.
long FaultsAfterASnapshot(StateStore& store) {
  void* pin = TouchAndFreeBelowAPin(64);
  EXPECT_TRUE(store.WriteSnapshot([](const SnapshotSink& sink) { return sink("k", "v"); }).ok());
  const long before = MinorFaults();
  void* pin2 = TouchAndFreeBelowAPin(64);  // 16,384 pages
  const long faults = MinorFaults() - before;
  std::free(pin);
  std::free(pin2);
  return faults;
}

// A process that keeps freed memory for reuse (base/heap.h: the Kafka trainer, the parameter
// node) finds its next buffers in pages it has: the store leaves freed memory to it.
TEST_F(StateStoreTest, ASnapshotLeavesFreedMemoryToAProcessThatKeepsIt) {
  if (kSanitizerAllocator) GTEST_SKIP() << "the sanitizer's allocator ignores mallopt";
  KeepFreedMemoryForReuse(size_t{256} << 20);
  auto store = StateStore::Open(dir_, StateStore::Mode::kCreateOrOpen);
  ASSERT_TRUE(store.ok()) << store.status().message();
  EXPECT_LT(FaultsAfterASnapshot(**store), 2000);
}

// Any other process gets a snapshot's freed memory handed back to the kernel (malloc_trim), so
// that its resident memory does not creep up snapshot after snapshot: the same buffers fault in
// again.
TEST_F(StateStoreTest, ASnapshotHandsFreedMemoryBackToAnyOtherProcess) {
  if (kSanitizerAllocator) GTEST_SKIP() << "the sanitizer's allocator ignores mallopt";
  auto store = StateStore::Open(dir_, StateStore::Mode::kCreateOrOpen);
  ASSERT_TRUE(store.ok()) << store.status().message();
  EXPECT_GT(FaultsAfterASnapshot(**store), 8000);
}

// Bytes of the table files in `dir`. RocksDB deletes obsolete files in the background: one may
// vanish while it is listed (counted as 0), never an exception.
uintmax_t TableBytes(const std::string& dir) {
  uintmax_t bytes = 0;
  std::error_code ec;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    if (it->path().extension() != ".sst") continue;
    std::error_code size_ec;
    const uintmax_t n = fs::file_size(it->path(), size_ec);
    if (!size_ec) bytes += n;
  }
  return bytes;
}

TEST_F(StateStoreTest, NewSnapshotReplacesThePreviousOneAndSurvivesReopen) {
  {
    auto store = StateStore::Open(dir_, StateStore::Mode::kCreateOrOpen);
    ASSERT_TRUE(store.ok()) << store.status().ToString();
    EXPECT_EQ((*store)->version(), 0u);
    EXPECT_EQ((*store)->Get("a").status().code(), StatusCode::kNotFound);
    ASSERT_TRUE(WriteEntries(**store, {{"a", "one"}, {"b", std::string(5 << 20, 'x')}}).ok());
    ASSERT_TRUE(WriteEntries(**store, {{"a", "two"}}).ok());
    EXPECT_EQ((*store)->version(), 2u);
    EXPECT_EQ(*(*store)->Get("a"), "two");
    // Entries of the old snapshot are gone with it.
    EXPECT_EQ((*store)->Get("b").status().code(), StatusCode::kNotFound);
  }
  auto reopened = StateStore::Open(dir_, StateStore::Mode::kReadOnly);
  ASSERT_TRUE(reopened.ok()) << reopened.status().ToString();
  EXPECT_EQ((*reopened)->version(), 2u);
  EXPECT_EQ(*(*reopened)->Get("a"), "two");
}

TEST_F(StateStoreTest, FailedWriteLeavesThePreviousSnapshotIntact) {
  auto store = StateStore::Open(dir_, StateStore::Mode::kCreateOrOpen);
  ASSERT_TRUE(store.ok());
  ASSERT_TRUE(WriteEntries(**store, {{"a", "good"}, {"b", "good"}}).ok());
  // The fill fails half way (as a full disk would fail a RocksDB write).
  Status failed = (*store)->WriteSnapshot([](const SnapshotSink& sink) {
    SV_RETURN_IF_ERROR(sink("a", "half"));
    SV_RETURN_IF_ERROR(sink("big", std::string(20 << 20, 'y')));  // flushed to the DB
    return Status::IoError("No space left on device");
  });
  EXPECT_EQ(failed.code(), StatusCode::kIoError);
  EXPECT_EQ((*store)->version(), 1u);
  EXPECT_EQ(*(*store)->Get("a"), "good");
  EXPECT_EQ((*store)->Get("big").status().code(), StatusCode::kNotFound);
  store->reset();
  auto reopened = StateStore::Open(dir_, StateStore::Mode::kCreateOrOpen);
  ASSERT_TRUE(reopened.ok());
  EXPECT_EQ(*(*reopened)->Get("b"), "good");
  // The next write succeeds and does not see the half-written entries.
  ASSERT_TRUE(WriteEntries(**reopened, {{"c", "new"}}).ok());
  EXPECT_EQ((*reopened)->Get("big").status().code(), StatusCode::kNotFound);
  EXPECT_EQ(*(*reopened)->Get("c"), "new");
}

// Large entries go to table files written directly and ingested; in any key order, every one
// reads back.
TEST_F(StateStoreTest, LargeEntriesInAnyKeyOrderReadBack) {
  auto store = StateStore::Open(dir_, StateStore::Mode::kCreateOrOpen);
  ASSERT_TRUE(store.ok()) << store.status().ToString();
  const std::string big(300 << 10, 'b');
  // Descending within "rows/", a second family, small entries in between.
  // Nested families whose key ranges interleave ("a/" spans "a/b/"), and large root keys.
  const std::vector<std::string> keys = {"rows/00000002", "small", "rows/00000001",
                                         "cols/00000000", "rows/00000003", "cols/00000001",
                                         "a/x", "a/b/y", "a/z", "big_root", "zz_root"};
  Status st = (*store)->WriteSnapshot([&](const SnapshotSink& sink) {
    for (size_t i = 0; i < keys.size(); ++i) {
      SV_RETURN_IF_ERROR(sink(keys[i], keys[i] == "small" ? "s" : big + keys[i]));
    }
    return Status::Ok();
  });
  ASSERT_TRUE(st.ok()) << st.ToString();
  for (const std::string& k : keys) {
    auto v = (*store)->Get(k);
    ASSERT_TRUE(v.ok()) << k << ": " << v.status().ToString();
    EXPECT_EQ(*v, k == "small" ? "s" : big + k) << k;
  }
  EXPECT_FALSE(fs::exists(fs::path(dir_) / "ingest")) << "table files left behind";
}

// A replaced snapshot's table files are dropped when the next one commits, not left to a
// compaction that a store of few, large files may never run.
TEST_F(StateStoreTest, ReplacedSnapshotsGiveTheirSpaceBackAtOnce) {
  auto store = StateStore::Open(dir_, StateStore::Mode::kCreateOrOpen);
  ASSERT_TRUE(store.ok()) << store.status().ToString();
  constexpr size_t kChunk = 256 << 10, kChunks = 32;  // 8 MiB a snapshot
  auto live_table_bytes = [this] { return TableBytes(dir_); };
  for (int v = 0; v < 6; ++v) {
    Status st = (*store)->WriteSnapshot([&](const SnapshotSink& sink) {
      char key[32];
      for (size_t c = 0; c < kChunks; ++c) {
        std::snprintf(key, sizeof key, "rows/%08zu", c);
        SV_RETURN_IF_ERROR(sink(key, std::string(kChunk, static_cast<char>('a' + v))));
      }
      return Status::Ok();
    });
    ASSERT_TRUE(st.ok()) << st.ToString();
  }
  // The current snapshot's 8 MiB (published checkpoints hold links of their own, elsewhere).
  EXPECT_LT(live_table_bytes(), uintmax_t{12} << 20);
  EXPECT_EQ((*store)->Get("rows/00000031")->front(), 'f');
}

TEST_F(StateStoreTest, FullDiskDuringAWriteLeavesThePreviousSnapshotIntact) {
  {
    StateStoreOptions full_soon;
    full_soon.fail_after_bytes = 2 << 20;  // RocksDB's own files fail with ENOSPC after 2 MiB
    auto store = StateStore::Open(dir_, StateStore::Mode::kCreateOrOpen, full_soon);
    ASSERT_TRUE(store.ok()) << store.status().ToString();
    ASSERT_TRUE(WriteEntries(**store, {{"a", "good"}}).ok());
    Status failed = WriteEntries(**store, {{"a", "new"}, {"big", std::string(8 << 20, 'z')}});
    ASSERT_FALSE(failed.ok());
    EXPECT_EQ(failed.code(), StatusCode::kIoError);
    EXPECT_NE(failed.message().find("No space"), std::string::npos) << failed.message();
    EXPECT_EQ((*store)->version(), 1u);
    EXPECT_EQ(*(*store)->Get("a"), "good");
  }
  // Space freed: the directory opens with the previous snapshot and takes new ones.
  auto store = StateStore::Open(dir_, StateStore::Mode::kCreateOrOpen);
  ASSERT_TRUE(store.ok()) << store.status().ToString();
  EXPECT_EQ((*store)->version(), 1u);
  EXPECT_EQ(*(*store)->Get("a"), "good");
  EXPECT_EQ((*store)->Get("big").status().code(), StatusCode::kNotFound);
  ASSERT_TRUE(WriteEntries(**store, {{"a", "after"}}).ok());
  EXPECT_EQ(*(*store)->Get("a"), "after");
}

TEST_F(StateStoreTest, DirectoryWithOtherFilesIsRefusedAndUntouched) {
  fs::create_directories(dir_);
  std::ofstream(fs::path(dir_) / "notes.txt") << "mine";
  auto store = StateStore::Open(dir_, StateStore::Mode::kCreateOrOpen);
  ASSERT_FALSE(store.ok());
  EXPECT_EQ(store.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(store.status().message().find("not empty"), std::string::npos);
  EXPECT_EQ(std::distance(fs::directory_iterator(dir_), fs::directory_iterator()), 1);
}

TEST_F(StateStoreTest, ForeignRocksDbIsRefused) {
  {
    rocksdb::Options options;
    options.create_if_missing = true;
    rocksdb::DB* db = nullptr;
    ASSERT_TRUE(rocksdb::DB::Open(options, dir_, &db).ok());
    ASSERT_TRUE(db->Put(rocksdb::WriteOptions(), "user", "data").ok());
    delete db;
  }
  auto store = StateStore::Open(dir_, StateStore::Mode::kCreateOrOpen);
  ASSERT_FALSE(store.ok());
  EXPECT_NE(store.status().message().find("not a streamvec state"), std::string::npos);
  rocksdb::DB* db = nullptr;
  ASSERT_TRUE(rocksdb::DB::OpenForReadOnly(rocksdb::Options(), dir_, &db).ok());
  std::string v;
  EXPECT_TRUE(db->Get(rocksdb::ReadOptions(), "meta/format", &v).IsNotFound());
  delete db;
}

TEST_F(StateStoreTest, DamagedDatabaseGivesAnErrorNotACrash) {
  {
    auto store = StateStore::Open(dir_, StateStore::Mode::kCreateOrOpen);
    ASSERT_TRUE(store.ok());
    ASSERT_TRUE(WriteEntries(**store, {{"a", "x"}}).ok());
  }
  std::ofstream(fs::path(dir_) / "CURRENT", std::ios::trunc) << "garbage\n";
  auto store = StateStore::Open(dir_, StateStore::Mode::kCreateOrOpen);
  ASSERT_FALSE(store.ok());
  EXPECT_NE(store.status().message().find(dir_), std::string::npos);
}

TEST_F(StateStoreTest, ReadOnlyOpenOfMissingStateIsNotFound) {
  auto store = StateStore::Open(dir_, StateStore::Mode::kReadOnly);
  ASSERT_FALSE(store.ok());
  EXPECT_EQ(store.status().code(), StatusCode::kNotFound);
  EXPECT_FALSE(fs::exists(dir_));
}

// 32 KiB of `fill`, its first bytes telling chunk `c` from the others.
std::string Chunk(char fill, size_t c = 0) {
  std::string s(size_t{32} << 10, fill);
  std::snprintf(s.data(), 16, "%015zu", c);
  return s;
}
std::string ChunkKey(size_t c) {
  char key[32];
  std::snprintf(key, sizeof key, "rows/%08zu", c);
  return key;
}

// A slow stream changes few rows between snapshots: only the entries whose bytes changed are
// written, and every entry reads back, from the writer, after a reopen and from the published
// checkpoint.
TEST_F(StateStoreTest, UnchangedEntriesAreNotWrittenAgain) {
  constexpr size_t kChunks = 32;
  std::vector<char> fills(kChunks, 'a');
  auto write = [&](StateStore& store) {
    return store.WriteSnapshot([&](const SnapshotSink& sink) {
      SV_RETURN_IF_ERROR(sink("scalars", "small value"));
      for (size_t c = 0; c < kChunks; ++c) SV_RETURN_IF_ERROR(sink(ChunkKey(c), Chunk(fills[c], c)));
      return Status::Ok();
    });
  };
  {
    auto store = StateStore::Open(dir_, StateStore::Mode::kCreateOrOpen);
    ASSERT_TRUE(store.ok()) << store.status().ToString();
    ASSERT_TRUE(write(**store).ok());
    EXPECT_EQ((*store)->last_write_stats().written_bytes, kChunks * Chunk('a').size() + 11);
    fills[3] = 'b';
    fills[17] = 'c';
    ASSERT_TRUE(write(**store).ok());
    const SnapshotWriteStats st = (*store)->last_write_stats();
    EXPECT_EQ(st.written_bytes, 2 * Chunk('a').size());
    EXPECT_EQ(st.entry_bytes, kChunks * Chunk('a').size() + 11);
    EXPECT_FALSE(st.full_rewrite);
    EXPECT_EQ(*(*store)->Get(ChunkKey(3)), Chunk('b', 3));
    EXPECT_EQ(*(*store)->Get(ChunkKey(4)), Chunk('a', 4));
    // Nothing changed: nothing written.
    ASSERT_TRUE(write(**store).ok());
    EXPECT_EQ((*store)->last_write_stats().written_bytes, 0u);
    EXPECT_EQ((*store)->version(), 3u);
  }
  auto check = [&](const std::function<StatusOr<std::string>(const std::string&)>& get) {
    for (size_t c = 0; c < kChunks; ++c) {
      StatusOr<std::string> v = get(ChunkKey(c));
      ASSERT_TRUE(v.ok()) << c << ": " << v.status().ToString();
      EXPECT_EQ(*v, Chunk(fills[c], c)) << c;
    }
    EXPECT_EQ(*get("scalars"), "small value");
  };
  auto reopened = StateStore::Open(dir_, StateStore::Mode::kCreateOrOpen);
  ASSERT_TRUE(reopened.ok()) << reopened.status().ToString();
  check([&](const std::string& k) { return (*reopened)->Get(k); });
  auto reader = SnapshotReader::OpenNewest(dir_);
  ASSERT_TRUE(reader.ok()) << reader.status().ToString();
  EXPECT_EQ((*reader)->version(), 3u);
  check([&](const std::string& k) { return (*reader)->Get(k); });
}

// A serving publication passes only its own entries; the rest of the last snapshot is kept.
TEST_F(StateStoreTest, KeepUnwrittenCarriesTheCurrentEntries) {
  auto store = StateStore::Open(dir_, StateStore::Mode::kCreateOrOpen);
  ASSERT_TRUE(store.ok()) << store.status().ToString();
  ASSERT_TRUE(WriteEntries(**store, {{"learner", Chunk('l')}, {"serving", "v1"}}).ok());
  SnapshotWriteOptions keep;
  keep.keep_unwritten = true;
  ASSERT_TRUE((*store)
                  ->WriteSnapshot(
                      [](const SnapshotSink& sink) { return sink("serving", Chunk('s')); }, "{}",
                      keep)
                  .ok());
  EXPECT_EQ((*store)->last_write_stats().written_bytes, Chunk('s').size());
  EXPECT_EQ(*(*store)->Get("learner"), Chunk('l'));
  EXPECT_EQ(*(*store)->Get("serving"), Chunk('s'));
  // Without keep_unwritten the new version holds only what is passed.
  ASSERT_TRUE(WriteEntries(**store, {{"serving", "v3"}}).ok());
  EXPECT_EQ((*store)->Get("learner").status().code(), StatusCode::kNotFound);
  EXPECT_EQ(*(*store)->Get("serving"), "v3");
}

// Entries with the same bytes under different keys (a serving table chunk equal to a learner's
// row chunk) are written once, in one version or across versions.
TEST_F(StateStoreTest, EqualBytesUnderAnotherKeyAreWrittenOnce) {
  auto store = StateStore::Open(dir_, StateStore::Mode::kCreateOrOpen);
  ASSERT_TRUE(store.ok()) << store.status().ToString();
  ASSERT_TRUE(WriteEntries(**store, {{"input/0", Chunk('x', 1)}, {"table/0", Chunk('x', 1)}}).ok());
  EXPECT_EQ((*store)->last_write_stats().written_bytes, Chunk('x').size());
  EXPECT_EQ((*store)->last_write_stats().entry_bytes, 2 * Chunk('x').size());
  // The key that wrote them goes; the other still reads them.
  ASSERT_TRUE(WriteEntries(**store, {{"table/0", Chunk('x', 1)}, {"input/0", Chunk('y', 1)}}).ok());
  EXPECT_EQ((*store)->last_write_stats().written_bytes, Chunk('y').size());
  ASSERT_TRUE(WriteEntries(**store, {{"table/0", Chunk('x', 1)}}).ok());
  EXPECT_EQ((*store)->last_write_stats().written_bytes, 0u);
  EXPECT_EQ(*(*store)->Get("table/0"), Chunk('x', 1));
  store->reset();
  auto reader = SnapshotReader::OpenNewest(dir_);
  ASSERT_TRUE(reader.ok()) << reader.status().ToString();
  EXPECT_EQ(*(*reader)->Get("table/0"), Chunk('x', 1));
  EXPECT_EQ((*reader)->Get("input/0").status().code(), StatusCode::kNotFound);
}

// A full rewrite of a partial snapshot writes the carried entries anew as well, so the old
// files go and the next snapshots are incremental again.
TEST_F(StateStoreTest, FullRewriteOfAPartialSnapshotRewritesTheCarriedEntries) {
  auto store = StateStore::Open(dir_, StateStore::Mode::kCreateOrOpen);
  ASSERT_TRUE(store.ok()) << store.status().ToString();
  ASSERT_TRUE(WriteEntries(**store, {{"learner", Chunk('l')}, {"serving", Chunk('s')}}).ok());
  SnapshotWriteOptions keep;
  keep.keep_unwritten = true;
  keep.full_rewrite = true;
  ASSERT_TRUE((*store)
                  ->WriteSnapshot(
                      [](const SnapshotSink& sink) { return sink("serving", Chunk('t')); }, "{}",
                      keep)
                  .ok());
  EXPECT_EQ((*store)->last_write_stats().written_bytes, 2 * Chunk('l').size());
  EXPECT_EQ((*store)->last_write_stats().disk_bytes, 2 * Chunk('l').size());
  EXPECT_EQ(*(*store)->Get("learner"), Chunk('l'));
  EXPECT_EQ(*(*store)->Get("serving"), Chunk('t'));
  keep.full_rewrite = false;
  ASSERT_TRUE((*store)
                  ->WriteSnapshot(
                      [](const SnapshotSink& sink) { return sink("serving", Chunk('u')); }, "{}",
                      keep)
                  .ok());
  EXPECT_EQ((*store)->last_write_stats().written_bytes, Chunk('u').size());
  EXPECT_FALSE((*store)->last_write_stats().full_rewrite);
}

// A damaged manifest is a clear error naming the directory, never a crash or a wrong entry.
TEST_F(StateStoreTest, DamagedManifestIsCorruptionNamingTheDirectory) {
  {
    auto store = StateStore::Open(dir_, StateStore::Mode::kCreateOrOpen);
    ASSERT_TRUE(store.ok()) << store.status().ToString();
    ASSERT_TRUE(WriteEntries(**store, {{"a", Chunk('a')}}).ok());
  }
  {
    rocksdb::DB* raw = nullptr;
    ASSERT_TRUE(rocksdb::DB::Open(rocksdb::Options(), dir_, &raw).ok());
    std::unique_ptr<rocksdb::DB> db(raw);
    ASSERT_TRUE(db->Put(rocksdb::WriteOptions(), "meta/manifest", "not a manifest").ok());
  }
  auto store = StateStore::Open(dir_, StateStore::Mode::kReadOnly);
  ASSERT_FALSE(store.ok());
  EXPECT_EQ(store.status().code(), StatusCode::kCorruption);
  EXPECT_NE(store.status().message().find(dir_), std::string::npos) << store.status().message();
}

TEST_F(StateStoreTest, AKeyPassedTwiceIsRefused) {
  auto store = StateStore::Open(dir_, StateStore::Mode::kCreateOrOpen);
  ASSERT_TRUE(store.ok()) << store.status().ToString();
  Status st = (*store)->WriteSnapshot([](const SnapshotSink& sink) {
    SV_RETURN_IF_ERROR(sink("a", "1"));
    return sink("a", "2");
  });
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("'a'"), std::string::npos) << st.message();
  EXPECT_EQ((*store)->version(), 0u);
}

// Superseded entries share table files with live ones; once a writer's live bytes fall under
// 1/kRewriteRatio of what it wrote, the next snapshot writes them again and its files go: the
// disk stays within a bound however long the stream, without rewriting everything.
TEST_F(StateStoreTest, MostlySupersededWritersAreEvacuated) {
  auto store = StateStore::Open(dir_, StateStore::Mode::kCreateOrOpen);
  ASSERT_TRUE(store.ok()) << store.status().ToString();
  constexpr size_t kChunks = 8;
  const uint64_t live = kChunks * Chunk('a').size();
  int evacuations = 0;
  uint64_t most = 0;
  std::vector<char> fills(kChunks, 'a');
  for (int v = 0; v < 40; ++v) {
    if (v > 0) fills[static_cast<size_t>(v) % kChunks] = static_cast<char>('b' + v % 20);
    Status st = (*store)->WriteSnapshot([&](const SnapshotSink& sink) {
      for (size_t c = 0; c < kChunks; ++c) SV_RETURN_IF_ERROR(sink(ChunkKey(c), Chunk(fills[c], c)));
      return Status::Ok();
    });
    ASSERT_TRUE(st.ok()) << st.ToString();
    const SnapshotWriteStats ws = (*store)->last_write_stats();
    EXPECT_EQ(ws.full_rewrite, v == 0);  // the first snapshot writes everything
    if (v > 0) {
      if (ws.written_bytes > Chunk('a').size()) ++evacuations;
      most = std::max(most, ws.written_bytes);
    }
    EXPECT_EQ(ws.entry_bytes, live);
    EXPECT_LE(ws.disk_bytes, static_cast<uint64_t>(kRewriteRatio * live) + Chunk('a').size());
    // Table files: the live ones (published checkpoints hold links of their own, elsewhere).
    EXPECT_LE(TableBytes(dir_), 2 * live + (64 << 10)) << "snapshot " << v;
  }
  for (size_t c = 0; c < kChunks; ++c) EXPECT_EQ(*(*store)->Get(ChunkKey(c)), Chunk(fills[c], c));
  EXPECT_GE(evacuations, 3);
  EXPECT_LT(most, live);  // never everything
}

// A state directory of the first layout (every entry under snap/<version>/) reads as it is and
// moves to the current one with its next snapshot.
TEST_F(StateStoreTest, FirstLayoutReadsAndIsUpgradedByTheNextSnapshot) {
  {
    rocksdb::Options o;
    o.create_if_missing = true;
    rocksdb::DB* raw = nullptr;
    ASSERT_TRUE(rocksdb::DB::Open(o, dir_, &raw).ok());
    std::unique_ptr<rocksdb::DB> db(raw);
    rocksdb::WriteOptions wo;
    ASSERT_TRUE(db->Put(wo, "meta/format", "streamvec-state v1").ok());
    ASSERT_TRUE(db->Put(wo, "meta/current", "7").ok());
    ASSERT_TRUE(db->Put(wo, "snap/0000000000000007/old", "kept").ok());
    ASSERT_TRUE(db->Put(wo, "snap/0000000000000007/big", Chunk('o')).ok());
  }
  auto store = StateStore::Open(dir_, StateStore::Mode::kCreateOrOpen);
  ASSERT_TRUE(store.ok()) << store.status().ToString();
  EXPECT_EQ((*store)->version(), 7u);
  EXPECT_EQ(*(*store)->Get("old"), "kept");
  SnapshotWriteOptions keep;
  keep.keep_unwritten = true;
  ASSERT_TRUE((*store)
                  ->WriteSnapshot([](const SnapshotSink& sink) { return sink("new", "n"); }, "{}",
                                  keep)
                  .ok());
  EXPECT_EQ(*(*store)->Get("old"), "kept");
  EXPECT_EQ(*(*store)->Get("big"), Chunk('o'));
  EXPECT_EQ(*(*store)->Get("new"), "n");
  store->reset();
  rocksdb::DB* raw = nullptr;
  ASSERT_TRUE(rocksdb::DB::OpenForReadOnly(rocksdb::Options(), dir_, &raw).ok());
  std::unique_ptr<rocksdb::DB> db(raw);
  std::string v;
  ASSERT_TRUE(db->Get(rocksdb::ReadOptions(), "meta/format", &v).ok());
  EXPECT_EQ(v, kStateFormat);
  EXPECT_TRUE(db->Get(rocksdb::ReadOptions(), "snap/0000000000000007/old", &v).IsNotFound());
}

}  // namespace
}  // namespace streamvec
