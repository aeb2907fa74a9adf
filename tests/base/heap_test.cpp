#include "streamvec/base/heap.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <thread>
#include <vector>

#include "../heap_testing.h"

namespace streamvec {
namespace {

using heap_testing::kSanitizerAllocator;
using heap_testing::MinorFaults;

// Allocates `mib` blocks of 1 MiB, writes every page of each, frees them all.
void TouchAndFree(int mib) {
  std::vector<char*> blocks;
  for (int i = 0; i < mib; ++i) {
    auto* b = static_cast<volatile char*>(std::malloc(size_t{1} << 20));
    ASSERT_NE(b, nullptr);
    for (size_t j = 0; j < (size_t{1} << 20); j += 4096) b[j] = 1;
    blocks.push_back(const_cast<char*>(b));
  }
  for (char* b : blocks) std::free(b);
}

// The broker's case: after the reserve, buffers allocated and freed by any thread (the mock
// cluster runs on its own) reuse the reserved pages instead of faulting fresh ones in.
TEST(HeapTest, AllocationsAfterAReserveTakeNoPageFaultsOnAnyThread) {
  if (kSanitizerAllocator) GTEST_SKIP() << "the sanitizer's allocator ignores mallopt";
  const HeapReserve r = ReserveHeap(size_t{96} << 20);
  EXPECT_EQ(r.bytes, size_t{96} << 20);
  EXPECT_GE(r.seconds, 0.0);
  const long before = MinorFaults();
  TouchAndFree(48);  // 12,288 pages of 4 KiB
  std::thread other([] { TouchAndFree(40); });
  other.join();
  TouchAndFree(64);  // the blocks freed above are reused
  // Fresh memory would take one fault a page (22k); a thread's stack and the rest a few dozen.
  EXPECT_LT(MinorFaults() - before, 1000);
}

TEST(HeapTest, ReserveRoundsUpToWholeMiBAndZeroDoesNothing) {
  if (kSanitizerAllocator) GTEST_SKIP() << "the sanitizer's allocator ignores mallopt";
  EXPECT_EQ(ReserveHeap(0).bytes, 0u);
  EXPECT_EQ(ReserveHeap((size_t{3} << 20) + 1).bytes, size_t{4} << 20);
}

// The ingestor's case: one thread allocating and freeing messages of a few hundred KiB keeps
// reusing the same pages.
TEST(HeapTest, FreedBlocksAreReusedWithoutAReserve) {
  if (kSanitizerAllocator) GTEST_SKIP() << "the sanitizer's allocator ignores mallopt";
  KeepFreedMemoryForReuse(size_t{256} << 20);
  TouchAndFree(16);  // the heap grows once
  const long before = MinorFaults();
  for (int i = 0; i < 8; ++i) TouchAndFree(16);  // 32k pages if each round faulted its own
  EXPECT_LT(MinorFaults() - before, 1000);
}

}  // namespace
}  // namespace streamvec
