#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <set>
#include <thread>

#include "streamvec/base/cpu_features.h"
#include "streamvec/base/rng.h"
#include "streamvec/base/status.h"
#include "streamvec/base/thread_priority.h"

namespace streamvec {
namespace {

StatusOr<int> Half(int x) {
  if (x % 2 != 0) return Status::InvalidArgument("odd: " + std::to_string(x));
  return x / 2;
}

TEST(StatusTest, CarriesCodeAndMessage) {
  EXPECT_TRUE(Status::Ok().ok());
  Status s = Status::NotFound("no such file 'x'");
  EXPECT_FALSE(s.ok());
  EXPECT_EQ(s.code(), StatusCode::kNotFound);
  EXPECT_EQ(s.ToString(), "not found: no such file 'x'");
}

TEST(StatusOrTest, HoldsValueOrError) {
  auto a = Half(4);
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(*a, 2);
  auto b = Half(3);
  EXPECT_FALSE(b.ok());
  EXPECT_EQ(b.status().message(), "odd: 3");
  EXPECT_DEATH((void)b.value(), "odd: 3");
}

TEST(RngTest, SameSeedSameStreamDifferentSeedDifferentStream) {
  Rng a(7), b(7), c(8);
  bool differs = false;
  for (int i = 0; i < 100; ++i) {
    const uint64_t x = a.Next();
    EXPECT_EQ(x, b.Next());
    differs |= x != c.Next();
  }
  EXPECT_TRUE(differs);
}

TEST(RngTest, BelowStaysInRangeAndCoversIt) {
  Rng r(1);
  std::set<uint32_t> seen;
  for (int i = 0; i < 10000; ++i) {
    const uint32_t v = r.Below(10);
    ASSERT_LT(v, 10u);
    seen.insert(v);
  }
  EXPECT_EQ(seen.size(), 10u);
  for (int i = 0; i < 1000; ++i) {
    const float u = r.Uniform();
    ASSERT_GE(u, 0.0f);
    ASSERT_LT(u, 1.0f);
  }
}

TEST(CpuFeaturesTest, ParsesNamesAndPortableIsAlwaysSupported) {
  Isa isa;
  EXPECT_TRUE(ParseIsa("avx2", &isa));
  EXPECT_EQ(isa, Isa::kAvx2);
  EXPECT_TRUE(ParseIsa("auto", &isa));
  EXPECT_EQ(isa, DetectBestIsa());
  EXPECT_FALSE(ParseIsa("sse9", &isa));
  EXPECT_TRUE(IsaSupported(Isa::kPortable));
}

// Runs `test` on a new thread, the caller of the policy tests below, which compare threads of the
// fair class. A shared machine may move a niced process to SCHED_IDLE from outside while it runs,
// and does it to the process's main thread (chrt -p PID): a thread of the test's own keeps the
// policy it started with. That is the main thread's: when it is SCHED_IDLE already (the caller's,
// or moved before), there is no fair-class thread to compare and the test skips.
void OnFairClassThread(const std::function<void()>& test) {
  std::thread([&] {
    if (ThreadHasIdlePolicy()) {
      GTEST_SKIP() << "this process runs under SCHED_IDLE: no fair-class thread to compare";
    }
    test();
  }).join();
}

TEST(ThreadPriorityTest, NiceIsPerThreadAndInheritedByNewThreads) {
  int before = -1, inherited = -1, after = -1;
  Status set;
  std::thread([&] {
    before = ThreadNice();
    set = SetThreadNice(std::min(before + 5, 19));
    std::thread([&] { inherited = ThreadNice(); }).join();
    after = ThreadNice();
  }).join();
  ASSERT_TRUE(set.ok()) << set.ToString();
  EXPECT_EQ(after, std::min(before + 5, 19));
  EXPECT_EQ(inherited, after);
  EXPECT_EQ(ThreadNice(), before);  // this thread is untouched
  EXPECT_EQ(SetThreadNice(20).code(), StatusCode::kInvalidArgument);
  std::thread([&] {
    ASSERT_TRUE(SetThreadNice(std::min(before + 5, 19)).ok());
    EXPECT_TRUE(RaiseThreadNice(std::min(before + 2, 19)).ok());  // already higher: kept
    EXPECT_EQ(ThreadNice(), std::min(before + 5, 19));
    EXPECT_TRUE(RaiseThreadNice(19).ok());
    EXPECT_EQ(ThreadNice(), 19);
  }).join();
  EXPECT_EQ(RaiseThreadNice(20).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(SetThreadNice(-1).code(), StatusCode::kInvalidArgument);
}

// The slice keeps the nice value and is inherited; kernels before 6.12 report none (skip).
TEST(ThreadPriorityTest, SliceIsPerThreadKeepsTheNiceValueAndIsInherited) {
  OnFairClassThread([] {
    EXPECT_EQ(SetThreadSlice(0).code(), StatusCode::kInvalidArgument);
    EXPECT_EQ(SetThreadSlice(1.0).code(), StatusCode::kInvalidArgument);
    const double own = ThreadSlice();
    if (own <= 0) GTEST_SKIP() << "this kernel reports no EEVDF time slice (before Linux 6.12)";
    int nice_before = -1, nice_after = -1;
    double slice = 0, inherited = 0;
    Status set;
    std::thread([&] {
      ASSERT_TRUE(SetThreadNice(std::min(ThreadNice() + 3, 19)).ok());
      nice_before = ThreadNice();
      set = SetThreadSlice(0.0003);
      slice = ThreadSlice();
      nice_after = ThreadNice();
      std::thread([&] { inherited = ThreadSlice(); }).join();
    }).join();
    ASSERT_TRUE(set.ok()) << set.ToString();
    EXPECT_NEAR(slice, 0.0003, 1e-6);
    EXPECT_NEAR(inherited, 0.0003, 1e-6);
    EXPECT_EQ(nice_after, nice_before);
    EXPECT_NEAR(ThreadSlice(), own, 1e-9);  // this thread is untouched
  });
}

TEST(ThreadPriorityTest, LowerThreadPriorityRaisesNiceAndShortensTheSlice) {
  OnFairClassThread([] {
    int nice = -1;
    double slice = 0;
    bool idle = true;
    Status set;
    std::thread([&] {
      set = LowerThreadPriority(std::min(ThreadNice() + 4, 19), BackgroundPolicy::kNice);
      nice = ThreadNice();
      slice = ThreadSlice();
      idle = ThreadHasIdlePolicy();
    }).join();
    ASSERT_TRUE(set.ok()) << set.ToString();
    EXPECT_EQ(nice, std::min(ThreadNice() + 4, 19));
    EXPECT_FALSE(idle);
    if (ThreadSlice() > 0) {  // Linux 6.12+
      EXPECT_NEAR(slice, kBackgroundSliceSeconds, 1e-6);
    }
    EXPECT_EQ(LowerThreadPriority(20, BackgroundPolicy::kNice).code(),
              StatusCode::kInvalidArgument);
  });
}

// SCHED_IDLE keeps the nice value, is inherited, and leaves the calling thread untouched.
TEST(ThreadPriorityTest, IdlePolicyIsPerThreadKeepsTheNiceValueAndIsInherited) {
  OnFairClassThread([] {
    const int own_nice = ThreadNice();
    int nice = -1;
    bool idle = false, inherited = false;
    Status set;
    std::thread([&] {
      set = LowerThreadPriority(std::min(own_nice + 3, 19), BackgroundPolicy::kIdle);
      nice = ThreadNice();
      idle = ThreadHasIdlePolicy();
      std::thread([&] { inherited = ThreadHasIdlePolicy(); }).join();
    }).join();
    ASSERT_TRUE(set.ok()) << set.ToString();
    EXPECT_TRUE(idle);
    EXPECT_TRUE(inherited);
    EXPECT_EQ(nice, std::min(own_nice + 3, 19));
    EXPECT_FALSE(ThreadHasIdlePolicy());  // this thread is untouched
    EXPECT_EQ(ThreadNice(), own_nice);
  });
}

}  // namespace
}  // namespace streamvec
