// Versioned snapshots: metadata, published checkpoints and their retention, SnapshotReader
// against a live writer, and the single-writer rule.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "streamvec/store/embedding_entries.h"
#include "streamvec/store/snapshot_reader.h"
#include "streamvec/store/state_store.h"

namespace streamvec {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

class SnapshotTest : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = fs::temp_directory_path() / ("streamvec_snapshot_" + std::to_string(::getpid()));
    fs::remove_all(root_);
    fs::create_directories(root_);
    dir_ = (root_ / "state").string();
  }
  void TearDown() override { fs::remove_all(root_); }

  static std::unique_ptr<StateStore> OpenOrDie(const std::string& dir,
                                               const StateStoreOptions& options = {}) {
    auto store = StateStore::Open(dir, StateStore::Mode::kCreateOrOpen, options);
    EXPECT_TRUE(store.ok()) << store.status().ToString();
    return store.ok() ? std::move(*store) : nullptr;
  }

  // Writes `n` entries "k<i>" whose values all name the version being written, so a reader can
  // tell a complete snapshot from a mix of two.
  static Status WriteTagged(StateStore& store, int n, const std::string& meta = "{}") {
    const std::string tag = "v" + std::to_string(store.version() + 1);
    return store.WriteSnapshot(
        [&](const SnapshotSink& sink) {
          for (int i = 0; i < n; ++i) {
            SV_RETURN_IF_ERROR(sink("k" + std::to_string(i), tag + ":" + std::string(1000, 'p')));
          }
          return Status::Ok();
        },
        meta);
  }

  // Every entry k0..k<n-1> of `reader` carries the reader's version.
  static void ExpectConsistent(const SnapshotReader& reader, int n) {
    const std::string tag = "v" + std::to_string(reader.version()) + ":";
    for (int i = 0; i < n; ++i) {
      StatusOr<std::string> v = reader.Get("k" + std::to_string(i));
      ASSERT_TRUE(v.ok()) << v.status().ToString();
      ASSERT_EQ(v->substr(0, tag.size()), tag) << "entry k" << i;
    }
  }

  std::vector<std::string> CheckpointDirs() const {
    std::vector<std::string> names;
    for (const auto& e : fs::directory_iterator(fs::path(dir_) / "checkpoints")) {
      names.push_back(e.path().filename().string());
    }
    std::sort(names.begin(), names.end());
    return names;
  }

  fs::path root_;
  std::string dir_;
};

TEST_F(SnapshotTest, MetadataRoundTripsWithVersionAndCreatedAt) {
  auto store = OpenOrDie(dir_);
  ASSERT_NE(store, nullptr);
  EXPECT_EQ(store->CurrentMetadata().status().code(), StatusCode::kNotFound);
  ASSERT_TRUE(
      WriteTagged(*store, 3, R"({"offsets": {"0": 42}, "words": 1000, "version": 99})").ok());
  StatusOr<std::string> meta = store->CurrentMetadata();
  ASSERT_TRUE(meta.ok()) << meta.status().ToString();
  const json j = json::parse(*meta);
  EXPECT_EQ(j["offsets"]["0"], 42);
  EXPECT_EQ(j["words"], 1000);
  EXPECT_EQ(j["version"], 1u);  // the store's version replaces the caller's
  ASSERT_TRUE(j["created_at"].is_number_float());
  const double now = static_cast<double>(std::time(nullptr));
  EXPECT_GT(j["created_at"].get<double>(), now - 3600);
  EXPECT_LT(j["created_at"].get<double>(), now + 3600);

  // The published copy and the reader's info are the same object.
  auto list = SnapshotReader::List(dir_);
  ASSERT_TRUE(list.ok()) << list.status().ToString();
  ASSERT_EQ(list->size(), 1u);
  EXPECT_EQ((*list)[0].version, 1u);
  EXPECT_EQ((*list)[0].created_at, j["created_at"].get<double>());
  EXPECT_EQ((*list)[0].metadata_json, *meta);
  std::ifstream file(fs::path(dir_) / "checkpoints" / "00000000000000000001" / "metadata.json");
  EXPECT_EQ(json::parse(file), j);

  // It survives a reopen, read-only too.
  store.reset();
  auto reopened = StateStore::Open(dir_, StateStore::Mode::kReadOnly);
  ASSERT_TRUE(reopened.ok()) << reopened.status().ToString();
  EXPECT_EQ(*(*reopened)->CurrentMetadata(), *meta);
}

