// A damaged state directory: VerifyState says which snapshots are intact, RepairState and
// StateStore::Open (restore_damaged) resume from the newest intact one, and readers skip the
// damaged ones. Damage is made as a bad disk makes it: a truncated table file, an overwritten
// CURRENT file, a garbled metadata.json.
#include "streamvec/store/state_check.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "streamvec/store/snapshot_reader.h"
#include "streamvec/store/state_store.h"

namespace streamvec {
namespace {

namespace fs = std::filesystem;

std::string ReadAll(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

class StateCheckTest : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = fs::temp_directory_path() /
            ("streamvec_state_check_" + std::to_string(::getpid()) + "_" +
             ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(root_);
    fs::create_directories(root_);
    dir_ = (root_ / "state").string();
  }
  void TearDown() override { fs::remove_all(root_); }

  // Snapshots 1..n, each with entries of its own (large: into table files of their own) and
  // {"offset": 100 * version} as metadata.
  void WriteSnapshots(int n) {
    auto store = StateStore::Open(dir_, StateStore::Mode::kCreateOrOpen);
    ASSERT_TRUE(store.ok()) << store.status().ToString();
    for (int v = 1; v <= n; ++v) {
      Status s = (*store)->WriteSnapshot(
          [v](const SnapshotSink& sink) {
            for (int i = 0; i < 4; ++i) {
              SV_RETURN_IF_ERROR(sink("rows/" + std::to_string(i), Value(v, i)));
            }
            return Status::Ok();
          },
          "{\"offset\": " + std::to_string(100 * v) + "}");
      ASSERT_TRUE(s.ok()) << s.ToString();
      ASSERT_TRUE((*store)->last_publish_error().ok());
    }
  }
  static std::string Value(int version, int i) {
    return std::string(20000, static_cast<char>('a' + version)) + std::to_string(i);
  }
  fs::path Checkpoint(uint64_t v) const {
    char name[32];
    std::snprintf(name, sizeof name, "%020llu", static_cast<unsigned long long>(v));
    return fs::path(dir_) / "checkpoints" / name;
  }
  static std::set<std::string> Tables(const fs::path& db) {
    std::set<std::string> out;
    for (const auto& e : fs::directory_iterator(db)) {
      if (e.path().extension() == ".sst") out.insert(e.path().filename().string());
    }
    return out;
  }
  // Truncates a table file that checkpoint v holds and checkpoint v - 1 does not (the live
  // database holds it too: checkpoints are hard links of its files).
  void TruncateNewTableOf(uint64_t v) {
    const std::set<std::string> older =
        v > 1 ? Tables(Checkpoint(v - 1) / "db") : std::set<std::string>{};
    for (const std::string& t : Tables(Checkpoint(v) / "db")) {
      if (older.count(t)) continue;
      const fs::path p = Checkpoint(v) / "db" / t;
      fs::resize_file(p, fs::file_size(p) / 2);
      return;
    }
    FAIL() << "checkpoint " << v << " has no table file of its own";
  }
  std::vector<fs::path> Aside() const {
    std::vector<fs::path> out;
    const fs::path d = fs::path(dir_) / "damaged";
    if (!fs::exists(d)) return out;
    for (const auto& e : fs::directory_iterator(d)) out.push_back(e.path());
    return out;
  }

  fs::path root_;
  std::string dir_;
};

TEST_F(StateCheckTest, AnIntactStateVerifiesIntactAndRepairChangesNothing) {
  WriteSnapshots(3);
  StatusOr<StateHealth> h = VerifyState(dir_);
  ASSERT_TRUE(h.ok()) << h.status().ToString();
  EXPECT_TRUE(h->intact());
  EXPECT_TRUE(h->live_checked);
  EXPECT_EQ(h->live.version, 3u);
  ASSERT_EQ(h->checkpoints.size(), 3u);
  EXPECT_EQ(h->checkpoints[0].version, 1u);
  EXPECT_EQ(h->checkpoints[2].version, 3u);
  StatusOr<StateRepair> r = RepairState(dir_);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_TRUE(r->actions.empty());
  EXPECT_EQ(r->version, 3u);
  EXPECT_TRUE(Aside().empty());
}

TEST_F(StateCheckTest, ATruncatedTableFileIsFoundAndTheSnapshotNamed) {
  WriteSnapshots(3);
  TruncateNewTableOf(3);
  StatusOr<StateHealth> h = VerifyState(dir_);
  ASSERT_TRUE(h.ok()) << h.status().ToString();
  EXPECT_FALSE(h->intact());
  EXPECT_EQ(h->live.status.code(), StatusCode::kCorruption) << h->live.status.ToString();
  ASSERT_EQ(h->checkpoints.size(), 3u);
  EXPECT_TRUE(h->checkpoints[0].status.ok()) << h->checkpoints[0].status.ToString();
  EXPECT_TRUE(h->checkpoints[1].status.ok()) << h->checkpoints[1].status.ToString();
  EXPECT_EQ(h->checkpoints[2].status.code(), StatusCode::kCorruption);
  EXPECT_NE(h->checkpoints[2].status.message().find(Checkpoint(3).string()), std::string::npos)
      << h->checkpoints[2].status.message();
}

TEST_F(StateCheckTest, AFlippedByteInAnEntryIsFoundByItsChecksum) {
  WriteSnapshots(2);
  // A byte inside a data block of a table only checkpoint 2 holds.
  const std::set<std::string> older = Tables(Checkpoint(1) / "db");
  fs::path victim;
  for (const std::string& t : Tables(Checkpoint(2) / "db")) {
    if (!older.count(t)) victim = Checkpoint(2) / "db" / t;
  }
  ASSERT_FALSE(victim.empty());
  {
    std::fstream f(victim, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(100);
    f.put('\x01');
  }
  StatusOr<StateHealth> h = VerifyState(dir_);
  ASSERT_TRUE(h.ok()) << h.status().ToString();
  ASSERT_EQ(h->checkpoints.size(), 2u);
  EXPECT_TRUE(h->checkpoints[0].status.ok());
  EXPECT_EQ(h->checkpoints[1].status.code(), StatusCode::kCorruption)
      << h->checkpoints[1].status.ToString();
  EXPECT_FALSE(h->live.status.ok());
}

// What `run` and `train` do (restore_damaged): resume from the newest intact checkpoint, say
// which one was skipped and why, keep the damaged files.
TEST_F(StateCheckTest, OpenRestoresADamagedLiveDatabaseFromTheNewestIntactCheckpoint) {
  WriteSnapshots(3);
  TruncateNewTableOf(3);
  // Without the option the damaged directory is refused, and left as it is.
  StatusOr<std::unique_ptr<StateStore>> refused =
      StateStore::Open(dir_, StateStore::Mode::kCreateOrOpen);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), StatusCode::kCorruption) << refused.status().ToString();
  EXPECT_TRUE(Aside().empty());

