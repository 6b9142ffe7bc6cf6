#include "common/clock.h"

namespace colo {

TimePoint SystemClock::Now() const {
  const auto since = std::chrono::steady_clock::now().time_since_epoch();
  return TimePoint(std::chrono::duration_cast<Duration>(since));
}

WallTime SystemClock::WallNow() const {
  return std::chrono::system_clock::now();
}

}  // namespace colo
