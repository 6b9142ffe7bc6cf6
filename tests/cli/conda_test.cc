#include "cli/conda.h"

#include <gtest/gtest.h>

namespace colo {
namespace {

// What conda 23 prints (and conda 24's envs_details beside it, which is not needed).
constexpr char kListing[] = R"({
  "envs": [
    "/opt/conda",
    "/opt/conda/envs/tf",
    "/home/alice/.conda/envs/torch-2.1",
    "/scratch/alice/loose-env"
  ]
})";

TEST(Conda, FindsEnvironmentsByNameOrPath) {
  EXPECT_TRUE(FindCondaEnvironment(kListing, "tf").ok());
  EXPECT_TRUE(FindCondaEnvironment(kListing, "torch-2.1").ok());
  EXPECT_TRUE(FindCondaEnvironment(kListing, "base").ok());
  EXPECT_TRUE(FindCondaEnvironment(kListing, "/scratch/alice/loose-env").ok());
  EXPECT_TRUE(FindCondaEnvironment(kListing, "/opt/conda/envs/tf/").ok());
}

TEST(Conda, AMissingEnvironmentIsNamedWithTheKnownOnes) {
  const Status s = FindCondaEnvironment(kListing, "tensorflow");
  EXPECT_EQ(s.code(), StatusCode::kNotFound);
  EXPECT_EQ(s.message(), "conda has no environment 'tensorflow' (conda env list: tf, torch-2.1)");
  // A path is matched as a whole, not by its last part.
  EXPECT_EQ(FindCondaEnvironment(kListing, "/elsewhere/tf").code(), StatusCode::kNotFound);
  EXPECT_EQ(FindCondaEnvironment(R"({"envs": ["/opt/conda"]})", "tf").message(),
            "conda has no environment 'tf' (conda env list: base only)");
}

TEST(Conda, WarningsAroundTheAnswerAreSkipped) {
  const std::string noisy =
      std::string("==> WARNING: A newer version of conda exists. <==\n") + kListing + "\n";
  EXPECT_TRUE(FindCondaEnvironment(noisy, "tf").ok());
}

TEST(Conda, AnythingElseIsAClearError) {
  for (const char* bad : {"", "not json", "{\"envs\": 3}", "{}", "[\"/opt/conda\"]", "{{{"}) {
    const Status s = FindCondaEnvironment(bad, "tf");
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << bad;
    EXPECT_NE(s.message().find("printed no list of environments"), std::string::npos) << bad;
  }
}

}  // namespace
}  // namespace colo
