#include "core/window_stats.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "common/check.h"

namespace colo {

SignalWindow::SignalWindow(int samples, Duration interval)
    : window_(interval * samples), interval_(interval), ema_decay_(1.0 - 2.0 / (samples + 1.0)) {
  COLO_CHECK(samples > 0 && interval > Duration::zero());
}

void SignalWindow::Add(TimePoint t, double value) {
  if (!points_.empty()) {
    if (t < last_sample_) return;  // late sample: ignore rather than reorder history
    last_sample_ = t;
    const double held = points_.back().value;
    const double steps = ToSeconds(t - ema_time_) / ToSeconds(interval_);
    ema_ = held + (ema_ - held) * std::pow(ema_decay_, steps);
    ema_time_ = t;
    if (held == value) return;  // the signal did not change
  } else {
    ema_ = value;
    ema_time_ = t;
    last_sample_ = t;
  }
  points_.push_back({t, value});
  // Drop points whose whole hold time is older than any window we can still be asked about.
  while (points_.size() > 1 && points_[1].time <= t - window_ - interval_) points_.pop_front();
}

TimePoint SignalWindow::WindowEnd(TimePoint now) const {
  // The latest value counts for at least one interval, so a sample taken just now has full weight.
  return std::max(now, last_sample_ + interval_);
}

TimePoint SignalWindow::SettledAt() const {
  if (points_.empty()) return TimePoint{};
  return points_.back().time + window_;
}

WindowSummary SignalWindow::Summarize(TimePoint now) const {
  WindowSummary s;
  if (points_.empty()) return s;
  s.empty = false;
  s.last = points_.back().value;
  const TimePoint end = WindowEnd(now);
  const TimePoint begin = end - window_;

  struct Piece {
    double value;
    double weight;
  };
  // Reused across calls: a placement pass summarizes every GPU's windows, and allocation dominated.
  thread_local std::vector<Piece> pieces;
  pieces.clear();
  double total = 0, weighted = 0;
  for (size_t i = 0; i < points_.size(); ++i) {
    const TimePoint from = std::max(points_[i].time, begin);
    const TimePoint to = i + 1 < points_.size() ? points_[i + 1].time : end;
    if (to <= from) continue;
    const double w = ToSeconds(to - from);
    pieces.push_back({points_[i].value, w});
    total += w;
    weighted += w * points_[i].value;
  }
  if (total <= 0) {
    s.mean = s.median = s.p95 = s.ema = s.last;
    return s;
  }
  s.mean = weighted / total;
  std::sort(pieces.begin(), pieces.end(),
            [](const Piece& a, const Piece& b) { return a.value < b.value; });
  // One pass for both quantiles.
  double acc = 0;
  bool have_median = false;
  s.p95 = pieces.back().value;
  for (const Piece& p : pieces) {
    acc += p.weight;
    if (!have_median && acc >= 0.5 * total - 1e-12) {
      s.median = p.value;
      have_median = true;
    }
    if (acc >= 0.95 * total - 1e-12) {
      s.p95 = p.value;
      break;
    }
  }
  const double steps = ToSeconds(end - ema_time_) / ToSeconds(interval_);
  s.ema = s.last + (ema_ - s.last) * std::pow(ema_decay_, steps);
  return s;
}

}  // namespace colo
