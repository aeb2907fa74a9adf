// The process heap's policy for freed memory (glibc malloc), for processes that allocate and free
// large buffers at a high rate: a message broker's logs and responses, a producer's messages, a
// character model's per-piece activations.
//
// On the VMs this project runs on a page fault costs several microseconds (the hypervisor's
// interrupt re-enable dominates `perf` profiles), and glibc's defaults hand large freed blocks
// back to the kernel (mmap for blocks over its dynamic threshold, trimming of a heap's free top),
// so every new buffer is faulted in again, zeroed by the kernel, page by page.
#ifndef STREAMVEC_BASE_HEAP_H_
#define STREAMVEC_BASE_HEAP_H_

#include <cstddef>

namespace streamvec {

// Keeps freed memory in the heap for reuse: blocks under 32 MiB come from the heap instead of
// their own mappings, and a heap's free top goes back to the kernel only past `trim_bytes`.
// Process-wide (mallopt(3) M_MMAP_THRESHOLD, M_TRIM_THRESHOLD; later calls overwrite earlier
// ones); a no-op without glibc. An explicit malloc_trim(3) still hands memory back.
void KeepFreedMemoryForReuse(size_t trim_bytes);

// True once KeepFreedMemoryForReuse (or ReserveHeap) ran in this process. Code that would hand
// freed memory back to the kernel on its own (StateStore's malloc_trim after a snapshot) leaves
// it then: the process asked to keep it, and trimming would make its next buffers fault in again.
bool FreedMemoryKeptForReuse();

// What ReserveHeap did.
struct HeapReserve {
  size_t bytes = 0;      // heap faulted in and left free for reuse
  double seconds = 0.0;  // time it took
};

// Faults `bytes` of heap in up front (on transparent huge pages where the kernel allows
// madvise(MADV_HUGEPAGE)) and frees it again, kept for reuse (KeepFreedMemoryForReuse with a
// trim threshold above `bytes`), so that the process's later allocations, up to that total,
// take no page faults. For a process whose allocations are mostly below 32 MiB and few threads:
// it also puts every thread on the one heap (mallopt M_ARENA_MAX 1), since a thread's own arena
// would not see the reserve. Call before the process starts its threads. The memory stays
// resident for the life of the process. Rounded up to whole MiB; 0 does nothing. Without glibc
// it does nothing and returns bytes 0.
HeapReserve ReserveHeap(size_t bytes);

}  // namespace streamvec

#endif  // STREAMVEC_BASE_HEAP_H_
