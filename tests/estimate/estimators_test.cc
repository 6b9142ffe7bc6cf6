#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <regex>
#include <sstream>

#include "common/rng.h"
#include "estimate/gpumemnet.h"
#include "estimate/job_estimators.h"
#include "estimate/model_summary.h"

namespace colo {
namespace {

constexpr int64_t kMiB = int64_t{1} << 20;
const std::string kData = std::string(COLO_TEST_DATA) + "/estimate/";

// Writes `text` to `name` in the test's temporary folder; returns its path.
std::string WriteTestFile(const std::string& name, const std::string& text) {
  const std::string path = ::testing::TempDir() + "/" + name;
  std::ofstream(path) << text;
  return path;
}

GpuCalibration H200() {
  GpuCalibration c;
  c.gpu = "NVIDIA H200";
  c.context_bytes = 794820608;  // measured by colo-calibrate, driver 580, torch 2.11
  c.cublas_workspace_bytes = 64 * kMiB;
  return c;
}

TEST(ModelSummary, ParsesTorchsummaryAndReportsUnknownLayers) {
  auto s = LoadModelSummary(kData + "resnet18.torchsummary.txt");
  ASSERT_TRUE(s.ok()) << s.status().message();
  EXPECT_EQ(s->format, "torchsummary");
  EXPECT_EQ(s->parameters, 111528);
  ASSERT_EQ(s->layers.size(), 10u);
  EXPECT_EQ(s->layers[0].kind, LayerKind::kConv);
  EXPECT_EQ(s->layers[0].output_shape, (std::vector<int64_t>{-1, 64, 112, 112}));
  EXPECT_EQ(s->unknown_layer_types, std::vector<std::string>{"MyFancyOp"});
  EXPECT_EQ(s->Family(), "cnn");
  EXPECT_EQ(s->activations_per_sample, 3 * 64 * 112 * 112 + 5 * 64 * 56 * 56 + 64 + 1000);
  EXPECT_TRUE(s->traces.empty());
}

TEST(ModelSummary, ParsesColoProfileJsonAndResolvesTraces) {
  auto s = LoadModelSummary(kData + "hf-gpt2-b4-adam.json");
  ASSERT_TRUE(s.ok()) << s.status().message();
  EXPECT_EQ(s->format, "colo-model-summary v1");
  EXPECT_EQ(s->Family(), "transformer");
  EXPECT_EQ(s->batch, 4);
  EXPECT_EQ(s->optimizer, "adam");
  ASSERT_EQ(s->traces.size(), 1u);
  EXPECT_EQ(s->traces[0].path, kData + "hf-gpt2-b4-adam.b4.trace");
  EXPECT_TRUE(s->unknown_layer_types.empty()) << s->unknown_layer_types.front();
}

TEST(ModelSummary, ForeignOrMalformedFilesGetClearErrors) {
  auto not_json = ParseModelSummaryJson("{", "a.json", ".");
  ASSERT_FALSE(not_json.ok());
  EXPECT_NE(not_json.status().message().find("a.json: not valid JSON"), std::string::npos);
  auto foreign = ParseModelSummaryJson(R"({"layers": []})", "b.json", ".");
  ASSERT_FALSE(foreign.ok());
  EXPECT_NE(foreign.status().message().find("colo-profile"), std::string::npos);
  auto version =
      ParseModelSummaryJson(R"({"format": "colo-model-summary", "version": 9})", "c", ".");
  ASSERT_FALSE(version.ok());
  EXPECT_NE(version.status().message().find("version 9"), std::string::npos);
  auto missing = ParseModelSummaryJson(
      R"({"format": "colo-model-summary", "version": 1, "layers": [{"type": 3}]})", "d", ".");
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("malformed summary"), std::string::npos);
  auto floaty = ParseModelSummaryJson(
      R"({"format": "colo-model-summary", "version": 1, "totals": {"parameters": 1e30},
          "layers": []})",
      "g", ".");
  ASSERT_FALSE(floaty.ok());
  EXPECT_NE(floaty.status().message().find("must be an integer"), std::string::npos)
      << floaty.status().message();
  auto text = ParseTorchSummary("hello world\n", "e.txt");
  ASSERT_FALSE(text.ok());
  EXPECT_NE(text.status().message().find("not a torchsummary file"), std::string::npos);
  EXPECT_EQ(LoadModelSummary("/nonexistent/x.json").status().code(), StatusCode::kNotFound);
  auto huge = ParseTorchSummary(
      "Layer (type)  Output Shape  Param #\n  Linear-1  [-1, 10]  99,999,999,999,999,999,999\n",
      "f");
  ASSERT_FALSE(huge.ok());
  EXPECT_NE(huge.status().message().find("f:2: bad count"), std::string::npos)
      << huge.status().message();
}

