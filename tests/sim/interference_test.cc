#include "sim/interference.h"

#include <gtest/gtest.h>

#include <cmath>

namespace colo {
namespace {

TEST(Calibration, ModelsReproduceTheH100Table) {
  const auto rows = CalibrationTable(InterferenceModel{}, PowerModel{});
  ASSERT_EQ(rows.size(), 12u);
  for (const auto& r : rows) {
    SCOPED_TRACE(r.set + " x" + std::to_string(r.jobs));
    EXPECT_NEAR(r.predicted_gain, r.measured_gain, 0.06 * r.measured_gain);
    EXPECT_NEAR(r.predicted_slowdown, r.measured_slowdown, 0.06 * r.measured_slowdown);
    // Power depends on more than SMACT (small kernels draw less per unit of SMACT): looser bound.
    EXPECT_NEAR(r.predicted_watts, r.measured_watts, 0.20 * r.measured_watts);
  }
}

TEST(Interference, MpsBeatsTimeSlicingAndSaturates) {
  const InterferenceModel model;
  const std::vector<CoRunner> light(4, CoRunner{0.2, 100});
  const std::vector<CoRunner> heavy(2, CoRunner{0.8, 100});
  const double mps = model.Slowdowns(SharingMode::kMps, light)[0];
  const double naive = model.Slowdowns(SharingMode::kPlain, light)[0];
  EXPECT_LT(mps, naive);
  EXPECT_GT(model.Slowdowns(SharingMode::kMps, heavy)[0], 1.6)
      << "two saturating jobs cannot both run at full speed";
  EXPECT_EQ(model.Slowdowns(SharingMode::kMps, {CoRunner{0.9, 100}})[0], 1.0)
      << "alone runs at solo speed";
  EXPECT_GT(model.Slowdowns(SharingMode::kMps, {CoRunner{0.9, 40}})[0], 2.0)
      << "a tight thread limit slows it";
}

TEST(Interference, MpsSmallKernelsWaitBehindLargeOnes) {
  // A VGG-16 (SMACT 0.92) and two CIFAR CNNs (0.12, 0.14) on one H200 under MPS: the CNNs took
  // 1.7-2.1x as long as alone, the VGG-16 1.08x (the 4-GPU real-trace run, worst-fit).
  const InterferenceModel model;
  const auto slow = model.Slowdowns(SharingMode::kMps,
                                    {CoRunner{0.92, 100}, CoRunner{0.12, 30}, CoRunner{0.14, 30}});
  EXPECT_LT(slow[0], 1.25);
  EXPECT_GT(slow[1], 1.7);
  EXPECT_LT(slow[1], 2.2);
  EXPECT_GT(slow[2], 1.7);
  EXPECT_GT(slow[1] / slow[0], 1.5)
      << "the job of small kernels pays for the wait, not the large one";
  // Beside jobs as light as itself a CIFAR CNN barely slows.
  const auto light =
      model.Slowdowns(SharingMode::kMps, std::vector<CoRunner>(3, CoRunner{0.13, 30}));
  EXPECT_LT(light[0], 1.1);
}

TEST(Interference, MpsSaturationSplitsTheSmsEvenlyAndNeverExceedsThem) {
  const InterferenceModel model;
  const auto pair =
      model.Slowdowns(SharingMode::kMps, std::vector<CoRunner>(2, CoRunner{0.8, 100}));
  EXPECT_DOUBLE_EQ(pair[0], pair[1]) << "alike jobs slow alike";
  EXPECT_NEAR(2 * 0.8 / pair[0], model.mps_capacity, 1e-9) << "saturated: the SMs deliver capacity";
  const std::vector<std::vector<CoRunner>> mixes = {
      {{0.92, 100}, {0.67, 100}, {0.13, 30}},
      {{0.84, 100}, {0.61, 100}},
      {{0.5, 100}, {0.5, 100}, {0.5, 100}, {0.5, 100}},
      {{0.95, 100}, {0.95, 100}, {0.2, 50}},
  };
  for (const auto& jobs : mixes) {
    const auto out = model.Slowdowns(SharingMode::kMps, jobs);
    double delivered = 0;
    for (size_t i = 0; i < jobs.size(); ++i) {
      EXPECT_GE(out[i], 1.0);
      delivered += jobs[i].smact / out[i];
    }
    EXPECT_LE(delivered, model.mps_capacity + 1e-9) << jobs.size() << " jobs";
  }
  // More co-runner activity never makes a job faster.
  double before = 1.0;
  for (double other = 0.0; other <= 1.2; other += 0.05) {
    const double s =
        model.Slowdowns(SharingMode::kMps, {CoRunner{0.15, 100}, CoRunner{other, 100}})[0];
    EXPECT_GE(s, before - 1e-12) << "beside " << other;
    before = s;
  }
}

TEST(Power, ScalesWithTdpAndIdlesAtIdle) {
  const PowerModel power;
  EXPECT_EQ(power.Watts(71, 700, false, 0.9), 71);
  const double h100 = power.Watts(71, 700, true, 0.8) - 71;
  const double a100 = power.Watts(52, 400, true, 0.8) - 52;
  EXPECT_NEAR(a100 / h100, 400.0 / 700.0, 1e-9);
  EXPECT_NEAR(power.Watts(71, 700, true, 0.95), 590, 30);
}

TEST(Power, AFittedModelIsTheGpusOwnAndNeverBelowIdle) {
  auto fitted = ParsePowerModel("-11.5, 729.5,-114.7");
  ASSERT_TRUE(fitted.ok()) << fitted.status().ToString();
  EXPECT_NEAR(fitted->Watts(78, 700, true, 0.5), 78 - 11.5 + 729.5 * 0.5 - 114.7 * 0.25, 1e-9);
  EXPECT_NEAR(fitted->Watts(78, 400, true, 0.5), 78 - 11.5 + 729.5 * 0.5 - 114.7 * 0.25, 1e-9)
      << "not scaled by TDP: the fit is already this GPU's";
  EXPECT_EQ(fitted->Watts(78, 700, true, 0.0), 78) << "a negative intercept stops at idle";
  for (const char* bad : {"", "1,2", "1,2,3,4", "1,x,3", "1,2,1e9"}) {
    auto r = ParsePowerModel(bad);
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_NE(r.status().message().find("power model"), std::string::npos);
  }
}

}  // namespace
}  // namespace colo
