// The `colo` command line end to end, in process.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "cli/app.h"

namespace colo {
namespace {

int Colo(std::vector<std::string> args) {
  args.insert(args.begin(), "colo");
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  return RunColo(static_cast<int>(argv.size()), argv.data());
}

TEST(Cli, SimComparesPoliciesAndWritesAReport) {
  const auto report = std::filesystem::temp_directory_path() / "colo-cli-test" / "report.html";
  std::filesystem::remove(report);
  testing::internal::CaptureStdout();
  EXPECT_EQ(Colo({"sim", "--trace", "thesis-60", "--compare", "exclusive,worst-fit:margin=3GiB,lug",
                  "--report", report.string()}),
            0);
  const std::string out = testing::internal::GetCapturedStdout();
  EXPECT_NE(out.find("worst-fit:margin=3GiB"), std::string::npos) << out;
  EXPECT_NE(out.find("lug"), std::string::npos);
  std::ifstream in(report);
  std::stringstream html;
  html << in.rdbuf();
  EXPECT_NE(html.str().find("<canvas id=\"gantt-0\""), std::string::npos);
  EXPECT_NE(html.str().find("Over time"), std::string::npos);
}

TEST(Cli, BadInputGivesExitCodeTwo) {
  testing::internal::CaptureStderr();
  EXPECT_EQ(Colo({"sim", "--policy", "fastest-fit"}), 2);
  EXPECT_EQ(Colo({"sim", "--trace", "/nonexistent.csv"}), 2);
  EXPECT_EQ(Colo({"sim", "--server", "tpu9000"}), 2);
  EXPECT_EQ(Colo({"sim", "--estimator", "psychic"}), 2);
  const std::string err = testing::internal::GetCapturedStderr();
  EXPECT_NE(err.find("unknown policy"), std::string::npos) << err;
  EXPECT_NE(err.find("/nonexistent.csv"), std::string::npos);
}

TEST(Cli, JsonOutputParsesBack) {
  testing::internal::CaptureStdout();
  EXPECT_EQ(Colo({"sim", "--trace", "synthetic", "--jobs", "50", "--server", "h100x8", "--policy",
                  "worst-fit", "--json"}),
            0);
  const std::string out = testing::internal::GetCapturedStdout();
  EXPECT_EQ(out.front(), '{');
  EXPECT_NE(out.find("\"policy\": \"worst-fit\""), std::string::npos);
}

TEST(Cli, EstimateAnswersWithEveryEstimatorAndPicksTheTrace) {
  const std::string summary = std::string(COLO_TEST_DATA) + "/estimate/tv-resnet50-b32-adam.json";
  testing::internal::CaptureStdout();
  EXPECT_EQ(Colo({"estimate", summary, "--json", "--gpu", "H200"}), 0);
  const auto report = nlohmann::json::parse(testing::internal::GetCapturedStdout());
  EXPECT_EQ(report.value("best", ""), "trace");
  EXPECT_EQ(report.value("family", ""), "cnn");
  std::set<std::string> answered;
  for (const auto& e : report["estimates"]) {
    if (e.contains("peak")) answered.insert(e.value("estimator", ""));
  }
  // GPUMemNet as published has a CNN classifier (no Transformer one).
  EXPECT_EQ(answered, (std::set<std::string>{"trace", "gpumemnet", "gpumemnet-paper", "horus"}));
}

TEST(Cli, EstimateExplainsBadInput) {
  const std::string dir = std::string(COLO_TEST_DATA) + "/estimate/";
  testing::internal::CaptureStderr();
  EXPECT_EQ(Colo({"estimate", dir + "resnet18.torchsummary.txt"}), 1);  // no batch known
  EXPECT_EQ(Colo({"estimate", dir + "tv-resnet50-b32-adam.b32.trace", "--batch", "4"}), 1);
  EXPECT_EQ(Colo({"estimate", dir + "tv-resnet50-b32-adam.json", "--estimator", "magic"}), 1);
  const std::string err = testing::internal::GetCapturedStderr();
  EXPECT_NE(err.find("give --batch"), std::string::npos) << err;
  EXPECT_NE(err.find("not a torchsummary file"), std::string::npos) << err;
  EXPECT_NE(err.find("unknown estimator 'magic'"), std::string::npos) << err;
  // A torchsummary file with a batch: the trace estimator says why it cannot answer.
  testing::internal::CaptureStdout();
  EXPECT_EQ(Colo({"estimate", dir + "resnet18.torchsummary.txt", "--batch", "64"}), 0);
  const std::string out = testing::internal::GetCapturedStdout();
  EXPECT_NE(out.find("unknown layer types"), std::string::npos) << out;
  EXPECT_NE(out.find("has no allocation trace"), std::string::npos) << out;
}

}  // namespace
}  // namespace colo
