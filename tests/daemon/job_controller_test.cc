// The job lifecycle, deterministically: a manual clock, an in-memory store that can fail, and a
// launcher that runs nothing. Every durability rule of the controller has a test here, including
// a simulated kill -9 of colod at each step of a launch.
#include "daemon/job_controller.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "daemon/fake_job_store.h"
#include "daemon/fake_launcher.h"
#include "policies/registry.h"

namespace colo {
namespace {

// Forwards to a store and stops colod (throws SimulatedCrash) just before or just after its Nth
// write, counted from when it is armed.
class CrashingStore final : public JobStore {
 public:
  explicit CrashingStore(JobStore& inner) : inner_(inner) {}
  void CrashAtWrite(int n, bool after) {
    writes_ = 0;
    crash_at_ = n;
    after_ = after;
  }

  using JobStore::Insert;
  using JobStore::InsertReserved;
  Status Insert(Job& job, const std::vector<JobEvent>& events, std::string_view token) override {
    return Write([&] { return inner_.Insert(job, events, token); });
  }
  Status Update(const Job& job, const std::vector<JobEvent>& events) override {
    return Write([&] { return inner_.Update(job, events); });
  }
  Status UpdateMany(const std::vector<JobChange>& changes) override {
    return Write([&] { return inner_.UpdateMany(changes); });
  }
  Result<std::optional<JobId>> SubmittedWith(unsigned uid, std::string_view token,
                                             WallTime since) override {
    return inner_.SubmittedWith(uid, token, since);
  }
  Result<JobId> ReserveIds(int count) override {
    Result<JobId> first = InvalidArgument("not reserved");
    Status s = Write([&] {
      first = inner_.ReserveIds(count);
      return first.status();
    });
    return s.ok() ? first : Result<JobId>(s);
  }
  Status InsertReserved(const std::vector<Job>& jobs, const std::vector<JobEvent>& events,
                        std::string_view token) override {
    return Write([&] { return inner_.InsertReserved(jobs, events, token); });
  }
  Status AddEvents(const std::vector<JobEvent>& events) override {
    return inner_.AddEvents(events);
  }
  Result<LiveJobs> LoadLive() override { return inner_.LoadLive(); }
  Result<std::optional<Job>> Find(JobId id) override { return inner_.Find(id); }
  Result<HistoryPage> History(const HistoryQuery& q) override { return inner_.History(q); }
  Result<std::vector<JobEvent>> Events(JobId id) override { return inner_.Events(id); }
  Result<std::vector<JobEvent>> RecentEvents(int limit) override {
    return inner_.RecentEvents(limit);
  }
  Result<ModelRuns> EarlierRuns(const std::string& s, int limit) override {
    return inner_.EarlierRuns(s, limit);
  }
  Status SaveUsage(const UsageRecord& usage) override { return inner_.SaveUsage(usage); }
  Result<UsageRecord> LoadUsage() override { return inner_.LoadUsage(); }

 private:
  template <typename F>
  Status Write(F&& write) {
    const bool crash = crash_at_ > 0 && ++writes_ == crash_at_;
    if (crash) crash_at_ = 0;
    if (crash && !after_) throw SimulatedCrash{};
    Status s = write();
    if (crash) throw SimulatedCrash{};
    return s;
  }
  JobStore& inner_;
  int crash_at_ = 0, writes_ = 0;
  bool after_ = false;
};

const Identity kAlice{1001, 1001, "alice"};
const Identity kBob{1002, 1002, "bob"};
const Identity kRoot{0, 0, "root"};

class JobControllerTest : public ::testing::Test {
 protected:
  JobControllerTest()
      : clock_(TimePoint{} + Seconds(1000), WallTime{} + std::chrono::hours(490000)) {
    auto policy = MakePolicy("worst-fit:margin=2GiB");
    EXPECT_TRUE(policy.ok());
    policy_ = std::move(*policy);
    config_.launch_grace = Seconds(0);
    Start();
  }

  // A fresh controller and scheduler on the same store and processes: colod restarted.
  void Start() {
    controller_.reset();
    scheduler_ = std::make_unique<Scheduler>(clock_, *policy_, config_);
    for (int g = 0; g < 2; ++g)
      scheduler_->AddGpu(GpuInfo{"GPU-" + std::to_string(g), "Fake", GiB(80), 0, false,
                                 SharingMode::kPlain, MiB(500), MiB(500)});
    ControllerOptions options;
    options.cancel_grace = Seconds(10);
    options.log = [this](const JobEvent& e) { log_.push_back(e); };
    options.tenant_wait_limit = Seconds(60);
    controller_ = std::make_unique<JobController>(clock_, *scheduler_, crashing_, launcher_,
                                                  std::move(options));
    ASSERT_TRUE(controller_->Recover().ok());
  }
  // Runs the controller's turns as colod's loop would, a simulated crash ending the turn.
  void Turn() {
    try {
      controller_->Tick();
    } catch (const SimulatedCrash&) {
      crashed_ = true;
    }
  }

  static api::SubmitRequest Request(std::vector<std::string> command,
                                    std::optional<Bytes> memory = GiB(8)) {
    api::SubmitRequest r;
    r.command = std::move(command);
    r.memory = memory;
    r.context.workdir = "/work";
    r.env = {"PATH=/usr/bin", "SECRET=hunter2", "CUDA_VISIBLE_DEVICES=7"};
    return r;
  }
  JobId Submit(const Identity& who = kAlice, std::optional<Bytes> memory = GiB(8)) {
    auto id = controller_->Submit(who, Request({"python", "train.py"}, memory));
    EXPECT_TRUE(id.ok()) << id.status().message();
    return id.ok() ? *id : 0;
  }
  std::optional<Job> Stored(JobId id) {
    auto found = store_.Find(id);
    EXPECT_TRUE(found.ok()) << found.status().message();
    return found.ok() ? *found : std::nullopt;
  }
  JobState StoredState(JobId id) {
    auto job = Stored(id);
    return job ? job->state : JobState::kLost;
  }
  bool Logged(const std::string& kind) const {
    for (const JobEvent& e : log_) {
      if (e.kind == kind) return true;
    }
    return false;
  }

  ManualClock clock_;
  std::unique_ptr<PlacementPolicy> policy_;
  SchedulerConfig config_;
  FakeJobStore store_;
  CrashingStore crashing_{store_};
  FakeLauncher launcher_;
  std::unique_ptr<Scheduler> scheduler_;
  std::unique_ptr<JobController> controller_;
  std::vector<JobEvent> log_;
  // The runs the controller gave back to Slurm so far (colod's loop takes them for the bridge).
  const std::vector<TenantHandback>& Handbacks() {
    for (TenantHandback& h : controller_->TakeHandbacks()) handbacks_.push_back(std::move(h));
    return handbacks_;
  }
  std::vector<TenantHandback> handbacks_;
  bool crashed_ = false;
};

TEST_F(JobControllerTest, ASubmittedJobIsStoredRunsOnceAndLeavesMemoryWhenDone) {
  const JobId id = Submit();
  ASSERT_TRUE(Stored(id));
  EXPECT_EQ(StoredState(id), JobState::kQueued);
  controller_->Tick();
  ASSERT_TRUE(launcher_.IsRunning(id, 1));
  const LaunchSpec& spec = launcher_.process(id, 1)->spec;
  EXPECT_EQ(spec.owner.uid, kAlice.uid);
  EXPECT_EQ(spec.context.workdir, "/work");
  // colo decides the GPUs: the submitter's CUDA_VISIBLE_DEVICES is replaced.
  EXPECT_EQ(std::count(spec.env.begin(), spec.env.end(), "CUDA_VISIBLE_DEVICES=7"), 0);
  EXPECT_EQ(StoredState(id), JobState::kRunning);
  EXPECT_EQ(Stored(id)->current()->phase, Attempt::Phase::kRunning);
  launcher_.Succeed(id, 1);
  controller_->Tick();
  EXPECT_EQ(StoredState(id), JobState::kSucceeded);
  EXPECT_TRUE(Stored(id)->env.empty()) << "an ended job keeps no secrets";
  EXPECT_EQ(controller_->FindLive(id), nullptr) << "ended jobs leave memory";
  EXPECT_EQ(scheduler_->job(id), nullptr);
  EXPECT_EQ((launcher_.starts[{id, 1}]), 1);
  EXPECT_TRUE(launcher_.released.count({id, 1}));
}

TEST_F(JobControllerTest, AFailedWriteRefusesTheSubmitAndTheNextOneGetsAFreshId) {
  const JobId first = Submit();
  store_.FailWrites(1, Unavailable("disk full"));
  auto refused = controller_->Submit(kAlice, Request({"true"}));
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), StatusCode::kUnavailable);
  EXPECT_NE(refused.status().message().find("not submitted"), std::string::npos);
  EXPECT_NE(refused.status().message().find("disk full"), std::string::npos);
  const JobId next = Submit();
  EXPECT_GT(next, first);
  EXPECT_EQ(controller_->live_jobs().size(), 2u);
}

