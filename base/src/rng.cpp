#include "streamvec/base/rng.h"

namespace streamvec {

Rng::Rng(uint64_t seed) {
  uint64_t z = seed;
  for (auto& s : s_) {
    z += 0x9e3779b97f4a7c15ULL;
    uint64_t x = z;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
    s = x ^ (x >> 31);
  }
}

}  // namespace streamvec
