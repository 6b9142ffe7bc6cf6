#include "sim/simulator.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "common/rng.h"
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

TEST(Simulator, AJobThatOverflowsAGpuIsRetriedOnceAtTheNeedItsFiguresGive) {
  // A 20 GiB job placed blind beside a 25 GiB one on a 40 GiB GPU crashes at its peak. Its message
  // says what it held (the 15 GiB left) and what it tried to allocate, as PyTorch's does, and its
  // need is raised past its peak: it waits for room and runs on its second attempt, as colod
  // recovered such a job on real GPUs (not from the start-up memory its samples saw, which crashes
  // it again beside the same neighbour).
  const Trace trace = Csv("0,300,25GiB,0.3,5,1,a\n10,100,20GiB,0.3,30,1,a\n");
  SimOptions options = A100x4();
  options.server.gpus = 1;
  const SimResult r = RunSim(trace, "worst-fit:est=none,grace=off", options);
  EXPECT_EQ(r.metrics.succeeded, 2);
  EXPECT_EQ(r.jobs[1].ooms, 1);
  EXPECT_EQ(r.jobs[1].attempts, 2);
  EXPECT_GE(r.jobs[1].end_s, 300 + 100) << "its retry waited for the room its raised need asks";
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
  // Runs teach only their own user's jobs, as in colod.
  auto two_users = ParseColoCsv(
      "submit_s,duration_s,peak_mem,smact,warmup_s,declared_mem,model,owner\n"
      "0,100,10GiB,0.2,10,25GiB,m,alice\n1,100,10GiB,0.2,10,25GiB,m,bob\n"
      "2,100,10GiB,0.2,10,25GiB,m,bob\n",
      "test.csv");
  ASSERT_TRUE(two_users.ok()) << two_users.status().ToString();
  const SimResult apart = RunSim(*two_users, "worst-fit:est=declared,grace=off,learn=on", options);
  EXPECT_NEAR(apart.jobs[1].start_s, 100, 1);
  EXPECT_NEAR(apart.jobs[2].start_s, 200, 1) << "alice's run taught bob's jobs nothing";
}

TEST(Simulator, FairShareLetsALightUserPassAHeavyUsersBacklog) {
  // Alice submits 40 jobs at once, Bob one a second later: under FIFO Bob waits for all of hers.
  std::string rows;
  for (int i = 0; i < 40; ++i) rows += "0,100,2GiB,0.2,10,1,alice\n";
  rows += "1,100,2GiB,0.2,10,1,bob\n";
  const Trace trace = Csv(rows);
  SimOptions options = A100x4();
  options.cluster = ClusterMode::kPerServer;
  const SimResult fifo = RunSim(trace, "exclusive", options);
  options.scheduler.fairness.order = QueueOrder::kFairShare;
  const SimResult fair = RunSim(trace, "exclusive", options);
  EXPECT_NEAR(fifo.jobs[40].start_s, 1000, 1e-6);
  EXPECT_NEAR(fair.jobs[40].start_s, 100, 1e-6) << "Bob's job takes the first GPU to free";
  EXPECT_EQ(fair.metrics.users, 2);
  EXPECT_EQ(fifo.metrics.worst_user, "bob");
  EXPECT_NEAR(fifo.metrics.worst_user_slowdown, 10.99, 0.01);
  // FIFO: Alice's jobs end at 100..1000 s (mean slowdown 5.5), Bob's at 1100 s (10.99).
  EXPECT_NEAR(fifo.metrics.jain_slowdown,
              (5.5 + 10.99) * (5.5 + 10.99) / (2 * (5.5 * 5.5 + 10.99 * 10.99)), 1e-3);
  EXPECT_EQ(fair.metrics.worst_user, "alice");
  EXPECT_LT(fair.metrics.worst_user_slowdown, 0.6 * fifo.metrics.worst_user_slowdown);
  EXPECT_NEAR(fair.metrics.total_time_s, fifo.metrics.total_time_s, 1e-6);
  EXPECT_NE(FormatTable({fifo, fair}, "").find("jain"), std::string::npos);
}

