// The CPU time the calling thread has used: what measurements quote beside wall time (a driver
// call's cost, a simulation's, a scheduler pass's), since it does not count the time a shared
// machine gave to other work.
#pragma once

#include <time.h>

#include <chrono>

namespace colo {

inline std::chrono::nanoseconds ThreadCpuTime() {
  timespec t{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return std::chrono::seconds(t.tv_sec) + std::chrono::nanoseconds(t.tv_nsec);
}

}  // namespace colo
