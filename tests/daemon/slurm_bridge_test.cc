#include "daemon/slurm_bridge.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <mutex>
#include <nlohmann/json.hpp>
#include <thread>

#include "daemon/fake_job_store.h"
#include "daemon/fake_launcher.h"
#include "daemon/job_controller.h"
#include "policies/registry.h"

namespace colo {
namespace {

// One job as Slurm 22.05's `squeue --json` writes it (the fields colod reads, and a few others).
nlohmann::json SqueueJob(uint32_t id) {
  return {{"job_id", id},
          {"job_state", "FAILED"},
          {"nodes", "n[2-3]"},
          {"admin_comment", "colo:need=24696061952,ooms=1"},
          {"standard_output", "/home/alice/run-%j-%x.out"},
          {"standard_error", ""},
          {"exit_code", 256},
          {"restart_cnt", 2},
          {"tres_per_node", "gres:gpumem:23552"},
          {"user_name", "alice"},
          {"name", "train"},
          {"current_working_directory", "/home/alice"},
          {"array_job_id", 0},
          {"array_task_id", nullptr},
          {"batch_host", "n2"}};
}

std::string Squeue(const std::vector<nlohmann::json>& jobs) {
  return nlohmann::json{{"meta", {{"Slurm", {{"release", "22.05.8"}}}}},
                        {"errors", nlohmann::json::array()},
                        {"jobs", jobs}}
      .dump(2);
}

TEST(ParseSqueueJobsTest, ReadsWhatColodNeedsOfAJob) {
  auto jobs = ParseSqueueJobs(Squeue({SqueueJob(7)}));
  ASSERT_TRUE(jobs.ok()) << jobs.status().message();
  ASSERT_EQ(jobs->count(7), 1u);
  const SlurmJobInfo& j = jobs->at(7);
  EXPECT_EQ(j.state, "FAILED");
  EXPECT_EQ(j.nodes, "n[2-3]");
  EXPECT_EQ(j.restarts, 2);
  EXPECT_EQ(j.exit_code, 1);  // 256 is a wait status
  EXPECT_EQ(j.exit_signal, 0);
  EXPECT_EQ(j.tres_per_node, "gres:gpumem:23552");
  EXPECT_EQ(ParseSlurmNote(j.admin_comment).need, Bytes(24696061952));
  EXPECT_EQ(ParseSlurmNote(j.admin_comment).ooms, 1);
  // Slurm's filename pattern expanded; stderr goes with stdout when not given.
  EXPECT_EQ(j.std_out, "/home/alice/run-7-train.out");
  EXPECT_EQ(j.std_err, j.std_out);
}

TEST(ParseSqueueJobsTest, AJobNameOrPathCannotPassForAnotherField) {
  nlohmann::json evil = SqueueJob(8);
  evil["name"] = "x\n   JobState=COMPLETED NodeList=n1 AdminComment=colo:need=1";
  evil["standard_output"] = "/tmp/a NodeList=n1 Restarts=9 %j.out";
  evil["admin_comment"] = "";
  auto jobs = ParseSqueueJobs(Squeue({evil}));
  ASSERT_TRUE(jobs.ok());
  const SlurmJobInfo& j = jobs->at(8);
  EXPECT_EQ(j.state, "FAILED");
  EXPECT_EQ(j.nodes, "n[2-3]");
  EXPECT_EQ(j.restarts, 2);
  EXPECT_FALSE(ParseSlurmNote(j.admin_comment).need.has_value());
  EXPECT_EQ(j.std_out, "/tmp/a NodeList=n1 Restarts=9 8.out");
}

TEST(ParseSqueueJobsTest, DefaultsAndRelativePathsFollowSlurm) {
  nlohmann::json plain = SqueueJob(9);
  plain["standard_output"] = "";
  nlohmann::json relative = SqueueJob(10);
  relative["standard_output"] = "logs/%u_%N_%4j.out";
  relative["standard_error"] = "logs/err-%%-%j.txt";
  nlohmann::json array = SqueueJob(11);
  array["standard_output"] = "";
  array["array_job_id"] = 5;
  array["array_task_id"] = 3;
  nlohmann::json escaped = SqueueJob(12);
  escaped["standard_output"] = "/out/lit\\eral-%j";
  auto jobs = ParseSqueueJobs(Squeue({plain, relative, array, escaped}));
  ASSERT_TRUE(jobs.ok());
  EXPECT_EQ(jobs->at(9).std_out, "/home/alice/slurm-9.out");
  EXPECT_EQ(jobs->at(10).std_out, "/home/alice/logs/alice_n2_0010.out");
  EXPECT_EQ(jobs->at(10).std_err, "/home/alice/logs/err-%-10.txt");
  EXPECT_EQ(jobs->at(11).std_out, "/home/alice/slurm-5_3.out");
  EXPECT_EQ(jobs->at(12).std_out, "/out/literal-%j");  // a backslash turns expansion off
}

TEST(ParseSqueueJobsTest, ASignalIsNotAnExitCode) {
  nlohmann::json killed = SqueueJob(13);
  killed["exit_code"] = 9;  // killed by SIGKILL
  auto jobs = ParseSqueueJobs(Squeue({killed}));
  ASSERT_TRUE(jobs.ok());
  EXPECT_EQ(jobs->at(13).exit_signal, 9);
  EXPECT_EQ(jobs->at(13).exit_code, 0);
}

TEST(ParseSqueueJobsTest, GarbageIsAnErrorAndOddRecordsAreSkipped) {
  EXPECT_FALSE(ParseSqueueJobs("").ok());
  EXPECT_FALSE(ParseSqueueJobs("squeue: error: Invalid user").ok());
  EXPECT_FALSE(ParseSqueueJobs("{\"jobs\": 3}").ok());
  nlohmann::json no_id = SqueueJob(14);
  no_id.erase("job_id");
  nlohmann::json huge_id = SqueueJob(15);
  huge_id["job_id"] = int64_t{1} << 40;
  nlohmann::json no_state = SqueueJob(16);
  no_state["job_state"] = 3;
  // A warning squeue prints before its JSON does not hide the jobs.
  auto jobs = ParseSqueueJobs("squeue: warning: something\n" +
                              Squeue({no_id, huge_id, no_state, "text", SqueueJob(17)}));
  ASSERT_TRUE(jobs.ok()) << jobs.status().message();
  EXPECT_EQ(jobs->size(), 1u);
  EXPECT_EQ(jobs->count(17), 1u);
}

TEST(ParseSqueueStatesTest, ReadsTheCheapListing) {
  const auto jobs = ParseSqueueStates(
      "3|PENDING|1||\n"
      "4|RUNNING|0|n2|\n"
      "garbage\n"
      "x|RUNNING|0|n1|\n"
      "5|COMPLETED|-1|n1|\n");
  ASSERT_EQ(jobs.size(), 2u);
  EXPECT_EQ(jobs.at(3).state, "PENDING");
  EXPECT_EQ(jobs.at(3).restarts, 1);
  EXPECT_EQ(jobs.at(3).nodes, "");
  EXPECT_EQ(jobs.at(4).nodes, "n2");
}

TEST(SlurmNoteTest, RoundTripsAndIgnoresWhatItDoesNotKnow) {
  const SlurmNote note{Bytes(123456789), 2};
  const SlurmNote back = ParseSlurmNote("site text; " + FormatSlurmNote(note) + " more");
  EXPECT_EQ(back.need, note.need);
  EXPECT_EQ(back.ooms, 2);
  EXPECT_FALSE(ParseSlurmNote("colo:need=-5,ooms=x").need.has_value());
  EXPECT_FALSE(ParseSlurmNote("colo:need=99999999999999999999999").need.has_value());
  EXPECT_EQ(ParseSlurmNote("no note").ooms, 0);
}

TEST(SlurmNoteTest, WithNoteKeepsAnAdministratorsText) {
  const SlurmNote note{Bytes(5), 1};
  EXPECT_EQ(WithNote("", note), "colo:need=5,ooms=1");
  EXPECT_EQ(WithNote("checked by ops", note), "checked by ops colo:need=5,ooms=1");
  EXPECT_EQ(WithNote("ops colo:need=1,ooms=0 later", note), "ops later colo:need=5,ooms=1");
  EXPECT_EQ(WithNote("colo:need=1,ooms=0", note), "colo:need=5,ooms=1");
}

TEST(ParseSqueueJobsTest, ReadsEachNodesGpus) {
  nlohmann::json job = SqueueJob(9);
  job["gres_detail"] = {"shard:7(IDX:1)", "gpu:2(IDX:0-1)"};
  job["job_resources"] = {{"allocated_nodes", {{{"nodename", "n2"}}, {{"nodename", "n3"}}}}};
  job["comment"] = "colo:mps=25";
  auto jobs = ParseSqueueJobs(Squeue({job}));
  ASSERT_TRUE(jobs.ok());
  const SlurmJobInfo& j = jobs->at(9);
  EXPECT_EQ(j.gpus_by_node.at("n2"), std::vector<int>{1});
  EXPECT_EQ(j.gpus_by_node.at("n3"), (std::vector<int>{0, 1}));
  EXPECT_EQ(j.comment, "colo:mps=25");
}

TEST(ParseSqueueBookingsTest, TheCommentComesWholeAndLast) {
  const auto jobs =
      ParseSqueueBookings("12|0|gres:shard:19|a|b colo:mps=50|\n13|2|gres:gpu:1||\nnot|a|line\n");
  ASSERT_EQ(jobs.size(), 2u);
  EXPECT_EQ(jobs.at(12).tres_per_node, "gres:shard:19");
  EXPECT_EQ(jobs.at(12).comment, "a|b colo:mps=50");
  EXPECT_EQ(jobs.at(13).restarts, 2);
  EXPECT_EQ(jobs.at(13).comment, "");
}

// Slurm as the bridge sees it through its commands, for the bridge under test: the jobs it
// knows, and what colod asked of it. The bridge calls it on its worker threads.
struct SlurmWorld {
  std::mutex mutex;
  std::map<uint32_t, SlurmJobInfo> jobs;
  std::map<std::string, std::string> files;  // a job's output, by path
  int not_pending_for = 0;  // PrepareRerun finds a requeued job not pending yet this many times
  struct Rerun {
    uint32_t job;
    SlurmNote note;
    int64_t shards;
    std::string avoid;
  };
  std::vector<std::pair<uint32_t, SlurmNote>> requeued;
  std::vector<Rerun> prepared;
  int not_pending_answers = 0;
  std::vector<std::pair<std::string, std::string>> appended;  // path, text

