// NormalizeText's throughput on a text file's lines (paragraphs): MB/s of the best of five passes.
// Built and run by bench/tokenizer/normalize_bench.sh against one build's tokenizer library.
#include <chrono>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>
#include "streamvec/tokenizer/normalize.h"
int main(int argc, char** argv) {
  std::string all;
  for (int i = 1; i < argc; ++i) { std::ifstream f(argv[i]); std::stringstream ss; ss << f.rdbuf(); all += ss.str(); }
  std::vector<std::string> paras; size_t p = 0;
  while (p < all.size()) { size_t e = all.find('\n', p); if (e == std::string::npos) e = all.size(); paras.push_back(all.substr(p, e - p + 1)); p = e + 1; }
  size_t total = 0; double best = 1e9;
  for (int rep = 0; rep < 5; ++rep) {
    auto t0 = std::chrono::steady_clock::now();
    for (auto& s : paras) total += streamvec::NormalizeText(s).size();
    double dt = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (dt < best) best = dt;
  }
  std::printf("%.0f MB/s (%zu paragraphs, %zu bytes) %zu\n", all.size() / best / 1e6, paras.size(), all.size(), total % 7);
}