TEST(Estimators, HorusIsCarmasFormula) {
  ModelSummary s;
  s.parameters = 1'000'000;
  s.activations_per_sample = 2'000'000;
  JobDescription job;
  job.summary = &s;
  job.batch = 16;
  auto e = MakeHorusEstimator()->Estimate(job);
  ASSERT_TRUE(e.ok());
  const double mib = 4.0 * (2e6 * 16 + 1e6 + 16 * 1e6) / (1 << 20) + 800;
  EXPECT_EQ(e->peak, MiB(static_cast<int64_t>(std::ceil(mib))));
  s.parameters = 10'000'000'000;  // capped at 40000 MiB as CARMA does
  EXPECT_EQ(MakeHorusEstimator()->Estimate(job)->peak, MiB(40000));
}

// The recorded profiles of two real jobs against the peak NVML showed when they trained on an
// H200 (bench/estimate, 2026-11-21): the replayed estimate is within 3%, and the upper bound
// colo plans with is not below the truth.
TEST(Estimators, TraceReplayMatchesMeasuredPeaks) {
  struct Case {
    std::string file;
    int64_t measured;
  };
  for (const Case& c :
       {Case{"tv-resnet50-b32-adam.json", 4519362560}, Case{"hf-gpt2-b4-adam.json", 6616514560}}) {
    auto s = LoadModelSummary(kData + c.file);
    ASSERT_TRUE(s.ok()) << s.status().message();
    JobDescription job;
    job.summary = &*s;
    auto e = MakeTraceEstimator(H200())->Estimate(job);
    ASSERT_TRUE(e.ok()) << e.status().message();
    const double error = (static_cast<double>(e->peak.count()) - c.measured) / c.measured;
    EXPECT_LT(std::fabs(error), 0.03) << c.file << " estimate " << e->peak.count();
    EXPECT_GE(e->upper.count(), c.measured) << c.file;
    EXPECT_NE(e->detail.find("events replayed"), std::string::npos);
  }
}

TEST(Estimators, TraceNeedsATraceForTheBatch) {
  auto s = LoadModelSummary(kData + "hf-gpt2-b4-adam.json");
  ASSERT_TRUE(s.ok());
  JobDescription job;
  job.summary = &*s;
  job.batch = 32;
  auto e = MakeTraceEstimator(H200())->Estimate(job);
  ASSERT_FALSE(e.ok());
  EXPECT_NE(e.status().message().find("no trace for batch 32"), std::string::npos);
  auto text = LoadModelSummary(kData + "resnet18.torchsummary.txt");
  job.summary = &*text;
  EXPECT_EQ(MakeTraceEstimator(H200())->Estimate(job).status().code(), StatusCode::kUnavailable);
}

TEST(Estimators, TraceInterpolatesBetweenTwoRecordedBatches) {
  // Sizes grow with the batch (activations), parameters do not.
  WriteTestFile("m.b2.trace", "colo-alloc-trace 1\na 40000000\nm steps\na 20000000\nf 1\n");
  WriteTestFile("m.b4.trace", "colo-alloc-trace 1\na 40000000\nm steps\na 40000000\nf 1\n");
  const std::string summary =
      WriteTestFile("m.json", R"({"format": "colo-model-summary", "version": 1, "batch": 2,
    "totals": {"parameters": 10000000}, "layers": [{"type": "Linear", "parameters": 10000000}],
    "traces": [{"batch": 2, "file": "m.b2.trace"}, {"batch": 4, "file": "m.b4.trace"}]})");
  auto s = LoadModelSummary(summary);
  ASSERT_TRUE(s.ok()) << s.status().message();
  JobDescription job;
  job.summary = &*s;
  GpuCalibration bare;
  bare.gpu = "test";
  job.batch = 3;  // 30 MB of activations: rounded to a 30 MiB... segment of 2 MiB multiples
  auto e = MakeTraceEstimator(bare)->Estimate(job);
  ASSERT_TRUE(e.ok()) << e.status().message();
  EXPECT_EQ(e->peak.count(), 40 * kMiB - (40 * kMiB - 40000000) / (2 * kMiB) * (2 * kMiB) +
                                 30 * kMiB - (30 * kMiB - 30000000) / (2 * kMiB) * (2 * kMiB));
}

