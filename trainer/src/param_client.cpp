#include "streamvec/trainer/param_client.h"

#include <librdkafka/rdkafka.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <deque>
#include <functional>
#include <iterator>
#include <limits>
#include <map>
#include <optional>
#include <thread>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "filtered_word_map.h"
#include "streamvec/kafka/consumer_lag.h"
#include "streamvec/kafka/rdkafka_conf.h"
#include "streamvec/param/row_deltas.h"

namespace streamvec {
namespace {

using Clock = std::chrono::steady_clock;

bool AllZero(const float* v, int dim) {
  for (int j = 0; j < dim; ++j) {
    if (v[j] != 0.0f) return false;
  }
  return true;
}

// Published rows waiting to be applied, at most one per slot: the word each was published for
// and its input and output rows (dim floats each), the rows contiguous as
// RowDeltaTracker::ApplyRows takes them. The memory is kept from one application to the next,
// so a row waiting costs no allocation.
class UnappliedRows {
 public:
  // Empties the lists for a table of `slots` rows of `dim` floats.
  void Reset(size_t slots, int dim) {
    dim_ = static_cast<size_t>(dim);
    position_.assign(slots, 0);
    slots_.clear();
    in_.clear();
    out_.clear();
  }
  size_t size() const { return slots_.size(); }
  bool empty() const { return slots_.empty(); }
  const std::vector<uint32_t>& slots() const { return slots_; }
  // Row i's input and output rows (i < size(); In(0) and Out(0): every row, contiguous).
  float* In(size_t i) { return in_.data() + i * dim_; }
  float* Out(size_t i) { return out_.data() + i * dim_; }
  // The index of `slot`'s row, or -1.
  int64_t Find(uint32_t slot) const {
    return slot < position_.size() ? static_cast<int64_t>(position_[slot]) - 1 : -1;
  }
  // `slot`'s row becomes `word`'s `in` and `out` (dim floats each), added when it has none.
  void Put(uint32_t slot, std::string_view word, const float* in, const float* out) {
    if (slot >= position_.size()) position_.resize(slot + 1, 0);
    if (position_[slot] == 0) {
      slots_.push_back(slot);
      if (words_.size() < slots_.size()) words_.emplace_back();
      in_.resize(slots_.size() * dim_);
      out_.resize(in_.size());
      position_[slot] = static_cast<uint32_t>(slots_.size());
    }
    const size_t i = position_[slot] - 1;
    words_[i].assign(word);
    std::copy(in, in + dim_, In(i));
    std::copy(out, out + dim_, Out(i));
  }
  // Drops `slot`'s row (the last one moves into its place). No-op when it has none.
  void Erase(uint32_t slot) {
    const int64_t found = Find(slot);
    if (found < 0) return;
    const size_t i = static_cast<size_t>(found), last = slots_.size() - 1;
    if (i != last) Move(last, i);
    position_[slot] = 0;
    slots_.pop_back();
    in_.resize(slots_.size() * dim_);
    out_.resize(in_.size());
  }
  // Keeps, in order, the rows for which keep(slot, word) holds, for one application: Find
  // knows none of the rows afterwards, and Clear must follow. Returns how many were kept.
  size_t KeepWhere(const std::function<bool(uint32_t, const std::string&)>& keep) {
    for (uint32_t slot : slots_) position_[slot] = 0;
    size_t kept = 0;
    for (size_t i = 0; i < slots_.size(); ++i) {
      if (!keep(slots_[i], words_[i])) continue;
      if (kept != i) Move(i, kept);
      ++kept;
    }
    slots_.resize(kept);
    return kept;
  }
  // Drops every row; the lists keep their memory (words beyond size() are spare strings).
  void Clear() {
    for (uint32_t slot : slots_) position_[slot] = 0;
    slots_.clear();
    in_.clear();
    out_.clear();
  }

 private:
  // Row `from` into place `to` (its word swapped, its slot's position updated).
  void Move(size_t from, size_t to) {
    slots_[to] = slots_[from];
    words_[to].swap(words_[from]);
    std::copy(In(from), In(from) + dim_, In(to));
    std::copy(Out(from), Out(from) + dim_, Out(to));
    if (position_[slots_[to]] != 0) position_[slots_[to]] = static_cast<uint32_t>(to + 1);
  }
  size_t dim_ = 0;
  std::vector<uint32_t> position_;  // slot -> index + 1 into the lists below (0: none)
  std::vector<uint32_t> slots_;
  std::vector<std::string> words_;  // the word each row was published for
  std::vector<float> in_, out_;     // dim floats a row
};

}  // namespace

struct ParamClient::Impl {
  ParamClientOptions options;
  StreamingLearner* learner = nullptr;
  int dim = 0;
  std::string updates_topic;
  std::string params_topic;
  rd_kafka_t* producer = nullptr;
  rd_kafka_t* consumer = nullptr;  // assigned every partition of .params, no group membership
  std::unique_ptr<ConsumerGroupLagProbe> lag_probe;  // the shards' committed lag on .updates
  // The shards' read positions on .updates (ParamNodesReadGroup): what flow control waits on.
  std::unique_ptr<ConsumerGroupLagProbe> read_probe;
  Clock::time_point last_durable_probe{};
  Clock::time_point last_wait_log{};
  bool params_assigned = false;
  Clock::time_point last_assign_try{};
  ParamMessage publication;  // the last decoded .params message (its memory reused)

