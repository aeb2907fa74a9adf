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

}  // namespace streamvec

#endif  // STREAMVEC_BASE_THREAD_PRIORITY_H_
