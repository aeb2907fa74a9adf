// The trainer's side of pushes and pulls (issue 20): what changed in a row table since the rows
// were last pushed, and how rows received from the node are folded in without losing local work.
//
// RowDeltaTracker watches a row table it does not own: `rows` rows of `stride` floats, the first
// `dim` the vector (the streaming learner's input or output table, PaddedStride(dim) floats a
// row; the padding, which may hold Adagrad accumulators, is never read or written). A tracked
// row has a base: the value the node is known to have (or will have once the pending push is
// merged), so row - base is the local, not yet pushed delta. MarkDirty starts tracking a row
// before it is first trained; Export hands out row - base and rebases; ApplyRows / ApplyDeltas
// fold in what the node publishes, keeping the local delta. Memory: dim floats per tracked row,
// allocated on first MarkDirty and reused after Untrack.
//
// Thread safety: one thread calls the methods. Hogwild workers may keep writing the rows during
// Export: each component is read once, the delta and the new base come from that one read, and
// a write that lands after it stays in row - base for the next export (nothing is lost; races
// are intended, as in the learner). ApplyRows and ApplyDeltas write rows: the caller quiesces
// the writers first (the learner drains its workers).
#ifndef STREAMVEC_PARAM_ROW_DELTAS_H_
#define STREAMVEC_PARAM_ROW_DELTAS_H_

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "streamvec/param/protocol.h"

namespace streamvec {

class RowDeltaTracker {
 public:
  // The table: rows x stride floats at `table` (stride >= dim >= 1), kept alive by the caller.
  RowDeltaTracker(float* table, size_t rows, size_t stride, int dim);

  // Starts tracking row `slot` (base = its current vector) unless it is tracked already. Call it
  // before the row is first changed locally (for the learner: when a sentence that uses the
  // row, as word, context or negative, is selected, before it is queued).
  void MarkDirty(uint32_t slot);
  // (Re)starts tracking row `slot` with a zero base, dropping any earlier base: the next export
  // carries the whole row. For a row the node has never seen (a slot just given to a new word,
  // whose random initialisation only this trainer knows): the node, starting that word from
  // zero, then receives the initial vector with the first push.
  void MarkFresh(uint32_t slot);
  bool tracked(uint32_t slot) const { return base_of_[slot] != kNone; }
  // The base of row `slot` (dim floats: what the node holds of it once it has merged every
  // exported delta), or nullptr when the row is not tracked.
  const float* base(uint32_t slot) const {
    return base_of_[slot] == kNone ? nullptr
                                   : bases_.data() + static_cast<size_t>(base_of_[slot]) * dim_;
  }
  // The tracked rows, ascending.
  std::vector<uint32_t> TrackedSlots() const;
  size_t tracked_count() const { return tracked_; }

  // For each slots[i] (tracked; SV_CHECK): deltas[i * dim + j] = row - base, then base += that
  // delta (in float, as the receiver adds it), so the base stays bit-equal to a receiver's row
  // that started equal to it and the next export gives only what changed since. With kFp16
  // each delta is rounded to binary16 (Eigen::half) first and only the rounded delta moves the
  // base: the rounding residual stays in row - base and goes out with a later push (error
  // feedback), so fp16 loses nothing in the long run. `deltas` holds slots.size() x dim floats
  // (the rounded values with kFp16, exactly what the protocol will carry). The rows stay tracked.
  //
  // With ExportRows::kWritten a row that has not been written since its last export (nor since
  // MarkDirty) is left out: its delta comes back all zero and its base stays, so what is left in
  // row - base (the fp16 rounding residual of its last export, or an ulp of fp32) waits for the
  // row's next change or a kAll export instead of going out alone. A row is taken as written
  // when its bits differ from those its last export read (a 64-bit fingerprint of the dim floats,
  // kept through ApplyRows and ApplyDeltas); MarkFresh's rows always go out. A fingerprint
  // collision only defers a delta to a later export: nothing is lost. Returns the rows left out.
  enum class ExportRows { kAll, kWritten };
  size_t Export(std::span<const uint32_t> slots, float* deltas,
                ParamPrecision precision = ParamPrecision::kFp32,
                ExportRows which = ExportRows::kAll);
  // Export with the exported rows packed: row k of `deltas` is the delta of slots[(*exported)[k]]
  // (positions ascending; with kAll every position), so a push reads and writes only the rows
  // that moved. `deltas` has room for slots.size() x dim floats; only exported->size() x dim
  // are written.
  void ExportPacked(std::span<const uint32_t> slots, float* deltas, ParamPrecision precision,
                    ExportRows which, std::vector<uint32_t>* exported);

