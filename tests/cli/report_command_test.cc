// colo report's client half: the times it takes, and a recorded run as the simulator's result.
#include "cli/report_command.h"

#include <gtest/gtest.h>

#include <cmath>

namespace colo {
namespace {

TEST(ReportCommand, ParsesTimes) {
  const double now = 1'700'000'000;
  EXPECT_EQ(*ParseReportTime("2h", now), now - 7200);
  EXPECT_EQ(*ParseReportTime("-30m", now), now - 1800);
  EXPECT_EQ(*ParseReportTime("1699990000", now), 1699990000);
  auto local = ParseReportTime("2024-05-01T12:00", now);
  ASSERT_TRUE(local.ok());
  EXPECT_GT(*local, 1714500000);
  EXPECT_LT(*local, 1714600000);
  auto bad = ParseReportTime("yesterday", now);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("'yesterday' is not a time"), std::string::npos);
  EXPECT_FALSE(ParseReportTime("", now).ok());
}

TEST(ReportCommand, RunBecomesASimResult) {
  api::RunReportReply run;
  run.since = 1000;
  run.until = 2000;
  run.policy = "worst-fit:margin=2GiB,smact=0.8";
  run.gpus = {{0, "GPU-a", "A100", Bytes(int64_t{40} << 30)}};
  run.gpu_points = {{1000, 0, 4.0 * (1 << 30), 0.5, 0.2, std::nullopt, 200, 5e6},
                    {1010, 0, std::nullopt, 0.7, 0.3, std::nullopt, 300, 7e6}};
  run.queue_points = {{1000, 1, 0}, {1010, 0, 1}};
  api::RunJob ok;
  ok.summary.id = 1;
  ok.summary.name = "ok";
  ok.summary.state = JobState::kSucceeded;
  ok.summary.submitted = 1000;
  ok.summary.finished = 1100;
  api::AttemptInfo first;
  first.gpus = {0};
  first.started = 1010;
  first.ended = 1050;
  first.exit_kind = "out-of-memory";
  api::AttemptInfo second = first;
  second.started = 1060;
  second.ended = 1100;
  second.exit_kind = "success";
  ok.attempts = {first, second};
  api::RunJob waiting;
  waiting.summary.id = 2;
  waiting.summary.state = JobState::kQueued;
  waiting.summary.submitted = 1500;
  waiting.summary.redacted = true;
  run.jobs = {ok, waiting};

  const SimResult r = RunToSimResult(run, 1000);
  EXPECT_EQ(r.metrics.label, "colod: worst-fit:margin=2GiB,smact=0.8");
  EXPECT_EQ(r.metrics.jobs, 2);
  EXPECT_EQ(r.metrics.succeeded, 1);
  EXPECT_EQ(r.metrics.oom_crashes, 1);
  EXPECT_DOUBLE_EQ(r.metrics.wait_avg_s, 10);
  EXPECT_DOUBLE_EQ(r.metrics.jct_avg_s, 100);
  EXPECT_DOUBLE_EQ(r.metrics.energy_mj, 2);
  EXPECT_DOUBLE_EQ(r.metrics.mean_smact, 0.6);
  EXPECT_NEAR(r.metrics.lost_gpu_hours, 40.0 / 3600, 1e-12);
  ASSERT_EQ(r.timeline.series.size(), 1u);
  EXPECT_TRUE(std::isnan(r.timeline.series[0][1].memory_gib)) << "missing stays missing";
  EXPECT_DOUBLE_EQ(r.timeline.series[0][0].memory_gib, 4);
  ASSERT_EQ(r.timeline.segments.size(), 2u);
  EXPECT_EQ(r.timeline.segments[0].outcome, "oom");
  EXPECT_EQ(r.timeline.segments[1].outcome, "done");
  EXPECT_EQ(r.timeline.queue.size(), 2u);
  ASSERT_EQ(r.jobs.size(), 2u);
  EXPECT_EQ(r.jobs[1].end_s, -1);
  EXPECT_EQ(r.jobs[1].reason, "(another user's)");
  EXPECT_EQ(r.timeline.capacity_gib, 40);
}

}  // namespace
}  // namespace colo
