// ServingSnapshot (exact cosine scan over blocked unit rows) and the state-directory source.
#include "streamvec/api/serving_snapshot.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <set>
#include <utility>

#include "streamvec/charmodel/char_model.h"
#include "streamvec/kernels/dot.h"
#include "streamvec/store/embedding_entries.h"

namespace streamvec::api {
ServingSnapshot::ServingSnapshot(Embeddings embeddings, SnapshotInfo info,
                                 std::vector<double> counts,
                                 std::shared_ptr<const CharModel> char_model)
    : emb_(std::move(embeddings)), info_(std::move(info)), counts_(std::move(counts)),
      char_model_(std::move(char_model)) {
  SV_CHECK(!char_model_ || char_model_->options().dim == emb_.dim);
  SV_CHECK(emb_.dim > 0 &&
           emb_.vectors.size() == emb_.words.size() * static_cast<size_t>(emb_.dim));
  const size_t rows = emb_.words.size();
  SV_CHECK(counts_.empty() || counts_.size() == rows);
  SV_CHECK(rows < (size_t{1} << 32));
  by_count_.resize(rows);
  for (size_t r = 0; r < rows; ++r) by_count_[r] = static_cast<uint32_t>(r);
  if (!counts_.empty()) {
    for (double c : counts_) SV_CHECK(c >= 0 && std::isfinite(c));
    // A trainer writes its rows most frequent first, so this is usually sorted already.
    std::stable_sort(by_count_.begin(), by_count_.end(),
                     [this](uint32_t a, uint32_t b) { return counts_[a] > counts_[b]; });
  }
  rank_.resize(rows);
  for (size_t i = 0; i < rows; ++i) rank_[by_count_[i]] = static_cast<uint32_t>(i);
  const size_t dim = static_cast<size_t>(emb_.dim);
  norms_.resize(rows);
  const size_t blocks = (rows + kBlock - 1) / kBlock;
  blocks_.assign(blocks * dim * kBlock, 0.0f);
  for (size_t r = 0; r < rows; ++r) {
    const float* v = emb_.vectors.data() + r * dim;
    double sum = 0;
    for (size_t j = 0; j < dim; ++j) sum += static_cast<double>(v[j]) * v[j];
    const double norm = std::sqrt(sum);
    norms_[r] = static_cast<float>(norm);
    if (!(norm > 0) || !std::isfinite(norm)) continue;  // stays zero: cosine 0 with everything
    const size_t b = r / kBlock, i = r % kBlock;
    for (size_t j = 0; j < dim; ++j) {
      blocks_[(b * dim + j) * kBlock + i] = static_cast<float>(v[j] / norm);
    }
  }
  row_of_.reserve(rows);
  for (size_t r = 0; r < rows; ++r) row_of_.emplace(emb_.words[r], r);
}

Status ServingSnapshot::WordVector(std::string_view word, std::vector<float>* vector,
                                   std::optional<size_t>* row) const {
  *row = Find(word);
  if (*row) {
    const float* v = emb_.row(**row);
    vector->assign(v, v + emb_.dim);
    return Status::Ok();
  }
  if (!char_model_) {
    return Status::NotFound("not in the vocabulary and the snapshot has no character model");
  }
  if (word.size() > kMaxCharModelWordBytes) {
    return Status::InvalidArgument("the word is " + std::to_string(word.size()) +
                                   " bytes; at most " + std::to_string(kMaxCharModelWordBytes));
  }
  auto ids = CharIds(word, char_model_->options().buckets, char_model_->options().max_word_chars);
  if (!ids.ok()) return ids.status();
  return char_model_->Encode({word}, vector);
}

double ServingSnapshot::count(size_t row) const {
  SV_CHECK(row < rows());
  return counts_.empty() ? std::nan("") : counts_[row];
}

StatusOr<std::shared_ptr<const ServingSnapshot>> SnapshotSource::Load(uint64_t version) {
  return Status::NotFound("snapshot " + std::to_string(version) +
                          " is not kept: this snapshot source keeps no older snapshots");
}

std::optional<size_t> ServingSnapshot::Find(std::string_view word) const {
  const auto it = row_of_.find(word);
  if (it == row_of_.end()) return std::nullopt;
  return it->second;
}

float ServingSnapshot::Similarity(size_t a, size_t b) const {
  const float na = norms_[a], nb = norms_[b];
  if (!(na > 0) || !(nb > 0) || !std::isfinite(na) || !std::isfinite(nb)) return 0;
  const float* x = vector(a);
  const float* y = vector(b);
  double dot = 0;
  for (int j = 0; j < emb_.dim; ++j) dot += static_cast<double>(x[j]) * y[j];
  return static_cast<float>(std::clamp(dot / (static_cast<double>(na) * nb), -1.0, 1.0));
}

void ServingSnapshot::UnitVector(size_t row, float* out) const {
  SV_CHECK(row < rows());
  const size_t dim = static_cast<size_t>(emb_.dim);
  const size_t b = row / kBlock, i = row % kBlock;
  for (size_t j = 0; j < dim; ++j) out[j] = blocks_[(b * dim + j) * kBlock + i];
}

float ServingSnapshot::UnitDot(size_t row, const float* unit_query) const {
  SV_CHECK(row < rows());
  const float norm = norms_[row];
  if (!(norm > 0) || !std::isfinite(norm)) return 0;
  // The row as trained (contiguous: a few cache lines, where the blocked unit copy would touch
  // one line per component), with the CPU's widest dot product.
  static const DotFn dot_fn = DotFunction(DetectBestIsa());
  const float dot = dot_fn(emb_.row(row), unit_query, static_cast<size_t>(emb_.dim));
  return std::clamp(dot / norm, -1.0f, 1.0f);
}

void ServingSnapshot::PrefetchRow(size_t row) const {
  if (row >= rows()) return;
  const char* p = reinterpret_cast<const char*>(emb_.row(row));
  const size_t bytes = static_cast<size_t>(emb_.dim) * sizeof(float);
  for (size_t off = 0; off < bytes; off += 64) __builtin_prefetch(p + off, 0, 3);
  __builtin_prefetch(p + bytes - 1, 0, 3);
  __builtin_prefetch(&norms_[row], 0, 3);
}

std::vector<ServingSnapshot::Neighbor> ServingSnapshot::Neighbors(size_t row, size_t k) const {
  SV_CHECK(row < rows());
  std::vector<float> query(static_cast<size_t>(emb_.dim));
  UnitVector(row, query.data());
  const size_t self[] = {row};
  return NearestToVector(query.data(), k, self, rows());
}

std::vector<ServingSnapshot::Neighbor> ServingSnapshot::NearestToVector(
    const float* query, size_t k, std::span<const size_t> exclude, size_t limit_rows) const {
  std::vector<Neighbor> heap;  // heap.front() is the worst neighbour kept
  const size_t rows = std::min(limit_rows, emb_.words.size());
  if (k == 0 || rows == 0) return heap;
  const size_t dim = static_cast<size_t>(emb_.dim);
  heap.reserve(std::min(k, rows) + 1);
  auto worse_first = [](const Neighbor& x, const Neighbor& y) { return Neighbor::Better(x, y); };
  auto excluded = [&exclude](size_t r) {
    return std::find(exclude.begin(), exclude.end(), r) != exclude.end();
  };
  // The CPU's widest build (AVX-512 / AVX2 / SSE2), chosen once.
  static const ColumnScoresFn column_scores = ColumnScoresFunction(DetectBestIsa());
  alignas(64) float scores[kBlock];
  const size_t blocks = (rows + kBlock - 1) / kBlock;
  for (size_t b = 0; b < blocks; ++b) {
    column_scores(blocks_.data() + b * dim * kBlock, query, dim, kBlock, scores);
    const size_t n = std::min(kBlock, rows - b * kBlock);
    for (size_t i = 0; i < n; ++i) {
      const Neighbor candidate{b * kBlock + i, scores[i]};
      if (std::isnan(candidate.similarity)) continue;
      if (heap.size() < k) {
        if (excluded(candidate.row)) continue;
        heap.push_back(candidate);
        std::push_heap(heap.begin(), heap.end(), worse_first);
      } else if (Neighbor::Better(candidate, heap.front()) && !excluded(candidate.row)) {
        std::pop_heap(heap.begin(), heap.end(), worse_first);
        heap.back() = candidate;
        std::push_heap(heap.begin(), heap.end(), worse_first);
      }
    }
  }
  std::sort(heap.begin(), heap.end(), Neighbor::Better);
  for (Neighbor& n : heap) n.similarity = std::clamp(n.similarity, -1.0f, 1.0f);
  return heap;
}

namespace {

class StateDirSnapshotSource : public SnapshotSource {
 public:
  explicit StateDirSnapshotSource(std::string state_dir) : state_dir_(std::move(state_dir)) {}

