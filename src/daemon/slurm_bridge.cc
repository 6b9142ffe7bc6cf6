#include "daemon/slurm_bridge.h"

#include <fmt/format.h>
#include <pwd.h>
#include <signal.h>
#include <sys/wait.h>

#include <algorithm>
#include <nlohmann/json.hpp>

#include "common/subprocess.h"
#include "common/text.h"

namespace colo {
namespace {

constexpr Duration kCommandTimeout = Seconds(15);
constexpr Duration kRequeuePendingWait = Seconds(20);
constexpr std::string_view kNotePrefix = "colo:";

std::optional<Identity> IdentityOf(unsigned uid) {
  passwd entry{}, *found = nullptr;
  std::vector<char> buffer(16384);
  if (getpwuid_r(uid, &entry, buffer.data(), buffer.size(), &found) != 0 || !found)
    return std::nullopt;
  return Identity{uid, found->pw_gid, found->pw_name};
}

void LogLine(const std::string& line) {
  fmt::print(stderr, "colod: {}\n", Printable(line));
}

// How a job ended by Slurm's record: what the classifier reads.
ProcessEnd EndOf(const SlurmJobInfo& info) {
  if (info.exit_signal != 0) return ProcessEnd{false, info.exit_signal, true};
  return ProcessEnd{true, info.exit_code, true};
}

ProcessEnd EndOfWaitStatus(int status) {
  if (WIFSIGNALED(status)) return ProcessEnd{false, WTERMSIG(status), true};
  return ProcessEnd{true, WIFEXITED(status) ? WEXITSTATUS(status) : 0, true};
}

bool StillRunning(const std::string& state) {
  return state == "RUNNING" || state == "CONFIGURING" || state == "COMPLETING" ||
         state == "SUSPENDED" || state == "STOPPED";
}

}  // namespace

// --- The note in AdminComment ---

SlurmNote ParseSlurmNote(std::string_view comment) {
  SlurmNote note;
  const size_t at = comment.find(kNotePrefix);
  if (at == std::string_view::npos) return note;
  std::string_view rest = comment.substr(at + kNotePrefix.size());
  rest = rest.substr(0, rest.find_first_of(" ;\n"));
  while (!rest.empty()) {
    const size_t comma = rest.find(',');
    const std::string_view item = rest.substr(0, comma);
    rest = comma == std::string_view::npos ? std::string_view() : rest.substr(comma + 1);
    const size_t eq = item.find('=');
    if (eq == std::string_view::npos) continue;
    const std::string_view key = item.substr(0, eq), value = item.substr(eq + 1);
    uint64_t number = 0;
    if (value.empty() || value.size() > 19 ||
        !std::all_of(value.begin(), value.end(), [](char c) { return c >= '0' && c <= '9'; }))
      continue;
    for (char c : value) number = number * 10 + static_cast<uint64_t>(c - '0');
    if (key == "need" && number > 0 && number <= (uint64_t{1} << 50))
      note.need = Bytes(static_cast<int64_t>(number));
    if (key == "ooms" && number < 1000) note.ooms = static_cast<int>(number);
  }
  return note;
}

std::string FormatSlurmNote(const SlurmNote& note) {
  return fmt::format("{}need={},ooms={}", kNotePrefix, note.need ? note.need->count() : 0,
                     note.ooms);
}

// --- scontrol ---

Result<SlurmJobInfo> ParseScontrolJob(std::string_view text) {
  // `scontrol --json show job`: a user's job name or paths cannot pass for other fields there,
  // as they could in the Key=Value form.
  const nlohmann::json j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) return InvalidArgument("scontrol's output is not JSON");
  const auto jobs = j.find("jobs");
  if (jobs == j.end() || !jobs->is_array() || jobs->empty() || !jobs->front().is_object())
    return InvalidArgument("scontrol's output lists no job");
  const nlohmann::json& job = jobs->front();
  auto text_of = [&](const char* key) -> std::string {
    const auto it = job.find(key);
    return it != job.end() && it->is_string() ? it->get<std::string>() : std::string();
  };
  auto int_of = [&](const char* key) -> int64_t {
    const auto it = job.find(key);
    return it != job.end() && it->is_number_integer() ? it->get<int64_t>() : 0;
  };
  SlurmJobInfo info;
  info.state = text_of("job_state");
  info.nodes = text_of("nodes");
  info.admin_comment = text_of("admin_comment");
  info.std_out = text_of("standard_output");
  info.std_err = text_of("standard_error");
  info.restarts = static_cast<int>(int_of("restart_cnt"));
  info.tres_per_node = text_of("tres_per_node");
  // A wait status (as waitpid gives it) in this version of the format.
  const int status = static_cast<int>(int_of("exit_code"));
  if (WIFSIGNALED(status))
    info.exit_signal = WTERMSIG(status);
  else
    info.exit_code = WEXITSTATUS(status);
  if (info.state.empty()) return InvalidArgument("scontrol's record has no job_state");
  return info;
}

