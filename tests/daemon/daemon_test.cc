// colod end to end, in process: real sockets, real SQLite, real processes, fake GPUs.
#include "daemon/daemon.h"

#include <arpa/inet.h>
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <set>
#include <thread>

#include "daemon/api.h"
#include "gpu/fake_gpus.h"

namespace colo {
namespace {

using nlohmann::json;
namespace fs = std::filesystem;

class DaemonTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char pattern[] = "/tmp/colod-test-XXXXXX";
    dir_ = mkdtemp(pattern);
    config_.state_dir = dir_ + "/state";
    config_.socket = dir_ + "/colod.sock";
    config_.shim = COLO_SHIM_PATH;
    config_.mps_enabled = false;  // fake GPUs have no MPS; jobs share plainly
    config_.scheduler.launch_grace = Seconds(0);
    config_.scheduler.sample_interval = SecondsF(0.1);
    config_.cancel_grace = SecondsF(0.5);
  }
  void TearDown() override {
    Stop();
    // Leave no job behind: every test's processes end with it.
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }

  void Start() {
    auto daemon = Daemon::Create(Daemon::Options{config_, false}, gpus_);
    ASSERT_TRUE(daemon.ok()) << daemon.status().message();
    daemon_ = std::move(*daemon);
    thread_ = std::thread([this] { ASSERT_TRUE(daemon_->Run().ok()); });
  }
  // Like kill -9 as far as jobs are concerned: the daemon goes away, its jobs keep running.
  void Stop() {
    if (!daemon_) return;
    daemon_->RequestStop();
    thread_.join();
    daemon_.reset();
  }