  StatusOr<std::vector<SnapshotInfo>> List() override {
    std::vector<std::string> damaged;
    StatusOr<std::vector<SnapshotInfo>> list = SnapshotReader::List(state_dir_, &damaged);
    {
      std::lock_guard<std::mutex> lock(mu_);
      // Checkpoints whose database was found damaged by a load stay out of the list too.
      if (list.ok()) {
        std::erase_if(*list, [&](const SnapshotInfo& i) {
          const auto b = broken_.find({i.version, i.created_at});
          if (b == broken_.end()) return false;
          damaged.push_back(b->second);
          return true;
        });
      }
      damaged_ = damaged.size();
      for (const std::string& d : damaged) {
        if (logged_.insert(d).second) spdlog::warn("serve: skipping a damaged snapshot: {}", d);
      }
    }
    if (!list.ok() && list.status().code() == StatusCode::kNotFound) {
      return std::vector<SnapshotInfo>{};  // no state directory yet: nothing published
    }
    return list;
  }

  size_t damaged() const override {
    std::lock_guard<std::mutex> lock(mu_);
    return damaged_;
  }

  StatusOr<std::shared_ptr<const ServingSnapshot>> LoadNewerThan(uint64_t version) override {
    // List first: it is cheap, and opening a checkpoint on every poll is not.
    StatusOr<std::vector<SnapshotInfo>> list = List();
    if (!list.ok()) return list.status();
    // Newest first. A checkpoint whose database does not open or read back (a truncated or
    // missing table file, a bad block checksum) is damaged: remembered (so later polls do not
    // open it again), logged, counted in damaged(), and the next older one is tried. One retired
    // by the writer meanwhile (NotFound) or failing otherwise (IoError) is passed over this time.
    Status failed;
    bool marked = false;
    for (auto it = list->rbegin(); it != list->rend() && it->version > version; ++it) {
      StatusOr<std::unique_ptr<SnapshotReader>> reader =
          SnapshotReader::Open(state_dir_, it->version);
      StatusOr<std::shared_ptr<const ServingSnapshot>> snapshot =
          reader.ok() ? Read(**reader)
                      : StatusOr<std::shared_ptr<const ServingSnapshot>>(reader.status());
      if (snapshot.ok()) {
        if (marked) (void)List();  // logs and counts what was skipped
        return snapshot;
      }
      if (snapshot.status().code() == StatusCode::kCorruption) {
        marked = true;
        std::lock_guard<std::mutex> lock(mu_);
        broken_.emplace(std::make_pair(it->version, it->created_at),
                        "snapshot " + std::to_string(it->version) + " in " + state_dir_ + ": " +
                            snapshot.status().message());
      } else if (snapshot.status().code() != StatusCode::kNotFound && failed.ok()) {
        failed = snapshot.status();
      }
    }
    if (marked) (void)List();
    if (!failed.ok()) return failed;
    return std::shared_ptr<const ServingSnapshot>();
  }

