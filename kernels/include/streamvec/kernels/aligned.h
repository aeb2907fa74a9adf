// A zero-initialised, 64-byte aligned float buffer for model tables and kernel scratch.
// Buffers of 4 MiB or more are 2 MiB aligned and, on Linux, asked to be backed by transparent
// huge pages (madvise): embedding tables are read at random rows, and with 4 KiB pages most row
// accesses also miss the TLB.
#ifndef STREAMVEC_KERNELS_ALIGNED_H_
#define STREAMVEC_KERNELS_ALIGNED_H_

#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <new>
#include <utility>

#if defined(__linux__)
#include <sys/mman.h>
#endif

namespace streamvec {

class AlignedFloats {
 public:
  AlignedFloats() = default;
  explicit AlignedFloats(size_t n) { Resize(n); }
  AlignedFloats(const AlignedFloats&) = delete;
  AlignedFloats& operator=(const AlignedFloats&) = delete;
  AlignedFloats(AlignedFloats&& o) noexcept : data_(o.data_), size_(o.size_) {
    o.data_ = nullptr;
    o.size_ = 0;
  }
  AlignedFloats& operator=(AlignedFloats&& o) noexcept {
    std::swap(data_, o.data_);
    std::swap(size_, o.size_);
    return *this;
  }
  ~AlignedFloats() { std::free(data_); }

  // Discards the contents; the new buffer of n floats is zero.
  void Resize(size_t n) { Allocate(n, /*zero=*/true); }

  // Discards the contents; the new buffer of n floats is indeterminate, for a caller that writes
  // every float before reading it (a fresh page is zeroed by the kernel anyway, and a second
  // pass over a table of tens of MB is not free).
  void ResizeForOverwrite(size_t n) { Allocate(n, /*zero=*/false); }

  float* data() { return data_; }
  const float* data() const { return data_; }
  size_t size() const { return size_; }
  float& operator[](size_t i) { return data_[i]; }
  const float& operator[](size_t i) const { return data_[i]; }

 private:
  void Allocate(size_t n, bool zero) {
    std::free(data_);
    data_ = nullptr;
    size_ = n;
    if (n == 0) return;
    constexpr size_t kHuge = size_t{2} << 20;
    const bool huge = n * sizeof(float) >= 2 * kHuge;
    const size_t align = huge ? kHuge : 64;
    const size_t bytes = (n * sizeof(float) + align - 1) / align * align;
    data_ = static_cast<float*>(std::aligned_alloc(align, bytes));
    if (data_ == nullptr) throw std::bad_alloc();
#if defined(__linux__) && defined(MADV_HUGEPAGE)
    if (huge) ::madvise(data_, bytes, MADV_HUGEPAGE);  // advisory: failure is harmless
#endif
    if (zero) std::memset(data_, 0, bytes);
  }

  float* data_ = nullptr;
  size_t size_ = 0;
};

}  // namespace streamvec

#endif  // STREAMVEC_KERNELS_ALIGNED_H_
