// A planted corpus for the character model's tests (char_distiller_test, char_sgns_test): two
// groups of words that share stems and differ only by a suffix ("ing" / "ed"), each group with
// context words of its own, so that SGNS puts the groups apart and only the suffix tells them
// apart by their characters; and an in-memory state (a map of entries) for save / load.
#ifndef STREAMVEC_TESTS_TRAINER_PLANTED_SUFFIXES_H_
#define STREAMVEC_TESTS_TRAINER_PLANTED_SUFFIXES_H_

#include <cmath>
#include <cstdint>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "streamvec/base/cpu_features.h"
#include "streamvec/trainer/streaming_learner.h"

namespace streamvec::testing {

// n random lower-case stems of 3 to 6 letters.
inline std::vector<std::string> Stems(size_t n, uint64_t seed) {
  std::mt19937_64 r(seed);
  std::uniform_int_distribution<int> len(3, 6), letter('a', 'z');
  std::vector<std::string> out(n);
  for (std::string& s : out) {
    const int l = len(r);
    for (int i = 0; i < l; ++i) s += static_cast<char>(letter(r));
  }
  return out;
}

// Sentences of one group each: three of its words (stem + "ing" for group A, stem + "ed" for
// B, the same stems in both) and three of its context words ("qa0".."qa9", "qb0".."qb9").
inline std::vector<std::string> PlantedSentences(const std::vector<std::string>& stems, size_t n,
                                                 uint64_t seed) {
  std::mt19937_64 r(seed);
  std::uniform_int_distribution<size_t> stem(0, stems.size() - 1);
  std::uniform_int_distribution<int> ctx(0, 9), group(0, 1);
  std::vector<std::string> lines;
  for (size_t i = 0; i < n; ++i) {
    const int g = group(r);
    std::string line;
    for (int k = 0; k < 3; ++k) {
      line += stems[stem(r)] + (g == 0 ? "ing " : "ed ");
      line += (g == 0 ? "qa" : "qb") + std::to_string(ctx(r)) + " ";
    }
    lines.push_back(line);
  }
  return lines;
}

// A learner for the planted corpus: dim 16, 256 words, min count 2, no subsampling.
inline StreamingOptions PlantedLearnerOptions() {
  StreamingOptions o;
  o.dim = 16;
  o.vocab_capacity = 256;
  o.min_count = 2;
  o.noise_table_size = 4096;
  o.sample = 0;
  o.isa = DetectBestIsa();
  return o;
}

inline double Cosine(const float* a, const float* b, int dim) {
  double ab = 0, aa = 0, bb = 0;
  for (int j = 0; j < dim; ++j) {
    ab += double(a[j]) * b[j];
    aa += double(a[j]) * a[j];
    bb += double(b[j]) * b[j];
  }
  return ab / std::sqrt(aa * bb + 1e-30);
}

// Saved entries in memory, and a source reading them (NotFound for a missing key).
using State = std::map<std::string, std::string>;
inline StateSink Into(State* state) {
  return [state](const std::string& k, std::string_view v) {
    (*state)[k] = std::string(v);
    return Status::Ok();
  };
}
inline StateSource From(const State& state) {
  return [&state](const std::string& k) -> StatusOr<std::string> {
    auto it = state.find(k);
    if (it == state.end()) return Status::NotFound(k);
    return it->second;
  };
}

}  // namespace streamvec::testing

#endif  // STREAMVEC_TESTS_TRAINER_PLANTED_SUFFIXES_H_
