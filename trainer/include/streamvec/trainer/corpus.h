// A corpus read into memory as an integer token stream for batch training (word2vec.c re-reads
// text every epoch; an id stream is read once and costs 4 bytes a word).
#ifndef STREAMVEC_TRAINER_CORPUS_H_
#define STREAMVEC_TRAINER_CORPUS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "streamvec/base/big_array.h"
#include "streamvec/base/status.h"
#include "streamvec/tokenizer/whitespace_tokenizer.h"
#include "streamvec/trainer/vocabulary.h"

namespace streamvec {

struct CorpusOptions {
  uint64_t min_count = 5;         // words seen fewer times are dropped (word2vec.c min_count)
  int max_sentence_length = 1000;  // longer lines are cut into sentences of this many kept
                                   // words (word2vec.c MAX_SENTENCE_LENGTH), so a one-line corpus
                                   // trains fully
  size_t chunk_bytes = 4 << 20;    // read size
  int threads = 1;                 // a regular file is split into up to this many byte ranges
                                   // (at newlines where possible; 4 MiB or more each) that are
                                   // tokenised in parallel; each range starts a new sentence
  TokenizerOptions tokenizer;
};

struct Corpus {
  Vocabulary vocab;
  BigVector<uint32_t> tokens;              // ids of in-vocabulary words, in corpus order
  std::vector<uint64_t> sentence_offsets;  // sentence s = tokens[offsets[s], offsets[s+1])
  TokenizerStats tokenizer_stats;          // raw tokens, bytes, skipped tokens
  uint64_t raw_words = 0;                  // valid tokens read, in or out of the vocabulary
  size_t num_sentences() const { return sentence_offsets.empty() ? 0 : sentence_offsets.size() - 1; }
};

// Reads `path` ("-" for standard input, or any non-regular file: read sequentially), counts the vocabulary, and keeps the id stream of
// in-vocabulary words split into sentences at newlines and every max_sentence_length words.
// Errors: NotFound / IoError naming the path; InvalidArgument if the input holds no word, or no
// word reaches min_count.
StatusOr<Corpus> LoadCorpus(const std::string& path, const CorpusOptions& options);

}  // namespace streamvec

#endif  // STREAMVEC_TRAINER_CORPUS_H_