TEST_F(JobControllerTest, ASubmitSentAgainWithItsTokenGetsTheJobStoredTheFirstTime) {
  api::SubmitRequest request = Request({"true"});
  request.token = "0123abcd";
  auto first = controller_->Submit(kAlice, request);
  ASSERT_TRUE(first.ok());
  // Its reply was lost; after a restart even, the same submit finds its job.
  Start();
  auto again = controller_->Submit(kAlice, request);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(*again, *first);
  EXPECT_EQ(controller_->live_jobs().size(), 1u);
  // Another user's token is theirs; a fresh token is a new job.
  EXPECT_NE(*controller_->Submit(kBob, request), *first);
  request.token = "fedc";
  EXPECT_NE(*controller_->Submit(kAlice, request), *first);
  // An array: its id, and no task twice.
  api::SubmitRequest array = Request({"true"});
  array.array = api::ArraySpec{{0, 1, 2}, 0};
  array.token = "array-1";
  auto tasks = controller_->Submit(kAlice, array);
  ASSERT_TRUE(tasks.ok());
  EXPECT_EQ(*controller_->Submit(kAlice, array), *tasks);
  EXPECT_EQ(controller_->live_jobs().size(), 6u);
  // Once its lifetime is over, a token is a new submit.
  clock_.Advance(kSubmitTokenLifetime + Seconds(1));
  EXPECT_NE(*controller_->Submit(kAlice, array), *tasks);
}

TEST_F(JobControllerTest, RequestsThatCanNeverRunAreRefusedWithTheReason) {
  auto too_big = controller_->Submit(kAlice, Request({"true"}, GiB(80)));
  ASSERT_FALSE(too_big.ok());
  EXPECT_EQ(too_big.status().code(), StatusCode::kInfeasible);
  EXPECT_NE(too_big.status().message().find("82.0 GiB"), std::string::npos)
      << too_big.status().message();
  EXPECT_NE(too_big.status().message().find("largest GPU has 80.0 GiB"), std::string::npos);
  api::SubmitRequest three = Request({"true"});
  three.gpus = 3;
  auto too_many = controller_->Submit(kAlice, three);
  ASSERT_FALSE(too_many.ok());
  EXPECT_EQ(too_many.status().code(), StatusCode::kInfeasible);
  EXPECT_NE(too_many.status().message().find("needs 3 GPUs"), std::string::npos);
  EXPECT_TRUE(controller_->live_jobs().empty());
  auto page = store_.History(HistoryQuery{});
  ASSERT_TRUE(page.ok());
  EXPECT_TRUE(page->jobs.empty()) << "nothing refused is stored";
}

TEST_F(JobControllerTest, AWorkdirTheUserCannotEnterAndANamelessUserAreRefused) {
  launcher_.denied_workdirs.insert("/work");
  auto denied = controller_->Submit(kAlice, Request({"true"}));
  ASSERT_FALSE(denied.ok());
  EXPECT_EQ(denied.status().code(), StatusCode::kPermissionDenied);
  launcher_.denied_workdirs.clear();
  auto nameless = controller_->Submit(Identity{4242, 4242, ""}, Request({"true"}));
  ASSERT_FALSE(nameless.ok());
  EXPECT_EQ(nameless.status().code(), StatusCode::kPermissionDenied);
  EXPECT_NE(nameless.status().message().find("4242"), std::string::npos);
}

// kill -9 of colod at every step of a launch and of an exit: after the restart the job runs
// exactly once and ends as it really did; nothing acknowledged is lost.
enum class Step {
  kBeforeIntent,
  kAfterIntent,
  kBeforeStart,
  kAfterStart,
  kBeforeStartedRecord,
  kAfterStartedRecord,
  kBeforeExitRecord,
  kAfterExitRecord,
};

class KillAtEveryStep : public JobControllerTest, public ::testing::WithParamInterface<Step> {};

TEST_P(KillAtEveryStep, TheJobRunsExactlyOnce) {
  const JobId id = Submit();
  const JobId waiting = Submit(kBob, GiB(70));  // a second job, queued behind
  const Step step = GetParam();
  switch (step) {
    case Step::kBeforeIntent:
      crashing_.CrashAtWrite(1, false);
      break;
    case Step::kAfterIntent:
      crashing_.CrashAtWrite(1, true);
      break;
    case Step::kBeforeStart:
      launcher_.crash = FakeLauncher::CrashPoint::kBeforeStart;
      break;
    case Step::kAfterStart:
      launcher_.crash = FakeLauncher::CrashPoint::kAfterStart;
      break;
    case Step::kBeforeStartedRecord:
      crashing_.CrashAtWrite(2, false);
      break;
    case Step::kAfterStartedRecord:
      crashing_.CrashAtWrite(2, true);
      break;
    case Step::kBeforeExitRecord:
    case Step::kAfterExitRecord:
      break;
  }
  Turn();
  if (step == Step::kBeforeExitRecord || step == Step::kAfterExitRecord) {
    ASSERT_FALSE(crashed_);
    ASSERT_TRUE(launcher_.IsRunning(id, 1));
    crashing_.CrashAtWrite(1, step == Step::kAfterExitRecord);
    launcher_.Succeed(id, 1);
    Turn();
  }
  ASSERT_TRUE(crashed_) << "the crash point was never reached";
  Start();  // colod comes back
  for (int turn = 0; turn < 5; ++turn) {
    controller_->Tick();
    if (launcher_.IsRunning(id, 1)) launcher_.Succeed(id, 1);
  }
  EXPECT_EQ((launcher_.starts[{id, 1}]), 1) << "attempt 1 started more than once";
  EXPECT_EQ((launcher_.starts[{id, 2}]), 0) << "a second attempt was started";
  EXPECT_EQ(StoredState(id), JobState::kSucceeded);
  ASSERT_TRUE(Stored(waiting));  // acknowledged, and still there
  EXPECT_NE(StoredState(waiting), JobState::kLost);
}

INSTANTIATE_TEST_SUITE_P(Launch, KillAtEveryStep,
                         ::testing::Values(Step::kBeforeIntent, Step::kAfterIntent,
                                           Step::kBeforeStart, Step::kAfterStart,
                                           Step::kBeforeStartedRecord, Step::kAfterStartedRecord,
                                           Step::kBeforeExitRecord, Step::kAfterExitRecord));

TEST_F(JobControllerTest, ALaunchWhoseIntentCannotBeStoredIsNotStartedAndWaits) {
  const JobId id = Submit();
  store_.FailWrites(1, Unavailable("I/O error"));
  controller_->Tick();
  EXPECT_FALSE(launcher_.IsRunning(id, 1));
  EXPECT_EQ((launcher_.starts[{id, 1}]), 0);
  EXPECT_EQ(StoredState(id), JobState::kQueued);
  EXPECT_TRUE(Logged("store-error"));
  controller_->Tick();
  EXPECT_TRUE(launcher_.IsRunning(id, 1)) << "it starts once the store works again";
}

TEST_F(JobControllerTest, AnExitSeenWhileTheStoreFailsIsKeptAndStoredLater) {
  const JobId id = Submit();
  controller_->Tick();
  store_.FailAllWrites(Unavailable("disk full"));
  launcher_.Succeed(id, 1);
  controller_->Tick();
  EXPECT_TRUE(controller_->has_unsaved());
  ASSERT_NE(controller_->FindLive(id), nullptr) << "kept in memory until stored";
  EXPECT_EQ(controller_->FindLive(id)->state, JobState::kSucceeded);
  EXPECT_EQ(StoredState(id), JobState::kRunning);
  store_.HealWrites();
  clock_.Advance(Seconds(2));
  controller_->Tick();
  EXPECT_FALSE(controller_->has_unsaved());
  EXPECT_EQ(StoredState(id), JobState::kSucceeded);
  EXPECT_EQ(controller_->FindLive(id), nullptr);
  bool exit_event = false;
  auto events = store_.Events(id);
  ASSERT_TRUE(events.ok());
  for (const JobEvent& e : *events) exit_event |= e.kind == "success";
  EXPECT_TRUE(exit_event) << "the events of the failed write are stored with the retry";
}

TEST_F(JobControllerTest, OutOfMemoryIsRecoveredWithALargerNeedOtherFailuresAreFinal) {
  const JobId id = Submit(kAlice, GiB(4));
  controller_->Tick();
  controller_->OnSample(clock_.Now(), {DeviceSample{}, DeviceSample{}});
  launcher_.End(id, 1, ProcessEnd{true, 1, true},
                "Traceback (most recent call last):\n  File \"train.py\", line 3, in <module>\n"
                "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB\n");
  controller_->Tick();  // ends attempt 1, re-queues it, and starts attempt 2
  ASSERT_TRUE(launcher_.IsRunning(id, 2));
  const Job* job = controller_->FindLive(id);
  ASSERT_NE(job, nullptr);
  EXPECT_EQ(job->attempts[0].exit, ExitKind::kOutOfMemory);
  EXPECT_GT(job->spec.memory.peak, GiB(4)) << "the need grew after the crash";
  launcher_.Succeed(id, 2);
  controller_->Tick();
  EXPECT_EQ(StoredState(id), JobState::kSucceeded);
  EXPECT_EQ(controller_->counters().oom_recoveries, 1);

  const JobId failing = Submit();
  controller_->Tick();
  launcher_.End(failing, 1, ProcessEnd{true, 3, true}, "ValueError: nope\n");
  controller_->Tick();
  EXPECT_EQ(StoredState(failing), JobState::kFailed);
  EXPECT_NE(Stored(failing)->reason.find("exit code 3"), std::string::npos);
  EXPECT_FALSE(launcher_.IsRunning(failing, 2));
}

