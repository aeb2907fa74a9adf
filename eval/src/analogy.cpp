// 3CosAdd analogy evaluation, as gensim 4.2's KeyedVectors.evaluate_word_analogies (see
// analogy.h). All in-vocabulary questions are scored at once: Q x N = (Q x dim) * (N x dim)^T in
// blocks, keeping each question's best few rows; then gensim's answer rule picks the prediction.
#include "streamvec/eval/analogy.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <optional>
#include <thread>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include "streamvec/base/cpu_features.h"
#include "streamvec/eval/vocabulary.h"
#include "text_lines.h"

namespace streamvec::eval {
namespace {

// gensim asks most_similar for topn=5 and drops the 3 question words from the top 5 + 3.
constexpr int kAnswers = 5;
constexpr int kCandidates = kAnswers + 3;
// Blocking: a micro-tile is kTileQueries questions x kPanelRows rows, accumulated in registers;
// kChunkPanels panels of rows (kChunkPanels * kPanelRows * dim floats) stay in L2 while
// kBlockQueries questions pass over them.
constexpr int kPanelRows = 16;
constexpr int kTileQueries = 4;
constexpr size_t kChunkPanels = 16;
constexpr size_t kBlockQueries = 128;

struct Question {
  uint32_t a, b, c;   // rows of the question words (the earliest row of their key)
  uint32_t expected;  // row of the expected answer's key
  uint32_t section;
};

// The kCandidates best (score, row) pairs seen, best first; ties keep the lower row.
struct Candidates {
  float score[kCandidates];
  uint32_t row[kCandidates];
  int size = 0;

  // Scores must beat this to enter: -inf until full. NaN never enters.
  float Threshold() const { return size < kCandidates ? -INFINITY : score[kCandidates - 1]; }

