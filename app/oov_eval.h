// `streamvec eval --oov --state DIR --similarity FILE`: every pair of a word-similarity file
// scored, words outside the served table taking the state's character model's vectors
// (docs/char-model.md), with the pairs of table words and the pairs with an OOV word reported
// apart.
#ifndef STREAMVEC_APP_OOV_EVAL_H_
#define STREAMVEC_APP_OOV_EVAL_H_

#include <cstddef>
#include <string>
#include <vector>

namespace streamvec::app {

struct OovEvalFlags {
  std::string state;                    // state directory: its newest published snapshot
  std::vector<std::string> similarity;  // word-pair files
  size_t table_top = 0;  // only the N most frequent words from the table (0: all of it)
  bool json = false;
};

// Exit status: 0 ok, 2 bad input (no state, no character model, bad file), 1 other failure.
int RunOovEval(const OovEvalFlags& flags);

}  // namespace streamvec::app

#endif  // STREAMVEC_APP_OOV_EVAL_H_
