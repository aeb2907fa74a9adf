// Browsing the vocabulary over real HTTP: GET /v1/words (count order, prefix, paging, limits)
// and GET /v1/words/{word} (count, rank, the first snapshot this server saw the word in).

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "test_util.h"

namespace streamvec::api {
namespace {

using namespace testing_util;

// Words with their counts, not all in count order, with ties (of, and, to: 50; then, theory: 7).
Embeddings Vocabulary(const std::vector<std::string>& words) {
  Embeddings e = RandomEmbeddings(words.size(), 4, 7);
  e.words = words;
  return e;
}
const std::vector<std::string> kWords = {"the", "of", "and",    "then", "there",
                                         "to",  "a",  "theory", "naïve"};
const std::vector<double> kCounts = {100, 50, 50, 7, 60, 50, 0.5, 7, 3};
// Count descending, ties in the snapshot's order.
const std::vector<std::string> kByCount = {"the",  "there",  "of",    "and", "to",
                                           "then", "theory", "naïve", "a"};

std::vector<std::string> WordsOf(const json& page) {
  std::vector<std::string> out;
  for (const json& w : page["words"]) out.push_back(w["word"].get<std::string>());
  return out;
}

class WordsTest : public ServerFixture {};

TEST_F(WordsTest, VocabularyIsInCountOrderWithTiesInSnapshotOrder) {
  source_->Publish(Vocabulary(kWords), 5, "{}", kCounts);
  StartServer();
  const Reply r = client_->Get("/v1/words");
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(WordsOf(r.body), kByCount);
  EXPECT_EQ(r.body["total"], kWords.size());
  EXPECT_EQ(r.body["offset"], 0);
  EXPECT_EQ(r.body["limit"], 100);
  EXPECT_EQ(r.body["prefix"], "");
  EXPECT_EQ(r.body["snapshot"], 5);
  for (size_t i = 0; i < kByCount.size(); ++i) {
    const json& w = r.body["words"][i];
    EXPECT_EQ(w["rank"], i + 1) << w;
    const size_t row = std::find(kWords.begin(), kWords.end(), kByCount[i]) - kWords.begin();
    EXPECT_EQ(w["count"].get<double>(), kCounts[row]) << w;
  }
}

TEST_F(WordsTest, PrefixSelectsWordsAndPagesCoverThemOnce) {
  source_->Publish(Vocabulary(kWords), 1, "{}", kCounts);
  StartServer();
  Reply r = client_->Get("/v1/words?prefix=the");
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(WordsOf(r.body), (std::vector<std::string>{"the", "there", "then", "theory"}));
  EXPECT_EQ(r.body["total"], 4);
  EXPECT_EQ(r.body["words"][1]["rank"], 2);  // ranks are in the whole vocabulary
  EXPECT_EQ(r.body["words"][2]["rank"], 6);
  r = client_->Get("/v1/words?prefix=th&limit=2&offset=1");
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(WordsOf(r.body), (std::vector<std::string>{"there", "then"}));
  EXPECT_EQ(r.body["total"], 4);
  r = client_->Get("/v1/words?prefix=" + Encode("naï"));
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(WordsOf(r.body), std::vector<std::string>{"naïve"});
  r = client_->Get("/v1/words?prefix=The");  // case-sensitive
  EXPECT_EQ(r.body["total"], 0);
  EXPECT_TRUE(r.body["words"].empty());

  // Pages of 2 put together are the whole list, each word once; past the end is empty.
  std::vector<std::string> paged;
  for (int offset = 0; offset < 12; offset += 2) {
    r = client_->Get("/v1/words?limit=2&offset=" + std::to_string(offset));
    ASSERT_EQ(r.status, 200) << r.body;
    EXPECT_EQ(r.body["total"], kWords.size());
    for (const std::string& w : WordsOf(r.body)) paged.push_back(w);
  }
  EXPECT_EQ(paged, kByCount);
  r = client_->Get("/v1/words?offset=2147483648");
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_TRUE(r.body["words"].empty());
}

TEST_F(WordsTest, BadParametersAre400NamingThem) {
  source_->Publish(Vocabulary(kWords), 1, "{}", kCounts);
  StartServer();
  const std::vector<std::pair<std::string, std::string>> bad = {
      {"limit=0", "'limit'"},       {"limit=1001", "'limit'"},
      {"limit=ten", "'limit'"},     {"limit=", "'limit'"},
      {"offset=-1", "'offset'"},    {"offset=2147483649", "'offset'"},
      {"offset=1.5", "'offset'"},   {"snapshot=0", "'snapshot'"},
      {"snapshot=x", "'snapshot'"}, {"prefix=%zz", "percent-encoding"},
  };
  for (const auto& [query, named] : bad) {
    const Reply r = client_->Get("/v1/words?" + query);
    EXPECT_EQ(r.status, 400) << query;
    EXPECT_NE(r.body["error"].get<std::string>().find(named), std::string::npos)
        << query << ": " << r.body;
  }
  EXPECT_EQ(client_->Get("/v1/words?limit=1000").status, 200);
  const Reply r = client_->Call(http::methods::POST, "/v1/words", "{}", true);
  EXPECT_EQ(r.status, 405);
  EXPECT_EQ(r.allow, "GET");
}

// A snapshot without counts (written before they were) lists its own order, counts null.
TEST_F(WordsTest, WithoutCountsTheSnapshotOrderIsTheOrderAndCountsAreNull) {
  source_->Publish(Toy(), 1);
  StartServer();
  const Reply r = client_->Get("/v1/words?limit=3");
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(WordsOf(r.body), (std::vector<std::string>{"king", "queen", "man"}));
  EXPECT_TRUE(r.body["words"][0]["count"].is_null());
  EXPECT_EQ(r.body["words"][2]["rank"], 3);
  const Reply w = client_->Get("/v1/words/woman");
  ASSERT_EQ(w.status, 200) << w.body;
  EXPECT_TRUE(w.body["count"].is_null());
  EXPECT_EQ(w.body["rank"], 4);
}

TEST_F(WordsTest, WordDetailHasCountRankAndFirstSnapshot) {
  source_->Publish(Vocabulary(kWords), 3, "{}", kCounts);
  StartServer();
  Reply r = client_->Get("/v1/words/there");
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(r.body["word"], "there");
  EXPECT_EQ(r.body["count"], 60.0);
  EXPECT_EQ(r.body["rank"], 2);
  EXPECT_EQ(r.body["vocabulary_size"], kWords.size());
  EXPECT_EQ(r.body["snapshot"], 3);
  // Held in the first snapshot this server loaded: it may be older than that.
  EXPECT_EQ(r.body["first_snapshot"], 3);
  EXPECT_EQ(r.body["first_snapshot_exact"], false);

  // Snapshot 4 admits "new"; 5 evicts it; 6 admits it again: its run starts at 6.
  std::vector<std::string> more = kWords;
  more.push_back("new");
  std::vector<double> more_counts = kCounts;
  more_counts.push_back(1);
  source_->Publish(Vocabulary(more), 4, "{}", more_counts);
  ASSERT_TRUE(WaitFor([&] { return server_->snapshot_version() == 4; }));
  r = client_->Get("/v1/words/new");
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(r.body["first_snapshot"], 4);
  EXPECT_EQ(r.body["first_snapshot_exact"], true);
  EXPECT_EQ(r.body["rank"], 9);  // count 1: after naïve (3), before a (0.5)
  r = client_->Get("/v1/words/there");
  EXPECT_EQ(r.body["first_snapshot"], 3);
  source_->Publish(Vocabulary(kWords), 5, "{}", kCounts);
  ASSERT_TRUE(WaitFor([&] { return server_->snapshot_version() == 5; }));
  EXPECT_EQ(client_->Get("/v1/words/new").status, 404);
  source_->Publish(Vocabulary(more), 6, "{}", more_counts);
  ASSERT_TRUE(WaitFor([&] { return server_->snapshot_version() == 6; }));
  r = client_->Get("/v1/words/new");
  EXPECT_EQ(r.body["first_snapshot"], 6);
  EXPECT_EQ(r.body["first_snapshot_exact"], true);
  // Pinned to snapshot 4 (kept in memory for history): its own answer.
  r = client_->Get("/v1/words/new?snapshot=4");
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(r.body["first_snapshot"], 4);
  EXPECT_EQ(r.body["snapshot"], 4);

  r = client_->Get("/v1/words/emperor");
  EXPECT_EQ(r.status, 404);
  EXPECT_NE(r.body["error"].get<std::string>().find("'emperor'"), std::string::npos) << r.body;
  r = client_->Get("/v1/words/");
  EXPECT_EQ(r.status, 400);
  EXPECT_NE(r.body["error"].get<std::string>().find("word"), std::string::npos) << r.body;
  r = client_->Get("/v1/words/" + Encode("naïve"));
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(r.body["word"], "naïve");
}

}  // namespace
}  // namespace streamvec::api
