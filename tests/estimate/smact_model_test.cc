// The solo-SMACT model: its arithmetic on a hand-made profile, and what it refuses.
#include "estimate/smact_model.h"

#include <gtest/gtest.h>

namespace colo {
namespace {

const char* kModel = R"({"fp32_tflops": 10, "amp_tflops": 40, "bandwidth_gbs": 1000,
  "host_us_per_op": 100, "fill": 0.8, "bytes_per_parameter": 16})";

// 1e6 parameters, a trace at batch 32 of 2 steps with `ops` ops each and 100 MB allocated a step.
ModelSummary Profile(int64_t flops, int64_t ops, std::string precision = "fp32") {
  ModelSummary s;
  s.origin = "test.json";
  s.batch = 32;
  s.precision = std::move(precision);
  s.parameters = 1'000'000;
  s.flops_per_step = flops;
  s.traces.push_back(TraceRef{32, "t.trace", 2 * 2 * ops, 2, 100'000'000});
  return s;
}

TEST(SmactModel, AComputeBoundStepFillsTheGpuAndAShortOneWaitsForTheHost) {
  auto model = SmactModel::FromJson(kModel, "m");
  ASSERT_TRUE(model.ok()) << model.status().message();
  // 1 TFLOP at 10 TFLOP/s = 100 ms; bytes 2 x 100 MB + 16 MB at 1 TB/s = 0.216 ms; the host
  // issues 10 ops x 100 us = 1 ms: the GPU is the bottleneck, busy `fill` of the time.
  auto big = PredictSoloSmact(Profile(1'000'000'000'000, 10), 32, *model);
  ASSERT_TRUE(big.ok());
  EXPECT_NEAR(big->gpu_seconds, 0.100216, 1e-9);
  EXPECT_NEAR(big->host_seconds, 0.001, 1e-12);
  EXPECT_NEAR(big->smact, 0.8, 1e-9);
  // In AMP the same step is 4x faster on the matrix units, and 1000 ops take the host 100 ms.
  auto launch_bound = PredictSoloSmact(Profile(1'000'000'000'000, 1000, "amp-bf16"), 32, *model);
  ASSERT_TRUE(launch_bound.ok());
  EXPECT_NEAR(launch_bound->smact, 0.8 * (0.025 + 0.000216) / 0.1, 1e-9);
  // Half the batch halves the FLOPs and the allocations, not the ops or the parameters.
  auto half = PredictSoloSmact(Profile(1'000'000'000'000, 10), 16, *model);
  ASSERT_TRUE(half.ok());
  EXPECT_NEAR(half->gpu_seconds, 0.05 + (2 * 50e6 + 16e6) / 1e12, 1e-12);
  EXPECT_NEAR(half->host_seconds, 0.001, 1e-12);
}

TEST(SmactModel, AProfileWithoutFlopsOrTraceOrABadModelIsRefusedWithTheReason) {
  auto model = SmactModel::FromJson(kModel, "m");
  ASSERT_TRUE(model.ok());
  auto none = PredictSoloSmact(Profile(0, 10), 32, *model);
  ASSERT_FALSE(none.ok());
  EXPECT_EQ(none.status().code(), StatusCode::kUnavailable);
  EXPECT_NE(none.status().message().find("no FLOPs"), std::string::npos);
  ModelSummary untraced = Profile(1000, 10);
  untraced.traces[0].steps = 0;  // an older profile: its trace says nothing of its steps
  auto no_trace = PredictSoloSmact(untraced, 32, *model);
  ASSERT_FALSE(no_trace.ok());
  EXPECT_NE(no_trace.status().message().find("no trace"), std::string::npos);
  EXPECT_FALSE(PredictSoloSmact(Profile(1000, 10), 0, *model).ok());
  for (const char* bad : {R"({"fp32_tflops": 0, "amp_tflops": 1, "bandwidth_gbs": 1,
                              "host_us_per_op": 1, "fill": 0.5, "bytes_per_parameter": 1})",
                          R"({"fp32_tflops": 1, "amp_tflops": 1, "bandwidth_gbs": 1,
                              "host_us_per_op": 1, "fill": 1.5, "bytes_per_parameter": 1})",
                          R"({"fp32_tflops": 1, "amp_tflops": 1, "bandwidth_gbs": 1,
                              "host_us_per_op": 1, "fill": 0.5})",
                          R"({"fp32_tflops": "fast"})", "not json"}) {
    auto parsed = SmactModel::FromJson(bad, "bad.json");
    EXPECT_FALSE(parsed.ok()) << bad;
    if (!parsed.ok()) {
      EXPECT_NE(parsed.status().message().find("bad.json"), std::string::npos);
    }
  }
}

}  // namespace
}  // namespace colo