  template <typename T>
  T Read(T SlurmWorld::*member) {
    std::lock_guard lock(mutex);
    return this->*member;
  }
};

class FakeSlurm final : public SlurmCommands {
 public:
  explicit FakeSlurm(SlurmWorld& world) : world_(world) {}
  Result<std::map<uint32_t, SlurmJobInfo>> ShowJobs(const std::vector<uint32_t>& ids) override {
    std::lock_guard lock(world_.mutex);
    std::map<uint32_t, SlurmJobInfo> out;
    for (uint32_t id : ids) {
      if (auto it = world_.jobs.find(id); it != world_.jobs.end()) out.insert(*it);
    }
    return out;
  }
  Result<std::map<uint32_t, SlurmJobInfo>> JobStates(const std::vector<uint32_t>& ids) override {
    return ShowJobs(ids);
  }
  Status Requeue(uint32_t job, const SlurmNote& note) override {
    std::lock_guard lock(world_.mutex);
    world_.requeued.emplace_back(job, note);
    world_.jobs[job].state = "PENDING";
    return Status::Ok();
  }
  Result<bool> PrepareRerun(uint32_t job, const SlurmNote& note, int64_t shards,
                            const std::string& avoid_node) override {
    std::lock_guard lock(world_.mutex);
    if (world_.not_pending_for > 0) {
      --world_.not_pending_for;
      ++world_.not_pending_answers;
      return false;
    }
    world_.prepared.push_back({job, note, shards, avoid_node});
    return true;
  }
  Result<std::optional<SlurmJobInfo>> Booking(uint32_t job) override { return ShowJob(job); }
  Result<std::string> SlurmdGres(const std::string&) override {
    // gres.conf lists /dev/nvidia0 first; colod's GPU 0 is /dev/nvidia1 (FixtureDevices).
    return std::string(
        "slurmd: Gres Name=shard Type=(null) Count=78 Index=0 ID=1 File=/dev/nvidia0\n"
        "slurmd: Gres Name=gpu Type=(null) Count=1 Index=0 ID=2 File=/dev/nvidia0\n"
        "slurmd: Gres Name=shard Type=(null) Count=78 Index=1 ID=1 File=/dev/nvidia1\n"
        "slurmd: Gres Name=gpu Type=(null) Count=1 Index=1 ID=2 File=/dev/nvidia1\n");
  }
  Result<SlurmNodeState> ShowNode(const std::string&) override { return SlurmNodeState{}; }
  Status UpdateNode(const std::string&, bool, const std::string&) override { return Status::Ok(); }
  Result<std::string> TailAsUser(const Identity&, const std::string& path, size_t) override {
    std::lock_guard lock(world_.mutex);
    auto it = world_.files.find(path);
    if (it == world_.files.end()) return NotFound(path);
    return it->second;
  }
  Status AppendAsUser(const Identity&, const std::string& path, const std::string& text) override {
    std::lock_guard lock(world_.mutex);
    world_.appended.emplace_back(path, text);
    return Status::Ok();
  }

