#include "daemon/daemon.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <fmt/format.h>
#include <grp.h>
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
#include <unistd.h>

#include <algorithm>

#include "api/codec.h"
#include "common/text.h"
#include "daemon/metrics.h"
#include "daemon/posix_launcher.h"
#include "daemon/slurm_bridge.h"
#include "daemon/sqlite_job_store.h"
#include "daemon/threaded_job_store.h"
#include "estimate/job_estimators.h"
#include "policies/registry.h"

namespace colo {
namespace {

// The longest colod sleeps without looking at its jobs (child exits are also polled, and a
// cancel's grace may end).
constexpr auto kMaxSleep = std::chrono::milliseconds(250);
// How often a reserve given back is looked at again.
constexpr auto kReserveCheckInterval = std::chrono::seconds(10);

// A process's CUDA context on a GPU of this model, from colo's calibrations: the GPU's own, else
// the first there is (contexts of one driver generation differ little between GPUs), else none.
// A process's CUDA context on this GPU, and the part of it NVML does not count for an MPS client
// (all of it where the calibration did not measure MPS).
std::pair<Bytes, Bytes> CalibratedContext(const std::string& gpu_name) {
  auto calibration = LoadCalibration(gpu_name, /*with_catalogue=*/false);
  if (!calibration.ok()) calibration = LoadCalibration("", /*with_catalogue=*/false);
  if (!calibration.ok()) {
    fmt::print(stderr, "colod: no GPU calibration ({}); CUDA contexts are taken as 0\n",
               calibration.status().message());
    return {Bytes(0), Bytes(0)};
  }
  const Bytes context(calibration->context_bytes);
  if (calibration->mps_context_bytes <= 0) return {context, context};
  return {context,
          Bytes(std::max<int64_t>(0, calibration->context_bytes - calibration->mps_context_bytes))};
}

bool IsLoopback(const std::string& address) {
  in_addr a{};
  return inet_pton(AF_INET, address.c_str(), &a) == 1 && (ntohl(a.s_addr) >> 24) == 127;
}

}  // namespace

Daemon::Daemon(Options options, GpuBackend& gpus)
    : config_(std::move(options.config)),
      handle_signals_(options.handle_signals),
      reload_(std::move(options.reload)),
      personal_(geteuid() != 0),
      gpus_(gpus) {}

Result<std::unique_ptr<Daemon>> Daemon::Create(Options options, GpuBackend& gpus) {
  std::unique_ptr<Daemon> daemon(new Daemon(std::move(options), gpus));
  COLO_RETURN_IF_ERROR(daemon->Init());
  return daemon;
}

Daemon::~Daemon() {
  if (threaded_store_) threaded_store_->SetWhileWaiting(nullptr);
  sampler_.reset();
  history_.reset();  // writes what is pending
  api_clients_.reset();
  metrics_clients_.reset();
  for (int fd : {api_fd_, metrics_fd_, signal_fd_, wake_fd_}) {
    if (fd >= 0) close(fd);
  }
  if (own_socket_) unlink(config_.socket.c_str());
  if (mps_) mps_->Stop();
}

Status Daemon::Init() {
  // Everything colod creates is its own alone unless it says otherwise.
  umask(077);
  if (config_.jobs_dir.empty()) config_.jobs_dir = config_.state_dir + "/jobs";
  // The lock first: a second colod on this state directory stops here, before it touches the
  // first one's socket or database.
  auto lock = PrepareStateDir(config_.state_dir, config_.jobs_dir, personal_);
  if (!lock.ok()) return lock.status();
  lock_ = std::move(*lock);
  auto store = SqliteJobStore::Open(config_.state_dir + "/colo.db");
  if (!store.ok()) return store.status();
  reserve_ = SpaceReserve(config_.state_dir + "/reserve", config_.database_reserve.count());
  // Called on the store's thread, while the loop waits for that call (it never touches the
  // reserve meanwhile).
  (*store)->SetSpaceReserve([this] { return reserve_.Release(); });
  CheckReserve();
  auto threaded = std::make_unique<ThreadedJobStore>(std::move(*store));
  threaded_store_ = threaded.get();
  store_ = std::move(threaded);

  PosixProcessLauncher::Options launcher_options;
  launcher_options.jobs_dir = config_.jobs_dir;
  launcher_options.shim = config_.shim;
  launcher_options.cgroups =
      config_.cgroups ? PosixProcessLauncher::Cgroups::kAuto : PosixProcessLauncher::Cgroups::kOff;
  launcher_options.leftover_grace = config_.leftover_grace;
  launcher_options.log_limit = config_.log_limit;
  launcher_options.propagated_limits = config_.PropagatedLimits();
  auto launcher = PosixProcessLauncher::Create(launcher_options);
  if (!launcher.ok()) return launcher.status();
  fmt::print(stderr, "colod: {}\n", (*launcher)->tracking());
  if (const size_t ended = (*launcher)->orphaned_starts_ended(); ended > 0)
    fmt::print(stderr, "colod: ended {} stopped job start(s) an earlier colod left unfinished\n",
               ended);
  launcher_ = std::move(*launcher);

  // The policy spec is what colod runs, as colo sim would run it: what it sets besides the gates
  // (recovery, sharing, learning, planning without estimates) wins over the config's own.
  auto policy = config_.Policy();
  if (!policy.ok()) return policy.status();
  policy_ = MakePolicy(*policy);
  SchedulerConfig scheduler_config = config_.scheduler;
  scheduler_config.recovery = policy->recovery.value_or(scheduler_config.recovery);
  scheduler_ = std::make_unique<Scheduler>(clock_, *policy_, scheduler_config);
  bool any_limits = scheduler_config.user_limits.any();
  for (const auto* entries : {&config_.user_terms, &config_.group_terms}) {
    for (const auto& [name, terms] : *entries) any_limits = any_limits || terms.limits.any();
  }
  scheduler_->SetTermsSource(
      [this](const std::string& user) { return TermsFromConfig(config_, user); }, any_limits);
  COLO_RETURN_IF_ERROR(RestoreUsage());
  for (const DeviceInfo& d : gpus_.devices()) {
    GpuInfo info;
    info.uuid = d.uuid;
    info.model = d.name;
    info.capacity = d.memory_total;
    info.mig_instance = d.mig_index >= 0;
    info.default_mode = policy->sharing.value_or(config_.default_mode);
    for (const std::string& key : {d.uuid, std::to_string(scheduler_->gpu_count())}) {
      if (auto it = config_.per_gpu.find(key); it != config_.per_gpu.end())
        info.default_mode = it->second;
    }
    const auto [context, mps_uncounted] = CalibratedContext(d.name);
    info.cuda_context = config_.cuda_context ? *config_.cuda_context : context;
    info.mps_uncounted_context = config_.cuda_context ? *config_.cuda_context : mps_uncounted;
    // Without MPS, a GPU meant for MPS shares plainly.
    if (info.default_mode == SharingMode::kMps && !config_.mps_enabled)
      info.default_mode = SharingMode::kPlain;
    scheduler_->AddGpu(info);
  }

  ControllerOptions controller_options;
  controller_options.cancel_grace = config_.cancel_grace;
  controller_options.timeout_grace = config_.timeout_grace;
  controller_options.admission.max_live_jobs_per_user = config_.max_jobs_per_user;
  controller_options.admission.max_array_size = config_.max_array_size;
  if (!policy->learn.value_or(true)) controller_options.history_runs = 0;
  controller_options.plan_without_estimates = policy->estimator == "none";
  if (config_.mps_enabled) {
    mps_ = std::make_unique<MpsDaemon>(
        MpsSettings{config_.mps_control, config_.mps_pipe_dir, config_.mps_log_dir});
    controller_options.mps_env = [this](int threads, Bytes limit,
                                        int gpus) -> Result<std::vector<std::string>> {
      COLO_RETURN_IF_ERROR(mps_->EnsureRunning());
      return mps_->ClientEnv(threads, limit, gpus);
    };
  } else {
    // Why a job that asked for MPS shares plainly, in its events: fake GPUs have no MPS at all.
    const std::string why = gpus_.name() == "fake"
                                ? "fake GPUs (--fake-gpus) have no MPS"
                                : "MPS is off in colod's config ([mps] enabled = false)";
    controller_options.mps_env = [why](int, Bytes, int) -> Result<std::vector<std::string>> {
      return Unavailable(why);
    };
  }
  controller_options.tenant_wait_limit = config_.slurm_wait_limit;
  controller_options.log = [](const JobEvent& e) {
    fmt::print(stderr, "colod: {}{}: {}\n", e.job ? fmt::format("job {} ", e.job) : "", e.kind,
               Printable(e.detail));
  };
  controller_ = std::make_unique<JobController>(clock_, *scheduler_, *store_, *launcher_,
                                                std::move(controller_options));
  if (!config_.slurm_node.empty()) {
    std::vector<std::string> slurm_env;
    if (!config_.slurm_conf.empty()) slurm_env.push_back("SLURM_CONF=" + config_.slurm_conf);
    SlurmBridgeOptions slurm_options;
    slurm_options.node = config_.slurm_node;
    slurm_options.reconcile_interval = config_.slurm_reconcile_interval;
    slurm_options.devices = gpus_.devices();
    slurm_options.shard_size = config_.slurm_shard_size;
    auto margin = ParseBytes(config_.memory_margin);
    if (!margin.ok()) return InvalidArgument("gates.memory_margin: " + margin.status().message());
    slurm_options.margin = *margin;
    slurm_ = std::make_unique<SlurmBridge>(
        clock_, *controller_,
        std::make_unique<SlurmCliCommands>(config_.slurm_bin_dir, config_.slurm_slurmd,
                                           std::move(slurm_env)),
        std::move(slurm_options), [this] { Wake(); });
  }
  if (config_.history_enabled) {
    // The history is for reports: colod runs jobs without it, and says why it has none.
    HistoryOptions history_options;
    history_options.retention = config_.history_retention;
    history_options.flush_interval = config_.history_flush_interval;
    auto history = HistoryStore::Open(config_.state_dir + "/history.db", history_options);
    if (history.ok()) {
      history_ = std::move(*history);
    } else {
      history_problem_ = "colod keeps no history: " + history.status().message();
      fmt::print(stderr, "colod: {}\n", history_problem_);
    }
  }
  handlers_ = std::make_unique<ApiHandlers>(HandlerContext{
      clock_, *controller_, *store_, *launcher_, gpus_, latest_sample_, personal_, slurm_.get(),
      history_.get(), &history_problem_, SpecText(*policy), config_.slurm_direct_submit});

  // Jobs that outlive their shim are re-parented to colod, which reaps them.
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
  COLO_RETURN_IF_ERROR(controller_->Recover());
  COLO_RETURN_IF_ERROR(Listen());
  // Threads start once the signals are blocked: they inherit the mask, so SIGTERM reaches the
  // signalfd, never a thread that would die of it.
  if (history_) history_->StartWriter();
  sampler_ = std::make_unique<GpuSampler>(gpus_, clock_, config_.scheduler.sample_interval,
                                          [this] { Wake(); });
  return Status::Ok();
}

namespace {
// The connection limits of a config: set at start and again at a reload.
ConnectionLimits ApiLimits(const DaemonConfig& c) {
  ConnectionLimits limits;
  limits.max_connections = c.max_clients;
  limits.max_per_user = c.max_clients_per_user;
  limits.idle_timeout = c.idle_timeout;
  limits.max_request_bytes = c.max_request_bytes;
  return limits;
}
ConnectionLimits MetricsLimits(const DaemonConfig& c) {
  ConnectionLimits limits;
  limits.max_connections = c.metrics_max_clients;
  limits.idle_timeout = Seconds(5);
  limits.max_request_bytes = 8192;
  return limits;
}
}  // namespace

void Daemon::Reload() {
  if (!reload_) return;
  auto next = reload_();
  if (!next.ok()) {
    fmt::print(stderr, "colod: reload refused, the running config stays: {}\n",
               next.status().message());
    return;
  }
  const auto before = EffectiveSettings(config_);
  const auto after = EffectiveSettings(*next);
  std::vector<std::string> applied, restart;
  for (size_t i = 0; i < before.size() && i < after.size(); ++i) {
    if (before[i].second == after[i].second) continue;
    const std::string change =
        fmt::format("{} {} -> {}", before[i].first, before[i].second, after[i].second);
    (AppliesLive(before[i].first) ? applied : restart).push_back(change);
  }
  // The rest keeps its running value until a restart.
  TakeLiveSettings(config_, *next);
  if (api_clients_) api_clients_->SetLimits(ApiLimits(config_));
  if (metrics_clients_) metrics_clients_->SetLimits(MetricsLimits(config_));
  auto list = [](const std::vector<std::string>& v) {
    std::string out;
    for (const std::string& s : v) out += (out.empty() ? "" : "; ") + s;
    return out.empty() ? std::string("none") : out;
  };
  fmt::print(stderr, "colod: reloaded the config (SIGHUP): applied: {}; needs a restart: {}\n",
             list(applied), list(restart));
}

Status Daemon::Listen() {
  COLO_RETURN_IF_ERROR(PrepareSocketDir(config_.socket, personal_));
  sockaddr_un address{};
  address.sun_family = AF_UNIX;
  if (config_.socket.size() >= sizeof address.sun_path)
    return InvalidArgument("socket path too long: " + config_.socket);
  memcpy(address.sun_path, config_.socket.c_str(), config_.socket.size() + 1);
  api_fd_ = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  // Every local user talks to a system colod (who they are comes from SO_PEERCRED); a personal
  // one's socket is its owner's alone. The mode comes from the umask at bind, not from a later
  // chmod by path (which a swapped path could turn onto another file).
  const mode_t umask_before = umask(personal_ ? 0177 : 0111);
  const bool bound =
      api_fd_ >= 0 && bind(api_fd_, reinterpret_cast<sockaddr*>(&address), sizeof address) == 0;
  const int bind_error = errno;
  umask(umask_before);
  if (!bound || listen(api_fd_, 512) != 0)
    return Unavailable(fmt::format("cannot listen on {}: {}", config_.socket,
                                   strerror(bound ? errno : bind_error)));
  own_socket_ = true;
  api_clients_ = std::make_unique<ConnectionSet>(
      clock_, api_fd_, ConnectionSet::Protocol::kJsonLines, ApiLimits(config_),
      [this](const Identity& caller, std::string_view line) {
        return handlers_->Handle(caller, line);
      },
      [this](unsigned uid, unsigned gid) { return Identify(uid, gid); });
  threaded_store_->SetWhileWaiting([this](int done_fd) { ServeWhileStoring(done_fd); });

  if (!config_.metrics_enabled) return Status::Ok();
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
                                   config_.metrics_address, config_.metrics_port, strerror(errno)));
  if (!IsLoopback(config_.metrics_address)) {
    fmt::print(stderr,
               "colod: WARNING: metrics are served on {}:{}, which other machines may reach; "
               "they show queue lengths, GPU use and job counts to anyone who connects\n",
               config_.metrics_address, config_.metrics_port);
  }
  metrics_clients_ = std::make_unique<ConnectionSet>(
      clock_, metrics_fd_, ConnectionSet::Protocol::kHttp, MetricsLimits(config_),
      [this](const Identity&, std::string_view request) { return ServeMetrics(request); },
      [](unsigned, unsigned) -> Result<Identity> { return Identity{}; });
  return Status::Ok();
}