  StatusOr<std::shared_ptr<const ServingSnapshot>> Load(uint64_t version) override {
    StatusOr<std::unique_ptr<SnapshotReader>> reader = SnapshotReader::Open(state_dir_, version);
    if (!reader.ok()) return reader.status();
    return Read(**reader);
  }

 private:
  // The embedding and the word counts (when the snapshot has them) of an opened checkpoint.
  StatusOr<std::shared_ptr<const ServingSnapshot>> Read(const SnapshotReader& r) const {
    const auto get = [&r](const std::string& key) { return r.Get(key); };
    const auto damaged = [&](const Status& s) {
      return Status(
          s.code() == StatusCode::kNotFound ? StatusCode::kCorruption : s.code(),
          "snapshot " + std::to_string(r.version()) + " in " + state_dir_ + ": " + s.message());
    };
    StatusOr<Embeddings> embeddings = ReadEmbeddingEntries(get);
    if (!embeddings.ok()) return damaged(embeddings.status());
    StatusOr<std::vector<double>> counts = ReadEmbeddingCountsIfAny(get, embeddings->rows());
    if (!counts.ok()) return damaged(counts.status());
    std::shared_ptr<const CharModel> char_model;
    if (StatusOr<std::string> bytes = r.Get(kCharModelEntry); bytes.ok()) {
      StatusOr<std::unique_ptr<CharModel>> m = CharModel::Deserialize(*bytes);
      if (!m.ok()) return damaged(m.status());
      if ((*m)->options().dim != embeddings->dim) {
        return damaged(Status::Corruption("character model has dim " +
                                          std::to_string((*m)->options().dim) + ", the table " +
                                          std::to_string(embeddings->dim)));
      }
      char_model = std::move(*m);
    } else if (bytes.status().code() != StatusCode::kNotFound) {
      return damaged(bytes.status());
    }
    return std::shared_ptr<const ServingSnapshot>(std::make_shared<ServingSnapshot>(
        std::move(*embeddings), r.info(), std::move(*counts), std::move(char_model)));
  }