  // Over the learner's tables (created at the first push: the tables' address is stable).
  std::optional<RowDeltaTracker> input_deltas, output_deltas;
  std::vector<std::string> slot_word;   // slot -> the word its tracked rows belong to
  std::vector<double> pushed_count;     // slot -> the word's count at its last push
  std::vector<bool> initial;            // slot -> its rows were not pushed since MarkFresh
  uint64_t last_push_words = 0;
  uint64_t sequence = 0;
  PushSchedule schedule;
  // Acknowledgements: a push round's messages to a shard, their delivered offsets, and the
  // newest round each shard's merged watermark has passed. A published row is taken only when
  // its shard acknowledged the round that last pushed that row: an older publication lacks
  // the push and would undo it.
  struct PendingRound {
    uint64_t round = 0;
    uint32_t messages = 0;
    uint32_t delivered = 0;
    int64_t max_offset = -1;
    bool rows = false;  // carried a row (a count-only round leads to no publication)
  };
  uint64_t push_round = 0;                        // rounds pushed (the first is 1)
  std::vector<uint64_t> last_push_round;          // slot -> round of its last pushed row (0: none)
  std::vector<std::deque<PendingRound>> pending;  // shard -> rounds not acknowledged, in order
  std::vector<uint64_t> acked_round;              // shard -> newest acknowledged round
  // shard -> the node group's committed offset on .updates (-1: none known), asked for while a
  // max_staleness wait lasts over a second: below it every push is merged (and snapshotted).
  // Only the staleness bound uses it, not acked_round: a publication from before that merge may
  // still be on its way, and must be taken with our deltas added back.
  std::vector<int64_t> committed;
  // shard -> the furthest read position seen in ParamNodesReadGroup (-1: none): below it every
  // push is merged (not necessarily snapshotted). The staleness bound uses it as `committed`.
  std::vector<int64_t> read_position;
  Clock::time_point last_staleness_log{};
  // Published rows consumed but not applied yet (pull_every_words), slot -> the newest
  // publication of the slot's word (input then output, dim floats each). The correction for
  // our unmerged deltas is made when a publication is consumed, against the acknowledgements
  // of that moment (as an immediate application makes it), and the deltas of every push after
  // it are added as they go out: the buffer then holds what the node will hold once our pushes
  // so far are merged, which is the base ApplyRows wants, however many rounds pass before the
  // application. (Correcting at application time instead would need the deltas of every round
  // since the publication, and only kKeptRounds rounds are kept.)
  // Held in flat lists whose memory is kept from one application to the next (UnappliedRows).
  UnappliedRows unapplied;
  uint64_t last_apply_words = 0;
  // The shards' newest published rows (input then output, dim floats each) of the words seen
  // on .params that this trainer does not hold, at most vocab_capacity words: a word this
  // trainer admits starts from its node row, so its deltas are against what the node holds (a
  // delta against a fresh local initialisation would add a second, unrelated vector to the
  // node's row). A held word's publications go to its row instead (copying them here too cost
  // a trainer a few percent of its time at short push intervals); when it leaves this trainer
  // its node row is kept here then (KeepNodeRows). Most words given a slot are rare ones no
  // shard has published (a run of the 100M corpus with two trainers: about 13k of 200k slot
  // initialisations each found a node row): the filter answers those.
  FilteredWordMap<std::vector<float>> node_rows;
  // The shards' guaranteed counts (count - error) of every word seen in a count record on
  // .params, at most 4 x vocab_capacity words: the learner's group counts
  // (StreamingLearner::SetGroupCounts) are these less what this trainer pushed. Most words
  // given a slot are rare ones no shard counts.
  FilteredWordMap<double> group_counts;
  // The deltas of the last kKeptRounds push rounds not yet acknowledged by every shard: a
  // publication older than this trainer's pushes of a row is taken as the published row plus
  // the deltas it lacks (what the node will hold once it merges them), so neither the other
  // trainers' work nor ours is lost. Older than that, the row is skipped (rows_stale).
  struct RoundDeltas {
    uint64_t round = 0;
    // (slot, position in in/out), sorted by slot (a hash map cost a node allocation a row).
    std::vector<std::pair<uint32_t, uint32_t>> index;
    // The position of `slot`'s deltas in in/out, or -1.
    int64_t Find(uint32_t slot) const {
      const auto it =
          std::lower_bound(index.begin(), index.end(), std::pair<uint32_t, uint32_t>{slot, 0});
      return it != index.end() && it->first == slot ? int64_t{it->second} : int64_t{-1};
    }
    std::vector<float> in, out;                    // dim floats each
    std::vector<uint64_t> message_of;              // position -> id of the message carrying it
  };
  uint64_t next_message_id = 1;
  std::unordered_map<uint64_t, uint64_t> message_round;  // id -> round (until delivered)
  std::unordered_map<uint64_t, int64_t> message_offset;  // id -> offset (INT64_MAX: lost)
  static constexpr size_t kKeptRounds = 8;
  std::deque<RoundDeltas> kept;
  // Push messages the shards may still need again (param/protocol.h, kGap): a shard that finds
  // offsets of its .updates partition dropped by the broker before it read them publishes a gap,
  // and the messages this trainer had there are pushed again. A message is kept from its
  // production until it is safe: below the shard's committed offset (in a snapshot) when flow
  // control reads it, else below the shard's merged watermark; at most kMaxUnsafeBytes a shard
  // (the oldest go first, and a gap over them can no longer be repaired: logged).
  struct UnsafeMessage {
    uint64_t round = 0;
    int64_t offset = -1;  // delivered offset; -1 while in flight
    std::string bytes;
  };
  static constexpr size_t kMaxUnsafeBytes = size_t{64} << 20;
  std::vector<std::map<uint64_t, UnsafeMessage>> unsafe;  // shard -> id -> message
  std::vector<size_t> unsafe_bytes;                       // shard -> their bytes
  std::vector<uint64_t> initial_round;  // slot -> round of its last initial (whole-row) push
  std::unordered_set<uint64_t> repushed;  // ids pushed again, not yet re-delivered
  Clock::time_point last_unsafe_log{};

  // True when the message `id` is below the shard's merged watermark (so merged).
  bool Merged(uint64_t id, uint64_t watermark) const {
    const auto it = message_offset.find(id);
    return it != message_offset.end() && it->second < static_cast<int64_t>(watermark);
  }

  // received = the publication's row plus this trainer's deltas of `slot` that the shard had
  // not merged (messages at or past its watermark) in the rounds after `acked`; false when a
  // needed round is no longer kept or the row's unmerged push was its initial (whole) one.
  bool AddUnacknowledged(uint32_t slot, uint64_t acked, uint64_t watermark, float* in_row,
                         float* out_row) const {
    if (kept.empty() || kept.front().round > acked + 1) return false;
    for (const RoundDeltas& r : kept) {
      if (r.round <= acked) continue;
      const int64_t position = r.Find(slot);
      if (position < 0) continue;
      if (Merged(r.message_of[static_cast<size_t>(position)], watermark)) continue;
      if (initial_round[slot] == r.round) return false;
      const size_t at = static_cast<size_t>(position) * dim;
      for (int j = 0; j < dim; ++j) {
        in_row[j] += r.in[at + j];
        out_row[j] += r.out[at + j];
      }
    }
    return true;
  }

