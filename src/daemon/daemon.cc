#include "daemon/daemon.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <fmt/format.h>
#include <netinet/in.h>
#include <poll.h>
#include <pwd.h>
#include <signal.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>

#include "daemon/api.h"
#include "daemon/process.h"
#include "estimate/job_estimators.h"
#include "policies/gated_policy.h"
#include "policies/registry.h"

namespace colo {

using nlohmann::json;
namespace fs = std::filesystem;

namespace {

constexpr double kPassBuckets[] = {1e-5, 2.5e-5, 5e-5, 1e-4, 2.5e-4, 5e-4, 1e-3, 1e-2, 1e-1};

std::string UserName(unsigned uid) {
  std::vector<char> buffer(4096);
  passwd pw{};
  passwd* found = nullptr;
  if (getpwuid_r(uid, &pw, buffer.data(), buffer.size(), &found) == 0 && found) return pw.pw_name;
  return fmt::format("uid{}", uid);
}

bool Active(const std::string& state) {
  return state == "queued" || state == "recovering" || state == "running";
}

json Error(const std::string& message) {
  return json{{"ok", false}, {"error", message}};
}

}  // namespace

Daemon::Daemon(Options options, GpuBackend& gpus)
    : config_(std::move(options.config)),
      handle_signals_(options.handle_signals),
      gpus_(gpus),
      pass_buckets_(std::size(kPassBuckets) + 1, 0) {}

Result<std::unique_ptr<Daemon>> Daemon::Create(Options options, GpuBackend& gpus) {
  std::unique_ptr<Daemon> daemon(new Daemon(std::move(options), gpus));
  COLO_RETURN_IF_ERROR(daemon->Init());
  return daemon;
}

Daemon::~Daemon() {
  {
    std::lock_guard lock(sample_mutex_);
    sampler_stop_ = true;
  }
  sampler_cv_.notify_all();
  if (sampler_.joinable()) {
    // A sampler stuck in a driver call cannot be joined: after a bounded wait it is left to the
    // process exit (colod exits right after; tests release their fake hang first).
    std::unique_lock lock(sample_mutex_);
    if (sampler_cv_.wait_for(lock, std::chrono::seconds(2), [&] { return sampler_exited_; })) {
      lock.unlock();
      sampler_.join();
    } else {
      lock.unlock();
      sampler_.detach();
    }
  }
  for (auto& [fd, client] : clients_) close(fd);
  for (int fd : {listen_fd_, metrics_fd_, signal_fd_, wake_fd_}) {
    if (fd >= 0) close(fd);
  }
  if (!config_.socket.empty()) unlink(config_.socket.c_str());
  if (mps_) mps_->Stop();
}

double Daemon::WallSeconds() const {
  return std::chrono::duration<double>(clock_.WallNow().time_since_epoch()).count();
}

Status Daemon::Init() {
  std::error_code ec;
  fs::create_directories(config_.state_dir + "/jobs", ec);
  if (ec) return Unavailable(fmt::format("cannot create {}: {}", config_.state_dir, ec.message()));
  auto store = Store::Open(config_.state_dir + "/colo.db");
  if (!store.ok()) return store.status();
  store_ = std::move(*store);

  auto policy = MakePolicy(config_.PolicySpec());
  if (!policy.ok()) return policy.status();
  policy_ = std::move(*policy);
  scheduler_ = std::make_unique<Scheduler>(clock_, *policy_, config_.scheduler);
  for (const DeviceInfo& d : gpus_.devices()) {
    GpuInfo info;
    info.uuid = d.uuid;
    info.model = d.name;
    info.capacity = d.memory_total;
    info.mig_instance = d.mig_index >= 0;
    info.default_mode = config_.default_mode;
    for (const std::string& key : {d.uuid, std::to_string(scheduler_->gpu_count())}) {
      if (auto it = config_.per_gpu.find(key); it != config_.per_gpu.end())
        info.default_mode = it->second;
    }
    // Without MPS, a GPU meant for MPS shares plainly (and says so once, at start).
    if (info.default_mode == SharingMode::kMps && !config_.mps_enabled)
      info.default_mode = SharingMode::kPlain;
    scheduler_->AddGpu(info);
  }

  if (config_.mps_enabled) {
    mps_ = std::make_unique<MpsDaemon>(
        MpsSettings{config_.mps_control, config_.mps_pipe_dir, config_.mps_log_dir});
  }

  // Children of jobs whose shim died are re-parented to colod, which reaps them.
  prctl(PR_SET_CHILD_SUBREAPER, 1);
  if (handle_signals_) {
    sigset_t set;
    sigemptyset(&set);
    for (int s : {SIGCHLD, SIGTERM, SIGINT, SIGHUP}) sigaddset(&set, s);
    pthread_sigmask(SIG_BLOCK, &set, nullptr);
    signal_fd_ = signalfd(-1, &set, SFD_CLOEXEC | SFD_NONBLOCK);
  }
  signal(SIGPIPE, SIG_IGN);
  wake_fd_ = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);

  // The API socket: any local user may connect; who they are comes from SO_PEERCRED.
  fs::create_directories(fs::path(config_.socket).parent_path(), ec);
  if (ec) return Unavailable(fmt::format("cannot create the socket directory: {}", ec.message()));
  chmod(fs::path(config_.socket).parent_path().c_str(), 0755);
  if (auto probe = ApiClient::Connect(config_.socket); probe.ok())
    return FailedPrecondition(fmt::format("another colod is serving {}", config_.socket));
  unlink(config_.socket.c_str());
  listen_fd_ = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  sockaddr_un address{};
  address.sun_family = AF_UNIX;
  if (config_.socket.size() >= sizeof address.sun_path)
    return InvalidArgument("socket path too long: " + config_.socket);
  memcpy(address.sun_path, config_.socket.c_str(), config_.socket.size() + 1);
  if (bind(listen_fd_, reinterpret_cast<sockaddr*>(&address), sizeof address) != 0 ||
      listen(listen_fd_, 512) != 0)
    return Unavailable(fmt::format("cannot listen on {}: {}", config_.socket, strerror(errno)));
  chmod(config_.socket.c_str(), 0666);

