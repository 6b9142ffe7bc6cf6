#include "core/window_stats.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <tuple>
#include <vector>

#include "common/rng.h"

namespace colo {
namespace {

TEST(SignalWindow, RegularSamplesGiveTheStatisticsOfTheLastN) {
  SignalWindow w(5, Seconds(1));
  const std::vector<double> values = {0.9, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6};
  for (size_t i = 0; i < values.size(); ++i) w.Add(AtSeconds(static_cast<double>(i)), values[i]);
  const WindowSummary s = w.Summarize(AtSeconds(6));
  // The last five samples: 0.2 .. 0.6; 0.9 and 0.1 have left the window.
  EXPECT_NEAR(s.mean, 0.4, 1e-9);
  EXPECT_NEAR(s.median, 0.4, 1e-9);
  EXPECT_NEAR(s.p95, 0.6, 1e-9);
  EXPECT_NEAR(s.last, 0.6, 1e-9);
  // Sample-based EMA with alpha = 2/(N+1) over the whole history.
  double ema = values[0];
  for (size_t i = 1; i < values.size(); ++i) ema = ema + (2.0 / 6.0) * (values[i] - ema);
  EXPECT_NEAR(s.ema, ema, 1e-9);
  EXPECT_NEAR(s.Risk(), 0.2 * s.mean + 0.3 * s.median + 0.3 * s.p95 + 0.2 * s.ema, 1e-12);
}

TEST(SignalWindow, SparseChangePointsEqualOneSecondSampling) {
  // A signal that is 0.2 until t=10, then 0.9: feeding only the change points must give the same
  // statistics as feeding a sample every second.
  SignalWindow sparse(30, Seconds(1)), dense(30, Seconds(1));
  sparse.Add(AtSeconds(0), 0.2);
  sparse.Add(AtSeconds(10), 0.9);
  for (int t = 0; t <= 25; ++t) dense.Add(AtSeconds(t), t < 10 ? 0.2 : 0.9);
  const WindowSummary a = sparse.Summarize(AtSeconds(26)), b = dense.Summarize(AtSeconds(25));
  EXPECT_NEAR(a.mean, b.mean, 1e-9);
  EXPECT_NEAR(a.median, b.median, 1e-9);
  EXPECT_NEAR(a.p95, b.p95, 1e-9);
  EXPECT_NEAR(a.ema, b.ema, 1e-9);
}

TEST(SignalWindow, SettlesWhenTheWindowAndTheEmaStopMoving) {
  SignalWindow w(30, Seconds(1));
  w.Add(AtSeconds(0), 0.5);
  w.Add(AtSeconds(100), 0.1);
  // Mean and quantiles settle at 130; the EMA needs longer to come within 1e-2 of 0.1.
  const TimePoint settled = w.SettledAt();
  EXPECT_GT(settled, AtSeconds(130));
  EXPECT_LE(std::abs(w.Summarize(settled).ema - 0.1), 1e-2);
  EXPECT_GT(std::abs(w.Summarize(settled - Seconds(1)).ema - 0.1), 1e-2);
  const WindowSummary later = w.Summarize(AtSeconds(130));
  EXPECT_NEAR(later.mean, 0.1, 1e-9);
  EXPECT_NEAR(later.p95, 0.1, 1e-9);
  // A signal that never changed is settled one window after its first sample.
  SignalWindow flat(30, Seconds(1));
  flat.Add(AtSeconds(0), 0.3);
  flat.Add(AtSeconds(10), 0.3);
  EXPECT_EQ(flat.SettledAt(), AtSeconds(30));
}

// The settling time is kept between samples (a scheduler asks for it after every pass): each
// sample that changes the signal moves it, asked before or not.
TEST(SignalWindow, ASettlingTimeKeptMovesWithTheNextChange) {
  SignalWindow w(30, Seconds(1));
  w.Add(AtSeconds(0), 0.3);
  EXPECT_EQ(w.SettledAt(), AtSeconds(30));
  w.Add(AtSeconds(10), 0.3);  // the same value: nothing moves
  EXPECT_EQ(w.SettledAt(), AtSeconds(30));
  w.Add(AtSeconds(20), 0.1);
  EXPECT_GT(w.SettledAt(), AtSeconds(50));  // the window, then the EMA, settle after the change
  w.Add(AtSeconds(200), 0.1);               // settled long since: the window holds 0.1 alone
  EXPECT_LE(w.SettledAt(), AtSeconds(200));
  w.Add(AtSeconds(210), 0.6);
  EXPECT_GT(w.SettledAt(), AtSeconds(240));
  // A late sample changes nothing; a second value for one instant replaces the first.
  const TimePoint settled = w.SettledAt();
  w.Add(AtSeconds(205), 0.0);
  EXPECT_EQ(w.SettledAt(), settled);
  w.Add(AtSeconds(300), 0.9);
  const TimePoint after_09 = w.SettledAt();
  w.Add(AtSeconds(300), 0.6);  // 0.6 held on: the signal did not change at 300 after all
  EXPECT_NE(w.SettledAt(), after_09);
  EXPECT_LE(w.SettledAt(), settled);
}

// CannotFall is what lets the scheduler skip looking again at a GPU that just got busier: when it
// says so, the risk must not drop at any later time; when the GPU got quieter it must not say so.
TEST(SignalWindow, CannotFallOnlyWhenEveryStatisticCanOnlyRise) {
  const TimePoint t0{};
  SignalWindow rising(30, Seconds(1));
  rising.Add(t0, 0.2);
  rising.Add(t0 + Seconds(40), 0.9);
  EXPECT_TRUE(rising.CannotFall(t0 + Seconds(40)));
  double before = rising.Summarize(t0 + Seconds(40)).Risk();
  for (int s = 41; s < 80; ++s) {
    const double risk = rising.Summarize(t0 + Seconds(s)).Risk();
    EXPECT_GE(risk, before - 1e-12) << "at " << s;
    before = risk;
  }
  SignalWindow falling(30, Seconds(1));
  falling.Add(t0, 0.9);
  falling.Add(t0 + Seconds(40), 0.2);
  EXPECT_FALSE(falling.CannotFall(t0 + Seconds(40)));
  EXPECT_LT(falling.Summarize(t0 + Seconds(75)).Risk(), falling.Summarize(t0 + Seconds(41)).Risk());
  // Down, then up but not to the old high inside the window: the high value will leave.
  SignalWindow dip(30, Seconds(1));
  dip.Add(t0, 0.9);
  dip.Add(t0 + Seconds(10), 0.1);
  dip.Add(t0 + Seconds(20), 0.5);
  EXPECT_FALSE(dip.CannotFall(t0 + Seconds(20)));
  EXPECT_TRUE(SignalWindow(30, Seconds(1)).CannotFall(t0));
}

TEST(SignalWindow, CannotFallHoldsOnRandomHistories) {
  Rng rng(11);
  const TimePoint t0{};
  int checked = 0;
  for (int trial = 0; trial < 2000; ++trial) {
    SignalWindow w(10, Seconds(1));
    TimePoint t = t0;
    const int changes = 1 + static_cast<int>(rng.Below(6));
    for (int c = 0; c < changes; ++c) {
      t += Seconds(static_cast<int64_t>(rng.Below(8)));
      w.Add(t, std::round(rng.Uniform() * 10) / 10);
    }
    if (!w.CannotFall(t)) continue;
    ++checked;
    double before = w.Summarize(t).Risk();
    for (int s = 1; s <= 40; ++s) {
      const double risk = w.Summarize(t + Seconds(s)).Risk();
      ASSERT_GE(risk, before - 1e-9) << "trial " << trial << " step " << s;
      before = risk;
    }
  }
  EXPECT_GT(checked, 200);
}

TEST(SignalWindow, ASummaryHoldsLaterOnlyOnceTimeAloneChangesNothing) {
  // What a kept view relies on to keep a GPU's summaries past their instant: where the window
  // says they hold, a summary taken at any later instant is the same to the bit.
  SignalWindow w(5, Seconds(1));
  for (int i = 0; i < 8; ++i) w.Add(AtSeconds(i), i % 2 ? 0.9 : 0.2);
  for (const SummaryDepth depth : {SummaryDepth::kMean, SummaryDepth::kAll}) {
    // Within the window the statistics still slide.
    const WindowSummary sliding = w.Summarize(AtSeconds(9), depth);
    EXPECT_FALSE(w.SummaryHoldsAfter(AtSeconds(9), depth));
    EXPECT_NE(w.Summarize(AtSeconds(10), depth).mean, sliding.mean);
  }
  // Long after: only the latest value is left, and the EMA reads as it.
  const WindowSummary settled = w.Summarize(AtSeconds(200), SummaryDepth::kAll);
  EXPECT_TRUE(w.SummaryHoldsAfter(AtSeconds(200), SummaryDepth::kAll));
  // Asked at another depth since: not the summary taken then.
  EXPECT_FALSE(w.SummaryHoldsAfter(AtSeconds(200), SummaryDepth::kMean));
  const WindowSummary later = w.Summarize(AtSeconds(5000), SummaryDepth::kAll);
  EXPECT_EQ(later.mean, settled.mean);
  EXPECT_EQ(later.median, settled.median);
  EXPECT_EQ(later.p95, settled.p95);
  EXPECT_EQ(later.ema, settled.ema);
  // The latest value alone always holds until the next sample.
  EXPECT_TRUE(w.SummaryHoldsAfter(AtSeconds(9), SummaryDepth::kLast));
  // A sample ends it.
  w.Add(AtSeconds(5001), 0.5);
  EXPECT_FALSE(w.SummaryHoldsAfter(AtSeconds(200), SummaryDepth::kAll));
}

TEST(SignalWindow, NoLaterSummaryLeavesItsBounds) {
  // Without a new sample every later summary, with either quantile method, reads within Bounds():
  // what lets a scheduler know a GPU's gate answers the same however its windows slide.
  Rng rng(17);
  for (const QuantileMethod method : {QuantileMethod::kNearestRank, QuantileMethod::kLinear}) {
    for (int trial = 0; trial < 500; ++trial) {
      SignalWindow w(10, Seconds(1), method);
      TimePoint t{};
      const int changes = 1 + static_cast<int>(rng.Below(12));
      for (int c = 0; c < changes; ++c) {
        t += Seconds(static_cast<int64_t>(rng.Below(8)));
        w.Add(t, std::round(rng.Uniform() * 100) / 100);
      }
      WindowSummary low, high;
      w.Bounds(low, high);
      for (int s = 0; s <= 60; ++s) {
        const WindowSummary at = w.Summarize(t + Seconds(s));
        for (const auto& [value, floor, ceiling] :
             {std::tuple{at.mean, low.mean, high.mean},
              std::tuple{at.median, low.median, high.median}, std::tuple{at.p95, low.p95, high.p95},
              std::tuple{at.ema, low.ema, high.ema}}) {
          ASSERT_GE(value, floor) << "trial " << trial << " step " << s;
          ASSERT_LE(value, ceiling) << "trial " << trial << " step " << s;
        }
        ASSERT_GE(at.Risk(), low.Risk());
        ASSERT_LE(at.Risk(), high.Risk());
      }
    }
  }
}

TEST(SignalWindow, EmptyWindowSaysSo) {
  SignalWindow w(30, Seconds(1));
  EXPECT_TRUE(w.Summarize(AtSeconds(1)).empty);
}

// The window keeps its pieces ordered by value instead of sorting at each summary; it must agree
// with the plain definition: the last N one-second samples, sorted.
TEST(SignalWindow, AgreesWithSortingTheLastNSamples) {
  Rng rng(11);
  for (int trial = 0; trial < 200; ++trial) {
    const int n = 1 + static_cast<int>(rng.Below(40));
    SignalWindow w(n, Seconds(1));
    std::vector<double> samples;
    const int length = 1 + static_cast<int>(rng.Below(120));
    for (int t = 0; t < length; ++t) {
      // Few distinct levels, so repeats (which the window merges) and ties both happen.
      const double v = static_cast<double>(rng.Below(6)) / 5.0;
      samples.push_back(v);
      w.Add(AtSeconds(t), v);
      if (rng.Below(10) == 0) {  // a second value for the same instant replaces the first
        const double again = static_cast<double>(rng.Below(6)) / 5.0;
        samples.back() = again;
        w.Add(AtSeconds(t), again);
      }
    }
    std::vector<double> last(samples.end() - std::min<ptrdiff_t>(n, length), samples.end());
    std::sort(last.begin(), last.end());
    double sum = 0;
    for (double v : last) sum += v;
    const auto quantile = [&](double q) {
      // Smallest value whose cumulative weight reaches q of the total.
      for (size_t i = 0; i < last.size(); ++i) {
        if (static_cast<double>(i + 1) >= q * static_cast<double>(last.size()) - 1e-9)
          return last[i];
      }
      return last.back();
    };
    const WindowSummary s = w.Summarize(AtSeconds(length - 1));
    ASSERT_NEAR(s.mean, sum / static_cast<double>(last.size()), 1e-9) << "trial " << trial;
    ASSERT_NEAR(s.median, quantile(0.5), 1e-12) << "trial " << trial;
    ASSERT_NEAR(s.p95, quantile(0.95), 1e-12) << "trial " << trial;
    ASSERT_EQ(s.last, samples.back());
  }
}

// Under CARMA's preset the median and p95 are pandas' Series.quantile (linear interpolation
// between order statistics at position q*(n-1)); each expected value is worked out by hand.
WindowSummary Linear(int samples, const std::vector<std::pair<double, double>>& at_value,
                     double now) {
  SignalWindow w(samples, Seconds(1), QuantileMethod::kLinear);
  for (const auto& [t, v] : at_value) w.Add(AtSeconds(t), v);
  return w.Summarize(AtSeconds(now));
}

TEST(SignalWindowLinear, MatchesPandasQuantiles) {
  // [0.2 0.3 0.4 0.5 0.6]: median h=2 -> 0.4; p95 h=3.8 -> 0.5 + 0.8*(0.6-0.5) = 0.58.
  WindowSummary s = Linear(5, {{0, 0.2}, {1, 0.3}, {2, 0.4}, {3, 0.5}, {4, 0.6}}, 4);
  EXPECT_NEAR(s.median, 0.4, 1e-9);
  EXPECT_NEAR(s.p95, 0.58, 1e-9);
  EXPECT_NEAR(s.mean, 0.4, 1e-9);
  // Even count, out of order: sorted [0.1 0.3 0.5 0.9]; median h=1.5 -> 0.3 + 0.5*0.2 = 0.4;
  // p95 h=2.85 -> 0.5 + 0.85*0.4 = 0.84. (Nearest rank: 0.3 and 0.9.)
  s = Linear(4, {{0, 0.1}, {1, 0.9}, {2, 0.3}, {3, 0.5}}, 3);
  EXPECT_NEAR(s.median, 0.4, 1e-9);
  EXPECT_NEAR(s.p95, 0.84, 1e-9);
  // A window not yet full reads the samples it has: [0.1 0.4 0.7]; median 0.4; p95 h=1.9 ->
  // 0.4 + 0.9*0.3 = 0.67.
  s = Linear(30, {{0, 0.7}, {1, 0.1}, {2, 0.4}}, 2);
  EXPECT_NEAR(s.median, 0.4, 1e-9);
  EXPECT_NEAR(s.p95, 0.67, 1e-9);
  // One sample is its own quantiles.
  s = Linear(30, {{0, 0.5}}, 0);
  EXPECT_NEAR(s.median, 0.5, 1e-9);
  EXPECT_NEAR(s.p95, 0.5, 1e-9);
  // Repeated values: [0.2 0.2 0.2 0.9 0.9]: median 0.2; p95 h=3.8 -> 0.9.
  s = Linear(5, {{0, 0.2}, {1, 0.2}, {2, 0.2}, {3, 0.9}, {4, 0.9}}, 4);
  EXPECT_NEAR(s.median, 0.2, 1e-9);
  EXPECT_NEAR(s.p95, 0.9, 1e-9);
}

TEST(SignalWindowLinear, ChangePointsEqualOneSecondSampling) {
  // 0.2 for 15 s, then 0.9 for 15 s, in a 30-sample window: sorted 15x0.2, 15x0.9; median
  // h=14.5 -> 0.2 + 0.5*0.7 = 0.55 (nearest rank says 0.2); p95 h=27.55 -> 0.9.
  SignalWindow sparse(30, Seconds(1), QuantileMethod::kLinear);
  SignalWindow dense(30, Seconds(1), QuantileMethod::kLinear);
  sparse.Add(AtSeconds(0), 0.2);
  sparse.Add(AtSeconds(15), 0.9);
  for (int t = 0; t < 30; ++t) dense.Add(AtSeconds(t), t < 15 ? 0.2 : 0.9);
  // (A change-point feed's latest value holds until `now`; a sample's for one interval.)
  for (const WindowSummary& s : {sparse.Summarize(AtSeconds(30)), dense.Summarize(AtSeconds(29))}) {
    EXPECT_NEAR(s.median, 0.55, 1e-9);
    EXPECT_NEAR(s.p95, 0.9, 1e-9);
  }
  SignalWindow nearest(30, Seconds(1));
  nearest.Add(AtSeconds(0), 0.2);
  nearest.Add(AtSeconds(15), 0.9);
  EXPECT_NEAR(nearest.Summarize(AtSeconds(30)).median, 0.2, 1e-9);
}

TEST(SignalWindowLinear, SamplingJitterStillCountsOneSampleEach) {
  // The daemon's samples drift around their second: five samples are still five samples.
  // [0.2 0.3 0.4 0.5 0.6] taken at 0, 1.1, 1.9, 3.05, 4: median 0.4, p95 0.58.
  const WindowSummary s = Linear(5, {{0, 0.2}, {1.1, 0.3}, {1.9, 0.4}, {3.05, 0.5}, {4, 0.6}}, 4);
  EXPECT_NEAR(s.median, 0.4, 1e-9);
  EXPECT_NEAR(s.p95, 0.58, 1e-9);
}

// The statistics computed from the samples directly, each by its own walk over the pieces in
// value order with the arithmetic Summarize has always used: the one merged walk must agree to
// the bit, or simulations would no longer reproduce.
struct Sample {
  int64_t micros;
  double value;
};
WindowSummary Reference(const std::vector<Sample>& samples, int n, QuantileMethod method,
                        int64_t now) {
  const int64_t interval = 1'000'000, window = n * interval;
  struct Piece {
    double value;
    int64_t from, to;
  };
  std::vector<Piece> pieces;
  for (const Sample& s : samples) {
    if (!pieces.empty() && pieces.back().value == s.value) continue;  // held, not a change
    if (!pieces.empty()) pieces.back().to = s.micros;
    pieces.push_back({s.value, s.micros, INT64_MAX});
  }
  const int64_t end = std::max(now, samples.back().micros + interval), begin = end - window;
  const int64_t total = end - std::max(pieces.front().from, begin);
  std::stable_sort(pieces.begin(), pieces.end(),
                   [](const Piece& a, const Piece& b) { return a.value < b.value; });
  const auto weight = [&](const Piece& p) {
    return std::max<int64_t>(0, std::min(p.to, end) - std::max(p.from, begin));
  };
  WindowSummary s;
  s.empty = false;
  s.last = samples.back().value;
  if (total <= 0) {
    s.mean = s.median = s.p95 = s.last;
    return s;
  }
  double weighted = 0;
  for (const Piece& p : pieces)
    if (weight(p) > 0) weighted += static_cast<double>(weight(p)) * p.value;
  s.mean = weighted / static_cast<double>(total);
  const auto quantile = [&](int percent) {
    if (method == QuantileMethod::kNearestRank) {
      const int64_t at = (total * percent + 99) / 100;
      int64_t acc = 0;
      for (const Piece& p : pieces) {
        acc += weight(p);
        if (weight(p) > 0 && acc >= at) return p.value;
      }
      return s.last;
    }
    const double count = std::max<double>(
        1.0, std::round(static_cast<double>(total) / static_cast<double>(interval)));
    const double scale = count / static_cast<double>(total);
    const double h = percent / 100.0 * (count - 1);
    const double lower_at = std::floor(h) + 0.5;
    const double upper_at = std::min(std::floor(h) + 1, count - 1) + 0.5;
    double acc = 0, lower = s.last, upper = lower;
    bool have_lower = false;
    for (const Piece& p : pieces) {
      if (weight(p) <= 0) continue;
      acc += static_cast<double>(weight(p)) * scale;
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
  };
  s.median = quantile(50);
  s.p95 = quantile(95);
  return s;
}

TEST(SignalWindow, OneWalkGivesEveryStatisticToTheBit) {
  Rng rng(11);
  for (QuantileMethod method : {QuantileMethod::kNearestRank, QuantileMethod::kLinear}) {
    for (int trial = 0; trial < 300; ++trial) {
      const int n = 1 + static_cast<int>(rng.Below(40));
      SignalWindow w(n, Seconds(1), method);
      std::vector<Sample> samples;
      int64_t t = static_cast<int64_t>(rng.Below(5'000'000));
      const int count = 1 + static_cast<int>(rng.Below(120));
      for (int i = 0; i < count; ++i) {
        // Regular 1 s samples, jittered ones, and the simulator's sparse change points; values
        // from a small set (ties, repeats) or anywhere.
        const uint64_t kind = rng.Below(3);
        t += kind == 0   ? 1'000'000
             : kind == 1 ? 1 + static_cast<int64_t>(rng.Below(2'000'000))
                         : static_cast<int64_t>(rng.Below(40'000'000)) + 1;
        const double value = rng.Below(2) ? static_cast<double>(rng.Below(5)) / 4 : rng.Uniform();
        samples.push_back({t, value});
        w.Add(TimePoint(Duration(t)), value);
        for (int64_t after : {int64_t{0}, int64_t{400'000}, int64_t{7'000'000}}) {
          const TimePoint now(Duration(t + after));
          const WindowSummary got = w.Summarize(now);
          const WindowSummary want = Reference(samples, n, method, t + after);
          ASSERT_EQ(got.mean, want.mean) << "trial " << trial << " sample " << i;
          ASSERT_EQ(got.median, want.median) << "trial " << trial << " sample " << i;
          ASSERT_EQ(got.p95, want.p95) << "trial " << trial << " sample " << i;
          ASSERT_EQ(got.last, want.last);
          // Shallower summaries give the same figures they compute, and nothing else.
          const WindowSummary mean = w.Summarize(now, SummaryDepth::kMean);
          ASSERT_EQ(mean.mean, got.mean);
          ASSERT_EQ(mean.last, got.last);
          ASSERT_EQ(mean.median, 0.0);
          ASSERT_EQ(mean.ema, 0.0);
          const WindowSummary last = w.Summarize(now, SummaryDepth::kLast);
          ASSERT_EQ(last.last, got.last);
          ASSERT_FALSE(last.empty);
          ASSERT_EQ(last.mean, 0.0);
        }
      }
    }
  }
}

}  // namespace
}  // namespace colo
