// CARMA's policy names and the carma preset, as colo's registry and simulator read them.
#include <gtest/gtest.h>

#include "policies/registry.h"
#include "sim/simulator.h"

namespace colo {
namespace {

TEST(CarmaNames, MapToColoPoliciesAndTaskFileLines) {
  const struct {
    const char* name;
    const char* spec;
    const char* estimator;
  } cases[] = {
      {"oracle-FF", "first-fit:preset=carma", "rad:oracle"},
      {"Oracle-BF", "best-fit:preset=carma", "rad:oracle"},
      {"oracle-MAGM", "worst-fit:preset=carma", "rad:oracle"},
      {"ORACLE-lug", "least-utilized:preset=carma", "rad:oracle"},
      {"oracle-RR", "round-robin:preset=carma", "rad:oracle"},
      {"OFF", "first-fit:preset=carma", "rad:oracle"},
      {"OWF", "worst-fit:preset=carma", "rad:oracle"},
      {"OLUG", "least-utilized:preset=carma", "rad:oracle"},
      {"OR-RR", "round-robin:preset=carma,memory=off,utilization=off", "none"},
      {"or-magm", "worst-fit:preset=carma,margin=5GiB", "none"},
      {"OR-LUG", "least-utilized:preset=carma,margin=5GiB", "none"},
      {"EST-MAGM", "worst-fit:preset=carma", "rad:oracle"},
      {"EST-LUG-Horus", "least-utilized:preset=carma", "rad:horus"},
      {"EST-MAGM-FakeTensor", "worst-fit:preset=carma", "rad:faketensor"},
      {"est-magm+gpumemnet", "worst-fit:preset=carma", "rad:gpumemnet"},
      {"MAGM+Horus", "worst-fit:preset=carma", "rad:horus"},
      {"GPUMemNet-LUG", "least-utilized:preset=carma", "rad:gpumemnet"},
  };
  for (const auto& c : cases) {
    auto carma = FindCarmaPolicy(c.name);
    ASSERT_TRUE(carma.has_value()) << c.name;
    EXPECT_EQ(carma->spec, c.spec) << c.name;
    EXPECT_EQ(carma->estimator, c.estimator) << c.name;
    EXPECT_TRUE(IsPolicyName(c.name)) << c.name;
    auto policy = MakePolicy(c.name);
    ASSERT_TRUE(policy.ok()) << c.name << ": " << policy.status().ToString();
  }
  for (const char* not_carma : {"magm", "worst-fit", "OR-FOO", "EST-", "oracle-", "horus"})
    EXPECT_FALSE(FindCarmaPolicy(not_carma).has_value()) << not_carma;
  EXPECT_FALSE(MakePolicy("OR-FOO").ok());
}

TEST(CarmaNames, ColoNamesAreCaseInsensitive) {
  for (const char* name : {"MAGM", "Lug", "FF", "RR", "Worst-Fit", "EXCLUSIVE", "mug"}) {
    EXPECT_TRUE(IsPolicyName(name)) << name;
    EXPECT_TRUE(MakePolicy(name).ok()) << name;
  }
  EXPECT_FALSE(IsPolicyName("no-such-policy"));
}

TEST(CarmaPreset, SetsCarmasGates) {
  auto policy = MakePolicy("magm:preset=carma");
  ASSERT_TRUE(policy.ok()) << policy.status().ToString();
  const GateConfig& g = (*policy)->gates();
  EXPECT_TRUE(g.compound);
  EXPECT_TRUE(g.exclusive_first);
  EXPECT_TRUE(g.memory && g.utilization && g.launch_grace);
  EXPECT_EQ(g.stat, UtilizationStat::kRisk);
  EXPECT_DOUBLE_EQ(g.smact_max, 0.80);
  EXPECT_DOUBLE_EQ(g.smocc_max, 0.45);
  EXPECT_DOUBLE_EQ(g.drama_max, 0.40);
  EXPECT_EQ(g.free_reserve, MiB(512));
  EXPECT_EQ(g.memory_margin, GiB(2));
  EXPECT_TRUE(g.grace_from_process);
  EXPECT_EQ((*policy)->window_quantiles(), QuantileMethod::kLinear);
  // colo's own policies keep theirs.
  auto plain = MakePolicy("magm");
  ASSERT_TRUE(plain.ok());
  EXPECT_FALSE((*plain)->gates().grace_from_process);
  EXPECT_EQ((*plain)->window_quantiles(), QuantileMethod::kNearestRank);
  auto chosen = MakePolicy("magm:quantiles=linear,grace-from-process=on");
  ASSERT_TRUE(chosen.ok());
  EXPECT_TRUE((*chosen)->gates().grace_from_process);
  EXPECT_EQ((*chosen)->window_quantiles(), QuantileMethod::kLinear);
  auto back = MakePolicy("magm:preset=carma,quantiles=nearest-rank,grace-from-process=off");
  ASSERT_TRUE(back.ok());
  EXPECT_FALSE((*back)->gates().grace_from_process);
  EXPECT_EQ((*back)->window_quantiles(), QuantileMethod::kNearestRank);
  EXPECT_EQ(MakePolicy("magm:quantiles=pandas").status().message(),
            "quantiles=pandas: quantiles takes linear or nearest-rank, not 'pandas'");
  // Settings after the preset override it.
  auto later = MakePolicy("magm:preset=carma,margin=5GiB,reserve=0B");
  ASSERT_TRUE(later.ok());
  EXPECT_EQ((*later)->gates().memory_margin, GiB(5));
  EXPECT_EQ((*later)->gates().free_reserve, Bytes(0));
  EXPECT_FALSE(MakePolicy("magm:preset=slurm").ok());
  // OR-MAGM: 5 GiB free after the 512 MiB reserve, no memory number.
  auto or_magm = MakePolicy("OR-MAGM");
  ASSERT_TRUE(or_magm.ok());
  EXPECT_EQ((*or_magm)->gates().memory_margin, GiB(5));
  EXPECT_EQ((*or_magm)->gates().free_reserve, MiB(512));
}

TEST(CarmaPreset, TheReserveIsHeldBackFromFreeMemory) {
  GpuView gpu;
  gpu.index = 0;
  gpu.healthy = true;
  gpu.free_for_placement = MiB(10 * 1024);
  PlacementRequest request;
  request.memory_need = MiB(10 * 1024 - 2048 - 256);  // fits with the margin, not with the reserve
  GateConfig gates;
  gates.free_reserve = Bytes(0);
  EXPECT_EQ(EvaluateGates(gpu, request, gates).gate, Gate::kPass);
  gates.free_reserve = MiB(512);
  EXPECT_EQ(EvaluateGates(gpu, request, gates).gate, Gate::kMemory);
}

TEST(CarmaNames, TheSimulatorTakesTheirEstimatorAndRecovery) {
  RunSpec defaults;
  auto spec = ParseRunSpec("EST-MAGM-Horus", defaults);
  ASSERT_TRUE(spec.ok());
  EXPECT_EQ(spec->estimator, "rad:horus");
  EXPECT_EQ(spec->recovery, RecoveryMode::kThesis);
  auto overridden = ParseRunSpec("oracle-FF:est=rad:gpumemnet,recovery=adaptive", defaults);
  ASSERT_TRUE(overridden.ok());
  EXPECT_EQ(overridden->estimator, "rad:gpumemnet");
  EXPECT_EQ(overridden->recovery, RecoveryMode::kAdaptive);
  EXPECT_EQ(ParseRunSpec("worst-fit", defaults)->estimator, "oracle");
}

}  // namespace
}  // namespace colo
