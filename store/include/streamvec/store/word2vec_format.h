// Word vectors in the word2vec C tool's file formats (Mikolov et al. 2013, word2vec.c
// `save_vectors`), which gensim's KeyedVectors.load_word2vec_format and fastText's .vec read.
//
// Text:   "<rows> <dim>\n" then per row "<word> <v_0> ... <v_{dim-1}>\n" (floats printed in the
//         shortest form that reads back to the same float32).
// Binary: "<rows> <dim>\n" then per row "<word> " + dim little-endian float32 + "\n".
// Rows are written in the order given (streamvec writes the most frequent word first).
#ifndef STREAMVEC_STORE_WORD2VEC_FORMAT_H_
#define STREAMVEC_STORE_WORD2VEC_FORMAT_H_

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "streamvec/base/big_array.h"
#include "streamvec/base/status.h"

namespace streamvec {

enum class VectorFormat { kText, kBinary };

// Parses "text" | "binary". Returns false on anything else.
bool ParseVectorFormat(const std::string& name, VectorFormat* format);

// A dense embedding table: words.size() rows of dim floats, row-major: vectors[i * dim + j].
// `vectors` is a BigVector (2 MiB pages from 4 MiB on; resize() leaves new floats unset): the
// server loads one per snapshot, 32 MB for 80k words, every few seconds under `run`.
struct Embeddings {
  int dim = 0;
  std::vector<std::string> words;
  BigVector<float> vectors;
  size_t rows() const { return words.size(); }
  const float* row(size_t i) const { return vectors.data() + i * static_cast<size_t>(dim); }
};

// Writes `words.size()` rows; row i is rows[i * stride .. i * stride + dim). stride >= dim (the
// trainer's rows are padded). Writes to "<path>.tmp" and renames over `path`, so a failed write
// never leaves a half file under `path`. `threads` > 1 formats text rows in parallel.
// Errors: IoError naming the path (unwritable directory, full disk); InvalidArgument for dim <= 0,
// stride < dim, or a word that is empty or holds whitespace (the format could not read it back).
Status WriteWord2Vec(const std::string& path, const std::vector<std::string>& words,
                     const float* rows, size_t stride, int dim, VectorFormat format,
                     int threads = 1);
Status WriteWord2Vec(const std::string& path, const Embeddings& embeddings, VectorFormat format,
                     int threads = 1);

// Checks that `path` can be created (its directory exists and is writable) without leaving a
// file behind. Lets a command fail before hours of training, not after.
Status CheckWritable(const std::string& path);

// Reads either format; the format is detected from the content (a text row parses as a word and
// exactly dim numbers). `*detected` (optional) receives it.
// Errors: NotFound (missing file), Corruption naming the line or byte offset (bad header, short
// row, wrong number of values, truncated binary row).
StatusOr<Embeddings> ReadWord2Vec(const std::string& path, VectorFormat* detected = nullptr);

// ReadWord2Vec on bytes already in memory: `name` stands for the path in error messages.
StatusOr<Embeddings> ParseWord2Vec(std::string_view data, const std::string& name,
                                   VectorFormat* detected = nullptr);

}  // namespace streamvec

#endif  // STREAMVEC_STORE_WORD2VEC_FORMAT_H_
