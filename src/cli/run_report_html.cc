#include "cli/run_report_html.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <nlohmann/json.hpp>

#include "cli/job_table.h"
#include "common/text.h"
#include "sim/report.h"

namespace colo {
namespace {

using Json = nlohmann::ordered_json;

constexpr double kGiB = 1024.0 * 1024 * 1024;
// Users take the categorical palette, in the order of the per-user table; past it, colours repeat.
constexpr const char* kUserPalette[] = {"#4e79a7", "#f28e2b", "#59a14f", "#b07aa1", "#76b7b2",
                                        "#edc948", "#9c755f", "#ff9da7", "#bab0ac", "#17becf"};
// Per GPU, the jobs whose memory is drawn one by one; the others are summed.
constexpr size_t kJobsDrawnPerGpu = 12;
// Points of a GPU's memory-by-job chart at most (buckets of equal time).
constexpr size_t kMemoryBuckets = 600;
constexpr size_t kMaxJobRows = 1000;

// What came from a user or a job, for the page: escaped for HTML and printable.
std::string Escape(std::string_view text) {
  return HtmlEscape(Printable(text));
}

Json Round(double v, int digits = 3) {
  if (!std::isfinite(v)) return nullptr;
  const double scale = std::pow(10.0, digits);
  return std::round(v * scale) / scale;
}

Json Optional(const std::optional<double>& v, int digits = 3) {
  return v ? Round(*v, digits) : Json(nullptr);
}

double Ms(double seconds) {
  return std::round(seconds * 1000);
}

std::string Span(const std::optional<double>& seconds) {
  return seconds ? DurationText(*seconds) : "-";
}

std::string Percent(const std::optional<double>& share) {
  return share ? fmt::format("{:.0f}%", 100 * *share) : "-";
}

std::string Gib(double gib) {
  return gib > 0 ? fmt::format("{:.1f}", gib) : "-";
}

// One GPU's memory by job, on a grid of equal time buckets: each drawn job's mean use in each
// bucket (0 where it did not run), the rest summed as "other jobs".
Json MemoryByJob(const api::RunReportReply& run, int gpu,
                 const std::map<JobId, std::string>& labels) {
  std::vector<const api::RunJobPoint*> points;
  std::map<JobId, double> weight;
  for (const api::RunJobPoint& p : run.job_points) {
    if (p.gpu != gpu) continue;
    points.push_back(&p);
    weight[p.job] += p.memory;
  }
  Json out = Json::object();
  out["times"] = Json::array();
  out["jobs"] = Json::array();
  if (points.empty()) return out;
  // The heaviest jobs are drawn one by one, in that order; the rest share the last row.
  std::vector<std::pair<double, JobId>> order;
  for (const auto& [job, w] : weight) order.push_back({-w, job});
  std::sort(order.begin(), order.end());
  std::map<JobId, size_t> row;
  for (size_t i = 0; i < order.size(); ++i) row[order[i].second] = std::min(i, kJobsDrawnPerGpu);
  const size_t rows = std::min(order.size(), kJobsDrawnPerGpu + 1);
  std::vector<double> times;
  for (const auto* p : points) times.push_back(p->time);
  std::sort(times.begin(), times.end());
  times.erase(std::unique(times.begin(), times.end()), times.end());
  const double first = times.front(), last = times.back();
  const size_t buckets = std::min(times.size(), kMemoryBuckets);
  const double width = buckets > 1 ? (last - first) / static_cast<double>(buckets - 1) : 1;
  const auto bucket_of = [&](double t) {
    if (buckets == times.size())
      return static_cast<size_t>(std::lower_bound(times.begin(), times.end(), t) - times.begin());
    return std::min(buckets - 1, static_cast<size_t>(std::floor((t - first) / width + 0.5)));
  };
  // A bucket's value: a row's samples summed over the times sampled in it (0 where it had none).
  std::vector<std::vector<double>> sum(rows, std::vector<double>(buckets, 0));
  std::vector<int> sampled(buckets, 0);
  for (double t : times) ++sampled[bucket_of(t)];
  for (const auto* p : points) sum[row[p->job]][bucket_of(p->time)] += p->memory / kGiB;
  for (size_t b = 0; b < buckets; ++b) {
    out["times"].push_back(
        Ms(buckets == times.size() ? times[b] : first + width * static_cast<double>(b)));
  }
  for (size_t r = 0; r < rows; ++r) {
    Json job;
    if (r < kJobsDrawnPerGpu) {
      for (const auto& [j, at] : row)
        if (at == r) job["label"] = labels.count(j) ? labels.at(j) : std::to_string(j);
    } else {
      job["label"] = "other jobs";
    }
    Json values = Json::array();
    for (size_t b = 0; b < buckets; ++b)
      values.push_back(Round(sampled[b] == 0 ? 0 : sum[r][b] / sampled[b]));
    job["gib"] = std::move(values);
    out["jobs"].push_back(std::move(job));
  }
  return out;
}

// Draws every chart from the data block; ends by stating in the title how many charts have
// pixels on them (the browser test reads it), or the first error.
constexpr const char kScript[] = R"js(
(function () {
  const errors = [];
  window.addEventListener('error', e => errors.push(String(e.message)));
  const data = JSON.parse(document.getElementById('report-data').textContent);
  const pad = n => String(n).padStart(2, '0');
  const span = data.until_ms - data.since_ms;
  function wall(ms) {  // local wall-clock time: seconds over short ranges, the date over long ones
    const d = new Date(ms);
    let time = `${pad(d.getHours())}:${pad(d.getMinutes())}`;
    if (span < 2 * 3600 * 1000) time += `:${pad(d.getSeconds())}`;
    return span > 36 * 3600 * 1000 ? `${d.getMonth() + 1}-${pad(d.getDate())} ${time}` : time;
  }
  function wallSeconds(ms) {
    const d = new Date(ms);
    return `${d.getFullYear()}-${pad(d.getMonth() + 1)}-${pad(d.getDate())} ` +
           `${pad(d.getHours())}:${pad(d.getMinutes())}:${pad(d.getSeconds())}`;
  }
  // Ticks on round clock times: the smallest of these steps that gives at most 10.
  const steps = [1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200, 10800, 21600,
                 43200, 86400, 172800, 604800].map(s => s * 1000);
  const step = steps.find(s => span / s <= 10) || steps[steps.length - 1];
  const timeAxis = {type: 'linear', min: data.since_ms, max: data.until_ms,
                    afterBuildTicks: axis => {
                      const ticks = [];
                      for (let t = Math.ceil(data.since_ms / step) * step; t <= data.until_ms; t += step)
                        ticks.push({value: t});
                      axis.ticks = ticks;
                    },
                    ticks: {callback: v => wall(v)},
                    title: {display: true, text: 'wall-clock time (' + data.zone + ')'}};
  const charts = [];
  function chart(id, config) {
    const canvas = document.getElementById(id);
    if (canvas) charts.push(new Chart(canvas, config));
  }
  const userColour = Object.fromEntries(data.users.map(u => [u.user, u.colour]));
  function perUser(id, title, unit, key) {
    chart(id, {type: 'bar',
      data: {labels: data.users.map(u => u.user),
             datasets: [{label: title, data: data.users.map(u => u[key]),
                         backgroundColor: data.users.map(u => u.colour)}]},
      options: {indexAxis: 'y', plugins: {legend: {display: false}, title: {display: true, text: title}},
                scales: {x: {beginAtZero: true, title: {display: true, text: unit}},
                         y: {ticks: {autoSkip: false}}}}});
  }
  perUser('user-gpu-hours', 'GPU-hours', 'GPU-hours', 'gpu_hours');
  perUser('user-wait', 'Mean wait before the first start', 'minutes', 'wait_min');
  perUser('user-memory', 'GPU memory used at the peak, of what was planned', '%', 'memory_pct');

  // Jobs as bars on each GPU, coloured by user; an attempt that ran out of memory is outlined.
  const rows = [];
  data.lanes.forEach((n, gpu) => { for (let l = 0; l < n; ++l) rows.push(n > 1 ? `GPU ${gpu}.${l + 1}` : `GPU ${gpu}`); });
  const rowOf = (gpu, lane) => data.lanes[gpu] > 1 ? `GPU ${gpu}.${lane + 1}` : `GPU ${gpu}`;
  const users = [...new Set(data.segments.map(s => s[4]))];
  const minimum = (data.until_ms - data.since_ms) / 1500;
  chart('gantt', {type: 'bar',
    data: {labels: rows, datasets: users.map(user => ({
      label: user, backgroundColor: userColour[user] || '#999999',
      borderColor: data.segments.filter(s => s[4] === user).map(s => s[5] === 'oom' ? '#000000' : s[5] === 'running' ? '#555555' : '#ffffff'),
      borderWidth: data.segments.filter(s => s[4] === user).map(s => s[5] === 'oom' || s[5] === 'running' ? 2 : 0.5),
      barPercentage: 1, categoryPercentage: 0.85, grouped: false,
      data: data.segments.filter(s => s[4] === user).map(s => ({y: rowOf(s[0], s[1]), x: [s[2], Math.max(s[3], s[2] + minimum)], job: s[6], outcome: s[5]}))}))},
    options: {indexAxis: 'y', parsing: {xAxisKey: 'x', yAxisKey: 'y'},
              plugins: {title: {display: true, text: 'Jobs on each GPU (one bar per attempt, coloured by user; black outline: ran out of GPU memory)'},
                        tooltip: {callbacks: {label: c => `${c.raw.job}: ${wallSeconds(c.raw.x[0])} to ${wallSeconds(c.raw.x[1])} (${c.raw.outcome})`}}},
              scales: {x: timeAxis, y: {type: 'category', ticks: {autoSkip: false}}}}});

  data.gpus.forEach(gpu => {
    const palette = data.job_palette;
    const datasets = gpu.memory.jobs.map((job, k) => ({
      label: job.label, data: job.gib.map((v, i) => ({x: gpu.memory.times[i], y: v})),
      borderColor: palette[k % palette.length], backgroundColor: palette[k % palette.length] + '99',
      fill: k === 0 ? 'origin' : '-1', stack: 'jobs', pointRadius: 0, borderWidth: 1, stepped: true}));
    datasets.push({label: 'used on the GPU (all processes)', data: gpu.points.map(p => ({x: p[0], y: p[1]})),
                   borderColor: '#222222', backgroundColor: '#222222', borderDash: [5, 3], fill: false,
                   stack: 'total', pointRadius: 0, borderWidth: 1.2, stepped: true, spanGaps: false});
    chart(`memory-${gpu.index}`, {type: 'line', data: {datasets},
      options: {parsing: false,
                plugins: {title: {display: true, text: `GPU ${gpu.index} (${gpu.name}): memory by job`},
                          legend: {position: 'bottom', labels: {boxWidth: 10, font: {size: 11}}}},
                scales: {x: timeAxis, y: {stacked: true, min: 0, max: gpu.total_gib, title: {display: true, text: 'GiB'}}}}});
    chart(`activity-${gpu.index}`, {type: 'line',
      data: {datasets: [
        {label: 'SM activity (%)', data: gpu.points.map(p => ({x: p[0], y: p[2]})), yAxisID: 'y',
         borderColor: '#4e79a7', backgroundColor: '#4e79a7'},
        {label: 'power (W)', data: gpu.points.map(p => ({x: p[0], y: p[3]})), yAxisID: 'watts',
         borderColor: '#e15759', backgroundColor: '#e15759', borderDash: [4, 3]}
      ].map(d => Object.assign(d, {pointRadius: 0, borderWidth: 1.2, stepped: true, spanGaps: false}))},
      options: {parsing: false,
                plugins: {title: {display: true, text: `GPU ${gpu.index}: SM activity and power`},
                          legend: {position: 'bottom', labels: {boxWidth: 10, font: {size: 11}}}},
                scales: {x: timeAxis, y: {min: 0, max: 100, title: {display: true, text: '% SM activity'}},
                         watts: {position: 'right', min: 0, max: gpu.max_watts, grid: {drawOnChartArea: false},
                                 title: {display: true, text: 'W'}}}}});
  });
  chart('queue', {type: 'line',
    data: {datasets: [
      {label: 'waiting', data: data.queue.map(q => ({x: q[0], y: q[1]})), borderColor: '#555555', backgroundColor: '#555555'},
      {label: 'running', data: data.queue.map(q => ({x: q[0], y: q[2]})), borderColor: '#4e79a7', backgroundColor: '#4e79a7', borderDash: [4, 3]}
    ].map(d => Object.assign(d, {pointRadius: 0, borderWidth: 1.5, stepped: true}))},
    options: {parsing: false, plugins: {title: {display: true, text: 'Jobs waiting and running'}},
              scales: {x: timeAxis, y: {beginAtZero: true, title: {display: true, text: 'jobs'}}}}});

  coloCheckCharts(charts, errors);
})();
)js";

constexpr const char kStyle[] = R"css(
body{font-family:sans-serif;margin:16px auto;max-width:1280px;padding:0 12px;color:#222}
h2{margin-top:28px;border-bottom:1px solid #ddd;padding-bottom:4px}
table{border-collapse:collapse;font-size:12px;margin:8px 0}
td,th{border:1px solid #ccc;padding:3px 6px;text-align:right;white-space:nowrap}
th{background:#f4f4f4;white-space:normal;vertical-align:bottom}
td.text,th.text{text-align:left}
td.long{text-align:left;white-space:normal;overflow-wrap:anywhere;min-width:16em;max-width:40em}
.scroll{overflow-x:auto;max-width:100%}
.note{color:#555;font-size:13px}
.grid{display:grid;grid-template-columns:repeat(auto-fit,minmax(380px,1fr));gap:12px}
.pair{display:grid;grid-template-columns:repeat(auto-fit,minmax(560px,1fr));gap:12px}
.box{position:relative;height:var(--h,260px);min-width:0}
.swatch{display:inline-block;width:10px;height:10px;margin-right:4px}
.oom{font-weight:bold}
)css";

}  // namespace

std::string RunReportHtml(const api::RunReportReply& run, const RunSummary& s,
                          const std::string& description) {
  std::map<std::string, std::string> colour;
  for (size_t i = 0; i < s.users.size(); ++i)
    colour[s.users[i].user] = kUserPalette[i % std::size(kUserPalette)];
  std::map<JobId, std::string> labels;  // "12 train (alice)"
  for (const api::RunJob& j : run.jobs)
    labels[j.summary.id] =
        fmt::format("{} {} ({})", JobIdText(j.summary), j.summary.name, j.summary.user);

  Json data;
  data["since_ms"] = Ms(s.since);
  data["until_ms"] = Ms(run.until);
  {
    std::time_t now = static_cast<std::time_t>(run.until);
    std::tm tm{};
    localtime_r(&now, &tm);
    char zone[16];
    std::strftime(zone, sizeof zone, "%Z", &tm);
    data["zone"] = zone;
  }
  data["job_palette"] = {"#4e79a7", "#f28e2b", "#59a14f", "#b07aa1", "#76b7b2",
                         "#edc948", "#9c755f", "#ff9da7", "#bab0ac", "#17becf",
                         "#8cd17d", "#d4a6c8", "#999999"};
  auto& users = data["users"] = Json::array();
  for (const UserRow& u : s.users) {
    users.push_back(
        {{"user", u.user},
         {"colour", colour[u.user]},
         {"gpu_hours", Round(u.gpu_hours)},
         {"wait_min", u.wait_mean_s ? Round(*u.wait_mean_s / 60) : Json(0)},
         {"memory_pct",
          u.memory_used_of_planned ? Round(100 * *u.memory_used_of_planned, 1) : Json(0)}});
  }
  // Lanes: attempts overlapping on a GPU stack.
  struct Segment {
    int gpu;
    double from, to;
    std::string user, outcome, label;
  };
  std::vector<Segment> segments;
  for (const api::RunJob& j : run.jobs) {
    for (const api::AttemptInfo& a : j.attempts) {
      if (a.started <= 0) continue;
      const std::string outcome = a.exit_kind.empty()              ? "running"
                                  : a.exit_kind == "out-of-memory" ? "oom"
                                                                   : a.exit_kind;
      for (int g : a.gpus)
        segments.push_back({g, std::max(a.started, s.since),
                            a.ended > 0 ? std::min(a.ended, run.until) : run.until, j.summary.user,
                            outcome, fmt::format("{} attempt {}", labels[j.summary.id], a.number)});
    }
  }
  std::stable_sort(segments.begin(), segments.end(),
                   [](const Segment& a, const Segment& b) { return a.from < b.from; });
  std::vector<std::vector<double>> lane_free(run.gpus.size());
  auto& segment_data = data["segments"] = Json::array();
  for (const Segment& seg : segments) {
    if (seg.gpu < 0) continue;
    if (static_cast<size_t>(seg.gpu) >= lane_free.size()) lane_free.resize(seg.gpu + 1);
    auto& free = lane_free[static_cast<size_t>(seg.gpu)];
    size_t lane = 0;
    while (lane < free.size() && free[lane] > seg.from + 1e-9) ++lane;
    if (lane == free.size()) free.push_back(0);
    free[lane] = seg.to;
    segment_data.push_back(
        {seg.gpu, lane, Ms(seg.from), Ms(seg.to), seg.user, seg.outcome, seg.label});
  }
  auto& lanes = data["lanes"] = Json::array();
  for (const auto& free : lane_free) lanes.push_back(std::max<size_t>(1, free.size()));
  auto& gpus = data["gpus"] = Json::array();
  for (const api::RunGpu& g : run.gpus) {
    Json gpu;
    gpu["index"] = g.index;
    gpu["name"] = g.name;
    gpu["total_gib"] = Round(static_cast<double>(g.memory_total.count()) / kGiB, 1);
    double max_watts = 100;
    auto& points = gpu["points"] = Json::array();
    for (const api::RunGpuPoint& p : run.gpu_points) {
      if (p.gpu != g.index) continue;
      points.push_back({Ms(p.time), p.memory_used ? Round(*p.memory_used / kGiB) : Json(nullptr),
                        p.smact ? Round(100 * *p.smact, 1) : Json(nullptr),
                        Optional(p.power_watts, 1)});
      if (p.power_watts) max_watts = std::max(max_watts, *p.power_watts);
    }
    gpu["max_watts"] = std::ceil(max_watts / 50) * 50;  // its own range, to the next 50 W
    gpu["memory"] = MemoryByJob(run, g.index, labels);
    gpus.push_back(std::move(gpu));
  }
  auto& queue = data["queue"] = Json::array();
  for (const api::RunQueuePoint& q : run.queue_points)
    queue.push_back({Ms(q.time), Round(q.queued, 2), Round(q.running, 2)});
  std::string json = data.dump(-1, ' ', false, Json::error_handler_t::replace);
  // Inside a script element, "</" could end it early.
  for (size_t at = 0; (at = json.find("</", at)) != std::string::npos; at += 3)
    json.replace(at, 2, "<\\/");

  std::string html = fmt::format(
      "<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\"><title>colo report</title>"
      "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\"><style>{}</style>"
      "</head><body><h1>colo report</h1><p>{}</p>",
      kStyle, Escape(description));
  html += fmt::format(
      "<p>{} jobs, {:.3f} GPU-hours on {} GPUs. <a href=\"#users\">Per user</a> · "
      "<a href=\"#gpus\">per GPU</a> · <a href=\"#events\">notable events</a> · "
      "<a href=\"#jobs\">jobs</a>.</p>",
      s.jobs.size(), s.gpu_hours, s.gpus.size());

  html +=
      "<h2 id=\"users\">Per user</h2><div class=\"scroll\"><table><tr><th class=\"text\">user"
      "</th><th>jobs</th><th>completed</th><th>failed</th><th>cancelled</th><th>timeout</th>"
      "<th>waiting</th><th>running</th><th>GPU-hours</th><th>wait, mean</th>"
      "<th>wait, p95</th><th>GPU memory used of planned</th>"
      "<th>planned, unused GiB·h</th><th>out of memory</th></tr>";
  for (const UserRow& u : s.users) {
    html += fmt::format(
        "<tr><td class=\"text\"><span class=\"swatch\" style=\"background:{}\"></span>{}</td>"
        "<td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td>"
        "<td>{:.3f}</td><td>{}</td><td>{}</td><td>{}</td><td>{:.1f}</td><td>{}</td></tr>",
        colour[u.user], Escape(u.user), u.jobs, u.completed, u.failed, u.cancelled, u.timeouts,
        u.waiting, u.running, u.gpu_hours, Span(u.wait_mean_s), Span(u.wait_p95_s),
        Percent(u.memory_used_of_planned), u.planned_unused_gib_hours, u.out_of_memory);
  }
  html +=
      "</table></div><p class=\"note\">GPU memory used of planned: the peaks of a user's "
      "attempts over the plans they ran under (per GPU). A low share is memory other jobs could "
      "have used: <code>colo eff N</code> says what to ask for next time.</p>"
      "<div class=\"grid\">";
  const int user_height = std::max(220, 100 + 28 * static_cast<int>(s.users.size()));
  for (const char* id : {"user-gpu-hours", "user-wait", "user-memory"})
    html += fmt::format("<div class=\"box\" style=\"--h:{}px\"><canvas id=\"{}\"></canvas></div>",
                        user_height, id);
  html += "</div>";

  html +=
      "<h2 id=\"gpus\">Per GPU</h2><div class=\"scroll\"><table><tr><th>GPU</th>"
      "<th class=\"text\">name</th><th>busy (a job ran)</th><th>SM activity, mean</th>"
      "<th>memory used, mean GiB</th><th>power, mean W</th><th>energy kWh</th><th>jobs</th>"
      "</tr>";
  for (const GpuRow& g : s.gpus) {
    html += fmt::format(
        "<tr><td>{}</td><td class=\"text\">{}</td><td>{:.0f}%</td><td>{}</td><td>{}</td>"
        "<td>{}</td><td>{}</td><td>{}</td></tr>",
        g.index, Escape(g.name), 100 * g.busy_share, Percent(g.smact_mean),
        g.memory_used_mean_gib
            ? fmt::format("{:.1f} of {:.0f}", *g.memory_used_mean_gib, g.memory_total_gib)
            : "-",
        g.power_mean_watts ? fmt::format("{:.0f}", *g.power_mean_watts) : "-",
        g.energy_kwh ? fmt::format("{:.3f}", *g.energy_kwh) : "-", g.jobs);
  }
  int rows = 0;
  for (const auto& lanes_of_gpu : data["lanes"]) rows += lanes_of_gpu.get<int>();
  html += fmt::format(
      "</table></div><div class=\"box\" style=\"--h:{}px\"><canvas id=\"gantt\"></canvas></div>",
      std::max(220, 140 + 26 * rows));
  for (const api::RunGpu& g : run.gpus) {
    html += fmt::format(
        "<div class=\"pair\"><div class=\"box\" style=\"--h:320px\"><canvas id=\"memory-{}\">"
        "</canvas></div><div class=\"box\" style=\"--h:320px\"><canvas id=\"activity-{}\">"
        "</canvas></div></div>",
        g.index, g.index);
  }
  html += "<div class=\"box\" style=\"--h:240px\"><canvas id=\"queue\"></canvas></div>";

  html += fmt::format("<h2 id=\"events\">Notable events ({})</h2>", s.events.size());
  if (s.events.empty()) {
    html +=
        "<p class=\"note\">None: no job ran out of GPU memory, hit its time limit, went over "
        "its plan, was requeued or failed in this range.</p>";
  } else {
    html +=
        "<div class=\"scroll\"><table><tr><th class=\"text\">time</th><th class=\"text\">"
        "job</th><th class=\"text\">user</th><th class=\"text\">event</th>"
        "<th class=\"text\">what happened</th></tr>";
    for (const NotableEvent& e : s.events) {
      html += fmt::format(
          "<tr><td class=\"text\">{}</td><td class=\"text\">{}</td><td class=\"text\">{}</td>"
          "<td class=\"text{}\">{}</td><td class=\"long\">{}</td></tr>",
          WallTimeText(e.time), Escape(e.job), Escape(e.user),
          e.kind == "out-of-memory" ? " oom" : "", Escape(e.kind), Escape(e.what));
    }
    html += "</table></div>";
  }

  html +=
      fmt::format("<h2 id=\"jobs\">Jobs ({}{})</h2>", s.jobs.size(),
                  s.jobs.size() > kMaxJobRows ? fmt::format(", the latest {}", kMaxJobRows) : "");
  html +=
      "<div class=\"scroll\"><table><tr><th class=\"text\">job</th><th class=\"text\">name</th>"
      "<th class=\"text\">user</th><th class=\"text\">state</th><th class=\"text\">submitted"
      "</th><th>waited</th><th>ran</th><th class=\"text\">GPUs</th>"
      "<th>planned GiB</th><th>peak GiB</th><th>attempts</th><th class=\"text\">reason</th>"
      "</tr>";
  for (size_t i = 0; i < s.jobs.size() && i < kMaxJobRows; ++i) {
    const JobRow& j = s.jobs[i];
    const auto span = [](double from, double to) {
      return from > 0 && to >= from ? DurationText(to - from) : std::string("-");
    };
    std::string gpus_text;
    for (int g : j.gpus) gpus_text += (gpus_text.empty() ? "" : ",") + std::to_string(g);
    html += fmt::format(
        "<tr><td class=\"text\">{}</td><td class=\"text\">{}</td><td class=\"text\">{}</td>"
        "<td class=\"text\">{}</td><td class=\"text\">{}</td><td>{}</td><td>{}</td>"
        "<td class=\"text\">{}</td><td>{}</td><td>{}</td><td>{}</td><td class=\"long\">{}</td>"
        "</tr>",
        Escape(j.job), Escape(j.name), Escape(j.user), j.state, WallTimeText(j.submitted),
        span(j.submitted, j.started), span(j.started, j.ended > 0 ? j.ended : run.until),
        gpus_text.empty() ? "-" : gpus_text, Gib(j.planned_gib), Gib(j.peak_gib), j.attempts,
        j.redacted ? "(another user's)" : Escape(j.reason));
  }
  html += "</table></div>";
  html += "<script>" + ChartJsSource() + ChartCheckScript() + "</script>";
  html += "<script id=\"report-data\" type=\"application/json\">" + json + "</script>";
  html += std::string("<script>") + kScript + "</script></body></html>\n";
  return html;
}

}  // namespace colo