  if (config_.metrics_enabled) {
    metrics_fd_ = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    int one = 1;
    setsockopt(metrics_fd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    sockaddr_in in{};
    in.sin_family = AF_INET;
    in.sin_port = htons(static_cast<uint16_t>(config_.metrics_port));
    if (inet_pton(AF_INET, config_.metrics_address.c_str(), &in.sin_addr) != 1)
      return InvalidArgument("metrics.address is not an IPv4 address: " + config_.metrics_address);
    if (bind(metrics_fd_, reinterpret_cast<sockaddr*>(&in), sizeof in) != 0 ||
        listen(metrics_fd_, 16) != 0)
      return Unavailable(fmt::format("cannot listen for metrics on {}:{}: {}",
                                     config_.metrics_address, config_.metrics_port,
                                     strerror(errno)));
  }
  COLO_RETURN_IF_ERROR(Recover());
  sampler_started_at_ = clock_.Now();
  sampler_ = std::thread([this] { SamplerLoop(); });
  return Status::Ok();
}

// --- Restart: every job the database knows comes back, running ones re-adopted. ---
Status Daemon::Recover() {
  auto loaded = store_->LoadAll();
  if (!loaded.ok()) return loaded.status();
  std::map<std::string, GpuIndex> by_uuid;
  for (size_t g = 0; g < scheduler_->gpu_count(); ++g)
    by_uuid[scheduler_->gpu_info(static_cast<GpuIndex>(g)).uuid] = static_cast<GpuIndex>(g);
  for (JobRecordDoc& doc : *loaded) {
    const JobId id = doc.spec.id;
    jobs_[id] = doc;
    JobRecordDoc& job = jobs_[id];
    // Out-of-memory attempts so far: the retry cap and the recovery queue survive a restart.
    const int ooms = static_cast<int>(
        std::count_if(job.attempts.begin(), job.attempts.end(),
                      [](const AttemptRecord& a) { return a.exit_kind == "out-of-memory"; }));
    if (job.state == "queued" || job.state == "recovering") {
      const PriorAttempts prior{static_cast<int>(job.attempts.size()), ooms};
      if (Status s = scheduler_->Submit(job.spec, prior); !s.ok()) {
        job.state = "failed";
        job.reason = "cannot be re-queued after a restart: " + s.message();
        job.finished = WallSeconds();
        Persist(job);
      }
      continue;
    }
    if (job.state != "running") continue;
    AttemptRecord* attempt = job.current();
    std::vector<GpuIndex> gpus;
    for (const std::string& uuid : attempt ? attempt->gpu_uuids : std::vector<std::string>{}) {
      if (auto it = by_uuid.find(uuid); it != by_uuid.end()) gpus.push_back(it->second);
    }
    const auto mode = attempt && attempt->mode == "mps"     ? SharingMode::kMps
                      : attempt && attempt->mode == "plain" ? SharingMode::kPlain
                                                            : SharingMode::kExclusive;
    // Wall-clock start → the monotonic clock the scheduler uses.
    const TimePoint started =
        clock_.Now() - SecondsF(std::max(0.0, WallSeconds() - (attempt ? attempt->started : 0)));
    if (!attempt || static_cast<int>(gpus.size()) != job.spec.gpus ||
        !scheduler_
             ->Adopt(job.spec, gpus, mode, attempt->thread_percent, attempt->number, started, ooms)
             .ok()) {
      job.state = "lost";
      job.reason = "was running on GPUs this server no longer has";
      job.finished = WallSeconds();
      Persist(job);
      Event(id, "lost", job.reason);
      continue;
    }
    if (SameProcess(attempt->pid, attempt->pid_start)) {
      running_[attempt->pid] = Running{id, false, std::nullopt};
      Event(id, "adopted",
            fmt::format("attempt {} (pid {}) still running", attempt->number, attempt->pid));
    } else {
      // It ended while colod was down; the shim's exit file says how, if it got to write it.
      const auto end = ReadExitFile(attempt->exit_path);
      running_[attempt->pid] = Running{id, false, std::nullopt};
      Finish(id, end.value_or(ProcessEnd{false, 0, false}));
    }
  }
  return Status::Ok();
}

// --- Sampling thread ---
void Daemon::SamplerLoop() {
  uint64_t seq = 0;
  struct ExitMark {
    Daemon* d;
    ~ExitMark() {
      std::lock_guard lock(d->sample_mutex_);
      d->sampler_exited_ = true;
      d->sampler_cv_.notify_all();
    }
  } mark{this};
  for (;;) {
    const auto began = std::chrono::steady_clock::now();
    std::vector<DeviceSample> samples = gpus_.SampleAll();
    {
      std::lock_guard lock(sample_mutex_);
      if (sampler_stop_) return;
      latest_ = SampleSet{clock_.WallNow(), clock_.Now(), std::move(samples), ++seq};
    }
    const uint64_t one = 1;
    (void)!write(wake_fd_, &one, sizeof one);
    std::unique_lock lock(sample_mutex_);
    sampler_cv_.wait_until(lock, began + config_.scheduler.sample_interval,
                           [&] { return sampler_stop_; });
    if (sampler_stop_) return;
  }
}

void Daemon::ConsumeSamples() {
  std::optional<SampleSet> set;
  {
    std::lock_guard lock(sample_mutex_);
    if (!latest_ || latest_->seq == consumed_seq_) return;
    set = latest_;
    consumed_seq_ = latest_->seq;
  }
  // Map GPU processes to jobs: a process belongs to the job whose shim leads its session.
  std::map<int, JobId> by_session;
  for (const auto& [pid, r] : running_) by_session[pid] = r.job;
  for (size_t g = 0; g < set->devices.size() && g < scheduler_->gpu_count(); ++g) {
    const DeviceSample& s = set->devices[g];
    scheduler_->OnGpuSample(GpuSample{static_cast<GpuIndex>(g), set->time, s.memory_used,
                                      s.smact >= 0 ? s.smact : s.utilization, s.smocc, s.drama,
                                      true});
    std::map<JobId, Bytes> per_job;
    for (const ProcessMemory& p : s.processes) {
      const auto session = SessionOf(p.pid);
      if (!session) continue;
      if (auto it = by_session.find(*session); it != by_session.end())
        per_job[it->second] += p.used;
    }
    for (auto& [pid, r] : running_) {
      JobRecordDoc* doc = Find(r.job);
      if (!doc || !doc->current()) continue;
      const auto& gpus = doc->current()->gpus;
      if (std::find(gpus.begin(), gpus.end(), static_cast<int>(g)) == gpus.end()) continue;
      const Bytes used = per_job.count(r.job) ? per_job[r.job] : Bytes(0);
      scheduler_->OnJobMemory(r.job, static_cast<GpuIndex>(g), used);
      if (used.count() > doc->current()->peak) doc->current()->peak = used.count();
    }
  }
  current_ = std::move(set);
}

// --- Processes ---
void Daemon::ReapChildren() {
  for (;;) {
    int status = 0;
    const pid_t pid = waitpid(-1, &status, WNOHANG);
    if (pid <= 0) return;
    auto it = running_.find(pid);
    if (it == running_.end()) continue;  // an orphan re-parented to us, or an MPS helper
    JobRecordDoc* doc = Find(it->second.job);
    // The shim's record is the job's own status; the shim's status is the fallback.
    std::optional<ProcessEnd> end =
        doc && doc->current() ? ReadExitFile(doc->current()->exit_path) : std::nullopt;
    if (!end) {
      end = WIFSIGNALED(status) ? ProcessEnd{false, WTERMSIG(status), true}
                                : ProcessEnd{true, WEXITSTATUS(status), true};
    }
    Finish(it->second.job, *end);
  }
}

void Daemon::PollAdopted() {
  std::vector<std::pair<int, JobId>> ended;
  for (const auto& [pid, r] : running_) {
    if (r.child) continue;
    const JobRecordDoc* doc = Find(r.job);
    if (doc && doc->current() && !SameProcess(pid, doc->current()->pid_start))
      ended.push_back({pid, r.job});
  }
  for (const auto& [pid, job] : ended) {
    const JobRecordDoc* doc = Find(job);
    const auto end = ReadExitFile(doc->current()->exit_path);
    Finish(job, end.value_or(ProcessEnd{false, 0, false}));
  }
}

void Daemon::Finish(JobId id, const ProcessEnd& end) {
  JobRecordDoc* doc = Find(id);
  if (!doc || !doc->current()) return;
  AttemptRecord& attempt = *doc->current();
  running_.erase(attempt.pid);
  const std::string tail = ReadTail(attempt.stderr_path, 256 * 1024);
  const JobExit exit = ClassifyExit(end, doc->cancel_requested, tail, "");
  attempt.ended = WallSeconds();
  attempt.exit_kind = std::string(ToString(exit.kind));
  attempt.detail = exit.detail;
  const ExitAction action = scheduler_->OnJobExit(id, exit);
  if (exit.kind == ExitKind::kOutOfMemory) {
    counters_["oom_" + std::string(policy_->name())]++;
    if (action == ExitAction::kRequeuedForRecovery) {
      // Keep the raised need in the record, so a restart re-queues it with the same need.
      if (const JobRecord* r = scheduler_->job(id)) doc->spec.memory = r->need;
      counters_["oom_recoveries_" + std::string(policy_->name())]++;
    }
  }
  SyncState(*doc);
  if (exit.kind == ExitKind::kSuccess) RefineQueuedNeeds(*doc);
  Event(id, attempt.exit_kind,
        fmt::format(
            "attempt {}: {}{}", attempt.number, exit.detail.empty() ? "done" : exit.detail,
            action == ExitAction::kRequeuedForRecovery
                ? fmt::format("; re-queued needing {} per GPU", FormatBytes(doc->spec.memory.peak))
                : ""));
}

void Daemon::EscalateCancels() {
  const TimePoint now = clock_.Now();
  for (auto& [pid, r] : running_) {
    if (r.kill_at && now >= *r.kill_at) {
      kill(-pid, SIGKILL);
      r.kill_at.reset();
    }
  }
}

// --- Scheduling ---
void Daemon::SchedulePass() {
  const auto began = std::chrono::steady_clock::now();
  const std::vector<colo::Launch> launches = scheduler_->Schedule();
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - began).count();
  size_t bucket = 0;
  while (bucket < std::size(kPassBuckets) && seconds > kPassBuckets[bucket]) ++bucket;
  pass_buckets_[bucket]++;
  pass_sum_ += seconds;
  pass_count_++;
  for (const colo::Launch& launch : launches) Launch(launch);
}

