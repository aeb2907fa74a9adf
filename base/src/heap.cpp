#include "streamvec/base/heap.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <vector>

#if defined(__GLIBC__)
#include <malloc.h>
#endif
#if defined(__linux__)
#include <sys/mman.h>
#endif

namespace streamvec {
namespace {
std::atomic<bool> freed_memory_kept{false};
}  // namespace

void KeepFreedMemoryForReuse(size_t trim_bytes) {
#if defined(__GLIBC__)
  mallopt(M_MMAP_THRESHOLD, 32 << 20);
  mallopt(M_TRIM_THRESHOLD, static_cast<int>(std::min<size_t>(trim_bytes, size_t{1} << 30)));
#else
  (void)trim_bytes;
#endif
  freed_memory_kept.store(true);
}

bool FreedMemoryKeptForReuse() { return freed_memory_kept.load(); }

HeapReserve ReserveHeap(size_t bytes) {
  HeapReserve out;
#if defined(__GLIBC__)
  if (bytes == 0) return out;
  const auto t0 = std::chrono::steady_clock::now();
  constexpr size_t kMiB = size_t{1} << 20;
  // Blocks of 16 MiB: under the 32 MiB mmap threshold, so they come from the heap (sbrk) and,
  // freed together, merge into its free top, which stays (trim threshold above the total).
  constexpr size_t kBlock = 16 * kMiB;
  const size_t total = (bytes + kMiB - 1) / kMiB * kMiB;
  mallopt(M_ARENA_MAX, 1);
  KeepFreedMemoryForReuse(total + 64 * kMiB);
  std::vector<char*> blocks;
  size_t done = 0;
  while (done < total) {
    const size_t n = std::min(kBlock, total - done);
    char* b = static_cast<char*>(std::malloc(n));
    if (b == nullptr) break;
#if defined(__linux__) && defined(MADV_HUGEPAGE)
    // The 2 MiB-aligned part of the block, on huge pages where allowed (advisory).
    const uintptr_t lo = (reinterpret_cast<uintptr_t>(b) + 2 * kMiB - 1) & ~(2 * kMiB - 1);
    const uintptr_t hi = (reinterpret_cast<uintptr_t>(b) + n) & ~(2 * kMiB - 1);
    if (hi > lo) ::madvise(reinterpret_cast<void*>(lo), hi - lo, MADV_HUGEPAGE);
#endif
    // One write a page faults it in (a memset before free() may be dropped by the compiler).
    volatile char* v = b;
    for (size_t i = 0; i < n; i += 4096) v[i] = 0;
    blocks.push_back(b);
    done += n;
  }
  for (char* b : blocks) std::free(b);
  out.bytes = done;
  out.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
#else
  (void)bytes;
#endif
  return out;
}

}  // namespace streamvec
