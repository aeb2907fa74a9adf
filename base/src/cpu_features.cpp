#include "streamvec/base/cpu_features.h"

namespace streamvec {

bool IsaSupported(Isa isa) {
#if defined(__x86_64__) || defined(__i386__)
  // libgcc's __builtin_cpu_supports also checks that the OS saves the YMM/ZMM state (XGETBV).
  __builtin_cpu_init();
  switch (isa) {
    case Isa::kPortable:
      return true;
    case Isa::kAvx2:
      return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
    case Isa::kAvx512:
      return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512vl") &&
             __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512dq") &&
             __builtin_cpu_supports("fma");
  }
  return false;
#else
  return isa == Isa::kPortable;
#endif
}

Isa DetectBestIsa() {
  if (IsaSupported(Isa::kAvx512)) return Isa::kAvx512;
  if (IsaSupported(Isa::kAvx2)) return Isa::kAvx2;
  return Isa::kPortable;
}

const char* IsaName(Isa isa) {
  switch (isa) {
    case Isa::kPortable:
      return "portable";
    case Isa::kAvx2:
      return "avx2";
    case Isa::kAvx512:
      return "avx512";
  }
  return "unknown";
}

bool ParseIsa(const std::string& name, Isa* isa) {
  if (name == "auto") {
    *isa = DetectBestIsa();
  } else if (name == "portable") {
    *isa = Isa::kPortable;
  } else if (name == "avx2") {
    *isa = Isa::kAvx2;
  } else if (name == "avx512") {
    *isa = Isa::kAvx512;
  } else {
    return false;
  }
  return true;
}

}  // namespace streamvec
