// A policy spec is read once, the same by colod and colo sim: the driver's defaults first, a
// CARMA name's settings next, the spec's own last.
#include <gtest/gtest.h>

#include "policies/registry.h"

namespace colo {
namespace {

TEST(PolicySpec, TheSpecsOwnSettingsWinOverTheDriversDefaults) {
  GateConfig defaults;
  defaults.memory_margin = GiB(2);
  defaults.smact_max = 0.8;
  const auto own = ParsePolicySpec("least-utilized:margin=5GiB,smact=0.6", defaults);
  ASSERT_TRUE(own.ok()) << own.status().message();
  EXPECT_EQ(own->gates.memory_margin, GiB(5));
  EXPECT_DOUBLE_EQ(own->gates.smact_max, 0.6);
  EXPECT_EQ(own->chooser, Chooser::kLeastUtilized);
  const auto plain = ParsePolicySpec("least-utilized", defaults);
  EXPECT_EQ(plain->gates.memory_margin, GiB(2));
  // CARMA's names carry their margin, estimator and recovery; settings after the name win.
  const auto or_lug = ParsePolicySpec("OR-LUG", defaults);
  ASSERT_TRUE(or_lug.ok());
  EXPECT_EQ(or_lug->gates.memory_margin, GiB(5));
  EXPECT_EQ(or_lug->gates.free_reserve, MiB(512));
  EXPECT_EQ(or_lug->estimator, "none");
  EXPECT_EQ(or_lug->recovery, RecoveryMode::kThesis);
  EXPECT_EQ(ParsePolicySpec("OR-MAGM:margin=7GiB", defaults)->gates.memory_margin, GiB(7));
  EXPECT_EQ(ParsePolicySpec("EST-MAGM-Horus", defaults)->estimator, "rad:horus");
  const auto plan = ParsePolicySpec("worst-fit:est=none,share=plain,learn=on", defaults);
  EXPECT_EQ(plan->estimator, "none");
  EXPECT_EQ(plan->sharing, SharingMode::kPlain);
  EXPECT_EQ(plan->learn, true);
  EXPECT_FALSE(plain->estimator.has_value()) << "unset: the driver's own";
}

TEST(PolicySpec, MistakesAreRefusedWithTheReason) {
  for (auto [spec, why] :
       {std::pair{"bogus", "unknown policy 'bogus'"},
        std::pair{"worst-fit:margin", "is not key=value"}, std::pair{"worst-fit:margin=lots", ""},
        std::pair{"worst-fit:learn=maybe", "learn takes on or off"},
        std::pair{"worst-fit:share=warp", "share takes mps or plain"},
        std::pair{"worst-fit:recovery=later", "recovery"},
        std::pair{"shards:k=1", "unknown shards setting"}, std::pair{"", "empty policy spec"}}) {
    const auto parsed = ParsePolicySpec(spec);
    ASSERT_FALSE(parsed.ok()) << spec;
    EXPECT_NE(parsed.status().message().find(why), std::string::npos) << parsed.status().message();
  }
}

TEST(PolicySpec, ItsTextReadsBackToTheSameSpecWhateverTheDefaults) {
  GateConfig odd;
  odd.memory_margin = GiB(9);
  odd.smact_max = 0.3;
  odd.compound = true;
  for (const char* text :
       {"worst-fit", "OR-LUG", "oracle-MAGM:quantiles=nearest-rank", "exclusive",
        "round-robin:gates=none,est=none,recovery=thesis", "worst-fit:share=plain,learn=off",
        "shards:n=2,est=none", "least-utilized:smact=0.55,stat=mean,reserve=1GiB"}) {
    const auto spec = ParsePolicySpec(text);
    ASSERT_TRUE(spec.ok()) << text;
    const auto back = ParsePolicySpec(SpecText(*spec), odd);
    ASSERT_TRUE(back.ok()) << SpecText(*spec) << ": " << back.status().message();
    EXPECT_EQ(back->name, spec->name) << text;
    EXPECT_TRUE(back->gates == spec->gates) << SpecText(*spec);
    EXPECT_EQ(back->shards, spec->shards);
    EXPECT_EQ(back->estimator, spec->estimator);
    EXPECT_EQ(back->sharing, spec->sharing);
    EXPECT_EQ(back->recovery, spec->recovery);
    EXPECT_EQ(back->learn, spec->learn);
    EXPECT_EQ(Describe(*back), Describe(*spec));
  }
  EXPECT_EQ(Describe(*ParsePolicySpec("OR-LUG")),
            "least-utilized: gates memory (margin 5.0 GiB, 512 MiB held back), utilization "
            "(smact >= 0.80 and (smocc >= 0.45 or drama >= 0.40) refused, risk of the window, "
            "linear quantiles), launch grace from the job's process, one MPS user per GPU, "
            "exclusive first; estimator none; recovery thesis");
}

}  // namespace
}  // namespace colo