  // StreamingLearner::RowInitializer: the node's row of `word`, if published; the slot then
  // tracks its delta against that row and is not initial.
  bool InitFromNode(std::string_view word, uint32_t slot, float* in, float* out) {
    if (!slot_word[slot].empty() && slot_word[slot] != word) KeepNodeRows(slot);
    const std::vector<float>* rows = node_rows.Find(word);
    if (rows == nullptr) {
      // A fresh local row: the next push carries it whole (MarkFresh), even when the slot held
      // this same word before an eviction (its old base is not this row's).
      slot_word[slot].clear();
      return false;
    }
    std::copy(rows->begin(), rows->begin() + dim, in);
    std::copy(rows->begin() + dim, rows->end(), out);
    input_deltas->Untrack(slot);
    output_deltas->Untrack(slot);
    unapplied.Erase(slot);
    input_deltas->MarkDirty(slot);
    output_deltas->MarkDirty(slot);
    slot_word[slot].assign(word);
    pushed_count[slot] = 0.0;
    initial[slot] = false;
    last_push_round[slot] = 0;
    stats.rows_from_node += 1;
    return true;
  }
  // The word holding `slot` (pushed: slot_word) leaves this trainer: what the node has of it,
  // a publication waiting to be applied or else the trackers' bases (the rows last applied plus
  // the deltas pushed since), goes to node_rows, where it starts again if it comes back.
  void KeepNodeRows(uint32_t slot) {
    const float* in = NodeRowAsTaken(slot, /*output=*/false);
    const float* out = NodeRowAsTaken(slot, /*output=*/true);
    if (in == nullptr || out == nullptr) return;
    KeepNodeRow(slot_word[slot], in, out);
  }
  // What this trainer takes as the node's input or output row of the word in `slot` (dim
  // floats): a publication waiting to be applied, else the tracker's base (the row last applied
  // plus the deltas pushed since); nullptr for an untracked slot.
  const float* NodeRowAsTaken(uint32_t slot, bool output) {
    const int64_t u = unapplied.Find(slot);
    if (u >= 0) {
      return output ? unapplied.Out(static_cast<size_t>(u)) : unapplied.In(static_cast<size_t>(u));
    }
    return output ? output_deltas->base(slot) : input_deltas->base(slot);
  }
  // node_rows[word] = the input row `in` then the output row `out` (dim floats each), unless
  // node_rows is full.
  void KeepNodeRow(std::string_view word, const float* in, const float* out) {
    if (std::vector<float>* rows = node_rows.FindOrAdd(word)) {
      rows->assign(in, in + dim);
      rows->insert(rows->end(), out, out + dim);
    }
  }
  // A publication of one of `word`'s rows (`in` or `out`, the other nullptr) replaces that row in
  // node_rows when the word is kept there (a word with no kept row waits for a whole one).
  void UpdateNodeRow(std::string_view word, const float* in, const float* out) {
    std::vector<float>* rows = node_rows.Find(word);
    if (rows == nullptr || rows->size() != 2 * static_cast<size_t>(dim)) return;
    if (in != nullptr) std::copy(in, in + dim, rows->begin());
    if (out != nullptr) std::copy(out, out + dim, rows->begin() + dim);
  }
  // What this trainer pushed of `word`'s count since it took `slot` (held by the word).
  double OwnPushed(uint32_t slot, std::string_view word) const {
    return slot_word[slot] == word ? pushed_count[slot] : 0.0;
  }
  // StreamingLearner::GroupCountFn: the rest of the group's occurrences of a word taking a
  // slot (this trainer has pushed none of them since).
  double GroupCountOf(std::string_view word) {
    const double* count = group_counts.Find(word);
    return count == nullptr ? 0.0 : *count;
  }
  // ParamClientOptions::push_hot_rows = rows, and the schedule it gives (none for 0).
  void SetPushHotRows(uint32_t rows) {
    SV_CHECK(rows == 0 || options.push_max_period >= 1);
    options.push_hot_rows = rows;
    stats.push_hot_rows = rows;
    if (rows == 0) return;
    int max_level = 0;
    while (max_level < 30 && (uint64_t{2} << max_level) <= options.push_max_period) ++max_level;
    schedule = PushSchedule({.top_rows = rows, .max_level = max_level});
  }
  void InstallGroupCounts() {
    learner->SetGroupCounts([this](std::string_view word) { return GroupCountOf(word); });
  }
  // A shard's count record of `word`, whose slot in the learner is `slot` (SlotOf; -1: not
  // held): the learner's group count of a word it holds is raised to the shard's guaranteed
  // count less what this trainer pushed of it; another word's is kept for when it takes a slot
  // (GroupCountOf); a removal forgets it.
  void TakeGroupCount(const ParamRecord& r, int64_t slot) {
    if (!options.group_counts) return;
    if (r.removed) {
      group_counts.Erase(r.word);
      return;
    }
    if (!r.has_count) return;
    const double guaranteed = std::max(0.0, r.count - r.count_error);
    // A held word's count lives in the learner (most records: the publications are of the
    // words being trained); the map keeps the others' for when they take a slot.
    if (slot >= 0) {
      const double own = OwnPushed(static_cast<uint32_t>(slot), r.word);
      if (learner->SetGroupCount(r.word, std::max(0.0, guaranteed - own))) {
        stats.group_counts_raised += 1;
      }
      return;
    }
    if (double* count = group_counts.FindOrAdd(r.word)) *count = guaranteed;
  }
  ParamClientStats stats;
  Clock::time_point last_reject_log{};

  ~Impl() {
    if (consumer != nullptr) {
      rd_kafka_consumer_close(consumer);
      rd_kafka_destroy(consumer);
    }
    if (producer != nullptr) {
      rd_kafka_flush(producer, 2000);
      rd_kafka_destroy(producer);
    }
  }

  void EnsureTrackers() {
    if (input_deltas) return;
    const StreamingLearner::RowTables t = learner->MutableRowTables();
    input_deltas.emplace(t.input, t.slots, t.stride, dim);
    output_deltas.emplace(t.output, t.slots, t.stride, dim);
    slot_word.assign(t.slots, std::string());
    unapplied.Reset(t.slots, dim);
    pushed_count.assign(t.slots, 0.0);
    initial.assign(t.slots, false);
    last_push_round.assign(t.slots, 0);
    initial_round.assign(t.slots, 0);
  }

  // librdkafka's delivery report (served by rd_kafka_poll / flush on this thread): the offset
  // a push message of `round` got on partition `shard`. A failed delivery counts as delivered
  // (the push is lost and will never be merged; waiting for it would stall every later row).
  void OnDelivered(int32_t shard, uint64_t id, int64_t offset, rd_kafka_resp_err_t err) {
    if (shard >= 0 && static_cast<size_t>(shard) < unsafe.size()) {
      auto& u = unsafe[static_cast<size_t>(shard)];
      if (auto it = u.find(id); it != u.end()) {
        if (err == RD_KAFKA_RESP_ERR_NO_ERROR) {
          it->second.offset = offset;
        } else {  // lost for good (as a failed delivery always was): nothing to push again
          unsafe_bytes[static_cast<size_t>(shard)] -= it->second.bytes.size();
          u.erase(it);
        }
      }
    }
    const auto found = message_round.find(id);
    if (found == message_round.end()) return;
    const uint64_t round = found->second;
    message_round.erase(found);
    const int64_t at =
        err == RD_KAFKA_RESP_ERR_NO_ERROR ? offset : std::numeric_limits<int64_t>::max();
    if (auto it = message_offset.find(id); it != message_offset.end()) {
      it->second = at;  // (a message pushed again: its new offset)
    } else if (!repushed.count(id)) {
      message_offset[id] = at;
    }
    repushed.erase(id);
    if (shard < 0 || static_cast<size_t>(shard) >= pending.size()) return;
    for (PendingRound& p : pending[static_cast<size_t>(shard)]) {
      if (p.round != round) continue;
      p.delivered += 1;
      if (err == RD_KAFKA_RESP_ERR_NO_ERROR) p.max_offset = std::max(p.max_offset, offset);
      break;
    }
    if (err != RD_KAFKA_RESP_ERR_NO_ERROR) {
      spdlog::error("trainer: a push to {} partition {} was not delivered: {}", updates_topic,
                    shard, rd_kafka_err2str(err));
    }
  }

  // Shard `shard` has merged every push below offset `watermark`: the rounds wholly delivered
  // below it are acknowledged.
  void Acknowledge(uint32_t shard, uint64_t watermark) {
    if (!lag_probe) ForgetSafe(shard, static_cast<int64_t>(watermark));
    std::deque<PendingRound>& q = pending[shard];
    while (!q.empty() && q.front().delivered == q.front().messages &&
           q.front().max_offset < static_cast<int64_t>(watermark)) {
      acked_round[shard] = q.front().round;
      q.pop_front();
    }
  }

  // Forgets the kept messages of `shard` below offset `safe` (UnsafeMessage), oldest first up to
  // the first that is not (offsets grow with the ids, except for a message pushed again, which
  // holds the later ones until it is safe too): a call costs what it forgets.
  void ForgetSafe(uint32_t shard, int64_t safe) {
    auto& u = unsafe[shard];
    while (!u.empty() && u.begin()->second.offset >= 0 && u.begin()->second.offset < safe) {
      unsafe_bytes[shard] -= u.begin()->second.bytes.size();
      u.erase(u.begin());
    }
  }

