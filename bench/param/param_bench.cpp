// Single-thread costs of the parameter node's and trainer's library pieces, for the scaling model
// of issue 20 (merges/s per node core, bytes and time per pushed row): best of five passes each.
// Built and run by bench/param/param_bench.sh against one build's libraries.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "streamvec/param/count_summary.h"
#include "streamvec/param/merge.h"
#include "streamvec/param/protocol.h"
#include "streamvec/param/row_deltas.h"

namespace {

using Clock = std::chrono::steady_clock;

template <typename F>
double BestSeconds(F&& f) {
  double best = 1e30;
  for (int rep = 0; rep < 5; ++rep) {
    const auto t0 = Clock::now();
    f();
    best = std::min(best, std::chrono::duration<double>(Clock::now() - t0).count());
  }
  return best;
}

}  // namespace

int main() {
  using namespace streamvec;
  constexpr int kDim = 100;
  std::mt19937 rng(1);
  std::normal_distribution<float> n(0.0f, 0.01f);

  // Merge rounds: 100k rows, each with a round of T deltas (T trainers touched it).
  const size_t rows = 100000;
  std::vector<float> table(rows * kDim), acc(rows, 0.0f), deltas(4 * rows * kDim);
  for (float& x : table) x = n(rng);
  for (float& x : deltas) x = n(rng);
  for (int trainers : {1, 2, 4}) {
    for (MergeRule rule :
         {MergeRule::kDownpour, MergeRule::kAverage, MergeRule::kSum, MergeRule::kAdaSum}) {
      MergeOptions o;
      o.rule = rule;
      std::vector<const float*> round(trainers);
      const double s = BestSeconds([&] {
        for (size_t r = 0; r < rows; ++r) {
          for (int t = 0; t < trainers; ++t) {
            round[t] = deltas.data() + (static_cast<size_t>(t) * rows + r) * kDim;
          }
          MergeRound(o, round, kDim, NodeRowRef{table.data() + r * kDim, &acc[r]});
        }
      });
      std::printf("merge %-8s dim %d, rounds of %d: %.2fM rounds/s, %.2fM deltas/s\n",
                  std::string(MergeRuleName(rule)).c_str(), kDim, trainers, rows / s / 1e6,
                  rows * trainers / s / 1e6);
    }
  }

  // Protocol: 20k push records (word, count, input and output deltas) in 1 MiB messages.
  std::vector<ParamRecord> records(20000);
  for (size_t i = 0; i < records.size(); ++i) {
    ParamRecord& r = records[i];
    r.word = "word" + std::to_string(i);
    r.has_count = true;
    r.count = 3;
    r.input.resize(kDim);
    r.output.resize(kDim);
    for (float& x : r.input) x = n(rng);
    for (float& x : r.output) x = n(rng);
  }
  for (ParamPrecision p : {ParamPrecision::kFp32, ParamPrecision::kFp16}) {
    ParamMessageHeader h;
    h.dim = kDim;
    h.precision = p;
    std::vector<std::string> messages;
    const double enc = BestSeconds([&] { messages = EncodeParamMessages(h, records).value(); });
    size_t bytes = 0;
    for (const std::string& m : messages) bytes += m.size();
    size_t decoded = 0;
    const double dec = BestSeconds([&] {
      for (const std::string& m : messages) {
        decoded += DecodeParamMessage(m, {ParamModelKind::kSgns, kDim}).value().records.size();
      }
    });
    std::printf("protocol %s: %zu messages, %.1f bytes a record; encode %.0f MB/s (%.2fM "
                "records/s), decode %.0f MB/s (%.2fM records/s)\n",
                ParamPrecisionName(p).c_str(), messages.size(),
                static_cast<double>(bytes) / records.size(), bytes / enc / 1e6,
                records.size() / enc / 1e6, bytes / dec / 1e6, records.size() / dec / 1e6);
    // As a trainer reads publications: every message decoded into one ParamMessage kept from
    // message to message (DecodeParamMessageInto), messages of different record counts.
    std::vector<std::string> uneven;
    for (size_t begin = 0, k = 0; begin < records.size(); ++k) {
      const size_t n = std::min(records.size() - begin, size_t{50} + (k % 7) * 300);
      std::vector<ParamRecord> part(records.begin() + begin, records.begin() + begin + n);
      std::vector<std::string> encoded = EncodeParamMessages(h, part).value();
      for (std::string& m : encoded) uneven.push_back(std::move(m));
      begin += n;
    }
    ParamMessage reused;
    const double into = BestSeconds([&] {
      for (const std::string& m : uneven) {
        if (!DecodeParamMessageInto(m, {ParamModelKind::kSgns, kDim}, reused).ok()) std::abort();
      }
    });
    std::printf(
        "protocol %s: decode into a kept message (%zu messages of 50-1850 records): "
        "%.2fM records/s\n",
        ParamPrecisionName(p).c_str(), uneven.size(), records.size() / into / 1e6);
  }

  // Trainer side: export of 100k tracked rows, fp32 and fp16.
  RowDeltaTracker tracker(table.data(), rows, kDim, kDim);
  std::vector<uint32_t> slots(rows);
  for (uint32_t s = 0; s < rows; ++s) {
    slots[s] = s;
    tracker.MarkDirty(s);
  }
  std::vector<float> out(rows * kDim);
  for (ParamPrecision p : {ParamPrecision::kFp32, ParamPrecision::kFp16}) {
    const double s = BestSeconds([&] { tracker.Export(slots, out.data(), p); });
    std::printf("export %s dim %d: %.2fM rows/s\n", ParamPrecisionName(p).c_str(), kDim,
                rows / s / 1e6);
  }

  // Trainer side: received rows applied to 100k tracked rows (row = received + row - base).
  std::vector<float> received(rows * kDim);
  for (float& x : received) x = n(rng);
  {
    const double s = BestSeconds([&] { tracker.ApplyRows(slots, received.data()); });
    std::printf("apply rows dim %d: %.2fM rows/s\n", kDim, rows / s / 1e6);
  }

  // Node vocabulary: exact pushed counts into a summary of capacity 100k (Zipf-like words).
  std::vector<ParamRecord> counts(200000);
  std::uniform_real_distribution<double> u(0.0, 1.0);
  for (ParamRecord& r : counts) {
    r.word = "w" + std::to_string(static_cast<int>(1.0 / (u(rng) + 1e-6)));
    r.has_count = true;
    r.count = 1;
  }
  CountSummary summary(100000);
  const double s = BestSeconds([&] { (void)summary.AddPushed(counts); });
  std::printf("count summary (capacity 100k): %.2fM pushed count records/s\n",
              counts.size() / s / 1e6);
  return 0;
}
