#include "core/window_stats.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "common/check.h"

namespace colo {
namespace {
// Within this distance of the latest value the EMA is taken to have reached it. Past that point a
// window's summary stops changing with time, which lets the scheduler know when to look again.
constexpr double kEmaSettled = 1e-2;
}  // namespace

SignalWindow::SignalWindow(int samples, Duration interval, QuantileMethod quantiles)
    : window_(interval * samples),
      interval_(interval),
      quantiles_(quantiles),
      ema_decay_(1.0 - 2.0 / (samples + 1.0)),
      log_decay_(ema_decay_ > 0 ? std::log(ema_decay_) : 0.0) {
  COLO_CHECK(samples > 0 && interval > Duration::zero());
}

double SignalWindow::DecayOver(double steps) const {
  if (steps <= 0) return 1.0;
  if (ema_decay_ <= 0) return 0.0;  // a window of one sample: the EMA is the last value
  return std::exp(steps * log_decay_);
}

void SignalWindow::Add(TimePoint t, double value) {
  settled_at_.reset();
  if (!points_.empty()) {
    if (t < last_sample_) return;  // late sample: ignore rather than reorder history
    last_sample_ = t;
    const double held = points_.back().value;
    const double steps = ToSeconds(t - ema_time_) / ToSeconds(interval_);
    ema_ = held + (ema_ - held) * DecayOver(steps);
    ema_time_ = t;
    if (held == value) return;  // the signal did not change
    if (points_.back().time == t) {
      // Two values for one instant: the later one wins; the earlier held for no time at all.
      by_value_.erase(FindPiece(t));
      points_.pop_back();
      if (!points_.empty()) FindPiece(points_.back().time)->to = TimePoint::max();
      return Add(t, value);
    }
    FindPiece(points_.back().time)->to = t;
  } else {
    ema_ = value;
    ema_time_ = t;
    last_sample_ = t;
  }
  points_.push_back({t, value});
  InsertPiece({value, t, TimePoint::max()});
  // Drop points whose whole hold time is older than any window we can still be asked about.
  while (points_.size() > 1 && points_[1].time <= t - window_ - interval_) {
    by_value_.erase(FindPiece(points_.front().time));
    points_.pop_front();
  }
}

void SignalWindow::InsertPiece(const Piece& piece) {
  auto at = std::upper_bound(by_value_.begin(), by_value_.end(), piece.value,
                             [](double v, const Piece& p) { return v < p.value; });
  by_value_.insert(at, piece);
}

std::vector<SignalWindow::Piece>::iterator SignalWindow::FindPiece(TimePoint from) {
  // Change points have distinct times, so the start time names a piece. The window holds a few
  // dozen pieces; a scan is cheaper than keeping a second index.
  auto it = std::find_if(by_value_.begin(), by_value_.end(),
                         [&](const Piece& p) { return p.from == from; });
  COLO_CHECK(it != by_value_.end());
  return it;
}

TimePoint SignalWindow::WindowEnd(TimePoint now) const {
  // The latest value counts for at least one interval, so a sample taken just now has full weight.
  return std::max(now, last_sample_ + interval_);
}

TimePoint SignalWindow::SettledAt() const {
  if (points_.empty()) return TimePoint{};
  if (settled_at_) return *settled_at_;
  // Mean and quantiles stop moving one window after the last change; the EMA keeps closing in on
  // the latest value, and counts as settled once within kEmaSettled of it.
  const TimePoint window_settled = points_.back().time + window_;
  const double gap = std::abs(ema_ - points_.back().value);
  if (gap <= kEmaSettled || ema_decay_ <= 0) return window_settled;
  const double steps = std::log(kEmaSettled / gap) / log_decay_;
  const TimePoint ema_settled =
      ema_time_ + std::chrono::duration_cast<Duration>(interval_ * std::ceil(steps));
  settled_at_ = std::max(window_settled, ema_settled);
  return *settled_at_;
}

bool SignalWindow::CannotFall(TimePoint now) const {
  if (points_.empty()) return true;
  const double last = points_.back().value;
  const double steps = ToSeconds(WindowEnd(now) - ema_time_) / ToSeconds(interval_);
  if (last + (ema_ - last) * DecayOver(steps) > last) return false;  // the EMA is coming down
  const TimePoint end = WindowEnd(now);
  const TimePoint begin = end - window_;
  for (auto it = by_value_.rbegin(); it != by_value_.rend() && it->value > last; ++it) {
    if (std::min(it->to, end) > std::max(it->from, begin)) return false;
  }
  return true;
}

WindowSummary SignalWindow::Summarize(TimePoint now) const {
  WindowSummary s;
  if (points_.empty()) return s;
  s.empty = false;
  s.last = points_.back().value;
  const TimePoint end = WindowEnd(now);
  const TimePoint begin = end - window_;
  // The pieces tile [max(first point, begin), end] without gaps, so the total weight is known
  // before the walk and both quantiles fall out of one pass in value order.
  // Weights stay in integer microseconds: exact, and cheaper than converting every piece.
  const int64_t total = (end - std::max(points_.front().time, begin)).count();
  const double steps = ToSeconds(end - ema_time_) / ToSeconds(interval_);
  s.ema = s.last + (ema_ - s.last) * DecayOver(steps);
  if (std::abs(s.ema - s.last) <= kEmaSettled) s.ema = s.last;
  if (total <= 0) {
    s.mean = s.median = s.p95 = s.last;
    return s;
  }
  double weighted = 0;
  for (const Piece& p : by_value_) {
    const int64_t w = (std::min(p.to, end) - std::max(p.from, begin)).count();
    if (w > 0) weighted += static_cast<double>(w) * p.value;
  }
  s.mean = weighted / static_cast<double>(total);
  s.median = Quantile(50, begin, end, total);
  s.p95 = Quantile(95, begin, end, total);
  return s;
}

double SignalWindow::Quantile(int percent, TimePoint begin, TimePoint end, int64_t total) const {
  auto weight = [&](const Piece& p) {
    return std::max<int64_t>(0, (std::min(p.to, end) - std::max(p.from, begin)).count());
  };
  if (quantiles_ == QuantileMethod::kNearestRank) {
    // Smallest value whose cumulative weight reaches `percent` of the total (exact integers).
    const int64_t at = (total * percent + 99) / 100;
    int64_t acc = 0;
    for (const Piece& p : by_value_) {
      acc += weight(p);
      if (weight(p) > 0 && acc >= at) return p.value;
    }
    return points_.back().value;
  }
  // Linear: the window as n samples (one per interval; sampling jitter is spread evenly over
  // them), sample k covering [k, k+1) of the cumulative weight in value order, so the k-th order
  // statistic is the value at k + 0.5. Pandas reads position h = q*(n-1) and interpolates
  // between the order statistics floor(h) and floor(h)+1.
  const double n = std::max<double>(
      1.0, std::round(static_cast<double>(total) / static_cast<double>(interval_.count())));
  const double scale = n / static_cast<double>(total);
  const double h = percent / 100.0 * (n - 1);
  const double lower_at = std::floor(h) + 0.5;
  const double upper_at = std::min(std::floor(h) + 1, n - 1) + 0.5;
  double acc = 0, lower = points_.back().value, upper = lower;
  bool have_lower = false;
  for (const Piece& p : by_value_) {
    const int64_t w = weight(p);
    if (w <= 0) continue;
    acc += static_cast<double>(w) * scale;
    if (!have_lower && acc > lower_at) {
      lower = p.value;
      have_lower = true;
    }
    if (acc > upper_at) {
      upper = p.value;
      break;
    }
  }
  return lower + (h - std::floor(h)) * (upper - lower);
}

}  // namespace colo
