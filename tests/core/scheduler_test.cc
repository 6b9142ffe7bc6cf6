#include "core/scheduler.h"

#include <gtest/gtest.h>

#include <deque>
#include <limits>

#include "core/window_stats.h"
#include "policies/registry.h"

namespace colo {
namespace {

class SchedulerTest : public ::testing::Test {
 protected:
  // Job 1 started on GPU 0 (of 2), which has then been 95% busy for `seconds` (sampled each
  // second); a booked job waits at most 10 s for a busy GPU.
  void StartABusyJobOnGpu0(int seconds) {
    SchedulerConfig config;
    config.booked_busy_wait = Seconds(10);
    Build("worst-fit", config, 2);
    ASSERT_TRUE(scheduler_->Submit(Job(1, GiB(4))).ok());
    ASSERT_EQ(scheduler_->Schedule().size(), 1u);
    for (int i = 0; i < seconds; ++i) {
      scheduler_->OnGpuSample(GpuSample{0, clock_.Now(), GiB(4), 0.95, -1, -1, true});
      clock_.Advance(Seconds(1));
    }
  }
  // Every second for `seconds`, GPU i sampled `smact[i]` busy with 4 GiB used.
  void SampleEverySecond(int seconds, const std::vector<double>& smact) {
    for (int i = 0; i < seconds; ++i) {
      for (size_t g = 0; g < smact.size(); ++g) {
        scheduler_->OnGpuSample(
            GpuSample{static_cast<GpuIndex>(g), clock_.Now(), GiB(4), smact[g], -1, -1, true});
      }
      clock_.Advance(Seconds(1));
    }
  }
  void Build(const std::string& policy_spec, SchedulerConfig config = {}, int gpus = 2) {
    auto p = MakePolicy(policy_spec);
    ASSERT_TRUE(p.ok()) << p.status().ToString();
    policy_ = std::move(*p);
    scheduler_ = std::make_unique<Scheduler>(clock_, *policy_, config);
    for (int i = 0; i < gpus; ++i) {
      GpuInfo info;
      info.uuid = "GPU-" + std::to_string(i);
      info.capacity = GiB(40);
      scheduler_->AddGpu(info);
      scheduler_->OnGpuSample(GpuSample{i, clock_.Now(), Bytes(0), 0.0, -1, -1, true});
    }
  }
  // `spec` with a --time limit: its end is known to backfill.
  static JobSpec Timed(JobSpec spec, Duration limit) {
    spec.time_limit = limit;
    return spec;
  }
  JobSpec Job(JobId id, Bytes need, int gpus = 1, std::string owner = "alice") {
    JobSpec s;
    s.id = id;
    s.owner = owner;
    s.gpus = gpus;
    if (need > Bytes(0)) s.memory = MemoryNeed{need, MemorySource::kDeclared, 0.0};
    return s;
  }
  // An out-of-memory exit with the figures PyTorch prints: what the process held, what it tried.
  static JobExit PyTorchOutOfMemory(Bytes in_use, Bytes requested) {
    OutOfMemoryEvidence figures;
    figures.framework = "PyTorch";
    figures.in_use = in_use;
    figures.requested = requested;
    return {ExitKind::kOutOfMemory, "CUDA out of memory", figures};
  }
  ManualClock clock_;
  std::unique_ptr<GatedPolicy> policy_;
  std::unique_ptr<Scheduler> scheduler_;
};

// A driver's figure that is not a number or is infinite is not taken into a GPU's window (its
// settling time would be computed from it): the window holds what it held.
TEST_F(SchedulerTest, ASampleOfNoNumberOrInfinityLeavesTheWindowAsItWas) {
  Build("worst-fit");
  SampleEverySecond(5, {0.4, 0.4});
  const double before = scheduler_->View().gpus[0].smact.last;
  const TimePoint settled_before = scheduler_->NextWakeup().value_or(TimePoint{});
  for (const double garbage :
       {std::numeric_limits<double>::infinity(), std::numeric_limits<double>::quiet_NaN()}) {
    scheduler_->OnGpuSample(GpuSample{0, clock_.Now(), GiB(4), garbage, garbage, garbage, true});
    clock_.Advance(Seconds(1));
    const ClusterView view = scheduler_->View();
    EXPECT_EQ(view.gpus[0].smact.last, before);
    EXPECT_TRUE(view.gpus[0].smocc.empty);
    EXPECT_TRUE(view.gpus[0].drama.empty);
  }
  EXPECT_EQ(scheduler_->NextWakeup().value_or(TimePoint{}), settled_before);
}

TEST_F(SchedulerTest, ReservationsStopTheLaunchRace) {
  // Both GPUs show no memory used, but the first two jobs reserve 30 GiB each: a third 30 GiB job
  // must wait even after the launch grace, although the GPUs still look empty.
  Build("worst-fit");
  for (JobId id = 1; id <= 3; ++id) ASSERT_TRUE(scheduler_->Submit(Job(id, GiB(30))).ok());
  auto launches = scheduler_->Schedule();
  ASSERT_EQ(launches.size(), 2u);
  EXPECT_NE(launches[0].gpus[0], launches[1].gpus[0]);
  EXPECT_EQ(launches[0].memory_limit, GiB(30));
  clock_.Advance(Seconds(120));
  EXPECT_TRUE(scheduler_->Schedule().empty());
  const JobRecord* waiting = scheduler_->job(3);
  ASSERT_TRUE(waiting->last_wait.has_value());
  for (const auto& v : waiting->last_wait->per_gpu) EXPECT_EQ(v.gate, Gate::kMemory);
}

TEST_F(SchedulerTest, APassCutShortGoesOnAtTheNextCall) {
  // colod's loop places a few jobs a turn: the rest start at the next turn, in their order,
  // although nothing changed in between.
  Build("worst-fit");
  for (JobId id = 1; id <= 2; ++id) ASSERT_TRUE(scheduler_->Submit(Job(id, GiB(10))).ok());
  auto first = scheduler_->Schedule(1);
  ASSERT_EQ(first.size(), 1u);
  EXPECT_EQ(first[0].job, 1);
  auto second = scheduler_->Schedule(1);
  ASSERT_EQ(second.size(), 1u);
  EXPECT_EQ(second[0].job, 2);
  EXPECT_NE(first[0].gpus[0], second[0].gpus[0]);
  EXPECT_TRUE(scheduler_->Schedule(1).empty());
}

TEST_F(SchedulerTest, ReservationFollowsObservedPeakOnceSteady) {
  Build("worst-fit", {}, 1);
  ASSERT_TRUE(scheduler_->Submit(Job(1, GiB(30))).ok());
  ASSERT_TRUE(scheduler_->Submit(Job(2, GiB(10))).ok());
  ASSERT_EQ(scheduler_->Schedule().size(), 1u);
  scheduler_->OnJobMemory(1, 0, GiB(28));
  scheduler_->OnGpuSample(GpuSample{0, clock_.Now(), GiB(28), 0.2, -1, -1, true});
  clock_.Advance(Seconds(10));
  EXPECT_EQ(scheduler_->Reservation(*scheduler_->job(1)), GiB(30))
      << "not steady yet: the plan holds";
  EXPECT_TRUE(scheduler_->Schedule().empty());
  clock_.Advance(Seconds(60));
  scheduler_->OnGpuSample(GpuSample{0, clock_.Now(), GiB(28), 0.2, -1, -1, true});
  EXPECT_EQ(scheduler_->Reservation(*scheduler_->job(1)), GiB(28));
  EXPECT_EQ(scheduler_->Schedule().size(), 1u)
      << "28 GiB reserved + 10 GiB + 2 GiB margin fit in 40";
}

TEST_F(SchedulerTest, AJobFarBelowItsPlanKeepsItsReservationUntilTheSettleTimeout) {
  // Still loading data: 1 GiB seen of a 30 GiB plan must not free 29 GiB after 30 quiet seconds.
  Build("worst-fit", {}, 1);
  ASSERT_TRUE(scheduler_->Submit(Job(1, GiB(30))).ok());
  ASSERT_EQ(scheduler_->Schedule().size(), 1u);
  scheduler_->OnJobMemory(1, 0, GiB(1));
  clock_.Advance(Seconds(120));
  EXPECT_EQ(scheduler_->Reservation(*scheduler_->job(1)), GiB(30));
  clock_.Advance(Seconds(600));
  EXPECT_EQ(scheduler_->Reservation(*scheduler_->job(1)), GiB(1))
      << "an over-estimate is let go eventually";
}

TEST_F(SchedulerTest, MemoryUsedByUnmanagedProcessesCounts) {
  Build("worst-fit", {}, 1);
  scheduler_->OnGpuSample(GpuSample{0, clock_.Now(), GiB(25), 0.0, -1, -1, true});
  ASSERT_TRUE(scheduler_->Submit(Job(1, GiB(20))).ok());
  EXPECT_TRUE(scheduler_->Schedule().empty());
  EXPECT_EQ(scheduler_->View().gpus[0].free_for_placement, GiB(15));
}

TEST_F(SchedulerTest, StrictFifoHeadBlocksLaterJobsWithoutBackfill) {
  Build("worst-fit", {}, 1);
  ASSERT_TRUE(scheduler_->Submit(Job(1, GiB(30))).ok());
  ASSERT_EQ(scheduler_->Schedule().size(), 1u);
  clock_.Advance(Seconds(60));
  ASSERT_TRUE(scheduler_->Submit(Job(2, GiB(20))).ok());  // does not fit
  ASSERT_TRUE(scheduler_->Submit(Job(3, GiB(2))).ok());   // would fit
  EXPECT_TRUE(scheduler_->Schedule().empty());
  EXPECT_EQ(scheduler_->main_queue().size(), 2u);
}

TEST_F(SchedulerTest, BackfillUsesOnlyGpusNotEarmarkedForTheHead) {
  SchedulerConfig config;
  config.backfill = true;
  Build("worst-fit", config, 2);
  ASSERT_TRUE(scheduler_->Submit(Job(1, GiB(30))).ok());
  ASSERT_TRUE(scheduler_->Submit(Job(2, GiB(25))).ok());
  ASSERT_EQ(scheduler_->Schedule().size(), 2u);
  clock_.Advance(Seconds(60));
  ASSERT_TRUE(scheduler_->Submit(Job(3, GiB(36))).ok());  // waits for an emptier GPU
  ASSERT_TRUE(scheduler_->Submit(Job(4, GiB(2))).ok());
  const auto launches = scheduler_->Schedule();
  ASSERT_EQ(launches.size(), 1u);
  EXPECT_EQ(launches[0].job, 4);
  // GPU 1 (job 2, 25 GiB) has the most free memory: it is earmarked for job 3, so job 4 went to GPU
  // 0.
  EXPECT_EQ(launches[0].gpus[0], 0);
}

TEST_F(SchedulerTest, AdaptiveRecoveryGrowsTheNeedAndCapsRetries) {
  SchedulerConfig config;
  config.max_oom_retries = 2;
  Build("worst-fit", config, 1);
  ASSERT_TRUE(scheduler_->Submit(Job(1, GiB(8))).ok());
  ASSERT_EQ(scheduler_->Schedule().size(), 1u);
  scheduler_->OnJobMemory(1, 0, GiB(9));
  EXPECT_EQ(scheduler_->OnJobExit(1, {ExitKind::kOutOfMemory, "CUDA out of memory"}).action,
            ExitAction::kRequeuedForRecovery);
  const JobRecord* job = scheduler_->job(1);
  EXPECT_EQ(job->state, JobState::kRecovering);
  EXPECT_EQ(job->need.source, MemorySource::kLearned);
  // It was placed with 8 GiB and reached 9: limit-bound, so the need grows geometrically from
  // what it reached (core/recovery.h).
  EXPECT_EQ(job->need.peak, GiB(9).Scaled(2.4) + MiB(512));
  EXPECT_NE(job->need_basis.find("limit-bound"), std::string::npos) << job->need_basis;
  EXPECT_FALSE(job->require_idle);
  auto launches = scheduler_->Schedule();
  ASSERT_EQ(launches.size(), 1u);
  EXPECT_EQ(launches[0].attempt, 2);
  EXPECT_EQ(scheduler_->OnJobExit(1, {ExitKind::kOutOfMemory, ""}).action,
            ExitAction::kRequeuedForRecovery);
  EXPECT_TRUE(scheduler_->job(1)->require_idle) << "the last retry runs alone";
  ASSERT_EQ(scheduler_->Schedule().size(), 1u);
  EXPECT_EQ(scheduler_->OnJobExit(1, {ExitKind::kOutOfMemory, ""}).action,
            ExitAction::kFailedRetryCap);
  EXPECT_EQ(scheduler_->job(1)->state, JobState::kFailed);
  EXPECT_NE(scheduler_->job(1)->end_reason.find("retry cap"), std::string::npos);
}

// The ResNet-50 declared at 3 GiB whose step peaks at 13.9 GiB, beside a 10 GiB job on a 40 GiB
// GPU: its first attempt fails at its 3 GiB limit, with PyTorch's figures. Its retry is placed with
// the need those figures give (x2.4), and runs under the room its GPU has (30 GiB), not under that
// need, so it succeeds: two attempts, where limits at the need took three (3.0 -> 8.1 -> 20.4 GiB).
TEST_F(SchedulerTest, ARetryAfterACrashAtItsLimitRunsUnderTheRoomOfItsGpu) {
  Build("worst-fit", {}, 1);
  ASSERT_TRUE(scheduler_->Submit(Job(1, GiB(10))).ok());
  ASSERT_TRUE(scheduler_->Submit(Job(2, GiB(3))).ok());
  auto launches = scheduler_->Schedule();
  ASSERT_EQ(launches.size(), 1u);
  clock_.Advance(Seconds(60));
  launches = scheduler_->Schedule();
  ASSERT_EQ(launches.size(), 1u);
  EXPECT_EQ(launches[0].job, 2);
  EXPECT_EQ(launches[0].memory_limit, GiB(3)) << "a first attempt runs under its reservation";
  EXPECT_EQ(launches[0].reservation, GiB(3));
  scheduler_->OnJobMemory(2, 0, GiBf(1.7));
  ASSERT_EQ(scheduler_->OnJobExit(2, PyTorchOutOfMemory(GiBf(2.87), MiB(196))).action,
            ExitAction::kRequeuedForRecovery);
  const Bytes need = scheduler_->job(2)->need.Upper();
  EXPECT_EQ(need, (GiBf(2.87) + MiB(196)).Scaled(2.4) + MiB(512));
  clock_.Advance(Seconds(60));
  launches = scheduler_->Schedule();
  ASSERT_EQ(launches.size(), 1u);
  EXPECT_EQ(launches[0].attempt, 2);
  EXPECT_EQ(launches[0].reservation, need) << "placement plans with the raised need";
  EXPECT_EQ(launches[0].memory_limit, GiB(30)) << "40 GiB less job 1's 10 GiB";
  EXPECT_GE(launches[0].memory_limit, GiBf(13.9));
  EXPECT_EQ(scheduler_->Reservation(*scheduler_->job(2)), need);
  scheduler_->OnJobMemory(2, 0, GiBf(13.9));
  EXPECT_EQ(scheduler_->Reservation(*scheduler_->job(2)), GiBf(13.9))
      << "what it is seen to use counts as it grows past its plan";
  EXPECT_EQ(scheduler_->OnJobExit(2, {ExitKind::kSuccess, ""}).action, ExitAction::kFinished);
  EXPECT_EQ(scheduler_->job(2)->attempts, 2);
}

// A job that failed below its limit (its GPU ran full of others) did not outgrow its plan: its
// retry runs under its raised need, as any attempt does.
TEST_F(SchedulerTest, ARetryAfterACrashBelowItsLimitRunsUnderItsNeed) {
  Build("worst-fit", {}, 1);
  ASSERT_TRUE(scheduler_->Submit(Job(1, GiB(10))).ok());
  ASSERT_EQ(scheduler_->Schedule().size(), 1u);
  scheduler_->OnJobMemory(1, 0, GiB(2));
  ASSERT_EQ(scheduler_->OnJobExit(1, PyTorchOutOfMemory(GiB(2), MiB(20))).action,
            ExitAction::kRequeuedForRecovery);
  const auto launches = scheduler_->Schedule();
  ASSERT_EQ(launches.size(), 1u);
  EXPECT_EQ(launches[0].reservation, GiB(10).Scaled(1.1) + MiB(512));
  EXPECT_EQ(launches[0].memory_limit, launches[0].reservation);
}

// A job that used nearly a whole GPU while it ran (its need raised to follow) and then crashed
// out of memory must come back with a need some GPU can take: never one that holds the recovery
// queue's head, and every job behind it, forever.
TEST_F(SchedulerTest, ANeedRaisedPastTheLargestGpuStaysPlaceableAfterACrash) {
  Build("worst-fit", {}, 1);
  JobSpec plain = Job(1, GiB(10));
  plain.sharing = SharingPreference::kPlain;
  ASSERT_TRUE(scheduler_->Submit(plain).ok());
  ASSERT_EQ(scheduler_->Schedule().size(), 1u);
  const auto raised = scheduler_->OnJobMemory(1, 0, GiB(37));
  ASSERT_TRUE(raised.has_value()) << "a plain sharer above its plan";
  EXPECT_TRUE(raised->first);
  EXPECT_EQ(raised->plan, GiB(10));
  EXPECT_EQ(scheduler_->job(1)->need.Upper(), GiB(40)) << "at most the largest GPU";
  EXPECT_EQ(scheduler_->OnJobExit(1, {ExitKind::kOutOfMemory, "CUDA out of memory"}).action,
            ExitAction::kRequeuedForRecovery);
  EXPECT_LT(scheduler_->job(1)->need.Upper(), GiB(40)) << scheduler_->job(1)->need_basis;
  ASSERT_TRUE(scheduler_->Submit(Job(2, GiB(1))).ok());
  bool both = false;
  for (int pass = 0; pass < 5 && !both; ++pass) {
    for (const auto& launch : scheduler_->Schedule()) {
      if (launch.job == 1) (void)scheduler_->OnJobExit(1, {ExitKind::kSuccess, ""});
    }
    clock_.Advance(Seconds(60));
    both = scheduler_->job(1)->state == JobState::kSucceeded &&
           scheduler_->job(2)->state != JobState::kQueued;
  }
  EXPECT_TRUE(both) << "the recovered job ran and the job behind it was not held back";
}

// A daemon restart re-submits jobs with what they went through: a job that had crashed out of
// memory keeps its recovery priority and its retry count.
TEST_F(SchedulerTest, PriorOutOfMemoryAttemptsSurviveARestart) {
  SchedulerConfig config;
  config.max_oom_retries = 2;
  Build("worst-fit", config, 1);
  ASSERT_TRUE(scheduler_->Submit(Job(1, GiB(4))).ok());
  ASSERT_TRUE(scheduler_->Submit(Job(2, GiB(20)), PriorAttempts{2, 2, std::nullopt}).ok());
  const JobRecord* restored = scheduler_->job(2);
  EXPECT_EQ(restored->state, JobState::kRecovering);
  EXPECT_EQ(restored->oom_count, 2);
  EXPECT_TRUE(restored->require_idle) << "its last retry runs alone";
  auto launches = scheduler_->Schedule();
  ASSERT_EQ(launches.size(), 1u);
  EXPECT_EQ(launches[0].job, 2) << "the recovery queue goes first";
  EXPECT_EQ(launches[0].attempt, 3);
  EXPECT_EQ(scheduler_->OnJobExit(2, {ExitKind::kOutOfMemory, ""}).action,
            ExitAction::kFailedRetryCap);
}

TEST_F(SchedulerTest, ThesisRecoveryWaitsForAnIdleGpuWithStrictPriority) {
  SchedulerConfig config;
  config.recovery = RecoveryMode::kThesis;
  Build("worst-fit", config, 1);
  ASSERT_TRUE(scheduler_->Submit(Job(1, GiB(4))).ok());
  ASSERT_TRUE(scheduler_->Submit(Job(2, GiB(4))).ok());
  ASSERT_EQ(scheduler_->Schedule().size(), 1u);
  clock_.Advance(Seconds(60));
  ASSERT_EQ(scheduler_->Schedule().size(), 1u);
  scheduler_->OnJobExit(1, {ExitKind::kOutOfMemory, ""});
  ASSERT_TRUE(scheduler_->Submit(Job(3, GiB(1))).ok());
  clock_.Advance(Seconds(60));
  EXPECT_TRUE(scheduler_->Schedule().empty())
      << "job 1 needs an idle GPU, and job 3 may not pass it";
  scheduler_->OnJobExit(2, {ExitKind::kSuccess, ""});
  const auto launches = scheduler_->Schedule();
  ASSERT_GE(launches.size(), 1u);
  EXPECT_EQ(launches[0].job, 1);
}

TEST_F(SchedulerTest, OtherFailuresAreNeverRetried) {
  Build("worst-fit");
  ASSERT_TRUE(scheduler_->Submit(Job(1, GiB(4))).ok());
  ASSERT_EQ(scheduler_->Schedule().size(), 1u);
  EXPECT_EQ(scheduler_->OnJobExit(1, {ExitKind::kFailure, "exit code 1"}).action,
            ExitAction::kFinished);
  EXPECT_EQ(scheduler_->job(1)->state, JobState::kFailed);
  EXPECT_TRUE(scheduler_->recovery_queue().empty());
}

TEST_F(SchedulerTest, RejectsWhatCanNeverRun) {
  Build("worst-fit");
  EXPECT_FALSE(scheduler_->Submit(Job(1, GiB(4), 3)).ok());  // 3 GPUs on a 2-GPU server
  EXPECT_FALSE(scheduler_->Submit(Job(2, GiB(50))).ok());    // larger than any GPU
  EXPECT_FALSE(scheduler_->Submit(Job(3, GiB(4), 0)).ok());
  ASSERT_TRUE(scheduler_->Submit(Job(4, GiB(4))).ok());
  EXPECT_FALSE(scheduler_->Submit(Job(4, GiB(4))).ok());  // duplicate id
}

TEST_F(SchedulerTest, DropTakesARecoveringOrEndedJobOut) {
  Build("exclusive", {}, 1);
  ASSERT_TRUE(scheduler_->Submit(Job(1, GiB(4))).ok());
  ASSERT_TRUE(scheduler_->Submit(Job(2, GiB(4))).ok());
  ASSERT_EQ(scheduler_->Schedule().size(), 1u);
  ASSERT_EQ(scheduler_->OnJobExit(1, PyTorchOutOfMemory(GiB(4), GiB(2))).action,
            ExitAction::kRequeuedForRecovery);
  EXPECT_EQ(scheduler_->WaitingOf("alice"), 2);
  EXPECT_EQ(scheduler_->Drop(1), JobState::kRecovering);
  EXPECT_TRUE(scheduler_->recovery_queue().empty());
  EXPECT_EQ(scheduler_->WaitingOf("alice"), 1) << "its owner's count leaves with it";
  const auto launches = scheduler_->Schedule();
  ASSERT_EQ(launches.size(), 1u) << "the recovery queue no longer holds the main queue";
  EXPECT_EQ(launches[0].job, 2u);
  scheduler_->OnJobExit(2, {ExitKind::kCancelled, ""});
  EXPECT_EQ(scheduler_->Drop(2), JobState::kCancelled);
  EXPECT_EQ(scheduler_->Drop(2), std::nullopt);
  EXPECT_EQ(scheduler_->Drop(99), std::nullopt);
  EXPECT_EQ(scheduler_->WaitingOf("alice"), 0);
  EXPECT_EQ(scheduler_->HeldBy("alice").gpus, 0);
}

TEST_F(SchedulerTest, AQueuedJobsNeedCanBeReplacedAndTheNextPassUsesIt) {
  Build("worst-fit", {}, 1);
  ASSERT_TRUE(scheduler_->Submit(Job(1, GiB(20))).ok());
  ASSERT_TRUE(scheduler_->Submit(Job(2, GiB(20))).ok());  // 20 + 2 GiB margin: no room beside 1
  ASSERT_EQ(scheduler_->Schedule().size(), 1u);
  clock_.Advance(Seconds(60));
  EXPECT_TRUE(scheduler_->Schedule().empty());
  ASSERT_TRUE(scheduler_->UpdateNeed(2, MemoryNeed{GiB(10), MemorySource::kLearned, 0.1}).ok());
  EXPECT_EQ(scheduler_->job(2)->need.peak, GiB(10));
  auto launches = scheduler_->Schedule();
  ASSERT_EQ(launches.size(), 1u);
  EXPECT_EQ(launches[0].job, 2);
  EXPECT_EQ(launches[0].memory_limit, GiB(11));
  // Running, unknown or impossible: refused.
  EXPECT_EQ(scheduler_->UpdateNeed(1, MemoryNeed{GiB(5), MemorySource::kLearned, 0}).code(),
            StatusCode::kFailedPrecondition);
  EXPECT_EQ(scheduler_->UpdateNeed(9, MemoryNeed{GiB(5), MemorySource::kLearned, 0}).code(),
            StatusCode::kNotFound);
  ASSERT_TRUE(scheduler_->Submit(Job(3, GiB(4))).ok());
  EXPECT_FALSE(scheduler_->UpdateNeed(3, MemoryNeed{GiB(50), MemorySource::kLearned, 0}).ok());
  EXPECT_EQ(scheduler_->job(3)->need.peak, GiB(4));
}

TEST_F(SchedulerTest, MultiGpuJobsGetAllTheirGpusOrWait) {
  Build("worst-fit", {}, 2);
  ASSERT_TRUE(scheduler_->Submit(Job(1, GiB(30))).ok());
  ASSERT_EQ(scheduler_->Schedule().size(), 1u);
  clock_.Advance(Seconds(60));
  ASSERT_TRUE(scheduler_->Submit(Job(2, GiB(20), 2)).ok());
  EXPECT_TRUE(scheduler_->Schedule().empty());
  scheduler_->OnJobExit(1, {ExitKind::kSuccess, ""});
  const auto launches = scheduler_->Schedule();
  ASSERT_EQ(launches.size(), 1u);
  EXPECT_EQ(launches[0].gpus.size(), 2u);
}

TEST_F(SchedulerTest, WakesUpWhenTheLaunchGraceEnds) {
  Build("worst-fit", {}, 1);
  ASSERT_TRUE(scheduler_->Submit(Job(1, GiB(4))).ok());
  ASSERT_TRUE(scheduler_->Submit(Job(2, GiB(4))).ok());
  ASSERT_EQ(scheduler_->Schedule().size(), 1u);
  EXPECT_TRUE(scheduler_->Schedule().empty());
  EXPECT_EQ(scheduler_->job(2)->last_wait->per_gpu[0].gate, Gate::kLaunchGrace);
  const auto wake = scheduler_->NextWakeup();
  ASSERT_TRUE(wake.has_value());
  EXPECT_EQ(*wake, clock_.Now() + Seconds(30));
  clock_.AdvanceTo(*wake);
  EXPECT_EQ(scheduler_->Schedule().size(), 1u);
}

TEST_F(SchedulerTest, PriorityOrdersOnlyItsOwnersPlacesInTheQueue) {
  Build("worst-fit", {}, 1);
  ASSERT_TRUE(scheduler_->Submit(Job(1, GiB(30))).ok());  // runs
  ASSERT_EQ(scheduler_->Schedule().size(), 1u);
  ASSERT_TRUE(scheduler_->Submit(Job(2, GiB(30), 1, "alice")).ok());
  ASSERT_TRUE(scheduler_->Submit(Job(3, GiB(30), 1, "bob")).ok());
  JobSpec urgent = Job(4, GiB(30), 1, "alice");
  urgent.priority = 10;
  ASSERT_TRUE(scheduler_->Submit(urgent).ok());
  JobSpec bobs = Job(5, GiB(30), 1, "bob");
  bobs.priority = 100;
  ASSERT_TRUE(scheduler_->Submit(bobs).ok());
  // Alice's urgent job takes her earlier place; Bob's takes his: nobody passes another user.
  EXPECT_EQ(scheduler_->main_queue(), (std::deque<JobId>{4, 5, 2, 3}));
  JobSpec nice = Job(6, GiB(30), 1, "alice");
  nice.priority = -1;
  ASSERT_TRUE(scheduler_->Submit(nice).ok());
  EXPECT_EQ(scheduler_->main_queue(), (std::deque<JobId>{4, 5, 2, 3, 6}));
}

// CARMA counts its 30 s from when the job's process appears on the GPU (nvidia-smi's process
// list), not from the placement: a framework still importing has allocated nothing to see.
TEST_F(SchedulerTest, TheCarmaPresetCountsTheGraceFromTheJobsFirstProcess) {
  Build("worst-fit:preset=carma", {}, 1);
  ASSERT_TRUE(scheduler_->Submit(Job(1, GiB(4))).ok());
  ASSERT_TRUE(scheduler_->Submit(Job(2, GiB(4))).ok());
  ASSERT_EQ(scheduler_->Schedule().size(), 1u);
  clock_.Advance(Seconds(60));  // twice the grace, and no process yet
  EXPECT_TRUE(scheduler_->Schedule().empty());
  const GateVerdict waiting = scheduler_->job(2)->last_wait->per_gpu[0];
  EXPECT_EQ(waiting.gate, Gate::kLaunchGrace);
  EXPECT_DOUBLE_EQ(waiting.value, 240) << "at most until the process wait (300 s) is over";
  EXPECT_EQ(scheduler_->NextWakeup(), clock_.Now() + Seconds(240));
  scheduler_->OnJobProcessSeen(1, 0);
  const TimePoint appeared = clock_.Now();
  clock_.Advance(Seconds(20));
  scheduler_->OnJobProcessSeen(1, 0);  // still there: the grace does not start again
  EXPECT_TRUE(scheduler_->Schedule().empty());
  EXPECT_DOUBLE_EQ(scheduler_->job(2)->last_wait->per_gpu[0].value, 10);
  EXPECT_EQ(scheduler_->NextWakeup(), appeared + Seconds(30));
  clock_.AdvanceTo(appeared + Seconds(30));
  EXPECT_EQ(scheduler_->Schedule().size(), 1u);
}

TEST_F(SchedulerTest, AProcessThatNeverAppearsHoldsTheGpuOnlyUntilTheProcessWait) {
  SchedulerConfig config;
  config.process_wait = Seconds(120);
  Build("worst-fit:preset=carma", config, 1);
  ASSERT_TRUE(scheduler_->Submit(Job(1, GiB(4))).ok());
  ASSERT_TRUE(scheduler_->Submit(Job(2, GiB(4))).ok());
  ASSERT_EQ(scheduler_->Schedule().size(), 1u);
  clock_.Advance(Seconds(119));
  EXPECT_TRUE(scheduler_->Schedule().empty());
  EXPECT_EQ(scheduler_->NextWakeup(), clock_.Now() + Seconds(1));
  clock_.Advance(Seconds(1));
  EXPECT_EQ(scheduler_->Schedule().size(), 1u);
}

TEST_F(SchedulerTest, OtherPoliciesCountTheGraceFromThePlacement) {
  for (const char* spec : {"worst-fit", "worst-fit:preset=carma,grace-from-process=off"}) {
    Build(spec, {}, 1);
    ASSERT_TRUE(scheduler_->Submit(Job(1, GiB(4))).ok());
    ASSERT_TRUE(scheduler_->Submit(Job(2, GiB(4))).ok());
    ASSERT_EQ(scheduler_->Schedule().size(), 1u) << spec;
    clock_.Advance(Seconds(29));
    EXPECT_TRUE(scheduler_->Schedule().empty()) << spec;
    clock_.Advance(Seconds(1));  // no process seen, and none needed
    EXPECT_EQ(scheduler_->Schedule().size(), 1u) << spec;
  }
}

// Slurm books a job's GPUs: it runs on those, waits behind no job, and no launch grace holds it.
JobSpec Booked(JobSpec spec, std::vector<GpuIndex> gpus) {
  spec.booked_gpus = std::move(gpus);
  return spec;
}

TEST_F(SchedulerTest, ABookedJobRunsOnItsGpusAtOnceAheadOfTheQueue) {
  Build("worst-fit", {}, 2);
  ASSERT_TRUE(scheduler_->Submit(Job(1, GiB(4))).ok());
  ASSERT_EQ(scheduler_->Schedule().size(), 1u);             // on GPU 0, within its launch grace
  ASSERT_TRUE(scheduler_->Submit(Job(2, GiB(4), 2)).ok());  // waits for GPU 0's grace
  ASSERT_TRUE(scheduler_->Submit(Booked(Job(3, GiB(4), 1, "bob"), {0})).ok());
  EXPECT_TRUE(scheduler_->main_queue() == std::deque<JobId>({2}));
  EXPECT_TRUE(scheduler_->booked_jobs() == std::deque<JobId>({3}));
  const auto launches = scheduler_->Schedule();
  ASSERT_EQ(launches.size(), 1u);
  EXPECT_EQ(launches[0].job, 3);
  EXPECT_EQ(launches[0].gpus, std::vector<GpuIndex>{0}) << "its own GPU, not the idle one";
  EXPECT_TRUE(scheduler_->booked_jobs().empty());
}

TEST_F(SchedulerTest, ABookedJobJoinsAnotherUsersMpsGpuPlainly) {
  Build("worst-fit", {}, 1);
  JobSpec alices = Job(1, GiB(4));
  alices.sharing = SharingPreference::kMps;
  ASSERT_TRUE(scheduler_->Submit(alices).ok());
  ASSERT_EQ(scheduler_->Schedule()[0].mode, SharingMode::kMps);
  JobSpec bobs = Booked(Job(2, GiB(4), 1, "bob"), {0});
  ASSERT_TRUE(scheduler_->Submit(bobs).ok());
  const auto launches = scheduler_->Schedule();
  ASSERT_EQ(launches.size(), 1u);
  EXPECT_EQ(launches[0].mode, SharingMode::kPlain) << "MPS serves one user per GPU";
  JobSpec unbooked = Job(3, GiB(4), 1, "carol");
  unbooked.sharing = SharingPreference::kMps;
  clock_.Advance(Seconds(60));
  ASSERT_TRUE(scheduler_->Submit(unbooked).ok());
  EXPECT_TRUE(scheduler_->Schedule().empty()) << "colod's own choice keeps its gates";
}

// A head held by the utilization gate while the GPU's windows fall is looked at each sample
// interval, as the sampling would; a look before the windows let the GPU in repeats the last
// pass's decision without a pass, and the job starts at the first look at which they do.
TEST_F(SchedulerTest, AHeadHeldByFallingWindowsStartsAtTheFirstLookThatLetsItIn) {
  Build("worst-fit", {}, 1);
  SignalWindow reference(SchedulerConfig{}.window_samples, SchedulerConfig{}.sample_interval);
  reference.Add(clock_.Now(), 0.0);
  ASSERT_TRUE(scheduler_->Submit(Job(1, GiB(4))).ok());
  ASSERT_EQ(scheduler_->Schedule().size(), 1u);
  auto sample = [&](double smact) {
    scheduler_->OnGpuSample(GpuSample{0, clock_.Now(), GiB(4), smact, -1, -1, true});
    reference.Add(clock_.Now(), smact);
  };
  sample(0.95);
  clock_.Advance(Seconds(40));
  sample(0.3);  // the job's busy phase is over: the window falls from here, without new samples
  ASSERT_TRUE(scheduler_->Submit(Job(2, GiB(4))).ok());
  ASSERT_TRUE(scheduler_->Schedule().empty());
  ASSERT_EQ(scheduler_->job(2)->last_wait->per_gpu[0].gate, Gate::kUtilization);
  const double held_at = scheduler_->job(2)->last_wait->per_gpu[0].value;
  // Where the gate lets it in: the first look, each second from the pass, at which the window's
  // risk is at most the threshold.
  TimePoint opens = clock_.Now();
  do {
    opens += Seconds(1);
  } while (reference.Summarize(opens).Risk() > 0.80);
  int looks = 0;
  while (true) {
    const auto wake = scheduler_->NextWakeup();
    ASSERT_TRUE(wake.has_value());
    EXPECT_EQ(*wake, clock_.Now() + Seconds(1)) << "a look each sample interval";
    clock_.AdvanceTo(*wake);
    ++looks;
    const auto launches = scheduler_->Schedule();
    if (!launches.empty()) break;
    EXPECT_EQ(scheduler_->job(2)->last_wait->per_gpu[0].value, held_at)
        << "no pass before the windows let the GPU in";
  }
  EXPECT_EQ(clock_.Now(), opens);
  EXPECT_GT(looks, 1);
}

TEST_F(SchedulerTest, ABookedJobWaitsForABusyGpuOnlyItsBoundedDelay) {
  StartABusyJobOnGpu0(30);
  ASSERT_TRUE(scheduler_->Submit(Booked(Job(2, GiB(4)), {0})).ok());
  EXPECT_TRUE(scheduler_->Schedule().empty());
  const JobRecord* waiting = scheduler_->job(2);
  ASSERT_EQ(waiting->last_wait->per_gpu.size(), 1u) << "only its own GPU is its reason";
  EXPECT_EQ(waiting->last_wait->per_gpu[0].gate, Gate::kUtilization);
  EXPECT_EQ(waiting->last_wait->gpus_considered, 1);
  EXPECT_EQ(scheduler_->NextWakeup(), clock_.Now() + Seconds(10));
  clock_.Advance(Seconds(10));
  const auto launches = scheduler_->Schedule();
  ASSERT_EQ(launches.size(), 1u);
  EXPECT_EQ(launches[0].gpus, std::vector<GpuIndex>{0});
}

// No launch grace holds a booked job, so its utilization gate reads the GPU's windows even while
// the GPU is in its grace: a busy GPU must not pass for idle because its windows went unread.
TEST_F(SchedulerTest, ABookedJobOnABusyGpuInItsLaunchGraceWaitsForItsUtilization) {
  StartABusyJobOnGpu0(10);  // a third of the 30-s grace
  ASSERT_TRUE(scheduler_->View().gpus[0].placed_recently);
  ASSERT_TRUE(scheduler_->Submit(Booked(Job(2, GiB(4)), {0})).ok());
  EXPECT_TRUE(scheduler_->Schedule().empty()) << "GPU 0 is 95% busy";
  const JobRecord* waiting = scheduler_->job(2);
  ASSERT_TRUE(waiting->last_wait.has_value());
  ASSERT_EQ(waiting->last_wait->per_gpu.size(), 1u);
  EXPECT_EQ(waiting->last_wait->per_gpu[0].gate, Gate::kUtilization);
  EXPECT_DOUBLE_EQ(waiting->last_wait->per_gpu[0].value, 0.95);
}

// A head the utilization gate holds has the scheduler look again each sample; once it is
// cancelled and nothing waits, there is nothing to look for.
TEST_F(SchedulerTest, NoLookIsDueOnceTheHeldHeadIsCancelled) {
  Build("worst-fit", {}, 1);
  ASSERT_TRUE(scheduler_->Submit(Job(1, GiB(4))).ok());
  ASSERT_EQ(scheduler_->Schedule().size(), 1u);
  scheduler_->OnJobProcessSeen(1, 0);
  for (int i = 0; i < 40; ++i) {  // past job 1's graces, busy, and quieter at the last
    const double smact = i < 38 ? 0.95 : 0.1;
    scheduler_->OnGpuSample(GpuSample{0, clock_.Now(), GiB(4), smact, -1, -1, true});
    clock_.Advance(Seconds(1));
  }
  ASSERT_TRUE(scheduler_->Submit(Job(2, GiB(4))).ok());
  EXPECT_TRUE(scheduler_->Schedule().empty());
  ASSERT_EQ(scheduler_->job(2)->last_wait->per_gpu[0].gate, Gate::kUtilization);
  ASSERT_TRUE(scheduler_->NextWakeup().has_value()) << "the window may fall: look again";
  ASSERT_TRUE(scheduler_->Drop(2).has_value());
  EXPECT_FALSE(scheduler_->NextWakeup().has_value());
}

TEST_F(SchedulerTest, ABookedJobStillNeedsTheMemoryOfItsGpu) {
  Build("worst-fit", {}, 2);
  ASSERT_TRUE(scheduler_->Submit(Booked(Job(1, GiB(30)), {1})).ok());
  ASSERT_EQ(scheduler_->Schedule().size(), 1u);
  ASSERT_TRUE(scheduler_->Submit(Booked(Job(2, GiB(20)), {1})).ok());
  EXPECT_TRUE(scheduler_->Schedule().empty()) << "something outside the booking holds GPU 1";
  EXPECT_EQ(scheduler_->job(2)->last_wait->per_gpu[0].gate, Gate::kMemory);
  scheduler_->OnJobExit(1, {ExitKind::kSuccess, ""});
  EXPECT_EQ(scheduler_->Schedule().size(), 1u);
}

TEST_F(SchedulerTest, ABookingIsCheckedAgainstTheServer) {
  Build("worst-fit", {}, 2);
  EXPECT_FALSE(scheduler_->Submit(Booked(Job(1, GiB(4)), {2})).ok()) << "no GPU 2";
  EXPECT_FALSE(scheduler_->Submit(Booked(Job(2, GiB(4), 2), {1, 1})).ok()) << "twice";
  EXPECT_FALSE(scheduler_->Submit(Booked(Job(3, GiB(4), 2), {1})).ok()) << "one of two";
  const Status too_big = scheduler_->CheckPlaceable(Booked(Job(4, GiB(39)), {0}));
  EXPECT_EQ(too_big.code(), StatusCode::kInfeasible);
  EXPECT_NE(too_big.message().find("GPU 0 has 40"), std::string::npos) << too_big.message();
  EXPECT_TRUE(scheduler_->Submit(Booked(Job(5, GiB(4), 2), {1, 0})).ok());
  const auto launches = scheduler_->Schedule();
  ASSERT_EQ(launches.size(), 1u);
  EXPECT_EQ(launches[0].gpus.size(), 2u);
}

TEST_F(SchedulerTest, ABookedJobAfterAnOutOfMemoryCrashWaitsForItsGpusAgain) {
  Build("worst-fit", {}, 2);
  ASSERT_TRUE(scheduler_->Submit(Booked(Job(1, GiB(10)), {1})).ok());
  ASSERT_EQ(scheduler_->Schedule().size(), 1u);
  EXPECT_EQ(scheduler_->OnJobExit(1, PyTorchOutOfMemory(GiB(10), GiB(2))).action,
            ExitAction::kRequeuedForRecovery);
  EXPECT_TRUE(scheduler_->recovery_queue().empty());
  EXPECT_TRUE(scheduler_->booked_jobs() == std::deque<JobId>({1}));
  const auto launches = scheduler_->Schedule();
  ASSERT_EQ(launches.size(), 1u);
  EXPECT_EQ(launches[0].gpus, std::vector<GpuIndex>{1});
  EXPECT_GT(launches[0].reservation, GiB(10));
  ASSERT_TRUE(scheduler_->Submit(Booked(Job(2, GiB(4)), {0})).ok());
  EXPECT_EQ(scheduler_->Drop(2), JobState::kQueued);
  EXPECT_TRUE(scheduler_->booked_jobs().empty());
}

}  // namespace
}  // namespace colo

