#include "common/units.h"

#include <gtest/gtest.h>

namespace colo {
namespace {

TEST(ParseBytes, AcceptsUnitsAndDefaultsToMiB) {
  EXPECT_EQ(*ParseBytes("12GiB"), GiB(12));
  EXPECT_EQ(*ParseBytes("512MiB"), MiB(512));
  EXPECT_EQ(*ParseBytes("40000"), MiB(40000));
  EXPECT_EQ(*ParseBytes("1.5GB"), GiBf(1.5));
  EXPECT_EQ(*ParseBytes("7B"), Bytes(7));
  // Any case, as Slurm takes --mem=12g.
  EXPECT_EQ(*ParseBytes("12g"), GiB(12));
  EXPECT_EQ(*ParseBytes("12gib"), GiB(12));
  EXPECT_EQ(*ParseBytes("512mb"), MiB(512));
  EXPECT_EQ(*ParseBytes("2t"), GiB(2048));
}

TEST(ParseBytes, RejectsGarbageWithAReason) {
  for (const char* bad : {"", "GiB", "-1GiB", "12 parsecs", "nan", "1e30GiB"}) {
    auto r = ParseBytes(bad);
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
    EXPECT_FALSE(r.status().message().empty());
  }
}

TEST(ParseDuration, AcceptsUnits) {
  EXPECT_EQ(*ParseDuration("30s"), Seconds(30));
  EXPECT_EQ(*ParseDuration("5m"), Seconds(300));
  EXPECT_EQ(*ParseDuration("2h"), Seconds(7200));
  EXPECT_EQ(*ParseDuration("1.5"), SecondsF(1.5));
  EXPECT_FALSE(ParseDuration("5 fortnights").ok());
}

TEST(Bytes, ArithmeticAndFormatting) {
  EXPECT_EQ(GiB(1) - MiB(512), MiB(512));
  EXPECT_EQ(GiB(2).Scaled(1.5), GiB(3));
  EXPECT_EQ(FormatBytes(GiBf(11.5)), "11.5 GiB");
  EXPECT_EQ(FormatBytes(MiB(512)), "512 MiB");
  EXPECT_EQ(FormatExactBytes(GiB(2)), "2GiB");
  EXPECT_EQ(FormatExactBytes(MiB(512)), "512MiB");
  EXPECT_EQ(FormatExactBytes(MiB(1536)), "1536MiB");
  EXPECT_EQ(FormatExactBytes(Bytes(1000)), "1000B");
  EXPECT_EQ(FormatExactBytes(Bytes(0)), "0B");
  for (const Bytes b : {GiB(5), MiB(3), Bytes(4097), Bytes(int64_t{1} << 40)})
    EXPECT_EQ(*ParseBytes(FormatExactBytes(b)), b) << FormatExactBytes(b);
}

}  // namespace
}  // namespace colo