void Daemon::CheckMps() {
  if (!mps_ || clock_.Now() < next_mps_check_) return;
  next_mps_check_ = clock_.Now() + config_.mps_health_interval;
  bool mps_jobs = false;
  for (const auto& [pid, r] : running_) {
    if (const JobRecordDoc* d = Find(r.job); d && d->current() && d->current()->mode == "mps")
      mps_jobs = true;
  }
  if (!mps_jobs || !mps_->started()) return;
  if (!mps_->Healthy()) {
    Event(0, "mps", "the MPS control daemon stopped answering; restarting it");
    if (Status s = mps_->EnsureRunning(); !s.ok()) Event(0, "mps", s.message());
  }
}

void Daemon::Launch(const colo::Launch& launch) {
  JobRecordDoc* doc = Find(launch.job);
  if (!doc) return;
  AttemptRecord attempt;
  attempt.number = launch.attempt;
  attempt.gpus.assign(launch.gpus.begin(), launch.gpus.end());
  for (GpuIndex g : launch.gpus) attempt.gpu_uuids.push_back(scheduler_->gpu_info(g).uuid);
  SharingMode mode = launch.mode;
  attempt.thread_percent = doc->threads > 0 ? doc->threads : launch.thread_percent;
  attempt.memory_limit = launch.memory_limit.count();
  std::vector<std::string> extra;
  if (mode == SharingMode::kMps) {
    Status mps = mps_ ? mps_->EnsureRunning() : Unavailable("MPS is disabled in the config");
    if (mps.ok()) {
      extra = mps_->ClientEnv(attempt.thread_percent, launch.memory_limit,
                              static_cast<int>(launch.gpus.size()));
    } else {
      if (mps_problem_ != mps.message()) {
        mps_problem_ = mps.message();
        Event(launch.job, "mps", "MPS unavailable, sharing without it (plain): " + mps.message());
      }
      mode = SharingMode::kPlain;
    }
  }
  attempt.mode = std::string(ToString(mode));
  const std::string dir = fmt::format("{}/jobs/{}", config_.state_dir, launch.job);
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (geteuid() == 0) (void)!chown(dir.c_str(), doc->uid, doc->gid);
  attempt.stdout_path = fmt::format("{}/attempt-{}.out", dir, attempt.number);
  attempt.stderr_path = fmt::format("{}/attempt-{}.err", dir, attempt.number);
  attempt.exit_path = fmt::format("{}/attempt-{}.exit", dir, attempt.number);
  unlink(attempt.exit_path.c_str());

  LaunchPlan plan;
  plan.shim = config_.shim;
  plan.argv = doc->spec.command;
  plan.workdir = doc->workdir;
  plan.switch_user = geteuid() == 0 && doc->uid != 0;
  plan.uid = doc->uid;
  plan.gid = doc->gid;
  plan.user = doc->spec.owner;
  plan.stdout_path = attempt.stdout_path;
  plan.stderr_path = attempt.stderr_path;
  plan.exit_path = attempt.exit_path;
  std::string visible;
  for (const auto& uuid : attempt.gpu_uuids) visible += (visible.empty() ? "" : ",") + uuid;
  for (const std::string& e : doc->env) {
    // colo decides which GPUs and which MPS the job talks to.
    if (e.rfind("CUDA_VISIBLE_DEVICES=", 0) == 0 || e.rfind("CUDA_MPS_", 0) == 0) continue;
    plan.env.push_back(e);
  }
  plan.env.push_back("CUDA_VISIBLE_DEVICES=" + visible);
  plan.env.push_back(fmt::format("COLO_JOB_ID={}", launch.job));
  plan.env.push_back(fmt::format("COLO_ATTEMPT={}", attempt.number));
  plan.env.insert(plan.env.end(), extra.begin(), extra.end());

  attempt.started = WallSeconds();
  auto started = StartAttempt(plan);
  doc->attempts.push_back(attempt);
  if (!started.ok()) {
    doc->current()->ended = WallSeconds();
    doc->current()->exit_kind = "failure";
    doc->current()->detail = started.status().message();
    scheduler_->OnJobExit(launch.job, JobExit{ExitKind::kFailure, started.status().message()});
    SyncState(*doc);
    Event(launch.job, "failure", started.status().message());
    return;
  }
  doc->current()->pid = started->pid;
  doc->current()->pid_start = started->start_ticks;
  running_[started->pid] = Running{launch.job, true, std::nullopt};
  counters_["placements_" + std::string(policy_->name())]++;
  SyncState(*doc);
  Event(launch.job, "started",
        fmt::format("attempt {} on {} ({}{}), pid {}", attempt.number, visible, attempt.mode,
                    mode == SharingMode::kMps
                        ? fmt::format(", {}% threads, {} limit", attempt.thread_percent,
                                      FormatBytes(launch.memory_limit))
                        : "",
                    started->pid));
}

