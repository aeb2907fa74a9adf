// gensim-style queries over real HTTP: most_similar (positive/negative, topn, restrict_vocab),
// analogy (3CosAdd), neighbours of a raw vector, and their limits. The reference is eval's plain
// scan (eval::TopKByDot) on unit rows, the arithmetic gensim's KeyedVectors.most_similar does.

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "ann_index.h"
#include "streamvec/eval/neighbors.h"
#include "test_util.h"

namespace streamvec::api {
namespace {

using namespace testing_util;

class QueriesTest : public ServerFixture {};

// unit(sum of unit(+p) and unit(-n)) -> top k, query words excluded, among the first `limit` rows.
std::vector<std::string> Reference(const Embeddings& e, const std::vector<size_t>& pos,
                                   const std::vector<size_t>& neg, size_t k, size_t limit) {
  const std::vector<float> unit = eval::NormalizeRows(e.vectors.data(), e.rows(), e.dim);
  std::vector<double> sum(e.dim, 0.0);
  std::vector<size_t> exclude;
  for (size_t r : pos) {
    for (int j = 0; j < e.dim; ++j) sum[j] += unit[r * e.dim + j];
    exclude.push_back(r);
  }
  for (size_t r : neg) {
    for (int j = 0; j < e.dim; ++j) sum[j] -= unit[r * e.dim + j];
    exclude.push_back(r);
  }
  double norm = 0;
  for (double v : sum) norm += v * v;
  std::vector<float> q(e.dim);
  for (int j = 0; j < e.dim; ++j) q[j] = static_cast<float>(sum[j] / std::sqrt(norm));
  std::vector<std::string> words;
  for (const eval::Neighbor& n :
       eval::TopKByDot(unit.data(), std::min(limit, e.rows()), e.dim, q.data(), k, exclude)) {
    words.push_back(e.words[n.row]);
  }
  return words;
}

TEST_F(QueriesTest, MostSimilarIsTheGensimMeanOfUnitVectorsWithoutTheQueryWords) {
  const Embeddings e = RandomEmbeddings(700, 12, 5);
  source_->Publish(e, 1);
  StartServer();
  Reply r = client_->Get("/v1/most_similar?positive=w3,w10&negative=w7&topn=15");
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(Words(r.body["results"]), Reference(e, {3, 10}, {7}, 15, e.rows()));
  EXPECT_EQ(r.body["positive"], json({"w3", "w10"}));
  EXPECT_EQ(r.body["negative"], json({"w7"}));
  EXPECT_EQ(r.body["snapshot"], 1);
  for (size_t i = 1; i < r.body["results"].size(); ++i) {
    EXPECT_GE(r.body["results"][i - 1]["similarity"].get<float>(),
              r.body["results"][i]["similarity"].get<float>());
  }
  r = client_->Get("/v1/most_similar?positive=w5");  // default topn 10
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(Words(r.body["results"]), Reference(e, {5}, {}, 10, e.rows()));
  r = client_->Get("/v1/most_similar?negative=w5&topn=3");  // only negative words is allowed
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(Words(r.body["results"]), Reference(e, {}, {5}, 3, e.rows()));
  r = client_->Get("/v1/most_similar?positive=w600&topn=20&restrict_vocab=100");
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(Words(r.body["results"]), Reference(e, {600}, {}, 20, 100));
}

TEST_F(QueriesTest, AnalogyIsThreeCosAdd) {
  source_->Publish(Toy(), 4);
  StartServer();
  // king - man + woman: queen (the query words are excluded).
  Reply r = client_->Get("/v1/analogy?a=man&b=king&c=woman&topn=3");
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(r.body["answer"], "queen");
  EXPECT_EQ(r.body["results"][0]["word"], "queen");
  EXPECT_EQ(r.body["results"].size(), 3u);
  EXPECT_EQ(r.body["a"], "man");
  const Embeddings e = RandomEmbeddings(300, 8, 9);
  source_->Publish(e, 5);
  ASSERT_TRUE(WaitFor([&] { return server_->snapshot_version() == 5; }));
  r = client_->Get("/v1/analogy?a=w1&b=w2&c=w3");
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(Words(r.body["results"]), Reference(e, {2, 3}, {1}, 10, e.rows()));
}

TEST_F(QueriesTest, NeighborsOfARawVector) {
  const Embeddings e = RandomEmbeddings(500, 10, 11);
  source_->Publish(e, 2);
  StartServer();
  std::vector<float> v(e.row(42), e.row(42) + 10);
  for (float& x : v) x *= 3.0f;  // length does not matter
  Reply r = client_->Post("/v1/neighbors", json{{"vector", v}, {"k", 5}}.dump());
  ASSERT_EQ(r.status, 200) << r.body;
  ASSERT_EQ(r.body["neighbors"].size(), 5u);
  EXPECT_EQ(r.body["neighbors"][0]["word"], "w42");  // nothing excluded
  EXPECT_NEAR(r.body["neighbors"][0]["similarity"].get<float>(), 1.0f, 1e-5f);
  const std::vector<std::string> want = Reference(e, {42}, {}, 4, e.rows());
  const std::vector<std::string> got = Words(r.body["neighbors"]);
  EXPECT_EQ(std::vector<std::string>(got.begin() + 1, got.end()), want);
  // Components near the largest double: the length is computed without overflow.
  std::vector<double> huge(v.begin(), v.end());
  for (double& x : huge) x *= 1e200;
  r = client_->Post("/v1/neighbors", json{{"vector", huge}, {"k", 1}}.dump());
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(r.body["neighbors"][0]["word"], "w42");
  r = client_->Post("/v1/neighbors", json{{"vector", std::vector<double>(10, 0.0)}}.dump());
  EXPECT_EQ(r.status, 400);
  EXPECT_NE(r.body.dump().find("all zeros"), std::string::npos) << r.body;
  r = client_->Post("/v1/neighbors", json{{"vector", v}, {"restrict_vocab", 10}}.dump());
  ASSERT_EQ(r.status, 200) << r.body;
  for (const json& n : r.body["neighbors"]) {
    EXPECT_LT(std::stoi(n["word"].get<std::string>().substr(1)), 10);
  }
}

TEST_F(QueriesTest, QueryErrorsAreClear4xx) {
  source_->Publish(Toy(), 1);
  StartServer();
  struct Case {
    std::string path;
    int status;
    std::string mentions;
  };
  const Case cases[] = {
      {"/v1/most_similar", 400, "positive"},
      {"/v1/most_similar?positive=king&topn=0", 400, "'topn'"},
      {"/v1/most_similar?positive=king&topn=1001", 400, "'topn'"},
      {"/v1/most_similar?positive=king&restrict_vocab=0", 400, "'restrict_vocab'"},
      {"/v1/most_similar?positive=king,,man", 400, "empty word"},
      {"/v1/most_similar?positive=king&negative=emperor", 404, "'emperor'"},
      {"/v1/analogy?a=man&b=king", 400, "'c'"},
      {"/v1/analogy?a=man&b=king&c=emperor", 404, "'emperor'"},
      {"/v1/analogy?a=man&b=king&c=woman&topn=x", 400, "'topn'"},
  };
  for (const Case& c : cases) {
    const Reply r = client_->Get(c.path);
    EXPECT_EQ(r.status, c.status) << c.path << " " << r.body;
    EXPECT_NE(r.body["error"].get<std::string>().find(c.mentions), std::string::npos)
        << c.path << " " << r.body;
  }
  const std::pair<std::string, std::string> bodies[] = {
      {R"({"vector": [1, 0]})", "dim 3"},
      {R"({"vector": [1, "x", 0]})", "vector[1]"},
      {R"({"vector": [0, 0, 0]})", "zeros"},
      {R"({"vector": [1, 0, 0], "k": 1001})", "'k'"},
      {R"({"vector": [1, 0, 0], "k": 0})", "'k'"},
      {R"({"words": []})", "vector"},
      {"{not json", "malformed JSON"},
  };
  for (const auto& [body, mentions] : bodies) {
    const Reply r = client_->Post("/v1/neighbors", body);
    EXPECT_EQ(r.status, 400) << body << " " << r.body;
    EXPECT_NE(r.body["error"].get<std::string>().find(mentions), std::string::npos) << r.body;
  }
  // Over 1 MiB: refused with a 400 naming the limit.
  const Reply big = client_->Post("/v1/neighbors", std::string(1048577, ' '));
  EXPECT_EQ(big.status, 400);
  EXPECT_NE(big.body["error"].get<std::string>().find("1048576"), std::string::npos) << big.body;
}

// A stopping server gives an HNSW build up (the build checks its cancel flag between rows):
// Build returns no index instead of finishing the graph.
TEST(AnnIndexTest, ACancelledBuildReturnsNoIndex) {
  const ServingSnapshot snapshot(RandomEmbeddings(2000, 16, 5), SnapshotInfo{});
  AnnOptions options;
  options.threads = 2;
  std::atomic<bool> cancel{false};
  options.cancel = &cancel;
  std::unique_ptr<AnnIndex> built = AnnIndex::Build(snapshot, options);
  ASSERT_NE(built, nullptr);  // not cancelled: the whole graph
  const float* row = snapshot.embeddings().row(7);
  std::vector<float> unit(row, row + 16);
  float norm = 0;
  for (float x : unit) norm += x * x;
  for (float& x : unit) x /= std::sqrt(norm);
  EXPECT_EQ(built->Search(unit.data(), 1)[0].row, 7u);
  cancel = true;
  EXPECT_EQ(AnnIndex::Build(snapshot, options), nullptr);
}

// The graph holds SQ8 rows: its candidates carry cosines within the quantisation error of the
// float ones, and on a small vocabulary its candidate list holds the scan's whole top 10.
TEST(AnnIndexTest, Sq8CandidatesHoldTheExactTopTenWithCosinesNearTheFloatOnes) {
  const ServingSnapshot snapshot(RandomEmbeddings(2000, 16, 6), SnapshotInfo{});
  std::unique_ptr<AnnIndex> index = AnnIndex::Build(snapshot, AnnOptions{});
  ASSERT_NE(index, nullptr);
  std::vector<float> unit(16);
  for (size_t row : {0u, 13u, 999u, 1999u}) {
    snapshot.UnitVector(row, unit.data());
    const auto candidates = index->Search(unit.data(), 100);
    ASSERT_EQ(candidates.size(), 100u);
    for (size_t i = 0; i < candidates.size(); ++i) {
      EXPECT_NEAR(candidates[i].similarity, snapshot.UnitDot(candidates[i].row, unit.data()), 0.02)
          << "row " << row << " candidate " << candidates[i].row;
      if (i > 0) {
        EXPECT_GE(candidates[i - 1].similarity, candidates[i].similarity);
      }
    }
    const size_t self[] = {row};
    for (const auto& e : snapshot.NearestToVector(unit.data(), 10, self, snapshot.rows())) {
      EXPECT_TRUE(std::any_of(candidates.begin(), candidates.end(),
                              [&](const auto& c) { return c.row == e.row; }))
          << "row " << row << ": exact neighbour " << e.row << " not among the candidates";
    }
  }
}

// Search walks hnswlib's graph with its own loop (prefetching each expanded node's neighbours):
// it must find what hnswlib's searchKnn finds, in the same order, for any count (below and above
// ef) and from any part of the graph.
TEST(AnnIndexTest, SearchAnswersAsHnswlibsOwnSearch) {
  const ServingSnapshot snapshot(RandomEmbeddings(5000, 24, 8), SnapshotInfo{});
  AnnOptions options;
  options.ef_search = 40;
  std::unique_ptr<AnnIndex> index = AnnIndex::Build(snapshot, options);
  ASSERT_NE(index, nullptr);
  std::vector<float> unit(24);
  for (size_t row = 0; row < snapshot.rows(); row += 97) {
    snapshot.UnitVector(row, unit.data());
    for (size_t count : {1u, 10u, 40u, 150u}) {
      const auto ours = index->Search(unit.data(), count);
      const auto theirs = index->SearchWithHnswlib(unit.data(), count);
      ASSERT_EQ(ours.size(), theirs.size()) << "row " << row << " count " << count;
      ASSERT_EQ(ours.size(), count);
      for (size_t i = 0; i < ours.size(); ++i) {
        EXPECT_EQ(ours[i].row, theirs[i].row) << "row " << row << " count " << count << " #" << i;
        EXPECT_EQ(ours[i].similarity, theirs[i].similarity);
      }
    }
  }
}

// One word's neighbours start the search at the word's own row (no descent through the upper
// layers): the row is always found, at the smallest candidate list, where the descent from the
// entry point misses some; a row the index lacks is ignored (the entry point then).
TEST(AnnIndexTest, ASearchStartedAtTheQuerysRowAlwaysFindsTheRow) {
  const ServingSnapshot snapshot(RandomEmbeddings(5000, 24, 8), SnapshotInfo{});
  AnnOptions options;
  options.ef_search = 10;
  options.ef_construction = 20;
  options.m = 4;
  std::unique_ptr<AnnIndex> index = AnnIndex::Build(snapshot, options);
  ASSERT_NE(index, nullptr);
  std::vector<float> unit(24);
  size_t found_from_row = 0, found_from_entry = 0, same_as_entry = 0;
  for (size_t row = 0; row < snapshot.rows(); ++row) {
    snapshot.UnitVector(row, unit.data());
    const auto from_row = index->Search(unit.data(), 1, row);
    const auto from_entry = index->Search(unit.data(), 1);
    ASSERT_EQ(from_row.size(), 1u);
    found_from_row += from_row[0].row == row;
    found_from_entry += from_entry[0].row == row;
    const auto unindexed = index->Search(unit.data(), 1, snapshot.rows() + 7);
    same_as_entry += unindexed[0].row == from_entry[0].row;
  }
  EXPECT_EQ(found_from_row, snapshot.rows());
  EXPECT_LT(found_from_entry, snapshot.rows());
  EXPECT_EQ(same_as_entry, snapshot.rows());
}

// Any dim, not only multiples of 4: hnswlib stores its elements back to back, so a row's bytes
// are padded to keep the next element's link counts aligned (the sanitizer build reports a
// misaligned load otherwise, as `serve` at --dim 50 once did).
TEST(AnnIndexTest, EveryDimFindsItsOwnRow) {
  for (int dim : {3, 50, 101}) {  // (dim 1: every unit row is +-1, rows tie)
    const ServingSnapshot snapshot(RandomEmbeddings(300, dim, 7), SnapshotInfo{});
    std::unique_ptr<AnnIndex> index = AnnIndex::Build(snapshot, AnnOptions{});
    ASSERT_NE(index, nullptr) << dim;
    std::vector<float> unit(static_cast<size_t>(dim));
    for (size_t row : {0u, 150u, 299u}) {
      snapshot.UnitVector(row, unit.data());
      const auto found = index->Search(unit.data(), 10);
      ASSERT_FALSE(found.empty()) << dim;
      EXPECT_TRUE(
          std::any_of(found.begin(), found.end(), [&](const auto& c) { return c.row == row; }))
          << "dim " << dim << " row " << row;
    }
  }
}

// streamvec's insertion is hnswlib's addPoint with another layer-0 search (SearchLayer0): at one
// thread, where both draw the same levels in the same order, the graphs are the same to the byte
// (every node's links at every layer, the entry point; saved in hnswlib's format). At two
// threads the graph differs by the order of insertion, and must still serve: every row finds
// itself, and recall holds against the one-thread graph's.
TEST(AnnIndexTest, StreamvecsInsertionBuildsHnswlibsGraph) {
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() / ("streamvec-ann-insert-" + std::to_string(getpid()));
  std::filesystem::remove_all(dir);
  SnapshotInfo info;
  info.version = 3;
  const ServingSnapshot snapshot(RandomEmbeddings(3000, 24, 11), info);
  auto saved_bytes = [&](const AnnOptions& options, const std::string& name) {
    std::unique_ptr<AnnIndex> index = AnnIndex::Build(snapshot, options);
    EXPECT_NE(index, nullptr);
    if (index == nullptr) return std::string();
    const std::string path = (dir / name).string();
    EXPECT_TRUE(index->Save(path, snapshot).ok());
    std::ifstream in(path, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(in), {});
  };
  for (const int m : {4, 16}) {
    AnnOptions options;
    options.m = m;
    options.ef_construction = 40;
    options.hnswlib_insert = true;
    const std::string theirs = saved_bytes(options, "hnswlib.hnsw");
    options.hnswlib_insert = false;
    const std::string ours = saved_bytes(options, "streamvec.hnsw");
    ASSERT_GT(ours.size(), 3000u * 24);
    EXPECT_TRUE(ours == theirs) << "M " << m << ": the graphs differ";
  }

  AnnOptions options;
  options.ef_search = 40;
  const std::unique_ptr<AnnIndex> one = AnnIndex::Build(snapshot, options);
  options.threads = 2;
  const std::unique_ptr<AnnIndex> two = AnnIndex::Build(snapshot, options);
  ASSERT_NE(one, nullptr);
  ASSERT_NE(two, nullptr);
  std::vector<float> unit(24);
  double recall_one = 0, recall_two = 0;
  size_t queries = 0;
  for (size_t row = 0; row < snapshot.rows(); row += 7, ++queries) {
    snapshot.UnitVector(row, unit.data());
    const auto found = two->Search(unit.data(), 10);
    ASSERT_FALSE(found.empty());
    EXPECT_EQ(found[0].row, row);
    const size_t none[] = {snapshot.rows()};
    const auto exact = snapshot.NearestToVector(unit.data(), 10, none, snapshot.rows());
    for (const auto* index : {one.get(), two.get()}) {
      const auto got = index->Search(unit.data(), 10);
      for (const auto& e : exact) {
        const bool hit =
            std::any_of(got.begin(), got.end(), [&](const auto& c) { return c.row == e.row; });
        (index == one.get() ? recall_one : recall_two) += hit ? 0.1 : 0.0;
      }
    }
  }
  recall_one /= static_cast<double>(queries);
  recall_two /= static_cast<double>(queries);
  EXPECT_GT(recall_one, 0.9);
  EXPECT_GT(recall_two, recall_one - 0.02);
  std::filesystem::remove_all(dir);
}

// A saved index loads for the snapshot it was built for and answers as the built one; for any
// other snapshot (another version, another word in a row), a damaged file or none it is refused
// with the reason.
TEST(AnnIndexTest, SavedIndexLoadsOnlyForItsSnapshotAndIntact) {
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() / ("streamvec-ann-save-" + std::to_string(getpid()));
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  const std::string path = (dir / "index.hnsw").string();
  const Embeddings e = RandomEmbeddings(1500, 24, 8);
  const ServingSnapshot snapshot(e, SnapshotInfo{7, 0, "{}"});
  AnnOptions options;
  options.ef_search = 40;
  EXPECT_EQ(AnnIndex::Load(path, snapshot, options).status().code(), StatusCode::kNotFound);
  std::unique_ptr<AnnIndex> built = AnnIndex::Build(snapshot, options);
  ASSERT_NE(built, nullptr);
  built->set_recall_at_10(0.97);
  ASSERT_TRUE(built->Save(path, snapshot).ok());

  StatusOr<std::unique_ptr<AnnIndex>> loaded = AnnIndex::Load(path, snapshot, options);
  ASSERT_TRUE(loaded.ok()) << loaded.status().ToString();
  EXPECT_EQ((*loaded)->ef_search(), 40u);
  std::vector<float> unit(24);
  for (size_t row : {0u, 700u, 1499u}) {
    snapshot.UnitVector(row, unit.data());
    const auto want = built->Search(unit.data(), 10);
    const auto got = (*loaded)->Search(unit.data(), 10);
    ASSERT_EQ(got.size(), want.size());
    for (size_t i = 0; i < got.size(); ++i) EXPECT_EQ(got[i].row, want[i].row) << row;
  }

  const ServingSnapshot newer(e, SnapshotInfo{8, 0, "{}"});
  StatusOr<std::unique_ptr<AnnIndex>> other = AnnIndex::Load(path, newer, options);
  EXPECT_EQ(other.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(other.status().message().find("snapshot"), std::string::npos)
      << other.status().ToString();
  Embeddings renamed = e;
  renamed.words[3] = "someone-else";
  const ServingSnapshot moved(renamed, SnapshotInfo{7, 0, "{}"});
  other = AnnIndex::Load(path, moved, options);
  EXPECT_EQ(other.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(other.status().message().find("words_xxh"), std::string::npos)
      << other.status().ToString();

  {  // one byte of the graph changed
    std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
    f.seekg(1000);
    char c = 0;
    f.read(&c, 1);
    c = static_cast<char>(c ^ 0x5a);
    f.seekp(1000);
    f.write(&c, 1);
  }
  other = AnnIndex::Load(path, snapshot, options);
  EXPECT_EQ(other.status().code(), StatusCode::kCorruption);
  EXPECT_NE(other.status().message().find("XXH64"), std::string::npos) << other.status().ToString();
  std::ofstream(path + ".json") << "{\"format\":";
  EXPECT_EQ(AnnIndex::Load(path, snapshot, options).status().code(), StatusCode::kCorruption);
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace streamvec::api
