// The character model's bag of hashed n-grams (CharModelOptions::ngram_buckets; Bag of
// Subwords, Zhao et al. 2018, section 2): rows of dim floats, one per hashed n-gram of 3 to 6
// symbols (CharNgramIds), and a row-wise Adagrad accumulator each. A word's part of its vector
// is the mean of its rows. Private to charmodel/: CharModel (char_model.cpp) holds one, adds it
// to the LSTM's outputs and trains it in DistillStep.
#ifndef STREAMVEC_CHARMODEL_NGRAM_BAG_H_
#define STREAMVEC_CHARMODEL_NGRAM_BAG_H_

#include <cstdint>
#include <string_view>
#include <vector>

namespace streamvec::internal {

class NgramBag {
 public:
  // buckets rows of dim floats, all zero (an untrained bag adds nothing); buckets 0: no bag.
  // rate: the Adagrad base rate (--char-ngram-lr); max_word_chars as CharNgramIds'.
  NgramBag(int buckets, int dim, float rate, int max_word_chars);

  bool empty() const { return rows_.empty(); }

  // Each word's rows (CharNgramIds); the words must be valid (CharIds accepts them). Empty
  // without a bag.
  std::vector<std::vector<int32_t>> Ids(const std::vector<std::string_view>& words) const;

  // Adds the mean of a word's rows (ids: Ids' for the word) to y (dim floats).
  void AddMean(const std::vector<int32_t>& ids, float* y) const;
  // AddMean for each word: out is ids.size() x dim, row-major.
  void AddMeans(const std::vector<std::vector<int32_t>>& ids, float* out) const;

  // Asks for a word's rows ahead of their use: the bag is tens of MB, read at random (a row a
  // cache miss), and a step's time goes to waiting for rows otherwise.
  void Prefetch(const std::vector<int32_t>& ids) const;

  // The row-wise Adagrad step for one word: d (dim floats) is dL/dv(word); each of its n rows r
  // steps down g = d / n: G_r += mean_j g_j^2, row_r -= rate g / sqrt(G_r + 1e-8) (Duchi et al.
  // 2011; one accumulator a row). A row read twice by the word steps twice.
  void Step(const std::vector<int32_t>& ids, const float* d);

  // The rows (buckets x dim, row-major) and their accumulators (buckets): what a model's bytes
  // hold.
  std::vector<float>& rows() { return rows_; }
  const std::vector<float>& rows() const { return rows_; }
  std::vector<float>& accumulators() { return accumulators_; }
  const std::vector<float>& accumulators() const { return accumulators_; }

 private:
  int buckets_, dim_, max_word_chars_;
  float rate_;
  std::vector<float> rows_, accumulators_;
};

}  // namespace streamvec::internal

#endif  // STREAMVEC_CHARMODEL_NGRAM_BAG_H_