// Where the peak hinges on one block the profile cannot pin down, the upper bound holds what the
// allocator would need if that block went the other way; the estimate itself does not.
TEST(Estimators, TraceUpperBoundHoldsTheFragmentationRisk) {
  WriteTestFile(
      "f.b2.trace",
      fmt::format(
          "colo-alloc-trace 1\nm steps\na {0}\na {1}\na {1}\nf 1\nf 2\nf 0\nm step1\na {1}\n"
          "a {1}\na {0}\n",
          100 * kMiB, 24 * kMiB));
  const std::string summary =
      WriteTestFile("f.json", R"({"format": "colo-model-summary", "version": 1, "batch": 2,
    "totals": {"parameters": 1}, "layers": [{"type": "Linear", "parameters": 1}],
    "traces": [{"batch": 2, "file": "f.b2.trace"}]})");
  auto s = LoadModelSummary(summary);
  ASSERT_TRUE(s.ok()) << s.status().message();
  JobDescription job;
  job.summary = &*s;
  GpuCalibration cal;
  cal.gpu = "test";
  cal.margin_ratio = 0.5;
  cal.margin_bytes = 4 * kMiB;
  auto e = MakeTraceEstimator(cal)->Estimate(job);
  ASSERT_TRUE(e.ok()) << e.status().message();
  EXPECT_EQ(e->peak.count(), 148 * kMiB);
  EXPECT_EQ(e->upper.count(), (148 + 76) * kMiB * 3 / 2 + 4 * kMiB);
  EXPECT_NE(e->detail.find("fragmentation could add 76 MiB"), std::string::npos) << e->detail;
}

// cuDNN's workspace is allocated inside each convolution at the calibrated median coefficient;
// the spread to the largest measured one goes into the upper bound only.
TEST(Estimators, TraceModelsConvolutionWorkspacesWithTheGpusCalibration) {
  // 100 MiB live, then a 3x3 convolution over 20 + 20 MiB tensors (weight 0).
  WriteTestFile("c.b2.trace",
                fmt::format("colo-alloc-trace 1\nm steps\na {}\nw conv {} {} 0 3 3 64 1\n",
                            100 * kMiB, 20 * kMiB, 20 * kMiB));
  WriteTestFile("c.b4.trace",
                fmt::format("colo-alloc-trace 1\nm steps\na {}\nw conv {} {} 0 1 1 64 1\n",
                            100 * kMiB, 40 * kMiB, 40 * kMiB));
  const std::string summary =
      WriteTestFile("c.json", R"({"format": "colo-model-summary", "version": 1, "batch": 2,
    "totals": {"parameters": 1}, "layers": [{"type": "Conv2d", "parameters": 1}],
    "traces": [{"batch": 2, "file": "c.b2.trace"}, {"batch": 4, "file": "c.b4.trace"}]})");
  auto s = LoadModelSummary(summary);
  ASSERT_TRUE(s.ok()) << s.status().message();
  JobDescription job;
  job.summary = &*s;
  job.batch = 2;
  GpuCalibration cal;
  cal.gpu = "test";
  cal.margin_ratio = 0;
  cal.margin_bytes = 0;
  cal.conv_uncertainty_scale = 1;
  auto& k = cal.conv_workspace[ConvWorkspaceIndex(false, false, ConvCall::Shape::kGeneral)];
  k = {1.0, 1.5, true};
  auto e = MakeTraceEstimator(cal)->Estimate(job);
  ASSERT_TRUE(e.ok()) << e.status().message();
  EXPECT_EQ(e->peak.count(), 140 * kMiB) << "100 MiB live + a 40 MiB workspace";
  EXPECT_EQ(e->upper.count(), 160 * kMiB) << "+ (1.5 - 1.0) x 40 MiB";
  // Batch 3 would interpolate a 3x3 convolution with a pointwise one: not the same program.
  job.batch = 3;
  auto between = MakeTraceEstimator(cal)->Estimate(job);
  ASSERT_FALSE(between.ok());
  EXPECT_NE(between.status().message().find("differ in structure"), std::string::npos);
}

