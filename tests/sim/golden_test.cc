// The simulator's golden test: the thesis' 90-task trace under a fixed set of policies must produce
// exactly the committed JSON, with the cluster queue and with the former per-server rule alike.
// Regenerate after an intended model change with
//   COLO_UPDATE_GOLDEN=1 ctest -R Golden
// and explain the change in the commit.
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <sstream>

#include "sim/report.h"
#include "sim/simulator.h"

namespace colo {
namespace {

std::string Thesis90(ClusterMode cluster) {
  const Trace trace = ThesisTrace(90);
  SimOptions options;
  options.server = *FindServer("a100x4");
  options.record_timeline = false;
  options.cluster = cluster;
  std::vector<SimResult> results;
  for (const char* text :
       {"exclusive", "round-robin:est=none,gates=none,recovery=thesis", "worst-fit",
        "least-utilized:est=none,margin=5GiB", "best-fit:est=noisy:0.2"}) {
    auto result = Simulate(trace, *ParseRunSpec(text, RunSpec{}), options);
    EXPECT_TRUE(result.ok()) << result.status().ToString();
    if (result.ok()) results.push_back(*result);
  }
  return ToJson(ReportContext{"thesis-90", "a100x4", 1, 1}, results, true);
}

TEST(Golden, Thesis90MatchesTheCommittedOutput) {
  const std::string actual = Thesis90(ClusterMode::kQueue);
  const std::string path = std::string(COLO_TEST_DATA) + "/golden/thesis90.json";
  if (std::getenv("COLO_UPDATE_GOLDEN")) {
    std::ofstream(path) << actual;
    GTEST_SKIP() << "golden file rewritten";
  }
  std::ifstream in(path);
  ASSERT_TRUE(in) << "missing " << path;
  std::stringstream expected;
  expected << in.rdbuf();
  EXPECT_EQ(actual, expected.str());
  // The former per-server rule gives the same on one server: the file predates the cluster queue.
  EXPECT_EQ(Thesis90(ClusterMode::kPerServer), expected.str());
}

}  // namespace
}  // namespace colo
