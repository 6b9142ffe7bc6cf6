#include "cli/view_commands.h"

#include <fmt/format.h>

#include <chrono>
#include <cmath>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <type_traits>
#include <vector>

#include "api/client.h"
#include "cli/control_commands.h"
#include "cli/job_table.h"
#include "cli/report_command.h"
#include "common/clock.h"
#include "common/signals.h"
#include "common/strings.h"
#include "common/text.h"
#include "common/units.h"
#include "core/fair_share.h"

namespace colo {
namespace {

// Escaped for the terminal and cut to `n` columns on a character boundary ('+' marks the cut).
std::string Cell(const std::string& s, size_t n) {
  return FitColumns(s, n);
}

std::string Gib(Bytes bytes) {
  return fmt::format("{:.1f}", bytes.count() / double(1LL << 30));
}
std::string Pct(double v) {
  return v < 0 ? "-" : fmt::format("{:.0f}%", 100 * v);
}

int PrintJobs(const ClientOptions& o, const std::vector<api::JobSummary>& jobs, bool history) {
  // On a Slurm node, each job's Slurm id too ("-" for a job submitted to colo itself).
  const bool slurm = std::any_of(jobs.begin(), jobs.end(),
                                 [](const api::JobSummary& j) { return j.slurm_job.has_value(); });
  auto format = JobFormat::Parse(!o.format.empty() ? o.format
                                 : history         ? DefaultHistoryFormat(slurm)
                                                   : DefaultQueueFormat(slurm));
  if (!format.ok()) return ReportError(format.status(), o.json, kExitUsage);
  if (!o.no_header) fmt::print("{}\n", format->Header());
  const double now = ToEpochSeconds(SystemClock().WallNow());
  for (const api::JobSummary& j : jobs) fmt::print("{}\n", format->Row(j, now));
  return kExitOk;
}

// sacct's selections, over ended jobs: -S (ended at or after), -E (submitted at or before),
// -s states, -u users, -j jobs (an array's id: all its tasks), --name names.
class HistoryFilter {
 public:
  static Result<HistoryFilter> Make(const ClientOptions& o) {
    HistoryFilter f;
    const double now = ToEpochSeconds(SystemClock().WallNow());
    if (!o.since.empty()) {
      auto t = ParseReportTime(o.since, now);
      if (!t.ok()) return InvalidArgument("--starttime: " + t.status().message());
      f.since_ = *t;
    }
    if (!o.until.empty()) {
      auto t = ParseReportTime(o.until, now);
      if (!t.ok()) return InvalidArgument("--endtime: " + t.status().message());
      f.until_ = *t;
    }
    for (const std::string& word : Words(o.state_filter)) {
      auto state = StateNamed(word);
      if (!state)
        return InvalidArgument(
            fmt::format("--state: '{}' is not a state (colo history --help "
                        "lists them)",
                        Printable(word)));
      f.states_.insert(*state);
    }
    for (const std::string& word : Words(o.jobs_filter)) {
      if (!IsJobRef(word))
        return InvalidArgument(fmt::format("--jobs: '{}' is not a job id", Printable(word)));
      f.jobs_.insert(word);
    }
    for (const std::string& word : Words(o.user)) f.users_.insert(word);
    for (const std::string& word : Words(o.name)) f.names_.insert(word);
    return f;
  }

  bool Matches(const api::JobSummary& j) const {
    if (since_ && j.finished < *since_) return false;
    if (until_ && j.submitted > *until_) return false;
    if (!states_.empty() && !states_.count(j.state)) return false;
    if (!users_.empty() && !users_.count(j.user)) return false;
    if (!names_.empty() && !names_.count(j.name)) return false;
    if (!jobs_.empty() && !jobs_.count(std::to_string(j.id)) && !jobs_.count(JobIdText(j)) &&
        !(j.array_job && jobs_.count(std::to_string(*j.array_job))))
      return false;
    return true;
  }
  bool others() const { return !users_.empty(); }

