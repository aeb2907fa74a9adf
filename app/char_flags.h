// The character model's flags (docs/char-model.md), shared by `train` (--stream, --brokers) and
// `run`.
#ifndef STREAMVEC_APP_CHAR_FLAGS_H_
#define STREAMVEC_APP_CHAR_FLAGS_H_

#include <CLI/CLI.hpp>

#include "streamvec/trainer/char_distiller.h"

namespace streamvec::app {

// --char-distill, --char-dim, --char-hidden, --char-bidirectional / --no-char-bidirectional,
// --max-word-chars, --char-distill-every, --char-distill-batch, --char-lr.
void AddCharModelFlags(CLI::App* cmd, bool* distill, CharDistillOptions* options);

// The flags above that a resumed state ignores (it keeps its own), for the "ignored on resume"
// warning.
inline constexpr const char* kCharModelFlags[] = {
    "--char-distill",   "--char-dim",           "--char-hidden",        "--char-bidirectional",
    "--max-word-chars", "--char-distill-every", "--char-distill-batch", "--char-lr"};

}  // namespace streamvec::app

#endif  // STREAMVEC_APP_CHAR_FLAGS_H_
