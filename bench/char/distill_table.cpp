// How far MIMICK distillation gets on a fixed table: an upper bound for `--char-distill`, which
// distils beside training a few hundred steps a pass (docs/char-model.md).
//
// Reads a word2vec text file (the words in the table's order, most frequent first, as `streamvec
// export` writes them), trains a CharModel (Pinter et al. 2017, "Mimicking Word Embeddings using
// Subword RNNs", section 2) on every word type the model can read: EPOCHS shuffled passes, BATCH
// types an Adam step, the targets each word's vector scaled to unit length (as --char-distill
// does), each step's batch split over two threads (CharModel::ComputeGradient) and the gradients
// summed. Then, for every word of WORDS (one a line), writes a line "word v1 ... vdim T|M": the
// table's vector for one of the TOP most frequent words (T), the model's for any other (M).
// Logs each epoch's mean loss (1.0 is a zero vector's) and the seconds so far to stderr.
//
// With NGRAM_BUCKETS > 0 the model has an n-gram bag of that many rows (--char-ngram-buckets,
// Adagrad rate NGRAM_RATE) and each batch is one CharModel::DistillStep on one thread (the bag's
// rows are trained only there).
//
// Usage: distill_table VECTORS.txt WORDS.txt OUT.txt TOP HIDDEN EPOCHS BATCH ADAM_RATE
// [NGRAM_BUCKETS NGRAM_RATE] (the driver: bench/char/distill_table.py). Exit 2 on bad arguments
// or an unreadable file.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "streamvec/charmodel/char_model.h"