  // Keeps a copy of push message `id` of `round` to `shard` until it is safe (UnsafeMessage).
  void KeepUnsafe(uint32_t shard, uint64_t id, uint64_t round, const std::string& message) {
    auto& u = unsafe[shard];
    while (!u.empty() && unsafe_bytes[shard] + message.size() > kMaxUnsafeBytes) {
      if (Clock::now() - last_unsafe_log > std::chrono::seconds(10)) {
        spdlog::warn(
            "trainer: more than {} MiB of pushes to {} partition {} not yet in a node "
            "snapshot: the oldest can no longer be pushed again if the broker drops it",
            kMaxUnsafeBytes >> 20, updates_topic, shard);
        last_unsafe_log = Clock::now();
      }
      unsafe_bytes[shard] -= u.begin()->second.bytes.size();
      u.erase(u.begin());
    }
    u[id] = UnsafeMessage{.round = round, .offset = -1, .bytes = message};
    unsafe_bytes[shard] += message.size();
  }

  // A gap published by `shard`: offsets [first, end) of its .updates partition were dropped
  // before the shard read them. Pushes again this trainer's messages there; their rounds wait
  // for the new deliveries (and their deltas count as unmerged until the watermark passes the
  // new offsets).
  Status PushAgain(uint32_t shard, int64_t first, int64_t end) {
    std::vector<uint64_t> ids;
    for (const auto& [id, m] : unsafe[shard]) {
      if (m.offset >= first && m.offset < end) ids.push_back(id);
    }
    if (ids.empty()) return Status::Ok();
    spdlog::warn(
        "trainer: {} of this trainer's pushes to {} partition {} were dropped by the "
        "broker before the shard read them (offsets {}..{}): pushing them again",
        ids.size(), updates_topic, shard, first, end - 1);
    for (const uint64_t id : ids) {
      auto it = unsafe[shard].find(id);
      if (it == unsafe[shard].end()) continue;
      const uint64_t round = it->second.round;
      it->second.offset = -1;
      const std::string bytes = it->second.bytes;  // (Produce may serve delivery reports)
      for (PendingRound& p : pending[shard]) {
        if (p.round != round) continue;
        if (p.delivered > 0) p.delivered -= 1;
        break;
      }
      message_round[id] = round;
      repushed.insert(id);
      if (auto o = message_offset.find(id); o != message_offset.end()) {
        o->second = std::numeric_limits<int64_t>::max();  // not merged until re-delivered
      }
      stats.repushed_messages += 1;
      WaitForShard(shard, bytes.size());  // a shard's whole backlog at once would overrun it again
      SV_RETURN_IF_ERROR(Produce(shard, bytes, id));
    }
    return Status::Ok();
  }

  // Queries `probe`'s group on .updates and raises `positions` (shard -> offset, -1: none) to
  // the group's committed offsets; the query's answer for the caller's watermarks.
  StatusOr<GroupLag> RaisePositions(ConsumerGroupLagProbe& probe, std::vector<int64_t>& positions) {
    StatusOr<GroupLag> lag = probe.Query(updates_topic, 2000);
    if (!lag.ok()) return lag;
    for (const PartitionLag& p : lag->partitions) {
      if (p.partition >= 0 && static_cast<uint32_t>(p.partition) < options.shards) {
        int64_t& position = positions[static_cast<uint32_t>(p.partition)];
        position = std::max(position, p.committed);
      }
    }
    return lag;
  }

