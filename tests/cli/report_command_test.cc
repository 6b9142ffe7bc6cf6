// colo report's client half: the times it takes, a recorded run as the simulator's result, and
// what the run tells per user, per GPU and in its notable events (text and HTML).
#include "cli/report_command.h"

#include <gtest/gtest.h>

#include <cmath>

#include "cli/run_report_html.h"
#include "cli/run_summary.h"

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

api::RunReportReply TwoUsersRun() {
  api::RunReportReply run;
  run.since = 1000;
  run.until = 4600;  // an hour
  run.gpus = {{0, "GPU-a", "A100", Bytes(int64_t{40} << 30)},
              {1, "GPU-b", "A100", Bytes(int64_t{40} << 30)}};
  run.gpu_points = {{1000, 0, 4.0 * (1 << 30), 0.5, 0.2, std::nullopt, 200, 3.6e6},
                    {4600, 0, 6.0 * (1 << 30), 0.7, 0.3, std::nullopt, 300, 7.2e6}};
  api::RunJob a;  // alice: planned 8 GiB, used 2 GiB, for half an hour on GPU 0 after 10 min
  a.summary.id = 1;
  a.summary.user = "alice";
  a.summary.state = JobState::kSucceeded;
  a.summary.submitted = 1000;
  a.summary.finished = 3400;
  api::AttemptInfo run_a;
  run_a.number = 1;
  run_a.gpus = {0};
  run_a.started = 1600;
  run_a.ended = 3400;
  run_a.exit_kind = "success";
  run_a.memory_limit = Bytes(int64_t{8} << 30);
  run_a.peak = Bytes(int64_t{2} << 30);
  a.attempts = {run_a};
  api::RunJob b;  // bob: out of memory once, then a time limit, on both GPUs
  b.summary.id = 2;
  b.summary.array_job = 2;
  b.summary.array_task = 0;
  b.summary.user = "bob";
  b.summary.state = JobState::kTimeout;
  b.summary.submitted = 1000;
  b.summary.started = 2000;
  b.summary.finished = 4000;
  b.summary.time_limit_s = 1800;
  api::AttemptInfo oom = run_a;
  oom.gpus = {0, 1};
  oom.started = 1000;
  oom.ended = 1600;
  oom.exit_kind = "out-of-memory";
  oom.memory_limit = Bytes(int64_t{1} << 30);
  oom.peak = Bytes(int64_t{1} << 30);
  api::AttemptInfo late = oom;
  late.number = 2;
  late.started = 2200;
  late.ended = 4000;
  late.exit_kind = "timeout";
  b.attempts = {oom, late};
  run.jobs = {a, b};
  return run;
}

TEST(RunSummary, PerUserPerGpuAndNotableEvents) {
  const RunSummary s = Summarize(TwoUsersRun());
  ASSERT_EQ(s.users.size(), 2u);
  const UserRow& bob = s.users[0];  // most GPU-hours first
  EXPECT_EQ(bob.user, "bob");
  EXPECT_DOUBLE_EQ(bob.gpu_hours, 2 * (600.0 + 1800.0) / 3600);
  EXPECT_EQ((std::pair{bob.timeouts, bob.out_of_memory}), (std::pair{1, 1}));
  EXPECT_DOUBLE_EQ(*bob.wait_mean_s, 0);
  const UserRow& alice = s.users[1];
  EXPECT_DOUBLE_EQ(alice.gpu_hours, 0.5);
  EXPECT_DOUBLE_EQ(*alice.wait_mean_s, 600);
  EXPECT_DOUBLE_EQ(*alice.memory_used_of_planned, 0.25);
  EXPECT_DOUBLE_EQ(alice.planned_unused_gib_hours, 6 * 0.5);
  ASSERT_EQ(s.gpus.size(), 2u);
  // GPU 0 ran bob 1000-1600 and 2200-4000, alice 1600-3400: 3000 s of the hour.
  EXPECT_DOUBLE_EQ(s.gpus[0].busy_share, 3000.0 / 3600);
  EXPECT_DOUBLE_EQ(*s.gpus[0].energy_kwh, 1.0);
  EXPECT_DOUBLE_EQ(*s.gpus[0].smact_mean, 0.6);
  EXPECT_FALSE(s.gpus[1].smact_mean) << "no samples: nothing, not 0";
  ASSERT_EQ(s.events.size(), 2u);
  EXPECT_EQ(s.events[0].kind, "out-of-memory");
  EXPECT_EQ(s.events[0].job, "2_0");
  EXPECT_NE(s.events[0].what.find("attempt 2 started at"), std::string::npos) << s.events[0].what;
  EXPECT_EQ(s.events[1].kind, "timeout");
  EXPECT_NE(s.events[1].what.find("time limit (0:30:00)"), std::string::npos);
  ASSERT_EQ(s.jobs.size(), 2u);
  EXPECT_EQ(s.jobs[0].state, "COMPLETED");
  const std::string text = FormatRunSummary(s);
  EXPECT_NE(text.find("bob"), std::string::npos);
  EXPECT_NE(text.find("job 2_0 (bob) out-of-memory"), std::string::npos) << text;
}

TEST(RunSummary, TheHtmlReportDrawsEveryUserAndGpu) {
  const api::RunReportReply run = TwoUsersRun();
  const std::string html = RunReportHtml(run, Summarize(run), "a test");
  for (const char* needle : {"id=\"memory-0\"", "id=\"activity-1\"", "id=\"gantt\"",
                             "</span>alice</td>", "</span>bob</td>", ">timeout<", "2_0"})
    EXPECT_NE(html.find(needle), std::string::npos) << needle;
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