 private:
  SlurmWorld& world_;
};

constexpr const char* kOutOfMemory =
    "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB";

// The bridge between Slurm (FakeSlurm) and colod's job controller, on node n1 with two 80 GiB
// GPUs, turned as colod's loop turns it: a manual clock, Slurm's commands on worker threads.
class SlurmBridgeTest : public ::testing::Test {
 protected:
  SlurmBridgeTest() : clock_(TimePoint{} + Seconds(1000), WallTime{} + std::chrono::hours(490000)) {
    auto policy = MakePolicy("worst-fit:margin=2GiB");
    EXPECT_TRUE(policy.ok());
    policy_ = std::move(*policy);
    config_.launch_grace = Seconds(0);
    scheduler_ = std::make_unique<Scheduler>(clock_, *policy_, config_);
    SlurmBridgeOptions options;
    options.node = "n1";
    for (int g = 0; g < 2; ++g) {
      scheduler_->AddGpu(GpuInfo{"GPU-" + std::to_string(g), "Fake", GiB(80), 0, false,
                                 SharingMode::kPlain, MiB(500), MiB(500)});
      DeviceInfo device;
      device.index = g;
      device.minor = 1 - g;  // colod's GPU 0 is /dev/nvidia1: Slurm's GPU 1
      device.uuid = "GPU-" + std::to_string(g);
      device.memory_total = GiB(80);
      options.devices.push_back(device);
    }
    ControllerOptions controller;
    controller.tenant_wait_limit = Seconds(60);
    controller_ =
        std::make_unique<JobController>(clock_, *scheduler_, store_, launcher_, controller);
    EXPECT_TRUE(controller_->Recover().ok());
    options.reconcile_interval = std::chrono::hours(1);
    options.rerun_deadline = Seconds(5);
    bridge_ = std::make_unique<SlurmBridge>(clock_, *controller_,
                                            std::make_unique<FakeSlurm>(world_), options, nullptr);
  }
  ~SlurmBridgeTest() override { bridge_.reset(); }