// --- Bookkeeping ---
JobRecordDoc* Daemon::Find(JobId id) {
  auto it = jobs_.find(id);
  return it == jobs_.end() ? nullptr : &it->second;
}

void Daemon::SyncState(JobRecordDoc& doc) {
  if (const JobRecord* r = scheduler_->job(doc.spec.id)) {
    const std::string state(ToString(r->state));
    if (state != doc.state && IsTerminal(r->state)) doc.finished = WallSeconds();
    doc.state = state;
    // A job that succeeded after OOM retries keeps its story in the attempts, not as a reason.
    doc.reason = r->state == JobState::kSucceeded ? "" : r->end_reason;
  }
  Persist(doc);
}

void Daemon::Persist(const JobRecordDoc& doc) {
  if (Status s = store_->Save(doc); !s.ok())
    fmt::print(stderr, "colod: cannot save job {}: {}\n", doc.spec.id, s.message());
}

void Daemon::Event(JobId job, const std::string& kind, const std::string& detail) {
  (void)store_->AddEvent(WallSeconds(), job, kind, detail);
  fmt::print(stderr, "colod: {}{}: {}\n", job ? fmt::format("job {} ", job) : "", kind, detail);
}

// --- The loop ---
void Daemon::RequestStop() {
  stop_ = true;
  const uint64_t one = 1;
  (void)!write(wake_fd_, &one, sizeof one);
}

Status Daemon::Run() {
  while (!stop_) {
    std::vector<pollfd> fds;
    fds.push_back({listen_fd_, POLLIN, 0});
    fds.push_back({wake_fd_, POLLIN, 0});
    if (signal_fd_ >= 0) fds.push_back({signal_fd_, POLLIN, 0});
    if (metrics_fd_ >= 0) fds.push_back({metrics_fd_, POLLIN, 0});
    for (const auto& [fd, c] : clients_)
      fds.push_back({fd, static_cast<short>(POLLIN | (c.out.empty() ? 0 : POLLOUT)), 0});
    // Wake for the scheduler's own deadlines, and at least every 250 ms for what is polled
    // (adopted jobs, cancel escalation, child exits when signals are not ours).
    int timeout_ms = 250;
    if (auto wake = scheduler_->NextWakeup()) {
      const auto until =
          std::chrono::duration_cast<std::chrono::milliseconds>(*wake - clock_.Now());
      timeout_ms = std::clamp(static_cast<int>(until.count()) + 1, 0, timeout_ms);
    }
    if (poll(fds.data(), fds.size(), timeout_ms) < 0 && errno != EINTR)
      return Internal(fmt::format("poll: {}", strerror(errno)));
    for (const pollfd& p : fds) {
      if (!p.revents) continue;
      if (p.fd == listen_fd_) {
        AcceptClients(listen_fd_, false);
      } else if (p.fd == metrics_fd_) {
        AcceptClients(metrics_fd_, true);
      } else if (p.fd == wake_fd_) {
        uint64_t value;
        (void)!read(wake_fd_, &value, sizeof value);
      } else if (p.fd == signal_fd_) {
        signalfd_siginfo info{};
        while (read(signal_fd_, &info, sizeof info) == sizeof info) {
          if (info.ssi_signo == SIGTERM || info.ssi_signo == SIGINT || info.ssi_signo == SIGHUP)
            stop_ = true;
        }
      } else if (auto it = clients_.find(p.fd); it != clients_.end()) {
        Client& c = it->second;
        if (p.revents & (POLLIN | POLLHUP | POLLERR)) ReadClient(c);
        if (!c.out.empty()) {
          const ssize_t n = send(c.fd, c.out.data(), c.out.size(), MSG_NOSIGNAL);
          if (n > 0)
            c.out.erase(0, static_cast<size_t>(n));
          else if (n < 0 && errno != EAGAIN && errno != EINTR)
            c.closing = true, c.out.clear();
        }
      }
    }
    for (auto it = clients_.begin(); it != clients_.end();) {
      if (it->second.closing && it->second.out.empty()) {
        close(it->first);
        it = clients_.erase(it);
      } else {
        ++it;
      }
    }
    ReapChildren();
    PollAdopted();
    ConsumeSamples();
    EscalateCancels();
    CheckMps();
    SchedulePass();
  }
  return Status::Ok();
}

