#include "sim/simulator.h"

#include <gtest/gtest.h>

#include "sim/report.h"

namespace colo {
namespace {

SimOptions A100x4() {
  SimOptions o;
  o.server = *FindServer("a100x4");
  return o;
}

SimResult RunSim(const Trace& trace, const std::string& spec_text, SimOptions options = A100x4()) {
  auto spec = ParseRunSpec(spec_text, RunSpec{});
  EXPECT_TRUE(spec.ok()) << spec.status().ToString();
  auto result = Simulate(trace, *spec, options);
  EXPECT_TRUE(result.ok()) << result.status().ToString();
  return *result;
}

Trace Csv(const std::string& rows) {
  auto t =
      ParseColoCsv("submit_s,duration_s,peak_mem,smact,warmup_s,gpus,owner\n" + rows, "test.csv");
  EXPECT_TRUE(t.ok()) << t.status().ToString();
  return *t;
}

TEST(Simulator, ExclusiveRunsOneJobPerGpuInFifoOrder) {
  const Trace trace =
      Csv("0,100,2GiB,0.2,10,1,a\n0,100,2GiB,0.2,10,1,a\n0,100,2GiB,0.2,10,1,a\n"
          "0,100,2GiB,0.2,10,1,a\n0,100,2GiB,0.2,10,1,a\n");
  const SimResult r = RunSim(trace, "exclusive");
  EXPECT_EQ(r.metrics.succeeded, 5);
  EXPECT_NEAR(r.metrics.total_time_s, 200, 1e-6) << "four at once, the fifth after them";
  EXPECT_NEAR(r.jobs[4].start_s, 100, 1e-6);
  EXPECT_EQ(r.metrics.oom_crashes, 0);
}

TEST(Simulator, LightJobsCollocateUnderMpsAndFinishSooner) {
  std::string rows;
  for (int i = 0; i < 16; ++i) rows += "0,600,2GiB,0.2,10,1,a\n";
  const Trace trace = Csv(rows);
  const SimResult exclusive = RunSim(trace, "exclusive");
  const SimResult shared = RunSim(trace, "worst-fit");
  EXPECT_EQ(shared.metrics.succeeded, 16);
  EXPECT_LT(shared.metrics.total_time_s, 0.6 * exclusive.metrics.total_time_s);
  EXPECT_LT(shared.metrics.energy_mj, exclusive.metrics.energy_mj);
  EXPECT_GT(shared.metrics.mean_smact, exclusive.metrics.mean_smact);
}

TEST(Simulator, OverflowCrashesWithOomAndRecoveryFinishesEveryJob) {
  // Two 25 GiB jobs on one 40 GiB GPU, placed blind (no estimator, no gates): the second crashes
  // when it reaches its peak, is recovered, and both finish.
  const Trace trace = Csv("0,1000,25GiB,0.3,60,1,a\n1,1000,25GiB,0.3,60,1,a\n");
  SimOptions options = A100x4();
  options.server.gpus = 1;
  const SimResult blind = RunSim(trace, "round-robin:est=none,gates=none", options);
  EXPECT_GE(blind.metrics.oom_crashes, 1);
  EXPECT_GT(blind.metrics.lost_gpu_hours, 0);
  EXPECT_EQ(blind.metrics.succeeded, 2);
  EXPECT_EQ(blind.jobs[1].ooms, blind.metrics.oom_crashes);
  const SimResult oracle = RunSim(trace, "worst-fit", options);
  EXPECT_EQ(oracle.metrics.oom_crashes, 0);
  EXPECT_EQ(oracle.metrics.succeeded, 2);
}

TEST(Simulator, LearningFromAFinishedRunLetsQueuedJobsOfTheModelShare) {
  // Three runs of one model on one 40 GiB GPU, submitted with a 25 GiB estimate: only one fits at a
  // time. Each really peaks at 10 GiB; once the first has finished, learn=on plans the other two
  // with 11 GiB (the peak + 10%) and they run side by side.
  auto trace = ParseColoCsv(
      "submit_s,duration_s,peak_mem,smact,warmup_s,declared_mem,model\n"
      "0,100,10GiB,0.2,10,25GiB,m\n1,100,10GiB,0.2,10,25GiB,m\n2,100,10GiB,0.2,10,25GiB,m\n",
      "test.csv");
  ASSERT_TRUE(trace.ok()) << trace.status().ToString();
  SimOptions options = A100x4();
  options.server.gpus = 1;
  const SimResult planned = RunSim(*trace, "worst-fit:est=declared,grace=off", options);
  const SimResult learned = RunSim(*trace, "worst-fit:est=declared,grace=off,learn=on", options);
  EXPECT_NEAR(planned.jobs[2].start_s, 200, 1);  // one after the other
  EXPECT_NEAR(learned.jobs[1].start_s, 100, 1);
  EXPECT_NEAR(learned.jobs[2].start_s, 100, 1);  // together
  EXPECT_LT(learned.metrics.total_time_s, planned.metrics.total_time_s - 50);
  EXPECT_EQ(learned.metrics.oom_crashes, 0);
  // Without a model name nothing links the runs.
  auto anonymous = ParseColoCsv(
      "submit_s,duration_s,peak_mem,smact,warmup_s,declared_mem\n"
      "0,100,10GiB,0.2,10,25GiB\n1,100,10GiB,0.2,10,25GiB\n2,100,10GiB,0.2,10,25GiB\n",
      "test.csv");
  ASSERT_TRUE(anonymous.ok());
  EXPECT_NEAR(
      RunSim(*anonymous, "worst-fit:est=declared,grace=off,learn=on", options).jobs[2].start_s, 200,
      1);
  EXPECT_FALSE(ParseRunSpec("worst-fit:learn=maybe", RunSpec{}).ok());
}

TEST(Simulator, ImpossibleJobsAreRejectedNotLost) {
  const Trace trace = Csv("0,100,2GiB,0.2,10,8,a\n0,100,60GiB,0.2,10,1,a\n0,100,2GiB,0.2,10,1,a\n");
  const SimResult r = RunSim(trace, "worst-fit");
  EXPECT_EQ(r.metrics.rejected, 2);
  EXPECT_EQ(r.metrics.succeeded, 1);
  EXPECT_NE(r.jobs[0].reason.find("GPUs"), std::string::npos);
}

Trace CsvWithStartup(const std::string& rows) {
  auto t = ParseColoCsv("submit_s,duration_s,peak_mem,smact,startup_s,gpus\n" + rows, "test.csv");
  EXPECT_TRUE(t.ok()) << t.status().ToString();
  return *t;
}

TEST(Simulator, StartUpIsNeitherSlowedNorSlowsOthersAndDrawsIdlePower) {
  SimOptions options = A100x4();
  options.server.gpus = 1;
  // Two heavy jobs on one GPU under MPS: sharing the SMs slows both. With start-up phases, the
  // overlap of computing is shorter, so both finish sooner than without.
  const std::string spec = "worst-fit:gates=none,grace=off";
  const SimResult computing =
      RunSim(CsvWithStartup("0,100,2GiB,0.9,0,1\n0,100,2GiB,0.9,0,1\n"), spec, options);
  const SimResult starting =
      RunSim(CsvWithStartup("0,100,2GiB,0.9,60,1\n0,100,2GiB,0.9,0,1\n"), spec, options);
  EXPECT_GT(computing.metrics.total_time_s, 150) << "two saturating jobs side by side";
  // The second job computes alone while the first starts up: 60 s of its 100 at full speed.
  EXPECT_LT(starting.jobs[1].end_s, computing.jobs[1].end_s - 30);
  EXPECT_LT(starting.metrics.total_time_s, computing.metrics.total_time_s);

  // A lone job's start-up runs at idle power: energy = idle × start-up + busy × the rest.
  const SimResult alone = RunSim(CsvWithStartup("0,100,2GiB,0.5,40,1\n"), "exclusive", options);
  const PowerModel power;
  const double busy = power.Watts(52, 400, true, 0.5);
  EXPECT_NEAR(alone.metrics.total_time_s, 100, 1e-6) << "start-up is part of the duration";
  EXPECT_NEAR(alone.metrics.energy_mj, (52 * 40 + busy * 60) / 1e6, 1e-6);
}

TEST(Simulator, StartUpMustBeShorterThanTheDuration) {
  auto t = ParseColoCsv("submit_s,duration_s,peak_mem,startup_s\n0,100,2GiB,100\n", "x.csv");
  ASSERT_FALSE(t.ok());
  EXPECT_NE(t.status().message().find("x.csv:2: startup_s '100'"), std::string::npos)
      << t.status().message();
  EXPECT_FALSE(ParseColoCsv("submit_s,duration_s,peak_mem,startup_s\n0,100,2GiB,-1\n", "x").ok());
}

TEST(Simulator, EnergyOfAnIdleServerIsIdlePowerTimesTime) {
  const Trace trace = Csv("0,3600,2GiB,0.0,10,1,a\n");
  const SimResult r = RunSim(trace, "exclusive");
  // One GPU busy at SMACT 0 for an hour, three idle.
  const double busy = PowerModel{}.Watts(52, 400, true, 0.0);
  EXPECT_NEAR(r.metrics.energy_mj, (busy + 3 * 52) * 3600 / 1e6, 1e-3);
}

TEST(Simulator, SameInputSameOutputByteForByte) {
  SyntheticOptions s;
  s.jobs = 300;
  s.jobs_per_hour = 400;
  const Trace trace = SyntheticPhilly(s);
  SimOptions options;
  options.server = *FindServer("h100x8");
  options.servers = 3;
  const SimResult a = RunSim(trace, "least-utilized:est=noisy:0.3", options);
  const SimResult b = RunSim(trace, "least-utilized:est=noisy:0.3", options);
  const ReportContext context{"synthetic", "h100x8", 3, 1};
  EXPECT_EQ(ToJson(context, {a}, true), ToJson(context, {b}, true));
  EXPECT_EQ(a.metrics.succeeded + a.metrics.failed, 300);
}

TEST(RunSpec, SplitsSimulatorKeysFromPolicySettings) {
  auto spec = ParseRunSpec("worst-fit:est=none,share=plain,margin=5GiB,recovery=thesis", RunSpec{});
  ASSERT_TRUE(spec.ok());
  EXPECT_EQ(spec->policy, "worst-fit:margin=5GiB");
  EXPECT_EQ(spec->estimator, "none");
  EXPECT_EQ(spec->sharing, SharingMode::kPlain);
  EXPECT_EQ(spec->recovery, RecoveryMode::kThesis);
  EXPECT_FALSE(ParseRunSpec("worst-fit:share=warp", RunSpec{}).ok());
  auto unknown = Simulate(ThesisTrace(90), *ParseRunSpec("nope", RunSpec{}), A100x4());
  EXPECT_FALSE(unknown.ok());
}

}  // namespace
}  // namespace colo