namespace colo {
namespace {

// The rules the scheduler keeps for colod and the simulator alike.
TEST_F(SchedulerTest, OnlyAPlainSharerAboveItsPlanHasItsNeedRaisedOncePerAttempt) {
  Build("worst-fit", {}, 2);
  JobSpec plain = Job(1, GiB(10));
  plain.sharing = SharingPreference::kPlain;
  JobSpec mps = Job(2, GiB(10));
  mps.sharing = SharingPreference::kMps;
  ASSERT_TRUE(scheduler_->Submit(plain).ok());
  ASSERT_TRUE(scheduler_->Submit(mps).ok());
  ASSERT_EQ(scheduler_->Schedule().size(), 2u);
  const GpuIndex gpu1 = scheduler_->job(1)->gpus[0], gpu2 = scheduler_->job(2)->gpus[0];
  EXPECT_FALSE(scheduler_->OnJobMemory(1, gpu1, GiB(9))) << "within its plan";
  EXPECT_FALSE(scheduler_->OnJobMemory(2, gpu2, GiB(15))) << "MPS holds it to its limit";
  const auto first = scheduler_->OnJobMemory(1, gpu1, GiB(12));
  ASSERT_TRUE(first);
  EXPECT_TRUE(first->first);
  EXPECT_EQ(first->need.Upper(), GiB(12).Scaled(1 + kOverPlanMargin));
  EXPECT_EQ(scheduler_->job(1)->need.Upper(), first->need.Upper());
  EXPECT_FALSE(scheduler_->OnJobMemory(1, gpu1, GiB(13))) << "within the raised need";
  const auto again = scheduler_->OnJobMemory(1, gpu1, GiB(14));
  ASSERT_TRUE(again);
  EXPECT_FALSE(again->first) << "said once per attempt; the need follows its use";
  // A job placed under MPS that runs without it is held to its plan as any plain sharer.
  scheduler_->SharesPlainly(2);
  EXPECT_TRUE(scheduler_->OnJobMemory(2, gpu2, GiB(16)));
}

TEST_F(SchedulerTest, TheUsersThreadShareStandsUnderMps) {
  Build("worst-fit", {}, 1);
  JobSpec spec = Job(1, GiB(4));
  spec.sharing = SharingPreference::kMps;
  spec.expected_smact = 0.2;  // the policy would give it 40%
  spec.threads = 70;
  ASSERT_TRUE(scheduler_->Submit(spec).ok());
  const auto launches = scheduler_->Schedule();
  ASSERT_EQ(launches.size(), 1u);
  EXPECT_EQ(launches[0].mode, SharingMode::kMps);
  EXPECT_EQ(launches[0].thread_percent, 70);
}

TEST_F(SchedulerTest, WhatAnIdleGpuAlreadyUsesCountsWhenAJobIsJudgedPlaceable) {
  Build("worst-fit:margin=2GiB", {}, 1);
  EXPECT_TRUE(scheduler_->CheckPlaceable(Job(1, GiB(37))).ok());
  const Status refused = scheduler_->CheckPlaceable(Job(1, GiB(37)), GiB(2));
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.code(), StatusCode::kInfeasible);
  EXPECT_NE(refused.message().find("an idle GPU has 38.0 GiB free"), std::string::npos)
      << refused.message();
}

TEST_F(SchedulerTest, ADeviceSampleTellsEachJobItsUseAndTheEndReportsWhatItMeasured) {
  Build("worst-fit", {}, 1);
  ASSERT_TRUE(scheduler_->Submit(Job(1, GiB(8))).ok());
  ASSERT_EQ(scheduler_->Schedule().size(), 1u);
  const std::vector<JobUse> use = {{1, GiB(6)}};
  // Start-up shows no SM activity: those samples are not its solo activity.
  for (int i = 0; i < 3; ++i) {
    clock_.Advance(Seconds(1));
    EXPECT_TRUE(
        scheduler_->OnDeviceSample({0, clock_.Now(), GiB(6), 0.01, -1, -1, true}, 0.01, true, use)
            .empty());
  }
  for (int i = 0; i < 5; ++i) {
    clock_.Advance(Seconds(1));
    scheduler_->OnDeviceSample({0, clock_.Now(), GiB(7), 0.6, -1, -1, true}, 0.6, true,
                               std::vector<JobUse>{{1, GiB(7)}});
  }
  EXPECT_EQ(scheduler_->job(1)->attempt_peak, GiB(7));
  const JobEnded ended = scheduler_->OnJobExit(1, {ExitKind::kSuccess, ""});
  EXPECT_EQ(ended.action, ExitAction::kFinished);
  EXPECT_EQ(ended.state, JobState::kSucceeded);
  EXPECT_EQ(ended.peak, GiB(7));
  EXPECT_FALSE(ended.over_plan);
  EXPECT_NEAR(ended.solo_smact, 0.6, 1e-9);
  EXPECT_TRUE(ended.reason.empty());
}

TEST_F(SchedulerTest, FewerThanFiveComputingSamplesAloneMeasureNoSoloActivity) {
  Build("worst-fit", {}, 1);
  ASSERT_TRUE(scheduler_->Submit(Job(1, GiB(8))).ok());
  ASSERT_EQ(scheduler_->Schedule().size(), 1u);
  for (int i = 0; i < 4; ++i) {
    clock_.Advance(Seconds(1));
    scheduler_->OnDeviceSample({0, clock_.Now(), GiB(2), 0.6, -1, -1, true}, 0.6, true,
                               std::vector<JobUse>{{1, GiB(2)}});
  }
  EXPECT_LT(scheduler_->OnJobExit(1, {ExitKind::kSuccess, ""}).solo_smact, 0);
}

// A policy that finds every job impossible, as one would a job no server of its could ever take.
class NeverPlaces : public PlacementPolicy {
 public:
  std::string_view name() const override { return "never"; }
  PlacementDecision Place(const ClusterView&, const PlacementRequest&) const override {
    return Infeasible{"no GPU of this kind"};
  }
};

TEST_F(SchedulerTest, AJobAPassCanNeverPlaceIsReportedOnceAsFailed) {
  NeverPlaces never;
  Scheduler scheduler(clock_, never, {});
  GpuInfo info;
  info.capacity = GiB(40);
  scheduler.AddGpu(info);
  ASSERT_TRUE(scheduler.Submit(Job(1, GiB(8))).ok());
  EXPECT_TRUE(scheduler.Schedule().empty());
  const std::vector<JobEnded> failed = scheduler.TakeFailed();
  ASSERT_EQ(failed.size(), 1u);
  EXPECT_EQ(failed[0].job, 1);
  EXPECT_EQ(failed[0].state, JobState::kFailed);
  EXPECT_NE(failed[0].reason.find("no GPU of this kind"), std::string::npos) << failed[0].reason;
  EXPECT_TRUE(scheduler.TakeFailed().empty()) << "taken once";
  EXPECT_TRUE(scheduler.main_queue().empty());
}

TEST_F(SchedulerTest, ADroppedJobLeavesItsQueueOrFreesItsGpus) {
  Build("exclusive", {}, 1);
  ASSERT_TRUE(scheduler_->Submit(Job(1, GiB(8))).ok());
  ASSERT_TRUE(scheduler_->Submit(Job(2, GiB(8))).ok());
  ASSERT_EQ(scheduler_->Schedule().size(), 1u);
  EXPECT_EQ(scheduler_->WaitingOf("alice"), 1);
  EXPECT_EQ(scheduler_->Drop(2), JobState::kQueued);
  EXPECT_TRUE(scheduler_->main_queue().empty());
  EXPECT_EQ(scheduler_->WaitingOf("alice"), 0) << "its owner has nothing waiting";
  EXPECT_EQ(scheduler_->HeldBy("alice").gpus, 1);
  EXPECT_EQ(scheduler_->Drop(1), JobState::kRunning);
  EXPECT_EQ(scheduler_->HeldBy("alice").gpus, 0) << "its owner holds nothing";
  EXPECT_EQ(scheduler_->Drop(1), std::nullopt) << "no record is left";
  ASSERT_TRUE(scheduler_->Submit(Job(3, GiB(8))).ok());
  EXPECT_EQ(scheduler_->Schedule().size(), 1u) << "the GPU the running job held is free";
}

// Fair share, per-user limits and EASY backfill: exclusive jobs of 10 GiB, no launch grace.
SchedulerConfig FairConfig() {
  SchedulerConfig config;
  config.fairness.order = QueueOrder::kFairShare;
  config.launch_grace = Duration::zero();
  return config;
}

std::vector<JobId> Started(Scheduler& scheduler) {
  std::vector<JobId> ids;
  for (const Launch& l : scheduler.Schedule()) ids.push_back(l.job);
  return ids;
}

TEST_F(SchedulerTest, FairShareALightUsersJobGoesBeforeAHeavyUsersBacklog) {
  Build("exclusive", FairConfig(), 2);
  for (JobId id = 1; id <= 100; ++id)
    ASSERT_TRUE(scheduler_->Submit(Job(id, GiB(10), 1, "alice")).ok());
  EXPECT_EQ(Started(*scheduler_), (std::vector<JobId>{1, 2}));
  clock_.Advance(Seconds(600));
  ASSERT_TRUE(scheduler_->Submit(Job(101, GiB(10), 1, "bob")).ok());
  EXPECT_TRUE(Started(*scheduler_).empty()) << "no GPU is free";
  const auto standing = scheduler_->StandingOf(101);
  ASSERT_TRUE(standing.has_value());
  EXPECT_EQ(standing->position, 1) << "bob has used nothing: he goes first";
  EXPECT_GT(standing->priority, scheduler_->StandingOf(3)->priority);
  EXPECT_EQ(scheduler_->OnJobExit(1, JobExit{ExitKind::kSuccess, ""}).action,
            ExitAction::kFinished);
  EXPECT_EQ(Started(*scheduler_), (std::vector<JobId>{101})) << "the first GPU to free is bob's";
}

TEST_F(SchedulerTest, FairShareFifoKeepsArrivalOrder) {
  SchedulerConfig config = FairConfig();
  config.fairness.order = QueueOrder::kFifo;
  Build("exclusive", config, 2);
  for (JobId id = 1; id <= 10; ++id)
    ASSERT_TRUE(scheduler_->Submit(Job(id, GiB(10), 1, "alice")).ok());
  EXPECT_EQ(Started(*scheduler_).size(), 2u);
  ASSERT_TRUE(scheduler_->Submit(Job(11, GiB(10), 1, "bob")).ok());
  EXPECT_EQ(scheduler_->OnJobExit(1, JobExit{ExitKind::kSuccess, ""}).action,
            ExitAction::kFinished);
  EXPECT_EQ(Started(*scheduler_), (std::vector<JobId>{3}));
  EXPECT_EQ(scheduler_->StandingOf(11)->position, 8);
}

TEST_F(SchedulerTest, FairShareAUsersPriorityReordersOnlyTheirOwnPlaces) {
  Build("exclusive", FairConfig(), 1);
  ASSERT_TRUE(scheduler_->Submit(Job(1, GiB(10), 1, "carol")).ok());
  EXPECT_EQ(Started(*scheduler_), (std::vector<JobId>{1}));
  ASSERT_TRUE(scheduler_->Submit(Job(2, GiB(10), 1, "alice")).ok());
  clock_.Advance(Seconds(1));
  JobSpec urgent = Job(3, GiB(10), 1, "alice");
  urgent.priority = 10;
  ASSERT_TRUE(scheduler_->Submit(urgent).ok());
  const std::vector<JobId> order = scheduler_->QueueOrder();
  EXPECT_EQ(order, (std::vector<JobId>{3, 2})) << "alice's urgent job takes her first place";
}

TEST_F(SchedulerTest, FairShareAUserAtTheirLimitWaitsWithTheReasonWhileOthersStart) {
  SchedulerConfig config = FairConfig();
  config.user_limits.gpus = 2;
  Build("exclusive", config, 4);
  for (JobId id = 1; id <= 5; ++id)
    ASSERT_TRUE(scheduler_->Submit(Job(id, GiB(10), 1, "alice")).ok());
  EXPECT_EQ(Started(*scheduler_), (std::vector<JobId>{1, 2}));
  EXPECT_NE(scheduler_->job(3)->limit_wait.find("2 of the 2 GPUs"), std::string::npos)
      << scheduler_->job(3)->limit_wait;
  ASSERT_TRUE(scheduler_->Submit(Job(6, GiB(10), 1, "bob")).ok());
  EXPECT_EQ(Started(*scheduler_), (std::vector<JobId>{6}))
      << "alice's held jobs do not block bob's";
  EXPECT_EQ(scheduler_->OnJobExit(1, JobExit{ExitKind::kSuccess, ""}).action,
            ExitAction::kFinished);
  EXPECT_EQ(Started(*scheduler_), (std::vector<JobId>{3}));
  EXPECT_EQ(scheduler_->HeldBy("alice").gpus, 2);
}

TEST_F(SchedulerTest, FairShareAJobBeyondItsOwnersLimitsIsRefusedAtSubmission) {
  SchedulerConfig config = FairConfig();
  Build("exclusive", config, 4);
  scheduler_->SetUserTerms("alice", UserTerms{1, UserLimits{2, Bytes(0), 0}});
  const Status s = scheduler_->CheckPlaceable(Job(1, GiB(10), 4, "alice"));
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("within its owner's limits"), std::string::npos) << s.message();
}

