// Batch SGNS / CBOW training on a CUDA device (`streamvec train --device cuda`): the corpus and
// both tables go to the device once, every epoch's subsampling, window radii and negatives are
// drawn there and the HogBatch kernels of cuda_sgns.h train a warp per sentence (BlazingText's
// layout, Gupta and Khare 2017); the trained tables come back at the end.
//
// The options mean what they mean for BatchTrainer (word2vec.c's semantics: random window
// shrink, subsampling, count^ns_exponent negatives shared by negative_share consecutive
// positions, alpha decaying linearly to min_alpha), with these differences: the draws come from
// the device's counter-based hash, not the CPU threads' Rng (a run is reproducible for a seed on
// one device, but Hogwild between thousands of warps makes it not bit-exact); negative_pool,
// threads, replica_* and isa do not apply (the noise table stays in the GPU's L2); the learning
// rate decays per sentence.
#ifndef STREAMVEC_TRAINER_CUDA_BATCH_TRAINER_H_
#define STREAMVEC_TRAINER_CUDA_BATCH_TRAINER_H_

#include <functional>

#include "streamvec/base/status.h"
#include "streamvec/kernels/sgns_kernel.h"
#include "streamvec/trainer/batch_trainer.h"
#include "streamvec/trainer/corpus.h"

namespace streamvec {

// Trains `rows` (host tables of corpus.vocab.size() rows, initialised as BatchTrainer does) on
// CUDA device `ordinal` for options.epochs, and copies the trained input and output tables back
// into them. `progress` (may be empty) is called on this thread about every progress_interval_s
// seconds (at chunk ends: cuda_sgns.h) and once at the end. Errors: FailedPrecondition naming
// the device's problem (no device, old driver, not enough device memory: how many words fit);
// Internal naming a CUDA error.
StatusOr<TrainSummary> TrainBatchOnCuda(const Corpus& corpus, const TrainOptions& options,
                                        int ordinal, const ModelRows& rows,
                                        const std::function<void(const TrainProgress&)>& progress,
                                        double progress_interval_s = 0.25);

}  // namespace streamvec

#endif  // STREAMVEC_TRAINER_CUDA_BATCH_TRAINER_H_
