// The SGNS / CBOW training step behind one interface, with CPU implementations chosen at run
// time (reference, portable SSE2, AVX2+FMA, AVX-512) and room for a CUDA twin.
//
// Algorithm: word2vec skip-gram and CBOW with negative sampling (Mikolov et al. 2013,
// "Efficient Estimation of Word Representations", section 3; "Distributed Representations",
// section 2.2), in the HogBatch form of Ji et al. 2016 ("Parallelizing Word2Vec in Shared and
// Distributed Memory", section 3): for one centre word, its context rows X (B x dim) and the
// targets T = [centre, K negatives] ((K+1) x dim) form one small matrix product; the K negatives
// are shared by the whole window. Gradients of the window are computed from the old T and applied
// to T once per window; context rows are updated in order (a repeated context word sees its own
// earlier update). Tables are shared between threads without locks (Hogwild; Recht et al. 2011):
// races on rows are intended.
#ifndef STREAMVEC_KERNELS_SGNS_KERNEL_H_
#define STREAMVEC_KERNELS_SGNS_KERNEL_H_

#include <cstddef>
#include <cstdint>
#include <memory>

#include "streamvec/base/cpu_features.h"

namespace streamvec {

// Row alignment and padding, in floats: every row starts on a 64-byte boundary and holds a
// multiple of 16 floats; padding floats are zero and stay zero.
constexpr size_t kRowAlignFloats = 16;
inline size_t PaddedStride(int dim) {
  return (static_cast<size_t>(dim) + kRowAlignFloats - 1) / kRowAlignFloats * kRowAlignFloats;
}

// The two SGNS tables, host memory, row-major with padded rows: row w of `input` is
// input[w * stride .. w * stride + dim). Not owned.
struct ModelRows {
  float* input = nullptr;   // word vectors (word2vec's syn0), rows x stride
  float* output = nullptr;  // output / context vectors (word2vec's syn1neg), rows x stride
  size_t stride = 0;        // floats per row, PaddedStride(dim); 64-byte aligned base pointers
  int dim = 0;              // used floats per row
  // Optional replica of the first output rows (the most frequent words: ids are in frequency
  // order), same stride and alignment: row w < output_replica_rows is read and written at
  // output_replica + w * stride instead of in `output`. A caller gives each thread its own
  // replica and merges it into the shared table every few micro-batches (BatchTrainer,
  // TrainOptions::replica_sync); a kernel only sees the addresses. 0 rows: none.
  float* output_replica = nullptr;
  uint32_t output_replica_rows = 0;

  // Row w of the input table.
  float* In(uint32_t w) const { return input + w * stride; }
  // Row w of the output table, where this caller keeps it.
  float* Out(uint32_t w) const {
    return (w < output_replica_rows ? output_replica : output) + w * stride;
  }
};

// Largest supported number of targets per window (1 positive + negatives).
constexpr int kMaxTargets = 64;

// A skip-gram window (or pair) with more distinct context words than this is trained in blocks
// of at most this many (SgnsKernel::SkipGram).
constexpr int kMaxContextBlock = 16;
// The most occurrences of one context word in a window (in a pair: in each of its two windows)
// that count in one row entry, a count kept as float like the gradients it multiplies; further
// occurrences open another entry (SgnsKernel::SkipGram).
constexpr float kMaxOccurrences = 4.0f;

// A micro-batch of sentences, already subsampled, with the random window radii and the negative
// samples drawn by the caller (so a kernel has no RNG and the CPU and CUDA twins see the same
// draws). Host pointers.
struct MicroBatch {
  const uint32_t* tokens = nullptr;            // word ids of all sentences, concatenated
  const uint32_t* sentence_offsets = nullptr;  // num_sentences + 1 offsets into tokens
  int num_sentences = 0;
  const uint8_t* windows = nullptr;     // per token: effective window radius in [1, window]
  const uint32_t* negatives = nullptr;  // per token: `negative` noise word ids
  int negative = 0;                     // K in [0, kMaxTargets)
};

// Optional per-call statistics (loss costs a log per pair, so callers ask for it on a sample).
struct StepStats {
  double loss = 0.0;   // sum over (input, target) terms of -log sigma(+-logit), in nats
  uint64_t pairs = 0;  // number of (input, centre) positive pairs seen
};

enum class TrainModel { kSkipGram, kCbow };

// One training step over a micro-batch. An instance holds scratch buffers: it is not thread-safe;
// create one per training thread. Implementations never allocate per call after construction
// (scratch grows on first use to the largest window seen).
class SgnsKernel {
 public:
  virtual ~SgnsKernel() = default;