  StateStoreOptions options;
  options.restore_damaged = true;
  StatusOr<std::unique_ptr<StateStore>> store =
      StateStore::Open(dir_, StateStore::Mode::kCreateOrOpen, options);
  ASSERT_TRUE(store.ok()) << store.status().ToString();
  const StateRestore& r = (*store)->restore();
  ASSERT_TRUE(r.restored);
  EXPECT_EQ(r.version, 2u);
  ASSERT_EQ(r.skipped.size(), 1u);
  EXPECT_NE(r.skipped[0].find("snapshot 3"), std::string::npos) << r.skipped[0];
  EXPECT_NE(r.Describe().find("resumed from snapshot 2"), std::string::npos) << r.Describe();
  EXPECT_EQ((*store)->version(), 2u);
  StatusOr<std::string> value = (*store)->Get("rows/1");
  ASSERT_TRUE(value.ok()) << value.status().ToString();
  EXPECT_EQ(*value, Value(2, 1));
  EXPECT_NE((*store)->CurrentMetadata()->find("\"offset\":200"), std::string::npos);
  // The damaged live files and checkpoint are kept aside, not deleted.
  ASSERT_EQ(Aside().size(), 1u);
  EXPECT_EQ(r.moved_to, Aside()[0].string());
  EXPECT_TRUE(fs::exists(Aside()[0] / "CURRENT"));
  EXPECT_TRUE(fs::exists(Aside()[0] / "checkpoints" / Checkpoint(3).filename() / "metadata.json"));
  EXPECT_FALSE(fs::exists(Checkpoint(3)));
  EXPECT_TRUE(fs::exists(Checkpoint(1)));

  // The restored state writes on: version 3 again, intact.
  Status s =
      (*store)->WriteSnapshot([](const SnapshotSink& sink) { return sink("rows/0", Value(9, 0)); });
  ASSERT_TRUE(s.ok()) << s.ToString();
  store->reset();
  StatusOr<StateHealth> h = VerifyState(dir_);
  ASSERT_TRUE(h.ok());
  EXPECT_TRUE(h->intact()) << h->live.status.ToString();
  EXPECT_EQ(h->live.version, 3u);
  auto reader = SnapshotReader::OpenNewest(dir_);
  ASSERT_TRUE(reader.ok()) << reader.status().ToString();
  EXPECT_EQ((*reader)->version(), 3u);
  EXPECT_EQ(*(*reader)->Get("rows/0"), Value(9, 0));
}

TEST_F(StateCheckTest, RepairRebuildsAnOverwrittenCurrentFileFromTheNewestCheckpoint) {
  WriteSnapshots(3);
  std::ofstream(fs::path(dir_) / "CURRENT", std::ios::trunc) << "not a manifest\n";
  StatusOr<StateHealth> h = VerifyState(dir_);
  ASSERT_TRUE(h.ok()) << h.status().ToString();
  EXPECT_FALSE(h->live.status.ok());
  EXPECT_EQ(std::count_if(h->checkpoints.begin(), h->checkpoints.end(),
                          [](const PartHealth& c) { return c.status.ok(); }),
            3);

  StatusOr<StateRepair> r = RepairState(dir_);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->version, 3u);
  ASSERT_FALSE(r->actions.empty());
  EXPECT_NE(r->actions[0].find("rebuilt from snapshot 3"), std::string::npos) << r->actions[0];
  EXPECT_EQ(ReadAll(fs::path(r->moved_to) / "CURRENT"), "not a manifest\n");
  // A writer opens it as it was, without any restore.
  auto store = StateStore::Open(dir_, StateStore::Mode::kCreateOrOpen);
  ASSERT_TRUE(store.ok()) << store.status().ToString();
  EXPECT_EQ((*store)->version(), 3u);
  EXPECT_EQ(*(*store)->Get("rows/3"), Value(3, 3));
  EXPECT_FALSE((*store)->restore().restored);
  store->reset();
  h = VerifyState(dir_);
  ASSERT_TRUE(h.ok());
  EXPECT_TRUE(h->intact());
}

