// The `colo` command line end to end, in process.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
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
  EXPECT_NE(html.str().find("<svg"), std::string::npos);
  EXPECT_NE(html.str().find("GPU timelines"), std::string::npos);
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

}  // namespace
}  // namespace colo
