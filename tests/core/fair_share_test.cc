// Fair share's usage, factors and limits (core/fair_share.h); the scheduler's queue order, limits
// and backfill are tested in scheduler_test.cc.
#include "core/fair_share.h"

#include <gtest/gtest.h>

#include <cmath>

namespace colo {
namespace {

TEST(UsageLedger, UsageHalvesEveryHalfLife) {
  UsageLedger ledger(Seconds(3600));
  ledger.AddRate("alice", 2.0, TimePoint{});
  ledger.AddRate("alice", -2.0, TimePoint{} + Seconds(60));
  const double after_run = ledger.Usage("alice", TimePoint{} + Seconds(60));
  EXPECT_NEAR(after_run, 120.0, 1.0) << "two GPUs for a minute, barely decayed";
  EXPECT_NEAR(ledger.Usage("alice", TimePoint{} + Seconds(60 + 3600)), after_run / 2, 1e-6);
  EXPECT_NEAR(Decay(100, Seconds(7200), Seconds(3600)), 25, 1e-9);
}

TEST(UsageLedger, AnOpenAccountKeepsTheRulesOfOneFoundByName) {
  UsageLedger by_ref(Seconds(3600)), by_name(Seconds(3600));
  const UsageLedger::AccountRef alice = by_ref.Open("alice");
  const TimePoint t0{};
  // Rates changed at one instant and later: the two ledgers agree to the bit.
  for (const auto& [delta, at] :
       {std::pair{1.5, t0}, std::pair{0.25, t0}, std::pair{-0.25, t0 + Seconds(90)}}) {
    EXPECT_TRUE(by_ref.AddRate(alice, delta, at));
    by_name.AddRate("alice", delta, at);
    EXPECT_EQ(by_ref.Usage("alice", at + Seconds(30)), by_name.Usage("alice", at + Seconds(30)));
  }
  EXPECT_EQ(by_ref.Rate("alice"), 1.5);
  // Nothing held, and next to no usage (a job that ran a microsecond): the user is forgotten, and
  // the account is said to be gone.
  const UsageLedger::AccountRef bob = by_ref.Open("bob");
  EXPECT_TRUE(by_ref.AddRate(bob, 1.0, t0));
  EXPECT_FALSE(by_ref.AddRate(bob, -1.0, t0 + Duration(1)));
  EXPECT_EQ(by_ref.accounts().count("bob"), 0u);
  // A change of nothing keeps the account as it is.
  EXPECT_TRUE(by_ref.AddRate(alice, 0.0, t0 + Seconds(120)));
  EXPECT_EQ(by_ref.accounts().at("alice").as_of, t0 + Seconds(90));
}

TEST(FairShare, FactorFallsAsUsageOutgrowsTheShare) {
  EXPECT_DOUBLE_EQ(FairShareFactor(0, 0.5), 1.0);
  EXPECT_DOUBLE_EQ(FairShareFactor(0.5, 0.5), 0.5);
  EXPECT_DOUBLE_EQ(FairShareFactor(1.0, 0.5), 0.25);
  EXPECT_DOUBLE_EQ(AgeFactor(Seconds(3600), Seconds(7200)), 0.5);
  EXPECT_DOUBLE_EQ(AgeFactor(Seconds(9000), Seconds(7200)), 1.0);
}

TEST(FairShare, LimitsNameWhatIsHeld) {
  UserLimits limits;
  limits.gpus = 2;
  Holdings held;
  held.gpus = 2;
  held.running_jobs = 2;
  const auto over = OverLimit("alice", limits, held, 1, GiB(10));
  ASSERT_TRUE(over.has_value());
  EXPECT_NE(over->find("alice holds 2 of the 2 GPUs one user may hold"), std::string::npos)
      << *over;
  EXPECT_FALSE(OverLimit("alice", limits, Holdings{}, 2, GiB(10)).has_value());
  EXPECT_TRUE(AtLimit(limits, held));
}

}  // namespace
}  // namespace colo
