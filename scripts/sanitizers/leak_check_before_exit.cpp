// LeakSanitizer's check after the last test, before the process exits (every test binary of an
// AddressSanitizer build: tests/CMakeLists.txt; app/main.cpp does the same for `streamvec`).
//
// LSan checks at exit, after the static destructors have run, and cpprestsdk tears its shared
// thread pool down there: the chores still queued on it (a connection's teardown continuations,
// pplx's _TaskProcThunk from _ScheduleFuncWithAutoInline, their _Task_impl) are dropped without
// running and are reported as leaks, allocated inside the uninstrumented libcpprest.so. One run
// of a single REST test in five reported one (640 bytes in 4 allocations); checked here, after
// every test and before exit, none of 32 did. Everything of ours is torn down by then (the
// fixtures after each test; no singletons), so a leak of ours is still reported: this check
// replaces the one at exit, and a leak fails the process as that one would.
#include <gtest/gtest.h>
#include <sanitizer/lsan_interface.h>

namespace {

class LeakCheckBeforeExit : public ::testing::Environment {
 public:
  void TearDown() override { __lsan_do_leak_check(); }
};

const ::testing::Environment* const kLeakCheck =
    ::testing::AddGlobalTestEnvironment(new LeakCheckBeforeExit);

}  // namespace