 private:
  static std::vector<std::string> Words(const std::string& list) {
    std::vector<std::string> words;
    for (const std::string& w : Split(list, ','))
      if (!Trim(w).empty()) words.emplace_back(Trim(w));
    return words;
  }
  std::optional<double> since_, until_;
  std::set<JobState> states_;
  std::set<std::string> users_, names_, jobs_;
};

int History(const ClientOptions& o) {
  auto filter = HistoryFilter::Make(o);
  if (!filter.ok()) return ReportError(filter.status(), o.json, kExitUsage);
  // Pages of at most kMaxHistoryPage, so a long history never holds colod up for others; with
  // filters, pages until --limit jobs matched or the history ends.
  std::vector<api::JobSummary> jobs;
  api::HistoryRequest request;
  request.all = o.all || filter->others();
  request.limit = api::kMaxHistoryPage;
  while (static_cast<int>(jobs.size()) < o.limit) {
    auto page = Call(o, request);
    if (!page.ok()) return Fail(o, page.status());
    for (const api::JobSummary& j : page->jobs) {
      if (filter->Matches(j) && static_cast<int>(jobs.size()) < o.limit) jobs.push_back(j);
    }
    if (!page->next) break;
    request.before = page->next;
  }
  if (o.json) {
    fmt::print("{}\n", api::EncodeReply(api::HistoryReply{jobs, std::nullopt}));
    return 0;
  }
  return PrintJobs(o, jobs, true);
}

void PrintShow(const api::JobDetail& j) {
  const api::JobSummary& s = j.summary;
  fmt::print(
      "JobId={}{}{} Name={} User={} State={} Attempts={}\n", s.id,
      s.array_job ? fmt::format(" ArrayJobId={} ArrayTaskId={}", *s.array_job, s.array_task) : "",
      s.slurm_job ? fmt::format(" SlurmJobId={}", *s.slurm_job) : "", Printable(s.name),
      Printable(s.user), StateWord(s.state), s.attempts);
  std::vector<std::string> words;
  for (const std::string& w : j.command) words.push_back(Printable(w));
  fmt::print("   Command={}\n   WorkDir={} Source={}{}\n", Join(words, " "),
             Printable(j.context.workdir), Printable(j.context.source),
             j.context.umask ? fmt::format(" Umask={:04o}", *j.context.umask) : "");
  if (j.context.requeue) {
    const api::JobSignal signal = j.context.signal.value_or(api::JobSignal{});
    fmt::print("   Requeue=1 Signal={}@{}\n", SignalName(signal.number), signal.lead_s);
  }
  if (!j.output_file.empty() || !j.error_file.empty()) {
    fmt::print("   StdOut={} StdErr={}\n", j.output_file.empty() ? "-" : Printable(j.output_file),
               j.error_file.empty() ? "-" : Printable(j.error_file));
  }
  // Once a job has ended colod plans nothing for it: its need is what its last attempt ran with.
  const api::AttemptInfo* last = j.attempt_list.empty() ? nullptr : &j.attempt_list.back();
  std::string need = "-";
  if (j.need)
    need =
        fmt::format("{} ({})", FormatBytes(*j.need), j.need_source.empty() ? "-" : j.need_source);
  else if (last && last->memory_limit > Bytes(0))
    need =
        fmt::format("{} (planned for attempt {})", FormatBytes(last->memory_limit), last->number);
  fmt::print("   Gpus={} Memory={} Need={} Share={}\n", s.gpus,
             s.memory ? FormatBytes(*s.memory) : "unknown", need, ToString(s.share));
  if (j.estimate) {
    const api::JobEstimate& e = *j.estimate;
    fmt::print("   Estimate={} peak={} GiB upper={} GiB ({})\n", Printable(e.estimator),
               Gib(e.peak), Gib(e.upper), Printable(e.detail));
    if (e.learned && e.learned->runs > 0) {
      fmt::print("   Learned from {} earlier run(s): peak={} GiB upper={} GiB\n", e.learned->runs,
                 Gib(e.learned->peak), Gib(e.learned->upper));
    }
  }
  if (j.smact) {
    // Where the number came from: colod plans with the user's, else what runs measured, else the
    // client's prediction; each is kept with the estimate.
    std::string_view source = "given with --smact";
    const auto same = [&](double v) { return v >= 0 && std::abs(v - *j.smact) < 1e-9; };
    if (j.estimate && j.estimate->learned && same(j.estimate->learned->solo_smact)) {
      source = "learned from earlier runs alone on a GPU";
    } else if (j.estimate && same(j.estimate->predicted_smact)) {
      source = "predicted from the profile's FLOPs and bytes per step";
    }
    fmt::print("   Smact={:.2f} ({})\n", *j.smact, source);
  }
  fmt::print("   TimeLimit={} SubmitTime={} StartTime={} EndTime={}\n",
             TimeLimitText(s.time_limit_s), WallTimeText(s.submitted), WallTimeText(s.started),
             WallTimeText(s.finished));
  if (!s.reason.empty()) fmt::print("   Reason={}\n", Printable(s.reason));
  for (const api::AttemptInfo& a : j.attempt_list) {
    std::vector<std::string> indices;
    for (int g : a.gpus) indices.push_back(std::to_string(g));
    const std::string exit_code =
        a.exit_code || a.exit_signal
            ? fmt::format(" ExitCode={}:{}", a.exit_code.value_or(0), a.exit_signal.value_or(0))
            : "";
    fmt::print("   Attempt {}: GPUs {} ({}) {} pid={} peak={} GiB {}{} {}\n", a.number,
               Join(indices, ","), Join(a.gpu_uuids, ","), a.mode, a.pid, Gib(a.peak),
               a.exit_kind.empty() ? "running" : a.exit_kind, exit_code, Printable(a.detail));
  }
  // The latest attempt that used more than its plan while sharing without an MPS limit.
  for (auto a = j.attempt_list.rbegin(); a != j.attempt_list.rend(); ++a) {
    if (!a->over_plan) continue;
    fmt::print("   OverPlan=peak {} GiB > plan {} GiB (attempt {}, sharing without an MPS limit)\n",
               Gib(a->peak), Gib(a->memory_limit), a->number);
    break;
  }
  for (const api::EventInfo& e : j.events)
    fmt::print("   {} {:<10} {}\n", WallTimeText(e.time), Printable(e.kind), Printable(e.detail));
}

// `name` for the job the command names: as typed when that was ARRAY_TASK, else as the queue
// knows it (a task of an array as ARRAY_TASK), else its id.
std::string JobNamed(const ClientOptions& o) {
  if (o.job_ref.find('_') != std::string::npos) return o.job_ref;
  const auto names = LiveJobIdTexts(o, {o.job});
  const auto it = names.find(o.job);
  return it != names.end() ? it->second : std::to_string(o.job);
}

void PrintShare(const api::ShareReply& r) {
  fmt::print("order {}, usage halves every {}\n", r.order, FormatDuration(SecondsF(r.half_life_s)));
  fmt::print("{:<16} {:>6} {:>7} {:>10} {:>7} {:>7} {:>8} {:>8} {:>5} {:>10}  {}\n", "USER",
             "SHARE", "SHARE%", "USAGE_GPUh", "USAGE%", "FACTOR", "RUNNING", "WAITING", "GPUS",
             "GPU_MEM", "LIMITS");
  for (const api::ShareUser& u : r.users) {
    fmt::print("{:<16} {:>6} {:>7} {:>10.2f} {:>7} {:>7.3f} {:>8} {:>8} {:>5} {:>10}  {}\n",
               Printable(u.user), fmt::format("{:g}", u.share), Percent(u.share_fraction),
               u.usage_gpu_hours, Percent(u.usage_fraction), u.factor, u.running, u.waiting, u.gpus,
               FormatBytes(u.gpu_memory), u.limits.empty() ? "-" : Printable(u.limits));
  }
  if (r.users.empty()) fmt::print("(no user has jobs or recent usage)\n");
}

void PrintGpus(const api::GpusReply& r, const std::map<JobId, std::string>& names) {
  fmt::print("{:>3} {:<24} {:>6} {:>6} {:>8} {:>6} {:>6} {:>7} {:>10} {:<9} {}\n", "GPU", "NAME",
             "USED", "TOTAL", "FREE4JOB", "SMACT", "SMOCC", "POWER", "ENERGY_kJ", "MODE", "JOBS");
  for (const api::GpuInfoReply& g : r.gpus) {
    std::string jobs;
    for (const api::GpuJobInfo& j : g.jobs)
      jobs += fmt::format("{}{}({},{})", jobs.empty() ? "" : " ",
                          names.count(j.id) ? names.at(j.id) : std::to_string(j.id),
                          Printable(j.user), j.mode);
    fmt::print("{:>3} {:<24} {:>6} {:>6} {:>8} {:>6} {:>6} {:>7} {:>10} {:<9} {}\n", g.index,
               Cell(g.name, 24), g.memory_used ? Gib(*g.memory_used) : "-", Gib(g.memory_total),
               Gib(g.free_for_placement), Pct(g.smact), Pct(g.smocc),
               g.power_watts < 0 ? "-" : fmt::format("{:.0f}W", g.power_watts),
               g.energy_joules < 0 ? "-" : fmt::format("{:.1f}", g.energy_joules / 1000), g.mode,
               jobs.empty() ? "-" : jobs);
  }
  for (const api::GpuInfoReply& g : r.gpus) {
    if (g.activity_source != "utilization") continue;
    fmt::print(stderr,
               "colo: warning: GPU {}'s SMACT is NVML's coarse utilization, not SM activity ({}); "
               "install DCGM for SM activity, occupancy and DRAM activity\n",
               g.index, Printable(g.activity_note.empty() ? "no GPM, no DCGM" : g.activity_note));
  }
}

}  // namespace

int RunViewCommand(CLI::App& app, const ClientOptions& o) {
  if (app.got_subcommand("history")) return History(o);
  auto print = [&](const auto& reply, auto&& human) {
    if (!reply.ok()) return Fail(o, reply.status());
    if (o.json) {
      fmt::print("{}\n", api::EncodeReply(*reply));
      return kExitOk;
    }
    if constexpr (std::is_same_v<decltype(human(*reply)), int>) {
      return human(*reply);
    } else {
      human(*reply);
      return kExitOk;
    }
  };
  if (app.got_subcommand("queue"))
    return print(CallQueue(o, o.user),
                 [&](const api::QueueReply& r) { return PrintJobs(o, r.jobs, false); });
  if (app.got_subcommand("show"))
    return print(Call(o, api::ShowRequest{o.job}),
                 [](const api::ShowReply& r) { PrintShow(r.job); });
  if (app.got_subcommand("explain"))
    return print(Call(o, api::ExplainRequest{o.job}), [&](const api::ExplainReply& r) {
      fmt::print("job {} ({}): {}\n", JobNamed(o), StateWord(r.state), Printable(r.summary));
      if (r.position > 0)
        fmt::print("  position {} of {} in the {} queue\n", r.position, r.waiting, r.queue);
      if (!r.standing.empty()) fmt::print("  fair share: {}\n", Printable(r.standing));
      if (!r.limit.empty()) fmt::print("  limit: {}\n", Printable(r.limit));
      if (!r.reservation.empty()) fmt::print("  reservation: {}\n", Printable(r.reservation));
      for (const api::GateInfo& g : r.gpus)
        fmt::print("  GPU {:<3} {:<14} {}\n", g.gpu, g.gate, Printable(g.detail));
    });
  if (app.got_subcommand("share"))
    return print(Call(o, api::ShareRequest{}), [](const api::ShareReply& r) { PrintShare(r); });
  if (app.got_subcommand("gpus"))
    return print(Call(o, api::GpusRequest{}), [&](const api::GpusReply& r) {
      std::vector<JobId> running;
      for (const api::GpuInfoReply& g : r.gpus) {
        for (const api::GpuJobInfo& j : g.jobs) running.push_back(j.id);
      }
      PrintGpus(r, LiveJobIdTexts(o, running));
    });
  return -1;
}

}  // namespace colo