TEST_F(JobControllerTest, OnlyTheOwnerOrRootCancelsAndACancelIsStoredBeforeActing) {
  const JobId queued = Submit(kAlice, GiB(70));
  const JobId waiting = Submit(kAlice, GiB(70));
  const JobId behind = Submit(kAlice, GiB(70));  // both GPUs full: this one waits
  controller_->Tick();
  ASSERT_TRUE(launcher_.IsRunning(queued, 1));
  ASSERT_TRUE(launcher_.IsRunning(waiting, 1));
  auto by_bob = controller_->Cancel(kBob, behind);
  ASSERT_FALSE(by_bob.ok());
  EXPECT_EQ(by_bob.status().code(), StatusCode::kPermissionDenied);

  store_.FailWrites(1, Unavailable("disk full"));
  auto unstored = controller_->Cancel(kAlice, behind);
  ASSERT_FALSE(unstored.ok());
  EXPECT_EQ(unstored.status().code(), StatusCode::kUnavailable);
  EXPECT_EQ(controller_->FindLive(behind)->state, JobState::kQueued);

  auto cancelled = controller_->Cancel(kAlice, behind);
  ASSERT_TRUE(cancelled.ok()) << cancelled.status().message();
  EXPECT_EQ(*cancelled, "cancelled");
  EXPECT_EQ(StoredState(behind), JobState::kCancelled);

  // A running job that ignores SIGTERM gets SIGKILL once the grace is over.
  launcher_.ignores_sigterm = true;
  auto by_root = controller_->Cancel(kRoot, queued);
  ASSERT_TRUE(by_root.ok());
  EXPECT_EQ(*by_root, "cancelling");
  EXPECT_TRUE(Stored(queued)->cancel_requested);
  controller_->Tick();
  EXPECT_TRUE(launcher_.IsRunning(queued, 1));
  clock_.Advance(Seconds(11));
  controller_->Tick();  // SIGKILL
  controller_->Tick();  // its end
  EXPECT_EQ(StoredState(queued), JobState::kCancelled);
  const auto& signals = launcher_.process(queued, 1)->signals;
  EXPECT_EQ(signals.front(), SIGTERM);
  EXPECT_EQ(signals.back(), SIGKILL);
  auto again = controller_->Cancel(kAlice, queued);
  ASSERT_FALSE(again.ok());
  EXPECT_EQ(again.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(controller_->Cancel(kAlice, 999).status().code(), StatusCode::kNotFound);
}

TEST_F(JobControllerTest, ARestartRequeuesWaitingJobsAndTakesBackRunningOnes) {
  const JobId running = Submit(kAlice, GiB(70));
  const JobId also_running = Submit(kAlice, GiB(70));
  const JobId queued = Submit(kBob, GiB(70));
  controller_->Tick();
  ASSERT_TRUE(launcher_.IsRunning(running, 1));
  launcher_.Succeed(also_running, 1);  // ends while colod is down
  Start();
  EXPECT_NE(controller_->FindLive(running), nullptr);
  EXPECT_EQ(controller_->FindLive(running)->state, JobState::kRunning);
  EXPECT_TRUE(Logged("adopted"));
  controller_->Tick();
  EXPECT_EQ(StoredState(also_running), JobState::kSucceeded);
  EXPECT_TRUE(launcher_.IsRunning(queued, 1));
  EXPECT_EQ((launcher_.starts[{running, 1}]), 1);
}

TEST_F(JobControllerTest, AnUnreadableRowIsQuarantinedAndTheRestLoad) {
  const JobId good = Submit();
  const JobId bad = Submit();
  store_.CorruptRecord(bad, "spec.gpus: not an integer");
  Start();
  EXPECT_NE(controller_->FindLive(good), nullptr);
  EXPECT_EQ(controller_->FindLive(bad), nullptr);
  EXPECT_TRUE(Logged("quarantined"));
  controller_->Tick();
  EXPECT_TRUE(launcher_.IsRunning(good, 1));
}

TEST_F(JobControllerTest, ALostIdCounterNeverReusesAnId) {
  const JobId a = Submit();
  const JobId b = Submit();
  store_.ForgetIdCounter();
  Start();
  const JobId c = Submit();
  EXPECT_GT(c, b);
  EXPECT_GT(b, a);
  EXPECT_TRUE(Stored(a));
}

TEST_F(JobControllerTest, AStartThatFailsEndsTheAttemptWithTheReason) {
  const JobId id = Submit();
  launcher_.fail_next_start =
      FailedPrecondition("cannot start the job: chdir /work failed: Permission denied");
  controller_->Tick();
  EXPECT_EQ(StoredState(id), JobState::kFailed);
  EXPECT_NE(Stored(id)->reason.find("chdir"), std::string::npos);
}

TEST_F(JobControllerTest, AnAttemptThatEndedWithNoRecordIsLost) {
  const JobId id = Submit();
  controller_->Tick();
  launcher_.End(id, 1, ProcessEnd{false, 0, false});
  controller_->Tick();
  EXPECT_EQ(StoredState(id), JobState::kLost);
}

TEST_F(JobControllerTest, QueuedJobsOfAModelThatJustRanPlanWithItsPeak) {
  api::JobEstimate estimate;
  estimate.estimator = "trace";
  estimate.peak = GiB(40);
  estimate.lower = GiB(40);
  estimate.upper = GiB(45);
  estimate.signature = "model-b32";
  auto with_estimate = [&] {
    api::SubmitRequest r = Request({"python", "train.py"}, std::nullopt);
    r.estimate = estimate;
    auto id = controller_->Submit(kAlice, r);
    EXPECT_TRUE(id.ok()) << id.status().message();
    return *id;
  };
  const JobId blocker = Submit(kBob, GiB(70));
  const JobId first = with_estimate();
  controller_->Tick();
  ASSERT_TRUE(launcher_.IsRunning(first, 1));
  const JobId second = with_estimate();  // 45 GiB fits beside neither job
  controller_->Tick();
  EXPECT_FALSE(launcher_.IsRunning(second, 1));
  // The first run's processes were seen at 20 GiB on its GPU.
  const int pid = launcher_.process(first, 1)->handle.pid;
  std::vector<DeviceSample> devices(2);
  for (auto& d : devices) d.processes.push_back(ProcessMemory{pid, GiB(20)});
  controller_->OnSample(clock_.Now(), devices);
  launcher_.Succeed(first, 1);
  controller_->Tick();
  EXPECT_EQ(Stored(first)->attempts[0].peak, GiB(20));
  const Job* refined = controller_->FindLive(second);
  ASSERT_NE(refined, nullptr);
  ASSERT_TRUE(refined->estimate->learned);
  EXPECT_EQ(refined->estimate->learned->runs, 1);
  EXPECT_EQ(refined->spec.memory.source, MemorySource::kLearned);
  EXPECT_TRUE(Logged("estimate"));
  controller_->Tick();
  EXPECT_TRUE(launcher_.IsRunning(second, 1)) << "it fits beside the blocker with what it learned";
  (void)blocker;
}

TEST_F(JobControllerTest, SmActivityIsTheUsersThenWhatRunsMeasuredThenThePrediction) {
  auto with_estimate = [&](std::optional<double> users_smact) {
    api::SubmitRequest r = Request({"python", "train.py"}, GiB(8));
    api::JobEstimate e;
    e.estimator = "trace";
    e.peak = e.lower = e.upper = GiB(8);
    e.signature = "model-b32";
    e.predicted_smact = 0.4;
    r.estimate = e;
    r.expected_smact = users_smact;
    auto id = controller_->Submit(kAlice, r);
    EXPECT_TRUE(id.ok()) << id.status().message();
    return *id;
  };
  const JobId predicted = with_estimate(std::nullopt);
  const JobId users = with_estimate(0.9);
  EXPECT_DOUBLE_EQ(controller_->FindLive(predicted)->spec.expected_smact, 0.4);
  EXPECT_DOUBLE_EQ(controller_->FindLive(users)->spec.expected_smact, 0.9);
  EXPECT_LT(controller_->FindLive(users)->estimate->predicted_smact, 0);
  controller_->Tick();
  ASSERT_TRUE(launcher_.IsRunning(predicted, 1));
  ASSERT_TRUE(launcher_.IsRunning(users, 1));
  // Each computes alone on its own GPU at 0.7.
  std::vector<DeviceSample> devices(2);
  for (int g = 0; g < 2; ++g) {
    const Job* job = controller_->FindLive(g == 0 ? predicted : users);
    const std::string& uuid = job->current()->gpu_uuids.at(0);
    const int index = uuid == "GPU-0" ? 0 : 1;
    devices[index].smact = 0.7;
    devices[index].processes.push_back(ProcessMemory{job->current()->pid, GiB(6)});
  }
  const JobId queued = with_estimate(std::nullopt);  // both GPUs are busy: it waits
  for (int i = 0; i < 5; ++i) {
    controller_->OnSample(clock_.Now(), devices);
    clock_.Advance(Seconds(1));
  }
  launcher_.Succeed(predicted, 1);
  launcher_.Succeed(users, 1);
  controller_->Tick();
  EXPECT_NEAR(Stored(predicted)->attempts[0].solo_smact, 0.7, 1e-9);
  EXPECT_NEAR(controller_->FindLive(queued)->spec.expected_smact, 0.7, 1e-9)
      << "what the runs measured replaces the prediction of a waiting job";
  const JobId later = with_estimate(std::nullopt);
  EXPECT_NEAR(controller_->FindLive(later)->spec.expected_smact, 0.7, 1e-9);
  const JobId later_users = with_estimate(0.25);
  EXPECT_DOUBLE_EQ(controller_->FindLive(later_users)->spec.expected_smact, 0.25)
      << "the user's number stands";
}

TEST_F(JobControllerTest, JobsOfAModelThatRanCountOnItsRunTimeWithoutATimeLimit) {
  auto with_estimate = [&] {
    api::SubmitRequest r = Request({"python", "train.py"}, GiB(8));
    api::JobEstimate e;
    e.estimator = "trace";
    e.peak = e.lower = e.upper = GiB(8);
    e.signature = "model-b32";
    r.estimate = e;
    auto id = controller_->Submit(kAlice, r);
    EXPECT_TRUE(id.ok()) << id.status().message();
    return *id;
  };
  const JobId first = with_estimate();
  const JobId second = with_estimate();
  EXPECT_EQ(controller_->FindLive(first)->spec.expected_run, Duration::zero());
  controller_->Tick();
  ASSERT_TRUE(launcher_.IsRunning(first, 1));
  clock_.Advance(Seconds(600));
  launcher_.Succeed(first, 1);
  controller_->Tick();
  const JobRecord* record = controller_->scheduler().job(second);
  ASSERT_NE(record, nullptr);
  EXPECT_EQ(record->spec.expected_run, Seconds(600))
      << "a waiting or running job of the model counts on how long its run took";
  EXPECT_EQ(controller_->FindLive(second)->spec.expected_run, Seconds(600));
  const JobId later = with_estimate();
  EXPECT_EQ(controller_->FindLive(later)->spec.expected_run, Seconds(600)) << "learned at submit";
  EXPECT_EQ(Stored(later)->spec.expected_run, Seconds(600)) << "and stored with the job";
  EXPECT_EQ(controller_->scheduler().job(later)->spec.expected_run, Seconds(600));
}

TEST_F(JobControllerTest, OnlyTheGpusRunningJobsHaveTheirProcessesReadAndAnUnreadListKeepsTheUse) {
  const JobId id = Submit();
  EXPECT_EQ(controller_->GpusRunningJobs(), std::vector<bool>({false, false}));
  controller_->Tick();
  ASSERT_TRUE(launcher_.IsRunning(id, 1));
  const int gpu = controller_->FindLive(id)->current()->gpu_uuids.at(0) == "GPU-0" ? 0 : 1;
  std::vector<bool> busy(2, false);
  busy[static_cast<size_t>(gpu)] = true;
  EXPECT_EQ(controller_->GpusRunningJobs(), busy);
  std::vector<DeviceSample> devices(2);
  devices[static_cast<size_t>(gpu)].processes.push_back(
      ProcessMemory{launcher_.process(id, 1)->handle.pid, GiB(6)});
  controller_->OnSample(clock_.Now(), devices);
  const JobRecord* record = controller_->scheduler().job(id);
  ASSERT_NE(record, nullptr);
  EXPECT_EQ(record->current_use.at(0), GiB(6));
  // A sample that did not list the GPU's processes (taken as the job started, or the query
  // failed) says nothing of the job's use: it stays as last seen, not 0.
  for (auto& d : devices) {
    d.processes.clear();
    d.processes_read = false;
  }
  clock_.Advance(Seconds(1));
  controller_->OnSample(clock_.Now(), devices);
  EXPECT_EQ(record->current_use.at(0), GiB(6));
  // A list read without the job's processes: it no longer uses the GPU.
  for (auto& d : devices) d.processes_read = true;
  clock_.Advance(Seconds(1));
  controller_->OnSample(clock_.Now(), devices);
  EXPECT_EQ(record->current_use.at(0), Bytes(0));
  launcher_.Succeed(id, 1);
  controller_->Tick();
  EXPECT_EQ(controller_->GpusRunningJobs(), std::vector<bool>({false, false}));
}

// --- Slurm tenants: Slurm runs the processes; colod places them and watches for their end. ---

TenantRequest Tenant(uint32_t slurm_job, std::optional<Bytes> memory = GiB(30), int restarts = 0) {
  TenantRequest t;
  t.slurm_job = slurm_job;
  t.owner = kAlice;
  t.name = "train";
  t.memory = memory;
  t.restarts = restarts;
  return t;
}

std::string EnvValue(const std::vector<std::string>& env, const std::string& name) {
  for (const std::string& e : env) {
    if (e.rfind(name + "=", 0) == 0) return e.substr(name.size() + 1);
  }
  return "";
}

TEST_F(JobControllerTest, ASlurmJobIsPlacedAtOnceAndEveryStepGetsTheSamePlacement) {
  auto first = controller_->AttachTenant(Tenant(501));
  ASSERT_TRUE(first.ok()) << first.status().message();
  EXPECT_EQ(first->state, api::SlurmPlacement::kPlaced) << first->reason;
  const std::string visible = EnvValue(first->env, "CUDA_VISIBLE_DEVICES");
  EXPECT_TRUE(visible == "GPU-0" || visible == "GPU-1") << visible;
  EXPECT_EQ(EnvValue(first->env, "COLO_GPU_MEMORY"), std::to_string(GiB(30).count()));
  auto step = controller_->AttachTenant(Tenant(501));
  ASSERT_TRUE(step.ok());
  EXPECT_EQ(step->job, first->job);
  EXPECT_EQ(step->env, first->env);
  EXPECT_EQ(controller_->live_jobs().size(), 1u) << "a step is not a second job";
  EXPECT_FALSE(launcher_.IsRunning(first->job, 1)) << "colod starts no process for Slurm";
  auto stored = Stored(first->job);
  ASSERT_TRUE(stored && stored->external);
  EXPECT_EQ(stored->external->id, 501u);
  EXPECT_EQ(stored->state, JobState::kRunning) << "the placement is stored before it is given";
  // The batch script ends well: the GPUs are free, the record says so.
  EXPECT_EQ(controller_->EndTenant(501, AttemptEnd{ProcessEnd{true, 0, true}, "", ""}), first->job);
  EXPECT_EQ(StoredState(first->job), JobState::kSucceeded);
  EXPECT_EQ(controller_->FindTenant(501), nullptr);
  EXPECT_TRUE(Handbacks().empty());
}

TEST_F(JobControllerTest, AnOutOfMemoryCrashGivesTheSlurmJobBackNeedingMore) {
  auto placed = controller_->AttachTenant(Tenant(502, GiB(10)));
  ASSERT_TRUE(placed.ok() && placed->state == api::SlurmPlacement::kPlaced);
  controller_->EndTenant(502, AttemptEnd{ProcessEnd{true, 1, true},
                                         "torch.OutOfMemoryError: CUDA out of memory. Tried to "
                                         "allocate 2.00 GiB",
                                         ""});
  ASSERT_EQ(Handbacks().size(), 1u);
  EXPECT_EQ(Handbacks()[0].slurm_job, 502u);
  EXPECT_GT(Handbacks()[0].need, GiB(10)) << "the next run plans with a larger need";
  EXPECT_EQ(Handbacks()[0].ooms, 1);
  EXPECT_FALSE(Handbacks()[0].avoid_this_node) << "any node may run it again";
  EXPECT_EQ(StoredState(placed->job), JobState::kRequeued);
  // A step of the run that crashed still asking learns it, and starts nothing.
  auto late = controller_->AttachTenant(Tenant(502, GiB(10)));
  ASSERT_TRUE(late.ok());
  EXPECT_EQ(late->state, api::SlurmPlacement::kRequeue);
  // Slurm's next run (restart 1) comes with what the crash taught, from the job's record.
  TenantRequest next = Tenant(502, GiB(10), 1);
  next.raised_need = Handbacks()[0].need;
  next.earlier_ooms = Handbacks()[0].ooms;
  auto rerun = controller_->AttachTenant(next);
  ASSERT_TRUE(rerun.ok()) << rerun.status().message();
  EXPECT_EQ(rerun->state, api::SlurmPlacement::kPlaced);
  EXPECT_NE(rerun->job, placed->job);
  EXPECT_EQ(EnvValue(rerun->env, "COLO_GPU_MEMORY"), std::to_string(Handbacks()[0].need.count()));
}

TEST_F(JobControllerTest, TheRetryCapCountsOutOfMemoryCrashesOfEveryRun) {
  TenantRequest request = Tenant(503, GiB(10), 7);
  request.earlier_ooms = config_.max_oom_retries;
  auto placed = controller_->AttachTenant(request);
  ASSERT_TRUE(placed.ok() && placed->state == api::SlurmPlacement::kPlaced);
  controller_->EndTenant(
      503, AttemptEnd{ProcessEnd{true, 1, true}, "RuntimeError: CUDA out of memory.", ""});
  EXPECT_TRUE(Handbacks().empty()) << "past the cap the job fails rather than run again";
  EXPECT_EQ(StoredState(placed->job), JobState::kFailed);
}

TEST_F(JobControllerTest, ASlurmJobThatCannotBePlacedInTimeGoesToAnotherNode) {
  config_.launch_grace = Seconds(30);  // as colod's: a placement blocks its GPU a while
  Start();
  // Two whole-GPU jobs from Slurm take both GPUs.
  ASSERT_EQ(controller_->AttachTenant(Tenant(510, std::nullopt))->state,
            api::SlurmPlacement::kPlaced);
  ASSERT_EQ(controller_->AttachTenant(Tenant(511, std::nullopt))->state,
            api::SlurmPlacement::kPlaced);
  auto waiting = controller_->AttachTenant(Tenant(512, GiB(4)));
  ASSERT_TRUE(waiting.ok());
  EXPECT_EQ(waiting->state, api::SlurmPlacement::kWaiting)
      << "nothing shares a GPU Slurm gave a job whole";
  clock_.Advance(Seconds(59));
  Turn();
  EXPECT_TRUE(Handbacks().empty());
  ASSERT_TRUE(controller_->NextWakeup());
  clock_.Advance(Seconds(2));
  Turn();
  ASSERT_EQ(Handbacks().size(), 1u);
  EXPECT_EQ(Handbacks()[0].slurm_job, 512u);
  EXPECT_TRUE(Handbacks()[0].avoid_this_node);
  EXPECT_NE(Handbacks()[0].reason.find("within 60 s"), std::string::npos) << Handbacks()[0].reason;
  auto asked = controller_->AttachTenant(Tenant(512, GiB(4)));
  ASSERT_TRUE(asked.ok());
  EXPECT_EQ(asked->state, api::SlurmPlacement::kRequeue);
  EXPECT_NE(asked->reason.find("given back to Slurm"), std::string::npos) << asked->reason;
  // What was given back left this node's queue too: once the whole-GPU jobs end, nothing
  // keeps a GPU for it, and the next jobs take both GPUs at once.
  const JobRecord* record = scheduler_->job(waiting->job);
  EXPECT_TRUE(!record || IsTerminal(record->state))
      << "still " << (record ? ToString(record->state) : "") << " in the scheduler";
  clock_.Advance(Seconds(31));
  controller_->EndTenant(510, AttemptEnd{ProcessEnd{true, 0, true}, "", ""});
  controller_->EndTenant(511, AttemptEnd{ProcessEnd{true, 0, true}, "", ""});
  Turn();
  for (uint32_t slurm_job : {513u, 514u}) {
    auto next = controller_->AttachTenant(Tenant(slurm_job, GiB(70)));
    ASSERT_TRUE(next.ok()) << next.status().message();
    EXPECT_EQ(next->state, api::SlurmPlacement::kPlaced) << slurm_job << ": " << next->reason;
  }
}

TEST_F(JobControllerTest, SlurmHearsOfAGiveBackOnlyOnceItIsStored) {
  // Else a restart before the store heals would queue the job here again while Slurm runs it
  // elsewhere.
  auto placed = controller_->AttachTenant(Tenant(530, GiB(10)));
  ASSERT_TRUE(placed.ok() && placed->state == api::SlurmPlacement::kPlaced);
  store_.FailAllWrites(Unavailable("disk full"));
  controller_->EndTenant(530, AttemptEnd{ProcessEnd{true, 1, true},
                                         "torch.OutOfMemoryError: CUDA out of memory.", ""});
  EXPECT_TRUE(Handbacks().empty());
  EXPECT_TRUE(controller_->HandBackUnsent(placed->job));
  Turn();
  EXPECT_TRUE(Handbacks().empty()) << "still not stored";
  store_.HealWrites();
  clock_.Advance(Seconds(2));
  Turn();
  ASSERT_EQ(Handbacks().size(), 1u);
  EXPECT_EQ(Handbacks()[0].slurm_job, 530u);
  EXPECT_FALSE(controller_->HandBackUnsent(placed->job));
  EXPECT_EQ(StoredState(placed->job), JobState::kRequeued);
  EXPECT_EQ(controller_->FindTenant(530), nullptr);
}

TEST_F(JobControllerTest, AnEarlierRunStoredLateLeavesTheNextRunOfTheSameSlurmJobAlone) {
  auto first = controller_->AttachTenant(Tenant(531, GiB(10)));
  ASSERT_TRUE(first.ok() && first->state == api::SlurmPlacement::kPlaced);
  store_.FailWrites(1, Unavailable("disk full"));
  controller_->EndTenant(531, AttemptEnd{ProcessEnd{true, 1, true}, "", ""});
  ASSERT_TRUE(controller_->has_unsaved());
  // Slurm runs the job again (an administrator's requeue) before the first run's end is stored.
  auto second = controller_->AttachTenant(Tenant(531, GiB(10), 1));
  ASSERT_TRUE(second.ok()) << second.status().message();
  ASSERT_EQ(second->state, api::SlurmPlacement::kPlaced) << second->reason;
  clock_.Advance(Seconds(2));
  Turn();  // the first run's end is stored now, and that run forgotten
  EXPECT_FALSE(controller_->has_unsaved());
  EXPECT_EQ(StoredState(first->job), JobState::kFailed);
  const Job* tenant = controller_->FindTenant(531);
  ASSERT_NE(tenant, nullptr) << "the second run is still Slurm job 531's";
  EXPECT_EQ(tenant->id(), second->job);
  EXPECT_EQ(controller_->EndTenant(531, AttemptEnd{ProcessEnd{true, 0, true}, "", ""}),
            second->job);
  EXPECT_EQ(StoredState(second->job), JobState::kSucceeded);
  const JobRecord* record = scheduler_->job(second->job);
  EXPECT_TRUE(!record || IsTerminal(record->state)) << "its GPUs are free again";
}

TEST_F(JobControllerTest, ASlurmJobThatCanNeverFitThisNodeIsRefusedWithTheReason) {
  auto refused = controller_->AttachTenant(Tenant(520, GiB(200)));
  ASSERT_TRUE(refused.ok());
  EXPECT_EQ(refused->state, api::SlurmPlacement::kFailed);
  EXPECT_NE(refused->reason.find("80.0 GiB"), std::string::npos) << refused->reason;
  EXPECT_TRUE(controller_->live_jobs().empty());
}

TEST_F(JobControllerTest, SlurmJobsAreTakenBackAfterARestartAndCannotBeCancelledThroughColo) {
  auto placed = controller_->AttachTenant(Tenant(530));
  ASSERT_TRUE(placed.ok() && placed->state == api::SlurmPlacement::kPlaced);
  ASSERT_EQ(controller_->AttachTenant(Tenant(531, std::nullopt))->state,
            api::SlurmPlacement::kPlaced);
  auto waiting = controller_->AttachTenant(Tenant(532, GiB(60)));
  ASSERT_EQ(waiting->state, api::SlurmPlacement::kWaiting);
  Start();  // colod restarts while Slurm's jobs run
  auto again = controller_->AttachTenant(Tenant(530));
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->state, api::SlurmPlacement::kPlaced);
  EXPECT_EQ(again->job, placed->job);
  EXPECT_EQ(again->env, placed->env) << "the same GPUs as before the restart";
  EXPECT_EQ(controller_->AttachTenant(Tenant(532, GiB(60)))->state, api::SlurmPlacement::kWaiting)
      << "a waiting one waits again, still behind the GPUs the others hold";
  auto cancel = controller_->Cancel(kAlice, placed->job);
  ASSERT_FALSE(cancel.ok());
  EXPECT_NE(cancel.status().message().find("scancel 530"), std::string::npos);
  // The whole-GPU job ends: the waiting one gets its GPU.
  controller_->EndTenant(531, AttemptEnd{ProcessEnd{true, 0, true}, "", ""});
  Turn();
  EXPECT_EQ(controller_->AttachTenant(Tenant(532, GiB(60)))->state, api::SlurmPlacement::kPlaced);
}

