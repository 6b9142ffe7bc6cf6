#include "cli/report_command.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>

#include "api/client.h"
#include "cli/client_commands.h"
#include "cli/job_table.h"
#include "cli/run_report_html.h"
#include "cli/run_summary.h"
#include "common/clock.h"
#include "common/stats.h"
#include "common/strings.h"
#include "common/text.h"
#include "common/units.h"
#include "sim/report.h"

namespace colo {
namespace {

constexpr double kGiB = 1024.0 * 1024 * 1024;
constexpr double kMissing = std::numeric_limits<double>::quiet_NaN();

// The attempt's end as the report draws it: how it ended, or "running".
std::string Outcome(const std::string& exit_kind) {
  if (exit_kind.empty()) return "running";
  if (exit_kind == "out-of-memory") return "oom";
  if (exit_kind == "success") return "done";
  if (exit_kind == "failure") return "failed";
  return exit_kind;  // cancelled, lost
}

std::string Cell(const std::optional<double>& v) {
  return v ? fmt::format("{}", *v) : std::string();  // missing stays an empty field
}
// A CSV field, quoted; one that a spreadsheet would take for a formula (a job's name is its
// owner's to choose) starts with an apostrophe.
std::string Quoted(const std::string& text) {
  std::string out = "\"";
  if (!text.empty() && std::string_view("=+-@\t\r").find(text.front()) != std::string_view::npos)
    out += '\'';
  for (char c : text) out += c == '"' ? std::string("\"\"") : std::string(1, c);
  return out + "\"";
}

std::string GpuCsv(const api::RunReportReply& run) {
  std::string out = "time,gpu,memory_used_bytes,smact,smocc,drama,power_watts,energy_joules\n";
  for (const api::RunGpuPoint& p : run.gpu_points)
    out += fmt::format("{:.3f},{},{},{},{},{},{},{}\n", p.time, p.gpu, Cell(p.memory_used),
                       Cell(p.smact), Cell(p.smocc), Cell(p.drama), Cell(p.power_watts),
                       Cell(p.energy_joules));
  return out;
}
std::string JobMemoryCsv(const api::RunReportReply& run) {
  std::string out = "time,job,gpu,memory_bytes\n";
  for (const api::RunJobPoint& p : run.job_points)
    out += fmt::format("{:.3f},{},{},{:.0f}\n", p.time, p.job, p.gpu, p.memory);
  return out;
}
std::string QueueCsv(const api::RunReportReply& run) {
  std::string out = "time,queued,running\n";
  for (const api::RunQueuePoint& p : run.queue_points)
    out += fmt::format("{:.3f},{},{}\n", p.time, p.queued, p.running);
  return out;
}
std::string JobsCsv(const api::RunReportReply& run) {
  std::string out =
      "job,name,user,state,submitted,attempt,gpus,started,ended,exit,peak_bytes,detail\n";
  for (const api::RunJob& job : run.jobs) {
    const api::JobSummary& s = job.summary;
    if (job.attempts.empty())
      out += fmt::format("{},{},{},{},{:.3f},,,,,,,\n", s.id, Quoted(s.name), Quoted(s.user),
                         ToString(s.state), s.submitted);
    for (const api::AttemptInfo& a : job.attempts) {
      std::string gpus;
      for (int g : a.gpus) gpus += (gpus.empty() ? "" : " ") + std::to_string(g);
      out += fmt::format("{},{},{},{},{:.3f},{},{},{:.3f},{:.3f},{},{},{}\n", s.id, Quoted(s.name),
                         Quoted(s.user), ToString(s.state), s.submitted, a.number, Quoted(gpus),
                         a.started, a.ended, a.exit_kind, a.peak.count(), Quoted(a.detail));
    }
  }
  return out;
}

Status WriteFile(const std::filesystem::path& path, const std::string& text) {
  std::error_code ec;
  if (path.has_parent_path()) std::filesystem::create_directories(path.parent_path(), ec);
  std::ofstream out(path);
  out << text;
  out.close();
  if (!out) return Unavailable(fmt::format("cannot write '{}'", path.string()));
  return Status::Ok();
}

}  // namespace

Result<double> ParseReportTime(const std::string& text, double now) {
  const std::string t(Trim(text));
  if (t.empty()) return InvalidArgument("an empty time");
  // A duration: that long ago ("2h", "-2h", "90m").
  const std::string ago = t[0] == '-' ? t.substr(1) : t;
  if (!ago.empty() && !std::isdigit(static_cast<unsigned char>(ago.back()))) {
    if (auto d = ParseDuration(ago); d.ok()) return now - ToSeconds(*d);
  }
  // Seconds since the epoch.
  if (std::all_of(t.begin(), t.end(), [](char c) { return std::isdigit(c) || c == '.'; })) {
    char* end = nullptr;
    const double v = std::strtod(t.c_str(), &end);
    if (end && *end == 0 && std::isfinite(v)) return v;
  }
  // Local calendar time.
  for (const char* format :
       {"%Y-%m-%dT%H:%M:%S", "%Y-%m-%dT%H:%M", "%Y-%m-%d %H:%M:%S", "%Y-%m-%d %H:%M", "%Y-%m-%d"}) {
    std::tm tm{};
    const char* end = strptime(t.c_str(), format, &tm);
    if (end && *end == 0) {
      tm.tm_isdst = -1;
      return static_cast<double>(std::mktime(&tm));
    }
  }
  return InvalidArgument(fmt::format(
      "'{}' is not a time: give a duration ago (2h, 30m, 1d), seconds since the epoch, or a "
      "local time (2024-05-01T12:00)",
      Printable(t)));
}

SimResult RunToSimResult(const api::RunReportReply& run, double origin) {
  SimResult result;
  Metrics& m = result.metrics;
  m.label = "colod: " + run.policy;
  m.estimator = "per job";
  Timeline& t = result.timeline;
  t.series.resize(run.gpus.size());
  for (const api::RunGpu& g : run.gpus)
    t.capacity_gib = std::max(t.capacity_gib, static_cast<double>(g.memory_total.count()) / kGiB);
  // Per GPU: the means, and the energy counter's first and last reading.
  std::vector<std::vector<double>> smact(run.gpus.size()), memory(run.gpus.size());
  std::vector<std::pair<double, double>> energy(run.gpus.size(), {kMissing, kMissing});
  for (const api::RunGpuPoint& p : run.gpu_points) {
    if (p.gpu < 0 || static_cast<size_t>(p.gpu) >= t.series.size()) continue;
    const size_t g = static_cast<size_t>(p.gpu);
    t.series[g].push_back(
        Timeline::Point{p.time - origin, p.memory_used ? *p.memory_used / kGiB : kMissing,
                        p.smact ? *p.smact : kMissing, p.power_watts ? *p.power_watts : kMissing});
    if (p.smact) smact[g].push_back(*p.smact);
    if (p.memory_used) memory[g].push_back(*p.memory_used / kGiB);
    if (p.energy_joules) {
      if (std::isnan(energy[g].first)) energy[g].first = *p.energy_joules;
      energy[g].second = *p.energy_joules;
    }
  }
  for (const api::RunQueuePoint& q : run.queue_points)
    t.queue.push_back({q.time - origin, q.queued, q.running});
  double all_smact = 0, all_memory = 0;
  size_t smact_gpus = 0, memory_gpus = 0;
  for (size_t g = 0; g < run.gpus.size(); ++g) {
    m.gpu_smact.push_back(Mean(smact[g]));
    m.gpu_memory_gib.push_back(Mean(memory[g]));
    if (!smact[g].empty()) all_smact += Mean(smact[g]), ++smact_gpus;
    const double capacity = static_cast<double>(run.gpus[g].memory_total.count()) / kGiB;
    if (!memory[g].empty() && capacity > 0) all_memory += Mean(memory[g]) / capacity, ++memory_gpus;
    // A counter that went back (the driver reloaded) counts nothing.
    if (!std::isnan(energy[g].first) && energy[g].second >= energy[g].first)
      m.energy_mj += (energy[g].second - energy[g].first) / 1e6;
  }
  m.mean_smact = smact_gpus ? all_smact / static_cast<double>(smact_gpus) : 0;
  m.mean_memory_frac = memory_gpus ? all_memory / static_cast<double>(memory_gpus) : 0;

  std::vector<double> waits, execs, jcts;
  double first_submit = std::numeric_limits<double>::infinity(), last_end = 0;
  for (const api::RunJob& job : run.jobs) {
    const api::JobSummary& s = job.summary;
    JobResult j;
    j.id = s.id;
    j.name = Interned(s.name);
    j.state = s.state;
    j.submit_s = s.submitted - origin;
    j.attempts = static_cast<int>(job.attempts.size());
    j.reason = s.redacted ? "(another user's)" : s.reason;
    first_submit = std::min(first_submit, s.submitted);
    for (const api::AttemptInfo& a : job.attempts) {
      if (a.started <= 0) continue;
      if (j.start_s < 0) j.start_s = a.started - origin;
      const std::string outcome = Outcome(a.exit_kind);
      if (outcome == "oom") {
        ++j.ooms;
        m.lost_gpu_hours +=
            static_cast<double>(a.gpus.size()) * std::max(0.0, a.ended - a.started) / 3600;
      }
      const double end = a.ended > 0 ? a.ended : run.until;
      for (int g : a.gpus)
        t.segments.push_back(
            Timeline::Segment{g, s.id, s.name, a.started - origin, end - origin, outcome});
    }
    m.oom_crashes += j.ooms;
    if (!IsTerminal(s.state)) {
      // Still waiting or running when the report was made.
    } else {
      j.end_s = s.finished - origin;
      last_end = std::max(last_end, s.finished);
    }
    ++m.jobs;
    if (s.state == JobState::kSucceeded) ++m.succeeded;
    if (s.state == JobState::kFailed || s.state == JobState::kLost) ++m.failed;
    if (j.start_s >= 0) waits.push_back(j.start_s - j.submit_s);
    if (j.start_s >= 0 && j.end_s >= 0) execs.push_back(j.end_s - j.start_s);
    if (s.state == JobState::kSucceeded && j.end_s >= 0) jcts.push_back(j.end_s - j.submit_s);
    result.jobs.push_back(std::move(j));
  }
  if (std::isfinite(first_submit) && last_end > first_submit)
    m.total_time_s = last_end - first_submit;
  m.wait_avg_s = Mean(waits), m.wait_p50_s = NearestRank(waits, 0.5);
  m.wait_p95_s = NearestRank(waits, 0.95), m.wait_p99_s = NearestRank(waits, 0.99);
  m.exec_avg_s = Mean(execs), m.exec_p50_s = NearestRank(execs, 0.5);
  m.exec_p95_s = NearestRank(execs, 0.95);
  m.jct_avg_s = Mean(jcts), m.jct_p50_s = NearestRank(jcts, 0.5),
  m.jct_p95_s = NearestRank(jcts, 0.95);
  m.jct_p99_s = NearestRank(jcts, 0.99);
  return result;
}

void AddReportCommand(CLI::App& app, ReportCommandOptions& o) {
  auto* report = app.add_subcommand(
      "report", "what colod recorded over a time range: an HTML report, CSV or JSON");
  report->add_option("--since", o.since,
                     "start: a duration ago (2h, 1d), seconds since the epoch or a local time "
                     "(2024-05-01T12:00); default: everything colod kept");
  report->add_option("--until", o.until, "end, likewise (default: now)");
  report->add_option("-o,--output", o.output,
                     "write to this file: .html (the report), .json (as --json) or .csv (the GPU "
                     "series)");
  report->add_option("--csv", o.csv_dir,
                     "write the series to this directory: gpus.csv, job_memory.csv, queue.csv, "
                     "jobs.csv");
  report->add_flag("--json", o.json,
                   "the run in colo sim's JSON shape (for colo sim --compare-with)");
  report
      ->add_option("--max-points", o.max_points,
                   "samples per series at most; a longer range is averaged into buckets")
      ->capture_default_str()
      ->check(CLI::Range(10, api::kMaxReportPoints));
}

int RunReportCommand(const ReportCommandOptions& o, const std::string& socket) {
  // Errors as every colo command gives them: JSON with --json, exit 2 for a usage error.
  const auto fail = [&](const Status& error, int exit_code = kExitError) {
    return ReportError(error, o.json, exit_code);
  };
  const double now = ToEpochSeconds(SystemClock().WallNow());
  api::RunReportRequest request;
  request.max_points = o.max_points;
  if (!o.since.empty()) {
    auto since = ParseReportTime(o.since, now);
    if (!since.ok())
      return fail(InvalidArgument("--since: " + since.status().message()), kExitUsage);
    request.since = *since;
  }
  if (!o.until.empty()) {
    auto until = ParseReportTime(o.until, now);
    if (!until.ok())
      return fail(InvalidArgument("--until: " + until.status().message()), kExitUsage);
    request.until = *until;
  }
  auto client = api::Client::Connect(socket.empty() ? api::DefaultSocketPath() : socket);
  if (!client.ok()) return fail(client.status());
  auto run = client->Call(request);
  if (!run.ok()) return fail(run.status());
  if (!run->history_error.empty())
    fmt::print(stderr, "colo report: note: {}\n", Printable(run->history_error));
  if (run->jobs_truncated)
    fmt::print(stderr,
               "colo report: note: more jobs in the range than one report holds; the latest are "
               "left out\n");

  // Time 0 of the report: its start, or the first thing recorded when it asked for everything.
  const double origin = ReportStart(*run);
  SimResult result = RunToSimResult(*run, origin);
  ReportContext context;
  context.trace = "recorded";
  context.server = run->backend;
  context.title = "colo report";
  context.description = fmt::format(
      "Recorded by colod ({} GPUs, {}) from {} to {}; policy {}{}.", run->gpus.size(), run->backend,
      LocalTimeText(origin, "%Y-%m-%d %H:%M:%S %Z"),
      LocalTimeText(run->until, "%Y-%m-%d %H:%M:%S %Z"), run->policy,
      run->bucket_seconds > 0 ? fmt::format("; samples averaged over {:.0f} s", run->bucket_seconds)
                              : "");
  const std::vector<SimResult> results{result};
  const std::string json = ToJson(context, results, /*with_jobs=*/true);

  if (!o.csv_dir.empty()) {
    const std::filesystem::path dir(o.csv_dir);
    for (const auto& [name, text] :
         {std::pair{"gpus.csv", GpuCsv(*run)}, std::pair{"job_memory.csv", JobMemoryCsv(*run)},
          std::pair{"queue.csv", QueueCsv(*run)}, std::pair{"jobs.csv", JobsCsv(*run)}}) {
      if (Status s = WriteFile(dir / name, text); !s.ok()) return fail(s);
    }
    fmt::print(stderr, "series: {}\n", std::filesystem::absolute(dir).string());
  }
  if (!o.output.empty()) {
    const std::filesystem::path path(o.output);
    const std::string ext = path.extension().string();
    std::string text;
    if (ext == ".json")
      text = json;
    else if (ext == ".csv")
      text = GpuCsv(*run);
    else
      text = RunReportHtml(*run, Summarize(*run), context.description);
    if (Status s = WriteFile(path, text); !s.ok()) return fail(s);
    fmt::print(stderr, "report: {}\n", std::filesystem::absolute(path).string());
  }
  if (o.json) {
    fmt::print("{}", json);
  } else if (o.output.empty() && o.csv_dir.empty()) {
    fmt::print("{}\n{}", context.description, FormatRunSummary(Summarize(*run)));
  }
  if (run->history_points > 0)
    fmt::print(stderr, "history: colod wrote {} points in {} transactions, {:.1f} us per point\n",
               run->history_points, run->history_flushes,
               1e6 * run->history_write_seconds / static_cast<double>(run->history_points));
  return 0;
}

}  // namespace colo
