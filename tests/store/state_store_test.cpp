#include "streamvec/store/state_store.h"

#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include <rocksdb/db.h>

#include <gtest/gtest.h>

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
  auto live_table_bytes = [this] {
    uintmax_t bytes = 0;
    for (const auto& e : fs::directory_iterator(dir_)) {
      if (e.path().extension() == ".sst") bytes += e.file_size();
    }
    return bytes;
  };
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

}  // namespace
}  // namespace streamvec