void Daemon::AcceptClients(int listen_fd, bool http) {
  for (;;) {
    const int fd = accept4(listen_fd, nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
    if (fd < 0) return;
    if (static_cast<int>(clients_.size()) >= config_.max_clients) {
      const std::string busy = Error("colod is busy: too many connections").dump() + "\n";
      (void)!send(fd, busy.data(), busy.size(), MSG_NOSIGNAL);
      close(fd);
      continue;
    }
    Client c;
    c.fd = fd;
    c.http = http;
    if (!http) {
      ucred cred{};
      socklen_t len = sizeof cred;
      if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0) {
        close(fd);
        continue;
      }
      c.uid = cred.uid;
      c.pid = cred.pid;
    }
    clients_[fd] = std::move(c);
  }
}

void Daemon::ReadClient(Client& c) {
  char buffer[65536];
  for (;;) {
    const ssize_t n = recv(c.fd, buffer, sizeof buffer, 0);
    if (n == 0) {
      c.closing = true;
      break;
    }
    if (n < 0) {
      if (errno != EAGAIN && errno != EINTR) c.closing = true;
      break;
    }
    c.in.append(buffer, static_cast<size_t>(n));
    if (c.http) {
      if (c.in.find("\r\n\r\n") != std::string::npos || c.in.size() > 8192) {
        const bool metrics = c.in.rfind("GET /metrics", 0) == 0;
        const std::string body = metrics ? Metrics() : "not found; try /metrics\n";
        c.out = fmt::format(
            "HTTP/1.1 {}\r\nContent-Type: text/plain; version=0.0.4\r\nContent-Length: "
            "{}\r\nConnection: close\r\n\r\n{}",
            metrics ? "200 OK" : "404 Not Found", body.size(), body);
        c.in.clear();
        c.closing = true;
      }
      continue;
    }
    size_t newline;
    while ((newline = c.in.find('\n')) != std::string::npos) {
      const std::string line = c.in.substr(0, newline);
      c.in.erase(0, newline + 1);
      HandleLine(c, line);
    }
    if (c.in.size() > config_.max_request_bytes) {
      c.out +=
          Error(fmt::format("request larger than {} bytes", config_.max_request_bytes)).dump() +
          "\n";
      c.in.clear();
      c.closing = true;
      break;
    }
  }
}

void Daemon::HandleLine(Client& c, const std::string& line) {
  json reply;
  const json request = json::parse(line, nullptr, false);
  if (request.is_discarded() || !request.is_object()) {
    reply = Error("request is not a JSON object");
  } else if (request.value("api", 0) != kApiVersion) {
    reply = Error(fmt::format("unsupported API version (colod speaks {})", kApiVersion));
  } else {
    try {
      reply = Dispatch(c, request);
    } catch (const json::exception& e) {
      reply = Error(fmt::format("malformed request: {}", e.what()));
    }
  }
  if (!reply.contains("ok")) reply["ok"] = true;
  c.out += reply.dump() + "\n";
}

json Daemon::Dispatch(const Client& c, const json& r) {
  const std::string op = r.value("op", "");
  if (op == "hello") return json{{"server", "colod"}, {"api", kApiVersion}, {"gpus", gpus_.name()}};
  if (op == "submit") return Submit(c, r);
  if (op == "queue") return Queue(c, r);
  if (op == "show") return Show(c, r);
  if (op == "cancel") return Cancel(c, r);
  if (op == "gpus") return Gpus();
  if (op == "explain") return Explain(r);
  if (op == "history") return History(c, r);
  if (op == "logs") return Logs(c, r);
  return Error(op.empty() ? "request has no op" : fmt::format("unknown op '{}'", op));
}

// --- API operations ---
json Daemon::Submit(const Client& c, const json& r) {
  if (!r.contains("command") || !r["command"].is_array() || r["command"].empty())
    return Error("submit needs a command (a non-empty list of strings)");
  JobRecordDoc doc;
  for (const auto& arg : r["command"]) {
    if (!arg.is_string()) return Error("every command argument must be a string");
    doc.spec.command.push_back(arg.get<std::string>());
  }
  doc.spec.gpus = r.value("gpus", 1);
  if (doc.spec.gpus < 1)
    return Error(fmt::format("--gpus must be at least 1, not {}", doc.spec.gpus));
  if (r.contains("memory") && !r["memory"].is_null()) {
    auto bytes = r["memory"].is_string() ? ParseBytes(r["memory"].get<std::string>())
                                         : Result<Bytes>(Bytes(r["memory"].get<int64_t>()));
    if (!bytes.ok()) return Error("--mem: " + bytes.status().message());
    if (*bytes <= Bytes(0)) return Error("--mem must be positive");
    doc.spec.memory = MemoryNeed{*bytes, MemorySource::kDeclared, 0.0};
  }
  if (auto e = r.find("estimate"); e != r.end() && !e->is_null()) {
    if (json error = AcceptEstimate(*e, doc); !error.is_null()) return error;
  }
  auto sharing = ParseSharingPreference(r.value("share", "any"));
  if (!sharing.ok()) return Error("--share: " + sharing.status().message());
  doc.spec.sharing = *sharing;
  doc.threads = r.value("threads", 0);
  if (doc.threads < 0 || doc.threads > 100)
    return Error(fmt::format("--threads takes a percentage 1..100, not {}", doc.threads));
  doc.spec.expected_smact = r.value("expected_smact", -1.0);
  doc.workdir = r.value("workdir", "/");
  if (doc.workdir.empty() || doc.workdir[0] != '/')
    return Error("workdir must be an absolute path");
  if (!fs::is_directory(doc.workdir))
    return Error(fmt::format("workdir {} is not a directory", doc.workdir));
  doc.env = r.value("env", std::vector<std::string>{});
  doc.source = r.value("source", "cli");
  doc.uid = c.uid;
  struct stat st {};
  doc.gid = stat(("/proc/" + std::to_string(c.pid)).c_str(), &st) == 0 ? st.st_gid : c.uid;
  doc.spec.owner = UserName(c.uid);
  doc.spec.name = r.value("name", "");
  if (doc.spec.name.empty()) doc.spec.name = fs::path(doc.spec.command.front()).filename().string();
  auto id = store_->NextJobId();
  if (!id.ok()) return Error(id.status().message());
  doc.spec.id = *id;
  if (Status s = scheduler_->Submit(doc.spec); !s.ok()) return Error(s.message());
  doc.state = "queued";
  doc.submitted = WallSeconds();
  jobs_[doc.spec.id] = doc;
  Persist(doc);
  Event(doc.spec.id, "submitted",
        fmt::format("by {}: {} GPU(s), memory {}", doc.spec.owner, doc.spec.gpus,
                    doc.spec.memory.known() ? FormatBytes(doc.spec.memory.peak) : "unknown"));
  return json{{"job", doc.spec.id}};
}

