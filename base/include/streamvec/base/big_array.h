// std::vector for large arrays of trivially constructible elements (token streams, text output
// buffers): allocations of 4 MiB or more are 2 MiB aligned and, on Linux, asked to be backed by
// transparent huge pages (madvise; advisory), and resize() leaves new elements uninitialised
// instead of zeroing them. A 68 MB token array cost about 17k page faults and a single-threaded
// zero fill (0.25 s of the batch trainer's read phase on a 2-core VM); with 2 MiB pages it is 34
// faults, taken by the threads that write the elements. Allocation failure throws
// std::bad_alloc, as std::allocator.
#ifndef STREAMVEC_BASE_BIG_ARRAY_H_
#define STREAMVEC_BASE_BIG_ARRAY_H_

#include <cstddef>
#include <cstdlib>
#include <new>
#include <type_traits>
#include <utility>
#include <vector>

#if defined(__linux__)
#include <sys/mman.h>
#endif

namespace streamvec {

template <typename T>
class BigArrayAllocator {
  static_assert(std::is_trivially_default_constructible_v<T> &&
                std::is_trivially_destructible_v<T>);

 public:
  using value_type = T;
  BigArrayAllocator() noexcept = default;
  template <typename U>
  BigArrayAllocator(const BigArrayAllocator<U>&) noexcept {}  // NOLINT: rebinding

  T* allocate(size_t n) {
    constexpr size_t kHuge = size_t{2} << 20;
    const size_t want = n * sizeof(T);
    const bool huge = want >= 2 * kHuge;
    const size_t align = huge ? kHuge : alignof(std::max_align_t);
    const size_t bytes = (want + align - 1) / align * align;
    void* p = std::aligned_alloc(align, bytes == 0 ? align : bytes);
    if (p == nullptr) throw std::bad_alloc();
#if defined(__linux__) && defined(MADV_HUGEPAGE)
    if (huge) ::madvise(p, bytes, MADV_HUGEPAGE);  // advisory: failure is harmless
#endif
    return static_cast<T*>(p);
  }
  void deallocate(T* p, size_t) noexcept { std::free(p); }

  // Value-less construction default-initialises (leaves trivial elements as they are).
  template <typename U>
  void construct(U* p) noexcept {
    ::new (static_cast<void*>(p)) U;
  }
  template <typename U, typename... Args>
  void construct(U* p, Args&&... args) {
    ::new (static_cast<void*>(p)) U(std::forward<Args>(args)...);
  }

  friend bool operator==(const BigArrayAllocator&, const BigArrayAllocator&) { return true; }
};

template <typename T>
using BigVector = std::vector<T, BigArrayAllocator<T>>;

}  // namespace streamvec

#endif  // STREAMVEC_BASE_BIG_ARRAY_H_