// A grouped call's workspace is the median coefficient times its operands padded to the groups'
// power-of-two width: RegNet's groups of 24 channels take 4/3 of what groups of 8 take.
TEST(Estimators, GroupedConvolutionsTakeWorkspaceForTheirPaddedGroups) {
  GpuCalibration cal;
  cal.gpu = "test";
  cal.margin_ratio = 0;
  cal.margin_bytes = 0;
  cal.conv_workspace[ConvWorkspaceIndex(false, false, ConvCall::Shape::kGrouped)] = {1.0, 1.0,
                                                                                     true};
  auto peak = [&](int channels, int groups) -> int64_t {
    const std::string name = fmt::format("g{}x{}", channels, groups);
    WriteTestFile(name + ".b2.trace",
                  fmt::format("colo-alloc-trace 1\nm steps\na {}\nw conv {} {} 0 3 3 {} {}\n",
                              100 * kMiB, 30 * kMiB, 30 * kMiB, channels, groups));
    const std::string summary = WriteTestFile(
        name + ".json", fmt::format(R"({{"format": "colo-model-summary", "version": 1, "batch": 2,
      "totals": {{"parameters": 1}}, "layers": [{{"type": "Conv2d", "parameters": 1}}],
      "traces": [{{"batch": 2, "file": "{}.b2.trace"}}]}})",
                                    name));
    auto s = LoadModelSummary(summary);
    EXPECT_TRUE(s.ok()) << s.status().message();
    JobDescription job;
    job.summary = &*s;
    job.batch = 2;
    auto e = MakeTraceEstimator(cal)->Estimate(job);
    EXPECT_TRUE(e.ok()) << e.status().message();
    return e.ok() ? e->peak.count() : 0;
  };
  EXPECT_EQ(peak(72, 9), 160 * kMiB) << "groups of 8: a 60 MiB workspace";
  EXPECT_EQ(peak(72, 3), 180 * kMiB) << "groups of 24 run as 32: an 80 MiB workspace";
  EXPECT_EQ(peak(72, 72), 100 * kMiB) << "depthwise: no grouped coefficient";
}

ConvCall Conv(bool backward, int64_t input, int64_t output, int64_t weight) {
  ConvCall c;
  c.backward = backward;
  c.geometry = true;
  c.input_bytes = input;
  c.output_bytes = output;
  c.weight_bytes = weight;
  c.kernel_h = c.kernel_w = 3;
  c.in_channels = 64;
  return c;
}

