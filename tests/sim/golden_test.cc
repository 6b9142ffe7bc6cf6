// The simulator's golden test: the thesis' 90-task trace under a fixed set of policies must produce
// exactly the committed JSON. Regenerate after an intended model change with
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

TEST(Golden, Thesis90MatchesTheCommittedOutput) {
  const Trace trace = ThesisTrace(90);
  SimOptions options;
  options.server = *FindServer("a100x4");
  options.record_timeline = false;
  std::vector<SimResult> results;
  for (const char* text :
       {"exclusive", "round-robin:est=none,gates=none,recovery=thesis", "worst-fit",
        "least-utilized:est=none,margin=5GiB", "best-fit:est=noisy:0.2"}) {
    auto result = Simulate(trace, *ParseRunSpec(text, RunSpec{}), options);
    ASSERT_TRUE(result.ok()) << result.status().ToString();
    results.push_back(*result);
  }
  const std::string actual = ToJson(ReportContext{"thesis-90", "a100x4", 1, 1}, results, true);
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
}

}  // namespace
}  // namespace colo