TEST_F(SchedulerTest, FairShareBackfillKeepsTheHeadsReservation) {
  SchedulerConfig config = FairConfig();
  config.backfill = true;
  Build("exclusive", config, 2);
  ASSERT_TRUE(scheduler_->Submit(Timed(Job(1, GiB(10), 1, "alice"), Seconds(3600))).ok());
  EXPECT_EQ(Started(*scheduler_), (std::vector<JobId>{1}));
  // The head needs both GPUs: it waits for job 1's end, in an hour.
  ASSERT_TRUE(scheduler_->Submit(Job(2, GiB(10), 2, "bob")).ok());
  ASSERT_TRUE(scheduler_->Submit(Timed(Job(3, GiB(10), 1, "carol"), Seconds(7200))).ok());
  ASSERT_TRUE(scheduler_->Submit(Timed(Job(4, GiB(10), 1, "dave"), Seconds(600))).ok());
  EXPECT_EQ(Started(*scheduler_), (std::vector<JobId>{4}))
      << "only the job that ends before the head's time";
  const JobRecord* head = scheduler_->job(2);
  ASSERT_EQ(scheduler_->head(), 2);
  ASSERT_TRUE(head->reservation.has_value());
  ASSERT_TRUE(head->reservation->at.has_value());
  EXPECT_EQ(*head->reservation->at, clock_.Now() + Seconds(3600));
  EXPECT_EQ(head->reservation->waits_for.front(), 1);
}