TEST_F(JobControllerTest, ARunColodNeverHeardEndIsClosedWhenSlurmStartsTheJobAgain) {
  auto placed = controller_->AttachTenant(Tenant(540, GiB(10), 0));
  ASSERT_TRUE(placed.ok() && placed->state == api::SlurmPlacement::kPlaced);
  auto rerun = controller_->AttachTenant(Tenant(540, GiB(10), 1));
  ASSERT_TRUE(rerun.ok());
  EXPECT_EQ(rerun->state, api::SlurmPlacement::kPlaced);
  EXPECT_NE(rerun->job, placed->job);
  EXPECT_EQ(StoredState(placed->job), JobState::kLost);
  EXPECT_EQ(controller_->live_jobs().size(), 1u);
}

// --- Slurm habits: time limits, dependencies, hold, release, requeue ---

TEST_F(JobControllerTest, ATimeLimitSignalsTheJobAndItEndsAsTimeout) {
  launcher_.ignores_sigterm = true;
  api::SubmitRequest r = Request({"python", "train.py"});
  r.time_limit_s = 60;
  auto id = controller_->Submit(kAlice, r);
  ASSERT_TRUE(id.ok());
  controller_->Tick();
  ASSERT_TRUE(launcher_.IsRunning(*id, 1));
  clock_.Advance(Seconds(59));
  controller_->Tick();
  EXPECT_TRUE(launcher_.process(*id, 1)->signals.empty());
  clock_.Advance(Seconds(1));
  controller_->Tick();
  EXPECT_EQ(launcher_.process(*id, 1)->signals, std::vector<int>{SIGTERM});
  EXPECT_TRUE(Stored(*id)->timed_out) << "stored, so that a restart still knows";
  clock_.Advance(Seconds(30));  // the timeout grace
  controller_->Tick();
  controller_->Tick();
  EXPECT_EQ(StoredState(*id), JobState::kTimeout);
  EXPECT_EQ(Stored(*id)->current()->exit, ExitKind::kTimeout);
  EXPECT_EQ(Stored(*id)->current()->exit_signal, SIGKILL);
  EXPECT_NE(Stored(*id)->reason.find("time limit of 00:01:00"), std::string::npos);
}

