#include "sim/report.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>

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

std::string Escape(const std::string& s) {
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

}  // namespace

std::string FormatTable(const std::vector<SimResult>& results, const std::string& baseline) {
  const Metrics* base = FindBaseline(results, baseline);
  const auto columns = Columns();
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
    run["lost_gpu_hours"] = round(m.lost_gpu_hours);
    run["energy_mj"] = round(m.energy_mj);
    run["mean_smact"] = round(m.mean_smact);
    run["mean_memory_frac"] = round(m.mean_memory_frac);
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

namespace {

const char* kPalette[] = {"#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f",
                          "#edc948", "#b07aa1", "#ff9da7", "#9c755f", "#bab0ac"};

std::string BarChart(const std::string& title, const std::vector<SimResult>& results,
                     const std::function<double(const Metrics&)>& value, const std::string& unit) {
  const int width = 560, bar_h = 18, label_w = 260, top = 28;
  const int height = top + static_cast<int>(results.size()) * (bar_h + 6) + 10;
  double max_value = 0;
  for (const auto& r : results) max_value = std::max(max_value, value(r.metrics));
  if (max_value <= 0) max_value = 1;
  std::string svg = fmt::format(
      R"(<svg width="{}" height="{}" xmlns="http://www.w3.org/2000/svg">)", width + 80, height);
  svg += fmt::format(R"(<text x="0" y="16" font-weight="bold">{}</text>)", Escape(title));
  for (size_t i = 0; i < results.size(); ++i) {
    const double v = value(results[i].metrics);
    const int y = top + static_cast<int>(i) * (bar_h + 6);
    const double w = (width - label_w) * v / max_value;
    svg += fmt::format(R"(<text x="{}" y="{}" text-anchor="end" font-size="12">{}</text>)",
                       label_w - 6, y + 13, Escape(results[i].metrics.label));
    svg += fmt::format(R"(<rect x="{}" y="{}" width="{:.1f}" height="{}" fill="{}"/>)", label_w, y,
                       w, bar_h, kPalette[i % 10]);
    svg += fmt::format(R"(<text x="{:.1f}" y="{}" font-size="12">{:.2f} {}</text>)",
                       label_w + w + 4, y + 13, v, unit);
  }
  return svg + "</svg>";
}

std::string Gantt(const Timeline& t, double horizon_s) {
  if (t.series.empty()) return "";
  const int width = 1000, left = 60, lane_h = 12;
  const double scale = (width - left - 10) / std::max(1.0, horizon_s);
  // Stack overlapping jobs of a GPU in sub-lanes.
  std::vector<std::vector<std::pair<const Timeline::Segment*, int>>> per_gpu(t.series.size());
  std::vector<int> lanes(t.series.size(), 1);
  std::vector<std::vector<double>> lane_free(t.series.size());
  std::vector<const Timeline::Segment*> sorted;
  for (const auto& s : t.segments) sorted.push_back(&s);
  std::stable_sort(sorted.begin(), sorted.end(),
                   [](auto* a, auto* b) { return a->start_s < b->start_s; });
  for (const auto* s : sorted) {
    auto& free = lane_free[static_cast<size_t>(s->gpu)];
    size_t lane = 0;
    while (lane < free.size() && free[lane] > s->start_s + 1e-9) ++lane;
    if (lane == free.size()) free.push_back(0);
    free[lane] = s->end_s;
    per_gpu[static_cast<size_t>(s->gpu)].push_back({s, static_cast<int>(lane)});
  }
  int height = 20;
  std::vector<int> gpu_top;
  for (size_t g = 0; g < t.series.size(); ++g) {
    gpu_top.push_back(height);
    height += static_cast<int>(std::max<size_t>(1, lane_free[g].size())) * lane_h + 8;
  }
  std::string svg = fmt::format(
      R"(<svg width="{}" height="{}" xmlns="http://www.w3.org/2000/svg">)", width, height + 20);
  for (size_t g = 0; g < t.series.size(); ++g) {
    svg += fmt::format(R"(<text x="0" y="{}" font-size="11">GPU {}</text>)", gpu_top[g] + 10, g);
    for (const auto& [s, lane] : per_gpu[g]) {
      const char* color =
          s->outcome == "oom" ? "#e15759" : kPalette[static_cast<size_t>(s->job) % 10];
      svg += fmt::format(
          R"(<rect x="{:.1f}" y="{}" width="{:.1f}" height="{}" fill="{}" stroke="#fff" stroke-width="0.5"><title>job {} {} ({}) {:.0f}s-{:.0f}s</title></rect>)",
          left + s->start_s * scale, gpu_top[g] + lane * lane_h,
          std::max(1.0, (s->end_s - s->start_s) * scale), lane_h - 1, color, s->job,
          Escape(s->name), s->outcome, s->start_s, s->end_s);
    }
  }
  svg += fmt::format(
      R"(<text x="{}" y="{}" font-size="11">0 h</text><text x="{}" y="{}" font-size="11" text-anchor="end">{:.1f} h</text>)",
      left, height + 12, width - 10, height + 12, horizon_s / 3600);
  return svg + "</svg>";
}

std::string LineChart(const std::string& title, const Timeline& t, double horizon_s, double max_y,
                      const std::function<double(const Timeline::Point&)>& value,
                      const std::string& unit) {
  const int width = 1000, height = 160, left = 60, top = 20;
  const double sx = (width - left - 10) / std::max(1.0, horizon_s);
  const double sy = (height - top - 20) / std::max(1e-9, max_y);
  std::string svg = fmt::format(
      R"(<svg width="{}" height="{}" xmlns="http://www.w3.org/2000/svg">)", width, height);
  svg += fmt::format(R"(<text x="0" y="14" font-size="12" font-weight="bold">{}</text>)",
                     Escape(title));
  svg +=
      fmt::format(R"(<text x="0" y="{}" font-size="11">{:.0f} {}</text>)", top + 10, max_y, unit);
  const int base = height - 20;
  svg += fmt::format(R"(<line x1="{}" y1="{}" x2="{}" y2="{}" stroke="#999"/>)", left, base,
                     width - 10, base);
  for (size_t g = 0; g < t.series.size() && g < 16; ++g) {
    std::string points;
    double prev = 0;
    for (size_t i = 0; i < t.series[g].size(); ++i) {
      const auto& p = t.series[g][i];
      const double x = left + p.t_s * sx;
      if (i > 0) points += fmt::format("{:.1f},{:.1f} ", x, base - prev * sy);  // step
      prev = value(p);
      points += fmt::format("{:.1f},{:.1f} ", x, base - prev * sy);
    }
    points += fmt::format("{:.1f},{:.1f}", left + horizon_s * sx, base - prev * sy);
    svg += fmt::format(
        R"(<polyline fill="none" stroke="{}" stroke-width="1.2" points="{}"><title>GPU {}</title></polyline>)",
        kPalette[g % 10], points, g);
  }
  return svg + "</svg>";
}

}  // namespace

std::string ToHtml(const ReportContext& context, const std::vector<SimResult>& results,
                   const std::string& baseline) {
  std::string html =
      R"(<!doctype html><html><head><meta charset="utf-8"><title>colo sim report</title>
<style>body{font-family:sans-serif;margin:24px;max-width:1100px}table{border-collapse:collapse;font-size:13px}
td,th{border:1px solid #ccc;padding:3px 7px;text-align:right}td:first-child,th:first-child{text-align:left}
summary{cursor:pointer;font-weight:bold;margin:10px 0}.charts{display:flex;flex-wrap:wrap;gap:16px}</style></head><body>)";
  html += fmt::format(
      "<h1>colo sim</h1><p>Trace <b>{}</b> on {} × {} (seed {}). Ratios are to <b>{}</b>.</p>",
      Escape(context.trace), context.servers, Escape(context.server), context.seed,
      Escape(baseline));
  const Metrics* base = FindBaseline(results, baseline);
  html += "<table><tr>";
  const auto columns = Columns();
  for (const auto& c : columns) html += fmt::format("<th>{}</th>", c.header);
  html += "</tr>";
  for (const auto& r : results) {
    html += "<tr>";
    for (const auto& c : columns)
      html += fmt::format("<td>{}</td>", Escape(c.cell(r.metrics, base)));
    html += "</tr>";
  }
  html += "</table><h2>Per policy</h2><div class=\"charts\">";
  html += BarChart(
      "Total trace time", results, [](const Metrics& m) { return m.total_time_s / 3600; }, "h");
  html += BarChart(
      "Average JCT", results, [](const Metrics& m) { return m.jct_avg_s / 60; }, "min");
  html += BarChart(
      "Energy", results, [](const Metrics& m) { return m.energy_mj; }, "MJ");
  html += BarChart(
      "OOM crashes", results, [](const Metrics& m) { return m.oom_crashes; }, "");
  html += BarChart(
      "Mean SMACT", results, [](const Metrics& m) { return 100 * m.mean_smact; }, "%");
  html +=
      "</div><h2>GPU timelines</h2><p>Each bar is a job attempt on a GPU (red: crashed out of "
      "memory); jobs "
      "sharing a GPU stack. Hover for details.</p>";
  for (size_t i = 0; i < results.size(); ++i) {
    const auto& r = results[i];
    if (r.timeline.series.empty()) continue;
    const double horizon = std::max(1.0, r.metrics.total_time_s);
    html += fmt::format("<details{}><summary>{} (estimator {})</summary>", i == 0 ? " open" : "",
                        Escape(r.metrics.label), Escape(r.metrics.estimator));
    html += Gantt(r.timeline, horizon);
    html += LineChart(
        "Memory used per GPU", r.timeline, horizon, r.timeline.capacity_gib,
        [](const Timeline::Point& p) { return p.memory_gib; }, "GiB");
    html += LineChart(
        "SMACT per GPU", r.timeline, horizon, 100.0,
        [](const Timeline::Point& p) { return 100 * p.smact; }, "%");
    html += LineChart(
        "Power per GPU", r.timeline, horizon, 700.0,
        [](const Timeline::Point& p) { return p.watts; }, "W");
    html += "</details>";
  }
  html +=
      "<p>Arrival times of the thesis traces come from the Microsoft Philly trace (Jeon et al., "
      "ATC'19; "
      "CC-BY-4.0).</p></body></html>\n";
  return html;
}

}  // namespace colo