  const std::string state_dir_;
  mutable std::mutex mu_;
  size_t damaged_ = 0;
  std::set<std::string> logged_;  // damaged checkpoints already logged
  // Checkpoints whose database was found damaged, by (version, created_at): a state rebuilt
  // from an older checkpoint writes that version again, with another time.
  std::map<std::pair<uint64_t, double>, std::string> broken_;
};

class ShardedStateDirSnapshotSource : public SnapshotSource {
 public:
  explicit ShardedStateDirSnapshotSource(std::vector<std::string> dirs) : dirs_(std::move(dirs)) {}

  StatusOr<std::vector<SnapshotInfo>> List() override {
    SnapshotInfo combined;
    nlohmann::json shards = nlohmann::json::array();
    for (const std::string& dir : dirs_) {
      StatusOr<std::vector<SnapshotInfo>> list = SnapshotReader::List(dir);
      if (!list.ok() && list.status().code() == StatusCode::kNotFound) {
        return std::vector<SnapshotInfo>{};
      }
      if (!list.ok()) return list.status();
      if (list->empty()) return std::vector<SnapshotInfo>{};
      Add(dir, list->back(), &combined, &shards);
    }
    combined.metadata_json = Metadata(combined, shards);
    return std::vector<SnapshotInfo>{combined};
  }

  StatusOr<std::shared_ptr<const ServingSnapshot>> LoadNewerThan(uint64_t version) override {
    StatusOr<std::vector<SnapshotInfo>> list = List();
    if (!list.ok()) return list.status();
    if (list->empty() || list->back().version <= version) {
      return std::shared_ptr<const ServingSnapshot>();
    }
    SnapshotInfo combined;
    nlohmann::json shards = nlohmann::json::array();
    std::vector<Embeddings> parts;
    std::vector<std::vector<double>> counts;  // per shard; empty where a snapshot has none
    for (const std::string& dir : dirs_) {
      StatusOr<std::unique_ptr<SnapshotReader>> reader = SnapshotReader::OpenNewest(dir);
      if (!reader.ok()) {
        if (reader.status().code() == StatusCode::kNotFound) {
          return std::shared_ptr<const ServingSnapshot>();
        }
        return reader.status();
      }
      const SnapshotReader& r = **reader;
      StatusOr<Embeddings> e =
          ReadEmbeddingEntries([&r](const std::string& key) { return r.Get(key); });
      if (!e.ok()) {
        return Status(StatusCode::kCorruption, "snapshot " + std::to_string(r.version()) +
                                                   " in " + dir + ": " + e.status().message());
      }
      StatusOr<std::vector<double>> c =
          ReadEmbeddingCountsIfAny([&r](const std::string& key) { return r.Get(key); }, e->rows());
      if (!c.ok()) {
        return Status(StatusCode::kCorruption, "snapshot " + std::to_string(r.version()) + " in " +
                                                   dir + ": " + c.status().message());
      }
      counts.push_back(std::move(c).value());
      parts.push_back(std::move(e).value());
      Add(dir, r.info(), &combined, &shards);
    }
    if (combined.version <= version) return std::shared_ptr<const ServingSnapshot>();
    combined.metadata_json = Metadata(combined, shards);
    // In count order, with the counts, when every shard's snapshot has them (a node's does).
    std::vector<double> joined_counts;
    StatusOr<Embeddings> joined = InterleaveEmbeddings(std::move(parts), &counts, &joined_counts);
    if (!joined.ok()) return Status::Corruption("--state: " + joined.status().message());
    return std::shared_ptr<const ServingSnapshot>(std::make_shared<ServingSnapshot>(
        std::move(joined).value(), combined, std::move(joined_counts)));
  }

 private:
  static void Add(const std::string& dir, const SnapshotInfo& info, SnapshotInfo* combined,
                  nlohmann::json* shards) {
    combined->version += info.version;
    combined->created_at = std::max(combined->created_at, info.created_at);
    nlohmann::json meta = nlohmann::json::parse(info.metadata_json, nullptr, false);
    if (meta.is_discarded()) meta = nlohmann::json::object();
    shards->push_back({{"state", dir}, {"version", info.version}, {"metadata", meta}});
  }
  static std::string Metadata(const SnapshotInfo& combined, const nlohmann::json& shards) {
    return nlohmann::json{{"kind", "shards"},
                          {"version", combined.version},
                          {"created_at", combined.created_at},
                          {"shards", shards}}
        .dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  }

  const std::vector<std::string> dirs_;
};

}  // namespace

std::shared_ptr<SnapshotSource> NewStateDirSnapshotSource(std::string state_dir) {
  return std::make_shared<StateDirSnapshotSource>(std::move(state_dir));
}

std::shared_ptr<SnapshotSource> NewShardedStateDirSnapshotSource(std::vector<std::string> dirs) {
  return std::make_shared<ShardedStateDirSnapshotSource>(std::move(dirs));
}

}  // namespace streamvec::api
