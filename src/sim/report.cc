#include "sim/report.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <nlohmann/json.hpp>

#include "common/strings.h"
#include "common/text.h"

namespace colo {

namespace {

const Metrics* FindBaseline(const std::vector<SimResult>& results, const std::string& baseline) {
  for (const auto& r : results) {
    if (r.metrics.label == baseline) return &r.metrics;
  }
  return nullptr;
}

std::string Ratio(double value, const Metrics* base, double base_value) {
  if (!base || base_value <= 0) return "-";
  return fmt::format("{:.2f}", value / base_value);
}

struct Column {
  const char* header;
  std::function<std::string(const Metrics&, const Metrics*)> cell;
};

std::vector<Column> Columns() {
  return {
      {"policy", [](const Metrics& m, const Metrics*) { return m.label; }},
      {"estimator", [](const Metrics& m, const Metrics*) { return m.estimator; }},
      {"total_h", [](const Metrics& m,
                     const Metrics*) { return fmt::format("{:.2f}", m.total_time_s / 3600); }},
      {"x", [](const Metrics& m,
               const Metrics* b) { return Ratio(m.total_time_s, b, b ? b->total_time_s : 0); }},
      {"wait_min",
       [](const Metrics& m, const Metrics*) { return fmt::format("{:.1f}", m.wait_avg_s / 60); }},
      {"exec_min",
       [](const Metrics& m, const Metrics*) { return fmt::format("{:.1f}", m.exec_avg_s / 60); }},
      {"jct_min",
       [](const Metrics& m, const Metrics*) { return fmt::format("{:.1f}", m.jct_avg_s / 60); }},
      {"x", [](const Metrics& m,
               const Metrics* b) { return Ratio(m.jct_avg_s, b, b ? b->jct_avg_s : 0); }},
      {"jct_p95_min",
       [](const Metrics& m, const Metrics*) { return fmt::format("{:.1f}", m.jct_p95_s / 60); }},
      {"oom", [](const Metrics& m, const Metrics*) { return fmt::format("{}", m.oom_crashes); }},
      {"lost_gpu_h",
       [](const Metrics& m, const Metrics*) { return fmt::format("{:.2f}", m.lost_gpu_hours); }},
      {"energy_MJ",
       [](const Metrics& m, const Metrics*) { return fmt::format("{:.1f}", m.energy_mj); }},
      {"x", [](const Metrics& m,
               const Metrics* b) { return Ratio(m.energy_mj, b, b ? b->energy_mj : 0); }},
      {"smact_%",
       [](const Metrics& m, const Metrics*) { return fmt::format("{:.1f}", 100 * m.mean_smact); }},
      {"mem_%", [](const Metrics& m,
                   const Metrics*) { return fmt::format("{:.1f}", 100 * m.mean_memory_frac); }},
      {"failed", [](const Metrics& m, const Metrics*) { return fmt::format("{}", m.failed); }},
  };
}

// For traces of several users: their mean slowdowns' Jain index and the worst user's slowdown.
std::vector<Column> FairnessColumns() {
  return {
      {"jain",
       [](const Metrics& m, const Metrics*) { return fmt::format("{:.3f}", m.jain_slowdown); }},
      {"worst_user_slowdown",
       [](const Metrics& m, const Metrics*) {
         return fmt::format("{:.1f} ({})", m.worst_user_slowdown, m.worst_user);
       }},
  };
}

}  // namespace

std::string HtmlEscape(std::string_view s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '&':
        out += "&amp;";
        break;
      case '"':
        out += "&quot;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

std::string FormatTable(const std::vector<SimResult>& results, const std::string& baseline) {
  const Metrics* base = FindBaseline(results, baseline);
  auto columns = Columns();
  if (std::any_of(results.begin(), results.end(),
                  [](const SimResult& r) { return r.metrics.users > 1; })) {
    for (Column& c : FairnessColumns()) columns.push_back(std::move(c));
  }
  std::vector<std::vector<std::string>> rows;
  std::vector<std::string> header;
  for (const auto& c : columns) header.push_back(c.header);
  rows.push_back(header);
  for (const auto& r : results) {
    std::vector<std::string> row;
    for (const auto& c : columns) row.push_back(c.cell(r.metrics, base));
    rows.push_back(row);
  }
  std::vector<size_t> width(columns.size(), 0);
  for (const auto& row : rows) {
    for (size_t i = 0; i < row.size(); ++i) width[i] = std::max(width[i], row[i].size());
  }
  std::string out;
  for (const auto& row : rows) {
    for (size_t i = 0; i < row.size(); ++i) {
      out += i == 0 ? fmt::format("{:<{}}", row[i], width[i])
                    : fmt::format("  {:>{}}", row[i], width[i]);
    }
    out += "\n";
  }
  if (base) out += fmt::format("x = ratio to '{}' (lower is better)\n", baseline);
  return out;
}

std::string ToCsv(const std::vector<SimResult>& results) {
  std::string out =
      "policy,jobs,succeeded,failed,total_time_s,wait_avg_s,wait_p50_s,wait_p95_s,exec_avg_s,exec_"
      "p50_s,"
      "exec_p95_s,jct_avg_s,jct_p50_s,jct_p95_s,oom_crashes,lost_gpu_hours,energy_mj,mean_smact,"
      "mean_memory_frac,wait_p99_s,jct_p99_s,requeues,estimator\n";
  for (const auto& r : results) {
    const Metrics& m = r.metrics;
    out += fmt::format(
        "\"{}\",{},{},{},{:.3f},{:.3f},{:.3f},{:.3f},{:.3f},{:.3f},{:.3f},{:.3f},{:.3f},{:.3f},{},{"
        ":.4f},"
        "{:.4f},{:.4f},{:.4f},{:.3f},{:.3f},{},\"{}\"\n",
        m.label, m.jobs, m.succeeded, m.failed, m.total_time_s, m.wait_avg_s, m.wait_p50_s,
        m.wait_p95_s, m.exec_avg_s, m.exec_p50_s, m.exec_p95_s, m.jct_avg_s, m.jct_p50_s,
        m.jct_p95_s, m.oom_crashes, m.lost_gpu_hours, m.energy_mj, m.mean_smact, m.mean_memory_frac,
        m.wait_p99_s, m.jct_p99_s, m.requeues, m.estimator);
  }
  return out;
}

std::string ToJson(const ReportContext& context, const std::vector<SimResult>& results,
                   bool with_jobs) {
  nlohmann::ordered_json doc;
  doc["trace"] = context.trace;
  doc["server"] = context.server;
  doc["servers"] = context.servers;
  doc["seed"] = context.seed;
  auto& runs = doc["runs"] = nlohmann::ordered_json::array();
  auto round = [](double v) { return std::round(v * 1e4) / 1e4; };
  for (const auto& r : results) {
    const Metrics& m = r.metrics;
    nlohmann::ordered_json run;
    run["policy"] = m.label;
    run["estimator"] = m.estimator;
    run["jobs"] = m.jobs;
    run["succeeded"] = m.succeeded;
    run["failed"] = m.failed;
    run["rejected"] = m.rejected;
    run["total_time_s"] = round(m.total_time_s);
    run["wait_s"] = {
        {"avg", round(m.wait_avg_s)}, {"p50", round(m.wait_p50_s)}, {"p95", round(m.wait_p95_s)}};
    run["exec_s"] = {
        {"avg", round(m.exec_avg_s)}, {"p50", round(m.exec_p50_s)}, {"p95", round(m.exec_p95_s)}};
    run["jct_s"] = {
        {"avg", round(m.jct_avg_s)}, {"p50", round(m.jct_p50_s)}, {"p95", round(m.jct_p95_s)}};
    run["oom_crashes"] = m.oom_crashes;
    if (m.preemptions > 0) run["preemptions"] = m.preemptions;
    run["lost_gpu_hours"] = round(m.lost_gpu_hours);
    run["energy_mj"] = round(m.energy_mj);
    run["mean_smact"] = round(m.mean_smact);
    run["mean_memory_frac"] = round(m.mean_memory_frac);
    if (m.users > 1) {
      run["fairness"] = {{"users", m.users},
                         {"mean_slowdown", round(m.mean_slowdown)},
                         {"jain_slowdown", round(m.jain_slowdown)},
                         {"worst_user_slowdown", round(m.worst_user_slowdown)},
                         {"worst_user", m.worst_user}};
    }
    auto& per_gpu = run["gpus"] = nlohmann::ordered_json::array();
    for (size_t g = 0; g < m.gpu_smact.size() && g < 64; ++g) {
      per_gpu.push_back({{"gpu", g},
                         {"mean_smact", round(m.gpu_smact[g])},
                         {"mean_memory_gib", round(m.gpu_memory_gib[g])}});
    }
    if (with_jobs) {
      auto& jobs = run["job_results"] = nlohmann::ordered_json::array();
      for (const auto& j : r.jobs) {
        jobs.push_back({{"id", j.id},
                        {"name", j.name},
                        {"state", std::string(ToString(j.state))},
                        {"submit_s", round(j.submit_s)},
                        {"start_s", round(j.start_s)},
                        {"end_s", round(j.end_s)},
                        {"attempts", j.attempts},
                        {"ooms", j.ooms},
                        {"reason", j.reason}});
      }
    }
    runs.push_back(run);
  }
  return doc.dump(2) + "\n";
}

Result<std::vector<SimResult>> FromJson(std::string_view text) {
  const auto doc = nlohmann::ordered_json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded() || !doc.is_object())
    return InvalidArgument("not a JSON object (expected the output of --json)");
  const auto runs = doc.find("runs");
  if (runs == doc.end() || !runs->is_array())
    return InvalidArgument(
        "no \"runs\" list (expected the output of colo sim --json or colo "
        "report --json)");
  // Numbers that are absent or of another type read as 0: a field this version does not know
  // must not stop a comparison.
  const auto number = [](const nlohmann::ordered_json& j, const char* key) {
    const auto it = j.find(key);
    return it != j.end() && it->is_number() ? it->get<double>() : 0.0;
  };
  const auto text_of = [](const nlohmann::ordered_json& j, const char* key) {
    const auto it = j.find(key);
    return it != j.end() && it->is_string() ? it->get<std::string>() : std::string();
  };
  std::vector<SimResult> out;
  for (const auto& run : *runs) {
    if (!run.is_object()) return InvalidArgument("an entry of \"runs\" is not an object");
    SimResult r;
    Metrics& m = r.metrics;
    m.label = text_of(run, "policy");
    if (m.label.empty()) return InvalidArgument("a run has no \"policy\"");
    m.estimator = text_of(run, "estimator");
    m.jobs = static_cast<int>(number(run, "jobs"));
    m.succeeded = static_cast<int>(number(run, "succeeded"));
    m.failed = static_cast<int>(number(run, "failed"));
    m.rejected = static_cast<int>(number(run, "rejected"));
    m.total_time_s = number(run, "total_time_s");
    const auto stats = [&](const char* key, double& avg, double& p50, double& p95) {
      const auto it = run.find(key);
      if (it == run.end() || !it->is_object()) return;
      avg = number(*it, "avg");
      p50 = number(*it, "p50");
      p95 = number(*it, "p95");
    };
    stats("wait_s", m.wait_avg_s, m.wait_p50_s, m.wait_p95_s);
    stats("exec_s", m.exec_avg_s, m.exec_p50_s, m.exec_p95_s);
    stats("jct_s", m.jct_avg_s, m.jct_p50_s, m.jct_p95_s);
    m.oom_crashes = static_cast<int>(number(run, "oom_crashes"));
    if (run.contains("preemptions")) m.preemptions = static_cast<int>(number(run, "preemptions"));
    m.lost_gpu_hours = number(run, "lost_gpu_hours");
    m.energy_mj = number(run, "energy_mj");
    m.mean_smact = number(run, "mean_smact");
    m.mean_memory_frac = number(run, "mean_memory_frac");
    if (const auto fairness = run.find("fairness");
        fairness != run.end() && fairness->is_object()) {
      m.users = static_cast<int>(number(*fairness, "users"));
      m.mean_slowdown = number(*fairness, "mean_slowdown");
      m.jain_slowdown = number(*fairness, "jain_slowdown");
      m.worst_user_slowdown = number(*fairness, "worst_user_slowdown");
      if (const auto worst = fairness->find("worst_user");
          worst != fairness->end() && worst->is_string())
        m.worst_user = TruncateUtf8(worst->get<std::string>(), 64);
    }
    if (const auto jobs = run.find("job_results"); jobs != run.end() && jobs->is_array()) {
      for (const auto& j : *jobs) {
        if (!j.is_object()) continue;
        JobResult job;
        job.id = static_cast<int64_t>(number(j, "id"));
        job.name = Interned(text_of(j, "name"));
        auto state = ParseJobState(text_of(j, "state"));
        job.state = state.ok() ? *state : JobState::kFailed;
        job.submit_s = number(j, "submit_s");
        job.start_s = number(j, "start_s");
        job.end_s = number(j, "end_s");
        job.attempts = static_cast<int>(number(j, "attempts"));
        job.ooms = static_cast<int>(number(j, "ooms"));
        job.reason = text_of(j, "reason");
        r.jobs.push_back(std::move(job));
      }
    }
    out.push_back(std::move(r));
  }
  return out;
}

namespace {

// One colour means one thing. Policies (runs) take the categorical palette, in the same order in
// every chart; red is not in it. GPUs take a second palette of their own (darker, in the line
// charts of one run only). A job's bar is coloured by how it ended; an out-of-memory crash is
// black, and nothing else is.
const char* kRunPalette[] = {"#4e79a7", "#f28e2b", "#59a14f", "#b07aa1", "#76b7b2",
                             "#edc948", "#9c755f", "#ff9da7", "#bab0ac", "#17becf"};
const char* kGpuPalette[] = {"#1b9e77", "#d95f02", "#7570b3", "#e7298a",
                             "#66a61e", "#e6ab02", "#a6761d", "#666666"};
const std::map<std::string, std::string> kOutcomeColours = {
    {"done", "#8fb3d9"}, {"failed", "#e8a33d"},  {"cancelled", "#c7c7c7"},
    {"oom", "#000000"},  {"running", "#b5d99c"}, {"lost", "#c49c94"}};

// Runs with the same label (two specs that differ in what the label leaves out) are told apart.
std::vector<std::string> UniqueLabels(const std::vector<SimResult>& results) {
  std::vector<std::string> labels;
  std::map<std::string, int> seen;
  for (const auto& r : results) {
    const int n = ++seen[r.metrics.label];
    labels.push_back(n == 1 ? r.metrics.label : fmt::format("{} (#{})", r.metrics.label, n));
  }
  return labels;
}

nlohmann::ordered_json Number(double v, int digits = 3) {
  if (!std::isfinite(v)) return nullptr;  // missing stays missing: a gap in the line
  const double scale = std::pow(10.0, digits);
  return std::round(v * scale) / scale;
}

// The queue over time from the jobs when the run did not record one (the simulator): waiting
// from submission to first start, running from then to the end.
std::vector<Timeline::QueuePoint> QueueFromJobs(const std::vector<JobResult>& jobs) {
  std::map<double, std::pair<int, int>> change;  // time -> (queued delta, running delta)
  for (const JobResult& j : jobs) {
    if (j.start_s >= 0) {
      change[j.submit_s].first++;
      change[j.start_s].first--;
      change[j.start_s].second++;
      if (j.end_s >= j.start_s) change[j.end_s].second--;
    } else if (j.state == JobState::kQueued || j.end_s < 0) {
      change[j.submit_s].first++;
    } else {
      change[j.submit_s].first++;
      change[j.end_s].first--;
    }
  }
  std::vector<Timeline::QueuePoint> out;
  double queued = 0, running = 0;
  for (const auto& [t, d] : change) {
    queued += d.first;
    running += d.second;
    out.push_back({t, queued, running});
  }
  return out;
}

// At most `cap` points of a step series: every k-th, and the last.
template <typename T>
std::vector<T> Thin(const std::vector<T>& v, size_t cap) {
  if (v.size() <= cap) return v;
  std::vector<T> out;
  const size_t step = (v.size() + cap - 1) / cap;
  for (size_t i = 0; i < v.size(); i += step) out.push_back(v[i]);
  out.push_back(v.back());
  return out;
}

constexpr size_t kMaxPointsPerSeries = 3000;
constexpr size_t kMaxJobRows = 1000;

nlohmann::ordered_json RunData(const SimResult& r, const std::string& label, size_t index) {
  nlohmann::ordered_json run;
  const Timeline& t = r.timeline;
  run["label"] = label;
  run["estimator"] = r.metrics.estimator;
  run["colour"] = kRunPalette[index % std::size(kRunPalette)];
  // Past the palette, colours repeat: the lines of those runs are dashed (and bars outlined).
  run["dash"] = index >= std::size(kRunPalette) ? nlohmann::ordered_json::array({6, 3})
                                                : nlohmann::ordered_json::array();
  run["capacity_gib"] = Number(t.capacity_gib);
  double max_watts = t.max_watts;
  for (const auto& series : t.series)
    for (const auto& p : series)
      if (std::isfinite(p.watts)) max_watts = std::max(max_watts, p.watts);
  // The GPU's own range, to the next 50 W: an idle A100 is not drawn against an H100's 700 W.
  run["max_watts"] = max_watts > 0 ? std::ceil(max_watts / 50) * 50 : 100;
  // Lanes: jobs overlapping on a GPU stack.
  std::vector<const Timeline::Segment*> sorted;
  for (const auto& s : t.segments) sorted.push_back(&s);
  std::stable_sort(sorted.begin(), sorted.end(),
                   [](auto* a, auto* b) { return a->start_s < b->start_s; });
  std::vector<std::vector<double>> lane_free(t.series.size());
  auto& segments = run["segments"] = nlohmann::ordered_json::array();
  for (const auto* s : sorted) {
    if (s->gpu < 0) continue;
    if (static_cast<size_t>(s->gpu) >= lane_free.size()) lane_free.resize(s->gpu + 1);
    auto& free = lane_free[static_cast<size_t>(s->gpu)];
    size_t lane = 0;
    while (lane < free.size() && free[lane] > s->start_s + 1e-9) ++lane;
    if (lane == free.size()) free.push_back(0);
    free[lane] = s->end_s;
    segments.push_back({s->gpu, lane, Number(s->start_s / 3600, 5), Number(s->end_s / 3600, 5),
                        s->outcome, s->job, s->name});
  }
  auto& lanes = run["lanes"] = nlohmann::ordered_json::array();
  for (const auto& free : lane_free) lanes.push_back(std::max<size_t>(1, free.size()));
  auto& series = run["series"] = nlohmann::ordered_json::array();
  for (const auto& gpu : t.series) {
    auto points = nlohmann::ordered_json::array();
    for (const auto& p : Thin(gpu, kMaxPointsPerSeries))
      points.push_back({Number(p.t_s / 3600, 5), Number(p.memory_gib), Number(100 * p.smact, 2),
                        Number(p.watts, 1)});
    series.push_back(std::move(points));
  }
  auto& queue = run["queue"] = nlohmann::ordered_json::array();
  for (const auto& q : Thin(t.queue.empty() ? QueueFromJobs(r.jobs) : t.queue, kMaxPointsPerSeries))
    queue.push_back({Number(q.t_s / 3600, 5), Number(q.queued, 2), Number(q.running, 2)});
  run["queue_recorded"] = !t.queue.empty();
  std::vector<double> waits, jcts;
  for (const JobResult& j : r.jobs) {
    if (j.start_s >= 0) waits.push_back((j.start_s - j.submit_s) / 60);
    if (j.end_s >= 0 && j.state == JobState::kSucceeded)
      jcts.push_back((j.end_s - j.submit_s) / 60);
  }
  std::sort(waits.begin(), waits.end());
  std::sort(jcts.begin(), jcts.end());
  auto& wait = run["wait_min"] = nlohmann::ordered_json::array();
  for (double w : Thin(waits, kMaxPointsPerSeries)) wait.push_back(Number(w));
  auto& jct = run["jct_min"] = nlohmann::ordered_json::array();
  for (double w : Thin(jcts, kMaxPointsPerSeries)) jct.push_back(Number(w));
  double horizon = r.metrics.total_time_s;
  for (const auto& s : t.segments) horizon = std::max(horizon, s.end_s);
  for (const auto& gpu : t.series)
    if (!gpu.empty()) horizon = std::max(horizon, gpu.back().t_s);
  run["horizon_h"] = Number(horizon / 3600, 5);
  run["jobs_total"] = r.jobs.size();
  return run;
}

std::string JobTable(const SimResult& r) {
  if (r.jobs.empty()) return "";
  std::string html = fmt::format(
      "<details><summary>Jobs ({}{})</summary><div class=\"scroll\"><table class=\"jobs\">"
      "<tr><th>id</th><th>name</th><th>state</th><th>submitted h</th><th>wait min</th>"
      "<th>run min</th><th>attempts</th><th>OOM</th><th>reason</th></tr>",
      r.jobs.size(), r.jobs.size() > kMaxJobRows ? fmt::format(", the first {}", kMaxJobRows) : "");
  for (size_t i = 0; i < r.jobs.size() && i < kMaxJobRows; ++i) {
    const JobResult& j = r.jobs[i];
    const auto minutes = [](double from, double to) {
      return from >= 0 && to >= from ? fmt::format("{:.1f}", (to - from) / 60) : std::string("-");
    };
    html += fmt::format(
        "<tr><td>{}</td><td class=\"text\">{}</td><td class=\"text\">{}</td><td>{:.2f}</td>"
        "<td>{}</td><td>{}</td><td>{}</td><td>{}</td><td class=\"text\">{}</td></tr>",
        j.id, HtmlEscape(j.name), ToString(j.state), j.submit_s / 3600,
        minutes(j.submit_s, j.start_s), minutes(j.start_s, j.end_s), j.attempts, j.ooms,
        HtmlEscape(j.reason));
  }
  return html + "</table></div></details>";
}

// Draws every chart from the data block; ends by stating in the title how many charts have
// pixels on them (a browser test reads it), or the first error.
constexpr const char kReportScript[] = R"js(
(function () {
  const errors = [];
  window.addEventListener('error', e => errors.push(String(e.message)));
  const data = JSON.parse(document.getElementById('report-data').textContent);
  const horizon = Math.max(1e-3, ...data.runs.map(r => r.horizon_h));
  const timeAxis = {type: 'linear', min: 0, max: horizon,
                    title: {display: true, text: 'hours since ' + data.time_origin}};
  const charts = [];
  function chart(id, config) {
    const canvas = document.getElementById(id);
    if (canvas) charts.push(new Chart(canvas, config));
  }
  function wrap(label) {  // long policy specs on several lines, split at commas
    const lines = [];
    for (const part of label.split(',')) {
      const last = lines.length - 1;
      if (last >= 0 && lines[last].length + part.length < 40) lines[last] += ',' + part;
      else lines.push(lines.length ? ',' + part : part);
    }
    return lines;
  }
  for (const bar of data.bars) {
    chart(bar.id, {type: 'bar',
      data: {labels: data.runs.map(r => wrap(r.label)),
             datasets: [{label: bar.title + ' (' + bar.unit + ')', data: bar.values,
                         backgroundColor: data.runs.map(r => r.colour),
                         borderColor: '#222222',
                         borderWidth: data.runs.map(r => r.dash.length ? 2 : 0)}]},
      options: {indexAxis: 'y', plugins: {legend: {display: false},
                                          title: {display: true, text: bar.title}},
                scales: {x: {beginAtZero: true, title: {display: true, text: bar.unit}},
                         y: {ticks: {autoSkip: false, font: {size: 11}}}}}});
  }
  for (const [key, title] of [['wait_min', 'Wait before the first start'],
                              ['jct_min', 'Job completion time (succeeded jobs)']]) {
    // The runs' legend is the page's, above both charts: long policy names would fill the plot.
    chart('cdf-' + key, {type: 'line',
      data: {datasets: data.runs.map(r => ({
        label: r.label, borderColor: r.colour, backgroundColor: r.colour, pointRadius: 0,
        borderDash: r.dash,
        stepped: true, borderWidth: 1.5,
        data: r[key].map((v, i) => ({x: v, y: (i + 1) / r[key].length}))}))},
      options: {parsing: false,
                plugins: {legend: {display: false},
                          title: {display: true, text: title + ' (share of jobs at or below)'}},
                scales: {x: {type: 'linear', beginAtZero: true, title: {display: true, text: 'minutes'}},
                         y: {min: 0, max: 1, title: {display: true, text: 'share of jobs'}}}}});
  }
  data.runs.forEach((run, index) => {
    // The job timeline: one row per GPU lane, bars coloured by how the attempt ended.
    const rows = [];
    run.lanes.forEach((n, gpu) => { for (let l = 0; l < n; ++l) rows.push(n > 1 ? `GPU ${gpu}.${l + 1}` : `GPU ${gpu}`); });
    const rowOf = (gpu, lane) => run.lanes[gpu] > 1 ? `GPU ${gpu}.${lane + 1}` : `GPU ${gpu}`;
    const outcomes = [...new Set(run.segments.map(s => s[4]))];
    chart(`gantt-${index}`, {type: 'bar',
      data: {labels: rows, datasets: outcomes.map(o => ({
        label: o === 'oom' ? 'out of memory' : o, backgroundColor: data.outcome_colours[o] || '#999999',
        borderColor: '#ffffff', borderWidth: 0.5, barPercentage: 1, categoryPercentage: 0.9,
        grouped: false,
        data: run.segments.filter(s => s[4] === o).map(s => ({y: rowOf(s[0], s[1]), x: [s[2], Math.max(s[3], s[2] + horizon / 2000)], job: s[5], name: s[6]}))}))},
      options: {indexAxis: 'y', parsing: {xAxisKey: 'x', yAxisKey: 'y'},
                plugins: {title: {display: true, text: 'Jobs on each GPU (one bar per attempt)'},
                          tooltip: {callbacks: {label: c => `job ${c.raw.job} ${c.raw.name}: ${c.raw.x[0].toFixed(3)}-${c.raw.x[1].toFixed(3)} h`}}},
                scales: {x: timeAxis, y: {type: 'category', title: {display: true, text: 'GPU'}, ticks: {autoSkip: false}}}}});
    const perGpu = (column, title, unit, max) => chart(`${column}-${index}`, {type: 'line',
      data: {datasets: run.series.map((points, gpu) => ({
        label: `GPU ${gpu}`, borderColor: data.gpu_colours[gpu % data.gpu_colours.length],
        backgroundColor: data.gpu_colours[gpu % data.gpu_colours.length],
        pointRadius: 0, borderWidth: 1.2, stepped: true, spanGaps: false,
        data: points.map(p => ({x: p[0], y: p[column === 'memory' ? 1 : column === 'smact' ? 2 : 3]}))}))},
      options: {parsing: false, plugins: {title: {display: true, text: title}},
                scales: {x: timeAxis, y: {min: 0, max: max, title: {display: true, text: unit}}}}});
    perGpu('memory', 'Memory used per GPU', 'GiB', run.capacity_gib || undefined);
    perGpu('smact', 'SM activity (SMACT) per GPU', '%', 100);
    perGpu('power', 'Power per GPU', 'W', run.max_watts);
    chart(`queue-${index}`, {type: 'line',
      data: {datasets: [
        {label: 'waiting', data: run.queue.map(q => ({x: q[0], y: q[1]})), borderColor: '#555555', backgroundColor: '#555555'},
        {label: 'running', data: run.queue.map(q => ({x: q[0], y: q[2]})), borderColor: '#4e79a7', backgroundColor: '#4e79a7', borderDash: [4, 3]}
      ].map(d => Object.assign(d, {pointRadius: 0, borderWidth: 1.5, stepped: true}))},
      options: {parsing: false, plugins: {title: {display: true, text: run.queue_recorded ? 'Jobs waiting and running (as colod counted them)' : 'Jobs waiting and running (from the jobs\' submit and start times)'}},
                scales: {x: timeAxis, y: {beginAtZero: true, title: {display: true, text: 'jobs'}}}}});
  });
  coloCheckCharts(charts, errors);
})();
)js";

// Every report's charts: drawn at once, filling the boxes the page gives them. Each report's
// script ends with coloCheckCharts: the result goes into the title, which a browser test reads
// ("colo-report:ok:DRAWN/CHARTS:SMALLEST-PLOT-PX", or the first error).
constexpr const char kChartCheck[] = R"js(
Chart.defaults.animation = false;
Chart.defaults.responsive = true;
Chart.defaults.maintainAspectRatio = false;
Chart.defaults.font.size = 12;
function coloCheckCharts(charts, errors) {
  // Every chart must have drawn something: a canvas with no opaque pixel is an error.
  let drawn = 0;
  for (const c of charts) {
    const canvas = c.canvas;
    const pixels = canvas.getContext('2d').getImageData(0, 0, canvas.width, canvas.height).data;
    let any = false;
    for (let i = 3; i < pixels.length; i += 4) if (pixels[i] !== 0) { any = true; break; }
    if (any) ++drawn; else errors.push('chart ' + canvas.id + ' is empty');
  }
  // The smallest plot area of any chart, in pixels, for a check that none is crowded out.
  const side = c => Math.min(c.chartArea.height, c.chartArea.width);
  const plot = Math.min(...charts.map(side));
  document.body.dataset.smallest = charts.filter(c => side(c) === plot).map(c => c.canvas.id).join(' ');
  document.body.dataset.charts = charts.length;
  document.body.dataset.drawn = drawn;
  document.title = errors.length ? 'colo-report:error:' + errors[0]
                                 : `colo-report:ok:${drawn}/${charts.length}:${Math.floor(plot)}`;
}
)js";

}  // namespace