TEST_F(SnapshotTest, MetadataThatIsNotAJsonObjectIsRejectedAndNothingIsWritten) {
  auto store = OpenOrDie(dir_);
  ASSERT_NE(store, nullptr);
  ASSERT_TRUE(WriteTagged(*store, 1, R"({"a": 1})").ok());
  for (const char* bad : {"[1, 2]", "42", "\"text\"", "{not json", ""}) {
    bool filled = false;
    Status st = store->WriteSnapshot(
        [&](const SnapshotSink&) {
          filled = true;
          return Status::Ok();
        },
        bad);
    EXPECT_EQ(st.code(), StatusCode::kInvalidArgument) << bad;
    EXPECT_FALSE(filled) << bad;
  }
  EXPECT_EQ(store->version(), 1u);
  EXPECT_EQ(json::parse(*store->CurrentMetadata())["a"], 1);
}

TEST_F(SnapshotTest, CheckpointsArePublishedAndOnlyTheNewestRetainedAreKept) {
  StateStoreOptions options;
  options.retain = 2;
  auto store = OpenOrDie(dir_, options);
  ASSERT_NE(store, nullptr);
  for (int i = 0; i < 5; ++i) {
    ASSERT_TRUE(WriteTagged(*store, 4).ok());
    EXPECT_TRUE(store->last_publish_error().ok()) << store->last_publish_error().ToString();
  }
  EXPECT_EQ(CheckpointDirs(),
            (std::vector<std::string>{"00000000000000000004", "00000000000000000005"}));
  auto list = SnapshotReader::List(dir_);
  ASSERT_TRUE(list.ok());
  ASSERT_EQ(list->size(), 2u);
  EXPECT_EQ((*list)[0].version, 4u);  // oldest first
  EXPECT_EQ((*list)[1].version, 5u);
  EXPECT_LE((*list)[0].created_at, (*list)[1].created_at);
  // Each retained checkpoint is a complete snapshot of its own version, openable by RocksDB.
  auto reader = SnapshotReader::OpenNewest(dir_);
  ASSERT_TRUE(reader.ok()) << reader.status().ToString();
  EXPECT_EQ((*reader)->version(), 5u);
  ExpectConsistent(**reader, 4);
  EXPECT_EQ((*reader)->Get("missing").status().code(), StatusCode::kNotFound);
}

// An older retained version opens by its number and holds its own entries; a retired or
// never-written one is NotFound naming the version.
TEST_F(SnapshotTest, RetainedVersionOpensByNumberAndARetiredOneIsNotFound) {
  StateStoreOptions options;
  options.retain = 2;
  auto store = OpenOrDie(dir_, options);
  ASSERT_NE(store, nullptr);
  for (int i = 0; i < 4; ++i) ASSERT_TRUE(WriteTagged(*store, 3).ok());
  auto older = SnapshotReader::Open(dir_, 3);
  ASSERT_TRUE(older.ok()) << older.status().ToString();
  EXPECT_EQ((*older)->version(), 3u);
  ExpectConsistent(**older, 3);
  auto newest = SnapshotReader::Open(dir_, 4);
  ASSERT_TRUE(newest.ok()) << newest.status().ToString();
  ExpectConsistent(**newest, 3);
  for (uint64_t gone : {1u, 2u, 9u}) {
    const Status s = SnapshotReader::Open(dir_, gone).status();
    EXPECT_EQ(s.code(), StatusCode::kNotFound) << gone;
    EXPECT_NE(s.message().find("snapshot " + std::to_string(gone) + " "), std::string::npos)
        << s.ToString();
  }
}