TEST_F(SchedulerTest, BackfillCountsOnLearnedRunTimesAndOnAJobThatOutlivedItsOwn) {
  SchedulerConfig config = FairConfig();
  config.backfill = true;
  Build("exclusive", config, 2);
  JobSpec running = Job(1, GiB(10), 1, "alice");
  running.expected_run = Seconds(3600);  // learned: no --time
  ASSERT_TRUE(scheduler_->Submit(running).ok());
  EXPECT_EQ(Started(*scheduler_), (std::vector<JobId>{1}));
  ASSERT_TRUE(scheduler_->Submit(Job(2, GiB(10), 2, "bob")).ok());
  JobSpec unknown = Job(3, GiB(10), 1, "carol");  // no time limit, no run learned
  ASSERT_TRUE(scheduler_->Submit(unknown).ok());
  JobSpec learned_short = Job(4, GiB(10), 1, "dave");
  ASSERT_TRUE(scheduler_->Submit(learned_short).ok());
  EXPECT_TRUE(Started(*scheduler_).empty()) << "no job's end before the head's time is known";
  ASSERT_TRUE(scheduler_->UpdateExpectedRun(4, Seconds(600)).ok());
  EXPECT_EQ(Started(*scheduler_), (std::vector<JobId>{4}))
      << "a run time learned while it waited lets it go before the head";
  const JobRecord* head = scheduler_->job(2);
  ASSERT_TRUE(head->reservation && head->reservation->at);
  EXPECT_EQ(*head->reservation->at, clock_.Now() + Seconds(3600)) << "job 1's learned end";
  // Job 1 outlives what its model's runs took: it is expected to run as long again as it has,
  // not to end at once (which would let no job start before the head).
  ASSERT_EQ(scheduler_->OnJobExit(4, JobExit{ExitKind::kSuccess, ""}).action,
            ExitAction::kFinished);
  clock_.Advance(Seconds(5400));
  EXPECT_TRUE(Started(*scheduler_).empty());
  ASSERT_TRUE(head->reservation && head->reservation->at);
  EXPECT_EQ(*head->reservation->at, clock_.Now() + Seconds(5400));
  EXPECT_EQ(scheduler_->UpdateExpectedRun(9, Seconds(1)).code(), StatusCode::kNotFound);
  EXPECT_FALSE(scheduler_->UpdateExpectedRun(3, Seconds(-1)).ok());
}