TEST(Simulator, PreemptionStopsAHeavyUsersJobWhichResumesFromItsCheckpoint) {
  // Alice's four 1,000 s jobs fill the four GPUs; Bob's 100 s job comes a second later.
  const Trace trace =
      Csv("0,1000,2GiB,0.2,10,1,alice\n0,1000,2GiB,0.2,10,1,alice\n0,1000,2GiB,0.2,10,1,alice\n"
          "0,1000,2GiB,0.2,10,1,alice\n1,100,2GiB,0.2,10,1,bob\n");
  SimOptions options = A100x4();
  options.cluster = ClusterMode::kPerServer;
  options.scheduler.fairness.order = QueueOrder::kFairShare;
  const SimResult waits = RunSim(trace, "exclusive", options);
  options.scheduler.fairness.preempt = true;
  options.scheduler.fairness.preempt_after = Seconds(60);
  options.scheduler.fairness.preemptible = Preemptible::kAll;
  const SimResult preempts = RunSim(trace, "exclusive", options);
  EXPECT_EQ(waits.metrics.preemptions, 0);
  EXPECT_NEAR(waits.jobs[4].start_s, 1000, 1e-6);
  EXPECT_EQ(preempts.metrics.preemptions, 1);
  EXPECT_NEAR(preempts.jobs[4].start_s, 61, 1e-6) << "Bob's job starts once it waited 60 s";
  EXPECT_EQ(preempts.metrics.succeeded, 5);
  // The most recently started of Alice's (the last, by id) stops at 61 s, 61 s of its work
  // done, and takes up the 939 s left when Bob's job ends at 161 s.
  const JobResult& stopped = preempts.jobs[3];
  EXPECT_EQ(stopped.attempts, 2);
  EXPECT_NEAR(stopped.end_s, 161 + 939, 1e-6) << "its work up to the checkpoint is kept";
  EXPECT_EQ(preempts.jobs[0].attempts, 1);
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

TEST(Simulator, EachJobReachesItsPeakItsOwnWarmUpAfterItsStart) {
  // Beside a 25 GiB job on one 40 GiB GPU, placed blind, a 20 GiB job crashes whenever it reaches
  // its peak, its warm-up after its start: what the crashes lose is each job's warm-up times its
  // crashes. Seven warm-ups, more than the engine keeps apart from its heap, so that some wait
  // there and some beside it.
  const std::vector<int> warmups = {60, 10, 50, 20, 40, 30};
  std::string rows = "0,5000,25GiB,0.1,1,1,a\n";
  for (int warmup : warmups) rows += fmt::format("1,1000,20GiB,0.1,{},1,a\n", warmup);
  SimOptions options = A100x4();
  options.server.gpus = 1;
  const SimResult r = RunSim(Csv(rows), "round-robin:est=none,gates=none", options);
  double lost_s = 0;
  for (size_t i = 0; i < warmups.size(); ++i) {
    EXPECT_GE(r.jobs[i + 1].ooms, 1);
    lost_s += r.jobs[i + 1].ooms * warmups[i];
  }
  EXPECT_NEAR(r.metrics.lost_gpu_hours * 3600, lost_s, 1e-6);
  EXPECT_EQ(r.metrics.succeeded, 7);
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
  EXPECT_EQ(spec->policy.name, "worst-fit");
  EXPECT_EQ(spec->policy.gates.memory_margin, GiB(5));
  EXPECT_EQ(spec->estimator, "none");
  EXPECT_EQ(spec->sharing, SharingMode::kPlain);
  EXPECT_EQ(spec->recovery, RecoveryMode::kThesis);
  EXPECT_FALSE(ParseRunSpec("worst-fit:share=warp", RunSpec{}).ok());
  const auto unknown = ParseRunSpec("nope", RunSpec{});
  ASSERT_FALSE(unknown.ok());
  EXPECT_NE(unknown.status().message().find("unknown policy 'nope'"), std::string::npos);
  // The defaults' gates are where a spec starts; its own settings win.
  RunSpec defaults;
  defaults.policy.gates.memory_margin = GiB(3);
  EXPECT_EQ(ParseRunSpec("worst-fit", defaults)->policy.gates.memory_margin, GiB(3));
  EXPECT_EQ(ParseRunSpec("worst-fit:margin=5GiB", defaults)->policy.gates.memory_margin, GiB(5));
  EXPECT_EQ(ParseRunSpec("OR-LUG", defaults)->policy.gates.memory_margin, GiB(5));
}

// ---- The cluster layer ----

SimOptions Cluster(int servers, int gpus, ClusterMode mode = ClusterMode::kQueue) {
  SimOptions o = A100x4();
  o.server.gpus = gpus;
  o.servers = servers;
  o.cluster = mode;
  o.record_timeline = false;
  return o;
}

TEST(SimCluster, PerServerLeavesAJobBehindABusyServerTheQueueDoesNot) {
  // Two one-GPU servers, whole GPUs. A long job and two short ones arrive together: the former
  // rule sends the third to the first server (least demand, lowest index), behind the long job,
  // while the second server idles after 10 s. The cluster queue starts it there at 10 s.
  const Trace trace = Csv("0,1000,2GiB,0.2,1,1,a\n0,10,2GiB,0.2,1,1,a\n0,10,2GiB,0.2,1,1,a\n");
  const SimResult old_rule = RunSim(trace, "exclusive", Cluster(2, 1, ClusterMode::kPerServer));
  const SimResult queue = RunSim(trace, "exclusive", Cluster(2, 1));
  EXPECT_NEAR(old_rule.jobs[2].start_s, 1000, 1e-6);
  EXPECT_NEAR(queue.jobs[2].start_s, 10, 1e-6);
  EXPECT_EQ(queue.jobs[2].server, 1);
  EXPECT_EQ(queue.metrics.succeeded, 3);
}

TEST(SimCluster, TheJobGoesToTheMostFreeServerOrWithBestFitTheLeastFree) {
  // Server 0 holds a 20 GiB job, server 1 a 5 GiB one (worst-fit, oracle): a third job goes to
  // server 1, where more planned memory is free, though server 0 could start it too.
  const Trace trace =
      Csv("0,1000,20GiB,0.2,1,1,a\n1,1000,5GiB,0.2,1,1,a\n100,100,2GiB,0.2,1,1,a\n");
  const SimResult r = RunSim(trace, "worst-fit", Cluster(2, 1));
  EXPECT_EQ(r.jobs[0].server, 0);
  EXPECT_EQ(r.jobs[1].server, 1);
  EXPECT_EQ(r.jobs[2].server, 1);
  EXPECT_NEAR(r.jobs[2].start_s, 100, 1e-6);
  // Slurm's best fit sends it to the least free server that can start it.
  SimOptions best_fit = Cluster(2, 1);
  best_fit.node_choice = NodeChoice::kBestFit;
  const SimResult packed = RunSim(trace, "worst-fit", best_fit);
  EXPECT_EQ(packed.jobs[1].server, 1) << "server 0's GPU is in its launch grace at 1 s";
  EXPECT_EQ(packed.jobs[2].server, 0) << "beside the 20 GiB job: the least free that fits";
  // Both rules only choose among servers that can start the job now.
  const Trace big = Csv("0,1000,20GiB,0.2,1,1,a\n1,1000,25GiB,0.2,1,1,a\n");
  EXPECT_EQ(RunSim(big, "worst-fit", best_fit).jobs[1].server, 1);
  EXPECT_NEAR(RunSim(big, "worst-fit", best_fit).jobs[1].start_s, 1, 1e-6);
}

TEST(SimCluster, StrictOrderNeverStartsALaterJobFirstBackfillDoes) {
  // Two 4-GPU servers, whole GPUs: a 2-GPU job holds half of server 0 for 100 s, a 1-GPU job
  // one GPU of server 1 for 1000 s, and a 4-GPU job waits for a whole server. A 1-GPU job behind
  // it starts at once with backfill and only after it in FIFO.
  const Trace trace = Csv(
      "0,100,2GiB,0.2,1,2,a\n0,1000,2GiB,0.2,1,1,a\n1,100,2GiB,0.2,1,4,a\n2,50,2GiB,0.2,1,1,a\n");
  SimOptions fifo = Cluster(2, 4, ClusterMode::kFifo);
  fifo.check_dispatch = true;
  SimOptions queue = Cluster(2, 4);
  queue.check_dispatch = true;
  const SimResult strict = RunSim(trace, "exclusive", fifo);
  const SimResult backfill = RunSim(trace, "exclusive", queue);
  EXPECT_NEAR(strict.jobs[2].start_s, 100, 1e-6);
  EXPECT_NEAR(strict.jobs[3].start_s, 100, 1e-6) << "not before the 4-GPU job";
  // The 4-GPU job reserves server 1 (3 idle GPUs against 2); the 1-GPU job behind it is
  // backfilled at once on server 0, and the 4-GPU job starts there when it empties first, at 100.
  EXPECT_NEAR(backfill.jobs[3].start_s, 2, 1e-6) << "backfilled";
  EXPECT_EQ(backfill.jobs[3].server, 0);
  EXPECT_NEAR(backfill.jobs[2].start_s, 100, 1e-6);
  EXPECT_EQ(backfill.jobs[2].server, 0);
  EXPECT_EQ(strict.metrics.dispatch_violations, 0);
  EXPECT_EQ(backfill.metrics.dispatch_violations, 0);
  EXPECT_GT(backfill.metrics.dispatch_checks, 0);
}

// Random small traces: mixed GPU counts, memory from 1 to 30 GiB on 40 GiB GPUs, bursty arrivals.
Trace RandomTrace(uint64_t seed, int jobs, int max_gpus) {
  Rng rng(seed);
  std::string rows;
  double at = 0;
  for (int i = 0; i < jobs; ++i) {
    at += rng.Exponential(rng.Uniform() < 0.5 ? 5 : 120);
    const double u = rng.Uniform();
    const int gpus = std::min(max_gpus, u < 0.75 ? 1 : u < 0.9 ? 2 : 4);
    const double duration = std::round(rng.Uniform(60, 2000));
    const int peak = 1 + static_cast<int>(rng.Below(30));
    const double smact = std::round(rng.Uniform(0.05, 0.95) * 100) / 100;
    const int warmup = static_cast<int>(std::min(duration - 1, rng.Uniform(0, 120)));
    rows += fmt::format("{:.0f},{:.0f},{}GiB,{},{},{},u{}\n", at, duration, peak, smact, warmup,
                        gpus, rng.Below(2));
  }
  return Csv(rows);
}

TEST(SimCluster, NoJobWaitsWhileAServerCouldStartIt) {
  // The property, checked after every instant by probing every waiting job the rule covers
  // against every server with the policy itself: in the queue mode no server but the one
  // reserved for the oldest job could start a waiting job; in FIFO, none could start the oldest.
  const std::vector<std::string> specs = {"exclusive",          "worst-fit",
                                          "best-fit:grace=off", "least-utilized:est=noisy:0.3",
                                          "first-fit:est=none", "round-robin:same-user=off",
                                          "shards:n=2",         "worst-fit:learn=on"};
  int64_t checks = 0;
  for (uint64_t seed = 1; seed <= 6; ++seed) {
    const Trace trace = RandomTrace(seed, 60, 4);
    for (const auto& [mode, choice] : {std::pair{ClusterMode::kQueue, NodeChoice::kMostFree},
                                       std::pair{ClusterMode::kQueue, NodeChoice::kBestFit},
                                       std::pair{ClusterMode::kFifo, NodeChoice::kMostFree}}) {
      for (const std::string& spec : specs) {
        SCOPED_TRACE(fmt::format("seed {} {} {} {}", seed, ToString(mode),
                                 choice == NodeChoice::kBestFit ? "best-fit" : "most-free", spec));
        SimOptions options = Cluster(3, 4, mode);
        options.node_choice = choice;
        options.check_dispatch = true;
        const SimResult r = RunSim(trace, spec, options);
        EXPECT_EQ(r.metrics.dispatch_violations, 0);
        // Every job ends: it succeeds, or is refused at submission (a noisy estimate above the
        // GPU), or fails after out-of-memory crashes (colo's retry cap, Slurm's requeue limit).
        for (const JobResult& job : r.jobs) {
          if (job.state == JobState::kSucceeded) continue;
          EXPECT_TRUE(job.reason.starts_with("rejected") ||
                      job.reason.find("out of memory") != std::string::npos)
              << job.id << ": " << job.reason;
        }
        if (spec == "exclusive" || spec == "worst-fit" || spec == "best-fit:grace=off") {
          EXPECT_EQ(r.metrics.succeeded, 60);
        }
        checks += r.metrics.dispatch_checks;
      }
    }
  }
  EXPECT_GT(checks, 10000) << "jobs did wait, and were checked";
}

TEST(SimCluster, AnOverloadedClusterMissesNoStartWhileWindowsFall) {
  // Busy jobs arriving faster than they end: heads wait on the utilization gate while windows
  // fall, and most looks at a server find its gates as they were read (they read nothing and
  // hold no round). Still no waiting job is left where a server could have started it for a
  // sample interval, and every job runs.
  std::string rows;
  for (int i = 0; i < 80; ++i) {
    rows += fmt::format("{},{},{}GiB,{},{},1,u{}\n", i * 7, 300 + (i * 37) % 900, 2 + i % 9,
                        0.5 + 0.05 * (i % 9), 20 + i % 40, i % 3);
  }
  const Trace trace = Csv(rows);
  for (const ClusterMode mode : {ClusterMode::kQueue, ClusterMode::kPerServer}) {
    SimOptions options = Cluster(3, 2, mode);
    options.check_dispatch = mode == ClusterMode::kQueue;
    const SimResult r = RunSim(trace, "worst-fit", options);
    EXPECT_EQ(r.metrics.succeeded, 80) << ToString(mode);
    EXPECT_EQ(r.metrics.dispatch_violations, 0) << ToString(mode);
    if (mode == ClusterMode::kQueue) {
      EXPECT_GT(r.metrics.dispatch_checks, 1000) << "jobs waited";
    }
  }
}

TEST(SimCluster, FifoStartsJobsInArrivalOrder) {
  for (uint64_t seed = 1; seed <= 4; ++seed) {
    const Trace trace = RandomTrace(seed, 80, 4);
    for (const char* spec : {"exclusive", "worst-fit", "least-utilized:grace=off"}) {
      SCOPED_TRACE(fmt::format("seed {} {}", seed, spec));
      const SimResult r = RunSim(trace, spec, Cluster(3, 4, ClusterMode::kFifo));
      ASSERT_EQ(r.metrics.succeeded, 80);
      int later_first = 0;
      for (size_t i = 1; i < r.jobs.size(); ++i)
        later_first += r.jobs[i].start_s < r.jobs[i - 1].start_s;
      EXPECT_EQ(later_first, 0);
    }
  }
  // With backfill the same traces do start later jobs first (the rule above is not vacuous).
  const SimResult backfill = RunSim(RandomTrace(1, 80, 4), "exclusive", Cluster(3, 4));
  int later_first = 0;
  for (size_t i = 1; i < backfill.jobs.size(); ++i)
    later_first += backfill.jobs[i].start_s < backfill.jobs[i - 1].start_s;
  EXPECT_GT(later_first, 0);
}

TEST(SimCluster, ShardsCrashWhenCoLocatedPeaksOverflowAndTheJobIsRequeued) {
  // One 40 GiB GPU cut into 2 shards: two 25 GiB jobs share it by count alone. The second
  // reaches its peak at 61 s beside the first and crashes; Slurm requeues it, the free shard takes
  // it again at once, and by its next peak (121 s) the first (60 s alone, a little slowed) has
  // ended: it runs to the end.
  const Trace trace = Csv("0,60,25GiB,0.1,10,1,a\n1,1000,25GiB,0.1,60,1,a\n");
  const SimOptions options = Cluster(1, 1);
  const SimResult r = RunSim(trace, "shards:n=2,est=none", options);
  EXPECT_EQ(r.metrics.oom_crashes, 1);
  EXPECT_EQ(r.metrics.requeues, 1);
  EXPECT_NEAR(r.metrics.lost_gpu_hours, 60.0 / 3600, 1e-9) << "from its start to its peak";
  EXPECT_EQ(r.metrics.succeeded, 2);
  EXPECT_EQ(r.jobs[1].ooms, 1);
  EXPECT_EQ(r.jobs[1].attempts, 2);
  EXPECT_NEAR(r.jobs[1].start_s, 1, 1e-6) << "its first start";
  EXPECT_GE(r.jobs[1].end_s, 61 + 1000 - 1e-6) << "re-run from the start";
  EXPECT_LT(r.jobs[1].end_s, 61 + 1000 + 10) << "slowed only while the first one ran";
  // While the first job holds its memory, every retry crashes: after 5 requeues Slurm holds it.
  const Trace longer = Csv("0,1000,25GiB,0.3,10,1,a\n1,1000,25GiB,0.3,60,1,a\n");
  const SimResult held = RunSim(longer, "shards:n=2,est=none", options);
  EXPECT_EQ(held.metrics.oom_crashes, 6);
  EXPECT_EQ(held.metrics.requeues, 5);
  EXPECT_NEAR(held.metrics.lost_gpu_hours, 6 * 60.0 / 3600, 1e-9);
  EXPECT_EQ(held.jobs[0].state, JobState::kSucceeded);
  EXPECT_EQ(held.jobs[1].state, JobState::kFailed);
  EXPECT_NE(held.jobs[1].reason.find("MaxBatchRequeue"), std::string::npos) << held.jobs[1].reason;
  // With 1 shard per GPU (whole GPUs) nothing crashes; the oracle plans them apart too.
  EXPECT_EQ(RunSim(longer, "shards:n=1", options).metrics.oom_crashes, 0);
  EXPECT_EQ(RunSim(longer, "worst-fit", options).metrics.oom_crashes, 0);
  // Peaks that fit together share without a crash.
  const Trace small = Csv("0,1000,15GiB,0.3,60,1,a\n1,1000,15GiB,0.3,60,1,a\n");
  const SimResult shared = RunSim(small, "shards:n=2,est=none", options);
  EXPECT_EQ(shared.metrics.oom_crashes, 0);
  EXPECT_NEAR(shared.jobs[1].start_s, 1, 1e-6);
}

TEST(SimCluster, AJobThatOverflowsAGpuAloneFailsInsteadOfLooping) {
  const Trace trace = Csv("0,100,45GiB,0.3,10,1,a\n");
  const SimResult r = RunSim(trace, "shards:n=2,est=none", Cluster(1, 1));
  EXPECT_EQ(r.metrics.failed, 1);
  EXPECT_EQ(r.metrics.oom_crashes, 1);
  EXPECT_NE(r.jobs[0].reason.find("alone"), std::string::npos) << r.jobs[0].reason;
}

TEST(SimCluster, AJobNoIdleServerCouldStartIsRefusedInsteadOfBlockingTheQueue) {
  // 37.8 GiB + the 2 GiB margin fit a 40 GiB GPU, but not the 39.6 GiB an idle one has free (the
  // driver holds the rest): refused at submission, it does not hold up the job behind it.
  const Trace trace = Csv("0,100,37.8GiB,0.2,1,1,a\n1,100,2GiB,0.2,1,1,a\n");
  const SimResult r = RunSim(trace, "worst-fit", Cluster(1, 1, ClusterMode::kFifo));
  EXPECT_EQ(r.metrics.rejected, 1);
  EXPECT_NE(r.jobs[0].reason.find("an idle GPU has 39.6 GiB free"), std::string::npos)
      << r.jobs[0].reason;
  EXPECT_EQ(r.jobs[1].state, JobState::kSucceeded);
  EXPECT_NEAR(r.jobs[1].start_s, 1, 1e-6);
}

TEST(SimCluster, ShardSpecsAreChecked) {
  EXPECT_FALSE(ParseRunSpec("shards:n=0", RunSpec{}).ok());
  EXPECT_FALSE(ParseRunSpec("shards:k=2", RunSpec{}).ok());
  EXPECT_EQ(ParseRunSpec("shards:n=2,est=none", RunSpec{})->policy.shards, 2);
  EXPECT_EQ(ParseRunSpec("shards", RunSpec{})->policy.shards, 4);
  EXPECT_FALSE(ParseClusterMode("slurm").ok());
  EXPECT_EQ(*ParseClusterMode("per-server"), ClusterMode::kPerServer);
}

TEST(SimCluster, PerServerReproducesTheFormerRule) {
  // Numbers from the simulator before the cluster queue existed (same trace, seed and servers),
  // rerun with the MPS model's queueing term (the exclusive run shares no GPU and did not move).
  SyntheticOptions synthetic;
  synthetic.jobs = 3000;
  synthetic.jobs_per_hour = 30;
  synthetic.seed = 3;
  const Trace trace = SyntheticPhilly(synthetic);
  SimOptions options;
  options.server = *FindServer("h100x8");
  options.servers = 4;
  options.cluster = ClusterMode::kPerServer;
  options.seed = 3;
  options.record_timeline = false;
  struct Expected {
    const char* spec;
    double total_s, wait_s, jct_s;
    int ooms, succeeded;
  };
  for (const Expected& e : {
           Expected{"exclusive", 3912570.2414, 972751.3369, 983385.0045, 0, 3000},
           Expected{"worst-fit", 2581117.4426, 252985.3765, 267343.6101, 0, 3000},
           Expected{"least-utilized:est=noisy:0.3", 2242720.7789, 316937.6525, 331030.8856, 0,
                    3000},
           Expected{"round-robin:est=none,gates=none", 2401151.1313, 171679.7671, 229178.8097, 925,
                    2998},
       }) {
    SCOPED_TRACE(e.spec);
    const SimResult r = RunSim(trace, e.spec, options);
    EXPECT_NEAR(r.metrics.total_time_s, e.total_s, 1e-3);
    EXPECT_NEAR(r.metrics.wait_avg_s, e.wait_s, 1e-3);
    EXPECT_NEAR(r.metrics.jct_avg_s, e.jct_s, 1e-3);
    EXPECT_EQ(r.metrics.oom_crashes, e.ooms);
    EXPECT_EQ(r.metrics.succeeded, e.succeeded);
  }
}

TEST(SimCluster, OneServerBehavesAsThePerServerRule) {
  // With one server the queue's reservation is that server's own queue: the same run.
  for (const char* spec :
       {"exclusive", "worst-fit", "least-utilized:est=none", "best-fit:grace=off",
        "round-robin:est=none,gates=none,recovery=thesis"}) {
    SCOPED_TRACE(spec);
    const Trace trace = ThesisTrace(90);
    SimOptions queue = A100x4();
    SimOptions old_rule = A100x4();
    old_rule.cluster = ClusterMode::kPerServer;
    const ReportContext context{"thesis-90", "a100x4", 1, 1};
    EXPECT_EQ(ToJson(context, {RunSim(trace, spec, queue)}, true),
              ToJson(context, {RunSim(trace, spec, old_rule)}, true));
  }
}

}  // namespace
}  // namespace colo