  json Call(json request) {
    auto client = ApiClient::Connect(config_.socket);
    EXPECT_TRUE(client.ok()) << client.status().message();
    if (!client.ok()) return json{};
    auto reply = client->Call(std::move(request));
    if (!reply.ok()) return json{{"ok", false}, {"error", reply.status().message()}};
    return *reply;
  }
  // With a client-side estimate (colo submit --estimate-from) instead of a declared need.
  JobId SubmitEstimated(const std::vector<std::string>& command, const json& estimate) {
    json r =
        Call({{"op", "submit"}, {"command", command}, {"estimate", estimate}, {"workdir", dir_}});
    EXPECT_TRUE(r.value("ok", false)) << r.dump();
    return r.value("job", JobId{0});
  }
  JobId Submit(std::vector<std::string> command, const std::string& memory = "8GiB") {
    json r = Call({{"op", "submit"}, {"command", command}, {"memory", memory}, {"workdir", dir_}});
    EXPECT_TRUE(r.value("ok", false)) << r.dump();
    return r.value("job", JobId{0});
  }
  json Show(JobId id) { return Call({{"op", "show"}, {"job", id}})["job"]; }
  // Waits until the job reaches `state` (or the time runs out); returns its record.
  json WaitFor(JobId id, const std::string& state, double seconds = 10) {
    const auto until = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
    json job;
    while (std::chrono::steady_clock::now() < until) {
      job = Show(id);
      if (job.value("state", "") == state) return job;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    ADD_FAILURE() << "job " << id << " never reached " << state << ": " << job.dump(2);
    return job;
  }

  std::string dir_;
  DaemonConfig config_;
  FakeGpus gpus_{2, GiB(80)};
  std::unique_ptr<Daemon> daemon_;
  std::thread thread_;
};

TEST_F(DaemonTest, RunsAJobWithItsGpuAndLogs) {
  Start();
  const JobId id = Submit({"sh", "-c", "echo visible=$CUDA_VISIBLE_DEVICES job=$COLO_JOB_ID; pwd"});
  const json job = WaitFor(id, "succeeded");
  ASSERT_EQ(job["attempt_list"].size(), 1u);
  const json logs = Call({{"op", "logs"}, {"job", id}});
  std::ifstream out(logs.value("stdout", ""));
  std::string line1, line2;
  std::getline(out, line1);
  std::getline(out, line2);
  EXPECT_EQ(line1, fmt::format("visible={} job={}", job["gpu_uuids"][0].get<std::string>(), id));
  EXPECT_EQ(line2, fs::canonical(dir_).string());
}

TEST_F(DaemonTest, OutOfMemoryIsRecoveredWithALargerNeedAndOtherFailuresAreNot) {
  Start();
  // The first attempt reports a PyTorch OOM after its memory was seen at 10 GiB; the second works.
  const JobId oom = Submit({"sh", "-c",
                            "if [ \"$COLO_ATTEMPT\" = 1 ]; then sleep 0.5; echo "
                            "'torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 "
                            "GiB' >&2; exit 1; fi; echo recovered"},
                           "4GiB");
  const json running = WaitFor(oom, "running");
  const int pid = running["attempt_list"][0].value("pid", 0);
  gpus_.SetProcessMemory(running["attempt_list"][0]["gpus"][0].get<int>(), pid, GiB(10));
  const json done = WaitFor(oom, "succeeded");
  gpus_.RemoveProcess(pid);
  ASSERT_EQ(done["attempt_list"].size(), 2u);
  EXPECT_EQ(done["attempt_list"][0].value("exit_kind", ""), "out-of-memory");
  EXPECT_EQ(done["attempt_list"][0].value("peak", int64_t{0}), GiB(10).count());
  // Adaptive recovery: 10 GiB observed x 1.1 + 1 GiB.
  EXPECT_EQ(done.value("memory", ""), "12.0 GiB");
  EXPECT_EQ(done.value("reason", "?"), "");

  const JobId failing = Submit({"sh", "-c", "echo 'ValueError: nope' >&2; exit 3"});
  const json failed = WaitFor(failing, "failed");
  EXPECT_EQ(failed["attempt_list"].size(), 1u);
  EXPECT_NE(failed.value("reason", "").find("exit code 3"), std::string::npos);
}

// A job submitted with a client-side estimate plans with it; once a run of the same model has
// succeeded, the next one plans with what that run was seen to use.
TEST_F(DaemonTest, EstimatesAreStoredAndRefinedByEarlierRuns) {
  Start();
  const json estimate = {{"estimator", "trace"},    {"peak", GiB(6).count()},
                         {"lower", GiB(6).count()}, {"upper", GiB(7).count()},
                         {"detail", "test"},        {"signature", "abc-b32"}};
  const JobId first = SubmitEstimated({"sh", "-c", "sleep 0.6"}, estimate);
  const json running = WaitFor(first, "running");
  EXPECT_EQ(running.value("need_source", ""), "estimated");
  EXPECT_EQ(running.value("need", ""), "7.0 GiB");
  EXPECT_EQ(running["estimate"].value("estimator", ""), "trace");
  const int pid = running["attempt_list"][0].value("pid", 0);
  gpus_.SetProcessMemory(running["attempt_list"][0]["gpus"][0].get<int>(), pid, GiB(5));
  WaitFor(first, "succeeded");
  gpus_.RemoveProcess(pid);

  const JobId second = SubmitEstimated({"true"}, estimate);
  const json learned = Show(second);
  ASSERT_TRUE(learned["estimate"].contains("history")) << learned.dump(2);
  EXPECT_EQ(learned["estimate"]["history"].value("runs", 0), 1);
  EXPECT_EQ(learned["estimate"]["history"].value("peak", int64_t{0}), GiB(5).count());
  EXPECT_EQ(learned.value("memory", ""), "5.0 GiB");
  WaitFor(second, "succeeded");

  json bad = Call({{"op", "submit"},
                   {"command", {"true"}},
                   {"workdir", dir_},
                   {"estimate", {{"peak", -1}, {"upper", 3}}}});
  EXPECT_FALSE(bad.value("ok", true));
  EXPECT_NE(bad.value("error", "").find("estimate needs"), std::string::npos);
}

// A job queued behind a run of the same model plans with that run's peak once it succeeds, not
// with the wider estimate it was submitted with.
TEST_F(DaemonTest, QueuedJobsOfAModelThatJustRanPlanWithItsPeak) {
  Start();
  const json estimate = {{"estimator", "trace"},     {"peak", GiB(40).count()},
                         {"lower", GiB(40).count()}, {"upper", GiB(45).count()},
                         {"detail", "test"},         {"signature", "big-b32"}};
  const JobId blocker = Submit({"sh", "-c", "sleep 2"}, "70GiB");  // one GPU is full
  WaitFor(blocker, "running");
  const JobId first = SubmitEstimated({"sh", "-c", "sleep 0.8"}, estimate);
  const json running = WaitFor(first, "running");
  const int pid = running["attempt_list"][0].value("pid", 0);
  gpus_.SetProcessMemory(running["attempt_list"][0]["gpus"][0].get<int>(), pid, GiB(20));
  // 45 GiB fits beside neither job: it waits.
  const JobId second = SubmitEstimated({"true"}, estimate);
  EXPECT_EQ(Show(second).value("state", ""), "queued");
  WaitFor(first, "succeeded");
  gpus_.RemoveProcess(pid);

  const json done = WaitFor(second, "succeeded");
  ASSERT_TRUE(done["estimate"].contains("history")) << done.dump(2);
  EXPECT_EQ(done["estimate"]["history"].value("runs", 0), 1);
  EXPECT_EQ(done.value("memory", ""), "20.0 GiB");
  // It ran under the learned plan: the peak seen plus 10% after one run.
  ASSERT_EQ(done["attempt_list"].size(), 1u);
  EXPECT_EQ(done["attempt_list"][0].value("memory_limit", int64_t{0}), GiB(22).count());
  bool refined = false;
  for (const auto& e : done["events"]) refined |= e.value("kind", "") == "estimate";
  EXPECT_TRUE(refined) << done.dump(2);
  WaitFor(blocker, "succeeded");
}

TEST_F(DaemonTest, CancelStopsTheWholeProcessGroup) {
  Start();
  const JobId id = Submit({"sh", "-c", "sleep 60 & sleep 60; wait"});
  const json running = WaitFor(id, "running");
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  EXPECT_EQ(Call({{"op", "cancel"}, {"job", id}}).value("state", ""), "cancelling");
  const json cancelled = WaitFor(id, "cancelled");
  const int group = running["attempt_list"][0].value("pid", 0);
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  EXPECT_NE(kill(-group, 0), 0) << "processes of the cancelled job survive";
  EXPECT_FALSE(Call({{"op", "cancel"}, {"job", id}}).value("ok", true));  // already ended
  EXPECT_FALSE(Call({{"op", "cancel"}, {"job", 999}}).value("ok", true));
}

TEST_F(DaemonTest, RestartLosesNoJobAndReadoptsRunningOnes) {
  Start();
  const JobId running = Submit({"sh", "-c", "sleep 1.5; echo survived"}, "70GiB");
  const JobId ends_while_down = Submit({"sh", "-c", "sleep 0.3; exit 4"}, "70GiB");
  const JobId queued = Submit({"true"}, "70GiB");  // both GPUs are full: it waits
  WaitFor(running, "running");
  WaitFor(ends_while_down, "running");
  Stop();
  std::this_thread::sleep_for(std::chrono::milliseconds(600));
  Start();
  const json adopted = Show(running);
  EXPECT_EQ(adopted.value("state", ""), "running");
  bool saw_adoption = false;
  for (const auto& e : adopted["events"]) saw_adoption |= e.value("kind", "") == "adopted";
  EXPECT_TRUE(saw_adoption) << adopted.dump(2);
  // The job that ended meanwhile gets its true outcome from the shim's record.
  const json ended = WaitFor(ends_while_down, "failed");
  EXPECT_NE(ended.value("reason", "").find("exit code 4"), std::string::npos);
  WaitFor(running, "succeeded");
  WaitFor(queued, "succeeded");
}

TEST_F(DaemonTest, GarbageAndOversizedRequestsGetErrorsAndTheDaemonKeepsServing) {
  config_.max_request_bytes = 64 * 1024;
  Start();
  auto raw = [&](const std::string& bytes, bool wait_for_reply = true) {
    const int fd = socket(AF_UNIX, SOCK_STREAM, 0);
    sockaddr_un a{};
    a.sun_family = AF_UNIX;
    strcpy(a.sun_path, config_.socket.c_str());
    EXPECT_EQ(connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
    (void)!send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL);
    std::string reply;
    if (!wait_for_reply) {
      close(fd);
      return reply;
    }
    char buffer[4096];
    ssize_t n;
    while ((n = recv(fd, buffer, sizeof buffer, 0)) > 0) {
      reply.append(buffer, static_cast<size_t>(n));
      if (reply.find('\n') != std::string::npos) break;
    }
    close(fd);
    return reply;
  };
  EXPECT_NE(raw("hello?\n").find("not a JSON object"), std::string::npos);
  EXPECT_NE(raw("{\"op\":\"submit\"}\n").find("unsupported API version"), std::string::npos);
  EXPECT_NE(raw("{\"api\":1,\"op\":\"launch-missiles\"}\n").find("unknown op"), std::string::npos);
  EXPECT_NE(raw("{\"api\":1,\"op\":\"submit\",\"command\":[1,2]}\n").find("must be a string"),
            std::string::npos);
  EXPECT_NE(raw("{\"api\":1,\"op\":\"show\",\"job\":\"x\"}\n").find("malformed request"),
            std::string::npos);
  EXPECT_NE(raw(std::string(200 * 1024, 'x')).find("request larger than"), std::string::npos);
  raw("{\"api\":1,\"op\":\"sub", false);  // truncated, then the client goes away
  const json bad_gpus =
      Call({{"op", "submit"}, {"command", {"true"}}, {"gpus", 3}, {"workdir", dir_}});
  EXPECT_NE(bad_gpus.value("error", "").find("needs 3 GPUs on one server"), std::string::npos);
  const json bad_mem =
      Call({{"op", "submit"}, {"command", {"true"}}, {"memory", "lots"}, {"workdir", dir_}});
  EXPECT_NE(bad_mem.value("error", "").find("--mem"), std::string::npos);
  EXPECT_EQ(Call({{"op", "hello"}}).value("server", ""), "colod");
}

TEST_F(DaemonTest, AThousandConcurrentSubmissionsAreAllAcceptedOnce) {
  config_.max_clients = 64;
  Start();
  // Too big to run now, so they all wait: this is about accepting, not running.
  std::vector<std::thread> clients;
  std::vector<std::vector<JobId>> ids(8);
  for (int c = 0; c < 8; ++c) {
    clients.emplace_back([&, c] {
      auto client = ApiClient::Connect(config_.socket);
      ASSERT_TRUE(client.ok());
      for (int i = 0; i < 125; ++i) {
        auto r = client->Call({{"op", "submit"},
                               {"command", {"true"}},
                               {"memory", "79GiB"},
                               {"gpus", 2},
                               {"workdir", dir_}});
        ASSERT_TRUE(r.ok()) << r.status().message();
        ids[c].push_back((*r)["job"].get<JobId>());
      }
    });
  }
  const auto began = std::chrono::steady_clock::now();
  // The daemon answers other clients meanwhile.
  EXPECT_EQ(Call({{"op", "hello"}}).value("server", ""), "colod");
  for (auto& t : clients) t.join();
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - began).count();
  std::set<JobId> unique;
  for (const auto& list : ids) unique.insert(list.begin(), list.end());
  EXPECT_EQ(unique.size(), 1000u);
  const json queue = Call({{"op", "queue"}});
  EXPECT_EQ(queue["jobs"].size(), 1000u);
  RecordProperty("seconds_for_1000_submissions", std::to_string(seconds));
}

