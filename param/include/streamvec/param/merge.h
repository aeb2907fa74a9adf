// How a parameter-node shard merges the row deltas that several trainers push for one row
// (issue 20).
//
// A **round** is what the node merges into one row at once: the deltas for one row (one word's
// input vector, or its output vector) found in one batch of consumed `<prefix>.updates`
// messages (what one poll of the node's consumer returns, merged in offset order). Within a
// batch one sender's deltas for the row are first summed into one contribution: they are
// sequential (the second was computed after the first had been applied on that trainer), so
// only different senders' deltas are concurrent. A round therefore holds at most one delta per
// trainer, its size is the number of trainers that touched the row in the batch, and a row no
// trainer touched is left alone. MergeBatch collects a batch and applies its rounds; MergeRound
// applies one.
//
// Rows are the node's: dim floats (any stride beyond is not touched) and one row-wise Adagrad
// accumulator per row (Duchi et al. 2011 in the row-wise form of the streaming learner,
// AdagradRowUpdate: G += mean_j(g_j^2), row += eta / sqrt(G + epsilon) * g). Sums, dot products
// and norms are taken in double, so deltas up to float's range give finite results.
//
// Thread safety: MergeRound is a pure function of its arguments; a MergeBatch is driven by one
// thread.
#ifndef STREAMVEC_PARAM_MERGE_H_
#define STREAMVEC_PARAM_MERGE_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "streamvec/base/status.h"

