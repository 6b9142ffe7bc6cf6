// Test helper: a window summary whose every statistic is the same value.
#pragma once

#include "core/window_stats.h"

namespace colo {

inline WindowSummary Flat(double v) {
  WindowSummary s;
  s.empty = false;
  s.last = s.mean = s.median = s.p95 = s.ema = v;
  return s;
}

}  // namespace colo