  // Row `slots[i]` becomes what the node published, rows[i * dim + j], plus the local delta not
  // yet pushed: row = received + (row - base) and base = received for a tracked row; row =
  // received for one not tracked (it stays untracked). The local delta survives (to float
  // rounding of received + local; a component where received == base keeps its bits).
  void ApplyRows(std::span<const uint32_t> slots, const float* rows);
  // Adds deltas received from elsewhere: row += delta, and base += delta when tracked (another
  // sender's change is not pushed back as ours).
  void ApplyDeltas(std::span<const uint32_t> slots, const float* deltas);

  // Stops tracking `slot` (the learner gave it to another word, whose fresh row the node knows
  // nothing about): its local delta is dropped. No-op when it is not tracked.
  void Untrack(uint32_t slot);

 private:
  static constexpr uint32_t kNone = 0xFFFFFFFFu;
  float* RowAt(uint32_t slot) { return table_ + static_cast<size_t>(slot) * stride_; }
  float* table_;
  size_t rows_, stride_;
  int dim_;
  std::vector<uint32_t> base_of_;  // slot -> index into bases_ (dim floats each) or kNone
  std::vector<float> bases_;
  // Per base index: the fingerprint (RowFingerprint) of the row as its last export read it, or
  // as MarkDirty, ApplyRows and ApplyDeltas left it unwritten since; kAlwaysExport after
  // MarkFresh.
  std::vector<uint64_t> fingerprints_;
  static constexpr uint64_t kAlwaysExport = 0;
  std::vector<uint32_t> free_;     // indices of bases_ free for reuse
  size_t tracked_ = 0;
};

struct PushScheduleOptions {
  // Rows pushed every round: those whose count is at least the count of the top_rows-th most
  // frequent word (pWord2Vec syncs only its most frequent rows every round). >= 1.
  uint32_t top_rows = 4096;
  // The rarest rows are due every 2^max_level rounds (the periodic full sync). 0..30.
  int max_level = 6;
};

// Which tracked rows are due in a push round, frequent rows more often than rare ones (in the
// spirit of pWord2Vec, Ji et al. 2016, arXiv 1604.04661: the most frequent rows are synchronised
// every round and rarer rows exponentially less often, with a periodic full sync).
//
// The rule: with c* the reference count (SetReference: the top_rows-th largest count), a row of
// count c has level 0 if c >= c*, else min(max_level, 1 + floor(log2(c* / c))) (level max_level
// for c = 0). A row of level l is due in round t when (t + slot) mod 2^l = 0: every round for
// level 0, every other round for level 1, and so on, the offset by slot spreading each level's
// rows evenly over its period instead of pushing them all in one burst. On a Zipf stream level
// l >= 1 holds about top_rows * 2^(l-1) rows pushed every 2^l rounds, so each level costs about
// half of level 0's bytes per round, and every row goes out at least every 2^max_level rounds.
class PushSchedule {
 public:
  explicit PushSchedule(const PushScheduleOptions& options = {});
  // Sets c* from the current per-slot counts (any order; O(n)); c* = 0 (everything level 0)
  // when there are at most top_rows counts.
  void SetReference(std::span<const double> counts);
  // Or directly.
  void set_reference(double reference_count) { reference_ = reference_count; }
  double reference() const { return reference_; }
  // The level of a row with `count` occurrences.
  int Level(double count) const;
  bool Due(uint64_t round, uint32_t slot, double count) const;
  // The slots among `candidates` due in `round`, in their order; counts[slot] is each one's.
  std::vector<uint32_t> DueSlots(uint64_t round, std::span<const uint32_t> candidates,
                                 std::span<const double> counts) const;

 private:
  PushScheduleOptions options_;
  double reference_ = 0.0;
};

}  // namespace streamvec

#endif  // STREAMVEC_PARAM_ROW_DELTAS_H_