TEST(ConvWorkspaceCatalogue, InterpolatesBetweenMeasuredBatchesAndKnowsOnlyWhatItMeasured) {
  auto made = ConvWorkspaceCatalogue::Make({32, 128});
  ASSERT_TRUE(made.ok());
  ConvWorkspaceCatalogue& catalogue = *made;
  // A backward measured at 32 and 128: data then filter workspace, both growing with the batch.
  const ConvWorkspaceCatalogue::Key key{true, 1000, 2000, 4096, 3, 3, 64, 1};
  ASSERT_TRUE(catalogue.Add(key, {{3000 * 32, 100}, {3000 * 128, 900}}).ok());
  // A forward whose algorithm changed between the batches (one workspace, then none).
  ASSERT_TRUE(catalogue.Add({false, 1000, 2000, 4096, 3, 3, 64, 1}, {{64000}, {}}).ok());
  EXPECT_EQ(catalogue.size(), 2u);

  using Sizes = std::vector<int64_t>;
  auto sizes = [&](const ConvCall& c, int batch) -> std::optional<Sizes> {
    auto found = catalogue.Lookup(c, batch);
    if (!found) return std::nullopt;
    return found->bytes;
  };
  EXPECT_EQ(sizes(Conv(true, 1000 * 64, 2000 * 64, 4096), 64), (Sizes{3000 * 64, 367}))
      << "100 + 800 / 3, rounded";
  EXPECT_EQ(sizes(Conv(true, 1000 * 32, 2000 * 32, 4096), 32), (Sizes{96000, 100}));
  // Beyond the measured batches: the line through the nearest two, never below zero.
  EXPECT_EQ(sizes(Conv(true, 1000 * 256, 2000 * 256, 4096), 256), (Sizes{3000 * 256, 1967}))
      << "100 + 800 x 224 / 96, rounded";
  EXPECT_EQ(sizes(Conv(true, 1000 * 8, 2000 * 8, 4096), 8), (Sizes{24000, 0}));
  // Different choices at the two batches: the nearer one's, scaled.
  EXPECT_EQ(sizes(Conv(false, 1000 * 48, 2000 * 48, 4096), 48), (Sizes{96000}));
  EXPECT_EQ(sizes(Conv(false, 1000 * 100, 2000 * 100, 4096), 100), Sizes{});
  // Another geometry, another weight, or a call whose bytes are not per-sample at this batch.
  EXPECT_FALSE(catalogue.Lookup(Conv(true, 1000 * 64, 2000 * 64, 8192), 64));
  EXPECT_FALSE(catalogue.Lookup(Conv(true, 1001 * 64, 2000 * 64, 4096), 64));
  EXPECT_FALSE(catalogue.Lookup(Conv(true, 1000 * 64 + 20, 2000 * 64, 4096), 64));
  // At a measured batch nothing is uncertain; between two, what the other choice would add.
  EXPECT_EQ(catalogue.Lookup(Conv(true, 1000 * 32, 2000 * 32, 4096), 32)->spread, 0);
  EXPECT_EQ(catalogue.Lookup(Conv(false, 1000 * 100, 2000 * 100, 4096), 100)->spread,
            64000 * 100 / 32);
  // A backward whose gradient is a slice of a larger storage (older profiles recorded the
  // storage): the one measured call with the same input, weight and kernel. Not for a forward,
  // and not when two measured calls share them.
  EXPECT_EQ(sizes(Conv(true, 1000 * 32, 2500 * 32, 4096), 32), (Sizes{96000, 100}));
  EXPECT_FALSE(catalogue.Lookup(Conv(false, 1000 * 32, 2500 * 32, 4096), 32));
  EXPECT_FALSE(catalogue.Lookup(Conv(true, 1000 * 32, 1500 * 32, 4096), 32)) << "a smaller output";
  ASSERT_TRUE(catalogue.Add({true, 1000, 1000, 4096, 3, 3, 64, 1}, {{1}, {1}}).ok());
  EXPECT_FALSE(catalogue.Lookup(Conv(true, 1000 * 32, 2500 * 32, 4096), 32));
  EXPECT_EQ(sizes(Conv(true, 1000 * 32, 1000 * 32, 4096), 32), (Sizes{1}));
  ConvCall old_profile = Conv(true, 1000 * 64, 2000 * 64, 4096);
  old_profile.geometry = false;
  EXPECT_FALSE(catalogue.Lookup(old_profile, 64));

  auto one = ConvWorkspaceCatalogue::Make({32});
  ASSERT_TRUE(one.ok());
  ASSERT_TRUE(one->Add(key, {{3200, 64}}).ok());
  EXPECT_EQ(one->Lookup(Conv(true, 1000 * 64, 2000 * 64, 4096), 64)->bytes, (Sizes{6400, 128}))
      << "one measured batch: scaled";
  EXPECT_FALSE(ConvWorkspaceCatalogue::Make({}).ok());
  EXPECT_FALSE(ConvWorkspaceCatalogue::Make({128, 32}).ok());
  EXPECT_FALSE(ConvWorkspaceCatalogue::Make({0, 32}).ok());
  EXPECT_FALSE(catalogue.Add(key, {{1}}).ok()) << "one batch of two";
  EXPECT_FALSE(catalogue.Add(key, {{-1}, {1}}).ok());
  EXPECT_FALSE(catalogue.Add({true, 0, 2000, 4096, 3, 3, 64, 1}, {{1}, {1}}).ok());
}

