// A GPU's energy total, read from the board now and then and carried forward by its power
// samples in between. On an H200 one read of the board's counter
// (nvmlDeviceGetTotalEnergyConsumption) costs the driver 2.7 ms of CPU, three quarters of what
// sampling a busy GPU costs colod every second; its power reading costs 3 µs. The counter is read
// every `read_every`, and the total is kept monotonic: a read that finds less than was carried
// holds the total until the board catches up, so what colod reports stays a counter.
#pragma once

#include <algorithm>
#include <chrono>

#include "common/units.h"

namespace colo {

class EnergyCounter {
 public:
  explicit EnergyCounter(Duration read_every) : read_every_(read_every) {}

  // Whether the board's counter is due to be read at `now`.
  bool Due(TimePoint now) const { return !read_ || now - last_read_ >= read_every_; }

  // The total at `now`, given the board's counter (joules) read then, and the power then
  // (negative: unknown).
  double Read(TimePoint now, double board_joules, double watts) {
    total_ = read_ ? std::max(total_, board_joules) : board_joules;
    read_ = true;
    last_read_ = now;
    Remember(now, watts);
    return total_;
  }

  // The total at `now` without reading the board: the last total plus the energy of the power
  // samples since (trapezoids). Negative while the board has never been read.
  double Carry(TimePoint now, double watts) {
    if (!read_) return -1;
    if (watts >= 0 && last_watts_ >= 0 && now > last_sample_) {
      const double seconds = std::chrono::duration<double>(now - last_sample_).count();
      total_ += (watts + last_watts_) / 2 * seconds;
    }
    Remember(now, watts);
    return total_;
  }

 private:
  void Remember(TimePoint now, double watts) {
    last_sample_ = now;
    last_watts_ = watts;
  }

  Duration read_every_;
  bool read_ = false;
  TimePoint last_read_{};
  TimePoint last_sample_{};
  double last_watts_ = -1;
  double total_ = -1;
};

}  // namespace colo
