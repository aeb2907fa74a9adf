// The character model: ids, gradients against finite differences, the batched path against one
// word at a time, a planted suffix task (MIMICK-style distillation), bytes round trip.
#include "streamvec/charmodel/char_model.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "word_views.h"

namespace streamvec {
namespace {

CharModelOptions Small() {
  CharModelOptions o;
  o.dim = 3;
  o.char_dim = 4;
  o.hidden = 5;
  o.buckets = 300;  // 'é' (U+00E9) has a row of its own
  o.seed = 11;
  return o;
}

using testing::Views;

TEST(CharIdsTest, MarksAroundOneIdPerCodePoint) {
  auto ids = CharIds("aé", 300, 32);
  ASSERT_TRUE(ids.ok()) << ids.status().ToString();
  EXPECT_EQ(*ids, (std::vector<int32_t>{0, 2 + 'a', 2 + 0xE9, 1}));
}

TEST(CharIdsTest, HighCodePointsShareRowsModuloBuckets) {
  auto ids = CharIds("\xE4\xB8\xAD", 300, 32);  // U+4E2D
  ASSERT_TRUE(ids.ok());
  EXPECT_EQ((*ids)[1], 2 + 0x4E2D % 298);
}

TEST(CharIdsTest, LongWordsAreCutToMaxWordChars) {
  auto ids = CharIds(std::string(100, 'x'), 300, 32);
  ASSERT_TRUE(ids.ok());
  EXPECT_EQ(ids->size(), 34u);
}

TEST(CharIdsTest, BadWordsAreInvalidArgument) {
  for (std::string_view bad :
       {std::string_view(""), std::string_view("ab\xff"), std::string_view("a\x01z"),
        std::string_view("\xC3"), std::string_view("ok\x7f")}) {
    auto ids = CharIds(bad, 300, 32);
    ASSERT_FALSE(ids.ok()) << bad;
    EXPECT_EQ(ids.status().code(), StatusCode::kInvalidArgument);
  }
  // Invalid bytes past the cut are still refused.
  EXPECT_FALSE(CharIds(std::string(40, 'a') + "\xff", 300, 32).ok());
  auto ctl = CharIds("a\x01", 300, 32);
  EXPECT_NE(ctl.status().message().find("U+0001"), std::string::npos) << ctl.status().message();
}

TEST(CharModelTest, EncodeRefusesTheBatchNamingTheBadWord) {
  CharModel model(Small());
  std::vector<float> out;
  Status s = model.Encode({"fine", "bad\xff"}, &out);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("word 1"), std::string::npos) << s.message();
}

// Whole-encoder gradient (embeddings, both LSTMs, projection) against central differences, in
// float: L = sum r * v(w) over a batch with words of several lengths, one repeated.
void CheckEncoderGradient(const CharModelOptions& options) {
  CharModel model(options);
  const std::vector<std::string> words = {"ab", "cab", "abc", "é", "ab", "zzzzzzz"};
  std::mt19937_64 rng(3);
  std::uniform_real_distribution<float> u(-1, 1);
  std::vector<float> r(words.size() * options.dim);
  for (float& x : r) x = u(rng);
  // Linear and quadratic terms: sum r*v + 0.5 sum v^2.
  auto loss = [&](const float* out, size_t n, float* d_out) {
    double l = 0;
    for (size_t i = 0; i < n * options.dim; ++i) {
      l += double(r[i]) * out[i] + 0.5 * double(out[i]) * out[i];
      d_out[i] = r[i] + out[i];
    }
    return l;
  };
  std::vector<float> grad;
  ASSERT_TRUE(model.ComputeGradient(Views(words), loss, &grad).ok());
  ASSERT_EQ(grad.size(), model.num_parameters());
  std::vector<float> scratch;
  auto value = [&]() {
    std::vector<float> out;
    EXPECT_TRUE(model.Encode(Views(words), &out).ok());
    scratch.assign(out.size(), 0.f);
    return loss(out.data(), words.size(), scratch.data());
  };
  float* p = model.mutable_parameters();
  const float eps = 1e-2f;
  size_t checked = 0, nonzero = 0;
  for (size_t i = 0; i < model.num_parameters(); ++i) {
    const float keep = p[i];
    p[i] = keep + eps;
    const double up = value();
    p[i] = keep - eps;
    const double down = value();
    p[i] = keep;
    const double numeric = (up - down) / (2 * eps);
    EXPECT_NEAR(grad[i], numeric, 2e-3 + 2e-2 * std::abs(numeric)) << "parameter " << i;
    ++checked;
    if (grad[i] != 0) ++nonzero;
  }
  EXPECT_EQ(checked, model.num_parameters());
  EXPECT_GT(nonzero, model.num_parameters() / 10);  // not a vacuous check
}

TEST(CharModelTest, EncoderGradientMatchesFiniteDifferencesBidirectional) {
  CheckEncoderGradient(Small());
}

TEST(CharModelTest, EncoderGradientMatchesFiniteDifferencesForwardOnly) {
  CharModelOptions o = Small();
  o.bidirectional = false;
  CheckEncoderGradient(o);
}

std::vector<std::string> RandomWords(size_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  const std::vector<std::string> alphabet = {"a", "b", "c", "d", "e",  "k",
                                             "s", "t", "é", "ж", "中", "-"};
  std::uniform_int_distribution<int> len(1, 12), pick(0, int(alphabet.size()) - 1);
  std::vector<std::string> words(n);
  for (std::string& w : words) {
    const int l = len(rng);
    for (int i = 0; i < l; ++i) w += alphabet[pick(rng)];
  }
  return words;
}

TEST(CharModelTest, BatchedEncodeEqualsOneWordAtATime) {
  CharModelOptions o;  // the defaults: 32 / 64 bidirectional -> 100
  CharModel model(o);
  const std::vector<std::string> words = RandomWords(120, 5);
  std::vector<float> batched;
  ASSERT_TRUE(model.Encode(Views(words), &batched).ok());
  for (size_t i = 0; i < words.size(); ++i) {
    std::vector<float> one;
    ASSERT_TRUE(model.Encode({words[i]}, &one).ok());
    for (int j = 0; j < o.dim; ++j) {
      ASSERT_NEAR(batched[i * o.dim + j], one[j], 1e-5f) << words[i] << " component " << j;
    }
  }
}

TEST(CharModelTest, BatchedGradientEqualsSumOfOneWordGradients) {
  CharModelOptions o;
  o.dim = 16;
  CharModel model(o);
  const std::vector<std::string> words = RandomWords(40, 6);
  std::mt19937_64 rng(9);
  std::normal_distribution<float> n01;
  std::vector<float> r(words.size() * o.dim);
  for (float& x : r) x = n01(rng);
  auto loss_for = [&](size_t first) {
    return [&r, first, &o](const float* out, size_t n, float* d_out) {
      double l = 0;
      for (size_t i = 0; i < n * o.dim; ++i) {
        l += double(r[first * o.dim + i]) * out[i];
        d_out[i] = r[first * o.dim + i];
      }
      return l;
    };
  };
  std::vector<float> batched, summed;
  ASSERT_TRUE(model.ComputeGradient(Views(words), loss_for(0), &batched).ok());
  for (size_t i = 0; i < words.size(); ++i) {
    ASSERT_TRUE(model.ComputeGradient({words[i]}, loss_for(i), &summed).ok());
  }
  ASSERT_EQ(batched.size(), summed.size());
  for (size_t i = 0; i < batched.size(); ++i) {
    ASSERT_NEAR(batched[i], summed[i], 1e-4f + 1e-4f * std::abs(summed[i])) << "parameter " << i;
  }
}

double Cosine(const float* a, const float* b, int dim) {
  double ab = 0, aa = 0, bb = 0;
  for (int j = 0; j < dim; ++j) {
    ab += double(a[j]) * b[j];
    aa += double(a[j]) * a[j];
    bb += double(b[j]) * b[j];
  }
  return ab / std::sqrt(aa * bb + 1e-30);
}

// MIMICK on a planted task: stem+"ing" -> vector A, stem+"ed" -> vector B, the same stems in
// both groups, so only the suffix decides. Unseen stems with each suffix land nearer their
// group's vector.
// One DistillStep on `batch` words drawn (with repeats) from `words`, each with its row of
// `targets` (words.size() x dim), weight 1. Returns the step's loss.
StatusOr<double> DistillRandomBatch(CharModel& model, const std::vector<std::string>& words,
                                    const std::vector<float>& targets, int batch,
                                    std::mt19937_64& rng) {
  const size_t dim = size_t(model.options().dim);
  std::uniform_int_distribution<size_t> pick(0, words.size() - 1);
  std::vector<std::string_view> views;
  std::vector<float> batch_targets;
  for (int i = 0; i < batch; ++i) {
    const size_t w = pick(rng);
    views.push_back(words[w]);
    batch_targets.insert(batch_targets.end(), targets.begin() + std::ptrdiff_t(w * dim),
                         targets.begin() + std::ptrdiff_t((w + 1) * dim));
  }
  return model.DistillStep(views, batch_targets.data(), std::vector<float>(size_t(batch), 1.f));
}

TEST(CharModelTest, DistillationLearnsThatASuffixDecidesTheGroup) {
  CharModelOptions o;
  o.dim = 16;
  o.char_dim = 16;
  o.hidden = 32;
  o.learning_rate = 1e-2f;
  o.seed = 4;
  CharModel model(o);
  std::mt19937_64 rng(21);
  std::normal_distribution<float> n01;
  std::vector<float> a(o.dim), b(o.dim);
  for (float& x : a) x = n01(rng);
  for (float& x : b) x = n01(rng);
  auto stems = [&](size_t n, uint64_t seed) {
    std::mt19937_64 r(seed);
    std::uniform_int_distribution<int> len(3, 7), letter('a', 'z');
    std::vector<std::string> out(n);
    for (std::string& s : out) {
      const int l = len(r);
      for (int i = 0; i < l; ++i) s += static_cast<char>(letter(r));
    }
    return out;
  };
  const std::vector<std::string> train = stems(200, 1), unseen = stems(60, 2);
  std::vector<std::string> words;
  std::vector<float> targets;
  for (const std::string& s : train) {
    words.push_back(s + "ing");
    targets.insert(targets.end(), a.begin(), a.end());
    words.push_back(s + "ed");
    targets.insert(targets.end(), b.begin(), b.end());
  }
  double first_loss = 0, last_loss = 0;
  for (int step = 0; step < 300; ++step) {
    auto l = DistillRandomBatch(model, words, targets, 64, rng);
    ASSERT_TRUE(l.ok());
    if (step == 0) first_loss = *l;
    last_loss = *l;
  }
  EXPECT_LT(last_loss, 0.2 * first_loss);
  int right = 0, total = 0;
  for (const std::string& s : unseen) {
    std::vector<float> v;
    ASSERT_TRUE(model.Encode({s + "ing", s + "ed"}, &v).ok());
    right += Cosine(v.data(), a.data(), o.dim) > Cosine(v.data(), b.data(), o.dim);
    right += Cosine(v.data() + o.dim, b.data(), o.dim) > Cosine(v.data() + o.dim, a.data(), o.dim);
    total += 2;
  }
  EXPECT_GE(right, total * 95 / 100) << right << " of " << total;
}

// Serialize with Adam's state (and the bag's accumulators), Deserialize, one more step on each:
// the same parameters, bag rows and bytes; the serving bytes encode the same vectors.
void ExpectRoundTripContinuesTrainingIdentically(const CharModelOptions& o) {
  CharModel model(o);
  const std::vector<std::string> words = RandomWords(10, 8);
  std::vector<float> targets(words.size() * o.dim, 0.5f);
  const std::vector<float> weights(words.size(), 1.f);
  ASSERT_TRUE(model.DistillStep(Views(words), targets.data(), weights).ok());
  auto copy = CharModel::Deserialize(model.Serialize(/*with_optimizer=*/true));
  ASSERT_TRUE(copy.ok()) << copy.status().ToString();
  EXPECT_EQ((*copy)->adam_steps(), 1u);
  EXPECT_EQ((*copy)->options().ngram_buckets, o.ngram_buckets);
  EXPECT_EQ((*copy)->options().ngram_rate, o.ngram_rate);
  EXPECT_EQ((*copy)->ngram_rows(), model.ngram_rows());
  ASSERT_TRUE(model.DistillStep(Views(words), targets.data(), weights).ok());
  ASSERT_TRUE((*copy)->DistillStep(Views(words), targets.data(), weights).ok());
  ASSERT_EQ(model.num_parameters(), (*copy)->num_parameters());
  for (size_t i = 0; i < model.num_parameters(); ++i) {
    ASSERT_EQ(model.parameters()[i], (*copy)->parameters()[i]) << i;
  }
  EXPECT_EQ((*copy)->ngram_rows(), model.ngram_rows());  // the bag's accumulators came along
  EXPECT_EQ(model.Serialize(true), (*copy)->Serialize(true));

  auto serving = CharModel::Deserialize(model.Serialize(/*with_optimizer=*/false));
  ASSERT_TRUE(serving.ok());
  std::vector<float> v1, v2;
  ASSERT_TRUE(model.Encode(Views(words), &v1).ok());
  ASSERT_TRUE((*serving)->Encode(Views(words), &v2).ok());
  EXPECT_EQ(v1, v2);
  EXPECT_EQ((*serving)->options().max_word_chars, o.max_word_chars);
}

TEST(CharModelTest, SerializeRoundTripContinuesTrainingIdentically) {
  CharModelOptions o = Small();
  o.dim = 8;
  ExpectRoundTripContinuesTrainingIdentically(o);
}

TEST(CharModelTest, DeserializeRefusesDamagedBytes) {
  CharModel model(Small());
  const std::string bytes = model.Serialize(true);
  for (const std::string& bad :
       {std::string(), std::string("not a model"), bytes.substr(0, bytes.size() - 1), bytes + "x",
        "SVCHARLM" + std::string(4, '\x09') + bytes.substr(12)}) {
    auto m = CharModel::Deserialize(bad);
    ASSERT_FALSE(m.ok());
    EXPECT_EQ(m.status().code(), StatusCode::kCorruption) << m.status().message();
  }
}

// The n-gram bag (CharModelOptions::ngram_buckets): fastText's 3- to 6-grams between marks.
TEST(CharNgramIdsTest, EveryRunOfThreeToSixSymbolsBetweenTheMarks) {
  const int kBuckets = 1 << 20;
  auto count = [&](std::string_view w, int max_chars = 32) {
    auto ids = CharNgramIds(w, kBuckets, max_chars);
    EXPECT_TRUE(ids.ok()) << ids.status().ToString();
    for (int32_t id : *ids) EXPECT_TRUE(id >= 0 && id < kBuckets) << id;
    return ids.ok() ? ids->size() : 0;
  };
  EXPECT_EQ(count("a"), 1u);                                    // <a>
  EXPECT_EQ(count("ab"), 2u + 1u);                              // <ab ab> | <ab>
  EXPECT_EQ(count("abcdefgh"), 8u + 7 + 6 + 5);                 // 10 symbols
  EXPECT_EQ(count("aé中"), 3u + 2 + 1);                         // code points, not bytes
  EXPECT_EQ(count(std::string(100, 'x')), 32u + 31 + 30 + 29);  // cut to 32 code points
  EXPECT_EQ(count(std::string(100, 'x'), 4), 4u + 3 + 2 + 1);
  // The begin mark is a symbol: "ab"'s first 3-gram "<ab" is not "qab"'s second, "qab".
  EXPECT_NE(CharNgramIds("ab", kBuckets, 32).value()[0],
            CharNgramIds("qab", kBuckets, 32).value()[1]);
  // Errors as CharIds.
  for (std::string_view bad :
       {std::string_view(""), std::string_view("ab\xff"), std::string_view("a\x01z")}) {
    auto ids = CharNgramIds(bad, kBuckets, 32);
    ASSERT_FALSE(ids.ok()) << bad;
    EXPECT_EQ(ids.status().code(), StatusCode::kInvalidArgument);
  }
}

TEST(CharNgramIdsTest, TheSameNgramHasTheSameRowInEveryWord) {
  const int kBuckets = 1 << 20;
  // "xyz" is the middle 3-gram of "qxyzq" (symbols < q x y z q >: 3-grams <qx qxy xyz yzq zq>)
  // and "wxyzw".
  auto a = CharNgramIds("qxyzq", kBuckets, 32), b = CharNgramIds("wxyzw", kBuckets, 32);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ((*a)[2], (*b)[2]);
  EXPECT_NE((*a)[0], (*b)[0]);
}

CharModelOptions WithBag(CharModelOptions o, int buckets) {
  o.ngram_buckets = buckets;
  return o;
}

TEST(CharModelNgramBagTest, AnUntrainedBagLeavesTheLstmsVectors) {
  CharModel plain(Small()), bag(WithBag(Small(), 1000));
  ASSERT_EQ(bag.ngram_rows().size(), 1000u * 3);
  const std::vector<std::string> words = RandomWords(30, 12);
  std::vector<float> v1, v2;
  ASSERT_TRUE(plain.Encode(Views(words), &v1).ok());
  ASSERT_TRUE(bag.Encode(Views(words), &v2).ok());
  EXPECT_EQ(v1, v2);
  EXPECT_TRUE(plain.ngram_rows().empty());
}

// One DistillStep on one word: its n-gram rows take a row-wise Adagrad step down
// dL/dv / (n-grams), L = ||v - t||^2, so the word's vector moves by the rows' mean.
TEST(CharModelNgramBagTest, DistillStepTakesARowWiseAdagradStepOfTheWordsRows) {
  CharModelOptions o = WithBag(Small(), 1 << 20);
  o.learning_rate = 1e-9f;  // Adam moves the LSTM by ~1e-9 a parameter: negligible here
  o.ngram_rate = 0.05f;
  CharModel model(o);
  const std::string word = "abcd";  // 6 symbols: 4 + 3 + 2 + 1 = 10 n-grams
  auto ids = CharNgramIds(word, o.ngram_buckets, o.max_word_chars);
  ASSERT_TRUE(ids.ok());
  ASSERT_EQ(ids->size(), 10u);
  std::vector<int32_t> distinct = *ids;
  std::sort(distinct.begin(), distinct.end());
  ASSERT_EQ(std::unique(distinct.begin(), distinct.end()), distinct.end());
  std::vector<float> before, after;
  ASSERT_TRUE(model.Encode({word}, &before).ok());
  const std::vector<float> target = {0.5f, -1.f, 2.f};
  ASSERT_TRUE(model.DistillStep({word}, target.data(), {1.f}).ok());
  ASSERT_TRUE(model.Encode({word}, &after).ok());
  double g[3], mean2 = 0;
  for (int j = 0; j < 3; ++j) {
    g[j] = 2.0 * (before[j] - target[j]) / 10;
    mean2 += g[j] * g[j] / 3;
  }
  const double step = 0.05 / std::sqrt(mean2 + 1e-8);
  for (int j = 0; j < 3; ++j) {
    EXPECT_NEAR(after[j] - before[j], -step * g[j], 1e-5) << j;
    EXPECT_NEAR(model.ngram_rows()[size_t((*ids)[0]) * 3 + j], -step * g[j], 1e-6) << j;
  }
}

// The bag steps one word at a time: a word read twice in a batch takes its second step from the
// vector its first step left (a batch step would take both from the vector before the batch).
TEST(CharModelNgramBagTest, DistillStepStepsTheBagOneWordAtATime) {
  CharModelOptions o = WithBag(Small(), 1 << 20);
  o.learning_rate = 1e-9f;  // Adam moves the LSTM by ~1e-9 a parameter: negligible here
  o.ngram_rate = 0.05f;
  CharModel model(o);
  const std::string word = "abcd";  // 10 distinct n-grams, as above
  std::vector<float> before, after;
  ASSERT_TRUE(model.Encode({word}, &before).ok());
  const std::vector<float> target = {0.5f, -1.f, 2.f};
  const std::vector<float> targets = {0.5f, -1.f, 2.f, 0.5f, -1.f, 2.f};
  ASSERT_TRUE(model.DistillStep({word, word}, targets.data(), {1.f, 1.f}).ok());
  ASSERT_TRUE(model.Encode({word}, &after).ok());
  // Each step moves every one of the word's rows, so the vector, by the same delta.
  std::vector<double> v(before.begin(), before.end());
  double accumulator = 0;
  for (int occurrence = 0; occurrence < 2; ++occurrence) {
    double g[3], mean2 = 0;
    for (int j = 0; j < 3; ++j) {
      g[j] = 2.0 * (v[j] - target[j]) / 10;
      mean2 += g[j] * g[j] / 3;
    }
    accumulator += mean2;
    for (int j = 0; j < 3; ++j) v[j] -= 0.05 * g[j] / std::sqrt(accumulator + 1e-8);
  }
  for (int j = 0; j < 3; ++j) EXPECT_NEAR(after[j], v[j], 1e-5) << j;
}

// The point of the bag: a row per n-gram remembers arbitrary vectors of many words, which the
// LSTM's few parameters cannot (Zhao et al. 2018).
TEST(CharModelNgramBagTest, TheBagRemembersRandomTargetsTheLstmCannot) {
  CharModelOptions o;
  o.dim = 16;
  o.char_dim = 8;
  o.hidden = 8;
  o.seed = 5;
  const std::vector<std::string> words = RandomWords(400, 31);
  std::mt19937_64 rng(8);
  std::normal_distribution<float> n01;
  std::vector<float> targets(words.size() * o.dim);
  for (float& x : targets) x = n01(rng) / 4;  // about unit length, as --char-distill's targets
  auto final_loss = [&](const CharModelOptions& options) {
    CharModel model(options);
    std::mt19937_64 draw(9);
    for (int step = 0; step < 400; ++step) {
      EXPECT_TRUE(DistillRandomBatch(model, words, targets, 64, draw).ok());
    }
    std::vector<float> v;
    EXPECT_TRUE(model.Encode(Views(words), &v).ok());
    double loss = 0;
    for (size_t i = 0; i < v.size(); ++i) loss += (v[i] - targets[i]) * (v[i] - targets[i]);
    return loss / double(words.size());
  };
  const double lstm = final_loss(o), bag = final_loss(WithBag(o, 1 << 16));
  EXPECT_LT(bag, 0.3 * lstm) << "bag " << bag << ", LSTM alone " << lstm;
}

TEST(CharModelNgramBagTest, SerializeRoundTripKeepsTheBagAndItsAdagradState) {
  CharModelOptions o = Small();
  o.dim = 8;
  o.ngram_buckets = 500;
  o.ngram_rate = 0.2f;
  ExpectRoundTripContinuesTrainingIdentically(o);
  // Damaged: truncated rows, trailing bytes.
  CharModel model(o);
  const std::string bytes = model.Serialize(false);
  for (const std::string& bad : {bytes.substr(0, bytes.size() - 4), bytes + "x"}) {
    auto m = CharModel::Deserialize(bad);
    ASSERT_FALSE(m.ok());
    EXPECT_EQ(m.status().code(), StatusCode::kCorruption) << m.status().message();
  }
}

TEST(CharModelTest, ValidateNamesTheFlag) {
  CharModelOptions o;
  o.char_dim = 0;
  EXPECT_NE(ValidateCharModelOptions(o).message().find("--char-dim"), std::string::npos);
  o = {};
  o.max_word_chars = 0;
  EXPECT_NE(ValidateCharModelOptions(o).message().find("--max-word-chars"), std::string::npos);
  o = {};
  o.ngram_buckets = -1;
  EXPECT_NE(ValidateCharModelOptions(o).message().find("--char-ngram-buckets"), std::string::npos);
  o.ngram_buckets = 1 << 24;  // x dim 100: more than 2^28 floats
  EXPECT_NE(ValidateCharModelOptions(o).message().find("--char-ngram-buckets"), std::string::npos);
  o = {};
  o.ngram_buckets = 10;
  o.ngram_rate = 0;
  EXPECT_NE(ValidateCharModelOptions(o).message().find("--char-ngram-lr"), std::string::npos);
}

}  // namespace
}  // namespace streamvec