// A head's reservation asks the policy as the server will be once the launch graces are over: the
// GPU a grace holds now must then be read as busy as its windows say, not as the pass left it,
// unread because the grace decided it.
TEST_F(SchedulerTest, BackfillReservesNoGpuThatOnlyALaunchGraceSeemedToHold) {
  SchedulerConfig config;
  config.backfill = true;
  Build("worst-fit", config, 2);
  const auto busy_for = [&](int seconds) {
    for (int i = 0; i < seconds; ++i) {
      for (int g = 0; g < 2; ++g)
        scheduler_->OnGpuSample(GpuSample{g, clock_.Now(), GiB(4), 0.95, -1, -1, true});
      clock_.Advance(Seconds(1));
    }
  };
  JobSpec first = Job(1, GiB(4));
  first.time_limit = Seconds(3600);
  ASSERT_TRUE(scheduler_->Submit(first).ok());
  ASSERT_EQ(Started(*scheduler_), (std::vector<JobId>{1}));
  const TimePoint first_started = clock_.Now();
  busy_for(400);  // past every grace of job 1's GPU
  ASSERT_TRUE(scheduler_->Submit(Timed(Job(2, GiB(4)), Seconds(7200))).ok());
  ASSERT_EQ(Started(*scheduler_), (std::vector<JobId>{2}));
  busy_for(10);  // job 2's GPU is in its grace, and 95% busy like job 1's
  ASSERT_TRUE(scheduler_->Submit(Job(3, GiB(4))).ok());
  EXPECT_TRUE(Started(*scheduler_).empty());
  ASSERT_EQ(scheduler_->head(), 3);
  const JobRecord* head = scheduler_->job(3);
  ASSERT_TRUE(head->reservation && head->reservation->at);
  EXPECT_EQ(*head->reservation->at, first_started + Seconds(3600))
      << "job 1's end frees its GPU; the end of job 2's grace frees nothing";
  EXPECT_EQ(head->reservation->gpus, scheduler_->job(1)->gpus);
}

// A GPU in its launch grace is taken to be as busy after it as its windows show, and these still
// show the busy job that left it just before the new one came: the reservation waits for job 1's
// end an hour on. Set too late, it delays nothing: the head, tried first at every pass, starts on
// that GPU once the grace is over and the windows have slid past the job that left.
TEST_F(SchedulerTest, AReservationSetLateOnAGpusOldWindowsDelaysNotTheHead) {
  SchedulerConfig config;
  config.backfill = true;
  Build("worst-fit", config, 2);
  JobSpec first = Job(1, GiB(4));
  first.time_limit = Seconds(3600);
  ASSERT_TRUE(scheduler_->Submit(first).ok());
  ASSERT_EQ(Started(*scheduler_), (std::vector<JobId>{1}));
  const TimePoint first_started = clock_.Now();
  ASSERT_TRUE(scheduler_->Submit(Job(2, GiB(4))).ok());
  ASSERT_EQ(Started(*scheduler_), (std::vector<JobId>{2}));
  ASSERT_EQ(scheduler_->job(2)->gpus, (std::vector<GpuIndex>{1}));
  SampleEverySecond(400, {0.95, 0.95});
  EXPECT_EQ(scheduler_->OnJobExit(2, JobExit{ExitKind::kSuccess, ""}).action,
            ExitAction::kFinished);
  JobSpec light = Job(3, GiB(4));
  light.time_limit = Seconds(7200);
  ASSERT_TRUE(scheduler_->Submit(light).ok());
  ASSERT_TRUE(scheduler_->Submit(Job(4, GiB(4))).ok());
  ASSERT_EQ(Started(*scheduler_), (std::vector<JobId>{3}));
  ASSERT_EQ(scheduler_->job(3)->gpus, (std::vector<GpuIndex>{1}));
  ASSERT_EQ(scheduler_->head(), 4);
  const JobRecord* head = scheduler_->job(4);
  ASSERT_TRUE(head->reservation && head->reservation->at);
  EXPECT_EQ(*head->reservation->at, first_started + Seconds(3600));
  SampleEverySecond(31, {0.95, 0.1});  // job 3 is light
  EXPECT_EQ(Started(*scheduler_), (std::vector<JobId>{4})) << "the head starts on GPU 1";
}