TEST_F(JobControllerTest, ASignalComesItsLeadBeforeTheTimeLimit) {
  launcher_.signal_ends = false;  // it saves what it has and runs on
  api::SubmitRequest r = Request({"python", "train.py"});
  r.time_limit_s = 300;
  r.context.signal = api::JobSignal{SIGUSR1, 120};
  auto id = controller_->Submit(kAlice, r);
  ASSERT_TRUE(id.ok());
  controller_->Tick();
  clock_.Advance(Seconds(179));
  controller_->Tick();
  EXPECT_TRUE(launcher_.process(*id, 1)->signals.empty());
  clock_.Advance(Seconds(1));
  controller_->Tick();
  EXPECT_EQ(launcher_.process(*id, 1)->signals, std::vector<int>{SIGUSR1});
  EXPECT_TRUE(Logged("signal"));
  clock_.Advance(Seconds(120));
  controller_->Tick();
  EXPECT_EQ(launcher_.process(*id, 1)->signals, (std::vector<int>{SIGUSR1, SIGTERM}));
}

TEST_F(JobControllerTest, ATimeLimitCountsFromTheAttemptsStartAcrossARestart) {
  api::SubmitRequest r = Request({"python", "train.py"});
  r.time_limit_s = 100;
  auto id = controller_->Submit(kAlice, r);
  ASSERT_TRUE(id.ok());
  controller_->Tick();
  clock_.Advance(Seconds(60));
  Start();
  clock_.Advance(Seconds(39));
  controller_->Tick();
  EXPECT_TRUE(launcher_.process(*id, 1)->signals.empty());
  clock_.Advance(Seconds(1));
  controller_->Tick();
  controller_->Tick();
  EXPECT_EQ(StoredState(*id), JobState::kTimeout);
}