namespace {

using streamvec::CharModel;
using streamvec::CharModelOptions;

int Fail(const std::string& message) {
  std::cerr << "distill_table: " << message << "\n";
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 9 && argc != 11) {
    return Fail(
        "usage: distill_table VECTORS.txt WORDS.txt OUT.txt TOP HIDDEN EPOCHS BATCH "
        "ADAM_RATE [NGRAM_BUCKETS NGRAM_RATE]");
  }
  const int top = std::atoi(argv[4]), hidden = std::atoi(argv[5]), epochs = std::atoi(argv[6]),
            batch = std::atoi(argv[7]);
  const float rate = static_cast<float>(std::atof(argv[8]));
  if (top < 0 || hidden < 1 || epochs < 0 || batch < 2 || !(rate > 0)) {
    return Fail("TOP >= 0, HIDDEN >= 1, EPOCHS >= 0, BATCH >= 2, ADAM_RATE > 0");
  }
  std::ifstream in(argv[1]);
  size_t n = 0, dim = 0;
  if (!(in >> n >> dim) || dim == 0) return Fail(std::string(argv[1]) + ": no word2vec header");
  std::vector<std::string> words(n);
  std::vector<float> table(n * dim), unit(n * dim);
  for (size_t i = 0; i < n; ++i) {
    if (!(in >> words[i])) return Fail(std::string(argv[1]) + ": truncated");
    double norm2 = 0;
    for (size_t j = 0; j < dim; ++j) {
      if (!(in >> table[i * dim + j])) return Fail(std::string(argv[1]) + ": truncated");
      norm2 += double(table[i * dim + j]) * table[i * dim + j];
    }
    const double inv = norm2 > 0 ? 1 / std::sqrt(norm2) : 0;
    for (size_t j = 0; j < dim; ++j) unit[i * dim + j] = float(table[i * dim + j] * inv);
  }
  CharModelOptions o;  // --char-distill's shape but the hidden size: bidirectional, char_dim 20
  o.dim = static_cast<int>(dim);
  o.hidden = hidden;
  o.learning_rate = rate;
  if (argc == 11) {
    o.ngram_buckets = std::atoi(argv[9]);
    o.ngram_rate = static_cast<float>(std::atof(argv[10]));
  }
  if (auto s = streamvec::ValidateCharModelOptions(o); !s.ok()) return Fail(s.message());
  CharModel model(o);
  std::vector<size_t> types;
  for (size_t i = 0; i < n; ++i) {
    if (streamvec::CharIds(words[i], o.buckets, o.max_word_chars).ok()) types.push_back(i);
  }
  std::cerr << "distill_table: " << types.size() << " of " << n << " words, dim " << dim
            << ", hidden " << hidden << " x 2, batch " << batch << ", Adam " << rate << "\n";
  std::mt19937_64 rng(1);
  const auto t0 = std::chrono::steady_clock::now();
  for (int e = 0; e < epochs; ++e) {
    std::shuffle(types.begin(), types.end(), rng);
    double loss = 0;
    size_t steps = 0;
    for (size_t b = 0; b + batch <= types.size(); b += batch, ++steps) {
      if (o.ngram_buckets > 0) {
        std::vector<std::string_view> batch_words;
        std::vector<float> targets;
        for (int k = 0; k < batch; ++k) {
          const size_t t = types[b + k];
          batch_words.push_back(words[t]);
          targets.insert(targets.end(), unit.begin() + t * dim, unit.begin() + (t + 1) * dim);
        }
        auto l = model.DistillStep(batch_words, targets.data(), std::vector<float>(batch, 1.f));
        loss += l.ok() ? *l : NAN;
        continue;
      }
      std::vector<std::string_view> half_words[2];
      std::vector<float> half_targets[2], gradient[2];
      for (int k = 0; k < batch; ++k) {
        const size_t t = types[b + k];
        const int h = k < batch / 2 ? 0 : 1;
        half_words[h].push_back(words[t]);
        half_targets[h].insert(half_targets[h].end(), unit.begin() + t * dim,
                               unit.begin() + (t + 1) * dim);
      }
      double half_loss[2] = {0, 0};
      auto run = [&](int h) {
        // CharModel::DistillStep's loss with unit weights (the batch's mean squared distance),
        // each half's share: DistillStep itself runs on one thread.
        auto l2 = [&](const float* out, size_t m, float* d_out) {
          double s = 0;
          for (size_t i = 0; i < m * dim; ++i) {
            const double diff = double(out[i]) - half_targets[h][i];
            s += diff * diff / batch;
            d_out[i] = static_cast<float>(2 * diff / batch);
          }
          return s;
        };
        auto r = model.ComputeGradient(half_words[h], l2, &gradient[h]);
        half_loss[h] = r.ok() ? *r : NAN;
      };
      std::thread other(run, 1);
      run(0);
      other.join();
      for (size_t j = 0; j < gradient[0].size(); ++j) gradient[0][j] += gradient[1][j];
      model.AdamStep(gradient[0]);
      loss += half_loss[0] + half_loss[1];
    }
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    std::cerr << "distill_table: epoch " << e + 1 << ", " << steps << " steps, loss "
              << loss / std::max<size_t>(1, steps) << ", " << s << " s\n";
  }
  std::unordered_map<std::string, size_t> rank;
  for (size_t i = 0; i < n; ++i) rank.emplace(words[i], i);
  std::ifstream word_list(argv[2]);
  if (!word_list) return Fail(std::string(argv[2]) + ": cannot read");
  std::ofstream out(argv[3]);
  std::string w;
  std::vector<float> v;
  while (word_list >> w) {
    auto it = rank.find(w);
    const bool from_table = it != rank.end() && it->second < static_cast<size_t>(top);
    const float* x = nullptr;
    if (from_table) {
      x = table.data() + it->second * dim;
    } else {
      if (!model.Encode({w}, &v).ok()) continue;  // a word the model cannot read
      x = v.data();
    }
    out << w;
    for (size_t j = 0; j < dim; ++j) out << ' ' << x[j];
    out << (from_table ? " T\n" : " M\n");
  }
  return out.good() ? 0 : Fail(std::string(argv[3]) + ": write failed");
}
