// Words outside the vocabulary served from the snapshot's character model (docs/char-model.md):
// a RocksDB state in a temp dir holding a table and a character model, the real REST server on
// 127.0.0.1, every route that takes a word, and the bad words.

#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <string>
#include <vector>

#include "streamvec/charmodel/char_model.h"
#include "streamvec/store/embedding_entries.h"
#include "streamvec/store/state_store.h"
#include "test_util.h"

namespace streamvec::api {
namespace {

using namespace testing_util;

double Cosine(const std::vector<float>& a, const float* b) {
  double ab = 0, aa = 0, bb = 0;
  for (size_t j = 0; j < a.size(); ++j) {
    ab += double(a[j]) * b[j];
    aa += double(a[j]) * a[j];
    bb += double(b[j]) * b[j];
  }
  return aa > 0 && bb > 0 ? ab / std::sqrt(aa * bb) : 0.0;
}

class CharModelServingTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           ("streamvec_char_serving_" + std::to_string(::getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::remove_all(dir_);
    CharModelOptions o;
    o.dim = 3;
    o.char_dim = 8;
    o.hidden = 8;
    o.seed = 5;
    model_ = std::make_unique<CharModel>(o);
    // A few MIMICK steps toward the table, so that the model is a trained one.
    const Embeddings toy = Toy();
    const std::vector<std::string_view> words(toy.words.begin(), toy.words.end());
    for (int i = 0; i < 20; ++i) {
      ASSERT_TRUE(
          model_->DistillStep(words, toy.vectors.data(), std::vector<float>(words.size(), 1.f))
              .ok());
    }
  }
  void TearDown() override {
    server_.reset();
    std::filesystem::remove_all(dir_);
  }
  // One snapshot of the toy table, with the character model when `with_model`; then a server.
  void Serve(bool with_model) {
    {
      auto store = StateStore::Open(dir_.string(), StateStore::Mode::kCreateOrOpen);
      ASSERT_TRUE(store.ok()) << store.status().ToString();
      const Status st = (*store)->WriteSnapshot([&](const SnapshotSink& sink) {
        SV_RETURN_IF_ERROR(WriteEmbeddingEntries(Toy(), sink));
        if (with_model) return sink(kCharModelEntry, model_->Serialize(false));
        return Status::Ok();
      });
      ASSERT_TRUE(st.ok()) << st.ToString();
    }
    ServeOptions options;
    options.state_dir = dir_.string();
    options.port = 0;
    options.poll_interval_s = 0.02;
    StatusOr<std::unique_ptr<Server>> s = Server::Start(options);
    ASSERT_TRUE(s.ok()) << s.status().ToString();
    server_ = std::move(*s);
    ASSERT_TRUE(WaitFor([&] { return server_->snapshot_version() == 1; }));
    client_ = std::make_unique<Client>(server_->port());
  }
  std::vector<float> ModelVector(const std::string& word) {
    std::vector<float> v;
    EXPECT_TRUE(model_->Encode({word}, &v).ok());
    return v;
  }

  std::filesystem::path dir_;
  std::unique_ptr<CharModel> model_;
  std::unique_ptr<Server> server_;
  std::unique_ptr<Client> client_;
};

TEST_F(CharModelServingTest, VectorOfAWordOutsideTheVocabularyComesFromTheCharacterModel) {
  Serve(/*with_model=*/true);
  Reply r = client_->Get("/v1/vectors/kings");
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(r.body["source"], "char-lstm");
  const std::vector<float> expected = ModelVector("kings");
  ASSERT_EQ(r.body["vector"].size(), 3u);
  for (int j = 0; j < 3; ++j) EXPECT_FLOAT_EQ(r.body["vector"][j].get<float>(), expected[j]);
  r = client_->Get("/v1/vectors/" + Encode("naïveté"));
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(r.body["source"], "char-lstm");
  r = client_->Get("/v1/vectors/king");
  ASSERT_EQ(r.status, 200);
  EXPECT_EQ(r.body["source"], "table");
  EXPECT_FLOAT_EQ(r.body["vector"][0].get<float>(), 1.0f);
  // The batch route: both kinds, nothing missing.
  r = client_->Post("/v1/vectors", R"({"words": ["queen", "queenly"]})");
  ASSERT_EQ(r.status, 200) << r.body;
  ASSERT_EQ(r.body["vectors"].size(), 2u);
  EXPECT_EQ(r.body["vectors"][0]["source"], "table");
  EXPECT_EQ(r.body["vectors"][1]["source"], "char-lstm");
  EXPECT_TRUE(r.body["missing"].empty());
}

TEST_F(CharModelServingTest, NeighborsSimilarityMostSimilarAndAnalogyTakeUnseenWords) {
  Serve(/*with_model=*/true);
  const Embeddings toy = Toy();
  const std::vector<float> v = ModelVector("kingdom");
  // Neighbours: the exact cosine ranking of the table against the model's vector.
  Reply r = client_->Get("/v1/neighbors?word=kingdom&k=3");
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(r.body["source"], "char-lstm");
  ASSERT_EQ(r.body["neighbors"].size(), 3u);
  std::vector<std::pair<double, std::string>> ranked;
  for (size_t i = 0; i < toy.words.size(); ++i) {
    ranked.emplace_back(-Cosine(v, toy.vectors.data() + i * 3), toy.words[i]);
  }
  std::sort(ranked.begin(), ranked.end());
  EXPECT_EQ(r.body["neighbors"][0]["word"], ranked[0].second);
  EXPECT_NEAR(r.body["neighbors"][0]["similarity"].get<double>(), -ranked[0].first, 1e-5);
  EXPECT_EQ(client_->Get("/v1/neighbors?word=king&k=3").body["source"], "table");

  r = client_->Get("/v1/similarity?w1=kingdom&w2=queen");
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_NEAR(r.body["similarity"].get<double>(), Cosine(v, toy.vectors.data() + 3), 1e-5);
  EXPECT_EQ(r.body["sources"]["w1"], "char-lstm");
  EXPECT_EQ(r.body["sources"]["w2"], "table");

  r = client_->Get("/v1/most_similar?positive=kingdom,queen&topn=2");
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(r.body["sources"]["kingdom"], "char-lstm");
  EXPECT_EQ(r.body["sources"]["queen"], "table");
  for (const auto& n : r.body["results"]) EXPECT_NE(n["word"], "queen");  // table words excluded

  r = client_->Get("/v1/analogy?a=man&b=king&c=womanly");
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(r.body["sources"]["womanly"], "char-lstm");
  EXPECT_FALSE(r.body["answer"].is_null());
}

TEST_F(CharModelServingTest, BadWordsAreAClear400) {
  Serve(/*with_model=*/true);
  for (const std::string& path :
       {std::string("/v1/vectors/ab%01cd"), std::string("/v1/vectors/ab%FFcd"),
        std::string("/v1/neighbors?word=x%0Ay"), std::string("/v1/similarity?w1=king&w2=%C3"),
        std::string("/v1/vectors/") + std::string(100000, 'z')}) {
    const Reply r = client_->Get(path);
    EXPECT_EQ(r.status, 400) << path.substr(0, 60) << " " << r.body.dump().substr(0, 200);
    EXPECT_TRUE(r.body.contains("error"));
    EXPECT_LT(r.body.dump().size(), 1000u);  // the message does not echo a huge word
  }
  EXPECT_EQ(client_->Get("/v1/vectors/").status, 400);
  EXPECT_EQ(client_->Get("/v1/neighbors?word=").status, 400);
}

TEST_F(CharModelServingTest, WithoutACharacterModelUnknownWordsStay404) {
  Serve(/*with_model=*/false);
  Reply r = client_->Get("/v1/vectors/kings");
  EXPECT_EQ(r.status, 404);
  EXPECT_EQ(client_->Get("/v1/neighbors?word=kings").status, 404);
  EXPECT_EQ(client_->Get("/v1/similarity?w1=kings&w2=king").status, 404);
  EXPECT_EQ(client_->Get("/v1/analogy?a=man&b=king&c=womanly").status, 404);
  r = client_->Get("/v1/vectors/king");
  ASSERT_EQ(r.status, 200);
  EXPECT_EQ(r.body["source"], "table");
}

}  // namespace
}  // namespace streamvec::api