  // Waits while partition `shard` of .updates holds more than max_lag_bytes (with `next` more)
  // that the shard has not read: messages past its read position (ParamNodesReadGroup, or its
  // committed offset when that is further or the only one known; past the low watermark when it
  // has neither) times the mean size of this trainer's pushes. The committed offset (a node
  // snapshot) is asked for at most once a second, to forget the copies it makes safe.
  void WaitForShard(uint32_t shard, size_t next) {
    if (options.max_lag_bytes <= 0 || !lag_probe) return;
    const auto start = Clock::now();
    while (options.stop == nullptr || !options.stop->load()) {
      rd_kafka_flush(producer, 10000);  // what was produced is in the log (and in the lag)
      const double mean = stats.push_messages > 0
                              ? static_cast<double>(stats.push_bytes) / stats.push_messages
                              : static_cast<double>(next);
      if (Clock::now() - last_durable_probe >= std::chrono::seconds(1)) {
        if (RaisePositions(*lag_probe, committed).ok()) ForgetSafe(shard, committed[shard]);
        last_durable_probe = Clock::now();
      }
      StatusOr<GroupLag> read_lag = RaisePositions(*read_probe, read_position);
      if (read_lag.ok() && shard >= read_lag->partitions.size()) break;  // not this topic's
      int64_t unread = -1;
      if (read_lag.ok()) {
        const PartitionLag& p = read_lag->partitions[shard];
        const int64_t position = std::max(p.committed, committed[shard]);
        unread = std::max<int64_t>(0, position >= p.low ? p.high - position : p.high - p.low);
        if (static_cast<double>(unread) * mean + static_cast<double>(next) <=
            static_cast<double>(options.max_lag_bytes)) {
          break;
        }
      }
      if (Clock::now() - last_wait_log > std::chrono::seconds(10)) {
        spdlog::warn("trainer: waiting for parameter-node shard {} ({} partition {}: {})", shard,
                     updates_topic, shard,
                     read_lag.ok() ? std::to_string(unread) + " messages not yet read by it"
                                   : read_lag.status().message());
        last_wait_log = Clock::now();
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    stats.throttled_seconds += std::chrono::duration<double>(Clock::now() - start).count();
  }

  Status Produce(uint32_t shard, const std::string& message, uint64_t id) {
    WaitForShard(shard, message.size());
    const auto deadline = Clock::now() + std::chrono::seconds(10);
    while (true) {
      const rd_kafka_resp_err_t e = rd_kafka_producev(
          producer, RD_KAFKA_V_TOPIC(updates_topic.c_str()),
          RD_KAFKA_V_PARTITION(static_cast<int32_t>(shard)),
          RD_KAFKA_V_VALUE(const_cast<char*>(message.data()), message.size()),
          RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY),
          RD_KAFKA_V_OPAQUE(reinterpret_cast<void*>(static_cast<uintptr_t>(id))), RD_KAFKA_V_END);
      if (e == RD_KAFKA_RESP_ERR_NO_ERROR) break;
      if (e != RD_KAFKA_RESP_ERR__QUEUE_FULL || Clock::now() > deadline) {
        return Status::IoError("cannot push to " + updates_topic + " partition " +
                               std::to_string(shard) + ": " + rd_kafka_err2str(e));
      }
      rd_kafka_poll(producer, 10);
    }
    stats.push_messages += 1;
    stats.push_bytes += message.size();
    return Status::Ok();
  }

  // A push's records by shard, and records kept with their memory (word, rows) for the next
  // push (RecycleRecords at the start of each): a push of 20k rows would otherwise allocate and
  // free 40k row vectors.
  std::vector<std::vector<ParamRecord>> push_records;
  std::vector<ParamRecord> record_pool;
  ParamRecord TakeRecord() {
    if (record_pool.empty()) return ParamRecord{};
    ParamRecord r = std::move(record_pool.back());
    record_pool.pop_back();
    r.Reset();
    return r;
  }
  // Push's scratch, kept from one push to the next: the admitted slots and counts, the packed
  // exported deltas (room for every admitted row, written only for the rows that moved) and
  // their positions, the positions where either table moved and which tables did.
  std::vector<uint32_t> push_slots;
  std::vector<double> push_counts;
  std::vector<float> export_in, export_out;
  std::vector<uint32_t> exported_in, exported_out, push_moved;
  std::vector<uint8_t> push_tables;
  std::vector<std::vector<uint32_t>> push_positions;
  static constexpr uint8_t kMovedInput = 1, kMovedOutput = 2;
  static constexpr uint32_t kNoRow = 0xFFFFFFFFu;
  RoundDeltas spare_round;  // the last round dropped from `kept`, its vectors' memory reused
  RoundDeltas TakeRoundDeltas() {
    RoundDeltas r = std::move(spare_round);
    spare_round = RoundDeltas{};
    r.index.clear();
    r.message_of.clear();
    return r;
  }
  void RecycleRecords() {
    for (std::vector<ParamRecord>& shard : push_records) {
      for (ParamRecord& r : shard) record_pool.push_back(std::move(r));
      shard.clear();
    }
  }

  // The admitted slots whose rows go out this round, in slot order, with their counts
  // (push_slots, push_counts): a word new to this trainer (or to its slot) starts fresh, and
  // with the push schedule on (not `everything`) rows not due this round keep their deltas
  // (their base stays) for a later round; a word's first, whole-row push is always due.
  void SelectPushRows(uint64_t round, bool everything) {
    std::vector<uint32_t>& slots = push_slots;
    std::vector<double>& counts = push_counts;
    learner->AdmittedSlotsBySlot(&slots, &counts);  // drains: nothing trains meanwhile
    for (const uint32_t s : slots) {
      const std::string_view word = learner->WordAt(s);
      if (slot_word[s] != word) {  // a word new to this trainer, or a slot given to another
        input_deltas->MarkFresh(s);
        output_deltas->MarkFresh(s);
        slot_word[s] = word;
        pushed_count[s] = 0.0;
        initial[s] = true;
        unapplied.Erase(s);  // a publication of the slot's earlier word, or from before the node
                             // dropped the word: not this row's
      }
    }
    if (everything || options.push_hot_rows == 0) return;
    schedule.SetReference(counts);
    size_t kept_slots = 0;
    for (size_t i = 0; i < slots.size(); ++i) {
      if (!initial[slots[i]] && !schedule.Due(round, slots[i], counts[i])) continue;
      slots[kept_slots] = slots[i];
      counts[kept_slots] = counts[i];
      ++kept_slots;
    }
    stats.rows_deferred += slots.size() - kept_slots;
    slots.resize(kept_slots);
    counts.resize(kept_slots);
  }

  // Exports the deltas of push_slots into a round's deltas (its memory reused from the round it
  // displaces): push_moved gets the positions in push_slots of the rows where either table
  // moved, ascending, the round's in/out their deltas (a table that did not move zero) and
  // push_tables which tables moved. A row not trained since its last push is left out (its
  // rounding residual waits for its next change); with `everything` (the push of a quiet stream,
  // the last one) every residual goes. The deltas are also added to the publications waiting to
  // be applied: what the node will add to them once it merges this push (the exported, rounded
  // delta is also what moved the base).
  RoundDeltas ExportRound(uint64_t round, bool everything) {
    const std::vector<uint32_t>& slots = push_slots;
    const RowDeltaTracker::ExportRows which =
        everything ? RowDeltaTracker::ExportRows::kAll : RowDeltaTracker::ExportRows::kWritten;
    const size_t room = slots.size() * static_cast<size_t>(dim);
    if (export_in.size() < room) export_in.resize(room);
    if (export_out.size() < room) export_out.resize(room);
    input_deltas->ExportPacked(slots, export_in.data(), options.precision, which, &exported_in);
    output_deltas->ExportPacked(slots, export_out.data(), options.precision, which, &exported_out);
    RoundDeltas kept_round = TakeRoundDeltas();
    kept_round.round = round;
    std::vector<uint32_t>& moved = push_moved;
    moved.clear();
    std::set_union(exported_in.begin(), exported_in.end(), exported_out.begin(), exported_out.end(),
                   std::back_inserter(moved));
    kept_round.in.assign(moved.size() * static_cast<size_t>(dim), 0.0f);
    kept_round.out.assign(kept_round.in.size(), 0.0f);
    std::vector<uint8_t>& tables = push_tables;
    tables.assign(moved.size(), 0);
    for (size_t a = 0, b = 0, k = 0; k < moved.size(); ++k) {
      float* const in_row = kept_round.in.data() + k * dim;
      float* const out_row = kept_round.out.data() + k * dim;
      if (a < exported_in.size() && exported_in[a] == moved[k]) {
        const float* d = export_in.data() + a++ * dim;
        if (!AllZero(d, dim)) {
          std::copy(d, d + dim, in_row);
          tables[k] |= kMovedInput;
        }
      }
      if (b < exported_out.size() && exported_out[b] == moved[k]) {
        const float* d = export_out.data() + b++ * dim;
        if (!AllZero(d, dim)) {
          std::copy(d, d + dim, out_row);
          tables[k] |= kMovedOutput;
        }
      }
      if (tables[k] == 0 || unapplied.empty()) continue;
      const int64_t u = unapplied.Find(slots[moved[k]]);
      if (u < 0) continue;
      float* row_in = unapplied.In(static_cast<size_t>(u));
      float* row_out = unapplied.Out(static_cast<size_t>(u));
      for (int j = 0; j < dim; ++j) {
        row_in[j] += in_row[j];
        row_out[j] += out_row[j];
      }
    }
    return kept_round;
  }

  Status Push(uint64_t words_trained, bool everything) {
    EnsureTrackers();
    const uint64_t round = ++push_round;
    SelectPushRows(round, everything);
    RoundDeltas kept_round = ExportRound(round, everything);
    const std::vector<uint32_t>& slots = push_slots;
    const std::vector<double>& counts = push_counts;
    const std::vector<uint32_t>& moved = push_moved;
    const std::vector<uint8_t>& tables = push_tables;
    RecycleRecords();
    std::vector<std::vector<ParamRecord>>& by_shard = push_records;
    by_shard.resize(options.shards);
    kept_round.message_of.assign(moved.size(), 0);
    // shard -> per record, its row's position in this round's deltas (kNoRow: a count only)
    std::vector<std::vector<uint32_t>>& positions = push_positions;
    positions.resize(options.shards);
    for (std::vector<uint32_t>& p : positions) p.clear();
    std::vector<bool> shard_rows(options.shards, false);
    for (size_t i = 0, k = 0; i < slots.size(); ++i) {
      const uint32_t s = slots[i];
      const bool in_moved = k < moved.size() && moved[k] == i;
      const uint8_t moved_tables = in_moved ? tables[k] : 0;
      const uint32_t position = in_moved ? static_cast<uint32_t>(k++) : kNoRow;
      const double count = std::max(0.0, counts[i] - pushed_count[s]);
      if (moved_tables == 0 && count < 1.0) continue;
      ParamRecord r = TakeRecord();
      r.word.assign(slot_word[s]);
      if (count >= 1.0) {
        r.has_count = true;
        r.count = count;
        pushed_count[s] = counts[i];
      }
      uint32_t record_position = kNoRow;
      if (moved_tables != 0) {
        // Only the tables that moved: a shard adds nothing for an absent one.
        const size_t at = static_cast<size_t>(position) * dim;
        if (moved_tables & kMovedInput) {
          r.input.assign(kept_round.in.data() + at, kept_round.in.data() + at + dim);
        }
        if (moved_tables & kMovedOutput) {
          r.output.assign(kept_round.out.data() + at, kept_round.out.data() + at + dim);
        }
        r.initial = initial[s];  // a shard that knows the word keeps its own rows
        if (r.initial) initial_round[s] = round;
        initial[s] = false;
        last_push_round[s] = round;
        kept_round.index.emplace_back(s, position);
        record_position = position;
      }
      const uint32_t shard = ShardOf(r.word, options.shards);
      if (moved_tables != 0) shard_rows[shard] = true;
      by_shard[shard].push_back(std::move(r));
      positions[shard].push_back(record_position);
    }
    // (slots ascend, so the index is sorted by slot already)

    for (uint32_t shard = 0; shard < options.shards; ++shard) {
      if (by_shard[shard].empty()) continue;
      ParamMessageHeader h;
      h.kind = ParamMessageKind::kPush;
      h.precision = options.precision;
      h.dim = static_cast<uint32_t>(dim);
      h.sender = options.sender;
      h.sequence = sequence;
      h.sender_clock = words_trained;
      h.base_clock = stats.node_clock;
      // 512 KiB: under librdkafka's default message.max.bytes (1,000,000) with room to spare.
      StatusOr<std::vector<std::string>> messages =
          EncodeParamMessages(h, by_shard[shard], size_t{512} << 10);
      if (!messages.ok()) return messages.status();
      sequence += messages->size();
      stats.rows_pushed += by_shard[shard].size();
      pending[shard].push_back({.round = round,
                                .messages = static_cast<uint32_t>(messages->size()),
                                .rows = shard_rows[shard]});
      size_t record = 0;
      for (std::string& m : *messages) {
        const uint64_t id = next_message_id++;
        message_round[id] = round;
        const uint32_t count = ParamMessageRecordCount(m);
        for (uint32_t k = 0; k < count && record < positions[shard].size(); ++k, ++record) {
          const uint32_t position = positions[shard][record];
          if (position != kNoRow) kept_round.message_of[position] = id;
        }
      }
      const uint64_t first_id = next_message_id - messages->size();
      for (size_t k = 0; k < messages->size(); ++k) {
        KeepUnsafe(shard, first_id + k, round, (*messages)[k]);
        SV_RETURN_IF_ERROR(Produce(shard, (*messages)[k], first_id + k));
      }
    }
    kept.push_back(std::move(kept_round));
    if (kept.size() > kKeptRounds) {
      for (uint64_t id : kept.front().message_of) message_offset.erase(id);
      spare_round = std::move(kept.front());  // its memory serves the next round
      kept.pop_front();
    }
    rd_kafka_poll(producer, 0);
    stats.pushes += 1;
    last_push_words = words_trained;
    return Status::Ok();
  }

  // Assigns every partition of .params from the beginning once the topic exists (asked at most
  // once a second until then).
  void AssignParams() {
    if (params_assigned || Clock::now() - last_assign_try < std::chrono::seconds(1)) return;
    last_assign_try = Clock::now();
    rd_kafka_topic_t* t = rd_kafka_topic_new(consumer, params_topic.c_str(), nullptr);
    const rd_kafka_metadata_t* md = nullptr;
    const rd_kafka_resp_err_t e = rd_kafka_metadata(consumer, 0, t, &md, 2000);
    rd_kafka_topic_destroy(t);
    if (e != RD_KAFKA_RESP_ERR_NO_ERROR) return;
    int partitions = 0;
    if (md->topic_cnt == 1 && md->topics[0].err == RD_KAFKA_RESP_ERR_NO_ERROR) {
      partitions = md->topics[0].partition_cnt;
    }
    rd_kafka_metadata_destroy(md);
    if (partitions <= 0) return;
    rd_kafka_topic_partition_list_t* list = rd_kafka_topic_partition_list_new(partitions);
    for (int p = 0; p < partitions; ++p) {
      rd_kafka_topic_partition_list_add(list, params_topic.c_str(), p)->offset =
          RD_KAFKA_OFFSET_BEGINNING;
    }
    params_assigned = rd_kafka_assign(consumer, list) == RD_KAFKA_RESP_ERR_NO_ERROR;
    rd_kafka_topic_partition_list_destroy(list);
  }

  // The offset each partition of .params is read up to (-1: none read yet). Offsets there are
  // contiguous: a message past the next one means the broker dropped those between before
  // this trainer read them (librdkafka then went on from the oldest it still held).
  std::vector<int64_t> params_next;
  Clock::time_point last_lost_log{};
  void CountLostPublications(int32_t partition, int64_t offset) {
    if (partition < 0) return;
    if (params_next.size() <= static_cast<size_t>(partition)) params_next.resize(partition + 1, -1);
    int64_t& next = params_next[static_cast<size_t>(partition)];
    if (next >= 0 && offset > next) {
      stats.pulls_lost += static_cast<uint64_t>(offset - next);
      if (Clock::now() - last_lost_log > std::chrono::seconds(10)) {
        spdlog::warn(
            "trainer: {} partition {}: offsets {}..{} were dropped by the broker before "
            "this trainer read them (their rows come again when they change, or with "
            "the shard's next sweep)",
            params_topic, partition, next, offset - 1);
        last_lost_log = Clock::now();
      }
    }
    next = std::max(next, offset + 1);
  }

  // Consumes what the shards published since the last call: acknowledgements, the node rows
  // new words start from, and the newest row of each held word into `unapplied`.
  void Consume() {
    rd_kafka_poll(producer, 0);  // delivery reports: the offsets of this trainer's pushes
    AssignParams();
    if (!params_assigned) return;
    std::vector<float> received(2 * static_cast<size_t>(dim));
    for (int n = 0; n < 10000; ++n) {
      rd_kafka_message_t* m = rd_kafka_consumer_poll(consumer, 0);
      if (m == nullptr) break;
      if (m->err == RD_KAFKA_RESP_ERR_NO_ERROR) {
        CountLostPublications(m->partition, m->offset);
        stats.pull_messages += 1;
        stats.pull_bytes += m->len;
        const Status decoded = DecodeParamMessageInto(
            std::string_view(static_cast<const char*>(m->payload), m->len),
            {.model = ParamModelKind::kSgns, .dim = static_cast<uint32_t>(dim)}, publication);
        const ParamMessage* msg = &publication;
        if (decoded.ok() && msg->header.kind == ParamMessageKind::kGap) {
          if (msg->header.sender < options.shards) {
            Status s = PushAgain(msg->header.sender, static_cast<int64_t>(msg->header.sender_clock),
                                 static_cast<int64_t>(msg->header.base_clock));
            if (!s.ok()) spdlog::error("trainer: {}", s.message());
          }
        } else if (!decoded.ok() || msg->header.kind == ParamMessageKind::kPush) {
          stats.rejected += 1;
          if (Clock::now() - last_reject_log > std::chrono::seconds(10)) {
            spdlog::warn("trainer: skipped a publication on {} partition {} offset {}: {}",
                         params_topic, m->partition, static_cast<long long>(m->offset),
                         decoded.ok() ? "a push, not a publication" : decoded.message());
            last_reject_log = Clock::now();
          }
        } else if (msg->header.kind == ParamMessageKind::kVocabulary) {
          // Its watermark holds as a row publication's does (the same header).
          if (msg->header.sender < options.shards) {
            Acknowledge(msg->header.sender, msg->header.base_clock);
          }
          // A word the node evicted starts from zero there: its next push must carry the whole
          // row again (MarkFresh at the next push, as for a word new to this trainer).
          for (const ParamRecord& r : msg->records) {
            if (!r.removed && !options.group_counts) continue;
            const int64_t slot = learner->SlotOf(r.word);
            TakeGroupCount(r, slot);
            if (!r.removed) continue;
            node_rows.Erase(r.word);
            if (slot >= 0 && slot_word[static_cast<uint32_t>(slot)] == r.word) {
              slot_word[static_cast<uint32_t>(slot)].clear();
              unapplied.Erase(static_cast<uint32_t>(slot));
            }
          }
        } else if (msg->header.kind == ParamMessageKind::kRows) {
          stats.node_clock = std::max(stats.node_clock, msg->header.sender_clock);
          const uint32_t shard = msg->header.sender;
          if (shard < options.shards) Acknowledge(shard, msg->header.base_clock);
          for (const ParamRecord& r : msg->records) {
            const int64_t slot = learner->SlotOf(r.word);
            TakeGroupCount(r, slot);
            // Held: a word this trainer holds and has pushed (else its rows are all local).
            const bool held = slot >= 0 && slot_word[static_cast<uint32_t>(slot)] == r.word;
            // A shard publishes only the tables its merges changed since it last published the
            // word; a record may carry one of the two rows.
            const bool has_in = r.input.size() == static_cast<size_t>(dim);
            const bool has_out = r.output.size() == static_cast<size_t>(dim);
            if (!held) {
              if (has_in && has_out) {
                KeepNodeRow(r.word, r.input.data(), r.output.data());
              } else if (has_in || has_out) {
                UpdateNodeRow(r.word, has_in ? r.input.data() : nullptr,
                              has_out ? r.output.data() : nullptr);
              }
              continue;
            }
            const uint32_t s = static_cast<uint32_t>(slot);
            if (shard >= options.shards || !(has_in || has_out)) continue;
            if (has_in) std::copy(r.input.begin(), r.input.end(), received.begin());
            if (has_out) std::copy(r.output.begin(), r.output.end(), received.begin() + dim);
            if (last_push_round[s] > acked_round[shard]) {
              // The shard had not merged our last push of the row when it published it.
              if (!AddUnacknowledged(s, acked_round[shard], msg->header.base_clock, received.data(),
                                     received.data() + dim)) {
                stats.rows_stale += 1;  // an earlier publication waiting stays
                continue;
              }
              stats.rows_corrected += 1;
            }
            if (!(has_in && has_out)) {
              // The table the shard did not publish has not changed there since it last
              // published it: it stays what this trainer takes as the node's row (a waiting
              // publication's, else the base: that row with our later pushes in it).
              const float* keep = NodeRowAsTaken(s, /*output=*/has_in);
              if (keep == nullptr) continue;
              std::copy(keep, keep + dim, received.begin() + (has_in ? dim : 0));
            }
            // The newest publication supersedes a waiting one.
            unapplied.Put(s, r.word, received.data(), received.data() + dim);
          }
        }
      }
      rd_kafka_message_destroy(m);
    }
    stats.rows_pending = unapplied.size();
  }

  // Applies the rows waiting in `unapplied` to the learner (ApplyRows: each keeps the local
  // delta not yet pushed).
  void ApplyUnapplied(uint64_t words_trained) {
    last_apply_words = words_trained;
    if (unapplied.empty()) return;
    // Rows whose slot changed word since are dropped (they are erased when the slot changes
    // word; a guard).
    const size_t kept = unapplied.KeepWhere(
        [this](uint32_t slot, const std::string& word) { return slot_word[slot] == word; });
    stats.rows_pending = 0;
    if (kept > 0) {
      learner->MutableRowTables();  // quiesce: the rows are written below
      input_deltas->ApplyRows(unapplied.slots(), unapplied.In(0));
      output_deltas->ApplyRows(unapplied.slots(), unapplied.Out(0));
      stats.rows_applied += kept;
    }
    unapplied.Clear();
  }

  // The oldest of this trainer's push rounds with rows that `shard` has not acknowledged, by
  // its publications' watermark or its committed offset; 0 when there is none.
  uint64_t OldestUnacknowledged(uint32_t shard) const {
    for (const PendingRound& p : pending[shard]) {
      if (!p.rows) continue;
      if (p.delivered == p.messages &&
          p.max_offset < std::max(committed[shard], read_position[shard])) {
        continue;
      }
      return p.round;
    }
    return 0;
  }

  void UpdateUnacknowledged() {
    uint64_t oldest = 0;
    for (uint32_t shard = 0; shard < options.shards; ++shard) {
      const uint64_t o = OldestUnacknowledged(shard);
      if (o != 0 && (oldest == 0 || o < oldest)) oldest = o;
    }
    stats.unacked_rounds = oldest == 0 ? 0 : push_round - oldest + 1;
  }

  // Bounded delay (ParamClientOptions::max_staleness): before push round `round`, waits while
  // some shard has not acknowledged a round up to round - max_staleness - 1 that carried rows
  // to it, consuming publications meanwhile; the stop flag ends the wait.
  void WaitForAcknowledgements(uint64_t round) {
    if (options.max_staleness < 0) return;
    const uint64_t k = static_cast<uint64_t>(options.max_staleness);
    if (round <= k + 1) return;
    const uint64_t limit = round - k - 1;  // rounds up to it must be acknowledged
    auto behind = [&]() -> int64_t {
      for (uint32_t shard = 0; shard < options.shards; ++shard) {
        const uint64_t o = OldestUnacknowledged(shard);
        if (o != 0 && o <= limit) return shard;
      }
      return -1;
    };
    if (behind() < 0) return;
    const auto start = Clock::now();
    auto last_probe = start;
    while (options.stop == nullptr || !options.stop->load()) {
      Consume();
      const int64_t shard = behind();
      if (shard < 0) break;
      if (lag_probe && Clock::now() - last_probe > std::chrono::milliseconds(200)) {
        // A round that led to no publication (rows the shard dropped) is acknowledged by the
        // shard's read position once it passes the round (or its snapshot's commit).
        if (RaisePositions(*lag_probe, committed).ok()) {
          for (uint32_t s = 0; s < options.shards; ++s) ForgetSafe(s, committed[s]);
        }
        (void)RaisePositions(*read_probe, read_position);
        last_probe = Clock::now();
        continue;
      }
      if (Clock::now() - last_staleness_log > std::chrono::seconds(10)) {
        spdlog::warn(
            "trainer: --max-staleness {}: waiting for parameter-node shard {} to merge "
            "push round {} ({} partition {})",
            options.max_staleness, shard, OldestUnacknowledged(static_cast<uint32_t>(shard)),
            updates_topic, shard);
        last_staleness_log = Clock::now();
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    stats.staleness_wait_seconds += std::chrono::duration<double>(Clock::now() - start).count();
  }
};

ParamClient::ParamClient(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
ParamClient::~ParamClient() {
  impl_->learner->SetRowInitializer({});
  // The learner may outlive the client: its group counts stay, without the client's map.
  if (impl_->options.group_counts) {
    impl_->learner->SetGroupCounts([](std::string_view) { return 0.0; });
  }
}

StatusOr<std::unique_ptr<ParamClient>> ParamClient::Create(const ParamClientOptions& options,
                                                           StreamingLearner* learner) {
  if (options.shards < 1) return Status::InvalidArgument("--param-shards must be at least 1");
  if (options.push_hot_rows > 0 && options.push_max_period < 1) {
    return Status::InvalidArgument("--push-max-period must be at least 1 round");
  }
  if (options.push_every_words < 1) {
    return Status::InvalidArgument("--push-every must be at least 1 word");
  }
  if (options.max_staleness < -1) {
    return Status::InvalidArgument("--max-staleness must be -1 (no bound) or at least 0 rounds");
  }
  if (learner->options().cuda_device >= 0) {
    return Status::InvalidArgument(
        "--param-shards: the rows of a --device cuda learner live on the device; the parameter "
        "node's pushes and pulls need them on the host (use --device cpu)");
  }
  auto impl = std::make_unique<Impl>();
  impl->options = options;
  impl->stats.push_every_words = options.push_every_words;
  impl->stats.group_counts = options.group_counts ? 1 : 0;
  impl->learner = learner;
  impl->SetPushHotRows(options.push_hot_rows);
  impl->dim = learner->options().dim;
  impl->updates_topic = UpdatesTopic(options.kafka.topic_prefix);
  impl->params_topic = ParamsTopic(options.kafka.topic_prefix);
  impl->pending.resize(options.shards);
  impl->acked_round.assign(options.shards, 0);
  impl->committed.assign(options.shards, -1);
  impl->read_position.assign(options.shards, -1);
  impl->unsafe.resize(options.shards);
  impl->unsafe_bytes.assign(options.shards, 0);
  impl->node_rows.set_capacity(learner->options().vocab_capacity);
  impl->group_counts.set_capacity(4 * static_cast<size_t>(learner->options().vocab_capacity));
  impl->EnsureTrackers();
  char err[512];
  StatusOr<rd_kafka_conf_t*> pconf =
      MakeRdKafkaConf(options.kafka, {{"client.id", "streamvec-trainer-pushes"},
                                      {"linger.ms", "5"},
                                      {"message.max.bytes", std::to_string(2 << 20)}});
  if (!pconf.ok()) return pconf.status();
  rd_kafka_conf_set_opaque(*pconf, impl.get());
  rd_kafka_conf_set_dr_msg_cb(*pconf, [](rd_kafka_t*, const rd_kafka_message_t* m, void* opaque) {
    static_cast<Impl*>(opaque)->OnDelivered(
        m->partition, static_cast<uint64_t>(reinterpret_cast<uintptr_t>(m->_private)), m->offset,
        m->err);
  });
  impl->producer = rd_kafka_new(RD_KAFKA_PRODUCER, *pconf, err, sizeof err);
  if (impl->producer == nullptr) {
    rd_kafka_conf_destroy(*pconf);
    return Status::InvalidArgument(std::string("Kafka producer: ") + err);
  }
  StatusOr<rd_kafka_conf_t*> cconf = MakeRdKafkaConf(
      options.kafka, {{"client.id", "streamvec-trainer-pulls"},
                      {"group.id", options.kafka.topic_prefix + ".param-readers"},
                      {"enable.auto.commit", "false"},
                      {"enable.auto.offset.store", "false"},
                      {"fetch.wait.max.ms", "10"},
                      // One fetch takes all the embedded broker's ring holds (librdkafka's
                      // 1 MiB a fetch is slower than a near-synchronous shard publishes, up to
                      // 40 MiB/s); a trainer the ring overtook anyway reads on from the oldest
                      // publication it still holds, not from the end, and within 20 ms (after
                      // the default 500 ms the ring has moved past it again).
                      {"max.partition.fetch.bytes", std::to_string(kParamFetchBytes)},
                      {"auto.offset.reset", "earliest"},
                      {"fetch.error.backoff.ms", "20"}});
  if (!cconf.ok()) return cconf.status();
  impl->consumer = rd_kafka_new(RD_KAFKA_CONSUMER, *cconf, err, sizeof err);
  if (impl->consumer == nullptr) {
    rd_kafka_conf_destroy(*cconf);
    return Status::InvalidArgument(std::string("Kafka consumer: ") + err);
  }
  rd_kafka_poll_set_consumer(impl->consumer);
  if (options.max_lag_bytes > 0 || options.max_staleness >= 0) {
    StatusOr<std::unique_ptr<ConsumerGroupLagProbe>> probe =
        ConsumerGroupLagProbe::Create(options.kafka, ParamNodesGroup(options.kafka.topic_prefix));
    if (!probe.ok()) return probe.status();
    impl->lag_probe = std::move(probe).value();
    StatusOr<std::unique_ptr<ConsumerGroupLagProbe>> read_probe = ConsumerGroupLagProbe::Create(
        options.kafka, ParamNodesReadGroup(options.kafka.topic_prefix));
    if (!read_probe.ok()) return read_probe.status();
    impl->read_probe = std::move(read_probe).value();
  }
  // The learner changes only once nothing can fail: a client that does not start leaves it as
  // it was (no initializer pointing into a freed client).
  learner->SetWordSeededInit(true);
  Impl* raw = impl.get();
  learner->SetRowInitializer([raw](std::string_view word, uint32_t slot, float* in, float* out) {
    return raw->InitFromNode(word, slot, in, out);
  });
  if (options.group_counts) raw->InstallGroupCounts();
  return std::unique_ptr<ParamClient>(new ParamClient(std::move(impl)));
}

Status ParamClient::Sync(bool force) {
  Impl& m = *impl_;
  const uint64_t trained = m.learner->stats().words_trained;
  if (force || trained - m.last_push_words >= m.options.push_every_words) {
    m.WaitForAcknowledgements(m.push_round + 1);
    SV_RETURN_IF_ERROR(m.Push(trained, /*everything=*/force));
  }
  m.Consume();
  if (force || trained - m.last_apply_words >= m.options.pull_every_words) {
    m.ApplyUnapplied(trained);
  }
  m.UpdateUnacknowledged();
  rd_kafka_poll(m.producer, 0);
  return Status::Ok();
}

Status ParamClient::Flush(int timeout_ms) {
  const rd_kafka_resp_err_t e = rd_kafka_flush(impl_->producer, timeout_ms);
  if (e != RD_KAFKA_RESP_ERR_NO_ERROR) {
    return Status::IoError(std::string("pushes not delivered: ") + rd_kafka_err2str(e));
  }
  return Status::Ok();
}

ParamClientStats ParamClient::stats() const { return impl_->stats; }

void ParamClient::set_push_every_words(uint64_t words) {
  SV_CHECK(words >= 1);
  impl_->options.push_every_words = words;
  impl_->stats.push_every_words = words;
}

uint64_t ParamClient::push_every_words() const { return impl_->options.push_every_words; }

void ParamClient::set_push_hot_rows(uint32_t rows) { impl_->SetPushHotRows(rows); }

uint32_t ParamClient::push_hot_rows() const { return impl_->options.push_hot_rows; }

void ParamClient::set_stop(const std::atomic<bool>* stop) { impl_->options.stop = stop; }

void ParamClient::set_group_counts(bool on) {
  Impl& m = *impl_;
  if (on == m.options.group_counts) return;
  m.options.group_counts = on;
  m.stats.group_counts = on ? 1 : 0;
  if (on) {
    m.InstallGroupCounts();  // the held words' counts come with the next publications
  } else {
    m.learner->SetGroupCounts({});
    m.group_counts.Clear();
  }
}

bool ParamClient::group_counts() const { return impl_->options.group_counts; }

}  // namespace streamvec
