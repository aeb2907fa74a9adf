// Row delta tracking: export on one table and apply on another reproduces the rows bit for bit,
// local deltas not yet pushed survive rows received from the node, fp16 error feedback, and the
// push schedule's levels.
#include "streamvec/param/row_deltas.h"

#include <Eigen/Core>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include <gtest/gtest.h>

namespace streamvec {
namespace {

constexpr int kDim = 5;
constexpr size_t kStride = 8;        // 3 padding floats per row, as the learner's padded rows
constexpr float kPadding = 12345.0f;  // must never change

struct Table {
  explicit Table(size_t rows) : data(rows * kStride, kPadding), rows(rows) {
    for (size_t r = 0; r < rows; ++r) std::fill(row(r), row(r) + kDim, 0.0f);
  }
  float* row(size_t r) { return data.data() + r * kStride; }
  std::vector<float> vec(size_t r) { return std::vector<float>(row(r), row(r) + kDim); }
  bool PaddingIntact() const {
    for (size_t r = 0; r < rows; ++r) {
      for (size_t j = kDim; j < kStride; ++j) {
        if (data[r * kStride + j] != kPadding) return false;
      }
    }
    return true;
  }
  std::vector<float> data;
  size_t rows;
};

void FillRandom(Table& t, std::mt19937& rng) {
  std::uniform_real_distribution<float> u(-0.1f, 0.1f);
  for (size_t r = 0; r < t.rows; ++r) {
    for (int j = 0; j < kDim; ++j) t.row(r)[j] = u(rng);
  }
}

TEST(RowDeltaTrackerTest, ExportGivesRowMinusBaseThenRebases) {
  Table t(3);
  for (int j = 0; j < kDim; ++j) t.row(1)[j] = 0.5f * j;
  RowDeltaTracker tracker(t.data.data(), 3, kStride, kDim);
  EXPECT_FALSE(tracker.tracked(1));
  tracker.MarkDirty(1);
  tracker.MarkDirty(1);  // idempotent: the base stays the first one
  EXPECT_EQ(tracker.tracked_count(), 1u);
  for (int j = 0; j < kDim; ++j) t.row(1)[j] += 0.25f * (j + 1);
  tracker.MarkDirty(1);
  const uint32_t slots[] = {1};
  std::vector<float> d(kDim);
  tracker.Export(slots, d.data());
  EXPECT_EQ(d, (std::vector<float>{0.25f, 0.5f, 0.75f, 1.0f, 1.25f}));
  tracker.Export(slots, d.data());
  EXPECT_EQ(d, std::vector<float>(kDim, 0.0f));
  EXPECT_TRUE(tracker.tracked(1));  // stays tracked: later changes accumulate again
  t.row(1)[4] -= 2.0f;
  tracker.Export(slots, d.data());
  EXPECT_EQ(d, (std::vector<float>{0, 0, 0, 0, -2.0f}));
  EXPECT_EQ(tracker.TrackedSlots(), std::vector<uint32_t>{1});
  EXPECT_TRUE(t.PaddingIntact());
}

TEST(RowDeltaTrackerTest, ExportOnOneTableAndApplyOnAnotherReproducesTheRows) {
  std::mt19937 rng(31);
  const size_t rows = 64;
  Table trainer(rows), node(rows);
  FillRandom(trainer, rng);
  node.data = trainer.data;
  RowDeltaTracker tracker(trainer.data.data(), rows, kStride, kDim);
  RowDeltaTracker node_side(node.data.data(), rows, kStride, kDim);  // never tracks
  std::uniform_int_distribution<uint32_t> slot(0, rows - 1);
  std::normal_distribution<float> step(0.0f, 0.01f);
  for (int round = 0; round < 20; ++round) {
    for (int update = 0; update < 100; ++update) {  // "training": small steps on random rows
      const uint32_t s = slot(rng);
      tracker.MarkDirty(s);
      for (int j = 0; j < kDim; ++j) trainer.row(s)[j] += step(rng);
    }
    const std::vector<uint32_t> slots = tracker.TrackedSlots();
    std::vector<float> deltas(slots.size() * kDim);
    tracker.Export(slots, deltas.data());
    node_side.ApplyDeltas(slots, deltas.data());
    // Every row of the node is now bit-equal to the trainer's base: a second export with no
    // training in between brings the node to the trainer's rows exactly (what rounding left
    // in row - base goes out with it).
  }
  for (int flush = 0; flush < 4 && node.data != trainer.data; ++flush) {
    const std::vector<uint32_t> slots = tracker.TrackedSlots();
    std::vector<float> deltas(slots.size() * kDim);
    tracker.Export(slots, deltas.data());
    node_side.ApplyDeltas(slots, deltas.data());
  }
  EXPECT_EQ(node.data, trainer.data);
  // The node publishes its rows back: the trainer's rows keep every bit.
  const std::vector<float> before = trainer.data;
  const std::vector<uint32_t> slots = tracker.TrackedSlots();
  std::vector<float> published;
  for (uint32_t s : slots) published.insert(published.end(), node.row(s), node.row(s) + kDim);
  tracker.ApplyRows(slots, published.data());
  EXPECT_EQ(trainer.data, before);
  EXPECT_TRUE(trainer.PaddingIntact());
  EXPECT_TRUE(node.PaddingIntact());
}

TEST(RowDeltaTrackerTest, LocalDeltasNotYetPushedSurviveApplyRows) {
  Table t(4);
  for (int j = 0; j < kDim; ++j) t.row(2)[j] = 1.0f;
  RowDeltaTracker tracker(t.data.data(), 4, kStride, kDim);
  tracker.MarkDirty(2);
  const std::vector<float> local{0.5f, -0.25f, 0.0f, 0.125f, 1.0f};
  for (int j = 0; j < kDim; ++j) t.row(2)[j] += local[j];
  // The node merged other trainers' work: row 2 is now 3.0 everywhere but component 2 (which
  // the node left at our base, 1.0).
  const std::vector<float> received{3.0f, 3.0f, 1.0f, 3.0f, 3.0f};
  const uint32_t slots[] = {2};
  tracker.ApplyRows(slots, received.data());
  EXPECT_EQ(t.vec(2), (std::vector<float>{3.5f, 2.75f, 1.0f, 3.125f, 4.0f}));
  std::vector<float> d(kDim);
  tracker.Export(slots, d.data());
  EXPECT_EQ(d, local);  // the local delta goes out whole on the next push
  // A row not tracked is overwritten and stays untracked.
  const uint32_t other[] = {3};
  tracker.ApplyRows(other, received.data());
  EXPECT_EQ(t.vec(3), received);
  EXPECT_FALSE(tracker.tracked(3));
  EXPECT_TRUE(t.PaddingIntact());
}

TEST(RowDeltaTrackerTest, RandomLocalDeltasSurviveRandomPublications) {
  std::mt19937 rng(32);
  std::normal_distribution<float> n(0.0f, 0.05f);
  const size_t rows = 32;
  Table t(rows);
  FillRandom(t, rng);
  RowDeltaTracker tracker(t.data.data(), rows, kStride, kDim);
  std::vector<uint32_t> slots;
  std::vector<float> local, received;
  for (uint32_t s = 0; s < rows; s += 3) {
    tracker.MarkDirty(s);
    slots.push_back(s);
    for (int j = 0; j < kDim; ++j) {
      local.push_back(n(rng));
      t.row(s)[j] += local.back();
      received.push_back(n(rng));
    }
  }
  tracker.ApplyRows(slots, received.data());
  std::vector<float> d(slots.size() * kDim);
  tracker.Export(slots, d.data());
  for (size_t i = 0; i < slots.size(); ++i) {
    for (int j = 0; j < kDim; ++j) {
      EXPECT_NEAR(t.row(slots[i])[j], received[i * kDim + j] + local[i * kDim + j], 1e-7);
      EXPECT_NEAR(d[i * kDim + j], local[i * kDim + j], 1e-7);
    }
  }
}

TEST(RowDeltaTrackerTest, AppliedDeltasAreNotPushedBack) {
  Table t(2);
  RowDeltaTracker tracker(t.data.data(), 2, kStride, kDim);
  tracker.MarkDirty(0);
  t.row(0)[0] += 1.0f;  // local
  const std::vector<float> theirs{0.5f, 0.5f, 0.5f, 0.5f, 0.5f};
  const uint32_t slots[] = {0};
  tracker.ApplyDeltas(slots, theirs.data());
  EXPECT_EQ(t.vec(0), (std::vector<float>{1.5f, 0.5f, 0.5f, 0.5f, 0.5f}));
  std::vector<float> d(kDim);
  tracker.Export(slots, d.data());
  EXPECT_EQ(d, (std::vector<float>{1.0f, 0, 0, 0, 0}));
}

TEST(RowDeltaTrackerTest, Fp16ExportKeepsTheRoundingResidualForLaterPushes) {
  Table t(1);
  RowDeltaTracker tracker(t.data.data(), 1, kStride, kDim);
  tracker.MarkDirty(0);
  const std::vector<float> change{0.1f, -0.0123456f, 3.14159f, 1e-6f, 7.0e-5f};
  for (int j = 0; j < kDim; ++j) t.row(0)[j] += change[j];
  const uint32_t slots[] = {0};
  std::vector<float> node(kDim, 0.0f);  // a receiver that started equal to the base (zero)
  std::vector<float> d(kDim);
  tracker.Export(slots, d.data(), ParamPrecision::kFp16);
  for (int j = 0; j < kDim; ++j) {
    EXPECT_EQ(d[j], static_cast<float>(Eigen::half(d[j])));  // representable in binary16
    EXPECT_NEAR(d[j], change[j], std::abs(change[j]) * 1e-3 + 3e-8);
    node[j] += d[j];
  }
  // 0.1 is not a binary16 value: one push leaves it off by ~2.4e-5.
  EXPECT_GT(std::abs(node[0] - t.row(0)[0]), 1e-5);
  for (int round = 0; round < 3; ++round) {
    tracker.Export(slots, d.data(), ParamPrecision::kFp16);
    for (int j = 0; j < kDim; ++j) node[j] += d[j];
  }
  // The residuals went out with the later pushes: the receiver is within float rounding of the
  // row, or within half of fp16's smallest step (2^-25) for what fp16 cannot carry at all (that
  // part stays in row - base until local changes make it large enough).
  for (int j = 0; j < kDim; ++j) {
    EXPECT_NEAR(node[j], t.row(0)[j], 3.0e-8 + std::abs(t.row(0)[j]) * 1.2e-7) << j;
  }
}

// ExportPacked hands out the exported rows one after another with their positions: the same
// deltas as Export, without the rows left out, and with them the same bases.
TEST(RowDeltaTrackerTest, PackedExportHoldsOnlyTheWrittenRowsInOrder) {
  using Rows = RowDeltaTracker::ExportRows;
  Table a(5), b(5);
  std::mt19937 rng(7);
  FillRandom(a, rng);
  b.data = a.data;
  RowDeltaTracker packed(a.data.data(), 5, kStride, kDim);
  RowDeltaTracker spread(b.data.data(), 5, kStride, kDim);
  for (uint32_t s = 0; s < 5; ++s) {
    packed.MarkDirty(s);
    spread.MarkDirty(s);
  }
  for (int j = 0; j < kDim; ++j) {  // rows 1 and 4 written, the same in both tables
    a.row(1)[j] = b.row(1)[j] += 0.25f * (j + 1);
    a.row(4)[j] = b.row(4)[j] -= 0.125f;
  }
  const uint32_t slots[] = {4, 0, 1, 3};  // any order; row 2 not asked for
  std::vector<float> d(4 * kDim, -1.0f), e(4 * kDim, -1.0f);
  std::vector<uint32_t> exported = {99};
  packed.ExportPacked(slots, d.data(), ParamPrecision::kFp32, Rows::kWritten, &exported);
  EXPECT_EQ(exported, (std::vector<uint32_t>{0, 2}));  // slots 4 and 1
  EXPECT_EQ(spread.Export(slots, e.data(), ParamPrecision::kFp32, Rows::kWritten), 2u);
  for (int j = 0; j < kDim; ++j) {
    EXPECT_NEAR(d[j], -0.125f, 1e-6);
    EXPECT_NEAR(d[kDim + j], 0.25f * (j + 1), 1e-6);
    EXPECT_EQ(e[j], d[j]);                    // position 0: slot 4
    EXPECT_EQ(e[kDim + j], 0.0f);             // position 1: slot 0, left out
    EXPECT_EQ(e[2 * kDim + j], d[kDim + j]);  // position 2: slot 1
    EXPECT_EQ(e[3 * kDim + j], 0.0f);         // position 3: slot 3, left out
  }
  for (uint32_t s = 0; s < 5; ++s) {
    EXPECT_EQ(std::vector<float>(packed.base(s), packed.base(s) + kDim),
              std::vector<float>(spread.base(s), spread.base(s) + kDim))
        << s;
  }
  // Nothing written since: nothing exported; kAll exports every position.
  packed.ExportPacked(slots, d.data(), ParamPrecision::kFp32, Rows::kWritten, &exported);
  EXPECT_TRUE(exported.empty());
  packed.ExportPacked(slots, d.data(), ParamPrecision::kFp32, Rows::kAll, &exported);
  EXPECT_EQ(exported, (std::vector<uint32_t>{0, 1, 2, 3}));
  EXPECT_EQ(d, std::vector<float>(4 * kDim, 0.0f));
  EXPECT_TRUE(a.PaddingIntact());
}

// kWritten leaves out the rows not written since their last export: an untouched row, and a
// row whose only delta is the fp16 residual of its last export, which waits for the row's next
// change (or a kAll export) instead of going out alone; MarkFresh's rows always go out.
TEST(RowDeltaTrackerTest, WrittenOnlyExportLeavesUnchangedRowsOutAndLosesNothing) {
  using Rows = RowDeltaTracker::ExportRows;
  Table t(3);
  for (int j = 0; j < kDim; ++j) t.row(2)[j] = 0.01f * (j + 1);
  RowDeltaTracker tracker(t.data.data(), 3, kStride, kDim);
  tracker.MarkDirty(0);
  tracker.MarkDirty(1);
  tracker.MarkFresh(2);  // a new word: its whole row goes out, written or not
  for (int j = 0; j < kDim; ++j) t.row(0)[j] += 0.1f;  // not a binary16 value
  const uint32_t slots[] = {0, 1, 2};
  std::vector<float> node(3 * kDim, 0.0f);  // what a receiver holds, less the bases at start
  std::vector<float> d(3 * kDim);
  auto receive = [&] {
    for (size_t k = 0; k < d.size(); ++k) node[k] += d[k];
  };
  EXPECT_EQ(tracker.Export(slots, d.data(), ParamPrecision::kFp16, Rows::kWritten), 1u);
  receive();
  EXPECT_NE(d[0], 0.0f);
  EXPECT_EQ(std::vector<float>(d.begin() + kDim, d.begin() + 2 * kDim),
            std::vector<float>(kDim, 0.0f));  // row 1: never written
  EXPECT_NEAR(d[2 * kDim + 4], 0.05f, 1e-4);
  const float residual = t.row(0)[0] - node[0];
  EXPECT_NE(residual, 0.0f);

  // Nothing written since: every row is left out, the residual stays in row - base.
  EXPECT_EQ(tracker.Export(slots, d.data(), ParamPrecision::kFp16, Rows::kWritten), 3u);
  EXPECT_EQ(d, std::vector<float>(3 * kDim, 0.0f));
  EXPECT_EQ(tracker.base(0)[0], node[0]);

  // A publication is not a write: the row stays out.
  const std::vector<float> published(tracker.base(0), tracker.base(0) + kDim);
  tracker.ApplyRows(std::span<const uint32_t>(slots, 1), published.data());
  EXPECT_EQ(tracker.Export(slots, d.data(), ParamPrecision::kFp16, Rows::kWritten), 3u);

  // The row's next change carries the residual with it.
  t.row(0)[1] -= 0.5f;
  EXPECT_EQ(tracker.Export(slots, d.data(), ParamPrecision::kFp16, Rows::kWritten), 2u);
  receive();
  EXPECT_NEAR(d[0], residual, 1e-7);
  EXPECT_NEAR(d[1], -0.5f + residual, 1e-3);
  // kAll sends whatever is left: the receiver ends at the rows.
  for (int flush = 0; flush < 3; ++flush) {
    tracker.Export(slots, d.data(), ParamPrecision::kFp16, Rows::kAll);
    receive();
  }
  for (size_t r = 0; r < 3; ++r) {
    for (int j = 0; j < kDim; ++j) {
      EXPECT_NEAR(node[r * kDim + j], t.row(r)[j], 3.0e-8 + std::abs(t.row(r)[j]) * 1.2e-7);
    }
  }
  EXPECT_TRUE(t.PaddingIntact());
}

TEST(RowDeltaTrackerTest, UntrackDropsTheLocalDeltaAndReusesTheBase) {
  Table t(4);
  RowDeltaTracker tracker(t.data.data(), 4, kStride, kDim);
  tracker.MarkDirty(1);
  t.row(1)[0] = 9.0f;
  tracker.Untrack(1);
  tracker.Untrack(1);  // no-op
  EXPECT_EQ(tracker.tracked_count(), 0u);
  t.row(3)[0] = 4.0f;
  tracker.MarkDirty(3);  // reuses row 1's base storage, copied fresh
  t.row(3)[0] = 5.0f;
  const uint32_t slots[] = {3};
  std::vector<float> d(kDim);
  tracker.Export(slots, d.data());
  EXPECT_EQ(d, (std::vector<float>{1.0f, 0, 0, 0, 0}));
}

TEST(RowDeltaTrackerTest, FreshRowsGoOutWholeToANodeStartingFromZero) {
  std::mt19937 rng(33);
  Table trainer(3), node(3);
  FillRandom(trainer, rng);  // the trainer's own random initialisation
  RowDeltaTracker tracker(trainer.data.data(), 3, kStride, kDim);
  RowDeltaTracker node_side(node.data.data(), 3, kStride, kDim);
  tracker.MarkDirty(2);  // an earlier word's base, dropped by MarkFresh
  tracker.MarkFresh(2);
  EXPECT_TRUE(tracker.tracked(2));
  EXPECT_EQ(tracker.tracked_count(), 1u);
  trainer.row(2)[1] += 0.5f;
  const uint32_t slots[] = {2};
  std::vector<float> d(kDim);
  tracker.Export(slots, d.data());
  EXPECT_EQ(d, trainer.vec(2));
  node_side.ApplyDeltas(slots, d.data());
  EXPECT_EQ(node.vec(2), trainer.vec(2));
}

TEST(PushScheduleTest, LevelsDoubleThePeriodAsCountsHalve) {
  PushScheduleOptions o;
  o.top_rows = 100;
  o.max_level = 6;
  PushSchedule p(o);
  p.set_reference(1000.0);
  EXPECT_EQ(p.Level(5000.0), 0);
  EXPECT_EQ(p.Level(1000.0), 0);
  EXPECT_EQ(p.Level(999.0), 1);
  EXPECT_EQ(p.Level(501.0), 1);
  EXPECT_EQ(p.Level(500.0), 2);
  EXPECT_EQ(p.Level(250.0), 3);
  EXPECT_EQ(p.Level(1.0), 6);  // 1 + floor(log2 1000) = 10, capped
  EXPECT_EQ(p.Level(0.0), 6);
  // Level 2 (period 4) for slot 5: due when (t + 5) mod 4 = 0.
  std::vector<uint64_t> due;
  for (uint64_t t = 0; t < 12; ++t) {
    if (p.Due(t, 5, 500.0)) due.push_back(t);
  }
  EXPECT_EQ(due, (std::vector<uint64_t>{3, 7, 11}));
  for (uint64_t t = 0; t < 12; ++t) EXPECT_TRUE(p.Due(t, 5, 2000.0));
}

TEST(PushScheduleTest, ZipfRowsCostAboutTheSameBytesPerLevelAndAllGoOut) {
  // Counts 1e6 / rank (Zipf), 20000 rows, the top 100 every round.
  const size_t rows = 20000;
  std::vector<double> counts(rows);
  for (size_t r = 0; r < rows; ++r) counts[r] = 1e6 / static_cast<double>(r + 1);
  PushScheduleOptions o;
  o.top_rows = 100;
  o.max_level = 6;
  PushSchedule p(o);
  p.SetReference(counts);
  EXPECT_DOUBLE_EQ(p.reference(), 1e6 / 100.0);
  std::vector<uint32_t> all(rows);
  for (uint32_t s = 0; s < rows; ++s) all[s] = s;
  std::vector<double> pushes(o.max_level + 1, 0.0);
  std::vector<int> last_push(rows, -1000), longest_gap(rows, 0);
  const int rounds = 128;
  for (int t = 0; t < rounds; ++t) {
    for (uint32_t s : p.DueSlots(t, all, counts)) {
      pushes[p.Level(counts[s])] += 1.0;
      if (last_push[s] >= 0) longest_gap[s] = std::max(longest_gap[s], t - last_push[s]);
      last_push[s] = t;
    }
  }
  // Level 0 holds the top 100 rows, pushed every round; level l holds about 100 * 2^(l-1)
  // rows, pushed every 2^l rounds: about half of level 0's pushes per level.
  EXPECT_DOUBLE_EQ(pushes[0], 100.0 * rounds);
  for (int l = 1; l < o.max_level; ++l) {
    EXPECT_GT(pushes[l], 0.35 * pushes[0]) << l;
    EXPECT_LT(pushes[l], 0.65 * pushes[0]) << l;
  }
  for (size_t s = 0; s < rows; ++s) {
    ASSERT_GE(last_push[s], 0) << s;
    ASSERT_LE(longest_gap[s], 1 << o.max_level) << s;
  }
  // Few rows: everything is due every round.
  PushSchedule few(o);
  few.SetReference(std::vector<double>(50, 3.0));
  EXPECT_EQ(few.reference(), 0.0);
  EXPECT_EQ(few.Level(0.0), 0);
}

}  // namespace
}  // namespace streamvec