TEST_F(StateCheckTest, RepairMovesDamagedMetadataAsideAndPublishesTheSnapshotAgain) {
  WriteSnapshots(3);
  std::ofstream(Checkpoint(3) / "metadata.json", std::ios::trunc) << "{bad";
  StatusOr<StateHealth> h = VerifyState(dir_);
  ASSERT_TRUE(h.ok());
  EXPECT_TRUE(h->live.status.ok());
  ASSERT_EQ(h->checkpoints.size(), 3u);
  EXPECT_FALSE(h->checkpoints[2].status.ok());

  StatusOr<StateRepair> r = RepairState(dir_);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_EQ(r->actions.size(), 2u);
  EXPECT_NE(r->actions[0].find("damaged snapshot 3"), std::string::npos) << r->actions[0];
  EXPECT_NE(r->actions[1].find("published snapshot 3"), std::string::npos) << r->actions[1];
  EXPECT_EQ(
      ReadAll(fs::path(r->moved_to) / "checkpoints" / Checkpoint(3).filename() / "metadata.json"),
      "{bad");
  h = VerifyState(dir_);
  ASSERT_TRUE(h.ok());
  EXPECT_TRUE(h->intact());
  ASSERT_EQ(h->checkpoints.size(), 3u);
}

TEST_F(StateCheckTest, RepairWithNoIntactSnapshotChangesNothing) {
  WriteSnapshots(1);
  TruncateNewTableOf(1);
  const std::string current = ReadAll(fs::path(dir_) / "CURRENT");
  StatusOr<StateRepair> r = RepairState(dir_);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kCorruption);
  EXPECT_NE(r.status().message().find("no published snapshot"), std::string::npos)
      << r.status().message();
  EXPECT_TRUE(Aside().empty());
  EXPECT_EQ(ReadAll(fs::path(dir_) / "CURRENT"), current);
  EXPECT_TRUE(fs::exists(Checkpoint(1) / "metadata.json"));
}

TEST_F(StateCheckTest, AStateInUseIsNotRepairedAndItsLiveDatabaseNotChecked) {
  WriteSnapshots(2);
  auto store = StateStore::Open(dir_, StateStore::Mode::kCreateOrOpen);
  ASSERT_TRUE(store.ok());
  StatusOr<StateRepair> r = RepairState(dir_);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kFailedPrecondition) << r.status().ToString();
  StatusOr<StateHealth> h = VerifyState(dir_);
  ASSERT_TRUE(h.ok());
  EXPECT_FALSE(h->live_checked);
  EXPECT_TRUE(h->intact());
  EXPECT_EQ(h->checkpoints.size(), 2u);
}

TEST_F(StateCheckTest, NotAStateIsNotFound) {
  fs::create_directories(root_ / "other");
  EXPECT_EQ(VerifyState((root_ / "other").string()).status().code(), StatusCode::kNotFound);
  EXPECT_EQ(RepairState((root_ / "other").string()).status().code(), StatusCode::kNotFound);
}

// What `serve` relies on: the newest checkpoint whose database does not open is skipped.
TEST_F(StateCheckTest, OpenNewestSkipsACheckpointWhoseTableFileIsTruncated) {
  WriteSnapshots(3);
  TruncateNewTableOf(3);
  std::vector<std::string> skipped;
  auto reader = SnapshotReader::OpenNewest(dir_, &skipped);
  ASSERT_TRUE(reader.ok()) << reader.status().ToString();
  EXPECT_EQ((*reader)->version(), 2u);
  EXPECT_EQ(*(*reader)->Get("rows/0"), Value(2, 0));
  ASSERT_EQ(skipped.size(), 1u);
  EXPECT_NE(skipped[0].find(Checkpoint(3).string()), std::string::npos) << skipped[0];
}

}  // namespace
}  // namespace streamvec