// Word counts ride beside the embedding: read back equal, absent in a snapshot without them,
// and a wrong size or a negative count is Corruption; a bad count is refused at write.
TEST_F(SnapshotTest, EmbeddingCountsRoundTripAndAreCheckedOnBothSides) {
  const std::vector<double> counts = {1e9 + 0.5, 7, 7, 0.25, 0};
  auto store = OpenOrDie(dir_);
  ASSERT_NE(store, nullptr);
  ASSERT_TRUE(store
                  ->WriteSnapshot(
                      [&](const SnapshotSink& sink) { return WriteEmbeddingCounts(counts, sink); })
                  .ok());
  auto reader = SnapshotReader::OpenNewest(dir_);
  ASSERT_TRUE(reader.ok()) << reader.status().ToString();
  auto get = [&](const std::string& key) { return (*reader)->Get(key); };
  StatusOr<std::vector<double>> back = ReadEmbeddingCounts(get, counts.size());
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(*back, counts);
  EXPECT_EQ(ReadEmbeddingCounts(get, counts.size() + 1).status().code(), StatusCode::kCorruption);
  auto negative = [](const std::string&) -> StatusOr<std::string> {
    const double bad[] = {1, -2, 0, 0, 0};
    return std::string(reinterpret_cast<const char*>(bad), sizeof bad);
  };
  EXPECT_EQ(ReadEmbeddingCounts(negative, 5).status().code(), StatusCode::kCorruption);
  // A snapshot of a state with no word yet: no counts (UBSan's null-pointer check guards it).
  auto empty = [](const std::string&) -> StatusOr<std::string> { return std::string(); };
  StatusOr<std::vector<double>> none = ReadEmbeddingCounts(empty, 0);
  ASSERT_TRUE(none.ok()) << none.status().ToString();
  EXPECT_TRUE(none->empty());

  ASSERT_TRUE(WriteTagged(*store, 1).ok());
  auto without = SnapshotReader::OpenNewest(dir_);
  ASSERT_TRUE(without.ok());
  EXPECT_EQ(ReadEmbeddingCounts([&](const std::string& k) { return (*without)->Get(k); }, 5)
                .status()
                .code(),
            StatusCode::kNotFound);
  const SnapshotSink ignore = [](const std::string&, std::string_view) { return Status::Ok(); };
  EXPECT_EQ(WriteEmbeddingCounts({1, std::nan("")}, ignore).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(WriteEmbeddingCounts({-1}, ignore).code(), StatusCode::kInvalidArgument);
}

TEST_F(SnapshotTest, ReaderSeesNotFoundBeforeTheFirstSnapshot) {
  EXPECT_EQ(SnapshotReader::OpenNewest(dir_).status().code(), StatusCode::kNotFound);
  EXPECT_EQ(SnapshotReader::List(dir_).status().code(), StatusCode::kNotFound);
  auto store = OpenOrDie(dir_);
  ASSERT_NE(store, nullptr);
  auto list = SnapshotReader::List(dir_);
  ASSERT_TRUE(list.ok()) << list.status().ToString();
  EXPECT_TRUE(list->empty());
  EXPECT_EQ(SnapshotReader::OpenNewest(dir_).status().code(), StatusCode::kNotFound);
  ASSERT_TRUE(WriteTagged(*store, 1).ok());
  auto reader = SnapshotReader::OpenNewest(dir_);
  ASSERT_TRUE(reader.ok()) << reader.status().ToString();
  EXPECT_EQ((*reader)->version(), 1u);
}

TEST_F(SnapshotTest, ReadersSeeCompleteSnapshotsWhileTheWriterKeepsWriting) {
  constexpr int kEntries = 50;
  constexpr int kVersions = 25;
  StateStoreOptions options;
  options.retain = 2;  // the writer retires checkpoints under the readers' feet
  auto store = OpenOrDie(dir_, options);
  ASSERT_NE(store, nullptr);

  // A concurrent reader thread: every snapshot it opens must be whole and of one version, and
  // versions never go backwards.
  std::atomic<bool> writer_done{false};
  std::atomic<int> opened{0};
  std::atomic<int> failures{0};
  std::string first_failure;
  std::thread reader_thread([&] {
    uint64_t last = 0;
    bool once_more = true;
    while (!writer_done.load() || once_more) {
      if (writer_done.load()) once_more = false;
      auto reader = SnapshotReader::OpenNewest(dir_);
      if (!reader.ok()) {
        if (reader.status().code() == StatusCode::kNotFound && last == 0) continue;  // too early
        if (failures++ == 0) first_failure = reader.status().ToString();
        continue;
      }
      const std::string tag = "v" + std::to_string((*reader)->version()) + ":";
      for (int i = 0; i < kEntries; ++i) {
        auto v = (*reader)->Get("k" + std::to_string(i));
        if (!v.ok() || v->compare(0, tag.size(), tag) != 0) {
          if (failures++ == 0) first_failure = "inconsistent entry k" + std::to_string(i);
          break;
        }
      }
      if ((*reader)->version() < last && failures++ == 0) first_failure = "version went back";
      last = (*reader)->version();
      ++opened;
    }
  });

  // The writer thread interleaves its own reads; a reader opened before later writes keeps
  // reading its version even after the writer retired that checkpoint.
  std::unique_ptr<SnapshotReader> held;
  for (int v = 1; v <= kVersions; ++v) {
    ASSERT_TRUE(WriteTagged(*store, kEntries).ok());
    ASSERT_TRUE(store->last_publish_error().ok()) << store->last_publish_error().ToString();
    auto reader = SnapshotReader::OpenNewest(dir_);
    ASSERT_TRUE(reader.ok()) << reader.status().ToString();
    EXPECT_EQ((*reader)->version(), static_cast<uint64_t>(v));
    ExpectConsistent(**reader, kEntries);
    if (v == 3) held = std::move(*reader);
  }
  writer_done = true;
  reader_thread.join();
  EXPECT_EQ(failures.load(), 0) << first_failure;
  EXPECT_GT(opened.load(), 0);
  ASSERT_NE(held, nullptr);
  EXPECT_FALSE(fs::exists(fs::path(dir_) / "checkpoints" / "00000000000000000003"));
  EXPECT_EQ(held->version(), 3u);
  ExpectConsistent(*held, kEntries);
}

TEST_F(SnapshotTest, EmbeddingRoundTripsThroughASnapshotAndAReader) {
  Embeddings e;
  e.dim = 300;
  for (int i = 0; i < 5000; ++i) e.words.push_back("w" + std::to_string(i));  // > one 4 MiB chunk
  e.vectors.resize(e.words.size() * e.dim);
  for (size_t i = 0; i < e.vectors.size(); ++i) e.vectors[i] = static_cast<float>(i) * 0.25f - 7;
  auto store = OpenOrDie(dir_);
  ASSERT_NE(store, nullptr);
  ASSERT_TRUE(store
                  ->WriteSnapshot([&](const SnapshotSink& sink) {
                    SV_RETURN_IF_ERROR(sink("learner/state", "opaque"));
                    return WriteEmbeddingEntries(e, sink);
                  })
                  .ok());
  auto reader = SnapshotReader::OpenNewest(dir_);
  ASSERT_TRUE(reader.ok()) << reader.status().ToString();
  auto get = [&](const std::string& key) { return (*reader)->Get(key); };
  StatusOr<Embeddings> back = ReadEmbeddingEntries(get);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(back->dim, e.dim);
  EXPECT_EQ(back->words, e.words);
  EXPECT_EQ(back->vectors, e.vectors);
  ASSERT_TRUE((*reader)->Get("embedding/rows/1").ok());  // really more than one chunk

  // A missing or short chunk is Corruption, never a crash or a short table.
  auto without_chunk = [&](const std::string& key) -> StatusOr<std::string> {
    if (key == "embedding/rows/1") return Status::NotFound(key);
    return get(key);
  };
  EXPECT_EQ(ReadEmbeddingEntries(without_chunk).status().code(), StatusCode::kCorruption);
  auto short_chunk = [&](const std::string& key) -> StatusOr<std::string> {
    StatusOr<std::string> v = get(key);
    if (key == "embedding/rows/0" && v.ok()) v->resize(v->size() - 4);
    return v;
  };
  EXPECT_EQ(ReadEmbeddingEntries(short_chunk).status().code(), StatusCode::kCorruption);

  // A snapshot written with a chunk missing (a broken writer) reads as Corruption too.
  ASSERT_TRUE(store
                  ->WriteSnapshot([&](const SnapshotSink& sink) {
                    return WriteEmbeddingEntries(e, [&](const std::string& k, std::string_view v) {
                      return k == "embedding/rows/1" ? Status::Ok() : sink(k, v);
                    });
                  })
                  .ok());
  auto broken = SnapshotReader::OpenNewest(dir_);
  ASSERT_TRUE(broken.ok());
  EXPECT_EQ(
      ReadEmbeddingEntries([&](const std::string& k) { return (*broken)->Get(k); }).status().code(),
      StatusCode::kCorruption);
  // A snapshot without an embedding is NotFound.
  ASSERT_TRUE(WriteTagged(*store, 1).ok());
  auto none = SnapshotReader::OpenNewest(dir_);
  ASSERT_TRUE(none.ok());
  EXPECT_EQ(
      ReadEmbeddingEntries([&](const std::string& k) { return (*none)->Get(k); }).status().code(),
      StatusCode::kNotFound);
}

// The table layout: rows in a stable order with a stride of their own, words served most
// frequent first through their slots; a chunk equal to another entry (a learner's rows) is
// stored once, and one changed row rewrites one chunk.
TEST_F(SnapshotTest, EmbeddingTableRoundTripsAndSharesEqualChunks) {
  constexpr int kDim = 5, kStride = 8;
  constexpr size_t kSlots = 1000, kPerChunk = 64;
  std::vector<float> table(kSlots * kStride);
  for (size_t i = 0; i < table.size(); ++i) table[i] = static_cast<float>(i) * 0.5f - 3;
  std::vector<const float*> rows(kSlots);
  for (size_t r = 0; r < kSlots; ++r) rows[r] = table.data() + r * kStride;
  rows[7] = nullptr;  // not used by any word: zeros
  std::vector<std::string> words;
  std::vector<uint32_t> slots;
  for (uint32_t s = kSlots - 1; s > 500; s -= 3) {  // served order unlike slot order
    words.push_back("w" + std::to_string(s));
    slots.push_back(s);
  }
  auto store = OpenOrDie(dir_);
  ASSERT_NE(store, nullptr);
  auto write = [&] {
    return store->WriteSnapshot([&](const SnapshotSink& sink) {
      // The "learner's" own entry for the rows of chunk 3.
      SV_RETURN_IF_ERROR(sink("input/00000003",
                              std::string_view(reinterpret_cast<const char*>(rows[3 * kPerChunk]),
                                               kPerChunk * kStride * sizeof(float))));
      return WriteEmbeddingTable(words, slots, rows, kDim, kStride, kPerChunk, sink);
    });
  };
  ASSERT_TRUE(write().ok());
  const uint64_t chunk_bytes = kPerChunk * kStride * sizeof(float);
  EXPECT_EQ(store->last_write_stats().entry_bytes - store->last_write_stats().written_bytes,
            chunk_bytes);  // chunk 3 once
  table[900 * kStride + 1] = 42;  // one row of the served words changes
  ASSERT_TRUE(write().ok());
  EXPECT_LT(store->last_write_stats().written_bytes, chunk_bytes + (16 << 10));
  auto reader = SnapshotReader::OpenNewest(dir_);
  ASSERT_TRUE(reader.ok()) << reader.status().ToString();
  StatusOr<Embeddings> back =
      ReadEmbeddingEntries([&](const std::string& k) { return (*reader)->Get(k); });
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(back->dim, kDim);
  EXPECT_EQ(back->words, words);
  for (size_t i = 0; i < words.size(); ++i) {
    for (int d = 0; d < kDim; ++d) {
      ASSERT_EQ(back->vectors[i * kDim + d], table[slots[i] * kStride + d]) << words[i] << " " << d;
    }
  }
  // A missing table chunk or malformed slots read as Corruption, never a short table.
  auto get = [&](const std::string& key) { return (*reader)->Get(key); };
  auto without_chunk = [&](const std::string& key) -> StatusOr<std::string> {
    if (key == "embedding/table/00000002") return Status::NotFound(key);
    return get(key);
  };
  EXPECT_EQ(ReadEmbeddingEntries(without_chunk).status().code(), StatusCode::kCorruption);
  auto short_slots = [&](const std::string& key) -> StatusOr<std::string> {
    StatusOr<std::string> v = get(key);
    if (key == "embedding/slots" && v.ok()) v->resize(v->size() - 4);
    return v;
  };
  EXPECT_EQ(ReadEmbeddingEntries(short_slots).status().code(), StatusCode::kCorruption);
  // A slot outside the table, or used twice, is refused before anything is written.
  std::vector<uint32_t> bad = slots;
  bad.back() = kSlots;
  EXPECT_EQ(WriteEmbeddingTable(words, bad, rows, kDim, kStride, kPerChunk,
                                [](const std::string&, std::string_view) { return Status::Ok(); })
                .code(),
            StatusCode::kInvalidArgument);
  bad.back() = bad.front();
  EXPECT_EQ(WriteEmbeddingTable(words, bad, rows, kDim, kStride, kPerChunk,
                                [](const std::string&, std::string_view) { return Status::Ok(); })
                .code(),
            StatusCode::kInvalidArgument);
}

TEST_F(SnapshotTest, SecondWriterInThisProcessIsRefusedAsInUse) {
  auto first = OpenOrDie(dir_);
  ASSERT_NE(first, nullptr);
  ASSERT_TRUE(WriteTagged(*first, 1).ok());
  auto second = StateStore::Open(dir_, StateStore::Mode::kCreateOrOpen);
  ASSERT_FALSE(second.ok());
  EXPECT_EQ(second.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(
      second.status().message().find("state directory " + dir_ + " is in use by another process"),
      std::string::npos)
      << second.status().message();
  // Readers never conflict with the writer, and the writer is unaffected.
  EXPECT_TRUE(StateStore::Open(dir_, StateStore::Mode::kReadOnly).ok());
  EXPECT_TRUE(SnapshotReader::OpenNewest(dir_).ok());
  ASSERT_TRUE(WriteTagged(*first, 1).ok());
  first.reset();
  EXPECT_NE(OpenOrDie(dir_), nullptr);  // free again once the writer is gone
}

TEST_F(SnapshotTest, WriterInAnotherProcessIsRefusedAsInUse) {
  { ASSERT_NE(OpenOrDie(dir_), nullptr); }
  // The child takes RocksDB's lock the way RocksDB does (an fcntl write lock on <dir>/LOCK) and
  // holds it until told to exit; it runs nothing but system calls after fork.
  int ready[2], quit[2];
  ASSERT_EQ(::pipe(ready), 0);
  ASSERT_EQ(::pipe(quit), 0);
  const std::string lock_path = dir_ + "/LOCK";
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    const int fd = ::open(lock_path.c_str(), O_RDWR);
    struct flock f;
    std::memset(&f, 0, sizeof f);
    f.l_type = F_WRLCK;
    f.l_whence = SEEK_SET;
    const char ok = (fd >= 0 && ::fcntl(fd, F_SETLK, &f) == 0) ? 'y' : 'n';
    (void)!::write(ready[1], &ok, 1);
    char c;
    (void)!::read(quit[0], &c, 1);
    ::_exit(0);
  }
  char ok = 0;
  ASSERT_EQ(::read(ready[0], &ok, 1), 1);
  ASSERT_EQ(ok, 'y');
  auto store = StateStore::Open(dir_, StateStore::Mode::kCreateOrOpen);
  (void)!::write(quit[1], "x", 1);
  int wstatus = 0;
  ::waitpid(child, &wstatus, 0);
  for (int fd : {ready[0], ready[1], quit[0], quit[1]}) ::close(fd);
  ASSERT_FALSE(store.ok());
  EXPECT_EQ(store.status().code(), StatusCode::kFailedPrecondition) << store.status().ToString();
  EXPECT_NE(store.status().message().find("is in use by another process"), std::string::npos)
      << store.status().message();
}

TEST_F(SnapshotTest, ReopeningContinuesVersionsAndKeepsPublishing) {
  {
    auto store = OpenOrDie(dir_);
    ASSERT_NE(store, nullptr);
    ASSERT_TRUE(WriteTagged(*store, 2).ok());
    ASSERT_TRUE(WriteTagged(*store, 2).ok());
  }
  // A state directory with its checkpoints/ subdirectory opens as a state.
  ASSERT_TRUE(fs::is_directory(fs::path(dir_) / "checkpoints"));
  auto store = OpenOrDie(dir_);
  ASSERT_NE(store, nullptr);
  EXPECT_EQ(store->version(), 2u);
  ASSERT_TRUE(WriteTagged(*store, 2).ok());
  EXPECT_EQ(store->version(), 3u);
  EXPECT_EQ(json::parse(*store->CurrentMetadata())["version"], 3u);
  auto list = SnapshotReader::List(dir_);
  ASSERT_TRUE(list.ok());
  ASSERT_EQ(list->size(), 3u);
  EXPECT_EQ(list->back().version, 3u);
  auto reader = SnapshotReader::OpenNewest(dir_);
  ASSERT_TRUE(reader.ok());
  ExpectConsistent(**reader, 2);
}

TEST_F(SnapshotTest, FailedPublishKeepsTheCommittedSnapshotAndIsRetriedAtOpen) {
  auto store = OpenOrDie(dir_);
  ASSERT_NE(store, nullptr);
  ASSERT_TRUE(WriteTagged(*store, 2).ok());
  // Make publishing impossible: a plain file where the checkpoints directory should be.
  const fs::path checkpoints = fs::path(dir_) / "checkpoints";
  fs::remove_all(checkpoints);
  std::ofstream(checkpoints) << "in the way";
  Status st = WriteTagged(*store, 2, R"({"n": 2})");
  EXPECT_TRUE(st.ok()) << st.ToString();  // the commit is what counts
  EXPECT_EQ(store->version(), 2u);
  EXPECT_EQ(*store->Get("k0"), "v2:" + std::string(1000, 'p'));
  EXPECT_FALSE(store->last_publish_error().ok());
  EXPECT_NE(store->last_publish_error().message().find("checkpoint"), std::string::npos)
      << store->last_publish_error().ToString();
  EXPECT_EQ(SnapshotReader::OpenNewest(dir_).status().code(), StatusCode::kNotFound);

  // Once the obstacle is gone, reopening publishes the committed snapshot.
  store.reset();
  fs::remove(checkpoints);
  store = OpenOrDie(dir_);
  ASSERT_NE(store, nullptr);
  EXPECT_TRUE(store->last_publish_error().ok()) << store->last_publish_error().ToString();
  auto reader = SnapshotReader::OpenNewest(dir_);
  ASSERT_TRUE(reader.ok()) << reader.status().ToString();
  EXPECT_EQ((*reader)->version(), 2u);
  EXPECT_EQ(json::parse((*reader)->info().metadata_json)["n"], 2);
  ExpectConsistent(**reader, 2);
}

TEST_F(SnapshotTest, FullDiskDuringAPublishOrWriteKeepsTheLastGoodCheckpoint) {
  {
    StateStoreOptions full_soon;
    full_soon.fail_after_bytes = 2 << 20;
    auto store = OpenOrDie(dir_, full_soon);
    ASSERT_NE(store, nullptr);
    ASSERT_TRUE(WriteTagged(*store, 2).ok());
    Status failed = store->WriteSnapshot(
        [](const SnapshotSink& sink) { return sink("big", std::string(8 << 20, 'z')); });
    EXPECT_EQ(failed.code(), StatusCode::kIoError);
  }
  auto reader = SnapshotReader::OpenNewest(dir_);
  ASSERT_TRUE(reader.ok()) << reader.status().ToString();
  EXPECT_EQ((*reader)->version(), 1u);
  ExpectConsistent(**reader, 2);
  EXPECT_EQ(CheckpointDirs(), std::vector<std::string>{"00000000000000000001"});
}

TEST_F(SnapshotTest, ForeignDirectoryIsNotAStateForReaders) {
  fs::create_directories(dir_);
  std::ofstream(fs::path(dir_) / "notes.txt") << "mine";
  EXPECT_EQ(SnapshotReader::List(dir_).status().code(), StatusCode::kNotFound);
  EXPECT_EQ(SnapshotReader::OpenNewest(dir_).status().code(), StatusCode::kNotFound);
  EXPECT_FALSE(StateStore::Open(dir_, StateStore::Mode::kCreateOrOpen).ok());
}

}  // namespace
}  // namespace streamvec
