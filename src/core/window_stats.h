// Window statistics of a GPU signal (SMACT, SMOCC, DRAMA) over the last N sample intervals.
//
// Samples are treated as a piecewise-constant signal: each value holds until the next sample. The
// daemon feeds one sample per interval, which makes these the plain statistics of the last N
// samples; the simulator feeds a sample only when the signal changes, and gets the same numbers
// without one event per second.
//
// Summaries are taken at every placement pass for every GPU, so the window keeps its pieces ordered
// by value as they arrive: a summary is then one linear walk, with no sorting.
#pragma once

#include <optional>
#include <utility>
#include <vector>

#include "common/ring.h"
#include "common/units.h"

namespace colo {

// How the median and p95 of a window are read off its samples.
enum class QuantileMethod {
  // The smallest value whose cumulative weight reaches the fraction (nearest rank: a value the
  // signal took).
  kNearestRank,
  // pandas' and numpy's default: position q*(n-1) among the n samples in order, interpolated
  // linearly between the two order statistics around it (CARMA's monitor).
  kLinear,
};

// How much of a window a summary computes. `last` (and whether the window is empty) is always
// there; the mean takes a walk over the window, the median, p95 and EMA come with the same walk at
// kAll. Placement asks only for what its policy reads: this runs for every GPU at every pass.
enum class SummaryDepth {
  kLast,
  kMean,
  kAll,
};

// A statistic the depth did not ask for stays 0.
struct WindowSummary {
  double last = 0;
  double mean = 0;
  double median = 0;
  double p95 = 0;
  double ema = 0;
  bool empty = true;
  // The seeds' "risk" blend: 0.2*mean + 0.3*median + 0.3*p95 + 0.2*EMA.
  double Risk() const { return 0.2 * mean + 0.3 * median + 0.3 * p95 + 0.2 * ema; }
};

class SignalWindow {
 public:
  SignalWindow(int samples, Duration interval,
               QuantileMethod quantiles = QuantileMethod::kNearestRank);

  void Add(TimePoint t, double value);
  WindowSummary Summarize(TimePoint now, SummaryDepth depth = SummaryDepth::kAll) const;
  // The time from which the window holds only the latest value (its statistics stop changing).
  // Kept until the next Add: a scheduler waiting on the utilization gate asks for every GPU's
  // after each pass.
  TimePoint SettledAt() const { return settled_at_ ? *settled_at_ : ComputeSettledAt(); }
  // True when, without new samples, no statistic of the window can fall after `now`: the latest
  // value is at least every value still in the window and the EMA. Then time alone only raises
  // the window's statistics, and a gate that excludes the GPU now keeps excluding it.
  bool CannotFall(TimePoint now) const;
  // Whether the summary it gave at `taken`, at `depth`, with no sample since, is the one it gives
  // at every later instant: it held only its latest value then, and its EMA read as that value.
  bool SummaryHoldsAfter(TimePoint taken, SummaryDepth depth) const;
  // Summaries no later summary can read below (`low`) or above (`high`) without a new sample:
  // every statistic of a window is within the values it still holds and, for the EMA, between
  // the EMA now and the latest value. (Each a hair wide of the mark, for rounding.)
  void Bounds(WindowSummary& low, WindowSummary& high) const;
  bool empty() const { return points_.empty(); }

 private:
  struct Point {
    TimePoint time;
    double value;
  };
  // A piece of the signal: `value` held from `from` until `to` (TimePoint::max() for the latest).
  struct Piece {
    double value;
    TimePoint from;
    TimePoint to;
  };
  TimePoint WindowEnd(TimePoint now) const;
  TimePoint ComputeSettledAt() const;
  // Summarize's work past the latest value, which `s` holds.
  WindowSummary Compute(TimePoint now, SummaryDepth depth, WindowSummary s) const;
  // Puts `piece` in by_value_, in its order, taking the place of the piece at `at` (a dropped
  // one) or, at by_value_.size(), a new place.
  void PlacePiece(size_t at, const Piece& piece);
  // Takes the piece at `at` out of by_value_.
  void ErasePiece(size_t at);
  size_t FindPiece(TimePoint from) const;

  // One walk over the pieces in value order, over [begin, end): the weighted sum of the values
  // (for the mean), and for each of `count` positions the value of the first piece at which the
  // running weight, in units of `Weight` (each piece's microseconds times `scale`), exceeds it.
  template <typename Weight>
  double Walk(TimePoint begin, TimePoint end, Weight scale, const Weight* positions, double* values,
              int count) const;

  Duration window_;
  Duration interval_;
  double interval_seconds_;
  QuantileMethod quantiles_;
  double ema_decay_;  // per interval: 1 - 2/(N+1)
  double log_decay_;  // its logarithm: decay^steps = exp(steps * log_decay_)
  double DecayOver(double steps) const;
  mutable std::optional<TimePoint> settled_at_;  // SettledAt() until the next Add
  // The last summary and what it was asked for, until the next Add: a pass looks at a GPU more
  // than once at one instant (the simulator's reads of a server, then its pass), and a settled
  // window's summary holds at every later instant.
  mutable WindowSummary memo_;
  mutable std::optional<std::pair<TimePoint, SummaryDepth>> memo_of_;
  mutable bool memo_settled_ = false;  // the memo holds for every later time too
  Ring<Point> points_;                 // change points, oldest first
  std::vector<Piece> by_value_;        // the same points as pieces, ordered by value
  size_t latest_ = 0;                  // the latest point's piece in by_value_ (when there is one)
  double ema_ = 0;                     // EMA of the signal up to ema_time_
  TimePoint ema_time_;
  TimePoint last_sample_;  // repeated values are not stored, but their time still counts
};

}  // namespace colo
