#include "streamvec/base/thread_priority.h"

#include <sched.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <string>

namespace streamvec {

Status SetThreadNice(int nice) {
  if (nice < 0 || nice > 19) {
    return Status::InvalidArgument("nice value " + std::to_string(nice) + " is outside [0, 19]");
  }
  // PRIO_PROCESS with a thread id addresses that one thread on Linux (setpriority(2), BUGS).
  if (setpriority(PRIO_PROCESS, static_cast<id_t>(gettid()), nice) != 0) {
    return Status::IoError(std::string("setpriority: ") + std::strerror(errno));
  }
  return Status::Ok();
}

Status RaiseThreadNice(int nice) {
  if (nice <= ThreadNice() && nice >= 0 && nice <= 19) return Status::Ok();
  return SetThreadNice(nice);
}

namespace {

// struct sched_attr of sched_setattr(2) (glibc has no wrapper or declaration of it).
struct SchedAttr {
  uint32_t size;
  uint32_t sched_policy;
  uint64_t sched_flags;
  int32_t sched_nice;
  uint32_t sched_priority;
  uint64_t sched_runtime;
  uint64_t sched_deadline;
  uint64_t sched_period;
  uint32_t sched_util_min;
  uint32_t sched_util_max;
};

bool GetAttr(SchedAttr* a) {
#if defined(SYS_sched_getattr)
  std::memset(a, 0, sizeof *a);
  return syscall(SYS_sched_getattr, 0, a, sizeof *a, 0) == 0;
#else
  (void)a;
  errno = ENOSYS;
  return false;
#endif
}

}  // namespace

Status SetThreadSlice(double seconds) {
  if (!(seconds >= 0.0001 && seconds <= 0.1)) {
    return Status::InvalidArgument("time slice " + std::to_string(seconds) +
                                   " s is outside [0.0001, 0.1]");
  }
#if defined(SYS_sched_setattr)
  SchedAttr a;
  if (!GetAttr(&a)) return Status::IoError(std::string("sched_getattr: ") + std::strerror(errno));
  if (a.sched_policy != SCHED_OTHER && a.sched_policy != SCHED_BATCH) {
    return Status::Ok();  // real-time or idle policies have no fair-class slice
  }
  a.size = sizeof a;
  a.sched_flags = 0;
  a.sched_nice = ThreadNice();  // sched_setattr sets the nice value too: keep it
  a.sched_runtime = static_cast<uint64_t>(seconds * 1e9);
  if (syscall(SYS_sched_setattr, 0, &a, 0) != 0) {
    return Status::IoError(std::string("sched_setattr: ") + std::strerror(errno));
  }
  return Status::Ok();
#else
  return Status::IoError("sched_setattr: not available on this system");
#endif
}

double ThreadSlice() {
  SchedAttr a;
  if (!GetAttr(&a)) return 0;
  return static_cast<double>(a.sched_runtime) * 1e-9;
}

Status SetThreadIdlePolicy() {
  sched_param param{};
  param.sched_priority = 0;
  // pid 0: the calling thread (sched_setscheduler(2)); the nice value is left as it is.
  if (sched_setscheduler(0, SCHED_IDLE, &param) != 0) {
    return Status::IoError(std::string("sched_setscheduler(SCHED_IDLE): ") +
                           std::strerror(errno));
  }
  return Status::Ok();
}

bool ThreadHasIdlePolicy() { return sched_getscheduler(0) == SCHED_IDLE; }

Status LowerThreadPriority(int nice, BackgroundPolicy policy) {
  SV_RETURN_IF_ERROR(RaiseThreadNice(nice));
  (void)SetThreadSlice(kBackgroundSliceSeconds);  // best effort: see the header
  if (policy == BackgroundPolicy::kIdle) return SetThreadIdlePolicy();
  return Status::Ok();
}

int ThreadNice() {
  errno = 0;
  return getpriority(PRIO_PROCESS, static_cast<id_t>(gettid()));
}

}  // namespace streamvec
