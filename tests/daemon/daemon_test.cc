// colod end to end, in process: real sockets, real SQLite, real processes through colo-shim,
// fake GPUs. (The real binaries are tested by tests/e2e; the lifecycle's corner cases by
// job_controller_test with fakes.)
#include "daemon/daemon.h"

#include <arpa/inet.h>
#include <fcntl.h>
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
#include <regex>
#include <set>
#include <thread>

#include "api/client.h"
#include "gpu/fake_gpus.h"

namespace colo {
namespace {

namespace fs = std::filesystem;

class DaemonTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char pattern[] = "/tmp/colod-test-XXXXXX";
    dir_ = mkdtemp(pattern);
    config_.state_dir = dir_ + "/state";
    config_.socket = dir_ + "/run/colod.sock";
    config_.shim = COLO_SHIM_PATH;
    config_.mps_enabled = false;  // fake GPUs have no MPS; jobs share plainly
    config_.scheduler.launch_grace = Seconds(0);
    config_.scheduler.sample_interval = SecondsF(0.1);
    config_.cancel_grace = SecondsF(0.5);
    config_.leftover_grace = SecondsF(0.5);
  }
  void TearDown() override {
    Stop();
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

  template <typename Req>
  auto Call(const Req& request) {
    auto client = api::Client::Connect(config_.socket);
    EXPECT_TRUE(client.ok()) << client.status().message();
    return client->Call(request);
  }
  JobId Submit(std::vector<std::string> command, std::optional<Bytes> memory = GiB(8),
               int64_t time_limit_s = 0) {
    api::SubmitRequest r;
    r.command = std::move(command);
    r.memory = memory;
    r.time_limit_s = time_limit_s;
    r.context.workdir = dir_;
    r.env = {"PATH=/usr/bin:/bin"};
    auto reply = Call(r);
    EXPECT_TRUE(reply.ok()) << reply.status().message();
    return reply.ok() ? reply->job : 0;
  }
  api::JobDetail Show(JobId id) {
    auto reply = Call(api::ShowRequest{id});
    EXPECT_TRUE(reply.ok()) << reply.status().message();
    return reply.ok() ? reply->job : api::JobDetail{};
  }
  api::JobDetail WaitFor(JobId id, JobState state, double seconds = 15) {
    const auto until = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
    api::JobDetail job;
    while (std::chrono::steady_clock::now() < until) {
      job = Show(id);
      if (job.summary.state == state) return job;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    ADD_FAILURE() << "job " << id << " never reached " << ToString(state) << ", it is "
                  << ToString(job.summary.state) << " (" << job.summary.reason << ")";
    return job;
  }
  // One raw line to colod, its reply line back.
  std::string Raw(const std::string& bytes) {
    const int fd = socket(AF_UNIX, SOCK_STREAM, 0);
    sockaddr_un a{};
    a.sun_family = AF_UNIX;
    strcpy(a.sun_path, config_.socket.c_str());
    EXPECT_EQ(connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
    (void)!send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL);
    std::string reply;
    char buffer[4096];
    ssize_t n;
    while ((n = recv(fd, buffer, sizeof buffer, 0)) > 0) {
      reply.append(buffer, static_cast<size_t>(n));
      if (reply.find('\n') != std::string::npos) break;
    }
    close(fd);
    return reply;
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
  const api::JobDetail job = WaitFor(id, JobState::kSucceeded);
  ASSERT_EQ(job.attempt_list.size(), 1u);
  auto logs = Call(api::LogsRequest{id});
  ASSERT_TRUE(logs.ok());
  std::ifstream out(logs->stdout_path);
  std::string line1, line2;
  std::getline(out, line1);
  std::getline(out, line2);
  EXPECT_EQ(line1, fmt::format("visible={} job={}", job.summary.gpu_uuids.at(0), id));
  EXPECT_EQ(line2, fs::canonical(dir_).string());
}

TEST_F(DaemonTest, StateIsOwnerOnly) {
  Start();
  Submit({"true"});
  struct stat st {};
  for (const char* file : {"/colo.db", "/colo.db-wal", "/colod.lock"}) {
    ASSERT_EQ(stat((config_.state_dir + file).c_str(), &st), 0) << file;
    EXPECT_EQ(st.st_mode & 077, 0u) << file << " is readable by others";
  }
  ASSERT_EQ(stat(config_.state_dir.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 044, 0u) << "the state directory can be listed by others";
}

TEST_F(DaemonTest, OutOfMemoryIsRecoveredWithALargerNeedAndOtherFailuresAreNot) {
  Start();
  // The first attempt reports a PyTorch OOM after its memory was seen at 10 GiB; the second works.
  const JobId oom = Submit({"sh", "-c",
                            "if [ \"$COLO_ATTEMPT\" = 1 ]; then sleep 0.5; echo "
                            "'torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 "
                            "GiB' >&2; exit 1; fi; echo recovered"},
                           GiB(4));
  const api::JobDetail running = WaitFor(oom, JobState::kRunning);
  const int pid = running.attempt_list.at(0).pid;
  gpus_.SetProcessMemory(running.attempt_list[0].gpus.at(0), pid, GiB(10));
  const api::JobDetail done = WaitFor(oom, JobState::kSucceeded);
  gpus_.RemoveProcess(pid);
  ASSERT_EQ(done.attempt_list.size(), 2u);
  EXPECT_EQ(done.attempt_list[0].exit_kind, "out-of-memory");
  EXPECT_EQ(done.attempt_list[0].peak, GiB(10));
  // Adaptive recovery (core/recovery.h): 10 GiB seen + the 2 GiB it tried, at its budget (the
  // 4 GiB plan, raised to 11 GiB by its use): limit-bound, x2.4 + 512 MiB.
  EXPECT_EQ(done.summary.memory, GiB(12).Scaled(2.4) + MiB(512));
  EXPECT_EQ(done.summary.reason, "");

  const JobId failing = Submit({"sh", "-c", "echo 'ValueError: nope' >&2; exit 3"});
  const api::JobDetail failed = WaitFor(failing, JobState::kFailed);
  EXPECT_EQ(failed.attempt_list.size(), 1u);
  EXPECT_NE(failed.summary.reason.find("exit code 3"), std::string::npos);
}

// A job queued behind a run of the same model plans with that run's peak once it succeeds.
TEST_F(DaemonTest, QueuedJobsOfAModelThatJustRanPlanWithItsPeak) {
  Start();
  api::JobEstimate estimate;
  estimate.estimator = "trace";
  estimate.peak = estimate.lower = GiB(40);
  estimate.upper = GiB(45);
  estimate.signature = "big-b32";
  auto submit_estimated = [&](std::vector<std::string> command) {
    api::SubmitRequest r;
    r.command = std::move(command);
    r.estimate = estimate;
    r.context.workdir = dir_;
    auto reply = Call(r);
    EXPECT_TRUE(reply.ok()) << reply.status().message();
    return reply.ok() ? reply->job : 0;
  };
  // Each runs until the test lets it end, however slow the build.
  auto until = [&](const std::string& file) -> std::vector<std::string> {
    return {"sh", "-c", fmt::format("while [ ! -e {} ]; do sleep 0.05; done", file)};
  };
  const std::string release_blocker = dir_ + "/release-blocker";
  const std::string release_first = dir_ + "/release-first";
  const JobId blocker = Submit(until(release_blocker), GiB(70));  // one GPU is full
  WaitFor(blocker, JobState::kRunning);
  const JobId first = submit_estimated(until(release_first));
  const api::JobDetail running = WaitFor(first, JobState::kRunning);
  EXPECT_EQ(running.need_source, "estimated");
  const int pid = running.attempt_list.at(0).pid;
  gpus_.SetProcessMemory(running.attempt_list[0].gpus.at(0), pid, GiB(20));
  const JobId second = submit_estimated({"true"});
  EXPECT_EQ(Show(second).summary.state, JobState::kQueued);
  // It ends once colod has seen its peak.
  for (int i = 0; i < 500 && Show(first).attempt_list.at(0).peak < GiB(20); ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  std::ofstream(release_first).put('\n');
  WaitFor(first, JobState::kSucceeded);
  gpus_.RemoveProcess(pid);
  const api::JobDetail done = WaitFor(second, JobState::kSucceeded);
  ASSERT_TRUE(done.estimate && done.estimate->learned);
  EXPECT_EQ(done.estimate->learned->runs, 1);
  EXPECT_EQ(done.attempt_list.at(0).memory_limit, GiB(22));  // the peak seen plus 10%
  std::ofstream(release_blocker).put('\n');
  WaitFor(blocker, JobState::kSucceeded);
}

TEST_F(DaemonTest, CancelEndsEveryProcessOfTheJobEvenOnesThatLeftItsSession) {
  Start();
  const std::string marker = dir_ + "/escaped.pid";
  const JobId id = Submit({"sh", "-c",
                           fmt::format("setsid sh -c 'echo $$ > {}; exec sleep 60' & "
                                       "sleep 60; wait",
                                       marker)});
  WaitFor(id, JobState::kRunning);
  int escaped = 0;
  for (int i = 0; i < 200 && escaped == 0; ++i) {
    std::ifstream in(marker);
    in >> escaped;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  ASSERT_GT(escaped, 0);
  auto cancel = Call(api::CancelRequest{id});
  ASSERT_TRUE(cancel.ok()) << cancel.status().message();
  EXPECT_EQ(cancel->state, "cancelling");
  WaitFor(id, JobState::kCancelled);
  EXPECT_NE(kill(escaped, 0), 0) << "a process that left the job's session survived the cancel";
  auto again = Call(api::CancelRequest{id});
  ASSERT_FALSE(again.ok());
  EXPECT_EQ(again.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(Call(api::CancelRequest{999}).status().code(), StatusCode::kNotFound);
}

TEST_F(DaemonTest, RestartLosesNoJobAndReadoptsRunningOnes) {
  Start();
  // It runs until the test lets it end, so that it still runs after the restart however slow
  // the build.
  const std::string release = dir_ + "/release";
  const JobId running = Submit(
      {"sh", "-c", fmt::format("while [ ! -e {} ]; do sleep 0.05; done; echo survived", release)},
      GiB(70));
  const JobId ends_while_down = Submit({"sh", "-c", "sleep 0.3; exit 4"}, GiB(70));
  const JobId queued = Submit({"true"}, GiB(70));  // both GPUs are full: it waits
  WaitFor(running, JobState::kRunning);
  WaitFor(ends_while_down, JobState::kRunning);
  Stop();
  std::this_thread::sleep_for(std::chrono::milliseconds(600));
  Start();
  const api::JobDetail adopted = Show(running);
  EXPECT_EQ(adopted.summary.state, JobState::kRunning);
  bool saw_adoption = false;
  for (const auto& e : adopted.events) saw_adoption |= e.kind == "adopted";
  EXPECT_TRUE(saw_adoption);
  const api::JobDetail ended = WaitFor(ends_while_down, JobState::kFailed);
  EXPECT_NE(ended.summary.reason.find("exit code 4"), std::string::npos);
  std::ofstream(release).put('\n');
  WaitFor(running, JobState::kSucceeded);
  WaitFor(queued, JobState::kSucceeded);
}

// A second colod on the same state directory is another process, refused by the state lock (a
// record lock, which a process never conflicts with itself on): tests/e2e/test_faults.py's
// TwoDaemons.test_second_colod_on_one_state_directory starts it so. Here: the same socket.
TEST_F(DaemonTest, ASecondColodOnTheSameSocketRefusesAndLeavesTheFirstAlone) {
  Start();
  FakeGpus other_gpus{1, GiB(80)};
  // The same socket, another state directory: refused, and the socket still serves.
  DaemonConfig third = config_;
  third.state_dir = dir_ + "/state3";
  auto also_refused = Daemon::Create(Daemon::Options{third, false}, other_gpus);
  ASSERT_FALSE(also_refused.ok());
  EXPECT_NE(also_refused.status().message().find("another colod is serving"), std::string::npos);
  auto hello = Call(api::HelloRequest{});
  ASSERT_TRUE(hello.ok()) << hello.status().message();
}

TEST_F(DaemonTest, GarbageRequestsGetErrorsAndTheDaemonKeepsServing) {
  config_.max_request_bytes = 64 * 1024;
  Start();
  EXPECT_NE(Raw("hello?\n").find("not a JSON object"), std::string::npos);
  EXPECT_NE(Raw("{\"api\":\"1\",\"op\":\"hello\"}\n").find("unsupported API version"),
            std::string::npos);
  EXPECT_NE(Raw("{\"api\":null,\"op\":\"hello\"}\n").find("unsupported API version"),
            std::string::npos);
  EXPECT_NE(Raw("{\"api\":1,\"op\":\"launch-missiles\"}\n").find("unknown op"), std::string::npos);
  EXPECT_NE(Raw("{\"api\":1,\"op\":\"submit\",\"command\":[1,2]}\n").find("list of strings"),
            std::string::npos);
  EXPECT_NE(
      Raw("{\"api\":1,\"op\":\"show\",\"job\":\"x\"}\n").find("\"code\":\"invalid_argument\""),
      std::string::npos);
  const std::string long_name(300, 'a');
  EXPECT_NE(Raw(fmt::format("{{\"api\":1,\"op\":\"submit\",\"command\":[\"true\"],\"workdir\":"
                            "\"/tmp/{}\"}}\n",
                            long_name))
                .find("255"),
            std::string::npos);
  EXPECT_NE(Raw(std::string(200 * 1024, 'x')).find("request larger than"), std::string::npos);
  auto bad_gpus = [&] {
    api::SubmitRequest r;
    r.command = {"true"};
    r.gpus = 3;
    r.context.workdir = dir_;
    return Call(r);
  }();
  ASSERT_FALSE(bad_gpus.ok());
  EXPECT_EQ(bad_gpus.status().code(), StatusCode::kInfeasible);
  EXPECT_NE(bad_gpus.status().message().find("needs 3 GPUs"), std::string::npos);
  auto hello = Call(api::HelloRequest{});
  ASSERT_TRUE(hello.ok());
  EXPECT_EQ(hello->server, "colod");
}

TEST_F(DaemonTest, AJobWhoseOutputIsNotUtf8IsStoredAndShown) {
  Start();
  // A progress bar killed mid-character, and bytes that are never UTF-8, end the job's stderr.
  const JobId id =
      Submit({"sh", "-c", "printf 'Error: boom \\342\\226\\210\\342\\226' >&2; exit 2"});
  const api::JobDetail failed = WaitFor(id, JobState::kFailed);
  EXPECT_NE(failed.summary.reason.find("boom"), std::string::npos);
  Stop();
  Start();  // and colod comes back up with it stored
  EXPECT_EQ(Show(id).summary.state, JobState::kFailed);
}

TEST_F(DaemonTest, AClientThatNeverReadsDoesNotGrowColodAndOthersAreServed) {
  Start();
  const int fd = socket(AF_UNIX, SOCK_STREAM, 0);
  sockaddr_un a{};
  a.sun_family = AF_UNIX;
  strcpy(a.sun_path, config_.socket.c_str());
  ASSERT_EQ(connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
  const int flags = fcntl(fd, F_GETFL);
  fcntl(fd, F_SETFL, flags | O_NONBLOCK);
  std::string burst;
  for (int i = 0; i < 2000; ++i) burst += "{\"api\":1,\"op\":\"gpus\"}\n";
  size_t sent = 0;
  for (int round = 0; round < 50; ++round) {
    const ssize_t n = send(fd, burst.data(), burst.size(), MSG_NOSIGNAL);
    if (n > 0) sent += static_cast<size_t>(n);
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  // colod stopped reading this client once its replies piled up: not everything was taken.
  EXPECT_LT(sent, 50 * burst.size());
  auto hello = Call(api::HelloRequest{});
  EXPECT_TRUE(hello.ok()) << hello.status().message();
  close(fd);
}

TEST_F(DaemonTest, OneUserCannotTakeEveryConnection) {
  config_.max_clients_per_user = 4;
  config_.max_clients = 8;
  if (geteuid() == 0) GTEST_SKIP() << "root is exempt from the per-user limit";
  Start();
  std::vector<api::Client> held;
  for (int i = 0; i < 4; ++i) {
    auto c = api::Client::Connect(config_.socket);
    ASSERT_TRUE(c.ok());
    ASSERT_TRUE(c->Call(api::HelloRequest{}).ok());
    held.push_back(std::move(*c));
  }
  auto fifth = Call(api::HelloRequest{});
  ASSERT_FALSE(fifth.ok());
  EXPECT_NE(fifth.status().message().find("too many connections"), std::string::npos);
}

TEST_F(DaemonTest, IdleConnectionsAreClosed) {
  config_.idle_timeout = SecondsF(0.3);
  Start();
  auto c = api::Client::Connect(config_.socket);
  ASSERT_TRUE(c.ok());
  std::this_thread::sleep_for(std::chrono::milliseconds(900));
  EXPECT_FALSE(c->Call(api::HelloRequest{}).ok()) << "an idle connection was kept open";
}

TEST_F(DaemonTest, AThousandConcurrentSubmissionsAreAllAcceptedOnce) {
  config_.max_clients = 64;
  Start();
  // A job holding both GPUs makes them all wait: this is about accepting, not running.
  api::SubmitRequest blocker;
  blocker.command = {"sleep", "600"};
  blocker.memory = GiB(70);
  blocker.gpus = 2;
  blocker.context.workdir = dir_;
  auto blocking = Call(blocker);
  ASSERT_TRUE(blocking.ok()) << blocking.status().message();
  WaitFor(blocking->job, JobState::kRunning);
  std::vector<std::thread> clients;
  std::vector<std::vector<JobId>> ids(8);
  for (int c = 0; c < 8; ++c) {
    clients.emplace_back([&, c] {
      auto client = api::Client::Connect(config_.socket);
      ASSERT_TRUE(client.ok());
      for (int i = 0; i < 125; ++i) {
        api::SubmitRequest r;
        r.command = {"true"};
        r.memory = GiB(70);
        r.gpus = 2;
        r.context.workdir = dir_;
        auto reply = client->Call(r);
        ASSERT_TRUE(reply.ok()) << reply.status().message();
        ids[c].push_back(reply->job);
      }
    });
  }
  // The daemon answers other clients meanwhile.
  EXPECT_TRUE(Call(api::HelloRequest{}).ok());
  for (auto& t : clients) t.join();
  std::set<JobId> unique;
  for (const auto& list : ids) unique.insert(list.begin(), list.end());
  EXPECT_EQ(unique.size(), 1000u);
  auto queue = Call(api::QueueRequest{});  // the first page, and the count of them all
  ASSERT_TRUE(queue.ok());
  EXPECT_EQ(queue->jobs.size(), static_cast<size_t>(api::kMaxQueuePage));
  EXPECT_EQ(queue->running + queue->waiting, 1001);
  EXPECT_TRUE(Call(api::CancelRequest{blocking->job}).ok());
}

TEST_F(DaemonTest, AHungGpuSamplerDoesNotStallTheApi) {
  Start();
  gpus_.Hang(true);
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  const JobId id = Submit({"true"});
  EXPECT_EQ(WaitFor(id, JobState::kSucceeded).summary.state, JobState::kSucceeded);
  auto gpus = Call(api::GpusRequest{});
  ASSERT_TRUE(gpus.ok());
  EXPECT_EQ(gpus->gpus.size(), 2u);
  gpus_.Hang(false);
}

// `colo explain` on a head that only a launch grace keeps off a GPU: its reservation comes from the
// grace's end, not from a job's, and says so (no list of jobs, empty, that it waits for), whether
// or not a running job's end is known.
class GraceReservationTest : public DaemonTest, public ::testing::WithParamInterface<int64_t> {};

TEST_P(GraceReservationTest, SaysItAwaitsALaunchGraceAndNamesNoJobs) {
  config_.policy = "worst-fit:utilization=off";
  config_.scheduler.launch_grace = Seconds(120);
  Start();
  WaitFor(Submit({"sleep", "20"}, GiB(70), /*time_limit_s=*/GetParam()), JobState::kRunning);
  const JobId second = Submit({"sleep", "20"}, GiB(8));
  WaitFor(second, JobState::kRunning);
  const JobId head = Submit({"true"}, GiB(60));
  std::string why;
  for (int i = 0; i < 200 && why.empty(); ++i) {
    auto reply = Call(api::ExplainRequest{head});
    ASSERT_TRUE(reply.ok()) << reply.status().message();
    why = reply->reservation;
    if (why.empty()) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  ASSERT_FALSE(why.empty()) << "job " << head << " is the head, backfill keeps GPUs for it";
  EXPECT_EQ(why.find("jobs  end"), std::string::npos) << why;
  EXPECT_NE(why.find("when the launch grace there ends"), std::string::npos) << why;
}

// The first job with a --time limit (its end known), and without.
INSTANTIATE_TEST_SUITE_P(DaemonTest, GraceReservationTest, ::testing::Values(3600, 0));

// A head that waits for a job past its --time limit, being stopped (it ignores SIGTERM until the
// SIGKILL the timeout grace ends in): the job's end is expected now, and colo explain, asked a
// moment later, says the GPU is free as soon as that job ends, not "from about -N s from now".
TEST_F(DaemonTest, AReservationForAJobPastItsTimeLimitSaysNoTimeInThePast) {
  config_.policy = "worst-fit:utilization=off";
  config_.timeout_grace = Seconds(10);
  Start();
  const JobId stopping = Submit({"sh", "-c", "trap '' TERM; sleep 6"}, GiB(70), /*time_limit_s=*/1);
  WaitFor(stopping, JobState::kRunning);
  WaitFor(Submit({"sleep", "8"}, GiB(70)), JobState::kRunning);
  const JobId head = Submit({"true"}, GiB(60));
  std::this_thread::sleep_for(std::chrono::milliseconds(3000));  // job 1 past its limit
  auto reply = Call(api::ExplainRequest{head});
  ASSERT_TRUE(reply.ok()) << reply.status().message();
  const std::string why = reply->reservation;
  ASSERT_NE(why.find(fmt::format("as soon as job {} ends", stopping)), std::string::npos) << why;
  EXPECT_EQ(why.find("about -"), std::string::npos) << why;
}

TEST_F(DaemonTest, HistoryComesInPagesNewestFirst) {
  Start();
  std::vector<JobId> ids;
  for (int i = 0; i < 7; ++i) ids.push_back(Submit({"true"}, GiB(1)));
  for (JobId id : ids) WaitFor(id, JobState::kSucceeded);
  std::vector<JobId> seen;
  api::HistoryRequest request;
  request.limit = 3;
  for (;;) {
    auto page = Call(request);
    ASSERT_TRUE(page.ok()) << page.status().message();
    for (const auto& j : page->jobs) seen.push_back(j.id);
    if (!page->next) break;
    request.before = page->next;
  }
  std::vector<JobId> expected(ids.rbegin(), ids.rend());
  EXPECT_EQ(seen, expected);
}

TEST_F(DaemonTest, MetricsSpeakPrometheusTextOnTheirOwnPort) {
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
  EXPECT_TRUE(std::regex_search(
      body, std::regex(R"(\ncolo_gpu_sm_active_ratio\{gpu="1",UUID="GPU-fake-0001",)"
                       R"(modelName="[^"]+",Hostname="[^"]*",source="fake"\} 0.5\n)")))
      << body;
  EXPECT_EQ(body.find("-1\n"), std::string::npos) << "a missing value is an absent series";
  EXPECT_NE(body.find("colo_placements_total{policy=\"worst-fit\"} 1"), std::string::npos) << body;
  EXPECT_NE(body.find("colo_scheduler_pass_seconds_count"), std::string::npos);
}

}  // namespace
}  // namespace colo