ScontrolCommands::ScontrolCommands(std::string bin_dir, std::vector<std::string> environment)
    : bin_dir_(std::move(bin_dir)), env_(std::move(environment)) {
  env_.push_back("PATH=/usr/local/bin:/usr/bin:/bin");
}

Result<std::string> ScontrolCommands::Scontrol(std::vector<std::string> args) {
  args.insert(args.begin(), bin_dir_ + "/scontrol");
  auto run = RunCommand(args, env_, kCommandTimeout);
  if (!run.ok()) return run.status();
  std::string joined;
  for (size_t i = 1; i < args.size(); ++i) joined += (i > 1 ? " " : "") + args[i];
  if (run->timed_out) return Unavailable(fmt::format("scontrol {}: no answer in time", joined));
  if (run->exit_code != 0) {
    return Unavailable(
        fmt::format("scontrol {}: {}", joined, TruncateUtf8(ValidUtf8(run->output), 400)));
  }
  return std::move(run->output);
}

Result<std::optional<SlurmJobInfo>> ScontrolCommands::ShowJob(uint32_t job) {
  auto out = Scontrol({"--json", "show", "job", std::to_string(job)});
  if (!out.ok()) {
    if (out.status().message().find("Invalid job id") != std::string::npos)
      return std::optional<SlurmJobInfo>();
    return out.status();
  }
  auto info = ParseScontrolJob(*out);
  if (!info.ok()) return info.status();
  return std::optional<SlurmJobInfo>(std::move(*info));
}

