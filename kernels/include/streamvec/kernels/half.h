// IEEE 754 binary16 ("half", fp16) conversion of float arrays, one build per CPU feature, chosen
// at run time: the parameter protocol's fp16 rows (param/protocol.h, --delta-precision fp16) are
// converted by the million per push, where a conversion one value at a time (Eigen::half in
// software, the portable build's) took a tenth of a trainer's time.
#ifndef STREAMVEC_KERNELS_HALF_H_
#define STREAMVEC_KERNELS_HALF_H_

#include <cstddef>
#include <cstdint>

namespace streamvec {

// out[i] = the bits of the half nearest to in[i], for i < n: ties to even, a value beyond
// half's range gives +-infinity, a float too small gives a half subnormal or +-0, a NaN gives a
// quiet NaN of the same sign. Every build gives the bits Eigen::half(in[i]) gives, for every
// float but NaNs (whose payload builds may keep or drop). `in` and `out` must not overlap.
using FloatsToHalvesFn = void (*)(const float* in, uint16_t* out, size_t n);

// out[i] = the float equal to the half whose bits are in[i], for i < n (exact: every half is a
// float; a NaN stays a NaN, +-infinity and subnormals convert exactly).
using HalvesToFloatsFn = void (*)(const uint16_t* in, float* out, size_t n);

// The builds: `f16c` true gives the F16C instructions' build, false the portable one
// (Eigen::half). The caller checks HalfConversionF16cSupported() (an AVX2 CPU, as
// IsaSupported(Isa::kAvx2), with F16C) before asking for the F16C build; a binary without it
// (non-x86) gives the portable one.
FloatsToHalvesFn FloatsToHalvesFunction(bool f16c);
HalvesToFloatsFn HalvesToFloatsFunction(bool f16c);
bool HalfConversionF16cSupported();

// The best build for this CPU, picked once (thread-safe).
void FloatsToHalves(const float* in, uint16_t* out, size_t n);
void HalvesToFloats(const uint16_t* in, float* out, size_t n);

// True when a half's bits are +-infinity or a NaN (its exponent field all ones).
inline bool HalfIsNonFinite(uint16_t bits) { return (bits & 0x7c00u) == 0x7c00u; }

}  // namespace streamvec

#endif  // STREAMVEC_KERNELS_HALF_H_
