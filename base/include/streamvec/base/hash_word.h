// HashWord: the words' 64-bit hash shared by the vocabularies (trainer/) and the parameter
// node's sharding (param/), which must agree on it.
#ifndef STREAMVEC_BASE_HASH_WORD_H_
#define STREAMVEC_BASE_HASH_WORD_H_

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string_view>

namespace streamvec {

// The n <= 8 bytes at p as an integer, zero-padded: on a little-endian machine what a memcpy of
// n bytes into a zeroed uint64_t gives, without that memcpy's library call (its size is not a
// constant) and the stall of loading 8 bytes just stored a few at a time (perf put a third of
// the vocabulary count's time there). Reads only [p, p + n): two overlapping 4-byte loads, or
// up to three single bytes.
inline uint64_t LoadUpTo8(const char* p, size_t n) {
  if (n >= 4) {
    uint32_t lo, hi;
    std::memcpy(&lo, p, 4);
    std::memcpy(&hi, p + n - 4, 4);
    return uint64_t{lo} | (uint64_t{hi} << (8 * (n - 4)));
  }
  if (n == 0) return 0;
  const auto byte = [p](size_t i) { return uint64_t{static_cast<unsigned char>(p[i])}; };
  return byte(0) | (byte(n / 2) << (8 * (n / 2))) | (byte(n - 1) << (8 * (n - 1)));
}

// 64-bit hash of a byte string (multiply-xorshift over 8-byte words); stable across runs and
// machines of the same byte order.
uint64_t HashWord(std::string_view word);

}  // namespace streamvec

#endif  // STREAMVEC_BASE_HASH_WORD_H_
