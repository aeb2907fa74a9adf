#include "char_flags.h"

namespace streamvec::app {

void AddCharModelFlags(CLI::App* cmd, bool* distill, CharDistillOptions* o) {
  cmd->add_flag("--char-distill", *distill,
                "Train a character LSTM beside SGNS to reproduce its vectors (MIMICK): snapshots "
                "then carry it and `serve` answers words outside the vocabulary from it");
  cmd->add_option("--char-dim", o->model.char_dim, "Character model: character embedding size")
      ->capture_default_str();
  cmd->add_option("--char-hidden", o->model.hidden,
                  "Character model: LSTM hidden size per direction")
      ->capture_default_str();
  cmd->add_flag("--char-bidirectional,!--no-char-bidirectional", o->model.bidirectional,
                "Character model: read the word backward too (default on)");
  cmd->add_option("--max-word-chars", o->model.max_word_chars,
                  "Character model: code points read per word; longer words are cut")
      ->capture_default_str();
  cmd->add_option("--char-distill-every", o->every_words,
                  "Character model: words seen between distillation steps")
      ->capture_default_str();
  cmd->add_option("--char-distill-batch", o->batch_types,
                  "Character model: word types per distillation step (drawn ~ count^0.5)")
      ->capture_default_str();
  cmd->add_option("--char-lr", o->model.learning_rate, "Character model: Adam step size")
      ->capture_default_str();
}

}  // namespace streamvec::app