// A client-side estimate (colo submit --estimate-from): checked, stored with the job, and used as
// its memory need unless the user declared one. Earlier successful runs with the same model
// signature refine it: their observed peaks are the best evidence there is.
json Daemon::AcceptEstimate(const json& e, JobRecordDoc& doc) {
  if (!e.is_object()) return Error("estimate must be an object");
  const int64_t peak = e.value("peak", int64_t{0});
  const int64_t upper = e.value("upper", int64_t{0});
  if (peak <= 0 || upper < peak) return Error("estimate needs peak > 0 and upper >= peak");
  doc.estimate = {{"estimator", e.value("estimator", "")}, {"peak", peak},
                  {"lower", e.value("lower", peak)},       {"upper", upper},
                  {"detail", e.value("detail", "")},       {"signature", e.value("signature", "")}};
  if (doc.spec.memory.known()) return nullptr;  // declared: the user's number is the limit
  if (auto learned = LearnedNeed(doc, PeaksOf(doc.estimate.value("signature", "")))) {
    doc.spec.memory = *learned;
    return nullptr;
  }
  MemoryEstimate estimate{Bytes(peak), Bytes(e.value("lower", peak)), Bytes(upper), "client"};
  doc.spec.memory = estimate.AsNeed();
  return nullptr;
}

// The peaks of the finished runs whose model signature (model, batch, optimizer, precision) is
// `signature`.
std::vector<Bytes> Daemon::PeaksOf(const std::string& signature) const {
  std::vector<Bytes> peaks;
  if (signature.empty()) return peaks;
  for (const auto& [id, other] : jobs_) {
    if (other.state != "succeeded" || !other.estimate.is_object() ||
        other.estimate.value("signature", "") != signature)
      continue;
    for (const auto& a : other.attempts) {
      if (a.exit_kind == "success" && a.peak > 0) peaks.push_back(Bytes(a.peak));
    }
  }
  return peaks;
}

// The need the history estimator gives a job from earlier runs' peaks, noted in its estimate;
// nullopt when there are none.
std::optional<MemoryNeed> Daemon::LearnedNeed(JobRecordDoc& doc, std::vector<Bytes> peaks) {
  const size_t runs = peaks.size();
  auto learned = EstimateFromHistory(std::move(peaks));
  if (!learned.ok()) return std::nullopt;
  doc.estimate["history"] = {
      {"runs", runs}, {"peak", learned->peak.count()}, {"upper", learned->upper.count()}};
  return learned->AsNeed();
}

// A run finished well: queued jobs of the same model were planned before its peak was known, and
// now plan with it (their estimate's margin is usually wider than what the run showed).
void Daemon::RefineQueuedNeeds(const JobRecordDoc& finished) {
  if (!finished.estimate.is_object()) return;
  const std::string signature = finished.estimate.value("signature", "");
  if (signature.empty()) return;
  std::vector<JobRecordDoc*> waiting;
  for (auto& [id, doc] : jobs_) {
    if (doc.state == "queued" && doc.attempts.empty() && doc.estimate.is_object() &&
        doc.spec.memory.source != MemorySource::kDeclared &&
        doc.estimate.value("signature", "") == signature)
      waiting.push_back(&doc);
  }
  if (waiting.empty()) return;
  const std::vector<Bytes> peaks = PeaksOf(signature);
  for (JobRecordDoc* doc : waiting) {
    const MemoryNeed before = doc->spec.memory;
    auto learned = LearnedNeed(*doc, peaks);
    if (!learned || !scheduler_->UpdateNeed(doc->spec.id, *learned).ok()) continue;
    doc->spec.memory = *learned;
    Persist(*doc);
    Event(doc->spec.id, "estimate",
          fmt::format("refined by {} earlier run(s) of the same model: plans with {} (was {})",
                      peaks.size(), FormatBytes(learned->Upper()),
                      before.known() ? FormatBytes(before.Upper()) : "nothing"));
  }
}

json Daemon::Summary(const JobRecordDoc& d) const {
  json j{{"id", d.spec.id},
         {"name", d.spec.name},
         {"user", d.spec.owner},
         {"state", d.state},
         {"gpus", d.spec.gpus},
         {"submitted", d.submitted},
         {"finished", d.finished},
         {"reason", d.reason},
         {"attempts", d.attempts.size()},
         {"memory", d.spec.memory.known() ? FormatBytes(d.spec.memory.peak) : "unknown"},
         {"share", std::string(ToString(d.spec.sharing))}};
  if (const AttemptRecord* a = d.current()) {
    j["started"] = a->started;
    j["gpu_uuids"] = a->gpu_uuids;
    j["mode"] = a->mode;
    j["peak"] = a->peak;
  }
  if (d.state == "queued" || d.state == "recovering") {
    if (const JobRecord* r = scheduler_->job(d.spec.id); r && r->last_wait)
      j["reason"] = r->last_wait->Reason();
    else
      j["reason"] = "waiting for its turn";
  }
  return j;
}