// A convolution colo-calibrate measured allocates what it measured (both of a backward's
// workspaces, one after the other), with nothing for it in the upper bound; another is sized by
// the coefficients. cudnn.benchmark profiles keep the coefficients.
TEST(Estimators, TraceUsesTheCataloguedWorkspacesOfMeasuredConvolutions) {
  // Batch 2: 100 MiB live, then the backward of a 3x3 convolution over 20 + 20 MiB tensors.
  WriteTestFile("k.b2.trace",
                fmt::format("colo-alloc-trace 1\nm steps\na {}\nw conv_bwd {} {} 4096 3 3 64 1\n",
                            100 * kMiB, 20 * kMiB, 20 * kMiB));
  const std::string summary = R"({"format": "colo-model-summary", "version": 1, "batch": 2,
    "totals": {"parameters": 1}, "layers": [{"type": "Conv2d", "parameters": 1}],
    "traces": [{"batch": 2, "file": "k.b2.trace"}]BENCHMARK})";
  const std::string heuristic =
      WriteTestFile("k.json", std::regex_replace(summary, std::regex("BENCHMARK"), ""));
  const std::string benchmarked = WriteTestFile(
      "kb.json",
      std::regex_replace(summary, std::regex("BENCHMARK"), R"(, "cudnn_benchmark": true)"));
  const std::string calibration = fmt::format(
      R"({{"format": "colo-gpu-calibration", "gpu": "test", "context_bytes": 0,
      "margin_ratio": 0, "margin_bytes": 0, "conv_uncertainty_scale": 1,
      "conv_workspace": {{"coefficients": {{
        "heuristic": {{"backward": {{"general": {{"median": 1.0, "max": 1.5}}}}}},
        "benchmark": {{"backward": {{"general": {{"median": 1.0, "max": 1.5}}}}}}}},
       "catalogue": {{"batches": [1, 4], "calls": [
         [1, {}, {}, 4096, 3, 3, 64, 1, [{}, {}], [{}, {}]]]}}}}}})",
      10 * kMiB, 10 * kMiB, 30 * kMiB, 40 * kMiB, 30 * kMiB, 46 * kMiB);
  auto cal = GpuCalibration::FromJson(calibration, "cal.json");
  ASSERT_TRUE(cal.ok()) << cal.status().message();
  ASSERT_TRUE(cal->conv_catalogue);
  auto without = GpuCalibration::FromJson(calibration, "cal.json", /*with_catalogue=*/false);
  ASSERT_TRUE(without.ok()) << without.status().message();
  EXPECT_FALSE(without->conv_catalogue);
  EXPECT_TRUE(
      without->conv_workspace[ConvWorkspaceIndex(false, true, ConvCall::Shape::kGeneral)].measured)
      << "the rest of conv_workspace is kept";
  JobDescription job;
  job.batch = 2;
  auto s = LoadModelSummary(heuristic);
  ASSERT_TRUE(s.ok()) << s.status().message();
  job.summary = &*s;
  auto e = MakeTraceEstimator(*cal)->Estimate(job);
  ASSERT_TRUE(e.ok()) << e.status().message();
  // At batch 2, a third of the way from 1 to 4: 30 MiB, then 42 MiB in a segment of its own.
  EXPECT_EQ(e->peak.count(), (100 + 30 + 42) * kMiB);
  // Between measured batches: what batch 1's choice, scaled to 2 (80 MiB), would add to 42 MiB.
  EXPECT_EQ(e->upper.count() - e->peak.count(), 38 * kMiB);
  EXPECT_NE(e->detail.find("1 as measured on this GPU"), std::string::npos) << e->detail;
  EXPECT_EQ(e->caveat, "") << "every call has its geometry";

  // A profile made before colo-profile recorded geometry: no catalogued call applies, the bound
  // holds 3x the largest tensor, and the estimate says why.
  WriteTestFile("old.b2.trace", fmt::format("colo-alloc-trace 1\nm steps\na {}\nw conv {} {}\n",
                                            100 * kMiB, 20 * kMiB, 20 * kMiB));
  auto old = LoadModelSummary(WriteTestFile(
      "old.json", std::regex_replace(std::regex_replace(summary, std::regex("BENCHMARK"), ""),
                                     std::regex("k\\.b2"), "old.b2")));
  ASSERT_TRUE(old.ok()) << old.status().message();
  job.summary = &*old;
  auto guessed = MakeTraceEstimator(*cal)->Estimate(job);
  ASSERT_TRUE(guessed.ok()) << guessed.status().message();
  EXPECT_EQ(guessed->peak.count(), 100 * kMiB) << "no workspace allocated";
  EXPECT_GE(guessed->upper.count() - guessed->peak.count(), 60 * kMiB);
  EXPECT_NE(guessed->caveat.find("1 of 1 convolution calls were profiled without their geometry"),
            std::string::npos)
      << guessed->caveat;

  auto b = LoadModelSummary(benchmarked);
  ASSERT_TRUE(b.ok()) << b.status().message();
  job.summary = &*b;
  auto timed = MakeTraceEstimator(*cal)->Estimate(job);
  ASSERT_TRUE(timed.ok()) << timed.status().message();
  // One workspace of 1.0 x (40 MiB + 4 KiB), in a 42 MiB segment; half of that more in the bound.
  EXPECT_EQ(timed->peak.count(), 142 * kMiB) << "one workspace at the median coefficient";
  EXPECT_EQ(timed->upper.count(), 142 * kMiB + (40 * kMiB + 4096) / 2);

  for (const char* bad :
       {R"("batches": [], "calls": [])", R"("batches": [1, 4], "calls": [[1, 2, 3]])",
        R"("batches": [1, 4], "calls": [[1, 2, 3, 4, 3, 3, 64, 1, [-5], [1]]])"}) {
    auto broken = GpuCalibration::FromJson(
        R"({"format": "colo-gpu-calibration", "gpu": "t", "context_bytes": 0,
        "conv_workspace": {"catalogue": {)" +
            std::string(bad) + "}}}",
        "bad.json");
    ASSERT_FALSE(broken.ok()) << bad;
    EXPECT_NE(broken.status().message().find("bad.json"), std::string::npos)
        << broken.status().message();
  }
}