  // Skip-gram: for each position i with radius r, every context word c in [i-r, i+r], c != i,
  // is an input row trained to predict the centre tokens[i] against the K shared negatives
  // (word2vec.c orientation: syn0 of the context word, syn1neg of the centre and negatives).
  // A negative equal to the centre word is skipped. A word that occurs n times in the window is
  // one input row whose gradient (and loss) counts n times, all computed from the rows' values
  // at the start of the window: the window is one matrix product, as in HogBatch (Ji et al.
  // 2016, section 3), where word2vec.c would update the row once per occurrence; the two differ
  // by O(lr^2).
  // Two consecutive positions i, i + 1 of one sentence with the same K >= 1 negatives (one
  // draw: TrainOptions::negative_share) and K + 2 distinct targets [centre i, centre i + 1,
  // negatives] are one window (context combining: Rengasamy et al. 2017, "Optimizing Word2Vec
  // Performance on Multicore Systems", IA3 2017): the distinct words of the union of their
  // two windows against the K + 2 targets, one matrix product from the start values. A word's
  // gradient against centre i counts its occurrences in the window of i, against centre i + 1
  // those in the window of i + 1 (either may be 0), against a negative both: every (context,
  // centre) pair of the two windows and its K negatives, as two windows in a row would train
  // them, but a shared context word meets the negatives once with the summed count. The
  // difference from two windows in a row is again O(lr^2).
  // A window or pair with more than kMaxContextBlock distinct context words is trained as
  // consecutive blocks of at most kMaxContextBlock of them (in order of first occurrence in the
  // sentence), each block one matrix product from the values the previous block left: a
  // target row's update summed over a wide window overshoots (with --window 100 and 63
  // negatives training diverged to NaN), where word2vec.c, updating pair by pair, does not. For
  // the same reason one entry holds at most kMaxOccurrences occurrences of a word (in a pair,
  // in each of the two windows); further occurrences open a new entry for the same row, trained
  // after the earlier ones in order (a word 30 times in a window of radius 255 made the
  // training grow without bound).
  // lr: learning rate (word2vec's alpha). stats: nullptr, or accumulates loss and pairs (one
  // pair per occurrence).
  virtual void SkipGram(const ModelRows& model, const MicroBatch& batch, float lr,
                        StepStats* stats) = 0;

  // CBOW: the mean of the context rows (word2vec's cbow_mean) predicts the centre; the error is
  // added in full to each context row (as word2vec.c and gensim with cbow_mean=1).
  virtual void Cbow(const ModelRows& model, const MicroBatch& batch, float lr,
                    StepStats* stats) = 0;

  virtual const char* name() const = 0;
};

// The scalar reference: plain loops, the oracle every accelerated kernel is tested against.
std::unique_ptr<SgnsKernel> MakeReferenceKernel();

// The CPU kernel for `isa`; the caller checks IsaSupported(isa) (DetectBestIsa() is always
// supported). Returns nullptr for an ISA this build does not contain.
std::unique_ptr<SgnsKernel> MakeCpuKernel(Isa isa);

}  // namespace streamvec

#endif  // STREAMVEC_KERNELS_SGNS_KERNEL_H_