json Daemon::Queue(const Client&, const json& r) {
  const std::string user = r.value("user", "");
  json jobs = json::array();
  for (const auto& [id, d] : jobs_) {
    if (!Active(d.state)) continue;
    if (!user.empty() && d.spec.owner != user) continue;
    jobs.push_back(Summary(d));
  }
  return json{{"jobs", jobs},
              {"main_queue", scheduler_->main_queue().size()},
              {"recovery_queue", scheduler_->recovery_queue().size()}};
}

json Daemon::Show(const Client&, const json& r) {
  const JobId id = r.at("job").get<JobId>();
  const JobRecordDoc* d = Find(id);
  if (!d) return Error(fmt::format("no job {}", id));
  json j = Summary(*d);
  j["command"] = d->spec.command;
  j["workdir"] = d->workdir;
  j["source"] = d->source;
  if (!d->estimate.is_null()) j["estimate"] = d->estimate;
  json attempts = json::array();
  for (const auto& a : d->attempts) attempts.push_back(ToJson(a));
  j["attempt_list"] = attempts;
  if (const JobRecord* rec = scheduler_->job(id)) {
    j["need"] = rec->need.known() ? FormatBytes(rec->need.Upper()) : "unknown";
    j["need_source"] = std::string(ToString(rec->need.source));
    if (rec->state == JobState::kRunning)
      j["reservation"] = FormatBytes(scheduler_->Reservation(*rec));
    j["oom_count"] = rec->oom_count;
  }
  json events = json::array();
  if (auto stored = store_->Events(id); stored.ok()) {
    for (const auto& e : *stored)
      events.push_back({{"time", e.time}, {"kind", e.kind}, {"detail", e.detail}});
  }
  j["events"] = events;
  return json{{"job", j}};
}

json Daemon::Cancel(const Client& c, const json& r) {
  const JobId id = r.at("job").get<JobId>();
  JobRecordDoc* d = Find(id);
  if (!d) return Error(fmt::format("no job {}", id));
  if (c.uid != 0 && c.uid != d->uid)
    return Error(fmt::format("job {} belongs to {}; only its owner or root may cancel it", id,
                             d->spec.owner));
  if (!Active(d->state)) return Error(fmt::format("job {} already ended ({})", id, d->state));
  if (d->state == "running") {
    AttemptRecord* a = d->current();
    d->cancel_requested = true;
    Persist(*d);
    kill(-a->pid, SIGTERM);
    if (auto it = running_.find(a->pid); it != running_.end())
      it->second.kill_at = clock_.Now() + config_.cancel_grace;
    Event(id, "cancel",
          fmt::format("SIGTERM to process group {}; SIGKILL in {:.0f} s", a->pid,
                      ToSeconds(config_.cancel_grace)));
    return json{{"job", id}, {"state", "cancelling"}};
  }
  if (Status s = scheduler_->Cancel(id); !s.ok()) return Error(s.message());
  SyncState(*d);
  Event(id, "cancelled", "cancelled while queued");
  return json{{"job", id}, {"state", d->state}};
}

json Daemon::Gpus() {
  json out = json::array();
  const ClusterView view = scheduler_->View();
  for (size_t g = 0; g < scheduler_->gpu_count(); ++g) {
    const GpuInfo& info = scheduler_->gpu_info(static_cast<GpuIndex>(g));
    json j{{"index", g},
           {"uuid", info.uuid},
           {"name", info.model},
           {"memory_total", info.capacity.count()},
           {"free_for_placement", view.gpus[g].free_for_placement.count()},
           {"mode", std::string(ToString(view.gpus[g].mode))},
           {"smact_risk", view.gpus[g].smact.empty ? -1.0 : view.gpus[g].smact.Risk()}};
    if (current_ && g < current_->devices.size()) {
      const DeviceSample& s = current_->devices[g];
      j["memory_used"] = s.memory_used.count();
      j["smact"] = s.smact;
      j["smocc"] = s.smocc;
      j["utilization"] = s.utilization;
      j["power_watts"] = s.power_watts;
      j["energy_joules"] = s.energy_joules;
      j["sample_age_s"] = std::chrono::duration<double>(clock_.WallNow() - current_->wall).count();
      if (!s.ok) j["sample_error"] = s.error;
    }
    json jobs = json::array();
    for (const auto& [pid, r] : running_) {
      const JobRecordDoc* d = Find(r.job);
      if (!d || !d->current()) continue;
      const auto& gpus = d->current()->gpus;
      if (std::find(gpus.begin(), gpus.end(), static_cast<int>(g)) == gpus.end()) continue;
      jobs.push_back({{"id", d->spec.id},
                      {"name", d->spec.name},
                      {"user", d->spec.owner},
                      {"mode", d->current()->mode},
                      {"peak", d->current()->peak}});
    }
    j["jobs"] = jobs;
    out.push_back(j);
  }
  return json{{"gpus", out}, {"backend", gpus_.name()}};
}

json Daemon::Explain(const json& r) {
  const JobId id = r.at("job").get<JobId>();
  const JobRecordDoc* d = Find(id);
  if (!d) return Error(fmt::format("no job {}", id));
  json j{{"job", id}, {"state", d->state}};
  if (d->state != "queued" && d->state != "recovering") {
    j["summary"] = d->state == "running" ? "running; nothing to explain" : "ended: " + d->reason;
    return j;
  }
  const auto& queue =
      d->state == "recovering" ? scheduler_->recovery_queue() : scheduler_->main_queue();
  const auto pos = std::find(queue.begin(), queue.end(), id) - queue.begin();
  j["position"] = pos + 1;
  j["queue"] = d->state == "recovering" ? "recovery" : "main";
  std::string summary;
  if (pos > 0) summary = fmt::format("waits behind job {} (queue order)", queue.front());
  if (d->state == "queued" && !scheduler_->recovery_queue().empty())
    summary = fmt::format("the recovery queue goes first (job {} waits there)",
                          scheduler_->recovery_queue().front());
  json gpus = json::array();
  if (auto decision = scheduler_->Explain(id)) {
    if (const auto* wait = std::get_if<Wait>(&*decision)) {
      if (summary.empty()) summary = wait->Reason();
      for (const auto& v : wait->per_gpu)
        gpus.push_back(
            {{"gpu", v.gpu}, {"gate", std::string(ToString(v.gate))}, {"detail", v.Describe()}});
    } else if (const auto* placed = std::get_if<Placed>(&*decision)) {
      if (summary.empty()) summary = "fits now; starts at the next scheduling pass";
      for (GpuIndex g : placed->gpus)
        gpus.push_back({{"gpu", g}, {"gate", "pass"}, {"detail", "fits"}});
    } else if (const auto* no = std::get_if<Infeasible>(&*decision)) {
      summary = "can never run here: " + no->reason;
    }
  }
  j["summary"] = summary;
  j["gpus"] = gpus;
  return j;
}

