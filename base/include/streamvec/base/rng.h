// Small fast pseudo-random generator for training threads (one per thread, seeded seed + thread
// id as in fastText). Not cryptographic. Not thread-safe: each thread owns its generator.
#ifndef STREAMVEC_BASE_RNG_H_
#define STREAMVEC_BASE_RNG_H_

#include <cstdint>

namespace streamvec {

// xoshiro256** (Blackman & Vigna 2018), state seeded with SplitMix64.
class Rng {
 public:
  explicit Rng(uint64_t seed);
  uint64_t Next() {
    const uint64_t result = Rotl(s_[1] * 5, 7) * 9;
    const uint64_t t = s_[1] << 17;
    s_[2] ^= s_[0];
    s_[3] ^= s_[1];
    s_[1] ^= s_[2];
    s_[0] ^= s_[3];
    s_[2] ^= t;
    s_[3] = Rotl(s_[3], 45);
    return result;
  }
  // Uniform in [0, n), n > 0 (Lemire's multiply-shift; bias below 2^-32 for n < 2^32).
  uint32_t Below(uint32_t n) { return static_cast<uint32_t>(((Next() >> 32) * n) >> 32); }
  // Uniform float in [0, 1).
  float Uniform() { return static_cast<float>(Next() >> 40) * (1.0f / 16777216.0f); }

  // The full generator state (4 words), for checkpoints: a generator given the state of another
  // continues its sequence exactly.
  void GetState(uint64_t out[4]) const {
    for (int i = 0; i < 4; ++i) out[i] = s_[i];
  }
  void SetState(const uint64_t in[4]) {
    for (int i = 0; i < 4; ++i) s_[i] = in[i];
  }

 private:
  static uint64_t Rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }
  uint64_t s_[4];
};

}  // namespace streamvec

#endif  // STREAMVEC_BASE_RNG_H_