namespace streamvec {

enum class MergeRule {
  // Downpour SGD with Adagrad on the node (Dean et al. 2012, "Large Scale Distributed Deep
  // Networks", section 4.1): each contribution is treated as a gradient step and
  // applied in order with the row's node-side Adagrad rate, so a row's steps shrink as
  // 1/sqrt(updates) however many trainers push it.
  kDownpour,
  // row += the mean of the round's deltas: divided by the trainers that touched the row, not by
  // all trainers, so a row only one trainer touched gets that delta unchanged (lesson 2 of the
  // research notes on distributed word2vec).
  kAverage,
  // row += the sum of the round's deltas (Spark MLlib's merge; known to diverge with many
  // concurrent writers: kept as the baseline the benchmark compares against).
  kSum,
  // The AdaSum combiner (Maleki et al. 2021, "Scaling Distributed Training with Adaptive
  // Summation", MLSys 2021; used as GraphAny2Vec's gradient combiner, Gill et al. 2021):
  // adasum(a, b) = (1 - a.b / (2|a|^2)) a + (1 - a.b / (2|b|^2)) b, the sum when a and b are
  // orthogonal and their average when they are parallel, applied as a reduction tree over the
  // round (AdaSumRound). row += the result.
  kAdaSum,
  // row += scale * the sum of the round's deltas, scale = 1 / sqrt(T) for T the trainers
  // active on the shard (MergeOptions::scale; the node sets it): asynchronous pushes of a row
  // are merged one at a time, so a rule that combines a round's deltas rarely acts, and T
  // trainers' stale deltas of a row, each computed without the others', overshoot when summed
  // (staleness-dependent step sizes, Zhang et al. 2016, "Staleness-aware Async-SGD", IJCAI).
  // 1/sqrt(T) is between the sum (right for rare rows, whose deltas are independent) and the
  // average (right for frequent rows, whose deltas agree); issue 20's benchmark measured it.
  kScaledSum,
};

// The rule --merge names: "downpour", "average", "sum", "adasum", "scaled".
std::string_view MergeRuleName(MergeRule rule);
// The inverse of MergeRuleName; InvalidArgument "--merge must be one of downpour, average, sum,
// adasum, scaled, not 'x'" otherwise.
StatusOr<MergeRule> ParseMergeRule(std::string_view name);
// --merge-scale: "auto" gives 0 (the node then scales by 1/sqrt(T), MergeRule::kScaledSum), a
// number in (0, 1] gives itself; InvalidArgument "--merge-scale must be auto or a number in
// (0, 1], not 'x'" otherwise.
StatusOr<double> ParseMergeScale(std::string_view text);

struct MergeOptions {
  // The rule --merge picks. kScaledSum by default: issue 20's benchmark (docs/distributed.md,
  // "Measured") found it best with 4 trainers, where pushes are merged one at a time so that
  // AdaSum and averaging act as the plain sum, which overshoots.
  MergeRule rule = MergeRule::kScaledSum;
  float eta = 0.2f;       // kDownpour: Adagrad base rate (the learner's --eta), > 0
  float epsilon = 1e-6f;  // kDownpour: added to G under the square root (the learner's), > 0
  double scale = 1.0;     // kScaledSum: the factor of the sum, > 0
};

// One node row: dim floats of the vector, and its row-wise Adagrad accumulator (read and
// written by kDownpour only; the others leave it alone).
struct NodeRowRef {
  float* row = nullptr;
  float* accumulator = nullptr;
};

// adasum(a, b) of two dim-vectors into out (which may alias a or b). A zero vector's own
// coefficient is taken as 1 (the limit is irrelevant: it multiplies zero), so adasum(0, b) = b.
void AdaSumPair(const double* a, const double* b, int dim, double* out);

// The AdaSum reduction tree over n >= 1 dim-vectors, in place: level by level, vectors 2i and
// 2i + 1 are combined into one and an odd last vector moves up unchanged (Maleki et al.'s
// recursive-halving order), until one is left; the result is returned in vectors[0..dim).
// `vectors` holds n x dim doubles, row-major.
void AdaSumRound(double* vectors, size_t n, int dim);

// Applies one round of deltas (`deltas.size()` pointers to dim floats: one per sender, in
// consumption order) to `row` under `options.rule`. An empty round changes nothing; an all-zero
// delta changes nothing under every rule (kDownpour: its step is zero and G does not grow).
void MergeRound(const MergeOptions& options, std::span<const float* const> deltas, int dim,
                NodeRowRef row);

// Collects one batch of consumed pushes and applies its rounds: one contribution per (row key,
// sender), deltas of the same sender and key summed. Keys are the caller's (e.g.
// slot * 2 + table); memory grows with the distinct (key, sender) pairs until Clear, and with
// the largest key below 2^22 (4 bytes a key: a table from key to round, kept across batches).
class MergeBatch {
 public:
  explicit MergeBatch(int dim);
  // Adds `delta` (dim floats) from `sender` for row `key`.
  void Add(uint64_t key, uint32_t sender, std::span<const float> delta);
  int dim() const { return dim_; }
  // Rows (keys) with at least one contribution, and contributions in all.
  size_t rows() const { return rounds_.size(); }
  size_t contributions() const { return contributions_; }
  // Applies every row's round with MergeRound, keys in the order they were first added;
  // `row_of(key)` gives the row to merge into (called once per key, for every key before the
  // first merge: the rows are prefetched ahead of their merges). Then clears the batch.
  void Apply(const MergeOptions& options, const std::function<NodeRowRef(uint64_t key)>& row_of);
  // Empties the batch and keeps its memory for the next one (a node merges batch after batch).
  void Clear();

 private:
  static constexpr uint32_t kNoPart = ~uint32_t{0};
  struct Part {
    uint32_t sender;
    uint32_t next;  // the round's next part, kNoPart at its last
    size_t offset;  // into pool_
  };
  struct Round {
    uint64_t key;
    uint32_t head, tail;  // its parts, a list through parts_ in the order they were added
  };
  int dim_;
  std::vector<Round> rounds_;                    // first-added order
  std::vector<Part> parts_;                      // every round's parts, flat
  // key -> index into rounds_ + 1 (0: no round yet), for keys below kDenseKeys (grown to the
  // largest key added; the node's keys are slot * 2 + table); larger keys go to by_key_.
  static constexpr uint64_t kDenseKeys = uint64_t{1} << 22;
  std::vector<uint32_t> round_of_key_;
  std::unordered_map<uint64_t, size_t> by_key_;  // key -> index into rounds_
  std::vector<float> pool_;                      // contributions, dim floats each
  std::vector<const float*> deltas_;             // Apply's scratch
  std::vector<NodeRowRef> targets_;              // Apply's scratch: each round's row
  size_t contributions_ = 0;
};

}  // namespace streamvec

#endif  // STREAMVEC_PARAM_MERGE_H_
