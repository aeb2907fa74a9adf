// Two builds of the AVX-512 skip-gram kernel in one process, alternating, on real micro-batches
// (bench/kernel_ab/run.sh builds and runs it). On a noisy machine two separate runs of a program
// differ by more than a few-percent change in the kernel; alternating the two kernels rep by rep
// in one process puts both under the same noise. The slot a kernel is linked into has a bias of
// its own (code placement: up to several percent), so run.sh runs the pair in both orders and
// reports the geometric mean of the two ratios, in which the bias cancels.
//
// Usage: kernel_ab CORPUS [REPS] [resident] [cbow]
//   The first 40 MB of CORPUS, ids by frequency (min-count 5), subsampled at 1e-4 as word2vec,
//   windows 1-5, negatives from a pool of 1024 count^0.75 draws per 2048 kept tokens and shared
//   by pairs of positions (the trainer's defaults); dim 100. `resident`: every id taken modulo
//   1024, so that all rows stay in cache (the kernel's compute alone). `cbow`: the CBOW step
//   (SgnsKernel::Cbow, learning rate 0.05 as the benchmark's) instead of skip-gram.
// Prints the median ns per kept token of A and B and the median of the per-rep ratios B/A.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <memory>
#include <random>
#include <sstream>
#include <string>
#include <unordered_map>
#include <vector>

#include "streamvec/kernels/aligned.h"
#include "streamvec/kernels/sgns_kernel.h"

namespace streamvec::internal {
std::unique_ptr<SgnsKernel> MakeKernelA();
std::unique_ptr<SgnsKernel> MakeKernelB();
}  // namespace streamvec::internal

namespace {

double Median(std::vector<double> x) {
  std::sort(x.begin(), x.end());
  return x[x.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  using namespace streamvec;
  if (argc < 2) {
    std::fprintf(stderr, "usage: kernel_ab CORPUS [REPS] [resident] [cbow]\n");
    return 2;
  }
  const int reps = argc > 2 ? std::atoi(argv[2]) : 10;
  bool resident = false, cbow = false;
  for (int a = 3; a < argc; ++a) {
    if (std::strcmp(argv[a], "resident") == 0) {
      resident = true;
    } else if (std::strcmp(argv[a], "cbow") == 0) {
      cbow = true;
    } else {
      std::fprintf(stderr, "kernel_ab: unknown mode '%s' (resident, cbow)\n", argv[a]);
      return 2;
    }
  }
  std::ifstream f(argv[1]);
  std::string text(40u << 20, '\0');
  f.read(text.data(), static_cast<std::streamsize>(text.size()));
  text.resize(static_cast<size_t>(f.gcount()));
  if (text.empty()) {
    std::fprintf(stderr, "kernel_ab: cannot read %s\n", argv[1]);
    return 2;
  }
  // Vocabulary by frequency.
  std::unordered_map<std::string, uint32_t> ids;
  std::vector<uint64_t> counts;
  std::vector<uint32_t> raw;
  {
    std::istringstream in(text);
    std::string w;
    while (in >> w) {
      auto [it, added] = ids.emplace(w, static_cast<uint32_t>(counts.size()));
      if (added) counts.push_back(0);
      ++counts[it->second];
      raw.push_back(it->second);
    }
  }
  std::vector<uint32_t> order(counts.size());
  for (uint32_t i = 0; i < order.size(); ++i) order[i] = i;
  std::sort(order.begin(), order.end(),
            [&](uint32_t a, uint32_t b) { return counts[a] > counts[b]; });
  std::vector<uint32_t> rank(counts.size());
  for (uint32_t r = 0; r < order.size(); ++r) rank[order[r]] = r;
  uint32_t vocab = 0;
  uint64_t total = 0;
  for (uint64_t c : counts) {
    if (c >= 5) {
      ++vocab;
      total += c;
    }
  }
  // Subsampled token stream, windows, pooled negatives shared by pairs.
  std::mt19937_64 rng(1);
  std::uniform_real_distribution<double> u01(0.0, 1.0);
  std::vector<uint32_t> tokens;
  for (uint32_t id : raw) {
    const uint32_t r = rank[id];
    if (r >= vocab) continue;
    const double ratio = 1e-4 / (static_cast<double>(counts[id]) / static_cast<double>(total));
    if (u01(rng) < std::sqrt(ratio) + ratio) tokens.push_back(r);
  }
  std::vector<double> weights(vocab);
  for (uint32_t r = 0; r < vocab; ++r)
    weights[r] = std::pow(static_cast<double>(counts[order[r]]), 0.75);
  std::discrete_distribution<uint32_t> noise(weights.begin(), weights.end());
  const int K = 5;
  const size_t n = tokens.size();
  std::vector<uint8_t> windows(n);
  for (auto& w : windows) w = static_cast<uint8_t>(1 + rng() % 5);
  std::vector<uint32_t> negatives(n * K), pool(1024);
  for (size_t s = 0; s < n; s += 2048) {
    for (auto& p : pool) p = noise(rng);
    for (size_t j = s; j < std::min(n, s + 2048); ++j) {
      for (int k = 0; k < K; ++k) {
        negatives[j * K + k] = (j % 2) ? negatives[(j - 1) * K + k] : pool[rng() % pool.size()];
      }
    }
  }
  if (resident) {
    for (auto& t : tokens) t %= 1024;
    for (auto& t : negatives) t %= 1024;
  }
  const int dim = 100;
  const size_t stride = PaddedStride(dim);
  AlignedFloats input(static_cast<size_t>(vocab) * stride),
      output(static_cast<size_t>(vocab) * stride);
  std::uniform_real_distribution<float> init(-0.005f, 0.005f);
  for (size_t r = 0; r < vocab; ++r) {
    for (int j = 0; j < dim; ++j) {
      input[r * stride + j] = init(rng);
      output[r * stride + j] = init(rng);
    }
  }
  ModelRows rows;
  rows.input = input.data();
  rows.output = output.data();
  rows.stride = stride;
  rows.dim = dim;
  std::unique_ptr<SgnsKernel> kernels[2] = {internal::MakeKernelA(), internal::MakeKernelB()};
  std::vector<double> ns[2], ratios;
  for (int rep = 0; rep < reps; ++rep) {
    double rep_ns[2];
    for (int o = 0; o < 2; ++o) {
      const int v = (rep % 2) ? 1 - o : o;  // A first on even reps, B first on odd ones
      const auto t0 = std::chrono::steady_clock::now();
      for (size_t s = 0; s + 2048 <= n; s += 2048) {
        uint32_t offsets[4] = {0, 1000, 2000, 2048};
        MicroBatch b;
        b.tokens = tokens.data() + s;
        b.sentence_offsets = offsets;
        b.num_sentences = 3;
        b.windows = windows.data() + s;
        b.negatives = negatives.data() + s * K;
        b.negative = K;
        if (cbow) {
          kernels[v]->Cbow(rows, b, 0.05f, nullptr);
        } else {
          kernels[v]->SkipGram(rows, b, 0.01f, nullptr);
        }
      }
      rep_ns[v] = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() /
                  static_cast<double>(n) * 1e9;
      ns[v].push_back(rep_ns[v]);
    }
    ratios.push_back(rep_ns[1] / rep_ns[0]);
  }
  std::printf(
      "%s, kept tokens %zu%s: A %.1f ns, B %.1f ns a kept token (medians of %d); B/A %.4f\n",
      cbow ? "cbow" : "skip-gram", n, resident ? " (resident rows)" : "", Median(ns[0]),
      Median(ns[1]), reps, Median(ratios));
  return 0;
}