TEST_F(JobControllerTest, DependenciesWaitOutsideTheQueueAndOneNeverMetCancels) {
  const JobId first = Submit();
  api::SubmitRequest ok = Request({"python", "next.py"});
  ok.dependencies = {{api::DependencyKind::kAfterOk, first}};
  api::SubmitRequest notok = Request({"python", "cleanup.py"});
  notok.dependencies = {{api::DependencyKind::kAfterNotOk, first}};
  auto after_ok = controller_->Submit(kAlice, ok);
  auto after_notok = controller_->Submit(kAlice, notok);
  ASSERT_TRUE(after_ok.ok() && after_notok.ok());
  api::SubmitRequest unknown = Request({"true"});
  unknown.dependencies = {{api::DependencyKind::kAfterAny, 999}};
  EXPECT_EQ(controller_->Submit(kAlice, unknown).status().code(), StatusCode::kInvalidArgument);
  controller_->Tick();
  ASSERT_TRUE(launcher_.IsRunning(first, 1));
  EXPECT_EQ(scheduler_->job(*after_ok), nullptr) << "not in the scheduler's queue";
  EXPECT_NE(controller_->HeldReason(*controller_->FindLive(*after_ok)).find("afterok"),
            std::string::npos);
  Start();  // dependencies are stored
  EXPECT_EQ(scheduler_->job(*after_ok), nullptr);
  launcher_.Succeed(first, 1);
  controller_->Tick();
  controller_->Tick();
  EXPECT_TRUE(launcher_.IsRunning(*after_ok, 1));
  EXPECT_EQ(StoredState(*after_notok), JobState::kCancelled);
  EXPECT_NE(Stored(*after_notok)->reason.find("DependencyNeverSatisfied"), std::string::npos);
}

TEST_F(JobControllerTest, HoldAndReleaseAreStoredBeforeActingAndOnlyForWaitingJobs) {
  const JobId a = Submit(kAlice, GiB(70));
  const JobId b = Submit(kAlice, GiB(70));
  const JobId waiting = Submit(kAlice, GiB(70));
  controller_->Tick();
  EXPECT_EQ(controller_->Control(kBob, api::JobAction::kHold, waiting).status().code(),
            StatusCode::kPermissionDenied);
  EXPECT_EQ(controller_->Control(kAlice, api::JobAction::kHold, a).status().code(),
            StatusCode::kFailedPrecondition);
  store_.FailWrites(1, Unavailable("disk full"));
  EXPECT_EQ(controller_->Control(kAlice, api::JobAction::kHold, waiting).status().code(),
            StatusCode::kUnavailable);
  EXPECT_NE(scheduler_->job(waiting), nullptr);
  auto held = controller_->Control(kAlice, api::JobAction::kHold, waiting);
  ASSERT_TRUE(held.ok());
  EXPECT_EQ(*held, "held");
  EXPECT_EQ(scheduler_->job(waiting), nullptr);
  launcher_.Succeed(a, 1);
  controller_->Tick();
  EXPECT_FALSE(launcher_.IsRunning(waiting, 1)) << "a held job does not start";
  Start();
  EXPECT_TRUE(controller_->FindLive(waiting)->held);
  controller_->Tick();
  EXPECT_FALSE(launcher_.IsRunning(waiting, 1));
  auto released = controller_->Control(kRoot, api::JobAction::kRelease, waiting);
  ASSERT_TRUE(released.ok());
  controller_->Tick();
  EXPECT_TRUE(launcher_.IsRunning(waiting, 1));
  (void)b;
}

TEST_F(JobControllerTest, WaitingJobsNamedInOneRequestAreCancelledInOneWrite) {
  const JobId a = Submit(kAlice, GiB(70));
  Submit(kAlice, GiB(70));
  std::vector<JobId> waiting;
  for (int i = 0; i < 3; ++i) waiting.push_back(Submit(kAlice, GiB(70)));
  controller_->Tick();
  ASSERT_TRUE(launcher_.IsRunning(a, 1));
  // One transaction for all of them (a thousand named jobs cost one write, not a thousand): a
  // failed write cancels none.
  store_.FailWrites(1, Unavailable("disk full"));
  for (const auto& cancelled :
       controller_->ControlMany(kAlice, api::JobAction::kCancel, waiting, true))
    EXPECT_EQ(cancelled.status().code(), StatusCode::kUnavailable);
  for (JobId id : waiting) {
    EXPECT_EQ(controller_->FindLive(id)->state, JobState::kQueued);
    EXPECT_NE(scheduler_->job(id), nullptr);
  }
  // Running, waiting, twice named and unknown jobs in one request: each answered as it is.
  const std::vector<JobId> ids = {a, waiting[0], 999, waiting[1], waiting[0], waiting[2]};
  const auto results = controller_->ControlMany(kAlice, api::JobAction::kCancel, ids, true);
  ASSERT_EQ(results.size(), ids.size());
  EXPECT_EQ(*results[0], "cancelling");
  EXPECT_EQ(results[2].status().code(), StatusCode::kNotFound);
  for (size_t i : {1, 3, 4, 5}) {
    ASSERT_TRUE(results[i].ok()) << i << ": " << results[i].status().message();
    EXPECT_EQ(*results[i], "cancelled");
  }
  for (JobId id : waiting) {
    EXPECT_EQ(StoredState(id), JobState::kCancelled);
    EXPECT_EQ(scheduler_->job(id), nullptr);
  }
  EXPECT_TRUE(scheduler_->main_queue().empty());
  EXPECT_EQ(scheduler_->WaitingOf(kAlice.user), 0);
  EXPECT_TRUE(Stored(a)->cancel_requested);
}

TEST_F(JobControllerTest, ManyJobsAreHeldInOneWriteAndAReleaseStormIsTakenInSlices) {
  const JobId first = Submit();
  controller_->Tick();
  ASSERT_TRUE(launcher_.IsRunning(first, 1));
  std::vector<JobId> dependents;
  for (int i = 0; i < 600; ++i) {
    api::SubmitRequest r = Request({"python", "next.py"});
    r.dependencies = {{api::DependencyKind::kAfterOk, first}};
    auto id = controller_->Submit(kAlice, r);
    ASSERT_TRUE(id.ok());
    dependents.push_back(*id);
  }
  // One transaction for all of them: a failed write holds none.
  store_.FailWrites(1, Unavailable("disk full"));
  for (const auto& held : controller_->ControlMany(kAlice, api::JobAction::kHold, dependents, true))
    EXPECT_EQ(held.status().code(), StatusCode::kUnavailable);
  EXPECT_FALSE(controller_->FindLive(dependents.front())->held);
  for (const auto& held :
       controller_->ControlMany(kAlice, api::JobAction::kHold, dependents, true)) {
    ASSERT_TRUE(held.ok());
    EXPECT_EQ(*held, "held");
  }
  EXPECT_TRUE(Stored(dependents.back())->held);
  for (const auto& released :
       controller_->ControlMany(kAlice, api::JobAction::kRelease, dependents, true)) {
    ASSERT_TRUE(released.ok());
    EXPECT_EQ(*released, "waiting for its dependencies");
  }
  // Their dependency met, 256 are taken a turn, and colod's loop is asked back at once.
  launcher_.Succeed(first, 1);
  const auto met = [&] {
    return std::count_if(dependents.begin(), dependents.end(), [&](JobId id) {
      const Job* job = controller_->FindLive(id);
      return !job || job->dependencies.empty();
    });
  };
  controller_->Tick();
  EXPECT_EQ(met(), 256);
  EXPECT_EQ(controller_->NextWakeup(), clock_.Now());
  controller_->Tick();
  EXPECT_EQ(met(), 512);
  controller_->Tick();
  EXPECT_EQ(met(), 600);
  EXPECT_TRUE(Stored(dependents.back())->dependencies.empty()) << "stored too";
}

