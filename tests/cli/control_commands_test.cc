// sbatch's --time, --dependency and --export as colo reads them.
#include "cli/control_commands.h"

#include <gtest/gtest.h>
#include <signal.h>

namespace colo {
namespace {

TEST(TimeLimit, TakesEverySbatchForm) {
  const std::pair<const char*, int64_t> cases[] = {
      {"90", 90 * 60},          {"1:30", 90},       {"1:00:00", 3600}, {"2-1", 2 * 86400 + 3600},
      {"1-0:30", 86400 + 1800}, {"1-0:0:5", 86405}, {"UNLIMITED", 0},  {"infinite", 0}};
  for (const auto& [text, seconds] : cases) {
    auto parsed = ParseTimeLimit(text);
    ASSERT_TRUE(parsed.ok()) << text << ": " << parsed.status().message();
    EXPECT_EQ(*parsed, seconds) << text;
  }
}

TEST(TimeLimit, RefusesWhatIsNotATimeNamingTheOption) {
  for (const char* text : {"", "abc", "0", "0:0", "1:2:3:4", "-5", "1-", "x-1", "1-2-3", "400-0",
                           "99999999999999999999", "1:-1"}) {
    auto parsed = ParseTimeLimit(text);
    ASSERT_FALSE(parsed.ok()) << text;
    EXPECT_NE(parsed.status().message().find("--time"), std::string::npos) << text;
  }
}

TEST(SignalOption, TakesSbatchsFormByNameOrNumber) {
  const auto signal = [](std::string_view text) {
    auto parsed = ParseSignalOption(text);
    EXPECT_TRUE(parsed.ok()) << text << ": " << parsed.status().message();
    return parsed.ok() ? std::pair{parsed->number, parsed->lead_s} : std::pair{0, 0};
  };
  EXPECT_EQ(signal("TERM"), (std::pair{SIGTERM, 60}));
  EXPECT_EQ(signal("SIGUSR1@120"), (std::pair{SIGUSR1, 120}));
  EXPECT_EQ(signal("B:usr2@0"), (std::pair{SIGUSR2, 0}));
  EXPECT_EQ(signal("10@30"), (std::pair{SIGUSR1, 30}));
  for (const char* bad :
       {"", "KILL", "9", "STOP", "SEGV", "USR1@", "USR1@-1", "USR1@65536", "R:USR1", "TERM@1m"}) {
    auto parsed = ParseSignalOption(bad);
    ASSERT_FALSE(parsed.ok()) << bad;
    EXPECT_TRUE(parsed.status().message().starts_with("--signal: ")) << parsed.status().message();
  }
}

TEST(Dependencies, ReadSlurmSyntax) {
  auto deps = ParseDependencyList("afterok:1:2,afterany:3,AFTERNOTOK:4");
  ASSERT_TRUE(deps.ok()) << deps.status().message();
  const std::vector<api::Dependency> expected = {{api::DependencyKind::kAfterOk, 1},
                                                 {api::DependencyKind::kAfterOk, 2},
                                                 {api::DependencyKind::kAfterAny, 3},
                                                 {api::DependencyKind::kAfterNotOk, 4}};
  EXPECT_EQ(*deps, expected);
  for (const char* bad : {"", "afterok", "after:1", "afterok:", "afterok:x", "afterok:-1",
                          "singleton", "afterok:1,,afterany:2"})
    EXPECT_FALSE(ParseDependencyList(bad).ok()) << bad;
  std::string many = "afterok";
  for (int i = 1; i <= 65; ++i) many += ":" + std::to_string(i);
  EXPECT_FALSE(ParseDependencyList(many).ok());
}

TEST(ArraySpec, RangesListsStepsAndACap) {
  auto spec = ParseArraySpec("0-99%8");
  ASSERT_TRUE(spec.ok()) << spec.status().message();
  EXPECT_EQ(spec->tasks.size(), 100u);
  EXPECT_EQ(spec->tasks.front(), 0);
  EXPECT_EQ(spec->tasks.back(), 99);
  EXPECT_EQ(spec->limit, 8);
  EXPECT_EQ(ParseArraySpec("1,3,5")->tasks, (std::vector<int>{1, 3, 5}));
  EXPECT_EQ(ParseArraySpec("0-15:4")->tasks, (std::vector<int>{0, 4, 8, 12}));
  EXPECT_EQ(ParseArraySpec("5,1-2,5")->tasks, (std::vector<int>{1, 2, 5}));
  EXPECT_EQ(ParseArraySpec("7")->limit, 0);
  for (const char* bad :
       {"", "a", "3-1", "1-", "-1", "0-4:0", "0-4%0", "0-4%", "1,,2", "0-99999999", "0-10%x"})
    EXPECT_FALSE(ParseArraySpec(bad).ok()) << bad;
  EXPECT_FALSE(ParseArraySpec("0-10", 5).ok()) << "bounded before the list is made";
}

TEST(Export, AllNoneAndNames) {
  const std::vector<std::string> env = {"PATH=/bin", "HOME=/home/a", "FOO=x"};
  EXPECT_EQ(*ApplyExport("ALL", env), env);
  EXPECT_TRUE(ApplyExport("NONE", env)->empty());
  EXPECT_EQ(*ApplyExport("NONE,FOO=bar", env), std::vector<std::string>{"FOO=bar"});
  EXPECT_EQ(*ApplyExport("FOO", env), std::vector<std::string>{"FOO=x"});
  EXPECT_EQ(*ApplyExport("ALL,FOO=bar", env),
            (std::vector<std::string>{"PATH=/bin", "HOME=/home/a", "FOO=bar"}));
  EXPECT_TRUE(ApplyExport("MISSING", env)->empty());
  EXPECT_FALSE(ApplyExport("=x", env).ok());
  EXPECT_FALSE(ApplyExport("ALL,,FOO", env).ok());
}

}  // namespace
}  // namespace colo