// A busy GPU that one of its two jobs leaves is not free while the other runs on: the reservation
// does not read its windows as empty once the first has gone (they would pass for an idle GPU).
TEST_F(SchedulerTest, BackfillReservesNoGpuThatAJobLeavesButAnotherStillHolds) {
  SchedulerConfig config;
  config.backfill = true;
  Build("worst-fit", config, 2);
  ASSERT_TRUE(scheduler_->Submit(Timed(Job(1, GiB(10)), Seconds(5000))).ok());
  ASSERT_EQ(Started(*scheduler_), (std::vector<JobId>{1}));
  const TimePoint alone_started = clock_.Now();
  SampleEverySecond(40, {0.1, 0.1});
  ASSERT_TRUE(scheduler_->Submit(Timed(Job(2, GiB(4)), Seconds(3600))).ok());
  ASSERT_EQ(Started(*scheduler_), (std::vector<JobId>{2}));
  SampleEverySecond(40, {0.1, 0.1});
  ASSERT_TRUE(scheduler_->Submit(Timed(Job(3, GiB(4)), Seconds(7200))).ok());
  ASSERT_EQ(Started(*scheduler_), (std::vector<JobId>{3}));
  ASSERT_EQ(scheduler_->job(2)->gpus, scheduler_->job(3)->gpus) << "jobs 2 and 3 share GPU 1";
  SampleEverySecond(400, {0.95, 0.95});  // every GPU busy, past every grace
  ASSERT_TRUE(scheduler_->Submit(Job(4, GiB(4))).ok());
  EXPECT_TRUE(Started(*scheduler_).empty());
  ASSERT_EQ(scheduler_->head(), 4);
  const JobRecord* head = scheduler_->job(4);
  ASSERT_TRUE(head->reservation && head->reservation->at);
  EXPECT_EQ(ToSeconds(*head->reservation->at - alone_started), 5000)
      << "job 2's end leaves job 3 on its 95%-busy GPU; job 1's end frees GPU 0";
  EXPECT_EQ(head->reservation->gpus, scheduler_->job(1)->gpus);
}

// Preemption asks the policy on a view with the victims released: a GPU whose other job keeps it
// busy stays busy there, so the job stopped is one whose leaving lets the head in.
TEST_F(SchedulerTest, PreemptionStopsNoJobWhoseGpuAnotherJobKeepsBusy) {
  SchedulerConfig config = FairConfig();
  config.fairness.preempt = true;
  config.fairness.preempt_after = Seconds(600);
  Build("worst-fit", config, 2);
  auto plain = [&](JobId id, Bytes need, std::string owner, bool requeue) {
    JobSpec s = Job(id, need, 1, std::move(owner));
    s.sharing = SharingPreference::kPlain;
    s.requeue = requeue;
    return s;
  };
  ASSERT_TRUE(scheduler_->Submit(plain(1, GiB(10), "alice", true)).ok());  // GPU 0, alone
  ASSERT_EQ(Started(*scheduler_), (std::vector<JobId>{1}));
  SampleEverySecond(5, {0.1, 0.1});
  ASSERT_TRUE(scheduler_->Submit(plain(2, GiB(4), "carol", false)).ok());  // GPU 1
  ASSERT_EQ(Started(*scheduler_), (std::vector<JobId>{2}));
  SampleEverySecond(5, {0.1, 0.1});
  ASSERT_TRUE(scheduler_->Submit(plain(3, GiB(4), "alice", true)).ok());  // GPU 1, beside job 2
  ASSERT_EQ(Started(*scheduler_), (std::vector<JobId>{3}));
  ASSERT_EQ(scheduler_->job(3)->gpus, scheduler_->job(2)->gpus);
  SampleEverySecond(60, {0.95, 0.95});
  ASSERT_TRUE(scheduler_->Submit(plain(4, GiB(4), "bob", false)).ok());
  EXPECT_TRUE(Started(*scheduler_).empty());
  SampleEverySecond(600, {0.95, 0.95});
  EXPECT_TRUE(Started(*scheduler_).empty());
  const std::vector<Preemption> preemptions = scheduler_->Preempt();
  ASSERT_EQ(preemptions.size(), 1u);
  EXPECT_EQ(preemptions[0].job, 1)
      << "job 3's leaving leaves carol's job 2 on its 95%-busy GPU; job 1's leaves GPU 0 idle";
  // What stopping the job it chose gains: the head still waits on the busy GPU, and another job
  // is stopped for it.
  for (const Preemption& p : preemptions) {
    EXPECT_EQ(scheduler_->OnJobExit(p.job, JobExit{ExitKind::kPreempted, ""}).action,
              ExitAction::kRequeuedAfterPreemption);
  }
  SampleEverySecond(5, {0.95, 0.95});
  EXPECT_EQ(Started(*scheduler_), (std::vector<JobId>{4})) << "the head takes the room made";
}

// A head that fits once a launch grace is over is reserved for the grace's end. The policy's grace
// counts from the placement (30 s): the 300 s a job's process may take to appear is another
// policy's grace (grace-from-process), and holds nothing here.
TEST_F(SchedulerTest, BackfillReservationWaitsOnlyForTheGraceThePolicyKeeps) {
  SchedulerConfig config;
  config.backfill = true;
  Build("worst-fit:utilization=off", config, 2);
  ASSERT_TRUE(scheduler_->Submit(Timed(Job(1, GiB(30)), Seconds(3600))).ok());
  ASSERT_EQ(Started(*scheduler_), (std::vector<JobId>{1}));
  clock_.Advance(Seconds(400));
  ASSERT_TRUE(scheduler_->Submit(Timed(Job(2, GiB(4)), Seconds(7200))).ok());
  ASSERT_TRUE(scheduler_->Submit(Job(3, GiB(30))).ok());
  ASSERT_EQ(Started(*scheduler_), (std::vector<JobId>{2}));
  ASSERT_EQ(scheduler_->job(2)->gpus, (std::vector<GpuIndex>{1}));
  const JobRecord* head = scheduler_->job(3);
  ASSERT_TRUE(head->reservation && head->reservation->at);
  EXPECT_EQ(head->reservation->gpus, (std::vector<GpuIndex>{1}));
  EXPECT_EQ(ToSeconds(*head->reservation->at - clock_.Now()), 30)
      << "GPU 1's launch grace ends in 30 s";
  clock_.Advance(Seconds(30));
  EXPECT_EQ(Started(*scheduler_), (std::vector<JobId>{3})) << "and the head starts then";
}

// With no known end a head is kept the usable GPUs with the most memory free for placement: not an
// unhealthy GPU, empty because nothing may run there, which would leave the GPU the head can only
// ever start on to a later job.
TEST_F(SchedulerTest, BackfillKeepsForTheHeadNoGpuItCannotUse) {
  SchedulerConfig config;
  config.backfill = true;
  Build("worst-fit", config, 2);
  scheduler_->OnGpuSample(GpuSample{1, clock_.Now(), Bytes(0), 0.0, -1, -1, false});
  ASSERT_TRUE(scheduler_->Submit(Job(1, GiB(30))).ok());  // no --time: its end is not known
  ASSERT_EQ(Started(*scheduler_), (std::vector<JobId>{1}));
  ASSERT_EQ(scheduler_->job(1)->gpus, (std::vector<GpuIndex>{0}));
  scheduler_->OnJobMemory(1, 0, GiB(30));
  for (int i = 0; i < 60; ++i) {
    scheduler_->OnGpuSample(GpuSample{0, clock_.Now(), GiB(30), 0.1, -1, -1, true});
    clock_.Advance(Seconds(1));
  }
  ASSERT_TRUE(scheduler_->Submit(Job(2, GiB(36))).ok());  // GPU 0 once job 1 has ended
  ASSERT_TRUE(scheduler_->Submit(Job(3, GiB(4))).ok());   // would take 4 GiB of it for good
  EXPECT_TRUE(Started(*scheduler_).empty()) << "job 3 would keep job 2 off GPU 0";
  const JobRecord* head = scheduler_->job(2);
  ASSERT_TRUE(head->reservation);
  EXPECT_EQ(head->reservation->gpus, (std::vector<GpuIndex>{0}));
}

// With no known end, a head of several GPUs is kept GPUs of one server, where it can run, not the
// GPUs with the most memory free wherever they are.
TEST_F(SchedulerTest, BackfillKeepsForAMultiGpuHeadGpusOfOneServer) {
  SchedulerConfig config;
  config.backfill = true;
  auto policy = MakePolicy("worst-fit");
  ASSERT_TRUE(policy.ok());
  policy_ = std::move(*policy);
  scheduler_ = std::make_unique<Scheduler>(clock_, *policy_, config);
  for (int i = 0; i < 4; ++i) {
    GpuInfo info;
    info.uuid = "GPU-" + std::to_string(i);
    info.capacity = GiB(40);
    info.node = i / 2;  // GPUs 0, 1 on server 0; 2, 3 on server 1
    scheduler_->AddGpu(info);
    scheduler_->OnGpuSample(GpuSample{i, clock_.Now(), Bytes(0), 0.0, -1, -1, true});
  }
  ASSERT_TRUE(scheduler_->Submit(Job(1, GiB(30))).ok());  // no --time: its end is not known
  ASSERT_EQ(Started(*scheduler_), (std::vector<JobId>{1}));
  clock_.Advance(Seconds(60));
  JobSpec on_server_1 = Job(2, GiB(30));
  on_server_1.booked_gpus = {2};
  ASSERT_TRUE(scheduler_->Submit(on_server_1).ok());
  ASSERT_EQ(Started(*scheduler_), (std::vector<JobId>{2}));
  ASSERT_EQ(scheduler_->job(1)->gpus, (std::vector<GpuIndex>{0}));
  clock_.Advance(Seconds(60));
  ASSERT_TRUE(scheduler_->Submit(Job(3, GiB(36), 2)).ok());
  EXPECT_TRUE(Started(*scheduler_).empty());
  const JobRecord* head = scheduler_->job(3);
  ASSERT_TRUE(head->reservation);
  ASSERT_EQ(head->reservation->gpus.size(), 2u);
  const ClusterView view = scheduler_->View();
  EXPECT_EQ(view.gpus[head->reservation->gpus[0]].node, view.gpus[head->reservation->gpus[1]].node)
      << "GPUs " << head->reservation->gpus[0] << " and " << head->reservation->gpus[1];
}

// `colo explain` asks Explain, and `colo show` reads the pass's verdicts (last_wait): for a job
// that backfill keeps off the head's GPUs both say the GPU is kept for the head.
TEST_F(SchedulerTest, ExplainSaysWhatThePassDecidedForAJobKeptOffTheHeadsGpus) {
  SchedulerConfig config;
  config.backfill = true;
  Build("worst-fit", config, 2);
  ASSERT_TRUE(scheduler_->Submit(Timed(Job(1, GiB(30)), Seconds(3600))).ok());
  ASSERT_EQ(Started(*scheduler_), (std::vector<JobId>{1}));
  clock_.Advance(Seconds(60));
  ASSERT_TRUE(scheduler_->Submit(Job(2, GiB(37))).ok());
  ASSERT_EQ(Started(*scheduler_), (std::vector<JobId>{2}));
  ASSERT_EQ(scheduler_->job(2)->gpus, (std::vector<GpuIndex>{1}));
  clock_.Advance(Seconds(60));
  ASSERT_TRUE(scheduler_->Submit(Job(3, GiB(36))).ok());  // the head: GPU 0 once job 1 ends
  ASSERT_TRUE(scheduler_->Submit(Job(4, GiB(4))).ok());   // no end known: not before the head
  EXPECT_TRUE(Started(*scheduler_).empty());
  ASSERT_EQ(scheduler_->head(), 3);
  const JobRecord* kept_off = scheduler_->job(4);
  ASSERT_TRUE(kept_off->last_wait);
  ASSERT_EQ(kept_off->last_wait->per_gpu.size(), 2u);
  ASSERT_EQ(kept_off->last_wait->per_gpu[0].gate, Gate::kEarmarked);
  const auto explained = scheduler_->Explain(4);
  ASSERT_TRUE(explained.has_value());
  const Wait* wait = std::get_if<Wait>(&*explained);
  ASSERT_NE(wait, nullptr) << "Explain says job 4 fits; the pass keeps it waiting";
  EXPECT_EQ(wait->Reason(), kept_off->last_wait->Reason());
}

