#include "char_flags.h"

namespace streamvec::app {

void AddCharModelFlags(CLI::App* cmd, bool* distill, CharDistillOptions* o, std::string* mode,
                       uint64_t* batch_words) {
  cmd->add_flag("--char-distill", *distill,
                "Train a character LSTM beside SGNS to reproduce its vectors (MIMICK): snapshots "
                "then carry it and `serve` answers words outside the vocabulary from it");
  cmd->add_option("--char-dim", o->model.char_dim, "Character model: character embedding size")
      ->capture_default_str();
  cmd->add_option("--char-hidden", o->model.hidden,
                  "Character model: LSTM hidden size per direction")
      ->capture_default_str();
  cmd->add_flag("--char-bidirectional,!--no-char-bidirectional", o->model.bidirectional,
                "Character model: read the word backward too (default on with --char-distill, "
                "off with --model char-lstm)");
  cmd->add_option("--max-word-chars", o->model.max_word_chars,
                  "Character model: code points read per word; longer words are cut")
      ->capture_default_str();
  cmd->add_option("--char-distill-every", o->every_words,
                  "Character model: words seen between distillation steps (at most 4 steps per "
                  "micro-batch)")
      ->capture_default_str();
  cmd->add_option("--char-distill-batch", o->batch_types,
                  "Character model: word types per distillation step (drawn ~ count^0.5)")
      ->capture_default_str();
  cmd->add_option("--char-lr", o->model.learning_rate, "Character model: Adam step size")
      ->capture_default_str();
  cmd->add_option("--char-ngram-buckets", o->model.ngram_buckets,
                  "--char-distill: rows of a bag of hashed character n-grams (3 to 6 code "
                  "points, as fastText's) whose mean is added to the LSTM's vector, distilled "
                  "with it (Bag of Subwords); 0: none. With a bag the defaults become "
                  "--char-distill-every 50000 --char-distill-batch 1024 --char-hidden 8 "
                  "--char-dim 8 --no-char-bidirectional (flags given win). Snapshots grow by 4 x "
                  "buckets x --dim bytes")
      ->needs("--char-distill")
      ->capture_default_str();
  cmd->add_option("--char-ngram-lr", o->model.ngram_rate,
                  "--char-distill: Adagrad step size of the n-gram bag's rows")
      ->needs("--char-ngram-buckets")
      ->capture_default_str();
  cmd->add_option("--char-mode", *mode,
                  "--model char-lstm: a word's input vector is its table row plus the character "
                  "model's vector (sum, as fastText sums n-grams) or the character model's alone "
                  "(replace)")
      ->check(CLI::IsMember({"sum", "replace"}))
      ->capture_default_str();
  cmd->add_option("--char-batch-words", *batch_words,
                  "--model char-lstm: words per character model update (each distinct word of "
                  "a batch is encoded once)")
      ->capture_default_str();
}

void ApplyCharModelDefaults(const CLI::App& cmd, const std::string& model,
                            CharDistillOptions* options) {
  if (model == "char-lstm" && cmd.count("--char-bidirectional") == 0) {
    options->model.bidirectional = false;
  }
  if (options->model.ngram_buckets > 0) {
    auto unless_given = [&cmd](const char* flag, auto* value, auto bag_default) {
      if (cmd.count(flag) == 0) *value = bag_default;
    };
    unless_given("--char-distill-every", &options->every_words, uint64_t{50000});
    unless_given("--char-distill-batch", &options->batch_types, 1024);
    unless_given("--char-hidden", &options->model.hidden, 8);
    unless_given("--char-dim", &options->model.char_dim, 8);
    unless_given("--char-bidirectional", &options->model.bidirectional, false);
  }
}

Status CharLstmFromFlags(const std::string& model, bool distill, const std::string& mode,
                         uint64_t batch_words, bool given, bool* char_lstm, CharSgnsOptions* out) {
  *char_lstm = model == "char-lstm";
  if (!ParseCharMode(mode, &out->mode)) {
    return Status::InvalidArgument("--char-mode must be sum or replace, not '" + mode + "'");
  }
  if (given && !*char_lstm) {
    return Status::InvalidArgument("--char-mode and --char-batch-words need --model char-lstm");
  }
  if (batch_words < 1) return Status::InvalidArgument("--char-batch-words must be >= 1");
  out->batch_words = batch_words;
  if (distill && *char_lstm) {
    return Status::InvalidArgument(
        "--char-distill is for --model sgns (with --model char-lstm the character model is "
        "trained by SGNS itself)");
  }
  return Status::Ok();
}

}  // namespace streamvec::app