json Daemon::History(const Client& c, const json& r) {
  auto rows = store_->History(r.value("limit", 50), c.uid, r.value("all", false) || c.uid == 0);
  if (!rows.ok()) return Error(rows.status().message());
  json jobs = json::array();
  for (const auto& d : *rows) jobs.push_back(Summary(d));
  return json{{"jobs", jobs}};
}

json Daemon::Logs(const Client& c, const json& r) {
  const JobId id = r.at("job").get<JobId>();
  const JobRecordDoc* d = Find(id);
  if (!d) return Error(fmt::format("no job {}", id));
  if (c.uid != 0 && c.uid != d->uid)
    return Error(fmt::format("job {} belongs to {}", id, d->spec.owner));
  if (!d->current()) return json{{"job", id}, {"state", d->state}, {"stdout", ""}, {"stderr", ""}};
  return json{{"job", id},
              {"state", d->state},
              {"attempt", d->current()->number},
              {"stdout", d->current()->stdout_path},
              {"stderr", d->current()->stderr_path}};
}

std::string Daemon::Metrics() {
  std::string m;
  auto line = [&](const std::string& text) { m += text + "\n"; };
  line("# HELP colo_queue_jobs Jobs waiting, by queue.");
  line("# TYPE colo_queue_jobs gauge");
  line(fmt::format("colo_queue_jobs{{queue=\"main\"}} {}", scheduler_->main_queue().size()));
  line(
      fmt::format("colo_queue_jobs{{queue=\"recovery\"}} {}", scheduler_->recovery_queue().size()));
  line("# HELP colo_running_jobs Jobs running now.");
  line("# TYPE colo_running_jobs gauge");
  line(fmt::format("colo_running_jobs {}", running_.size()));
  struct Gauge {
    const char* name;
    const char* help;
    double (*get)(const DeviceSample&);
  };
  const Gauge gauges[] = {
      {"colo_gpu_memory_used_bytes", "Memory in use on the GPU.",
       [](const DeviceSample& s) { return static_cast<double>(s.memory_used.count()); }},
      {"colo_gpu_memory_total_bytes", "Memory of the GPU.",
       [](const DeviceSample& s) { return static_cast<double>(s.memory_total.count()); }},
      {"colo_gpu_smact", "SM activity (GPM), 0..1; -1 where not available.",
       [](const DeviceSample& s) { return s.smact; }},
      {"colo_gpu_smocc", "SM occupancy (GPM), 0..1; -1 where not available.",
       [](const DeviceSample& s) { return s.smocc; }},
      {"colo_gpu_power_watts", "Board power draw.",
       [](const DeviceSample& s) { return s.power_watts; }},
  };
  for (const Gauge& g : gauges) {
    line(fmt::format("# HELP {} {}", g.name, g.help));
    line(fmt::format("# TYPE {} gauge", g.name));
    for (size_t i = 0; current_ && i < current_->devices.size(); ++i) {
      line(fmt::format("{}{{gpu=\"{}\",uuid=\"{}\"}} {}", g.name, i, gpus_.devices()[i].uuid,
                       g.get(current_->devices[i])));
    }
  }
  line("# HELP colo_gpu_energy_joules_total Energy the board used since the driver loaded.");
  line("# TYPE colo_gpu_energy_joules_total counter");
  for (size_t i = 0; current_ && i < current_->devices.size(); ++i) {
    line(fmt::format("colo_gpu_energy_joules_total{{gpu=\"{}\",uuid=\"{}\"}} {}", i,
                     gpus_.devices()[i].uuid, current_->devices[i].energy_joules));
  }
  const std::string policy(policy_->name());
  line("# HELP colo_placements_total Attempts started, by policy.");
  line("# TYPE colo_placements_total counter");
  line(fmt::format("colo_placements_total{{policy=\"{}\"}} {}", policy,
                   counters_["placements_" + policy]));
  line("# HELP colo_oom_crashes_total Attempts that ended out of memory, by policy.");
  line("# TYPE colo_oom_crashes_total counter");
  line(fmt::format("colo_oom_crashes_total{{policy=\"{}\"}} {}", policy,
                   counters_["oom_" + policy]));
  line("# HELP colo_oom_recoveries_total OOM-crashed jobs re-queued for another attempt.");
  line("# TYPE colo_oom_recoveries_total counter");
  line(fmt::format("colo_oom_recoveries_total{{policy=\"{}\"}} {}", policy,
                   counters_["oom_recoveries_" + policy]));
  line("# HELP colo_scheduler_pass_seconds Time of one scheduling pass.");
  line("# TYPE colo_scheduler_pass_seconds histogram");
  int64_t cumulative = 0;
  for (size_t b = 0; b < std::size(kPassBuckets); ++b) {
    cumulative += pass_buckets_[b];
    line(fmt::format("colo_scheduler_pass_seconds_bucket{{le=\"{}\"}} {}", kPassBuckets[b],
                     cumulative));
  }
  line(fmt::format("colo_scheduler_pass_seconds_bucket{{le=\"+Inf\"}} {}", pass_count_));
  line(fmt::format("colo_scheduler_pass_seconds_sum {}", pass_sum_));
  line(fmt::format("colo_scheduler_pass_seconds_count {}", pass_count_));
  return m;
}

}  // namespace colo
