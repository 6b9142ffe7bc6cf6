#include "common/rng.h"

#include <gtest/gtest.h>

#include <cmath>

#include "common/clock.h"

namespace colo {
namespace {

TEST(Rng, SameSeedSameStream) {
  Rng a(42), b(42), c(43);
  bool differs = false;
  for (int i = 0; i < 100; ++i) {
    const uint64_t x = a.Next();
    EXPECT_EQ(x, b.Next());
    differs |= x != c.Next();
  }
  EXPECT_TRUE(differs);
}

TEST(Rng, DistributionsHaveTheirMoments) {
  Rng rng(7);
  double sum = 0, sum_exp = 0, sum_sq = 0;
  const int n = 200000;
  for (int i = 0; i < n; ++i) {
    const double u = rng.Uniform();
    ASSERT_GE(u, 0.0);
    ASSERT_LT(u, 1.0);
    sum += u;
    sum_exp += rng.Exponential(3.0);
    const double z = rng.Normal(0, 2);
    sum_sq += z * z;
  }
  EXPECT_NEAR(sum / n, 0.5, 0.01);
  EXPECT_NEAR(sum_exp / n, 3.0, 0.05);
  EXPECT_NEAR(std::sqrt(sum_sq / n), 2.0, 0.03);
}

TEST(ManualClock, MovesOnlyWhenTold) {
  ManualClock clock(AtSeconds(10));
  EXPECT_EQ(clock.Now(), AtSeconds(10));
  clock.Advance(Seconds(5));
  EXPECT_EQ(clock.Now(), AtSeconds(15));
  EXPECT_DEATH(clock.AdvanceTo(AtSeconds(1)), "invariant");
}

}  // namespace
}  // namespace colo