std::string ChartCheckScript() {
  return kChartCheck;
}

std::string ToHtml(const ReportContext& context, const std::vector<SimResult>& results,
                   const std::string& baseline) {
  const std::vector<std::string> labels = UniqueLabels(results);
  nlohmann::ordered_json data;
  data["time_origin"] = context.title.empty() ? "the first submission" : "the report's start";
  data["gpu_colours"] = std::vector<std::string>(std::begin(kGpuPalette), std::end(kGpuPalette));
  data["outcome_colours"] = kOutcomeColours;
  auto& runs = data["runs"] = nlohmann::ordered_json::array();
  for (size_t i = 0; i < results.size(); ++i) runs.push_back(RunData(results[i], labels[i], i));
  struct Bar {
    const char* id;
    const char* title;
    const char* unit;
    std::function<double(const Metrics&)> value;
  };
  const std::vector<Bar> bars = {
      {"bar-total", "Total time", "h", [](const Metrics& m) { return m.total_time_s / 3600; }},
      {"bar-jct", "Average JCT", "min", [](const Metrics& m) { return m.jct_avg_s / 60; }},
      {"bar-wait", "Average wait", "min", [](const Metrics& m) { return m.wait_avg_s / 60; }},
      {"bar-energy", "Energy", "MJ", [](const Metrics& m) { return m.energy_mj; }},
      {"bar-oom", "Out-of-memory crashes", "crashes",
       [](const Metrics& m) { return m.oom_crashes; }},
      {"bar-smact", "Mean SMACT", "%", [](const Metrics& m) { return 100 * m.mean_smact; }},
  };
  auto& bar_data = data["bars"] = nlohmann::ordered_json::array();
  for (const Bar& b : bars) {
    auto values = nlohmann::ordered_json::array();
    for (const auto& r : results) values.push_back(Number(b.value(r.metrics)));
    bar_data.push_back({{"id", b.id}, {"title", b.title}, {"unit", b.unit}, {"values", values}});
  }
  std::string json = data.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace);
  // Inside a script element, "</" could end it early.
  for (size_t at = 0; (at = json.find("</", at)) != std::string::npos; at += 3)
    json.replace(at, 2, "<\\/");

  const std::string title = context.title.empty() ? "colo sim" : context.title;
  std::string html = fmt::format(
      R"(<!doctype html><html lang="en"><head><meta charset="utf-8"><title>{} report</title>
<meta name="viewport" content="width=device-width, initial-scale=1">
<style>
body{{font-family:sans-serif;margin:16px auto;max-width:1200px;padding:0 12px;color:#222}}
table{{border-collapse:collapse;font-size:12px}}
td,th{{border:1px solid #ccc;padding:3px 6px;text-align:right;white-space:nowrap}}
td:first-child,th:first-child,td.text{{text-align:left;white-space:normal;overflow-wrap:anywhere}}
td:first-child{{min-width:12em;max-width:28em}}
.scroll{{overflow-x:auto;max-width:100%}}
summary{{cursor:pointer;font-weight:bold;margin:10px 0}}
.grid{{display:grid;grid-template-columns:repeat(auto-fit,minmax(520px,1fr));gap:12px}}
.box{{position:relative;height:var(--h,260px);min-width:0}}
.legend span{{display:inline-block;width:12px;height:12px;margin:0 4px 0 12px;vertical-align:middle}}
.runs{{font-size:12px;line-height:1.8}}
.runs>span{{display:inline-block;margin-right:14px;white-space:nowrap}}
.swatch{{display:inline-block;width:12px;height:12px;margin-right:4px;vertical-align:middle}}
</style></head><body>)",
      HtmlEscape(title));
  html += fmt::format("<h1>{}</h1>", HtmlEscape(title));
  if (!context.description.empty()) {
    html += fmt::format("<p>{}</p>", HtmlEscape(context.description));
  } else {
    html += fmt::format("<p>Trace <b>{}</b> on {} × {} (seed {}).", HtmlEscape(context.trace),
                        context.servers, HtmlEscape(context.server), context.seed);
  }
  if (!context.gates.empty()) html += fmt::format(" Gates: {}.", HtmlEscape(context.gates));
  const Metrics* base = FindBaseline(results, baseline);
  if (base)
    html += fmt::format(" Ratios (x) are to <b>{}</b>; lower is better.", HtmlEscape(baseline));
  html += "</p><div class=\"scroll\"><table><tr>";
  const auto columns = Columns();
  for (const auto& c : columns) html += fmt::format("<th>{}</th>", c.header);
  html += "</tr>";
  for (size_t i = 0; i < results.size(); ++i) {
    html += "<tr>";
    for (size_t c = 0; c < columns.size(); ++c) {
      const std::string cell = c == 0 ? labels[i] : columns[c].cell(results[i].metrics, base);
      html += c == 0 ? fmt::format("<td><span style=\"color:{}\">■</span> {}</td>",
                                   kRunPalette[i % std::size(kRunPalette)], HtmlEscape(cell))
                     : fmt::format("<td>{}</td>", HtmlEscape(cell));
    }
    html += "</tr>";
  }
  html += "</table></div>";
  html +=
      "<p>The estimator column names the memory estimate each run planned with; a policy's "
      "settings are in its name (colo sim --list-policies).</p>";
  // Every bar's row holds the longest label, wrapped at commas as the script wraps it.
  int label_lines = 1;
  for (const std::string& label : labels) {
    size_t line = 0;
    int lines = 1;
    for (const std::string& part : Split(label, ',')) {
      if (line > 0 && line + part.size() >= 40) {
        ++lines;
        line = 0;
      }
      line += part.size() + 1;
    }
    label_lines = std::max(label_lines, lines);
  }
  const int bar_height =
      std::max(160, 70 + (13 * label_lines + 12) * static_cast<int>(results.size()));
  html += "<h2>Per policy</h2><div class=\"grid\">";
  for (const Bar& b : bars)
    html += fmt::format("<div class=\"box\" style=\"--h:{}px\"><canvas id=\"{}\"></canvas></div>",
                        bar_height, b.id);
  html += "</div><h2>Distributions</h2><p class=\"runs\">";
  for (size_t i = 0; i < results.size(); ++i)
    html += fmt::format("<span><span class=\"swatch\" style=\"background:{}\"></span>{}</span>",
                        kRunPalette[i % std::size(kRunPalette)], HtmlEscape(labels[i]));
  html += "</p><div class=\"grid\">";
  html += "<div class=\"box\" style=\"--h:360px\"><canvas id=\"cdf-wait_min\"></canvas></div>";
  html += "<div class=\"box\" style=\"--h:360px\"><canvas id=\"cdf-jct_min\"></canvas></div></div>";
  html += "<h2>Over time</h2><p>Every chart of every run shares one time axis. Job bars: ";
  for (const auto& [outcome, colour] : kOutcomeColours)
    html += fmt::format("<span class=\"legend\"><span style=\"background:{}\"></span>{}</span>",
                        colour, outcome == "oom" ? "out of memory" : outcome);
  html += ".</p>";
  for (size_t i = 0; i < results.size(); ++i) {
    const auto& r = results[i];
    if (r.timeline.series.empty()) continue;
    int rows = 0;
    // (Looked up again: adding keys to the ordered object moved what `runs` referred to.)
    for (const auto& lanes : data["runs"][i]["lanes"]) rows += lanes.get<int>();
    // Not collapsed: a chart in a closed section has no size to draw in.
    html += fmt::format("<section><h3><span style=\"color:{}\">■</span> {} (estimator {})</h3>",
                        kRunPalette[i % std::size(kRunPalette)], HtmlEscape(labels[i]),
                        HtmlEscape(r.metrics.estimator));
    html +=
        fmt::format("<div class=\"box\" style=\"--h:{}px\"><canvas id=\"gantt-{}\"></canvas></div>",
                    std::max(220, 130 + 26 * rows), i);
    html += "<div class=\"grid\">";
    for (const char* chart : {"memory", "smact", "power", "queue"})
      html += fmt::format("<div class=\"box\"><canvas id=\"{}-{}\"></canvas></div>", chart, i);
    html += "</div>" + JobTable(r) + "</section>";
  }
  if (context.title.empty())
    html +=
        "<p>Arrival times of the thesis traces come from the Microsoft Philly trace (Jeon et al., "
        "ATC'19; CC-BY-4.0).</p>";
  html += "<script>" + ChartJsSource() + ChartCheckScript() + "</script>";
  html += "<script id=\"report-data\" type=\"application/json\">" + json + "</script>";
  html += std::string("<script>") + kReportScript + "</script></body></html>\n";
  return html;
}

}  // namespace colo