// Who the peer is: its uid and gid from the kernel, its name and groups from the passwd and group
// databases. Nothing the client sends or its /proc entry says counts.
Result<Identity> Daemon::Identify(unsigned uid, unsigned gid) const {
  if (personal_ && uid != geteuid()) {
    return PermissionDenied(
        fmt::format("this is the personal colod of uid {}; it serves only its owner", geteuid()));
  }
  Identity identity{uid, gid, ""};
  std::vector<char> buffer(16384);
  passwd pw{};
  passwd* found = nullptr;
  if (getpwuid_r(uid, &pw, buffer.data(), buffer.size(), &found) != 0 || !found)
    return identity;  // no name: may look, may not run jobs (the controller refuses)
  identity.user = pw.pw_name;
  // The connection's gid counts only if the database puts the user in that group.
  if (gid != pw.pw_gid) {
    std::vector<gid_t> groups(64);
    int count = static_cast<int>(groups.size());
    if (getgrouplist(pw.pw_name, pw.pw_gid, groups.data(), &count) < 0) {
      groups.resize(static_cast<size_t>(count));
      getgrouplist(pw.pw_name, pw.pw_gid, groups.data(), &count);
    }
    groups.resize(static_cast<size_t>(std::max(count, 0)));
    if (std::find(groups.begin(), groups.end(), gid) == groups.end()) identity.gid = pw.pw_gid;
  }
  return identity;
}

