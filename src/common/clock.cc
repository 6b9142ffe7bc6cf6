#include "common/clock.h"

#include <cmath>
#include <cstdint>

namespace colo {

TimePoint SystemClock::Now() const {
  const auto since = std::chrono::steady_clock::now().time_since_epoch();
  return TimePoint(std::chrono::duration_cast<Duration>(since));
}

WallTime SystemClock::WallNow() const {
  return std::chrono::system_clock::now();
}

// Whole seconds and microseconds are converted apart, so that a time on a microsecond reads back
// as exactly that time (one product of the whole in microseconds would round on the way).
double ToEpochSeconds(WallTime time) {
  const int64_t micros =
      std::chrono::round<std::chrono::microseconds>(time.time_since_epoch()).count();
  int64_t whole = micros / 1'000'000, rest = micros % 1'000'000;
  if (rest < 0) {
    --whole;
    rest += 1'000'000;
  }
  return static_cast<double>(whole) + static_cast<double>(rest) / 1e6;
}

std::optional<WallTime> FromEpochSeconds(double seconds) {
  // The most WallTime holds (about the year 2262 with nanosecond ticks), less a second of margin
  // for the rounding below.
  static const double kLimit =
      std::chrono::duration<double>(WallTime::duration::max()).count() - 1.0;
  if (!std::isfinite(seconds) || std::fabs(seconds) > kLimit) return std::nullopt;
  const double whole = std::floor(seconds);
  const int64_t micros =
      static_cast<int64_t>(whole) * 1'000'000 + std::llround((seconds - whole) * 1e6);
  return WallTime(
      std::chrono::duration_cast<WallTime::duration>(std::chrono::microseconds(micros)));
}

}  // namespace colo
