// For the tests of the heap policy (base/heap.h) and of the code that follows it: whether this
// build's malloc is glibc's (a sanitizer's allocator ignores mallopt), and the process's minor page
// faults so far (a page touched for the first time, or again after it went back to the kernel).
#ifndef STREAMVEC_TESTS_HEAP_TESTING_H_
#define STREAMVEC_TESTS_HEAP_TESTING_H_

#include <sys/resource.h>

namespace streamvec::heap_testing {

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
inline constexpr bool kSanitizerAllocator = true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
inline constexpr bool kSanitizerAllocator = true;
#else
inline constexpr bool kSanitizerAllocator = false;
#endif
#else
inline constexpr bool kSanitizerAllocator = false;
#endif

inline long MinorFaults() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return u.ru_minflt;
}

}  // namespace streamvec::heap_testing

#endif  // STREAMVEC_TESTS_HEAP_TESTING_H_