std::string Daemon::ServeMetrics(std::string_view request) {
  const bool metrics = request.substr(0, 13) == "GET /metrics " || request == "GET /metrics";
  const std::string body =
      metrics ? RenderMetrics(*controller_, gpus_, latest_sample_) : "not found; try /metrics\n";
  return fmt::format(
      "HTTP/1.1 {}\r\nContent-Type: text/plain; version=0.0.4\r\nContent-Length: {}\r\n"
      "Connection: close\r\n\r\n{}",
      metrics ? "200 OK" : "404 Not Found", body.size(), body);
}

void Daemon::CheckReserve() {
  if (clock_.Now() >= next_reserve_check_) {
    next_reserve_check_ = clock_.Now() + kReserveCheckInterval;
    reserve_.Restore();
  }
  if (std::string note = reserve_.TakeNote(); !note.empty())
    fmt::print(stderr, "colod: {}\n", note);
}

void Daemon::CheckMps() {
  if (!mps_ || !mps_->started() || clock_.Now() < next_mps_check_) return;
  next_mps_check_ = clock_.Now() + config_.mps_health_interval;
  const bool mps_jobs = std::any_of(controller_->live_jobs().begin(),
                                    controller_->live_jobs().end(), [](const auto& entry) {
                                      const Job& job = entry.second;
                                      return job.state == JobState::kRunning && job.current() &&
                                             job.current()->mode == SharingMode::kMps;
                                    });
  if (!mps_jobs || mps_->Healthy()) return;
  fmt::print(stderr, "colod: the MPS control daemon stopped answering; restarting it\n");
  if (Status s = mps_->EnsureRunning(); !s.ok()) fmt::print(stderr, "colod: {}\n", s.message());
}