// Preemption gains nothing where the head's reservation comes as soon: a head that a 30 s launch
// grace alone keeps off a GPU is not worth a job stopped with 60 s of notice. Its reservation is
// set at the end of the grace the policy keeps (not at the 300 s a process may take to appear),
// whether or not any running job's end is known.
TEST_F(SchedulerTest, NoPreemptionForAHeadThatALaunchGraceAloneHoldsOff) {
  for (const bool end_known : {true, false}) {
    SCOPED_TRACE(end_known ? "job 1's end known" : "no end known");
    SchedulerConfig config = FairConfig();
    config.launch_grace = Seconds(30);
    config.backfill = true;
    config.fairness.preempt = true;
    config.fairness.preempt_after = Seconds(600);
    Build("worst-fit", config, 2);
    JobSpec heavy = Job(1, GiB(30), 1, "alice");
    heavy.requeue = true;
    if (end_known) heavy.time_limit = Seconds(7200);
    ASSERT_TRUE(scheduler_->Submit(heavy).ok());
    ASSERT_EQ(Started(*scheduler_), (std::vector<JobId>{1}));
    clock_.Advance(Seconds(60));
    ASSERT_TRUE(scheduler_->Submit(Job(2, GiB(30), 1, "carol")).ok());
    ASSERT_EQ(Started(*scheduler_), (std::vector<JobId>{2}));
    clock_.Advance(Seconds(60));
    JobSpec waiting = Job(3, GiB(30), 1, "bob");
    waiting.sharing = SharingPreference::kPlain;  // beside another user's job
    ASSERT_TRUE(scheduler_->Submit(waiting).ok());
    EXPECT_TRUE(Started(*scheduler_).empty());
    clock_.Advance(Seconds(700));
    EXPECT_TRUE(Started(*scheduler_).empty());
    // Carol's job ends as a job Slurm booked GPU 1 for arrives: it starts there first.
    EXPECT_EQ(scheduler_->OnJobExit(2, JobExit{ExitKind::kSuccess, ""}).action,
              ExitAction::kFinished);
    JobSpec booked = Job(4, GiB(4), 1, "dave");
    booked.booked_gpus = {1};
    booked.sharing = SharingPreference::kPlain;
    ASSERT_TRUE(scheduler_->Submit(booked).ok());
    ASSERT_EQ(Started(*scheduler_), (std::vector<JobId>{4}));
    ASSERT_EQ(scheduler_->head(), 3);
    const JobRecord* head = scheduler_->job(3);
    ASSERT_TRUE(head->last_wait);
    ASSERT_EQ(head->last_wait->per_gpu[1].gate, Gate::kLaunchGrace);
    ASSERT_TRUE(head->reservation && head->reservation->at);
    EXPECT_EQ(*head->reservation->at, clock_.Now() + Seconds(30));
    EXPECT_TRUE(scheduler_->Preempt().empty())
        << "GPU 1 takes bob's job in 30 s; alice's job would be stopped with 60 s of notice";
    clock_.Advance(Seconds(30));
    EXPECT_EQ(Started(*scheduler_), (std::vector<JobId>{3})) << "as it does";
  }
}

// A head of two GPUs that one GPU's launch grace holds, the other idle (a job placed there ended
// within its grace): the reservation is set at the end of the grace on the busy GPU; no grace
// holds an idle GPU.
TEST_F(SchedulerTest, AReservationWaitsForNoGraceOnAnIdleGpu) {
  SchedulerConfig config;
  config.backfill = true;
  Build("worst-fit:utilization=off", config, 2);
  ASSERT_TRUE(scheduler_->Submit(Timed(Job(1, GiB(4)), Seconds(3600))).ok());
  ASSERT_EQ(Started(*scheduler_), (std::vector<JobId>{1}));
  ASSERT_EQ(scheduler_->job(1)->gpus, (std::vector<GpuIndex>{0}));
  const TimePoint first_started = clock_.Now();
  clock_.Advance(Seconds(10));
  ASSERT_TRUE(scheduler_->Submit(Job(2, GiB(4))).ok());
  ASSERT_EQ(Started(*scheduler_), (std::vector<JobId>{2}));
  ASSERT_EQ(scheduler_->job(2)->gpus, (std::vector<GpuIndex>{1}));
  clock_.Advance(Seconds(1));
  EXPECT_EQ(scheduler_->OnJobExit(2, JobExit{ExitKind::kSuccess, ""}).action,
            ExitAction::kFinished);  // GPU 1 idle again, 20 s after its grace began
  ASSERT_TRUE(scheduler_->Submit(Job(3, GiB(4), 2)).ok());
  EXPECT_TRUE(Started(*scheduler_).empty());
  ASSERT_EQ(scheduler_->head(), 3);
  const JobRecord* head = scheduler_->job(3);
  ASSERT_TRUE(head->last_wait);
  ASSERT_EQ(head->last_wait->per_gpu.size(), 2u);
  ASSERT_EQ(head->last_wait->per_gpu[0].gate, Gate::kLaunchGrace);
  ASSERT_TRUE(head->reservation && head->reservation->at);
  EXPECT_EQ(ToSeconds(*head->reservation->at - first_started), 30)
      << "GPU 0's grace ends 30 s after job 1 started; the idle GPU 1 holds nothing, reserved "
      << ToSeconds(*head->reservation->at - clock_.Now()) << " s on";
  clock_.Advance(first_started + Seconds(30) - clock_.Now());
  EXPECT_EQ(Started(*scheduler_), (std::vector<JobId>{3}))
      << "the head starts at GPU 0's grace end";
}

// Backfill looks at `backfill_depth` jobs behind the head per pass, and a job past them is not
// tried: Explain says it waits (every GPU kept for the head), not that it fits and starts at the
// next pass.
TEST_F(SchedulerTest, ExplainSaysNoJobFitsThatBackfillDoesNotLookAt) {
  SchedulerConfig config;
  config.backfill = true;
  config.backfill_depth = 1;
  Build("worst-fit:utilization=off", config, 2);
  ASSERT_TRUE(scheduler_->Submit(Timed(Job(1, GiB(30)), Seconds(3600))).ok());
  ASSERT_EQ(Started(*scheduler_), (std::vector<JobId>{1}));
  clock_.Advance(Seconds(60));
  ASSERT_TRUE(scheduler_->Submit(Job(2, GiB(30))).ok());
  ASSERT_EQ(Started(*scheduler_), (std::vector<JobId>{2}));
  ASSERT_EQ(scheduler_->job(2)->gpus, (std::vector<GpuIndex>{1}));
  clock_.Advance(Seconds(60));
  ASSERT_TRUE(scheduler_->Submit(Job(3, GiB(36))).ok());  // the head: GPU 0 once job 1 ends
  ASSERT_TRUE(scheduler_->Submit(Job(4, GiB(20))).ok());  // fits nowhere: the one job looked at
  ASSERT_TRUE(scheduler_->Submit(Job(5, GiB(4))).ok());   // fits beside job 2: not looked at
  EXPECT_TRUE(Started(*scheduler_).empty());
  clock_.Advance(Seconds(60));
  EXPECT_TRUE(Started(*scheduler_).empty()) << "job 5 is past the depth backfill looks at";
  ASSERT_EQ(scheduler_->head(), 3);
  const auto explained = scheduler_->Explain(5);
  ASSERT_TRUE(explained.has_value());
  EXPECT_FALSE(std::holds_alternative<Placed>(*explained))
      << "Explain says job 5 fits; no pass starts it";
}

TEST_F(SchedulerTest, FairShareUsageIsChargedByThePlannedShareOfEachGpu) {
  Build("worst-fit:grace=off", FairConfig(), 1);
  ASSERT_TRUE(scheduler_->Submit(Job(1, GiB(10), 1, "alice")).ok());  // plans 10 GiB of 40
  ASSERT_EQ(Started(*scheduler_).size(), 1u);
  EXPECT_NEAR(scheduler_->usage().Rate("alice"), 0.25, 1e-9);
  clock_.Advance(Seconds(400));
  EXPECT_NEAR(scheduler_->usage().Usage("alice", clock_.Now()), 100, 0.1);
}

TEST_F(SchedulerTest, FairSharePreemptsARequeueJobOfAUserOverTheirShare) {
  SchedulerConfig config = FairConfig();
  config.fairness.preempt = true;
  config.fairness.preempt_after = Seconds(600);
  Build("exclusive", config, 1);
  JobSpec heavy = Job(1, GiB(10), 1, "alice");
  heavy.requeue = true;
  heavy.preempt_notice = Seconds(30);
  ASSERT_TRUE(scheduler_->Submit(heavy).ok());
  ASSERT_EQ(Started(*scheduler_), (std::vector<JobId>{1}));
  clock_.Advance(Seconds(60));
  ASSERT_TRUE(scheduler_->Submit(Job(2, GiB(10), 1, "bob")).ok());
  EXPECT_TRUE(Started(*scheduler_).empty());
  EXPECT_TRUE(scheduler_->Preempt().empty()) << "bob has not waited preempt_after yet";
  clock_.Advance(Seconds(600));
  EXPECT_TRUE(Started(*scheduler_).empty());
  const std::vector<Preemption> preemptions = scheduler_->Preempt();
  ASSERT_EQ(preemptions.size(), 1u);
  EXPECT_EQ(preemptions[0].job, 1);
  EXPECT_EQ(preemptions[0].for_job, 2);
  EXPECT_EQ(preemptions[0].notice, Seconds(30)) << "the job's own notice, under the most";
  EXPECT_NE(preemptions[0].reason.find("for job 2 of bob"), std::string::npos)
      << preemptions[0].reason;
  EXPECT_TRUE(scheduler_->Preempt().empty()) << "one preemption at a time for the head";
  EXPECT_EQ(scheduler_->OnJobExit(1, JobExit{ExitKind::kPreempted, ""}).action,
            ExitAction::kRequeuedAfterPreemption);
  EXPECT_EQ(scheduler_->job(1)->state, JobState::kQueued);
  EXPECT_EQ(Started(*scheduler_), (std::vector<JobId>{2})) << "bob's job takes the GPU";
}

TEST_F(SchedulerTest, PreemptionStopsTheFewestJobsThatMakeRoomGivingBackThoseNotNeeded) {
  SchedulerConfig config = FairConfig();
  config.fairness.preempt = true;
  config.fairness.preempt_after = Seconds(600);
  Build("exclusive", config, 3);
  JobSpec wide = Job(1, GiB(10), 2, "alice");
  wide.requeue = true;
  ASSERT_TRUE(scheduler_->Submit(wide).ok());
  ASSERT_EQ(Started(*scheduler_), (std::vector<JobId>{1}));
  clock_.Advance(Seconds(60));
  JobSpec narrow = Job(2, GiB(10), 1, "alice");
  narrow.requeue = true;
  ASSERT_TRUE(scheduler_->Submit(narrow).ok());
  ASSERT_EQ(Started(*scheduler_), (std::vector<JobId>{2}));
  ASSERT_TRUE(scheduler_->Submit(Job(3, GiB(10), 2, "bob")).ok());
  EXPECT_TRUE(Started(*scheduler_).empty());
  clock_.Advance(Seconds(600));
  EXPECT_TRUE(Started(*scheduler_).empty());
  // Job 2, the most recently started, is taken first; its one GPU is not room for bob's two,
  // job 1's are, and without job 2 too: job 2 is given back.
  const std::vector<Preemption> preemptions = scheduler_->Preempt();
  ASSERT_EQ(preemptions.size(), 1u);
  EXPECT_EQ(preemptions[0].job, 1);
  EXPECT_EQ(preemptions[0].for_job, 3);
  EXPECT_TRUE(scheduler_->job(1)->preempt_deadline);
  EXPECT_FALSE(scheduler_->job(2)->preempt_deadline) << "job 2 runs on";
  EXPECT_EQ(scheduler_->OnJobExit(1, JobExit{ExitKind::kPreempted, ""}).action,
            ExitAction::kRequeuedAfterPreemption);
  EXPECT_EQ(Started(*scheduler_), (std::vector<JobId>{3})) << "bob's job takes job 1's GPUs";
}

TEST_F(SchedulerTest, AnOutsideSchedulersRunIsNeverPreemptedEvenWithPreemptibleAll) {
  // preemptible = "all": every job of colo's may be stopped, but a run Slurm booked GPUs for is
  // Slurm's to preempt. Chosen anyway, colod would refuse and the head would wait for nothing at
  // every pass.
  SchedulerConfig config = FairConfig();
  config.fairness.preempt = true;
  config.fairness.preempt_after = Seconds(600);
  config.fairness.preemptible = Preemptible::kAll;
  Build("exclusive", config, 2);
  ASSERT_TRUE(scheduler_->Submit(Job(1, GiB(10), 1, "alice")).ok());
  ASSERT_EQ(Started(*scheduler_), (std::vector<JobId>{1}));
  clock_.Advance(Seconds(60));
  JobSpec booked = Job(2, GiB(10), 1, "alice");
  booked.booked_gpus = {1};
  ASSERT_TRUE(scheduler_->Submit(booked).ok());
  ASSERT_EQ(Started(*scheduler_), (std::vector<JobId>{2}));
  ASSERT_TRUE(scheduler_->Submit(Job(3, GiB(10), 1, "bob")).ok());
  clock_.Advance(Seconds(600));
  EXPECT_TRUE(Started(*scheduler_).empty());
  // Job 2, the most recently started, would be taken first; it is Slurm's: job 1 is.
  const std::vector<Preemption> preemptions = scheduler_->Preempt();
  ASSERT_EQ(preemptions.size(), 1u);
  EXPECT_EQ(preemptions[0].job, 1);
  EXPECT_FALSE(scheduler_->job(2)->preempt_deadline);
}

