// The KeyedVectors calls a gensim user reaches for beyond most_similar, over real HTTP, against
// gensim 4.2's own answers on the same vectors (tests/data/eval/gensim-keyedvectors.json, made by
// make_keyedvectors_fixture.py from small-vectors.txt).

#include <fstream>
#include <string>
#include <vector>

#include "streamvec/store/word2vec_format.h"
#include "test_util.h"

namespace streamvec::api {
namespace {

using namespace testing_util;

class KeyedVectorsTest : public ServerFixture {
 protected:
  void SetUp() override {
    ServerFixture::SetUp();
    const std::string data = std::string(STREAMVEC_TEST_DATA) + "/eval/";
    StatusOr<Embeddings> e = ReadWord2Vec(data + "small-vectors.txt");
    ASSERT_TRUE(e.ok()) << e.status().ToString();
    source_->Publish(*e, 3);
    StartServer();
    std::ifstream in(data + "gensim-keyedvectors.json");
    ASSERT_TRUE(in);
    in >> gensim_;
  }
  static std::string Join(const json& words) {
    std::string out;
    for (const json& w : words) out += (out.empty() ? "" : ",") + w.get<std::string>();
    return out;
  }
  json gensim_;
};

TEST_F(KeyedVectorsTest, DoesntMatchIsGensims) {
  for (const json& c : gensim_["doesnt_match"]) {
    const Reply r = client_->Get("/v1/doesnt_match?words=" + Join(c["words"]));
    ASSERT_EQ(r.status, 200) << r.body;
    EXPECT_EQ(r.body["word"], c["answer"]) << c["words"];
    EXPECT_EQ(r.body["snapshot"], 3);
  }
  // The unknown word is ignored and named, as gensim logs it.
  const Reply r = client_->Get("/v1/doesnt_match?words=king,queen,xyzzyq,war");
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(r.body["ignored"], json({"xyzzyq"}));
  EXPECT_EQ(client_->Get("/v1/doesnt_match?words=xyzzyq").status, 404);
  EXPECT_EQ(client_->Get("/v1/doesnt_match").status, 400);
}

TEST_F(KeyedVectorsTest, NSimilarityIsGensims) {
  for (const json& c : gensim_["n_similarity"]) {
    const Reply r =
        client_->Get("/v1/n_similarity?ws1=" + Join(c["ws1"]) + "&ws2=" + Join(c["ws2"]));
    ASSERT_EQ(r.status, 200) << r.body;
    EXPECT_NEAR(r.body["similarity"].get<double>(), c["similarity"].get<double>(), 1e-5)
        << c["ws1"] << " " << c["ws2"];
  }
  EXPECT_EQ(client_->Get("/v1/n_similarity?ws1=king").status, 400);
}

TEST_F(KeyedVectorsTest, MostSimilarCosmulIsGensims) {
  for (const json& c : gensim_["most_similar_cosmul"]) {
    std::string q = "/v1/most_similar_cosmul?positive=" + Join(c["positive"]) +
                    "&topn=" + std::to_string(c["topn"].get<int>());
    if (!c["negative"].empty()) q += "&negative=" + Join(c["negative"]);
    const Reply r = client_->Get(q);
    ASSERT_EQ(r.status, 200) << r.body;
    const json& got = r.body["results"];
    const json& want = c["results"];
    ASSERT_EQ(got.size(), want.size()) << q;
    for (size_t i = 0; i < want.size(); ++i) {
      EXPECT_EQ(got[i]["word"], want[i][0]) << q << " #" << i;
      EXPECT_NEAR(got[i]["score"].get<double>(), want[i][1].get<double>(), 1e-4) << q;
    }
  }
  EXPECT_EQ(client_->Get("/v1/most_similar_cosmul?positive=xyzzyq").status, 404);
  EXPECT_EQ(client_->Get("/v1/most_similar_cosmul?negative=king").status, 400);
}

TEST_F(KeyedVectorsTest, RankIsGensims) {
  for (const json& c : gensim_["rank"]) {
    const Reply r = client_->Get("/v1/rank?w1=" + c["w1"].get<std::string>() +
                                 "&w2=" + c["w2"].get<std::string>());
    ASSERT_EQ(r.status, 200) << r.body;
    EXPECT_EQ(r.body["rank"], c["rank"]) << c["w1"] << " " << c["w2"];
  }
  EXPECT_EQ(client_->Get("/v1/rank?w1=king&w2=xyzzyq").status, 404);
}

}  // namespace
}  // namespace streamvec::api
