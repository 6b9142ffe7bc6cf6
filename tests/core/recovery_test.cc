// The need an out-of-memory crash leaves a job with (core/recovery.h).
#include "core/recovery.h"

#include <gtest/gtest.h>

namespace colo {
namespace {

OutOfMemoryFacts AtLimit(Bytes limit) {
  OutOfMemoryFacts f;
  f.planned = limit;
  f.limit = limit;
  f.capacity = GiB(80);
  return f;
}

// The ResNet-50 declared at 3 GiB that needs 7.1 GiB: its first crash under its 3 GiB MPS limit,
// with PyTorch's figures, is enough for its second attempt to fit.
TEST(RecoveryTest, ALimitBoundJobCoversTwoAndAHalfTimesItsLimitInOneStep) {
  OutOfMemoryFacts f = AtLimit(GiB(3));
  f.hard_limit = true;
  f.observed_peak = GiBf(1.7);  // NVML missed the end between two samples
  f.evidence.framework = "PyTorch";
  f.evidence.in_use = GiBf(2.87);
  f.evidence.requested = MiB(20);
  const RaisedNeed raised = RaiseNeedAfterOutOfMemory(f, OutOfMemoryGrowth{});
  EXPECT_TRUE(raised.limit_bound);
  EXPECT_GE(raised.need, GiBf(7.1));
  EXPECT_EQ(raised.need, GiB(3).Scaled(2.4) + MiB(512));
  EXPECT_LT(raised.need, GiB(8)) << "not wildly over";
  EXPECT_NE(raised.basis.find("PyTorch in use 2.9 GiB + tried 20 MiB"), std::string::npos)
      << raised.basis;
  EXPECT_NE(raised.basis.find("limit-bound"), std::string::npos) << raised.basis;
}

TEST(RecoveryTest, TheFrameworksFiguresCountWhereTheSamplesMissedThePeak) {
  // Plain sharing: no hard limit, and the samples saw 1 GiB of the 3 GiB the job held.
  OutOfMemoryFacts f = AtLimit(GiB(3));
  f.observed_peak = GiB(1);
  f.evidence.in_use = GiBf(2.8);
  f.evidence.requested = MiB(100);
  EXPECT_TRUE(RaiseNeedAfterOutOfMemory(f, OutOfMemoryGrowth{}).limit_bound);
  f.evidence = {};
  EXPECT_FALSE(RaiseNeedAfterOutOfMemory(f, OutOfMemoryGrowth{}).limit_bound)
      << "without figures and without a hard limit, the 1 GiB seen is all there is";
}

TEST(RecoveryTest, UnderAnMpsLimitACrashWithoutFiguresIsLimitBound) {
  OutOfMemoryFacts f = AtLimit(GiB(4));
  f.hard_limit = true;
  f.observed_peak = GiB(2);  // the peak fell between two samples
  const RaisedNeed raised = RaiseNeedAfterOutOfMemory(f, OutOfMemoryGrowth{});
  EXPECT_TRUE(raised.limit_bound);
  EXPECT_EQ(raised.need, GiB(4).Scaled(2.4) + MiB(512));
}

TEST(RecoveryTest, AJobThatFailedBelowItsLimitGrowsALittle) {
  // The GPU ran full of its neighbours while the job held 2 GiB of its 10 GiB plan.
  OutOfMemoryFacts f = AtLimit(GiB(10));
  f.observed_peak = GiB(2);
  f.evidence.framework = "PyTorch";
  f.evidence.in_use = GiB(2);
  f.evidence.requested = MiB(512);
  const RaisedNeed raised = RaiseNeedAfterOutOfMemory(f, OutOfMemoryGrowth{});
  EXPECT_FALSE(raised.limit_bound);
  EXPECT_EQ(raised.need, GiB(10).Scaled(1.1) + MiB(512)) << "never below its plan";
  EXPECT_NE(raised.basis.find("below the 10.0 GiB limit"), std::string::npos) << raised.basis;
}

TEST(RecoveryTest, AnXlaAllocationLargerThanTheLimitIsCoveredWhole) {
  OutOfMemoryFacts f = AtLimit(GiB(2));
  f.observed_peak = GiB(2);
  f.evidence.framework = "XLA";
  f.evidence.requested = GiB(6);  // one huge buffer: in use is the peak seen
  const RaisedNeed raised = RaiseNeedAfterOutOfMemory(f, OutOfMemoryGrowth{});
  EXPECT_TRUE(raised.limit_bound);
  EXPECT_EQ(raised.need, GiB(8).Scaled(2.4) + MiB(512));
}

TEST(RecoveryTest, NeverBelowTheProfilesUpperBoundNorAboveTheLargestGpu) {
  OutOfMemoryFacts f = AtLimit(GiB(1));
  f.observed_peak = GiB(1);
  f.evidence.profile_upper = GiBf(8.57);
  RaisedNeed raised = RaiseNeedAfterOutOfMemory(f, OutOfMemoryGrowth{});
  EXPECT_EQ(raised.need, GiBf(8.57));
  EXPECT_NE(raised.basis.find("profile"), std::string::npos) << raised.basis;

  f = AtLimit(GiB(60));
  f.observed_peak = GiB(60);
  raised = RaiseNeedAfterOutOfMemory(f, OutOfMemoryGrowth{});
  EXPECT_EQ(raised.need, GiB(80));
  EXPECT_NE(raised.basis.find("capped"), std::string::npos) << raised.basis;
}

TEST(RecoveryTest, AnUnknownPlanGrowsFromWhatWasSeen) {
  OutOfMemoryFacts f;
  f.capacity = GiB(80);
  f.observed_peak = GiB(5);
  const RaisedNeed raised = RaiseNeedAfterOutOfMemory(f, OutOfMemoryGrowth{});
  EXPECT_FALSE(raised.limit_bound);
  EXPECT_EQ(raised.need, GiB(5).Scaled(1.1) + MiB(512));
}

TEST(RecoveryTest, ARetryAfterACrashAtItsOwnLimitMayUseTheRoomOfItsGpu) {
  EXPECT_EQ(AttemptLimit(GiBf(8.1), GiB(30), true), GiB(30));
  EXPECT_EQ(AttemptLimit(GiBf(8.1), GiB(5), true), GiBf(8.1)) << "never below its reservation";
  EXPECT_EQ(AttemptLimit(GiBf(8.1), GiB(30), false), GiBf(8.1))
      << "any other attempt runs under its reservation";
}

}  // namespace
}  // namespace colo
