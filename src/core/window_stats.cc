#include "core/window_stats.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <type_traits>
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
      interval_seconds_(ToSeconds(interval)),
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
  // Where the new point's piece goes in by_value_: the place of a dropped one, or a new one.
  std::optional<size_t> room;
  if (!points_.empty()) {
    if (t < last_sample_) return;  // late sample: ignore rather than reorder history
    settled_at_.reset();
    memo_of_.reset();
    last_sample_ = t;
    const double held = points_.back().value;
    ema_ = held + (ema_ - held) * DecayOver(ToSeconds(t - ema_time_) / interval_seconds_);
    ema_time_ = t;
    if (held == value) return;  // the signal did not change
    if (points_.back().time == t) {
      // Two values for one instant: the later one wins; the earlier held for no time at all.
      ErasePiece(latest_);
      points_.pop_back();
      if (!points_.empty()) {
        latest_ = FindPiece(points_.back().time);
        by_value_[latest_].to = TimePoint::max();
      }
      return Add(t, value);
    }
    by_value_[latest_].to = t;
    // Drop points whose whole hold time is older than any window we can still be asked about
    // (never the latest, held until now).
    const TimePoint horizon = t - window_ - interval_;
    while (points_.size() > 1 && points_[1].time <= horizon) {
      if (room) ErasePiece(*room);
      room = FindPiece(points_.front().time);
      points_.pop_front();
    }
  } else {
    // An empty window has no summary or settling time remembered.
    ema_ = value;
    ema_time_ = t;
    last_sample_ = t;
  }
  points_.push_back({t, value});
  PlacePiece(room.value_or(by_value_.size()), {value, t, TimePoint::max()});
}

void SignalWindow::PlacePiece(size_t at, const Piece& piece) {
  // After every piece of its value or below: moved from `at` towards its place, as the window
  // holds few pieces (at a change a window or more after the last, one).
  if (at == by_value_.size()) by_value_.push_back(piece);
  for (; at > 0 && by_value_[at - 1].value > piece.value; --at) by_value_[at] = by_value_[at - 1];
  for (; at + 1 < by_value_.size() && by_value_[at + 1].value <= piece.value; ++at)
    by_value_[at] = by_value_[at + 1];
  by_value_[at] = piece;
  latest_ = at;
}

void SignalWindow::ErasePiece(size_t at) {
  by_value_.erase(by_value_.begin() + static_cast<std::ptrdiff_t>(at));
  if (at < latest_) --latest_;
}

size_t SignalWindow::FindPiece(TimePoint from) const {
  // Change points have distinct times, so the start time names a piece. The window holds a few
  // dozen pieces; a scan is cheaper than keeping a second index (the latest point's piece, which
  // every change reads, is kept: latest_).
  auto it = std::find_if(by_value_.begin(), by_value_.end(),
                         [&](const Piece& p) { return p.from == from; });
  COLO_CHECK(it != by_value_.end());
  return static_cast<size_t>(it - by_value_.begin());
}

TimePoint SignalWindow::WindowEnd(TimePoint now) const {
  // The latest value counts for at least one interval, so a sample taken just now has full weight.
  return std::max(now, last_sample_ + interval_);
}

TimePoint SignalWindow::ComputeSettledAt() const {
  if (points_.empty()) return TimePoint{};
  // Mean and quantiles stop moving one window after the last change; the EMA keeps closing in on
  // the latest value, and counts as settled once within kEmaSettled of it.
  const TimePoint window_settled = points_.back().time + window_;
  const double gap = std::abs(ema_ - points_.back().value);
  if (gap <= kEmaSettled || ema_decay_ <= 0) {
    settled_at_ = window_settled;
  } else {
    const double steps = std::log(kEmaSettled / gap) / log_decay_;
    const TimePoint ema_settled =
        ema_time_ + std::chrono::duration_cast<Duration>(interval_ * std::ceil(steps));
    settled_at_ = std::max(window_settled, ema_settled);
  }
  return *settled_at_;
}

bool SignalWindow::CannotFall(TimePoint now) const {
  if (points_.empty()) return true;
  const double last = points_.back().value;
  // The EMA is coming down. (Only an EMA above the latest value can: the decay, an exp, is
  // computed only then.)
  if (ema_ > last) {
    const double steps = ToSeconds(WindowEnd(now) - ema_time_) / interval_seconds_;
    if (last + (ema_ - last) * DecayOver(steps) > last) return false;
  }
  const TimePoint end = WindowEnd(now);
  const TimePoint begin = end - window_;
  for (auto it = by_value_.rbegin(); it != by_value_.rend() && it->value > last; ++it) {
    if (std::min(it->to, end) > std::max(it->from, begin)) return false;
  }
  return true;
}

void SignalWindow::Bounds(WindowSummary& low, WindowSummary& high) const {
  low = high = WindowSummary{};
  if (points_.empty()) return;
  double lowest = points_.front().value, highest = lowest;
  for (const Point& p : points_) {
    lowest = std::min(lowest, p.value);
    highest = std::max(highest, p.value);
  }
  const double last = points_.back().value;
  constexpr double kHair = 1e-9;
  low.empty = high.empty = false;
  low.last = last;
  high.last = last;
  low.mean = low.median = low.p95 = lowest - kHair;
  high.mean = high.median = high.p95 = highest + kHair;
  low.ema = std::min(ema_, last) - kHair;
  high.ema = std::max(ema_, last) + kHair;
}