TEST_F(DaemonTest, AHungGpuSamplerDoesNotStallTheApi) {
  Start();
  gpus_.Hang(true);
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  const JobId id = Submit({"true"});
  EXPECT_EQ(WaitFor(id, "succeeded").value("state", ""), "succeeded");
  EXPECT_EQ(Call({{"op", "gpus"}})["gpus"].size(), 2u);
  gpus_.Hang(false);
}

TEST_F(DaemonTest, JobsRunAsTheirSubmitterWhoMayCancelOnlyTheirOwn) {
  if (geteuid() != 0 || access("/usr/sbin/runuser", X_OK) != 0)
    GTEST_SKIP() << "needs root and runuser to act as another user";
  chmod(dir_.c_str(), 0755);
  Start();
  const std::string colo = (fs::path(COLO_SHIM_PATH).parent_path() / "colo").string();
  auto as_nobody = [&](const std::string& args) {
    const std::string command = fmt::format(
        "cd /tmp && runuser -u nobody -- {} --socket {} {} 2>&1", colo, config_.socket, args);
    std::string output;
    FILE* pipe = popen(command.c_str(), "r");
    char buffer[512];
    while (pipe && fgets(buffer, sizeof buffer, pipe)) output += buffer;
    if (pipe) pclose(pipe);
    return output;
  };
  const std::string submitted = as_nobody("submit --mem 1GiB -- sh -c 'id -u; sleep 30'");
  ASSERT_EQ(submitted.rfind("Submitted job ", 0), 0u) << submitted;
  const JobId theirs = std::stoll(submitted.substr(14));
  WaitFor(theirs, "running");
  const JobId mine = Submit({"sleep", "30"});
  WaitFor(mine, "running");
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  EXPECT_EQ(as_nobody(fmt::format("logs {}", theirs)), "65534\n");  // not root: nobody
  EXPECT_NE(as_nobody(fmt::format("cancel {}", mine)).find("only its owner or root may cancel it"),
            std::string::npos);
  EXPECT_NE(as_nobody(fmt::format("cancel {}", theirs)).find("cancelling"), std::string::npos);
  WaitFor(theirs, "cancelled");
  EXPECT_EQ(Show(mine).value("state", ""), "running");
  EXPECT_TRUE(Call({{"op", "cancel"}, {"job", mine}}).value("ok", false));  // root may
  WaitFor(mine, "cancelled");
}

