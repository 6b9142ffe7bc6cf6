// The report shared by colo sim and colo report: JSON that reads back, HTML that embeds its
// charting library and data, tells runs apart and draws missing values as gaps.
#include "sim/report.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <nlohmann/json.hpp>

namespace colo {

std::string ChartJsSource();

namespace {

SimResult MakeRun(const std::string& label, double total_s) {
  SimResult r;
  r.metrics.label = label;
  r.metrics.estimator = "oracle";
  r.metrics.jobs = 2;
  r.metrics.succeeded = 1;
  r.metrics.failed = 1;
  r.metrics.total_time_s = total_s;
  r.metrics.jct_avg_s = 600;
  r.metrics.wait_p95_s = 30;
  r.metrics.oom_crashes = 1;
  r.metrics.energy_mj = 2.5;
  r.jobs.push_back({1, Interned("a"), 0, JobState::kSucceeded, 0, 10, 600, 1, 0, ""});
  r.jobs.push_back(
      {2, Interned("b</script>"), 0, JobState::kFailed, 5, 20, 300, 2, 1, "out of memory"});
  r.timeline.series = {{{0, 1, 0.5, 200}, {100, std::nan(""), 0.7, 250}}, {{0, 2, 0.1, 90}}};
  r.timeline.segments = {{0, 1, "a", 10, 600, "done"}, {1, 2, "b", 20, 300, "oom"}};
  r.timeline.capacity_gib = 40;
  r.timeline.max_watts = 400;
  return r;
}

ReportContext Context() {
  ReportContext c;
  c.trace = "t";
  c.server = "s";
  return c;
}

nlohmann::json ReportData(const std::string& html) {
  const std::string open = "<script id=\"report-data\" type=\"application/json\">";
  const size_t begin = html.find(open);
  EXPECT_NE(begin, std::string::npos);
  const size_t end = html.find("</script>", begin);
  return nlohmann::json::parse(html.substr(begin + open.size(), end - begin - open.size()));
}

TEST(ReportTest, JsonReadsBack) {
  const std::vector<SimResult> runs = {MakeRun("worst-fit", 3600), MakeRun("exclusive", 7200)};
  auto back = FromJson(ToJson(Context(), runs, true));
  ASSERT_TRUE(back.ok()) << back.status().message();
  ASSERT_EQ(back->size(), 2u);
  EXPECT_EQ((*back)[1].metrics.label, "exclusive");
  EXPECT_EQ((*back)[0].metrics.total_time_s, 3600);
  EXPECT_EQ((*back)[0].metrics.jct_avg_s, 600);
  EXPECT_EQ((*back)[0].metrics.wait_p95_s, 30);
  EXPECT_EQ((*back)[0].metrics.oom_crashes, 1);
  ASSERT_EQ((*back)[0].jobs.size(), 2u);
  EXPECT_EQ((*back)[0].jobs[1].state, JobState::kFailed);
  EXPECT_EQ((*back)[0].jobs[1].ooms, 1);
  EXPECT_FALSE(FromJson("[]").ok());
  EXPECT_FALSE(FromJson("{\"runs\": [{}]}").ok());
  EXPECT_FALSE(FromJson("not json").ok());
}

TEST(ReportTest, HtmlEmbedsChartJsAndItsData) {
  const std::string chartjs = ChartJsSource();
  EXPECT_NE(chartjs.find("Chart.js v3"), std::string::npos);
  EXPECT_GT(chartjs.size(), 100000u);
  const std::vector<SimResult> runs = {MakeRun("worst-fit", 3600), MakeRun("worst-fit", 1800)};
  const std::string html = ToHtml(Context(), runs, "exclusive");
  EXPECT_NE(html.find(chartjs), std::string::npos) << "the library, whole, so it opens offline";
  EXPECT_EQ(html.find("b</script>"), std::string::npos) << "a job name cannot end the script";
  const auto data = ReportData(html);
  ASSERT_EQ(data["runs"].size(), 2u);
  // Two runs never look the same: labels and colours differ.
  EXPECT_NE(data["runs"][0]["label"], data["runs"][1]["label"]);
  EXPECT_NE(data["runs"][0]["colour"], data["runs"][1]["colour"]);
  // Past the palette, a run whose colour repeats is drawn dashed.
  std::vector<SimResult> many;
  for (int i = 0; i < 11; ++i) many.push_back(MakeRun("p" + std::to_string(i), 60));
  const auto eleven = ReportData(ToHtml(Context(), many, ""));
  EXPECT_EQ(eleven["runs"][10]["colour"], eleven["runs"][0]["colour"]);
  EXPECT_TRUE(eleven["runs"][0]["dash"].empty());
  EXPECT_FALSE(eleven["runs"][10]["dash"].empty());
  // The out-of-memory colour is no run's and no GPU's.
  const std::string oom = data["outcome_colours"]["oom"];
  for (const auto& run : data["runs"]) EXPECT_NE(run["colour"], oom);
  for (const auto& c : data["gpu_colours"]) EXPECT_NE(c, oom);
  // A missing value is a gap (null), not a number.
  EXPECT_TRUE(data["runs"][0]["series"][0][1][1].is_null());
  EXPECT_EQ(data["runs"][0]["series"][0][1][2], 70);
  EXPECT_EQ(data["runs"][0]["max_watts"], 400) << "the GPU's own power range";
  EXPECT_EQ(data["runs"][0]["segments"].size(), 2u);
  EXPECT_EQ(data["runs"][0]["segments"][1][4], "oom");
  EXPECT_EQ(data["runs"][0]["queue"].size(), 6u) << "counted from the jobs' times";
  EXPECT_EQ(data["bars"].size(), 6u);
  // Every run's charts have a canvas.
  for (const char* id :
       {"gantt-0", "memory-1", "smact-0", "power-1", "queue-0", "cdf-jct_min", "bar-total"})
    EXPECT_NE(html.find(std::string("id=\"") + id + "\""), std::string::npos) << id;
}

}  // namespace
}  // namespace colo