std::string WithGpumem(const std::string& tres, int64_t mib) {
  std::string out;
  size_t start = 0;
  while (start <= tres.size()) {
    const size_t comma = tres.find(',', start);
    std::string item =
        tres.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    for (std::string_view prefix : {"gres:gpumem:", "gpumem:"}) {
      if (item.rfind(prefix, 0) == 0) item = "gres:gpumem:" + std::to_string(mib);
    }
    if (!item.empty()) out += (out.empty() ? "" : ",") + item;
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return out;
}

Status ScontrolCommands::Requeue(uint32_t job, const SlurmNote& note, int64_t gpumem_mib,
                                 const std::string& avoid_node) {
  const std::string id = std::to_string(job);
  auto noted = Scontrol({"update", "JobId=" + id, "AdminComment=" + FormatSlurmNote(note)});
  if (!noted.ok()) return noted.status();
  auto before = ShowJob(job);
  if (before.ok() && *before && (*before)->state != "PENDING") {
    auto requeued = Scontrol({"requeue", id});
    if (!requeued.ok()) return requeued.status();
  }
  // A requeued job waits out Slurm's credential expiry before it may start; it is made
  // eligible at once as soon as it is pending again.
  const auto deadline = std::chrono::steady_clock::now() + kRequeuePendingWait;
  for (;;) {
    auto info = ShowJob(job);
    if (info.ok() && !*info) return NotFound(fmt::format("Slurm no longer knows job {}", job));
    if (info.ok() && (*info)->state == "PENDING") break;
    if (std::chrono::steady_clock::now() > deadline)
      return Unavailable(fmt::format("job {} did not become pending after its requeue", job));
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
  // One update: eligible a second from now (a start within the requeue's own second is refused
  // by the node, whose credentials for the job were revoked in that second), with the memory
  // the next run plans with as slurmctld's gpumem, off the node that could not place it.
  std::vector<std::string> update = {"update", "JobId=" + id, "StartTime=now+1"};
  if (!avoid_node.empty()) update.push_back("ExcNodeList=" + avoid_node);
  if (before.ok() && *before && gpumem_mib > 0 &&
      (*before)->tres_per_node.find("gpumem:") != std::string::npos)
    update.push_back("TresPerNode=" + WithGpumem((*before)->tres_per_node, gpumem_mib));
  auto now = Scontrol(update);
  return now.ok() ? Status::Ok() : now.status();
}

Result<std::string> ScontrolCommands::TailAsUser(const Identity& who, const std::string& path,
                                                 size_t max_bytes) {
  if (path.empty() || path[0] != '/') return InvalidArgument("not an absolute path: " + path);
  // setpriv drops to the user before tail opens anything: what the user cannot read, colod
  // does not read for them; a FIFO or endless device costs at most the timeout.
  auto run = RunCommand(
      {"/usr/bin/setpriv", fmt::format("--reuid={}", who.uid), fmt::format("--regid={}", who.gid),
       "--init-groups", "--", "/usr/bin/tail", "-c", std::to_string(max_bytes), "--", path},
      env_, Seconds(5), max_bytes);
  if (!run.ok()) return run.status();
  if (run->timed_out || run->exit_code != 0)
    return Unavailable(fmt::format("{} could not be read as {}", path, who.user));
  return ValidUtf8(run->output);
}

// --- The bridge ---

SlurmBridge::SlurmBridge(const Clock& clock, JobController& controller,
                         std::unique_ptr<SlurmCommands> commands, SlurmBridgeOptions options,
                         std::function<void()> wake)
    : clock_(clock),
      controller_(controller),
      commands_(std::move(commands)),
      options_(std::move(options)),
      wake_(std::move(wake)),
      next_reconcile_(clock.Now()),
      worker_([this] { WorkerLoop(); }) {}

SlurmBridge::~SlurmBridge() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  work_ready_.notify_all();
  worker_.join();
}

void SlurmBridge::Post(std::function<std::function<void()>()> work) {
  {
    std::lock_guard lock(mutex_);
    work_.push_back(std::move(work));
    ++in_flight_;
  }
  work_ready_.notify_one();
}

void SlurmBridge::WorkerLoop() {
  for (;;) {
    std::function<std::function<void()>()> work;
    {
      std::unique_lock lock(mutex_);
      work_ready_.wait(lock, [this] { return stopping_ || !work_.empty(); });
      if (stopping_) return;
      work = std::move(work_.front());
      work_.pop_front();
    }
    std::function<void()> done;
    try {
      done = work();
    } catch (const std::exception& e) {
      const std::string what = e.what();
      done = [what] { LogLine("Slurm work failed: " + what); };
    }
    {
      std::lock_guard lock(mutex_);
      done_.push_back(std::move(done));
    }
    if (wake_) wake_();
  }
}

Result<api::SlurmAttachReply> SlurmBridge::Attach(const api::SlurmAttachRequest& request) {
  const auto owner = IdentityOf(request.uid);
  TenantRequest tenant;
  tenant.slurm_job = request.job;
  tenant.owner = owner.value_or(Identity{request.uid, 0, ""});
  tenant.name = request.name;
  tenant.gpus = request.gpus;
  tenant.memory = request.memory;
  tenant.share = request.share;
  tenant.restarts = request.restarts;
  const Job* live = controller_.FindTenant(request.job);
  const bool known = live && live->slurm->restarts >= request.restarts;
  if (request.restarts > 0 && !known) {
    // A run after a requeue: an earlier run (here or on another node) may have raised its need.
    const auto key = std::make_pair(request.job, request.restarts);
    auto it = lookups_.find(key);
    if (it == lookups_.end()) {
      bool full;
      {
        std::lock_guard lock(mutex_);
        full = work_.size() >= options_.max_pending;
      }
      if (full) return Unavailable("colod's queue of work for Slurm is full; try again");
      if (lookups_.size() >= options_.max_pending) lookups_.erase(lookups_.begin());
      lookups_[key] = Lookup{};
      const uint32_t job = request.job;
      Post([this, job, key]() -> std::function<void()> {
        auto info = commands_->ShowJob(job);
        return [this, key, info = std::move(info)] {
          Lookup& l = lookups_[key];
          if (info.ok() && *info)
            l.note = ParseSlurmNote((*info)->admin_comment);
          else
            l.error = info.ok() ? "Slurm does not know the job" : info.status().message();
        };
      });
      return api::SlurmAttachReply{
          api::SlurmPlacement::kWaiting, 0, {}, "reading Slurm's record of the job's earlier runs"};
    }
    if (!it->second.note && it->second.error.empty())
      return api::SlurmAttachReply{
          api::SlurmPlacement::kWaiting, 0, {}, "reading Slurm's record of the job's earlier runs"};
    if (it->second.note) {
      tenant.raised_need = it->second.note->need;
      tenant.earlier_ooms = it->second.note->ooms;
    } else {
      LogLine(
          fmt::format("Slurm job {}: its earlier runs are unknown ({}); it plans with what "
                      "it asks for",
                      request.job, it->second.error));
    }
    lookups_.erase(it);
  }
  return controller_.AttachTenant(tenant);
}

Result<api::SlurmEndReply> SlurmBridge::End(const api::SlurmEndRequest& request) {
  const Job* tenant = controller_.FindTenant(request.job);
  if (!tenant) return api::SlurmEndReply{0, "unknown"};
  const JobId id = tenant->id();
  if (ending_.count(request.job)) return api::SlurmEndReply{id, "ending"};
  if (!request.wait_status) {
    // Slurm's epilog: the whole job is over on this node (a job of steps without a batch
    // script ends here; a batch job's script reported its own end before).
    controller_.EndTenant(request.job, AttemptEnd{ProcessEnd{true, 0, true}, "", ""});
    return api::SlurmEndReply{id, "ended"};
  }
  if (*request.wait_status == 0) {
    controller_.EndTenant(request.job, AttemptEnd{EndOfWaitStatus(*request.wait_status), "", ""});
    return api::SlurmEndReply{id, "ended"};
  }
  FinishEnd(request.job, id, tenant->owner, *request.wait_status);
  return api::SlurmEndReply{id, "ending"};
}

// A failed run: its output says whether it ran out of memory. Slurm knows where that went;
// it is read as the job's user, off colod's loop.
void SlurmBridge::FinishEnd(uint32_t slurm_job, JobId job, Identity owner, int wait_status) {
  ending_.insert(slurm_job);
  Post([this, slurm_job, job, owner, wait_status]() -> std::function<void()> {
    AttemptEnd end{EndOfWaitStatus(wait_status), "", ""};
    auto info = commands_->ShowJob(slurm_job);
    if (info.ok() && *info) {
      if (auto err = commands_->TailAsUser(owner, (*info)->std_err, kTailBytes); err.ok())
        end.stderr_tail = std::move(*err);
      if ((*info)->std_out != (*info)->std_err) {
        if (auto out = commands_->TailAsUser(owner, (*info)->std_out, kTailBytes); out.ok())
          end.stdout_tail = std::move(*out);
      }
    }
    return [this, slurm_job, job, end = std::move(end)] {
      ending_.erase(slurm_job);
      const Job* tenant = controller_.FindTenant(slurm_job);
      if (tenant && tenant->id() == job) controller_.EndTenant(slurm_job, end);
    };
  });
}

void SlurmBridge::HandBack(const TenantHandback& handback) {
  const SlurmNote note{
      handback.need > Bytes(0) ? std::optional<Bytes>(handback.need) : std::nullopt, handback.ooms};
  const std::string avoid = handback.avoid_this_node ? options_.node : "";
  const uint32_t slurm_job = handback.slurm_job;
  const std::string reason = handback.reason;
  constexpr int64_t kMiB = int64_t{1} << 20;
  const int64_t gpumem_mib =
      handback.need > Bytes(0) ? (handback.need.count() + kMiB - 1) / kMiB * handback.gpus : 0;
  Post([this, slurm_job, note, gpumem_mib, avoid, reason]() -> std::function<void()> {
    const Status s = commands_->Requeue(slurm_job, note, gpumem_mib, avoid);
    return [s, slurm_job, reason] {
      if (s.ok())
        LogLine(fmt::format("Slurm job {} requeued: {}", slurm_job, reason));
      else
        LogLine(fmt::format("Slurm job {} could not be requeued ({}): {}", slurm_job, reason,
                            s.message()));
    };
  });
}

void SlurmBridge::Reconcile() {
  {
    std::lock_guard lock(mutex_);
    if (in_flight_ > 0) return;  // the last round (or other work) is not through yet
  }
  for (const auto& [id, job] : controller_.live_jobs()) {
    if (!job.slurm || job.state != JobState::kRunning || ending_.count(job.slurm->job)) continue;
    const uint32_t slurm_job = job.slurm->job;
    const int restarts = job.slurm->restarts;
    const JobId colo_id = id;
    const Identity owner = job.owner;
    Post([this, slurm_job, restarts, colo_id, owner]() -> std::function<void()> {
      auto info = commands_->ShowJob(slurm_job);
      return [this, slurm_job, restarts, colo_id, owner, info = std::move(info)] {
        if (!info.ok()) return;  // Slurm did not answer: asked again at the next round
        const Job* tenant = controller_.FindTenant(slurm_job);
        if (!tenant || tenant->id() != colo_id || ending_.count(slurm_job)) return;
        if (*info && StillRunning((*info)->state) && (*info)->restarts <= restarts) return;
        // Its end never reached colod (colod was down, or the plugin could not tell).
        if (!*info) {
          controller_.EndTenant(slurm_job, AttemptEnd{ProcessEnd{true, 0, false}, "", ""});
          return;
        }
        const ProcessEnd end = EndOf(**info);
        if (end.exited && end.code == 0) {
          controller_.EndTenant(slurm_job, AttemptEnd{end, "", ""});
          return;
        }
        FinishEnd(slurm_job, colo_id, owner, end.exited ? (end.code << 8) : end.code);
      };
    });
  }
}

void SlurmBridge::Tick() {
  std::deque<std::function<void()>> done;
  {
    std::lock_guard lock(mutex_);
    done.swap(done_);
    in_flight_ -= done.size();
  }
  for (auto& f : done) f();
  if (clock_.Now() >= next_reconcile_) {
    next_reconcile_ = clock_.Now() + options_.reconcile_interval;
    Reconcile();
  }
}

std::optional<TimePoint> SlurmBridge::NextWakeup() const {
  return next_reconcile_;
}

}  // namespace colo
