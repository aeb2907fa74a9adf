// A zero-initialised, 64-byte aligned float buffer for model tables and kernel scratch.
#ifndef STREAMVEC_KERNELS_ALIGNED_H_
#define STREAMVEC_KERNELS_ALIGNED_H_

#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <new>

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
  void Resize(size_t n) {
    std::free(data_);
    data_ = nullptr;
    size_ = n;
    if (n == 0) return;
    const size_t bytes = (n * sizeof(float) + 63) / 64 * 64;
    data_ = static_cast<float*>(std::aligned_alloc(64, bytes));
    if (data_ == nullptr) throw std::bad_alloc();
    std::memset(data_, 0, bytes);
  }
  float* data() { return data_; }
  const float* data() const { return data_; }
  size_t size() const { return size_; }
  float& operator[](size_t i) { return data_[i]; }
  const float& operator[](size_t i) const { return data_[i]; }

 private:
  float* data_ = nullptr;
  size_t size_ = 0;
};

}  // namespace streamvec

#endif  // STREAMVEC_KERNELS_ALIGNED_H_
