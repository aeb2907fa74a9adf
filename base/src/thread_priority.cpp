#include "streamvec/base/thread_priority.h"

#include <sys/resource.h>
#include <unistd.h>

#include <cerrno>
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

int ThreadNice() {
  errno = 0;
  return getpriority(PRIO_PROCESS, static_cast<id_t>(gettid()));
}

}  // namespace streamvec
