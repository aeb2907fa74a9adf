// Word-similarity evaluation: correlation between human similarity scores of word pairs
// (WordSim-353, Finkelstein et al. 2002; MEN, Bruni et al. 2014) and the cosine similarity of
// their vectors. Numbers equal gensim 4.2's KeyedVectors.evaluate_word_pairs with its defaults
// (restrict_vocab=300000, case_insensitive=True, dummy4unknown=False); Spearman and Pearson are
// computed as scipy.stats.spearmanr / pearsonr compute them.
#ifndef STREAMVEC_EVAL_SIMILARITY_H_
#define STREAMVEC_EVAL_SIMILARITY_H_

#include <cstddef>
#include <string>
#include <vector>

#include "streamvec/base/status.h"
#include "streamvec/store/word2vec_format.h"

namespace streamvec::eval {

// Ranks 1..n of `values`; tied values share the average of their ranks (scipy.stats.rankdata
// method='average'). Shape: n -> n.
std::vector<double> AverageRanks(const std::vector<double>& values);

// Pearson's product-moment correlation of x and y (same length n). NaN when n < 2 or either
// side is constant (as scipy returns). Computed in double after centring, clipped to [-1, 1].
double PearsonCorrelation(const std::vector<double>& x, const std::vector<double>& y);

// Spearman's rank correlation: Pearson of AverageRanks(x) and AverageRanks(y).
double SpearmanCorrelation(const std::vector<double>& x, const std::vector<double>& y);

// Cosine similarity as gensim's KeyedVectors.similarity computes it: both rows scaled to unit
// length in float32, then their dot product rounded to float32. 0 when a row is all zeros.
float CosineSimilarity(const float* a, const float* b, int dim);

struct SimilarityOptions {
  size_t restrict_vocab = 300000;  // only the first (most frequent) rows count as known words
  bool case_insensitive = true;    // compare words upper-cased (see vocabulary.h)
};

struct SimilarityResult {
  std::string file;          // path as given
  size_t total = 0;          // valid pair lines read ("w1<TAB>w2<TAB>score")
  size_t pairs = 0;          // pairs whose two words are known: the ones correlated
  size_t oov = 0;            // pairs with an unknown word (skipped); total = pairs + oov
  size_t skipped_lines = 0;  // comment lines ('#') and malformed lines
  double oov_ratio = 0;      // 100 * oov / total, in percent, as gensim returns it
  double coverage = 0;       // pairs / total, in 0..1
  double spearman = 0;       // NaN when pairs < 2 or a side is constant
  double pearson = 0;        // NaN likewise
};

// Reads a word-pair file and correlates its scores with the vectors' cosine similarities.
// File format (gensim's): one "word1<TAB>word2<TAB>score" per line, UTF-8, LF, CRLF or CR line
// ends; lines starting with '#' and lines that do not split into exactly three tab-separated
// fields with a numeric score are skipped (words are not trimmed, as in gensim).
// Errors: NotFound (missing file), IoError, InvalidArgument naming the file when it holds no
// valid pair line at all (empty or wrong format).
StatusOr<SimilarityResult> EvaluateWordPairs(const Embeddings& embeddings, const std::string& path,
                                             const SimilarityOptions& options = {});

}  // namespace streamvec::eval

#endif  // STREAMVEC_EVAL_SIMILARITY_H_