  // Turns colod's loop until `done`, the clock moving 50 ms a turn, for at most 10 s of real
  // time: the bridge's work for Slurm runs on its worker threads meanwhile.
  template <typename F>
  bool TurnUntil(F done) {
    for (int i = 0; i < 5000; ++i) {
      bridge_->Tick();
      for (const TenantHandback& handback : controller_->TakeHandbacks())
        bridge_->HandBack(handback);
      if (done()) return true;
      clock_.Advance(std::chrono::milliseconds(50));
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
    return false;
  }

  // A step's ask, asked again while colod reads Slurm (as the plugin asks again).
  api::SlurmAttachReply Attach(uint32_t job) {
    api::SlurmAttachRequest step;
    step.job = job;
    step.uid = 0;  // root: in the passwd database wherever the test runs
    step.name = "train";
    api::SlurmAttachReply reply;
    EXPECT_TRUE(TurnUntil([&] {
      auto asked = bridge_->Attach(step);
      EXPECT_TRUE(asked.ok()) << asked.status().message();
      if (!asked.ok()) return true;
      reply = *asked;
      return reply.state != api::SlurmPlacement::kWaiting ||
             reply.reason.find("reading") == std::string::npos;
    }));
    return reply;
  }

  // slurmd's prolog of run `restarts` of a colo job (`--colo-mem=MEMORY`) booked on Slurm's GPU
  // `slurm_gpu`, and Slurm's record of it.
  void ColoJob(uint32_t job, Bytes memory, int slurm_gpu, int restarts = 0,
               std::string admin_comment = "") {
    SlurmJobInfo info;
    info.job = job;
    info.state = "RUNNING";
    info.nodes = "n1";
    info.restarts = restarts;
    info.admin_comment = std::move(admin_comment);
    info.tres_per_node = fmt::format("gres:shard:{}", ShardsFor(memory, GiB(1)));
    info.std_out = info.std_err = fmt::format("/home/alice/slurm-{}.out", job);
    info.gpus_by_node["n1"] = {slurm_gpu};
    {
      std::lock_guard lock(world_.mutex);
      world_.jobs[job] = info;
    }
    api::SlurmRunRequest prolog;
    prolog.job = job;
    prolog.restarts = restarts;
    prolog.share = SharingPreference::kAny;
    prolog.memory = memory;
    prolog.gpus = 1;
    prolog.slurm_gpus = {slurm_gpu};
    ASSERT_TRUE(bridge_->BeginRun(prolog).ok());
  }

  // The batch script of a job ends with `wait_status`, its output ending with `output`.
  void EndWith(uint32_t job, int wait_status, const std::string& output) {
    {
      std::lock_guard lock(world_.mutex);
      world_.files[world_.jobs.at(job).std_err] = output;
    }
    api::SlurmEndRequest end;
    end.job = job;
    end.wait_status = wait_status;
    ASSERT_TRUE(bridge_->End(end).ok());
  }

  // What colod wrote into the job's output for its user.
  std::string ToldUser(uint32_t job) {
    std::lock_guard lock(world_.mutex);
    std::string told;
    for (const auto& [path, text] : world_.appended) {
      if (path == world_.jobs.at(job).std_err) told += text + "\n";
    }
    return told;
  }

  ManualClock clock_;
  std::unique_ptr<PlacementPolicy> policy_;
  SchedulerConfig config_;
  FakeJobStore store_;
  FakeLauncher launcher_;
  std::unique_ptr<Scheduler> scheduler_;
  std::unique_ptr<JobController> controller_;
  SlurmWorld world_;
  std::unique_ptr<SlurmBridge> bridge_;
};

std::string EnvValue(const std::vector<std::string>& env, const std::string& name) {
  for (const std::string& e : env) {
    if (e.rfind(name + "=", 0) == 0) return e.substr(name.size() + 1);
  }
  return "";
}

TEST_F(SlurmBridgeTest, AJobRunsOnTheGpuSlurmBookedWhereverColodsPolicyWouldPutIt) {
  // Slurm's GPU 0 is /dev/nvidia0, colod's GPU 1. Worst-fit would put the second job on the
  // empty GPU 0; Slurm booked both on its GPU 0.
  for (uint32_t job : {101u, 102u}) {
    ColoJob(job, GiB(30), 0);
    const api::SlurmAttachReply placed = Attach(job);
    ASSERT_EQ(placed.state, api::SlurmPlacement::kPlaced) << placed.reason;
    EXPECT_EQ(EnvValue(placed.env, "CUDA_VISIBLE_DEVICES"), "GPU-1") << job;
    EXPECT_EQ(EnvValue(placed.env, "COLO_GPU_MEMORY"), std::to_string(GiB(30).count()));
  }
  // A job Slurm booked no GPU of this node for is refused, with the reason.
  ColoJob(103, GiB(4), 7);
  const api::SlurmAttachReply refused = Attach(103);
  EXPECT_EQ(refused.state, api::SlurmPlacement::kFailed);
  EXPECT_NE(refused.reason.find("GPU 7 of this node"), std::string::npos) << refused.reason;
}

TEST_F(SlurmBridgeTest, AnOutOfMemoryCrashGoesBackToSlurmWithItsShardsRaised) {
  ColoJob(110, GiB(20), 1);
  ASSERT_EQ(Attach(110).state, api::SlurmPlacement::kPlaced);
  // Slurm has the job pending only a moment after its requeue: colod prepares its next run once
  // it is, looking again meanwhile.
  world_.not_pending_for = 3;
  EndWith(110, 1 << 8, kOutOfMemory);
  ASSERT_TRUE(TurnUntil([&] { return !world_.Read(&SlurmWorld::prepared).empty(); }));
  const auto requeued = world_.Read(&SlurmWorld::requeued);
  ASSERT_EQ(requeued.size(), 1u);
  EXPECT_EQ(requeued[0].first, 110u);
  ASSERT_TRUE(requeued[0].second.need);
  const Bytes need = *requeued[0].second.need;
  EXPECT_GT(need, GiB(20));
  EXPECT_EQ(requeued[0].second.ooms, 1);
  EXPECT_EQ(world_.Read(&SlurmWorld::not_pending_answers), 3);
  const auto prepared = world_.Read(&SlurmWorld::prepared);
  ASSERT_EQ(prepared.size(), 1u);
  EXPECT_EQ(prepared[0].shards, ShardsFor(need, GiB(1))) << "its raised need in whole shards";
  EXPECT_EQ(prepared[0].note.need, need);
  EXPECT_EQ(prepared[0].avoid, "") << "any node with the memory may run it again";
  EXPECT_NE(ToldUser(110).find("ran out of GPU memory on n1"), std::string::npos) << ToldUser(110);
  EXPECT_EQ(ToldUser(110).find("gave up"), std::string::npos);
}

TEST_F(SlurmBridgeTest, ARequeuedJobNotPendingInTimeRunsAgainAsItIs) {
  ColoJob(111, GiB(20), 1);
  ASSERT_EQ(Attach(111).state, api::SlurmPlacement::kPlaced);
  world_.not_pending_for = 1000000;
  EndWith(111, 1 << 8, kOutOfMemory);
  ASSERT_TRUE(TurnUntil([&] { return world_.Read(&SlurmWorld::not_pending_answers) > 0; }));
  // Looked at again at most every 250 ms until the rerun deadline (5 s here), then no more.
  const TimePoint past_deadline = clock_.Now() + Seconds(6);
  ASSERT_TRUE(TurnUntil([&] { return clock_.Now() >= past_deadline; }));
  const int asked = world_.Read(&SlurmWorld::not_pending_answers);
  EXPECT_GE(asked, 2);
  EXPECT_LE(asked, 5000 / 250 + 1);
  const TimePoint later = clock_.Now() + Seconds(10);
  ASSERT_TRUE(TurnUntil([&] { return clock_.Now() >= later; }));
  EXPECT_EQ(world_.Read(&SlurmWorld::not_pending_answers), asked);
  EXPECT_TRUE(world_.Read(&SlurmWorld::prepared).empty());
}

TEST_F(SlurmBridgeTest, ARunBelowTheRetryCapLearnsItsNeedFromEarlierRunsAndGoesBackAgain) {
  // Runs 0 and 1 crashed out of memory on other nodes: Slurm's record carries their need and
  // count. This run (the retry cap is 3) is not the last.
  const int cap = config_.max_oom_retries;
  ColoJob(120, GiB(20), 0, /*restarts=*/2,
          fmt::format("ops colo:need={},ooms={}", GiB(24).count(), cap - 1));
  const api::SlurmAttachReply placed = Attach(120);
  ASSERT_EQ(placed.state, api::SlurmPlacement::kPlaced) << placed.reason;
  EXPECT_EQ(EnvValue(placed.env, "COLO_GPU_MEMORY"), std::to_string(GiB(24).count()))
      << "planned with the need its earlier runs raised, not the 20 GiB it asked for";
  EndWith(120, 1 << 8, kOutOfMemory);
  ASSERT_TRUE(TurnUntil([&] { return !world_.Read(&SlurmWorld::prepared).empty(); }));
  const auto requeued = world_.Read(&SlurmWorld::requeued);
  ASSERT_EQ(requeued.size(), 1u);
  EXPECT_EQ(requeued[0].second.ooms, cap);
  EXPECT_GT(*requeued[0].second.need, GiB(24));
}

TEST_F(SlurmBridgeTest, AtTheRetryCapColoGivesUpAndTellsTheUserWhy) {
  // Three out-of-memory crashes on any nodes before this run (the cap is 3): a fourth is the
  // last. The job fails; Slurm is not asked to run it again; its user's output says why.
  const int cap = config_.max_oom_retries;
  ColoJob(130, GiB(20), 1, /*restarts=*/3,
          fmt::format("colo:need={},ooms={}", GiB(30).count(), cap));
  const api::SlurmAttachReply placed = Attach(130);
  ASSERT_EQ(placed.state, api::SlurmPlacement::kPlaced) << placed.reason;
  EndWith(130, 1 << 8, kOutOfMemory);
  ASSERT_TRUE(TurnUntil([&] { return !ToldUser(130).empty(); }));
  const std::string told = ToldUser(130);
  EXPECT_NE(told.find("colo: Slurm job 130 failed: colo gave up and does not requeue it again"),
            std::string::npos)
      << told;
  EXPECT_NE(told.find(fmt::format("retry cap {}", cap)), std::string::npos) << told;
  EXPECT_NE(told.find("--colo-mem"), std::string::npos) << told;
  EXPECT_TRUE(world_.Read(&SlurmWorld::requeued).empty());
  EXPECT_EQ(controller_->FindTenant(130), nullptr);
  // Its epilog's word finds nothing left to judge: the step ends, and Slurm sees it fail.
  api::SlurmEndRequest epilog;
  epilog.job = 130;
  auto ended = bridge_->End(epilog);
  ASSERT_TRUE(ended.ok());
  EXPECT_NE(ended->state, "ending");
  EXPECT_NE(ended->state, "requeued");
}

}  // namespace
}  // namespace colo
