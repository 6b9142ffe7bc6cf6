#include "core/window_stats.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <vector>

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

TEST(SignalWindow, SettlesOneWindowAfterTheLastChange) {
  SignalWindow w(30, Seconds(1));
  w.Add(AtSeconds(0), 0.5);
  w.Add(AtSeconds(100), 0.1);
  EXPECT_EQ(w.SettledAt(), AtSeconds(130));
  const WindowSummary settled = w.Summarize(AtSeconds(200));
  EXPECT_NEAR(settled.mean, 0.1, 1e-9);
  EXPECT_NEAR(settled.p95, 0.1, 1e-9);
  EXPECT_NEAR(settled.ema, 0.1, 1e-3);
}

TEST(SignalWindow, EmptyWindowSaysSo) {
  SignalWindow w(30, Seconds(1));
  EXPECT_TRUE(w.Summarize(AtSeconds(1)).empty);
}

}  // namespace
}  // namespace colo