TEST_F(JobControllerTest, RequeueRunsARunningJobAgainAndAnEndedOneWithAMinimalEnvironment) {
  const JobId id = Submit();
  controller_->Tick();
  auto requeued = controller_->Control(kAlice, api::JobAction::kRequeue, id);
  ASSERT_TRUE(requeued.ok());
  EXPECT_EQ(*requeued, "requeueing");
  EXPECT_TRUE(Stored(id)->requeue_requested);
  controller_->Tick();  // its end: queued again, and placed
  EXPECT_TRUE(launcher_.IsRunning(id, 2));
  EXPECT_EQ(Stored(id)->attempts.front().exit, ExitKind::kCancelled);
  const auto& kept = launcher_.process(id, 2)->spec.env;
  EXPECT_EQ(std::count(kept.begin(), kept.end(), "SECRET=hunter2"), 1) << "its environment kept";
  launcher_.Succeed(id, 2);
  controller_->Tick();
  EXPECT_EQ(StoredState(id), JobState::kSucceeded);
  EXPECT_EQ(controller_->Control(kBob, api::JobAction::kRequeue, id).status().code(),
            StatusCode::kPermissionDenied);
  auto again = controller_->Control(kAlice, api::JobAction::kRequeue, id);
  ASSERT_TRUE(again.ok()) << again.status().message();
  controller_->Tick();
  ASSERT_TRUE(launcher_.IsRunning(id, 3));
  const auto& env = launcher_.process(id, 3)->spec.env;
  EXPECT_EQ(std::count(env.begin(), env.end(), "SECRET=hunter2"), 0);
  EXPECT_EQ(std::count(env.begin(), env.end(), "USER=alice"), 1);
}

TEST_F(JobControllerTest, ACancelWhileARequeueStopsTheJobEndsItForGood) {
  const JobId id = Submit();
  controller_->Tick();
  launcher_.ignores_sigterm = true;
  ASSERT_EQ(*controller_->Control(kAlice, api::JobAction::kRequeue, id), "requeueing");
  auto cancelled = controller_->Cancel(kAlice, id);
  ASSERT_TRUE(cancelled.ok()) << cancelled.status().message();
  EXPECT_EQ(*cancelled, "cancelling");
  EXPECT_TRUE(Stored(id)->cancel_requested);
  EXPECT_EQ(controller_->Control(kAlice, api::JobAction::kRequeue, id).status().code(),
            StatusCode::kFailedPrecondition)
      << "a job being cancelled is not queued again";
  clock_.Advance(Seconds(11));
  controller_->Tick();  // SIGKILL
  controller_->Tick();  // its end
  EXPECT_EQ(StoredState(id), JobState::kCancelled) << "the cancel wins over the requeue";
  EXPECT_FALSE(launcher_.IsRunning(id, 2));
  EXPECT_EQ(scheduler_->job(id), nullptr);
}

TEST_F(JobControllerTest, AnArrayIsOneJobPerTaskCappedAndCancelledByItsId) {
  api::SubmitRequest r = Request({"python", "train.py"}, GiB(1));
  r.name = "sweep-%A_%a";
  r.array = api::ArraySpec{{0, 2, 4, 6}, 2};
  auto array = controller_->Submit(kAlice, r);
  ASSERT_TRUE(array.ok()) << array.status().message();
  controller_->Tick();
  std::vector<JobId> running;
  for (JobId id = *array; id < *array + 4; ++id) {
    const Job* task = controller_->FindLive(id);
    ASSERT_NE(task, nullptr);
    ASSERT_TRUE(task->array);
    EXPECT_EQ(task->array->job, *array);
    EXPECT_EQ(task->spec.name, fmt::format("sweep-{}_{}", *array, task->array->task));
    if (launcher_.IsRunning(id, 1)) running.push_back(id);
  }
  ASSERT_EQ(running, (std::vector<JobId>{*array, *array + 1})) << "%2: two at once, in order";
  const auto& env = launcher_.process(*array + 1, 1)->spec.env;
  EXPECT_EQ(std::count(env.begin(), env.end(), fmt::format("COLO_ARRAY_JOB_ID={}", *array)), 1);
  EXPECT_EQ(std::count(env.begin(), env.end(), "COLO_ARRAY_TASK_ID=2"), 1);
  launcher_.Succeed(*array, 1);
  controller_->Tick();
  controller_->Tick();
  EXPECT_TRUE(launcher_.IsRunning(*array + 2, 1)) << "the next task takes the free place";
  EXPECT_FALSE(launcher_.IsRunning(*array + 3, 1));
  Start();  // the cap survives a restart
  controller_->Tick();
  EXPECT_FALSE(launcher_.IsRunning(*array + 3, 1));
  EXPECT_EQ(controller_->Cancel(kBob, *array).status().code(), StatusCode::kPermissionDenied);
  auto cancelled = controller_->Cancel(kAlice, *array);
  ASSERT_TRUE(cancelled.ok()) << cancelled.status().message();
  controller_->Tick();
  controller_->Tick();
  for (JobId id = *array + 1; id < *array + 4; ++id)
    EXPECT_EQ(StoredState(id), JobState::kCancelled) << id;
  EXPECT_EQ(StoredState(*array), JobState::kSucceeded);
}

TEST_F(JobControllerTest, AnArrayIsBoundedAndStoredWholeOrNotAtAll) {
  api::SubmitRequest r = Request({"true"}, GiB(1));
  r.array = api::ArraySpec{};
  for (int t = 0; t < 1001; ++t) r.array->tasks.push_back(t);
  EXPECT_EQ(controller_->Submit(kAlice, r).status().code(), StatusCode::kInvalidArgument);
  r.array->tasks = {0, 1, 2};
  // The ids are handed out, then storing the tasks fails: none of them is stored, and the ids
  // are never handed out again.
  store_.FailWrites(1, Unavailable("disk full"), /*succeed_first=*/1);
  auto failed = controller_->Submit(kAlice, r);
  ASSERT_FALSE(failed.ok());
  EXPECT_EQ(failed.status().code(), StatusCode::kUnavailable);
  EXPECT_NE(failed.status().message().find("disk full"), std::string::npos);
  for (JobId id : {1, 2, 3}) EXPECT_FALSE(store_.Find(id)->has_value()) << id;
  // Handing out the ids fails: nothing is stored either.
  store_.FailWrites(1, Unavailable("disk full"));
  EXPECT_EQ(controller_->Submit(kAlice, r).status().code(), StatusCode::kUnavailable);
  controller_->Tick();
  EXPECT_TRUE(controller_->live_jobs().empty());
  EXPECT_FALSE(launcher_.IsRunning(1, 1));
  // Then it is stored whole, above the ids the failed try took.
  auto array = controller_->Submit(kAlice, r);
  ASSERT_TRUE(array.ok()) << array.status().message();
  EXPECT_EQ(*array, 4);
  for (JobId id : {4, 5, 6}) EXPECT_EQ(StoredState(id), JobState::kQueued) << id;
  EXPECT_EQ(controller_->live_jobs().size(), 3u);
}

// Preemption: Alice fills both GPUs with --requeue jobs, Bob (under his share) waits past
// preempt_after.
class PreemptionTest : public JobControllerTest {
 protected:
  PreemptionTest() {
    config_.fairness.order = QueueOrder::kFairShare;
    config_.fairness.preempt = true;
    config_.fairness.preempt_after = Seconds(600);
    Start();
  }
  JobId SubmitPreemptible(const Identity& who, int signal = SIGUSR1, int lead_s = 30) {
    api::SubmitRequest r = Request({"python", "train.py"}, GiB(70));
    r.context.requeue = true;
    r.context.signal = api::JobSignal{signal, lead_s};
    auto id = controller_->Submit(who, r);
    EXPECT_TRUE(id.ok()) << id.status().message();
    return id.ok() ? *id : 0;
  }
  // Alice's two jobs run on both GPUs; Bob's has waited preempt_after: returns Bob's.
  JobId BobWaitsPastPreemptAfter() {
    controller_->Tick();
    EXPECT_TRUE(launcher_.IsRunning(first_, 1));
    EXPECT_TRUE(launcher_.IsRunning(second_, 1));
    clock_.Advance(Seconds(60));
    const JobId bob = Submit(kBob, GiB(70));
    controller_->Tick();
    clock_.Advance(Seconds(600));
    return bob;
  }
  static bool HasEnv(const FakeLauncher::Process& p, const std::string& entry) {
    return std::find(p.spec.env.begin(), p.spec.env.end(), entry) != p.spec.env.end();
  }
  JobId first_ = 0, second_ = 0;
};