WindowSummary SignalWindow::Summarize(TimePoint now, SummaryDepth depth) const {
  WindowSummary s;
  if (points_.empty()) return s;
  s.empty = false;
  s.last = points_.back().value;
  if (depth == SummaryDepth::kLast) return s;
  if (memo_of_ && memo_of_->second == depth &&
      (memo_of_->first == now || (memo_settled_ && now > memo_of_->first)))
    return memo_;
  memo_ = Compute(now, depth, s);
  memo_of_ = {now, depth};
  // The window holds only the latest value, and the EMA (where asked for) reads as it: time
  // alone changes nothing of the summary any more (each GPU is summarized at every pass).
  memo_settled_ = WindowEnd(now) - window_ >= points_.back().time &&
                  (depth != SummaryDepth::kAll || memo_.ema == memo_.last);
  return memo_;
}

bool SignalWindow::SummaryHoldsAfter(TimePoint taken, SummaryDepth depth) const {
  if (depth == SummaryDepth::kLast || points_.empty()) return true;
  return memo_of_ && memo_of_->second == depth && memo_of_->first <= taken && memo_settled_;
}

WindowSummary SignalWindow::Compute(TimePoint now, SummaryDepth depth, WindowSummary s) const {
  const TimePoint end = WindowEnd(now);
  const TimePoint begin = end - window_;
  // The pieces tile [max(first point, begin), end] without gaps, so the total weight is known
  // before the walk and both quantiles fall out of the same pass in value order.
  // Weights stay in integer microseconds: exact, and cheaper than converting every piece.
  const int64_t total = (end - std::max(points_.front().time, begin)).count();
  if (depth == SummaryDepth::kAll) {
    // An EMA within kEmaSettled of the latest value only comes closer: it reads as that value.
    s.ema = s.last;
    if (std::abs(ema_ - s.last) > kEmaSettled) {
      const double steps = ToSeconds(end - ema_time_) / interval_seconds_;
      s.ema = s.last + (ema_ - s.last) * DecayOver(steps);
      if (std::abs(s.ema - s.last) <= kEmaSettled) s.ema = s.last;
    }
  }
  if (total <= 0) {
    s.mean = s.last;
    if (depth == SummaryDepth::kAll) s.median = s.p95 = s.last;
    return s;
  }
  if (depth == SummaryDepth::kMean) {
    s.mean = Walk<int64_t>(begin, end, 1, nullptr, nullptr, 0) / static_cast<double>(total);
    return s;
  }
  // A quantile the walk never reaches (rounding at the very top) is the latest value.
  double values[4] = {s.last, s.last, s.last, s.last};
  if (quantiles_ == QuantileMethod::kNearestRank) {
    // The smallest value whose cumulative weight reaches `percent` of the total (exact integers):
    // the first at which it exceeds that weight less one microsecond.
    auto rank = [&](int percent) { return (total * percent + 99) / 100 - 1; };
    const int64_t positions[2] = {rank(50), rank(95)};
    s.mean = Walk<int64_t>(begin, end, 1, positions, values, 2) / static_cast<double>(total);
    s.median = values[0];
    s.p95 = values[1];
    return s;
  }
  // Linear: the window as n samples (one per interval; sampling jitter is spread evenly over
  // them), sample k covering [k, k+1) of the cumulative weight in value order, so the k-th order
  // statistic is the value at k + 0.5. Pandas reads position h = q*(n-1) and interpolates
  // between the order statistics floor(h) and floor(h)+1.
  const double n = std::max<double>(
      1.0, std::round(static_cast<double>(total) / static_cast<double>(interval_.count())));
  const double scale = n / static_cast<double>(total);
  auto position = [&](int percent) { return percent / 100.0 * (n - 1); };
  const double h50 = position(50), h95 = position(95);
  const double positions[4] = {std::floor(h50) + 0.5, std::min(std::floor(h50) + 1, n - 1) + 0.5,
                               std::floor(h95) + 0.5, std::min(std::floor(h95) + 1, n - 1) + 0.5};
  s.mean = Walk<double>(begin, end, scale, positions, values, 4) / static_cast<double>(total);
  s.median = values[0] + (h50 - std::floor(h50)) * (values[1] - values[0]);
  s.p95 = values[2] + (h95 - std::floor(h95)) * (values[3] - values[2]);
  return s;
}

template <typename Weight>
double SignalWindow::Walk(TimePoint begin, TimePoint end, Weight scale, const Weight* positions,
                          double* values, int count) const {
  // The positions in ascending order, closed by one the running weight never exceeds: each piece
  // then compares its running weight with the next position only.
  constexpr int kMost = 4;
  COLO_CHECK(count <= kMost);
  Weight at[kMost + 1] = {};
  int slot[kMost] = {};
  for (int i = 0; i < count; ++i) {
    int j = i;
    for (; j > 0 && at[j - 1] > positions[i]; --j) {
      at[j] = at[j - 1];
      slot[j] = slot[j - 1];
    }
    at[j] = positions[i];
    slot[j] = i;
  }
  at[count] = std::numeric_limits<Weight>::max();
  const int64_t from = begin.time_since_epoch().count(), to = end.time_since_epoch().count();
  double weighted = 0;
  Weight acc = 0;
  int next = 0;
  for (const Piece& p : by_value_) {
    const int64_t w = std::min(p.to.time_since_epoch().count(), to) -
                      std::max(p.from.time_since_epoch().count(), from);
    if (w <= 0) continue;
    weighted += static_cast<double>(w) * p.value;
    if constexpr (std::is_floating_point_v<Weight>) {
      acc += static_cast<double>(w) * scale;
    } else {
      acc += w;
    }
    while (acc > at[next]) values[slot[next++]] = p.value;
  }
  return weighted;
}

}  // namespace colo