// ConvNeXt's depthwise convolutions read their input channels-last, and cuDNN's NHWC kernels take a
// workspace where the contiguous ones of the same geometry take none: the profile says which layout
// a call had, and the catalogue answers for that layout only.
TEST(Estimators, ChannelsLastConvolutionsUseTheirOwnCataloguedWorkspaces) {
  const std::string line = fmt::format("w conv_bwd {0} {0} 37632 7 7 192 192", 18 * kMiB);
  auto t = ParseAllocationTrace(fmt::format("colo-alloc-trace 1\n{0}\n{0} 0\n{0} 1\n", line), "t");
  ASSERT_TRUE(t.ok()) << t.status().message();
  EXPECT_FALSE(t->convs[0].channels_last);
  EXPECT_FALSE(t->convs[1].channels_last);
  EXPECT_TRUE(t->convs[2].channels_last);
  EXPECT_FALSE(ParseAllocationTrace("colo-alloc-trace 1\n" + line + " 2\n", "t").ok());
  EXPECT_FALSE(ParseAllocationTrace("colo-alloc-trace 1\n" + line + " 1 1\n", "t").ok());
  WriteTestFile("d.b2.trace",
                fmt::format("colo-alloc-trace 1\nm steps\na {}\n{}\n", 100 * kMiB, line + " 1"));
  const std::string summary = WriteTestFile("d.json", R"({"format": "colo-model-summary",
    "version": 1, "batch": 2, "totals": {"parameters": 1}, "layers": [{"type": "Conv2d",
    "parameters": 1}], "traces": [{"batch": 2, "file": "d.b2.trace"}]})");
  auto calibration = [&](const std::string& channels_last_calls) {
    return GpuCalibration::FromJson(
        fmt::format(R"({{"format": "colo-gpu-calibration", "gpu": "test", "context_bytes": 0,
        "margin_ratio": 0, "margin_bytes": 0, "conv_workspace": {{"catalogue": {{
        "batches": [2], "calls": [[1, {0}, {0}, 37632, 7, 7, 192, 192, []]]{1}}}}}}})",
                    9 * kMiB, channels_last_calls),
        "cal.json");
  };
  auto s = LoadModelSummary(summary);
  ASSERT_TRUE(s.ok()) << s.status().message();
  JobDescription job;
  job.batch = 2;
  job.summary = &*s;
  auto nhwc = calibration(fmt::format(R"(, "calls_channels_last": [[1, {0}, {0}, 37632, 7, 7, 192,
      192, [{1}]]])",
                                      9 * kMiB, 160 * kMiB));
  ASSERT_TRUE(nhwc.ok()) << nhwc.status().message();
  auto e = MakeTraceEstimator(*nhwc)->Estimate(job);
  ASSERT_TRUE(e.ok()) << e.status().message();
  EXPECT_EQ(e->peak.count(), (100 + 160) * kMiB) << "the NHWC workspace, in a segment of its own";
  EXPECT_NE(e->detail.find("1 as measured on this GPU"), std::string::npos) << e->detail;
  // A calibration without NHWC measurements does not take the contiguous call's for it.
  auto nchw = calibration("");
  ASSERT_TRUE(nchw.ok()) << nchw.status().message();
  auto older = MakeTraceEstimator(*nchw)->Estimate(job);
  ASSERT_TRUE(older.ok()) << older.status().message();
  EXPECT_NE(older->detail.find("0 as measured on this GPU"), std::string::npos) << older->detail;
  auto broken = calibration(R"(, "calls_channels_last": [[1, 2]])");
  ASSERT_FALSE(broken.ok());
  EXPECT_NE(broken.status().message().find("catalogue calls_channels_last 0"), std::string::npos)
      << broken.status().message();
}

TEST(Estimators, HistoryShrinksItsMarginWithEvidence) {
  JobDescription job;
  auto history = MakeHistoryEstimator();
  EXPECT_EQ(history->Estimate(job).status().code(), StatusCode::kUnavailable);
  job.history = {GiB(10)};
  auto one = history->Estimate(job);
  job.history = {GiB(10), GiB(10), GiB(10), GiB(10)};
  auto four = history->Estimate(job);
  ASSERT_TRUE(one.ok() && four.ok());
  EXPECT_EQ(one->peak, GiB(10));
  EXPECT_GT(one->upper, four->upper);
  EXPECT_GT(four->upper, GiB(10));
  job.history = {GiB(8), GiB(10)};  // the spread the runs showed is the least margin
  EXPECT_GE(history->Estimate(job)->upper, GiB(12));
}