TEST_F(PreemptionTest, ARequeueJobGetsItsSignalStoredFirstThenSigkillAndRunsAgainWithItsCount) {
  first_ = SubmitPreemptible(kAlice);
  second_ = SubmitPreemptible(kAlice);
  const JobId bob = BobWaitsPastPreemptAfter();
  launcher_.ignores_sigterm = true;  // it ignores its signal: SIGKILL ends it

  // A preemption that cannot be stored is not carried out: the job runs on, untouched.
  store_.FailWrites(1, Unavailable("disk full"));
  controller_->Tick();
  EXPECT_TRUE(launcher_.process(first_, 1)->signals.empty());
  EXPECT_TRUE(launcher_.process(second_, 1)->signals.empty());
  EXPECT_TRUE(Logged("store-error"));

  controller_->Tick();  // tried again
  const auto signalled = [&](JobId id) { return !launcher_.process(id, 1)->signals.empty(); };
  ASSERT_NE(signalled(first_), signalled(second_)) << "one job makes the room Bob needs";
  const JobId victim = signalled(first_) ? first_ : second_;
  const JobId other = victim == first_ ? second_ : first_;
  EXPECT_EQ(launcher_.process(victim, 1)->signals, std::vector<int>{SIGUSR1});
  const std::optional<Job> stored = Stored(victim);
  ASSERT_TRUE(stored->preemption.has_value()) << "stored before the signal";
  EXPECT_EQ(stored->preemption->for_job, bob);
  EXPECT_NE(stored->preemption->reason.find(fmt::format("for job {} of bob", bob)),
            std::string::npos)
      << stored->preemption->reason;
  EXPECT_TRUE(Logged("preempting"));

  clock_.Advance(Seconds(29));
  controller_->Tick();
  EXPECT_EQ(launcher_.process(victim, 1)->signals, std::vector<int>{SIGUSR1});
  clock_.Advance(Seconds(1));
  controller_->Tick();  // SIGKILL at the end of its notice
  controller_->Tick();  // its end; Bob's job starts
  EXPECT_EQ(launcher_.process(victim, 1)->signals, (std::vector<int>{SIGUSR1, SIGKILL}));
  const std::optional<Job> requeued = Stored(victim);
  EXPECT_EQ(requeued->state, JobState::kQueued);
  EXPECT_FALSE(requeued->preemption.has_value());
  EXPECT_EQ(requeued->current()->exit, ExitKind::kPreempted);
  EXPECT_EQ(requeued->current()->exit_signal, SIGKILL);
  EXPECT_NE(requeued->current()->detail.find(fmt::format("preempted for job {}", bob)),
            std::string::npos);
  EXPECT_EQ(OutOfMemoryAttempts(*requeued), 0) << "no out-of-memory retry";
  EXPECT_TRUE(launcher_.IsRunning(bob, 1));
  EXPECT_TRUE(launcher_.IsRunning(other, 1));
  EXPECT_TRUE(launcher_.process(other, 1)->signals.empty());

  // Its next attempt, once Bob's ends: its environment kept, its restart counted.
  launcher_.Succeed(bob, 1);
  controller_->Tick();
  controller_->Tick();
  ASSERT_TRUE(launcher_.IsRunning(victim, 2));
  const FakeLauncher::Process& again = *launcher_.process(victim, 2);
  EXPECT_TRUE(HasEnv(again, "COLO_RESTART_COUNT=1"));
  EXPECT_TRUE(HasEnv(again, "COLO_ATTEMPT=2"));
  EXPECT_TRUE(HasEnv(again, "SECRET=hunter2"));
  EXPECT_TRUE(HasEnv(*launcher_.process(other, 1), "COLO_RESTART_COUNT=0"));
  launcher_.Succeed(victim, 2);
  controller_->Tick();
  EXPECT_EQ(StoredState(victim), JobState::kSucceeded);
}

TEST_F(PreemptionTest, JobsNotSubmittedRequeueRunOn) {
  first_ = Submit(kAlice, GiB(70));
  second_ = Submit(kAlice, GiB(70));
  const JobId bob = BobWaitsPastPreemptAfter();
  controller_->Tick();
  EXPECT_TRUE(launcher_.process(first_, 1)->signals.empty());
  EXPECT_TRUE(launcher_.process(second_, 1)->signals.empty());
  EXPECT_EQ(controller_->FindLive(bob)->state, JobState::kQueued);
}

TEST_F(PreemptionTest, AKillNineAfterThePreemptionIsStoredFinishesItAfterTheRestart) {
  first_ = SubmitPreemptible(kAlice, SIGTERM, 60);
  second_ = SubmitPreemptible(kAlice, SIGTERM, 60);
  const JobId bob = BobWaitsPastPreemptAfter();
  launcher_.ignores_sigterm = true;
  // colod stops right after storing the preemption, before any signal.
  crashing_.CrashAtWrite(1, /*after=*/true);
  Turn();
  ASSERT_TRUE(crashed_);
  EXPECT_TRUE(launcher_.process(first_, 1)->signals.empty());
  EXPECT_TRUE(launcher_.process(second_, 1)->signals.empty());
  const JobId victim = Stored(first_)->preemption ? first_ : second_;
  const JobId other = victim == first_ ? second_ : first_;
  ASSERT_TRUE(Stored(victim)->preemption.has_value());
  EXPECT_FALSE(Stored(other)->preemption.has_value());

  clock_.Advance(Seconds(20));
  Start();
  // The restart sends the signal the job never got, and keeps the notice's end.
  EXPECT_EQ(launcher_.process(victim, 1)->signals, std::vector<int>{SIGTERM});
  controller_->Tick();
  EXPECT_TRUE(launcher_.process(other, 1)->signals.empty()) << "Bob waits for the one under way";
  clock_.Advance(Seconds(39));
  controller_->Tick();
  EXPECT_EQ(launcher_.process(victim, 1)->signals, std::vector<int>{SIGTERM});
  clock_.Advance(Seconds(1));
  controller_->Tick();
  controller_->Tick();
  EXPECT_EQ(Stored(victim)->current()->exit, ExitKind::kPreempted);
  EXPECT_EQ(StoredState(victim), JobState::kQueued);
  EXPECT_TRUE(launcher_.IsRunning(bob, 1));
  EXPECT_EQ((launcher_.starts[{victim, 1}]), 1);

  // Killed again once it ended and the end was stored: it waits, and runs once more.
  Start();
  EXPECT_EQ(controller_->FindLive(victim)->state, JobState::kQueued);
  launcher_.Succeed(bob, 1);
  controller_->Tick();
  controller_->Tick();
  EXPECT_TRUE(launcher_.IsRunning(victim, 2));
  EXPECT_EQ((launcher_.starts[{victim, 2}]), 1);
}

TEST_F(PreemptionTest, ASlurmRunTakenBackAfterARestartIsNeverChosenUnderPreemptibleAll) {
  // preemptible = "all": alice's job of colo's may be stopped for bob, her Slurm run (started
  // later, so taken first) is Slurm's to preempt, before a restart and after it.
  config_.fairness.preemptible = Preemptible::kAll;
  Start();
  first_ = Submit(kAlice, GiB(70));
  controller_->Tick();
  ASSERT_TRUE(launcher_.IsRunning(first_, 1));
  const GpuIndex colos = scheduler_->job(first_)->gpus.at(0);
  clock_.Advance(Seconds(60));
  TenantRequest slurm = Tenant(560, std::nullopt);
  slurm.booked_gpus = {colos == 0 ? 1 : 0};
  auto placed = controller_->AttachTenant(slurm);
  ASSERT_TRUE(placed.ok() && placed->state == api::SlurmPlacement::kPlaced);
  Start();  // colod restarts while both run
  ASSERT_EQ(controller_->FindLive(placed->job)->state, JobState::kRunning);
  const JobId bob = Submit(kBob, GiB(70));
  controller_->Tick();
  clock_.Advance(Seconds(600));
  controller_->Tick();
  controller_->Tick();
  EXPECT_FALSE(launcher_.process(first_, 1)->signals.empty())
      << "alice's job of colo's makes room for bob";
  EXPECT_FALSE(Stored(placed->job)->preemption.has_value());
  EXPECT_EQ(controller_->FindLive(bob)->state, JobState::kRunning) << "on the GPU it left";
  EXPECT_EQ(controller_->FindLive(placed->job)->state, JobState::kRunning);
}

TEST_F(PreemptionTest, ANoticeIsTheServersMostAtMostAndStaysSoOverARestart) {
  // Jobs asking an hour's notice get max_notice (10 min by default), and a restart under a
  // shorter max_notice shortens what is left of it.
  first_ = SubmitPreemptible(kAlice, SIGTERM, 3600);
  second_ = SubmitPreemptible(kAlice, SIGTERM, 3600);
  BobWaitsPastPreemptAfter();
  launcher_.ignores_sigterm = true;
  controller_->Tick();
  const JobId victim = Stored(first_)->preemption ? first_ : second_;
  ASSERT_TRUE(Stored(victim)->preemption.has_value());
  EXPECT_NEAR(
      std::chrono::duration<double>(Stored(victim)->preemption->kill_at - clock_.WallNow()).count(),
      600, 1);
  EXPECT_EQ(launcher_.process(victim, 1)->signals, std::vector<int>{SIGTERM});

  config_.fairness.max_notice = Seconds(60);
  Start();
  clock_.Advance(Seconds(60));
  controller_->Tick();
  controller_->Tick();
  EXPECT_EQ(Stored(victim)->current()->exit, ExitKind::kPreempted);
  EXPECT_EQ(StoredState(victim), JobState::kQueued);
}

TEST_F(PreemptionTest, AJobEndingInItsNoticeWhileColodIsDownIsRequeuedAtTheRestart) {
  first_ = SubmitPreemptible(kAlice);
  second_ = SubmitPreemptible(kAlice);
  const JobId bob = BobWaitsPastPreemptAfter();
  launcher_.signal_ends = false;  // it saves its checkpoint first
  controller_->Tick();
  const JobId victim = Stored(first_)->preemption ? first_ : second_;
  launcher_.Succeed(victim, 1);  // saved and exited 0 while colod was down
  Start();
  controller_->Tick();
  controller_->Tick();
  const std::optional<Job> stored = Stored(victim);
  EXPECT_EQ(stored->state, JobState::kQueued) << "exit 0 in its notice is a preemption";
  EXPECT_EQ(stored->current()->exit, ExitKind::kPreempted);
  EXPECT_TRUE(launcher_.IsRunning(bob, 1));
}

}  // namespace
}  // namespace colo
