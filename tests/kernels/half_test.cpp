#include "streamvec/kernels/half.h"

#include <gtest/gtest.h>

#include <Eigen/Core>
#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <string>
#include <vector>

namespace streamvec {
namespace {

uint16_t EigenHalfBits(float x) { return Eigen::numext::bit_cast<uint16_t>(Eigen::half(x)); }

float EigenFloat(uint16_t bits) {
  return static_cast<float>(Eigen::numext::bit_cast<Eigen::half>(bits));
}

// The builds this CPU can run: the portable one, and F16C where the CPU has it.
std::vector<bool> Builds() {
  std::vector<bool> builds{false};
  if (HalfConversionF16cSupported()) builds.push_back(true);
  return builds;
}

std::string BuildName(bool f16c) { return f16c ? "f16c" : "portable"; }

// Converts `in` in pieces of every length 0-17 (a build's 8-wide steps and its tail), so that
// each piece starts at another alignment.
template <typename From, typename To, typename Fn>
std::vector<To> ConvertInPieces(Fn fn, const std::vector<From>& in) {
  std::vector<To> out(in.size());
  size_t at = 0, piece = 0;
  while (at < in.size()) {
    const size_t n = std::min(piece % 18, in.size() - at);
    fn(in.data() + at, out.data() + at, n);
    at += n;
    ++piece;
  }
  return out;
}

// Every one of the 65,536 halves converts to the float Eigen::half gives, bit for bit (NaNs:
// a NaN of the same sign).
TEST(HalfTest, EveryHalfConvertsToTheFloatEigenGives) {
  std::vector<uint16_t> all(65536);
  for (uint32_t i = 0; i < all.size(); ++i) all[i] = static_cast<uint16_t>(i);
  for (bool f16c : Builds()) {
    const std::vector<float> got =
        ConvertInPieces<uint16_t, float>(HalvesToFloatsFunction(f16c), all);
    int wrong = 0;
    for (uint32_t i = 0; i < all.size(); ++i) {
      const float want = EigenFloat(all[i]);
      const bool ok = std::isnan(want)
                          ? std::isnan(got[i]) && std::signbit(got[i]) == std::signbit(want)
                          : std::bit_cast<uint32_t>(got[i]) == std::bit_cast<uint32_t>(want);
      if (!ok && ++wrong <= 5) {
        ADD_FAILURE() << BuildName(f16c) << ": half 0x" << std::hex << i << " gave " << got[i]
                      << ", Eigen " << want;
      }
    }
    EXPECT_EQ(wrong, 0) << BuildName(f16c);
  }
}

// Floats round to the half Eigen::half gives, bit for bit: every half's value, the midpoints
// between neighbouring halves (ties go to even) and the floats one ulp either side of them,
// the edges of half's range, and random bit patterns of every exponent.
TEST(HalfTest, FloatsRoundToTheHalfEigenGives) {
  std::vector<float> floats;
  for (uint32_t i = 0; i < 0x7c00; ++i) {  // the finite positive halves and their neighbours
    const float a = EigenFloat(static_cast<uint16_t>(i));
    const float b = EigenFloat(static_cast<uint16_t>(i + 1));
    const float mid = a + (b - a) / 2;  // exact: halves have 11 significant bits
    for (float x : {a, mid, std::nextafter(mid, 0.0f), std::nextafter(mid, 1e9f)}) {
      floats.push_back(x);
      floats.push_back(-x);
    }
  }
  const float inf = std::numeric_limits<float>::infinity();
  for (float x :
       {0.0f, -0.0f, 65504.0f, 65519.99f, 65520.0f, 1e10f, inf, -inf,
        std::numeric_limits<float>::denorm_min(), std::numeric_limits<float>::min(),
        std::numeric_limits<float>::max(), -std::numeric_limits<float>::max(),
        std::numeric_limits<float>::quiet_NaN(), -std::numeric_limits<float>::quiet_NaN()}) {
    floats.push_back(x);
  }
  std::mt19937 rng(11);
  for (int i = 0; i < 200000; ++i)
    floats.push_back(std::bit_cast<float>(static_cast<uint32_t>(rng())));
  for (bool f16c : Builds()) {
    const std::vector<uint16_t> got =
        ConvertInPieces<float, uint16_t>(FloatsToHalvesFunction(f16c), floats);
    int wrong = 0;
    for (size_t i = 0; i < floats.size(); ++i) {
      const uint16_t want = EigenHalfBits(floats[i]);
      const bool ok = std::isnan(floats[i]) ? HalfIsNonFinite(got[i]) && (got[i] & 0x3ff) != 0 &&
                                                  (got[i] & 0x8000) == (want & 0x8000)
                                            : got[i] == want;
      if (!ok && ++wrong <= 5) {
        ADD_FAILURE() << BuildName(f16c) << ": " << floats[i] << " (0x" << std::hex
                      << std::bit_cast<uint32_t>(floats[i]) << ") gave 0x" << got[i] << ", Eigen 0x"
                      << want;
      }
    }
    EXPECT_EQ(wrong, 0) << BuildName(f16c);
  }
}

TEST(HalfTest, NonFiniteHalvesAreTheOnesWithEveryExponentBitSet) {
  EXPECT_TRUE(HalfIsNonFinite(EigenHalfBits(std::numeric_limits<float>::infinity())));
  EXPECT_TRUE(HalfIsNonFinite(EigenHalfBits(-1e6f)));  // beyond half's range
  EXPECT_TRUE(HalfIsNonFinite(EigenHalfBits(std::numeric_limits<float>::quiet_NaN())));
  EXPECT_FALSE(HalfIsNonFinite(EigenHalfBits(65504.0f)));
  EXPECT_FALSE(HalfIsNonFinite(EigenHalfBits(-1e-8f)));
  EXPECT_FALSE(HalfIsNonFinite(0));
}

}  // namespace
}  // namespace streamvec
