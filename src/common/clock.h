// The one source of time. Core, policies and estimators receive a Clock& and never read real time,
// so the daemon (SystemClock) and the simulator (ManualClock driven by its event queue) share them
// unchanged.
#pragma once

#include <algorithm>
#include <chrono>
#include <optional>

#include "common/check.h"
#include "common/units.h"

namespace colo {

using WallTime = std::chrono::system_clock::time_point;

class Clock {
 public:
  virtual ~Clock() = default;
  // Monotonic time, for durations and deadlines.
  virtual TimePoint Now() const = 0;
  // Calendar time, only for what people read (timestamps in logs and reports).
  virtual WallTime WallNow() const = 0;
};

// A past calendar time on the monotonic clock (what was stored as wall time, read back after a
// restart); a time in the future counts as now.
inline TimePoint MonotonicOf(const Clock& clock, WallTime past) {
  const Duration ago = std::chrono::duration_cast<Duration>(clock.WallNow() - past);
  return clock.Now() - std::max(Duration::zero(), ago);
}

// Calendar time as colo stores and sends it: seconds since the epoch, to the microsecond.
double ToEpochSeconds(WallTime time);
// The time `seconds` after the epoch, rounded to the microsecond; nullopt when it is outside
// what WallTime can hold (or not finite).
std::optional<WallTime> FromEpochSeconds(double seconds);

// Time that moves only when told to: the simulator and tests.
class ManualClock final : public Clock {
 public:
  explicit ManualClock(TimePoint start = TimePoint{}, WallTime wall_origin = WallTime{})
      : now_(start), wall_origin_(wall_origin) {}
  TimePoint Now() const override { return now_; }
  WallTime WallNow() const override {
    return wall_origin_ + std::chrono::duration_cast<WallTime::duration>(now_.time_since_epoch());
  }
  void AdvanceTo(TimePoint t) {
    COLO_CHECK(t >= now_);  // time never runs backwards
    now_ = t;
  }
  void Advance(Duration d) { AdvanceTo(now_ + d); }

 private:
  TimePoint now_;
  WallTime wall_origin_;
};

// Real time, for colod and the CLI (the timeouts of colod's threads and children read
// std::chrono::steady_clock themselves). Never handed to the simulator.
class SystemClock final : public Clock {
 public:
  TimePoint Now() const override;
  WallTime WallNow() const override;
};

}  // namespace colo
