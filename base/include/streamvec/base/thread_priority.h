// Scheduling priority of the calling thread, for background work that shares cores with
// requests (training and index builds under `streamvec run`).
#ifndef STREAMVEC_BASE_THREAD_PRIORITY_H_
#define STREAMVEC_BASE_THREAD_PRIORITY_H_

#include "streamvec/base/status.h"

namespace streamvec {

// Sets the nice value of the calling thread (Linux keeps one per thread; threads it creates
// afterwards inherit it) to `nice`, in [0, 19]: higher runs less when the cores are contended
// and at full speed when they are idle (sched(7), "The nice value"). Lowering a thread's nice
// value below what it has needs CAP_SYS_NICE; raising it never does.
// Errors: InvalidArgument outside [0, 19]; IoError with errno's text when the kernel refuses.
Status SetThreadNice(int nice);

// Raises the calling thread's nice value to `nice` when it is lower; leaves a higher one as it is
// (lowering would need CAP_SYS_NICE). Errors: as SetThreadNice.
Status RaiseThreadNice(int nice);

// The calling thread's nice value.
int ThreadNice();

// Sets the calling thread's time slice under Linux's EEVDF scheduler (6.12 and later: the
// sched_runtime of a SCHED_OTHER thread, sched_setattr(2); clamped by the kernel to 0.1-100 ms;
// threads it creates afterwards inherit it). A background thread with a short slice is
// preempted that much sooner by a request thread that wakes up; with the default slice (0.7 ms x
// (1 + log2 CPUs), 1.4 ms on 2 cores) a request could wait that long behind it. The nice value is
// kept. Older kernels accept and ignore it.
// Errors: InvalidArgument outside [0.0001, 0.1] s; IoError with errno's text when the kernel
// refuses (no sched_setattr).
Status SetThreadSlice(double seconds);

// The calling thread's slice in seconds (0 when the kernel does not say).
double ThreadSlice();

// The slice given to background threads (training, ingestion, index builds, snapshot
// preparation) that share cores with request threads.
inline constexpr double kBackgroundSliceSeconds = 0.0002;

// Puts the calling thread (and the threads it creates afterwards) under SCHED_IDLE (sched(7),
// "SCHED_IDLE: Scheduling very low priority jobs"): it runs on the cycles that no normal thread
// wants, and a normal thread that wakes up on its core preempts it at once, whatever their nice
// values and slices. The nice value is kept (it counts again if the thread goes back to
// SCHED_OTHER). Errors: IoError with errno's text when the kernel refuses.
Status SetThreadIdlePolicy();

// Whether the calling thread is under SCHED_IDLE.
bool ThreadHasIdlePolicy();

// How background work yields the cores to request threads (LowerThreadPriority).
enum class BackgroundPolicy {
  // SCHED_IDLE (SetThreadIdlePolicy): requests first, always; the background work gets only
  // what requests leave, so a load that keeps every core busy stops it until the load eases.
  kIdle,
  // SCHED_OTHER at a raised nice value with the short slice: the background work keeps a share
  // of the cores (about 1.5% per thread at nice 19, 10% at nice 10, against one busy request
  // thread) however busy the requests keep them, and requests wait up to a slice behind it.
  kNice,
};

// Makes the calling thread (and the threads it creates afterwards) background work beside
// request threads: RaiseThreadNice(nice), then the kBackgroundSliceSeconds slice (best effort:
// a kernel without sched_setattr keeps its default slice), then under kIdle SCHED_IDLE.
// Errors: as RaiseThreadNice; IoError when the kernel refuses SCHED_IDLE (the nice value and
// slice are set by then).
Status LowerThreadPriority(int nice, BackgroundPolicy policy);

}  // namespace streamvec

#endif  // STREAMVEC_BASE_THREAD_PRIORITY_H_
