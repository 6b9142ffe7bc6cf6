#include "cli/eff_command.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <map>
#include <nlohmann/json.hpp>
#include <set>

#include "cli/control_commands.h"
#include "cli/job_table.h"
#include "common/clock.h"
#include "common/stats.h"
#include "common/text.h"

namespace colo {
namespace {

// GiB to a tenth, without a trailing ".0": 24, 7.9.
std::string Gib(Bytes b) {
  std::string text = fmt::format("{:.1f}", b.gib());
  if (text.ends_with(".0")) text.resize(text.size() - 2);
  return text;
}

// The --mem to ask for: the peak and a tenth more, in whole GiB.
int64_t SuggestedGib(Bytes peak) {
  return std::max<int64_t>(1, static_cast<int64_t>(std::ceil(peak.gib() * 1.1)));
}

std::string Verdict(const Efficiency& e) {
  if (e.attempts == 0) return "it never ran: nothing to judge";
  if (e.peak <= Bytes(0)) return "no GPU memory was seen in use: nothing to suggest";
  const int64_t suggested = SuggestedGib(e.peak);
  if (e.out_of_memory > 0)
    return fmt::format(
        "ran out of GPU memory {} time(s) before its plan fit; used {} GiB: next time --mem {}GiB",
        e.out_of_memory, Gib(e.peak), suggested);
  if (e.planned <= Bytes(0))
    return fmt::format("planned without a memory figure, used {} GiB: next time --mem {}GiB",
                       Gib(e.peak), suggested);
  if (e.peak > e.planned)
    return fmt::format(
        "used {} GiB, more than the {} GiB planned (shared without an MPS limit): next time "
        "--mem {}GiB",
        Gib(e.peak), Gib(e.planned), suggested);
  if (static_cast<double>(suggested) < 0.8 * e.planned.gib())
    return fmt::format("asked {} GiB, used {}: next time --mem {}GiB", Gib(e.planned), Gib(e.peak),
                       suggested);
  return fmt::format("asked {} GiB, used {} ({:.0f}%): the plan fits", Gib(e.planned), Gib(e.peak),
                     100 * e.peak.gib() / e.planned.gib());
}

// Its GPUs' samples while its attempts ran: SM activity, the energy counters' rise, and whether
// another job's attempt ran on one of them meanwhile.
void AddRecorded(const std::vector<api::JobDetail>& jobs, const api::RunReportReply& recorded,
                 double now, Efficiency& e) {
  struct Span {
    int gpu;
    double from, to;
  };
  std::vector<Span> spans;
  std::set<JobId> ours;
  for (const api::JobDetail& j : jobs) {
    ours.insert(j.summary.id);
    for (const api::AttemptInfo& a : j.attempt_list) {
      if (a.started <= 0) continue;
      for (int g : a.gpus) spans.push_back({g, a.started, a.ended > 0 ? a.ended : now});
    }
  }
  std::vector<double> smact;
  double joules = 0;
  bool any_energy = false;
  for (const Span& s : spans) {
    std::optional<double> first, last;
    for (const api::RunGpuPoint& p : recorded.gpu_points) {
      if (p.gpu != s.gpu || p.time < s.from || p.time > s.to) continue;
      if (p.smact) smact.push_back(*p.smact);
      if (p.energy_joules) {
        if (!first) first = *p.energy_joules;
        last = *p.energy_joules;
      }
    }
    if (first && *last >= *first) {
      joules += *last - *first;
      any_energy = true;
    }
  }
  if (!smact.empty()) {
    e.smact_mean = Mean(smact);
    e.smact_p95 = NearestRank(smact, 0.95);
  }
  if (any_energy) e.energy_wh = joules / 3600;
  for (const api::RunJob& other : recorded.jobs) {
    if (ours.count(other.summary.id)) continue;
    for (const api::AttemptInfo& a : other.attempts) {
      if (a.started <= 0) continue;
      const double end = a.ended > 0 ? a.ended : now;
      for (const Span& s : spans) {
        const bool same_gpu = std::find(a.gpus.begin(), a.gpus.end(), s.gpu) != a.gpus.end();
        if (same_gpu && a.started < s.to && end > s.from) e.shared = true;
      }
    }
  }
  if (smact.empty() && !recorded.history_error.empty()) e.history_note = recorded.history_error;
}

}  // namespace

Efficiency Evaluate(const std::string& label, const std::vector<api::JobDetail>& jobs,
                    const api::RunReportReply* recorded, double now) {
  Efficiency e;
  e.job = label;
  e.tasks = static_cast<int>(jobs.size());
  std::map<std::string, int> states;
  std::vector<Bytes> peaks;
  for (const api::JobDetail& j : jobs) {
    const api::JobSummary& s = j.summary;
    if (e.name.empty()) e.name = s.name, e.user = s.user;
    e.gpus = std::max(e.gpus, s.gpus);
    ++states[StateWord(s.state)];
    Bytes peak;
    for (const api::AttemptInfo& a : j.attempt_list) {
      ++e.attempts;
      if (a.exit_kind == "out-of-memory") ++e.out_of_memory;
      peak = std::max(peak, a.peak);
      if (a.started > 0)
        e.gpu_hours += static_cast<double>(a.gpus.size()) *
                       std::max(0.0, (a.ended > 0 ? a.ended : now) - a.started) / 3600;
    }
    // The plan its last attempt ran under: what it was asked to fit (raised after a crash).
    if (!j.attempt_list.empty())
      e.planned = std::max(e.planned, j.attempt_list.back().memory_limit);
    e.peak = std::max(e.peak, peak);
    peaks.push_back(peak);
  }
  for (const auto& [state, count] : states)
    e.states.push_back(jobs.size() > 1 ? fmt::format("{} {}", count, state) : state);
  if (!peaks.empty()) {
    std::sort(peaks.begin(), peaks.end());
    e.median_peak = peaks[(peaks.size() - 1) / 2];
  }
  if (recorded) AddRecorded(jobs, *recorded, now, e);
  e.verdict = Verdict(e);
  return e;
}

std::string FormatEfficiency(const Efficiency& e) {
  std::string out;
  const auto line = [&](std::string_view key, const std::string& value) {
    out += fmt::format("{:<22}{}\n", std::string(key) + ":", value);
  };
  line("Job", e.job);
  line("Name", Printable(e.name));
  line("User", Printable(e.user));
  std::string states;
  for (const std::string& s : e.states) states += (states.empty() ? "" : ", ") + s;
  line("State", states);
  line("Attempts", e.out_of_memory > 0
                       ? fmt::format("{} ({} out of GPU memory)", e.attempts, e.out_of_memory)
                       : std::to_string(e.attempts));
  line("GPUs", fmt::format("{}{}", e.gpus, e.tasks > 1 ? " per task" : ""));
  line("GPU-hours", fmt::format("{:.3f}", e.gpu_hours));
  line("GPU memory planned", e.planned > Bytes(0) ? Gib(e.planned) + " GiB per GPU" : "-");
  std::string peak = e.peak > Bytes(0) ? Gib(e.peak) + " GiB per GPU" : "-";
  if (e.peak > Bytes(0) && e.planned > Bytes(0))
    peak += fmt::format(" ({:.0f}% of planned)", 100 * e.peak.gib() / e.planned.gib());
  if (e.tasks > 1 && e.peak > Bytes(0))
    peak += fmt::format("; median over tasks {} GiB", Gib(e.median_peak));
  line("GPU memory peak", peak);
  const std::string whose = e.shared ? " (its GPUs, shared with other jobs at times)" : "";
  if (e.smact_mean)
    line("SM activity", fmt::format("mean {:.0f}%, p95 {:.0f}%{}", 100 * *e.smact_mean,
                                    100 * *e.smact_p95, whose));
  else
    line("SM activity", "- (" +
                            (e.history_note.empty() ? std::string("no samples recorded")
                                                    : Printable(e.history_note)) +
                            ")");
  line("Energy", e.energy_wh ? fmt::format("{:.1f} Wh{}", *e.energy_wh, whose) : "-");
  line("Verdict", e.verdict);
  return out;
}

void AddEffCommand(CLI::App& app, ClientOptions& o) {
  auto* eff = app.add_subcommand(
      "eff", "how well a job or a whole array used its plan (like seff), with a verdict");
  eff->add_option("job", o.job_ref, "job id (ARRAY_TASK for one task; an array's id: all tasks)")
      ->required()
      ->check(JobRefValidator());
  eff->add_flag("--json", o.json, kJsonHelp);
  eff->footer(
      "GPU memory: the plan each attempt ran under and the peak seen, per GPU. SM activity and "
      "energy: its GPUs' samples while it ran, as colod recorded them (colo report); where "
      "another job shared a GPU they include that job's share. The verdict suggests the peak "
      "and a tenth more as the next --mem.");
}

int RunEffCommand(const ClientOptions& o) {
  // An array's id (not named as ARRAY_TASK) is every task of it.
  auto first = Call(o, api::ShowRequest{o.job});
  if (!first.ok()) return ReportError(first.status(), o.json);
  std::vector<api::JobDetail> jobs;
  std::string label = JobIdText(first->job.summary);
  if (first->job.summary.array_job == o.job && o.job_ref.find('_') == std::string::npos) {
    auto tasks = ArrayTasks(o, o.job);
    if (!tasks.ok()) return ReportError(tasks.status(), o.json);
    for (JobId id : *tasks) {
      auto task = Call(o, api::ShowRequest{id});
      if (!task.ok()) return ReportError(task.status(), o.json);
      jobs.push_back(std::move(task->job));
    }
    label = fmt::format("{} (array, {} tasks)", o.job, jobs.size());
  } else {
    jobs.push_back(std::move(first->job));
  }
  const double now = ToEpochSeconds(SystemClock().WallNow());
  double since = now, until = 0;
  for (const api::JobDetail& j : jobs) {
    for (const api::AttemptInfo& a : j.attempt_list) {
      if (a.started <= 0) continue;
      since = std::min(since, a.started);
      until = std::max(until, a.ended > 0 ? a.ended : now);
    }
  }
  std::optional<api::RunReportReply> recorded;
  std::string note;
  if (until > 0) {
    api::RunReportRequest request;
    request.since = since - 1;
    request.until = std::min(now, until + 1);
    auto reply = Call(o, request);
    if (reply.ok())
      recorded = std::move(*reply);
    else
      note = reply.status().message();
  }
  Efficiency e = Evaluate(label, jobs, recorded ? &*recorded : nullptr, now);
  if (!note.empty()) e.history_note = note;
  if (o.json) {
    nlohmann::ordered_json out = {
        {"ok", true},
        {"job", e.job},
        {"tasks", e.tasks},
        {"states", e.states},
        {"attempts", e.attempts},
        {"out_of_memory", e.out_of_memory},
        {"gpus", e.gpus},
        {"gpu_hours", e.gpu_hours},
        {"planned", e.planned.count()},
        {"peak", e.peak.count()},
        {"median_peak", e.median_peak.count()},
        {"smact_mean", e.smact_mean ? nlohmann::ordered_json(*e.smact_mean) : nullptr},
        {"smact_p95", e.smact_p95 ? nlohmann::ordered_json(*e.smact_p95) : nullptr},
        {"energy_wh", e.energy_wh ? nlohmann::ordered_json(*e.energy_wh) : nullptr},
        {"shared", e.shared},
        {"verdict", e.verdict}};
    fmt::print("{}\n", out.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace));
    return kExitOk;
  }
  fmt::print("{}", FormatEfficiency(e));
  return kExitOk;
}

}  // namespace colo
