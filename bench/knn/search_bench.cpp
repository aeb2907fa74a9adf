// The HNSW search alone, in one thread, without HTTP: streamvec's search loop (AnnIndex::Search,
// api/src/ann_index.cpp) against hnswlib's own searchKnn over the same graph, alternating, on
// --queries rows spread evenly over the vectors file (word2vec format, as `streamvec export`
// writes), plus recall@10 (the candidates re-scored with the float rows, as Served::Nearest does)
// against the exact scan, for a few ef values; first the index built BUILDS times by streamvec's
// insertion and by hnswlib's addPoint, alternating (seconds, recall@10 at ef 120). Built and run
// by search_bench.sh.
//   search_bench VECTORS [M] [EF_CONSTRUCTION] [REPS] [BUILDS]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <thread>
#include <vector>

#include "ann_index.h"
#include "streamvec/api/serving_snapshot.h"
#include "streamvec/store/word2vec_format.h"

using namespace streamvec;
using namespace streamvec::api;
using Clock = std::chrono::steady_clock;

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s VECTORS [M] [EF_CONSTRUCTION] [REPS] [BUILDS]\n", argv[0]);
    return 2;
  }
  StatusOr<Embeddings> emb = ReadWord2Vec(argv[1]);
  if (!emb.ok()) {
    std::fprintf(stderr, "%s\n", emb.status().ToString().c_str());
    return 1;
  }
  const ServingSnapshot snapshot(std::move(*emb), SnapshotInfo{});
  const size_t rows = snapshot.rows(), dim = static_cast<size_t>(snapshot.dim());
  const size_t queries = std::min<size_t>(1000, rows);
  const int reps = argc > 4 ? std::atoi(argv[4]) : 5;
  const int builds = argc > 5 ? std::max(1, std::atoi(argv[5])) : 1;
  AnnOptions options;  // serve's defaults: M 16, ef_construction 120, ef 120, a thread a core
  options.m = argc > 2 ? std::atoi(argv[2]) : 16;
  options.ef_construction = argc > 3 ? std::atoi(argv[3]) : 120;
  options.ef_search = 10;  // the candidate count below sets the list length
  options.threads = 2;

  std::vector<std::vector<float>> query(queries, std::vector<float>(dim));
  std::vector<size_t> query_row(queries);
  std::vector<std::vector<size_t>> exact(queries);
  for (size_t i = 0; i < queries; ++i) {
    query_row[i] = i * (rows / queries);
    snapshot.UnitVector(query_row[i], query[i].data());
    const size_t self[] = {query_row[i]};
    for (const auto& n : snapshot.NearestToVector(query[i].data(), 10, self, rows))
      exact[i].push_back(n.row);
  }
  // Recall@10 of `index` at `ef` over the queries, searched from the entry point or (`seeded`)
  // from the query's own row.
  auto recall_at = [&](const AnnIndex& index, size_t ef, bool seeded) {
    double recall = 0;
    for (size_t q = 0; q < queries; ++q) {
      std::vector<ServingSnapshot::Neighbor> found;
      const std::optional<size_t> start =
          seeded ? std::optional<size_t>(query_row[q]) : std::nullopt;
      for (const auto& c : index.Search(query[q].data(), ef, start)) {
        if (c.row != query_row[q])
          found.push_back({c.row, snapshot.UnitDot(c.row, query[q].data())});
      }
      const size_t keep = std::min<size_t>(10, found.size());
      std::partial_sort(found.begin(), found.begin() + static_cast<std::ptrdiff_t>(keep),
                        found.end(), ServingSnapshot::Neighbor::Better);
      for (size_t j = 0; j < keep; ++j)
        recall += std::count(exact[q].begin(), exact[q].end(), found[j].row) / 10.0;
    }
    return recall / static_cast<double>(queries);
  };
  // The build by streamvec's insertion and by hnswlib's addPoint, alternating (BUILDS pairs):
  // seconds and recall@10 at ef 120 of each; the searches below run on streamvec's graph.
  std::unique_ptr<AnnIndex> index;
  for (int b = 0; b < builds; ++b) {
    for (const bool hnswlib_insert : {false, true}) {
      options.hnswlib_insert = hnswlib_insert;
      const auto start = Clock::now();
      std::unique_ptr<AnnIndex> built = AnnIndex::Build(snapshot, options);
      std::printf(
          "%zu rows x %zu, M %d, ef_construction %d, 2 threads, %s: built in %.1f s, "
          "recall@10 at ef 120 %.3f\n",
          rows, dim, options.m, options.ef_construction,
          hnswlib_insert ? "hnswlib's addPoint" : "streamvec's insertion",
          std::chrono::duration<double>(Clock::now() - start).count(),
          recall_at(*built, 120, false));
      std::fflush(stdout);
      if (!hnswlib_insert) index = std::move(built);
    }
  }

  for (const size_t ef : {60, 80, 120, 160}) {
    // Recall@10 from the entry point and from the query's own row.
    const double recall = recall_at(*index, ef, false);
    const double recall_seeded = recall_at(*index, ef, true);
    // Alternating, `reps` passes over the queries each, by two threads at once (as serve's two
    // request threads): the medians of microseconds per search (per thread).
    // Modes: 0 streamvec from the entry point, 1 streamvec from the query's own row (as
    // most_similar of one word searches), 2 hnswlib's searchKnn.
    std::vector<double> us_of[3];
    for (int r = 0; r < reps; ++r) {
      for (const int mode : {0, 1, 2}) {
        const auto t = Clock::now();
        auto pass = [&](size_t first) {
          size_t sink = 0;
          for (size_t i = 0; i < queries; ++i) {
            const size_t j = (first + i) % queries;
            const float* q = query[j].data();
            sink += mode == 0   ? index->Search(q, ef)[0].row
                    : mode == 1 ? index->Search(q, ef, query_row[j])[0].row
                                : index->SearchWithHnswlib(q, ef)[0].row;
          }
          return sink;
        };
        std::thread other([&] { pass(queries / 2); });
        pass(0);
        other.join();
        const double us = std::chrono::duration<double, std::micro>(Clock::now() - t).count();
        us_of[mode].push_back(us / static_cast<double>(queries));
      }
    }
    double median[3];
    for (int m = 0; m < 3; ++m) {
      std::sort(us_of[m].begin(), us_of[m].end());
      median[m] = us_of[m][us_of[m].size() / 2];
    }
    std::printf(
        "ef %3zu: recall@10 %.3f (from the row %.3f)  streamvec %.1f us/search (from the row "
        "%.1f)  hnswlib %.1f us  ratio %.2f (%.2f)\n",
        ef, recall, recall_seeded, median[0], median[1], median[2], median[0] / median[2],
        median[1] / median[2]);
    std::fflush(stdout);
  }
}