// The sample as the history keeps it: each GPU's readings (what it did not report stays absent),
// each running job's memory on each of its GPUs as the controller attributed it, and how many
// jobs wait and run. Only appended here; the history's own thread writes it.
void Daemon::RecordHistory(const GpuSampleSet& sample) {
  if (!history_) return;
  const double time = ToEpochSeconds(sample.wall);
  const auto known = [](double v) { return v >= 0 ? std::optional<double>(v) : std::nullopt; };
  HistoryBatch batch;
  for (size_t g = 0; g < sample.devices.size(); ++g) {
    const DeviceSample& s = sample.devices[g];
    GpuHistoryPoint p;
    p.time = time;
    p.gpu = static_cast<int>(g);
    // NVML gives no total when the memory query failed.
    if (s.memory_total > Bytes(0)) p.memory_used = static_cast<double>(s.memory_used.count());
    p.smact = known(s.smact);
    p.smocc = known(s.smocc);
    p.drama = known(s.drama);
    p.power_watts = known(s.power_watts);
    p.energy_joules = known(s.energy_joules);
    batch.gpus.push_back(p);
  }
  QueueHistoryPoint queue{time, 0, 0};
  for (const auto& [id, job] : controller_->live_jobs()) {
    if (job.state == JobState::kQueued || job.state == JobState::kRecovering) queue.queued++;
    if (job.state != JobState::kRunning) continue;
    queue.running++;
    const JobRecord* r = controller_->scheduler().job(id);
    if (!r) continue;
    for (size_t i = 0; i < r->gpus.size() && i < r->current_use.size(); ++i)
      batch.jobs.push_back(JobHistoryPoint{time, id, static_cast<int>(r->gpus[i]),
                                           static_cast<double>(r->current_use[i].count())});
  }
  batch.queue.push_back(queue);
  history_->Record(std::move(batch));
}