TEST(Estimators, BestPrefersMeasurementsThenTraceThenModels) {
  std::vector<NamedEstimate> all;
  all.push_back({"horus", MemoryEstimate{GiB(9), GiB(9), GiB(9), "horus"}, 0});
  all.push_back({"gpumemnet", MemoryEstimate{GiB(8), GiB(0), GiB(8), "gpumemnet"}, 0});
  EXPECT_EQ(BestEstimate(all)->estimator, "gpumemnet");
  all.push_back({"trace", MemoryEstimate{GiB(5), GiB(5), GiB(6), "trace"}, 0});
  EXPECT_EQ(BestEstimate(all)->estimator, "trace");
  all.push_back({"history", Unavailable("none"), 0});
  EXPECT_EQ(BestEstimate(all)->estimator, "trace");
  all.push_back({"history", MemoryEstimate{GiB(5), GiB(5), GiB(5), "history"}, 0});
  EXPECT_EQ(BestEstimate(all)->estimator, "history");
  EXPECT_EQ(BestEstimate({}), nullptr);
}

TEST(GpuMemNet, LearnsASeparableProblemAndRoundTripsThroughJson) {
  // Peak memory grows with log(parameters) in this toy: the ensemble must learn the buckets.
  Rng rng(7);
  std::vector<GpuMemNetExample> train, validation, test;
  const size_t n = GpuMemNetFeatures::Names().size();
  for (int i = 0; i < 600; ++i) {
    GpuMemNetExample e;
    e.features.assign(n, 0.0);
    e.features[9] = rng.Uniform(10, 20);
    e.peak_bytes = static_cast<int64_t>((e.features[9] - 10) / 10 * 4 * (int64_t{1} << 30));
    (i % 10 < 7 ? train : i % 10 < 9 ? validation : test).push_back(e);
  }
  GpuMemNetTraining options;
  options.members = 3;
  options.epochs = 60;
  auto ensemble = TrainEnsemble("mlp", int64_t{1} << 30, train, validation, test, options);
  EXPECT_EQ(ensemble.classes, 4);
  EXPECT_GT(ensemble.test_accuracy, 0.85);
  GpuMemNetModel model;
  model.provenance = "unit test";
  model.Add(ensemble, true);
  auto loaded = GpuMemNetModel::FromJson(model.ToJson(), "roundtrip");
  ASSERT_TRUE(loaded.ok()) << loaded.status().message();
  const GpuMemNetEnsemble* e = loaded->Find("mlp");
  ASSERT_NE(e, nullptr);
  for (const auto& row : test)
    EXPECT_EQ(e->Classify(row.features), ensemble.Classify(row.features));
  EXPECT_EQ(loaded->Find("cnn"), nullptr);
  EXPECT_FALSE(GpuMemNetModel::FromJson(R"({"format": "other"})", "x").ok());
}

TEST(GpuMemNet, ShippedWeightsAnswerForEveryFamily) {
  const std::string path = FindDataFile("gpumemnet.json");
  ASSERT_FALSE(path.empty());
  auto model = GpuMemNetModel::Load(path);
  ASSERT_TRUE(model.ok()) << model.status().message();
  auto estimator = MakeGpuMemNetEstimator(std::make_shared<const GpuMemNetModel>(*model));
  for (const std::string file : {"hf-gpt2-b4-adam.json", "tv-resnet50-b32-adam.json"}) {
    auto s = LoadModelSummary(kData + file);
    ASSERT_TRUE(s.ok());
    JobDescription job;
    job.summary = &*s;
    auto e = estimator->Estimate(job);
    ASSERT_TRUE(e.ok()) << e.status().message();
    EXPECT_EQ(e->peak, e->upper);  // the bucket's upper edge
    EXPECT_EQ(e->peak.count() % GiB(1).count(), 0);
  }
}

TEST(Calibration, ShippedH200ProfileLoads) {
  auto c = LoadCalibration("h200");
  ASSERT_TRUE(c.ok()) << c.status().message();
  EXPECT_GT(c->context_bytes, 500 * kMiB);
  auto missing = LoadCalibration("no-such-gpu");
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("colo-calibrate"), std::string::npos);
}

}  // namespace
}  // namespace colo