TEST_F(SchedulerTest, APreemptionsNoticeIsNeverLongerThanTheServersMaxNotice) {
  // The notice is the job's own --signal lead: a job asking 65535 s (18 h) and ignoring its
  // signal would hold the GPU, and every preemption for the head, for that long.
  SchedulerConfig config = FairConfig();
  config.fairness.preempt = true;
  config.fairness.preempt_after = Seconds(60);
  config.fairness.max_notice = Seconds(300);
  Build("exclusive", config, 1);
  JobSpec stubborn = Job(1, GiB(10), 1, "alice");
  stubborn.requeue = true;
  stubborn.preempt_notice = Seconds(65535);
  ASSERT_TRUE(scheduler_->Submit(stubborn).ok());
  ASSERT_EQ(Started(*scheduler_), (std::vector<JobId>{1}));
  clock_.Advance(Seconds(60));
  ASSERT_TRUE(scheduler_->Submit(Job(2, GiB(10), 1, "bob")).ok());
  clock_.Advance(Seconds(60));
  EXPECT_TRUE(Started(*scheduler_).empty());
  const std::vector<Preemption> preemptions = scheduler_->Preempt();
  ASSERT_EQ(preemptions.size(), 1u);
  EXPECT_EQ(preemptions[0].notice, Seconds(300));
  const JobRecord* victim = scheduler_->job(1);
  ASSERT_TRUE(victim->preempt_deadline);
  EXPECT_EQ(*victim->preempt_deadline, clock_.Now() + Seconds(300));
}

}  // namespace
// A caller that places jobs itself (the simulator's cluster) asks the policy on PassView and starts
// what it placed with StartPlaced: the same launches, views and wake-ups as submitting each job,
// running a pass and dropping it again if it waits, through samples, memory, graces and exits.
TEST_F(SchedulerTest, StartPlacedOnThePassViewDecidesAsSubmittingAndAPass) {
  SchedulerConfig config;
  config.launch_grace = Seconds(20);
  Build("worst-fit:smact=0.6", config, 4);
  Scheduler& passes = *scheduler_;
  Scheduler direct(clock_, *policy_, config);
  for (int i = 0; i < 4; ++i) {
    GpuInfo info;
    info.uuid = "GPU-" + std::to_string(i);
    info.capacity = GiB(40);
    direct.AddGpu(info);
    direct.OnGpuSample(GpuSample{i, clock_.Now(), Bytes(0), 0.0, -1, -1, true});
  }
  std::deque<JobId> running;
  int started = 0, refused = 0;
  for (JobId id = 1; id <= 300; ++id) {
    clock_.Advance(Seconds(3 + id % 5));
    for (GpuIndex g = 0; g < 4; ++g) {
      const double smact = static_cast<double>((id * 7 + g * 3) % 10) / 10.0;
      const GpuSample sample{g, clock_.Now(), GiB((id + g) % 9), smact, -1, -1, true};
      if ((id + g) % 3 == 0) {
        passes.OnGpuSample(sample);
        direct.OnGpuSample(sample);
      }
    }
    if (!running.empty() && id % 4 == 0) {
      const JobId ending = running.front();
      running.pop_front();
      EXPECT_EQ(passes.OnJobExit(ending, {}).action, direct.OnJobExit(ending, {}).action);
      passes.Forget(ending);
      direct.Forget(ending);
    }
    if (!running.empty() && id % 3 == 0) {
      const JobRecord& job = *passes.job(running.back());
      passes.OnJobMemory(job.spec.id, job.gpus.front(), GiB(2));
      direct.OnJobMemory(job.spec.id, job.gpus.front(), GiB(2));
    }
    const JobSpec spec = Job(id, GiB(2 + id * 7 % 25), 1 + static_cast<int>(id % 4 == 1));
    ASSERT_TRUE(passes.Submit(spec).ok());
    std::vector<Launch> launches = passes.Schedule();
    if (launches.empty()) {
      ASSERT_EQ(passes.Drop(id), JobState::kQueued);
    }

    const PlacementRequest request = RequestFor(spec, spec.memory);
    // The view summarized for the request beforehand, or as the policy reads it, in turn.
    const ClusterView& view = id % 2 ? direct.PassView(request) : direct.PassView();
    PlacementDecision decision = policy_->Place(view, request);
    const Placed* placed = std::get_if<Placed>(&decision);
    ASSERT_EQ(placed != nullptr, launches.size() == 1) << "job " << id;
    if (placed) {
      Result<Launch> launch = direct.StartPlaced(spec, *placed);
      ASSERT_TRUE(launch.ok()) << launch.status().ToString();
      EXPECT_EQ(launch->job, launches[0].job);
      EXPECT_EQ(launch->gpus, launches[0].gpus);
      EXPECT_EQ(launch->mode, launches[0].mode);
      EXPECT_EQ(launch->thread_percent, launches[0].thread_percent);
      EXPECT_EQ(launch->reservation, launches[0].reservation);
      EXPECT_EQ(launch->memory_limit, launches[0].memory_limit);
      EXPECT_EQ(launch->attempt, launches[0].attempt);
      running.push_back(id);
      ++started;
    } else {
      ++refused;
    }
    // (After a drop the submitting side may keep a look for the head it dropped, which finds
    // nothing: only a scheduler that placed the job is compared.)
    if (placed) {
      EXPECT_EQ(passes.NextWakeup(), direct.NextWakeup());
    }
    const ClusterView a = passes.View(), b = direct.View();
    ASSERT_EQ(a.gpus.size(), b.gpus.size());
    EXPECT_EQ(a.last_placed, b.last_placed);
    for (size_t g = 0; g < a.gpus.size(); ++g) {
      EXPECT_EQ(a.gpus[g].free_for_placement, b.gpus[g].free_for_placement);
      EXPECT_EQ(a.gpus[g].job_count, b.gpus[g].job_count);
      EXPECT_EQ(a.gpus[g].placed_recently, b.gpus[g].placed_recently);
      EXPECT_EQ(a.gpus[g].smact.mean, b.gpus[g].smact.mean);
    }
  }
  // Both ways were taken often.
  EXPECT_GT(started, 50);
  EXPECT_GT(refused, 50);
}

TEST_F(SchedulerTest, AForgottenJobLeavesNothingToTheJobsAfterIt) {
  // The record of a job forgotten (or dropped) is reused for a later job, buffers and all: the
  // later job starts as blank as the first one did.
  SchedulerConfig config;
  config.max_oom_retries = 0;
  Build("worst-fit", config);
  JobSpec first = Job(1, GiB(8), 2, "alice-of-a-login-longer-than-short-strings");
  first.name = "a name longer than a string keeps inline";
  ASSERT_TRUE(scheduler_->Submit(first).ok());
  ASSERT_EQ(scheduler_->Schedule().size(), 1u);
  scheduler_->OnJobProcessSeen(1, 0);
  scheduler_->OnJobMemory(1, 0, GiB(9));
  ASSERT_EQ(scheduler_->OnJobExit(1, {ExitKind::kOutOfMemory, "CUDA out of memory"}).action,
            ExitAction::kFailedRetryCap);
  scheduler_->Forget(1);
  EXPECT_EQ(scheduler_->job(1), nullptr);
  ASSERT_TRUE(scheduler_->Submit(Job(2, GiB(4), 1, "bob")).ok());
  ASSERT_EQ(scheduler_->Drop(2), JobState::kQueued);

  JobSpec later = Job(3, GiB(4), 1, "carol");
  later.name = "c";
  ASSERT_TRUE(scheduler_->Submit(later).ok());
  const JobRecord* job = scheduler_->job(3);
  ASSERT_NE(job, nullptr);
  EXPECT_EQ(job->spec.name, "c");
  EXPECT_EQ(job->spec.owner, "carol");
  EXPECT_EQ(job->state, JobState::kQueued);
  EXPECT_EQ(job->need.peak, GiB(4));
  EXPECT_EQ(job->attempts, 0);
  EXPECT_EQ(job->oom_count, 0);
  EXPECT_FALSE(job->ever_started);
  EXPECT_TRUE(job->gpus.empty());
  EXPECT_TRUE(job->current_use.empty());
  EXPECT_TRUE(job->process_seen.empty());
  EXPECT_EQ(job->max_peak, Bytes(0));
  EXPECT_TRUE(job->end_reason.empty());
  EXPECT_TRUE(job->need_basis.empty());
  const auto launches = scheduler_->Schedule();
  ASSERT_EQ(launches.size(), 1u);
  EXPECT_EQ(launches[0].job, 3);
  EXPECT_EQ(launches[0].attempt, 1);
  EXPECT_EQ(launches[0].reservation, GiB(4));
  EXPECT_EQ(job->gpus, launches[0].gpus);
  EXPECT_EQ(job->current_use, std::vector<Bytes>{Bytes(0)});
  EXPECT_EQ(job->process_seen, std::vector<std::optional<TimePoint>>{std::nullopt});
  EXPECT_EQ(job->attempt_peak, Bytes(0));
  EXPECT_EQ(scheduler_->HeldBy("carol").running_jobs, 1);
  EXPECT_EQ(scheduler_->HeldBy("alice-of-a-login-longer-than-short-strings").running_jobs, 0);
  const JobEnded ended = scheduler_->OnJobExit(3, {ExitKind::kSuccess, ""});
  EXPECT_EQ(ended.state, JobState::kSucceeded);
  EXPECT_TRUE(ended.reason.empty());
  EXPECT_EQ(ended.peak, Bytes(0));
}

TEST_F(SchedulerTest, StartPlacedRefusesWhereAPassCouldDecideOtherwise) {
  Build("worst-fit", {}, 2);
  const JobSpec spec = Job(1, GiB(10));
  const PlacementRequest request = RequestFor(spec, spec.memory);
  PlacementDecision decision = policy_->Place(scheduler_->PassView(request), request);
  ASSERT_TRUE(std::holds_alternative<Placed>(decision));
  const Placed placed = std::get<Placed>(decision);
  // The GPU it was placed on changed since the view was made; or another GPU did (the policy
  // might have chosen it now).
  scheduler_->OnGpuSample(GpuSample{placed.gpus[0], clock_.Now(), GiB(25), 0.0, -1, -1, true});
  EXPECT_FALSE(scheduler_->StartPlaced(spec, placed).ok());
  decision = policy_->Place(scheduler_->PassView(request), request);
  ASSERT_TRUE(std::holds_alternative<Placed>(decision));
  const GpuIndex other = std::get<Placed>(decision).gpus[0] == 0 ? 1 : 0;
  scheduler_->OnGpuSample(GpuSample{other, clock_.Now(), GiB(0), 0.0, -1, -1, true});
  EXPECT_FALSE(scheduler_->StartPlaced(spec, std::get<Placed>(decision)).ok());
  // A job placed at this instant since the view was asked.
  decision = policy_->Place(scheduler_->PassView(request), request);
  ASSERT_TRUE(scheduler_->Submit(Job(3, GiB(1))).ok());
  ASSERT_EQ(scheduler_->Schedule().size(), 1u);
  EXPECT_FALSE(scheduler_->StartPlaced(spec, std::get<Placed>(decision)).ok());
  // A later instant.
  policy_->Place(scheduler_->PassView(request), request);
  clock_.Advance(Seconds(1));
  EXPECT_FALSE(scheduler_->StartPlaced(spec, placed).ok());
  // Another job waits.
  ASSERT_TRUE(scheduler_->Submit(Job(2, GiB(10))).ok());
  decision = policy_->Place(scheduler_->PassView(request), request);
  ASSERT_TRUE(std::holds_alternative<Placed>(decision));
  EXPECT_FALSE(scheduler_->StartPlaced(spec, std::get<Placed>(decision)).ok());
  ASSERT_EQ(scheduler_->Drop(2), JobState::kQueued);
  EXPECT_EQ(scheduler_->job(1), nullptr) << "a refusal keeps nothing";
  // Placed as decided: it runs, and a second submission of its id is refused.
  decision = policy_->Place(scheduler_->PassView(request), request);
  ASSERT_TRUE(std::holds_alternative<Placed>(decision));
  const Result<Launch> launch = scheduler_->StartPlaced(spec, std::get<Placed>(decision));
  ASSERT_TRUE(launch.ok()) << launch.status().ToString();
  EXPECT_EQ(scheduler_->job(1)->state, JobState::kRunning);
  EXPECT_TRUE(scheduler_->Schedule().empty());
  clock_.Advance(Seconds(60));  // past the launch graces
  decision = policy_->Place(scheduler_->PassView(request), request);
  ASSERT_TRUE(std::holds_alternative<Placed>(decision));
  EXPECT_FALSE(scheduler_->StartPlaced(spec, std::get<Placed>(decision)).ok());
  EXPECT_EQ(scheduler_->job(1)->state, JobState::kRunning);
}

}  // namespace colo
