// The character model's flags (docs/char-model.md), shared by `train` (--stream, --brokers) and
// `run`.
#ifndef STREAMVEC_APP_CHAR_FLAGS_H_
#define STREAMVEC_APP_CHAR_FLAGS_H_

#include <CLI/CLI.hpp>
#include <string>

#include "streamvec/trainer/char_distiller.h"
#include "streamvec/trainer/char_sgns.h"

namespace streamvec::app {

// --char-distill, --char-dim, --char-hidden, --char-bidirectional / --no-char-bidirectional,
// --max-word-chars, --char-distill-every, --char-distill-batch, --char-lr, with --char-distill
// --char-ngram-buckets and --char-ngram-lr, and for --model char-lstm --char-mode (into *mode:
// "sum" or "replace") and --char-batch-words.
void AddCharModelFlags(CLI::App* cmd, bool* distill, CharDistillOptions* options, std::string* mode,
                       uint64_t* batch_words);

// Defaults that depend on other flags; a flag given explicitly always wins. Call from the
// command's callback, after parsing.
// - --model char-lstm reads words forward only unless --char-bidirectional or
//   --no-char-bidirectional was given (--char-distill keeps MIMICK's bidirectional default): on
//   the 100M corpus the forward-only model scored the same on words outside the vocabulary, in
//   60% of the time (docs/char-model.md).
// - --char-ngram-buckets > 0 (an n-gram bag) distils far more, with a small forward LSTM:
//   --char-distill-every 50000, --char-distill-batch 1024, --char-hidden 8, --char-dim 8,
//   --no-char-bidirectional. At MIMICK's defaults the bag does not learn in a pass (8-16 steps);
//   with these it beat fastText's n-grams on the 100M corpus at 0.59x plain SGNS's words/s, and
//   MIMICK's LSTM shape scored the same at three times the cost (docs/char-model.md, "With the
//   n-gram bag").
void ApplyCharModelDefaults(const CLI::App& cmd, const std::string& model,
                            CharDistillOptions* options);

// The --model char-lstm settings from the flags: *char_lstm = (model == "char-lstm"), out's mode
// and batch_words (its model is left as it is). InvalidArgument for --char-mode or
// --char-batch-words without --model char-lstm (`given`), --char-distill with it (the model is
// already a character model), or a batch of 0 words.
Status CharLstmFromFlags(const std::string& model, bool distill, const std::string& mode,
                         uint64_t batch_words, bool given, bool* char_lstm, CharSgnsOptions* out);

// The flags above that a resumed state ignores (it keeps its own), for the "ignored on resume"
// warning.
inline constexpr const char* kCharModelFlags[] = {
    "--char-distill",   "--char-dim",           "--char-hidden",        "--char-bidirectional",
    "--max-word-chars", "--char-distill-every", "--char-distill-batch", "--char-lr",
    "--char-mode",      "--char-batch-words",   "--char-ngram-buckets", "--char-ngram-lr"};

}  // namespace streamvec::app

#endif  // STREAMVEC_APP_CHAR_FLAGS_H_