TEST_F(DaemonTest, MetricsSpeakPrometheusText) {
  config_.metrics_enabled = true;
  config_.metrics_port = 19000 + getpid() % 1000;
  Start();
  gpus_.SetUtilization(1, 0.5);
  Submit({"true"});
  std::this_thread::sleep_for(std::chrono::milliseconds(400));
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(config_.metrics_port));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
  const std::string request = "GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n";
  (void)!send(fd, request.data(), request.size(), 0);
  std::string body;
  char buffer[4096];
  ssize_t n;
  while ((n = recv(fd, buffer, sizeof buffer, 0)) > 0) body.append(buffer, static_cast<size_t>(n));
  close(fd);
  EXPECT_NE(body.find("HTTP/1.1 200 OK"), std::string::npos);
  EXPECT_NE(body.find("colo_gpu_smact{gpu=\"1\",uuid=\"GPU-fake-0001\"} 0.5"), std::string::npos);
  EXPECT_NE(body.find("colo_gpu_power_watts{gpu=\"1\""), std::string::npos);
  EXPECT_NE(body.find("colo_placements_total{policy=\"worst-fit:margin=2GiB,smact=0.8\"} 1"),
            std::string::npos)
      << body;
  EXPECT_NE(body.find("colo_scheduler_pass_seconds_count"), std::string::npos);
}

}  // namespace
}  // namespace colo