  void Offer(float s, uint32_t r) {
    if (size == kCandidates && !(s > score[kCandidates - 1])) return;
    int i = size < kCandidates ? size++ : kCandidates - 1;
    while (i > 0 && s > score[i - 1]) {
      score[i] = score[i - 1];
      row[i] = row[i - 1];
      --i;
    }
    score[i] = s;
    row[i] = r;
  }
};

// Eight floats: one AVX register, or two SSE registers in the portable build.
typedef float Vec8 __attribute__((vector_size(32)));
typedef int32_t Vec8i __attribute__((vector_size(32)));
static_assert(kPanelRows == 16 && kTileQueries == 4, "the tile kernels are written for 4 x 16");

// The tile kernel: out[q * (num_panels * 16) + n] = dot(queries[q], row n) / norms[n] for
// kTileQueries questions and `num_panels` packed panels (panel p: dim x 16 floats, row
// n = p * 16 + j at [d * 16 + j]); hits[q * num_panels + p] = whether a score of panel p beats
// thresholds[q], so the caller reads only those. Dot products run over d in order in float32.
using ScoreTileFn = void (*)(const float* panels, const float* norms, size_t num_panels,
                             const float* queries, int dim, const float* thresholds, float* out,
                             uint8_t* hits);

// Portable twin (any x86-64 or other CPU): separate multiply and add.
void ScoreTilePortable(const float* __restrict panels, const float* __restrict norms,
                       size_t num_panels, const float* __restrict queries, int dim,
                       const float* __restrict thresholds, float* __restrict out,
                       uint8_t* __restrict hits) {
  const size_t width = num_panels * kPanelRows;
  const float* q0 = queries;
  const float* q1 = queries + dim;
  const float* q2 = queries + 2 * static_cast<size_t>(dim);
  const float* q3 = queries + 3 * static_cast<size_t>(dim);
  for (size_t p = 0; p < num_panels; ++p) {
    const float* panel = panels + p * static_cast<size_t>(dim) * kPanelRows;
    Vec8 a00 = {}, a01 = {}, a10 = {}, a11 = {}, a20 = {}, a21 = {}, a30 = {}, a31 = {};
    for (int d = 0; d < dim; ++d) {
      Vec8 v0, v1;
      std::memcpy(&v0, panel + static_cast<size_t>(d) * kPanelRows, sizeof(Vec8));
      std::memcpy(&v1, panel + static_cast<size_t>(d) * kPanelRows + 8, sizeof(Vec8));
      a00 += v0 * q0[d];
      a01 += v1 * q0[d];
      a10 += v0 * q1[d];
      a11 += v1 * q1[d];
      a20 += v0 * q2[d];
      a21 += v1 * q2[d];
      a30 += v0 * q3[d];
      a31 += v1 * q3[d];
    }
    Vec8 n0, n1;
    std::memcpy(&n0, norms + p * kPanelRows, sizeof(Vec8));
    std::memcpy(&n1, norms + p * kPanelRows + 8, sizeof(Vec8));
    // gensim: dot(vectors, mean) / norms, in float32.
    const Vec8 results[kTileQueries][2] = {
        {a00 / n0, a01 / n1}, {a10 / n0, a11 / n1}, {a20 / n0, a21 / n1}, {a30 / n0, a31 / n1}};
    for (int q = 0; q < kTileQueries; ++q) {
      std::memcpy(out + q * width + p * kPanelRows, &results[q][0], sizeof(Vec8));
      std::memcpy(out + q * width + p * kPanelRows + 8, &results[q][1], sizeof(Vec8));
      const Vec8i above = (results[q][0] > thresholds[q]) | (results[q][1] > thresholds[q]);
      uint64_t lanes[4];
      std::memcpy(lanes, &above, sizeof(lanes));
      hits[q * num_panels + p] = (lanes[0] | lanes[1] | lanes[2] | lanes[3]) != 0;
    }
  }
}

#if defined(__x86_64__)
// AVX2 + FMA twin: fused multiply-add (as OpenBLAS's sgemv under gensim uses on such CPUs), so
// its last bits can differ from the portable twin's.
__attribute__((target("avx2,fma"))) void ScoreTileAvx2(
    const float* __restrict panels, const float* __restrict norms, size_t num_panels,
    const float* __restrict queries, int dim, const float* __restrict thresholds,
    float* __restrict out, uint8_t* __restrict hits) {
  const size_t width = num_panels * kPanelRows;
  const float* q0 = queries;
  const float* q1 = queries + dim;
  const float* q2 = queries + 2 * static_cast<size_t>(dim);
  const float* q3 = queries + 3 * static_cast<size_t>(dim);
  for (size_t p = 0; p < num_panels; ++p) {
    const float* panel = panels + p * static_cast<size_t>(dim) * kPanelRows;
    __m256 a00 = _mm256_setzero_ps(), a01 = a00, a10 = a00, a11 = a00, a20 = a00, a21 = a00,
           a30 = a00, a31 = a00;
    for (int d = 0; d < dim; ++d) {
      const __m256 v0 = _mm256_loadu_ps(panel + static_cast<size_t>(d) * kPanelRows);
      const __m256 v1 = _mm256_loadu_ps(panel + static_cast<size_t>(d) * kPanelRows + 8);
      __m256 m = _mm256_broadcast_ss(q0 + d);
      a00 = _mm256_fmadd_ps(v0, m, a00);
      a01 = _mm256_fmadd_ps(v1, m, a01);
      m = _mm256_broadcast_ss(q1 + d);
      a10 = _mm256_fmadd_ps(v0, m, a10);
      a11 = _mm256_fmadd_ps(v1, m, a11);
      m = _mm256_broadcast_ss(q2 + d);
      a20 = _mm256_fmadd_ps(v0, m, a20);
      a21 = _mm256_fmadd_ps(v1, m, a21);
      m = _mm256_broadcast_ss(q3 + d);
      a30 = _mm256_fmadd_ps(v0, m, a30);
      a31 = _mm256_fmadd_ps(v1, m, a31);
    }
    const __m256 n0 = _mm256_loadu_ps(norms + p * kPanelRows);
    const __m256 n1 = _mm256_loadu_ps(norms + p * kPanelRows + 8);
    const __m256 results[kTileQueries][2] = {{_mm256_div_ps(a00, n0), _mm256_div_ps(a01, n1)},
                                             {_mm256_div_ps(a10, n0), _mm256_div_ps(a11, n1)},
                                             {_mm256_div_ps(a20, n0), _mm256_div_ps(a21, n1)},
                                             {_mm256_div_ps(a30, n0), _mm256_div_ps(a31, n1)}};
    for (int q = 0; q < kTileQueries; ++q) {
      _mm256_storeu_ps(out + q * width + p * kPanelRows, results[q][0]);
      _mm256_storeu_ps(out + q * width + p * kPanelRows + 8, results[q][1]);
      const __m256 t = _mm256_set1_ps(thresholds[q]);
      const __m256 above = _mm256_or_ps(_mm256_cmp_ps(results[q][0], t, _CMP_GT_OQ),
                                        _mm256_cmp_ps(results[q][1], t, _CMP_GT_OQ));
      hits[q * num_panels + p] = _mm256_movemask_ps(above) != 0;
    }
  }
}
#endif

ScoreTileFn ChooseScoreTile() {
#if defined(__x86_64__)
  if (IsaSupported(Isa::kAvx2)) return ScoreTileAvx2;  // AVX2 with FMA, OS support checked
#endif
  return ScoreTilePortable;
}

// float32 L2 norm (accumulated in double, rounded once).
float Norm(const float* v, int dim) {
  double sum = 0;
  for (int i = 0; i < dim; ++i) sum += static_cast<double>(v[i]) * v[i];
  return static_cast<float>(std::sqrt(sum));
}

// gensim's most_similar(positive=[b, c], negative=[a]) query: the mean of the unit vectors
// weighted +1, +1, -1, divided by the total weight 3, scaled to unit length, all in float32.
void QueryVector(const Embeddings& e, const std::vector<float>& norms, const Question& q,
                 float* out) {
  const int dim = e.dim;
  const float* a = e.row(q.a);
  const float* b = e.row(q.b);
  const float* c = e.row(q.c);
  for (int d = 0; d < dim; ++d) {
    float m = 0.0f;
    m += b[d] / norms[q.b];
    m += c[d] / norms[q.c];
    m += -(a[d] / norms[q.a]);
    out[d] = m / 3.0f;
  }
  const float len = Norm(out, dim);
  if (len > 0) {
    for (int d = 0; d < dim; ++d) out[d] /= len;
  }
}

struct ScoringTable {
  int dim = 0;
  size_t rows = 0;            // N
  std::vector<float> panels;  // ceil(N / 16) panels of dim x 16, zero padded
  std::vector<float> norms;   // N, padded with 1
  ScoreTileFn score_tile = ScoreTilePortable;
};

ScoringTable PackRows(const Embeddings& e, size_t rows, const std::vector<float>& norms,
                      bool use_simd) {
  ScoringTable t;
  t.dim = e.dim;
  t.rows = rows;
  t.score_tile = use_simd ? ChooseScoreTile() : ScoreTilePortable;
  const size_t num_panels = (rows + kPanelRows - 1) / kPanelRows;
  t.panels.assign(num_panels * kPanelRows * static_cast<size_t>(e.dim), 0.0f);
  t.norms.assign(num_panels * kPanelRows, 1.0f);
  for (size_t n = 0; n < rows; ++n) {
    const size_t p = n / kPanelRows, j = n % kPanelRows;
    float* panel = t.panels.data() + p * static_cast<size_t>(e.dim) * kPanelRows;
    const float* row = e.row(n);
    for (int d = 0; d < e.dim; ++d) panel[static_cast<size_t>(d) * kPanelRows + j] = row[d];
    // A zero row would give 0/0; gensim's NaN never wins either, so score it 0.
    t.norms[n] = norms[n] > 0 ? norms[n] : 1.0f;
  }
  return t;
}

// Best kCandidates rows for questions [begin, end) (queries: one dim-vector per question).
void ScoreQuestions(const ScoringTable& t, const std::vector<float>& queries, size_t begin,
                    size_t end, std::vector<Candidates>* best) {
  const int dim = t.dim;
  const size_t num_panels = (t.rows + kPanelRows - 1) / kPanelRows;
  const ScoreTileFn score_tile = t.score_tile;
  std::vector<float> tile(kTileQueries * static_cast<size_t>(dim));
  std::vector<float> scores(kTileQueries * kChunkPanels * kPanelRows);
  std::vector<uint8_t> hits(kTileQueries * kChunkPanels);
  for (size_t block = begin; block < end; block += kBlockQueries) {
    const size_t block_end = std::min(end, block + kBlockQueries);
    for (size_t p0 = 0; p0 < num_panels; p0 += kChunkPanels) {
      const size_t panels = std::min(kChunkPanels, num_panels - p0);
      const size_t width = panels * kPanelRows;
      const size_t row0 = p0 * kPanelRows;
      const size_t valid = std::min(width, t.rows - row0);
      for (size_t q0 = block; q0 < block_end; q0 += kTileQueries) {
        const size_t nq = std::min<size_t>(kTileQueries, block_end - q0);
        std::fill(tile.begin(), tile.end(), 0.0f);
        std::copy(queries.begin() + q0 * dim, queries.begin() + (q0 + nq) * dim, tile.begin());
        float thresholds[kTileQueries];
        for (size_t q = 0; q < kTileQueries; ++q) {
          thresholds[q] = q < nq ? (*best)[q0 + q].Threshold() : INFINITY;
        }
        score_tile(t.panels.data() + p0 * static_cast<size_t>(dim) * kPanelRows,
                   t.norms.data() + row0, panels, tile.data(), dim, thresholds, scores.data(),
                   hits.data());
        // The thresholds only rise while a tile is scanned, so panels without a hit are skipped.
        for (size_t q = 0; q < nq; ++q) {
          Candidates& c = (*best)[q0 + q];
          const float* s = scores.data() + q * width;
          for (size_t p = 0; p < panels; ++p) {
            if (!hits[q * panels + p]) continue;
            const size_t stop = std::min(valid, (p + 1) * kPanelRows);
            for (size_t j = p * kPanelRows; j < stop; ++j) {
              if (s[j] > c.Threshold()) c.Offer(s[j], static_cast<uint32_t>(row0 + j));
            }
          }
        }
      }
    }
  }
}

}  // namespace

StatusOr<AnalogyResult> EvaluateAnalogies(const Embeddings& embeddings, const std::string& path,
                                          const AnalogyOptions& options) {
  StatusOr<std::string> data = internal::ReadWholeFile(path, "analogy file");
  if (!data.ok()) return data.status();
  const EvalVocabulary vocab(embeddings, options.restrict_vocab, options.case_insensitive);
  // Key identity of each searched row: the earliest row with the same (folded) key.
  std::vector<uint32_t> key_row(vocab.size());
  for (size_t n = 0; n < vocab.size(); ++n)
    key_row[n] = static_cast<uint32_t>(*vocab.Find(vocab.RowKey(n)));

  AnalogyResult result;
  result.file = path;
  result.restrict_vocab = options.restrict_vocab;
  std::vector<Question> questions;
  const std::vector<std::string_view> lines = internal::SplitLines(*data);
  for (size_t line_no = 0; line_no < lines.size(); ++line_no) {
    const std::string_view line = lines[line_no];
    if (line.substr(0, 2) == ": ") {
      // gensim: line.lstrip(': ').strip()
      std::string_view name = line.substr(line.find_first_not_of(": ") == std::string_view::npos
                                              ? line.size()
                                              : line.find_first_not_of(": "));
      result.sections.push_back(AnalogySection{std::string(internal::StripAscii(name))});
      continue;
    }
    if (result.sections.empty()) {
      return Status::InvalidArgument("analogy file " + path + ": line " +
                                     std::to_string(line_no + 1) +
                                     ": text before the first \": section\" line");
    }
    std::string_view words[4];
    int count = 0;
    for (size_t i = 0; i < line.size();) {
      while (i < line.size() && std::isspace(static_cast<unsigned char>(line[i]))) ++i;
      if (i == line.size()) break;
      size_t j = i;
      while (j < line.size() && !std::isspace(static_cast<unsigned char>(line[j]))) ++j;
      if (count < 4) words[count] = line.substr(i, j - i);
      ++count;
      i = j;
    }
    if (count != 4) continue;  // gensim skips invalid lines
    AnalogySection& section = result.sections.back();
    ++result.questions;
    std::optional<size_t> rows[4];
    bool known = true;
    for (int w = 0; w < 4; ++w) {
      rows[w] = vocab.Find(vocab.Key(words[w]));
      known = known && rows[w].has_value();
    }
    if (!known) {
      ++result.oov;
      ++section.oov;
      continue;
    }
    questions.push_back(Question{static_cast<uint32_t>(*rows[0]), static_cast<uint32_t>(*rows[1]),
                                 static_cast<uint32_t>(*rows[2]), static_cast<uint32_t>(*rows[3]),
                                 static_cast<uint32_t>(result.sections.size() - 1)});
  }
  if (result.questions == 0) {
    return Status::InvalidArgument("analogy file " + path +
                                   " holds no question (expected \": section\" lines followed "
                                   "by \"a b c d\" lines)");
  }

  // Norms of the searched rows; unit query vectors.
  const size_t n_rows = vocab.size();
  const int dim = embeddings.dim;
  std::vector<float> norms(n_rows);
  for (size_t n = 0; n < n_rows; ++n) norms[n] = Norm(embeddings.row(n), dim);
  std::vector<float> queries(questions.size() * static_cast<size_t>(dim));
  for (size_t i = 0; i < questions.size(); ++i) {
    QueryVector(embeddings, norms, questions[i], queries.data() + i * dim);
  }
  const ScoringTable table = PackRows(embeddings, n_rows, norms, options.simd);

  std::vector<Candidates> best(questions.size());
  const size_t threads = std::clamp<size_t>(static_cast<size_t>(std::max(1, options.threads)), 1,
                                            std::max<size_t>(1, questions.size() / kBlockQueries));
  std::vector<std::thread> pool;
  const size_t per_thread = (questions.size() + threads - 1) / threads;
  for (size_t t = 1; t < threads; ++t) {
    const size_t begin = std::min(questions.size(), t * per_thread);
    const size_t end = std::min(questions.size(), begin + per_thread);
    pool.emplace_back(ScoreQuestions, std::cref(table), std::cref(queries), begin, end, &best);
  }
  ScoreQuestions(table, queries, 0, std::min(questions.size(), per_thread), &best);
  for (std::thread& th : pool) th.join();

  for (size_t i = 0; i < questions.size(); ++i) {
    const Question& q = questions[i];
    // gensim: most_similar drops the rows of a, b, c from its top 5 + 3 and keeps 5; the
    // prediction is the first of those whose key is not a question word (or the last one).
    std::optional<uint32_t> predicted;
    int kept = 0;
    for (int r = 0; r < best[i].size && kept < kAnswers; ++r) {
      const uint32_t row = best[i].row[r];
      if (row == q.a || row == q.b || row == q.c) continue;
      ++kept;
      predicted = key_row[row];
      if (*predicted != q.a && *predicted != q.b && *predicted != q.c) break;
    }
    AnalogySection& section = result.sections[q.section];
    ++section.total;
    ++result.total;
    if (predicted && *predicted == q.expected) {
      ++section.correct;
      ++result.correct;
    }
  }
  return result;
}

}  // namespace streamvec::eval
