#include "streamvec/param/row_deltas.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <functional>

#include "streamvec/base/status.h"
#include "streamvec/kernels/half.h"

namespace streamvec {
namespace {

// A 64-bit fingerprint of dim floats' bits, never RowDeltaTracker's kAlwaysExport (0): eight
// 32-bit lanes, each rotated and XORed with the next component of its own (shifts and XORs the
// compiler vectorizes on any x86-64), then the lanes folded into one word by multiplication.
// Each step is invertible, so a change of any one component always changes it; a change of a
// whole row (what training makes) goes unseen with a chance of about 2^-64.
uint64_t RowFingerprint(const float* v, int dim) {
  uint32_t lanes[8] = {};
  int j = 0;
  for (; j + 8 <= dim; j += 8) {
    for (int k = 0; k < 8; ++k) {
      lanes[k] = std::rotl(lanes[k], 5) ^ std::bit_cast<uint32_t>(v[j + k]);
    }
  }
  for (int k = 0; j < dim; ++j, ++k) {
    lanes[k] = std::rotl(lanes[k], 5) ^ std::bit_cast<uint32_t>(v[j]);
  }
  uint64_t h = 0xcbf29ce484222325ull;
  for (uint32_t lane : lanes) h = (h ^ lane) * 0x100000001b3ull;
  return h == 0 ? 1 : h;
}

}  // namespace

RowDeltaTracker::RowDeltaTracker(float* table, size_t rows, size_t stride, int dim)
    : table_(table), rows_(rows), stride_(stride), dim_(dim), base_of_(rows, kNone) {
  SV_CHECK(dim >= 1 && stride >= static_cast<size_t>(dim));
  SV_CHECK(table != nullptr || rows == 0);
  // A base for every row at most: reserved up front (address space; pages come in as bases are
  // used) so that growing never copies the bases into fresh memory, faulted in page by page
  // again. Over 1 GiB they grow as needed.
  if (rows * static_cast<size_t>(dim) * sizeof(float) <= (size_t{1} << 30)) {
    bases_.reserve(rows * static_cast<size_t>(dim));
  }
}

void RowDeltaTracker::MarkDirty(uint32_t slot) {
  SV_CHECK(slot < rows_);
  if (base_of_[slot] != kNone) return;
  uint32_t b;
  if (!free_.empty()) {
    b = free_.back();
    free_.pop_back();
  } else {
    b = static_cast<uint32_t>(bases_.size() / dim_);
    bases_.resize(bases_.size() + dim_);
    fingerprints_.push_back(kAlwaysExport);
  }
  base_of_[slot] = b;
  const float* row = RowAt(slot);
  std::copy(row, row + dim_, bases_.begin() + static_cast<size_t>(b) * dim_);
  fingerprints_[b] = RowFingerprint(row, dim_);  // row == base: nothing to export until written
  ++tracked_;
}

void RowDeltaTracker::MarkFresh(uint32_t slot) {
  MarkDirty(slot);
  float* base = bases_.data() + static_cast<size_t>(base_of_[slot]) * dim_;
  std::fill(base, base + dim_, 0.0f);
  fingerprints_[base_of_[slot]] = kAlwaysExport;
}

std::vector<uint32_t> RowDeltaTracker::TrackedSlots() const {
  std::vector<uint32_t> out;
  out.reserve(tracked_);
  for (uint32_t s = 0; s < rows_; ++s) {
    if (base_of_[s] != kNone) out.push_back(s);
  }
  return out;
}

size_t RowDeltaTracker::Export(std::span<const uint32_t> slots, float* deltas,
                               ParamPrecision precision, ExportRows which) {
  std::vector<uint32_t> exported;
  ExportPacked(slots, deltas, precision, which, &exported);
  // Spread the packed rows to their positions, the last first (a row only moves up), and zero
  // the rows left out between them.
  const size_t d = static_cast<size_t>(dim_);
  size_t next = slots.size();  // rows at and past `next` are in place
  for (size_t k = exported.size(); k-- > 0;) {
    const size_t i = exported[k];
    std::fill(deltas + (i + 1) * d, deltas + next * d, 0.0f);
    if (i != k) std::memmove(deltas + i * d, deltas + k * d, d * sizeof(float));
    next = i;
  }
  std::fill(deltas, deltas + next * d, 0.0f);
  return slots.size() - exported.size();
}

void RowDeltaTracker::ExportPacked(std::span<const uint32_t> slots, float* deltas,
                                   ParamPrecision precision, ExportRows which,
                                   std::vector<uint32_t>* exported) {
  const bool half = precision == ParamPrecision::kFp16;
  std::vector<uint16_t> halves(half ? dim_ : 0);
  exported->clear();
  for (size_t i = 0; i < slots.size(); ++i) {
    const uint32_t s = slots[i];
    SV_CHECK(s < rows_ && base_of_[s] != kNone);
    float* base = bases_.data() + static_cast<size_t>(base_of_[s]) * dim_;
    // The next packed row: a row left out is overwritten by the next one read.
    float* out = deltas + exported->size() * static_cast<size_t>(dim_);
    // One copy of the row: each component is read once even while Hogwild workers write it, and
    // the delta, the new base and the fingerprint all come from the copy.
    std::memcpy(out, RowAt(s), static_cast<size_t>(dim_) * sizeof(float));
    uint64_t& fingerprint = fingerprints_[base_of_[s]];
    const uint64_t read = RowFingerprint(out, dim_);
    if (which == ExportRows::kWritten && read == fingerprint) continue;
    fingerprint = read;
    for (int j = 0; j < dim_; ++j) out[j] -= base[j];
    if (half) {  // what the receiver will read: the delta rounded to fp16
      FloatsToHalves(out, halves.data(), dim_);
      HalvesToFloats(halves.data(), out, dim_);
    }
    // The base moves by what was sent, computed as the receiver will (base + d), so it stays
    // bit-equal to the receiver's row; whatever rounding left out (fp16, or an ulp of fp32)
    // stays in row - base.
    for (int j = 0; j < dim_; ++j) base[j] += out[j];
    exported->push_back(static_cast<uint32_t>(i));
  }
}

namespace {

// row = received + (row - base), base = received; a component the node left where we pushed it
// (received == base) keeps its bits (no rounding through received + (row - base)). Branch-free
// on distinct arrays, so that the compiler vectorizes it.
void ApplyRow(float* __restrict row, float* __restrict base, const float* __restrict received,
              int dim) {
  for (int j = 0; j < dim; ++j) {
    const float r = received[j];
    const float b = base[j];
    const float local = row[j];
    const float merged = r + (local - b);
    // Chosen by a bit mask, not a branch (nor a float comparison, which may trap and keeps the
    // compiler from vectorizing): all ones where received and base have the same bits.
    const uint32_t same =
        0u - static_cast<uint32_t>(std::bit_cast<uint32_t>(r) == std::bit_cast<uint32_t>(b));
    row[j] = std::bit_cast<float>((std::bit_cast<uint32_t>(local) & same) |
                                  (std::bit_cast<uint32_t>(merged) & ~same));
    base[j] = r;
  }
}

}  // namespace

void RowDeltaTracker::ApplyRows(std::span<const uint32_t> slots, const float* rows) {
  for (size_t i = 0; i < slots.size(); ++i) {
    const uint32_t s = slots[i];
    SV_CHECK(s < rows_);
    float* row = RowAt(s);
    const float* received = rows + i * static_cast<size_t>(dim_);
    if (base_of_[s] == kNone) {
      std::copy(received, received + dim_, row);
      continue;
    }
    // A row unwritten since its last export stays so (what ApplyRow changes is not ours to push).
    uint64_t& fingerprint = fingerprints_[base_of_[s]];
    const bool unwritten = RowFingerprint(row, dim_) == fingerprint;
    ApplyRow(row, bases_.data() + static_cast<size_t>(base_of_[s]) * dim_, received, dim_);
    if (unwritten) fingerprint = RowFingerprint(row, dim_);
  }
}

void RowDeltaTracker::ApplyDeltas(std::span<const uint32_t> slots, const float* deltas) {
  for (size_t i = 0; i < slots.size(); ++i) {
    const uint32_t s = slots[i];
    SV_CHECK(s < rows_);
    float* row = RowAt(s);
    const float* d = deltas + i * static_cast<size_t>(dim_);
    float* base = base_of_[s] == kNone
                      ? nullptr
                      : bases_.data() + static_cast<size_t>(base_of_[s]) * dim_;
    uint64_t* fingerprint = base ? &fingerprints_[base_of_[s]] : nullptr;
    const bool unwritten = fingerprint && RowFingerprint(row, dim_) == *fingerprint;
    for (int j = 0; j < dim_; ++j) {
      row[j] += d[j];
      if (base) base[j] += d[j];
    }
    if (unwritten) *fingerprint = RowFingerprint(row, dim_);
  }
}

void RowDeltaTracker::Untrack(uint32_t slot) {
  SV_CHECK(slot < rows_);
  if (base_of_[slot] == kNone) return;
  free_.push_back(base_of_[slot]);
  base_of_[slot] = kNone;
  --tracked_;
}

PushSchedule::PushSchedule(const PushScheduleOptions& options) : options_(options) {
  SV_CHECK(options.top_rows >= 1 && options.max_level >= 0 && options.max_level <= 30);
}

void PushSchedule::SetReference(std::span<const double> counts) {
  if (counts.size() <= options_.top_rows) {
    reference_ = 0.0;
    return;
  }
  std::vector<double> c(counts.begin(), counts.end());
  const auto nth = c.begin() + (options_.top_rows - 1);
  std::nth_element(c.begin(), nth, c.end(), std::greater<double>());
  reference_ = *nth;
}

int PushSchedule::Level(double count) const {
  if (count >= reference_) return 0;
  if (!(count > 0.0)) return options_.max_level;
  const double l = 1.0 + std::floor(std::log2(reference_ / count));
  return static_cast<int>(std::min<double>(l, options_.max_level));
}

bool PushSchedule::Due(uint64_t round, uint32_t slot, double count) const {
  const uint64_t period_mask = (uint64_t{1} << Level(count)) - 1;
  return ((round + slot) & period_mask) == 0;
}

std::vector<uint32_t> PushSchedule::DueSlots(uint64_t round, std::span<const uint32_t> candidates,
                                             std::span<const double> counts) const {
  std::vector<uint32_t> out;
  for (uint32_t s : candidates) {
    SV_CHECK(s < counts.size());
    if (Due(round, s, counts[s])) out.push_back(s);
  }
  return out;
}

}  // namespace streamvec