// The loop waits on the store (a request's write, a page of history, a job's end stored): other
// users' requests that read only colod's memory are answered meanwhile, so that one user's large
// write does not hold everyone's `colo queue`. Nothing else of colod's runs until the store is
// done.
void Daemon::ServeWhileStoring(int done_fd) {
  const ConnectionSet::QuickHandler quick = [this](const Identity& caller, std::string_view line) {
    return handlers_->HandleFromMemory(caller, line);
  };
  std::vector<pollfd> fds;
  bool more = false;
  while (true) {
    fds.clear();
    fds.push_back({done_fd, POLLIN, 0});
    api_clients_->AddPollFds(fds, /*quick=*/true);
    const int timeout = more ? 0 : static_cast<int>(kMaxSleep.count());
    if (poll(fds.data(), fds.size(), timeout) < 0 && errno != EINTR) return;
    more = api_clients_->ServeQuick(fds, clock_.Now(), quick);
    if (fds.front().revents) return;
  }
}

void Daemon::Wake() {
  const uint64_t one = 1;
  (void)!write(wake_fd_, &one, sizeof one);
}

void Daemon::RequestStop() {
  stop_ = true;
  Wake();
}

Status Daemon::Run() {
  std::vector<pollfd> fds;
  while (!stop_) {
    fds.clear();
    fds.push_back({wake_fd_, POLLIN, 0});
    if (signal_fd_ >= 0) fds.push_back({signal_fd_, POLLIN, 0});
    api_clients_->AddPollFds(fds);
    if (metrics_clients_) metrics_clients_->AddPollFds(fds);
    TimePoint wake_at = clock_.Now() + kMaxSleep;
    for (const auto& deadline :
         {controller_->NextWakeup(), slurm_ ? slurm_->NextWakeup() : std::nullopt,
          api_clients_->NextDeadline(),
          metrics_clients_ ? metrics_clients_->NextDeadline() : std::nullopt}) {
      if (deadline && *deadline < wake_at) wake_at = *deadline;
    }
    // Requests already read but not served (their turn's time ran out) are served now.
    if (api_clients_->HasBufferedWork()) wake_at = clock_.Now();
    const auto timeout =
        std::chrono::duration_cast<std::chrono::milliseconds>(wake_at - clock_.Now()).count() + 1;
    if (poll(fds.data(), fds.size(), static_cast<int>(std::max<int64_t>(timeout, 0))) < 0 &&
        errno != EINTR)
      return Internal(fmt::format("poll: {}", strerror(errno)));
    for (const pollfd& p : fds) {
      if (!p.revents) continue;
      if (p.fd == wake_fd_) {
        uint64_t value;
        (void)!read(wake_fd_, &value, sizeof value);
      } else if (p.fd == signal_fd_) {
        signalfd_siginfo info{};
        while (read(signal_fd_, &info, sizeof info) == sizeof info) {
          if (info.ssi_signo == SIGTERM || info.ssi_signo == SIGINT) stop_ = true;
          if (info.ssi_signo == SIGHUP) Reload();
        }
      }
    }
    const TimePoint now = clock_.Now();
    api_clients_->OnReady(fds, now);
    api_clients_->ExpireIdle(now);
    if (metrics_clients_) {
      metrics_clients_->OnReady(fds, now);
      metrics_clients_->ExpireIdle(now);
    }
    if (auto sample = sampler_->TakeNew()) {
      controller_->OnSample(sample->time, sample->devices);
      RecordHistory(*sample);
      latest_sample_ = GpuSnapshot{sample->wall, std::move(sample->devices)};
    }
    if (slurm_) slurm_->Tick();
    controller_->Tick();
    // The runs the controller gave back to Slurm this turn: the bridge requeues them there.
    for (const TenantHandback& handback : controller_->TakeHandbacks()) {
      if (slurm_) slurm_->HandBack(handback);
    }
    sampler_->ReadProcessesOf(controller_->GpusRunningJobs());
    CheckMps();
    if (clock_.Now() >= next_usage_save_) SaveUsage();
    CheckReserve();
  }
  SaveUsage();
  return Status::Ok();
}

// The usage stored before the last stop, decayed over the time colod was away.
Status Daemon::RestoreUsage() {
  auto stored = store_->LoadUsage();
  if (!stored.ok()) {
    // Fair share starts again from nothing rather than colod not starting.
    fmt::print(stderr, "colod: fair-share usage starts from zero: {}\n", stored.status().message());
    return Status::Ok();
  }
  const Duration away = clock_.Now() - MonotonicOf(clock_, stored->as_of);
  for (const auto& [user, usage] : stored->users)
    scheduler_->RestoreUsage(user, Decay(usage, away, config_.scheduler.fairness.half_life));
  return Status::Ok();
}

void Daemon::SaveUsage() {
  next_usage_save_ = clock_.Now() + kUsageSaveInterval;
  UsageRecord record{clock_.WallNow(), scheduler_->usage().Snapshot(clock_.Now())};
  if (Status s = store_->SaveUsage(record); !s.ok())
    fmt::print(stderr, "colod: cannot store fair-share usage (tried again in a minute): {}\n",
               s.message());
}

}  // namespace colo
