// The evaluation fixtures of tests/data/eval/ (its README says how they were made): small
// vectors, word-pair and analogy files, and gensim 4.2's answers on them.
#ifndef STREAMVEC_TESTS_EVAL_EVAL_FIXTURES_H_
#define STREAMVEC_TESTS_EVAL_EVAL_FIXTURES_H_

#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

namespace streamvec::eval::fixtures {

// The fixtures' directory, with a trailing slash.
inline const std::string kEvalDir = STREAMVEC_TEST_DATA "/eval/";

// gensim-reference.json: gensim's evaluate_word_pairs and evaluate_word_analogies on
// small-vectors.txt ("similarity" and "analogy" lists). Throws nlohmann::json::parse_error when
// the file is missing or damaged.
inline nlohmann::json GensimReference() {
  std::ifstream in(kEvalDir + "gensim-reference.json");
  return nlohmann::json::parse(in);
}

}  // namespace streamvec::eval::fixtures

#endif  // STREAMVEC_TESTS_EVAL_EVAL_FIXTURES_H_
