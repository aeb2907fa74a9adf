// Word-analogy evaluation with 3CosAdd (Mikolov, Yih and Zweig 2013, "Linguistic Regularities in
// Continuous Space Word Representations", section 4): for "a b c d" the answer is the word whose
// unit vector is closest in cosine to unit(unit(b) + unit(c) - unit(a)), among the
// `restrict_vocab` most frequent words, a, b and c excluded. Counts equal gensim 4.2's
// KeyedVectors.evaluate_word_analogies(restrict_vocab=N) (case_insensitive=True,
// dummy4unknown=False), including its float32 arithmetic.
#ifndef STREAMVEC_EVAL_ANALOGY_H_
#define STREAMVEC_EVAL_ANALOGY_H_

#include <cstddef>
#include <string>
#include <vector>

#include "streamvec/base/status.h"
#include "streamvec/store/word2vec_format.h"

namespace streamvec::eval {

struct AnalogyOptions {
  size_t restrict_vocab = 30000;  // answers and known words: the first (most frequent) N rows
  bool case_insensitive = true;   // compare words upper-cased (see vocabulary.h)
  int threads = 2;                // std::threads scoring questions (>= 1)
  bool simd = true;               // AVX2+FMA scoring kernel when the CPU has it; false: the
                                  // portable kernel (their scores can differ in the last bit)
};

struct AnalogySection {
  std::string name;    // text of its ": name" line
  size_t correct = 0;  // in-vocabulary questions answered right
  size_t total = 0;    // in-vocabulary questions (correct + incorrect)
  size_t oov = 0;      // questions skipped because a word is not among the first N rows
  double accuracy() const { return total == 0 ? 0.0 : static_cast<double>(correct) / total; }
};

struct AnalogyResult {
  std::string file;                      // path as given
  size_t restrict_vocab = 0;             // N as requested
  std::vector<AnalogySection> sections;  // in file order, empty sections included
  size_t questions = 0;                  // valid "a b c d" lines
  size_t oov = 0;                        // of those, skipped for an unknown word
  size_t correct = 0;                    // over all sections
  size_t total = 0;                      // in-vocabulary questions = questions - oov
  double accuracy() const { return total == 0 ? 0.0 : static_cast<double>(correct) / total; }
  double oov_ratio() const { return questions == 0 ? 0.0 : 100.0 * oov / questions; }  // percent
};

// Reads an analogy file (questions-words.txt format: ": section" lines, then "a b c d" lines of
// four whitespace-separated words; other lines are skipped) and answers every in-vocabulary
// question exactly: scores are a blocked product of the question matrix (questions x dim) with
// the first N rows (N x dim), split over options.threads threads.
// Errors: NotFound (missing file), IoError, InvalidArgument naming the file and line for a
// question line before the first section, or when the file holds no question at all.
StatusOr<AnalogyResult> EvaluateAnalogies(const Embeddings& embeddings, const std::string& path,
                                          const AnalogyOptions& options = {});

}  // namespace streamvec::eval

#endif  // STREAMVEC_EVAL_ANALOGY_H_
