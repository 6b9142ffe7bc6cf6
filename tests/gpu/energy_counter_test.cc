#include "gpu/energy_counter.h"

#include <gtest/gtest.h>

namespace colo {
namespace {

TimePoint At(double seconds) {
  return TimePoint{} + std::chrono::duration_cast<Duration>(std::chrono::duration<double>(seconds));
}

TEST(EnergyCounter, TheFirstSampleReadsTheBoardAndLaterOnesWhenTheIntervalHasPassed) {
  EnergyCounter energy(std::chrono::seconds(10));
  EXPECT_TRUE(energy.Due(At(0)));
  EXPECT_DOUBLE_EQ(energy.Read(At(0), 1000, 100), 1000);
  EXPECT_FALSE(energy.Due(At(1)));
  EXPECT_FALSE(energy.Due(At(9.9)));
  EXPECT_TRUE(energy.Due(At(10)));
}

TEST(EnergyCounter, BetweenReadsThePowerSamplesCarryTheTotal) {
  EnergyCounter energy(std::chrono::seconds(10));
  energy.Read(At(0), 1000, 100);
  // 1 s from 100 W to 300 W: the trapezoid's 200 J.
  EXPECT_DOUBLE_EQ(energy.Carry(At(1), 300), 1200);
  EXPECT_DOUBLE_EQ(energy.Carry(At(3), 300), 1800);
  // The board's counter replaces what was carried.
  EXPECT_DOUBLE_EQ(energy.Read(At(10), 3950, 250), 3950);
  EXPECT_DOUBLE_EQ(energy.Carry(At(11), 250), 4200);
}

TEST(EnergyCounter, StaysACounterWhenTheBoardReadsLessThanWasCarried) {
  EnergyCounter energy(std::chrono::seconds(10));
  energy.Read(At(0), 1000, 400);
  EXPECT_DOUBLE_EQ(energy.Carry(At(5), 400), 3000);
  // The power samples overestimated: the board says 2900 J. The total holds, never goes back.
  EXPECT_DOUBLE_EQ(energy.Read(At(10), 2900, 0), 3000);
  EXPECT_DOUBLE_EQ(energy.Read(At(20), 3500, 0), 3500);
}

TEST(EnergyCounter, NothingIsCarriedBeforeTheFirstReadOrWithoutPower) {
  EnergyCounter energy(std::chrono::seconds(10));
  EXPECT_LT(energy.Carry(At(0), 100), 0);  // the board's counter was never read (or unsupported)
  EXPECT_TRUE(energy.Due(At(1)));
  energy.Read(At(1), 500, -1);
  EXPECT_DOUBLE_EQ(energy.Carry(At(2), 100), 500);  // no power reading at the last sample
  EXPECT_DOUBLE_EQ(energy.Carry(At(3), -1), 500);   // none now
  EXPECT_DOUBLE_EQ(energy.Carry(At(4), 100), 500);
  EXPECT_DOUBLE_EQ(energy.Carry(At(5), 100), 600);
}

}  // namespace
}  // namespace colo
