// libFuzzer target: the word2vec vectors reader (ParseWord2Vec, what ReadWord2Vec runs on a
// file's bytes) on arbitrary bytes; built twice, seeded with text files (fuzz_word2vec_text) and
// with binary files (fuzz_word2vec_binary). It must never crash or allocate beyond the input's
// size; every rejection names its reason; an accepted table is rows x dim floats of non-empty
// words; and, when its words can be stored, writing it as text and reading that file back gives
// the same words and the same floats (NaN stays NaN).
#include <unistd.h>

#include <bit>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

#include "streamvec/store/word2vec_format.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  streamvec::VectorFormat detected;
  streamvec::StatusOr<streamvec::Embeddings> e =
      streamvec::ParseWord2Vec(bytes, "input", &detected);
  if (!e.ok()) {
    if (e.status().message().empty()) std::abort();  // every rejection names its reason
    return 0;
  }
  if (e->dim <= 0 || e->vectors.size() != e->rows() * static_cast<size_t>(e->dim)) std::abort();
  if (e->vectors.size() * 2 > size) std::abort();  // each value took 2 bytes of input at least
  for (const std::string& w : e->words) {
    if (w.empty()) std::abort();
  }
  static const std::string path = [] {
    const char* dir = std::getenv("TMPDIR");
    return std::string(dir != nullptr ? dir : "/tmp") + "/fuzz_word2vec." +
           std::to_string(getpid()) + ".txt";
  }();
  if (!streamvec::WriteWord2Vec(path, *e, streamvec::VectorFormat::kText).ok()) {
    return 0;  // words holding whitespace (a binary row's word may): the format cannot store them
  }
  streamvec::StatusOr<streamvec::Embeddings> back = streamvec::ReadWord2Vec(path, &detected);
  std::remove(path.c_str());
  if (!back.ok() || detected != streamvec::VectorFormat::kText || back->dim != e->dim ||
      back->words != e->words || back->vectors.size() != e->vectors.size()) {
    std::abort();
  }
  for (size_t i = 0; i < e->vectors.size(); ++i) {
    const float a = e->vectors.data()[i], b = back->vectors.data()[i];
    if (std::isnan(a) ? !std::isnan(b) : std::bit_cast<uint32_t>(a) != std::bit_cast<uint32_t>(b)) {
      std::abort();
    }
  }
  return 0;
}
