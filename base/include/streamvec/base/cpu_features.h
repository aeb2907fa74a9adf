// Run-time CPU feature detection for kernel dispatch. The default build runs on any x86-64;
// SIMD kernels are compiled per source file with their own ISA flags and chosen here.
#ifndef STREAMVEC_BASE_CPU_FEATURES_H_
#define STREAMVEC_BASE_CPU_FEATURES_H_

#include <string>

namespace streamvec {

// Instruction sets the kernels are built for, in increasing order of preference.
enum class Isa { kPortable = 0, kAvx2 = 1, kAvx512 = 2 };

// The best ISA this CPU and OS support (AVX2 needs FMA too; AVX-512 needs F, VL, BW, DQ).
// Thread-safe.
Isa DetectBestIsa();
bool IsaSupported(Isa isa);
const char* IsaName(Isa isa);
// Parses "portable" | "avx2" | "avx512" | "auto" ("auto" gives DetectBestIsa()). Returns false on
// an unknown name.
bool ParseIsa(const std::string& name, Isa* isa);

}  // namespace streamvec

#endif  // STREAMVEC_BASE_CPU_FEATURES_H_
