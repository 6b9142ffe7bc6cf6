#include "daemon/config.h"

#include <gtest/gtest.h>

#include "cli/client_commands.h"
#include "common/resource_limits.h"

namespace colo {
namespace {

TEST(DaemonConfig, ReadsEverySectionAndKeepsDefaults) {
  auto c = ParseConfig(R"(
[scheduler]
policy = "least-utilized"
sample_interval = "500ms"
window = 20
recovery = "thesis"
[gates]
memory_margin = "4GiB"
smact_max = 0.7
[sharing]
default = "plain"
gpus = { "GPU-abc" = "exclusive", "1" = "mps" }
[metrics]
enabled = true
port = 9500
)",
                       "test.toml");
  ASSERT_TRUE(c.ok()) << c.status().message();
  EXPECT_EQ(c->policy, "least-utilized");
  EXPECT_EQ(c->scheduler.sample_interval, SecondsF(0.5));
  EXPECT_EQ(c->scheduler.window_samples, 20);
  EXPECT_EQ(c->scheduler.recovery, RecoveryMode::kThesis);
  EXPECT_EQ(c->default_mode, SharingMode::kPlain);
  EXPECT_EQ(c->per_gpu.at("GPU-abc"), SharingMode::kExclusive);
  EXPECT_EQ(c->per_gpu.at("1"), SharingMode::kMps);
  const auto policy = c->Policy();
  ASSERT_TRUE(policy.ok()) << policy.status().message();
  EXPECT_EQ(policy->name, "least-utilized");
  EXPECT_EQ(policy->gates.memory_margin, GiB(4));
  EXPECT_DOUBLE_EQ(policy->gates.smact_max, 0.7);
  EXPECT_TRUE(c->metrics_enabled);
  EXPECT_EQ(c->metrics_port, 9500);
  EXPECT_EQ(c->scheduler.launch_grace, Seconds(30));  // untouched default
  EXPECT_TRUE(ParseConfig("", "empty.toml").ok());
}

TEST(DaemonConfig, PreemptionIsOnForRequeueJobsAndReadsItsSettings) {
  auto defaults = ParseConfig("", "empty.toml");
  ASSERT_TRUE(defaults.ok());
  EXPECT_TRUE(defaults->scheduler.fairness.preempt);
  EXPECT_EQ(defaults->scheduler.fairness.preempt_after, Seconds(1800));
  EXPECT_EQ(defaults->scheduler.fairness.preemptible, Preemptible::kRequeue);
  EXPECT_EQ(defaults->scheduler.fairness.max_notice, Seconds(600));
  auto c = ParseConfig(
      "[fairness]\npreempt = false\npreempt_after = \"10m\"\n"
      "preemptible = \"all\"\nmax_notice = \"2m\"\n",
      "test.toml");
  ASSERT_TRUE(c.ok()) << c.status().message();
  EXPECT_FALSE(c->scheduler.fairness.preempt);
  EXPECT_EQ(c->scheduler.fairness.preempt_after, Seconds(600));
  EXPECT_EQ(c->scheduler.fairness.preemptible, Preemptible::kAll);
  EXPECT_EQ(c->scheduler.fairness.max_notice, Seconds(120));
  EXPECT_FALSE(ParseConfig("[fairness]\nmax_notice = \"-1s\"\n", "test.toml").ok());
  auto bad = ParseConfig("[fairness]\npreemptible = \"some\"\n", "test.toml");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("unknown preemptible 'some'"), std::string::npos)
      << bad.status().message();
}

TEST(DaemonConfig, FairnessDefaultsOnAndReadsSharesAndLimits) {
  auto defaults = ParseConfig("", "empty.toml");
  ASSERT_TRUE(defaults.ok());
  EXPECT_EQ(defaults->scheduler.fairness.order, QueueOrder::kFairShare);
  EXPECT_TRUE(defaults->scheduler.backfill);
  EXPECT_EQ(defaults->scheduler.fairness.half_life, Seconds(7 * 86400));
  auto c = ParseConfig(R"(
[fairness]
order = "fifo"
half_life = "2d"
limits = { gpus = 4, running_jobs = 8 }
[fairness.users]
alice = { share = 2, gpu_memory = "80GiB" }
[fairness.groups]
students = { gpus = 2 }
)",
                       "test.toml");
  ASSERT_TRUE(c.ok()) << c.status().message();
  EXPECT_EQ(c->scheduler.fairness.order, QueueOrder::kFifo);
  EXPECT_EQ(c->scheduler.fairness.half_life, Seconds(2 * 86400));
  EXPECT_EQ(c->scheduler.user_limits, (UserLimits{4, Bytes(0), 8}));
  EXPECT_EQ(c->user_terms.at("alice"), (UserTerms{2, UserLimits{4, GiB(80), 8}}))
      << "an entry starts from the default limits";
  EXPECT_EQ(c->group_terms.at("students"), (UserTerms{1, UserLimits{2, Bytes(0), 8}}));
  EXPECT_EQ(TermsFromConfig(*c, "alice").share, 2);
  EXPECT_EQ(TermsFromConfig(*c, "no-such-user-here"), (UserTerms{1, UserLimits{4, Bytes(0), 8}}));
  // What --check-config prints reads back the same.
  std::string text;
  std::string table;
  for (const auto& [key, value] : EffectiveSettings(*c)) {
    const std::string section = key.substr(0, key.find('.'));
    if (section != table) text += "[" + (table = section) + "]\n";
    text += key.substr(key.find('.') + 1) + " = " + value + "\n";
  }
  auto again = ParseConfig(text, "printed.toml");
  ASSERT_TRUE(again.ok()) << again.status().message() << "\n" << text;
  EXPECT_EQ(again->user_terms, c->user_terms);
  EXPECT_EQ(again->group_terms, c->group_terms);
  EXPECT_EQ(again->scheduler.user_limits, c->scheduler.user_limits);
  EXPECT_EQ(again->scheduler.fairness, c->scheduler.fairness);
}

TEST(DaemonConfig, LogsLimitsAndTheDatabasesReserve) {
  auto defaults = ParseConfig("", "empty.toml");
  ASSERT_TRUE(defaults.ok());
  EXPECT_EQ(defaults->log_limit, GiB(1));
  EXPECT_EQ(defaults->database_reserve, MiB(64));
  EXPECT_EQ(defaults->PropagatedLimits().size(), std::size(kResourceKinds));
  ApplyDefaultPaths(*defaults, "/opt/colo/bin");
  EXPECT_EQ(defaults->jobs_dir, defaults->state_dir + "/jobs");
  auto c = ParseConfig(R"(
[paths]
jobs_dir = "/srv/colo-logs"
[jobs]
log_limit = "none"
propagate_limits = "nofile, core"
[limits]
database_reserve = "16MiB"
)",
                       "test.toml");
  ASSERT_TRUE(c.ok()) << c.status().message();
  EXPECT_EQ(c->log_limit, Bytes(0));
  EXPECT_EQ(c->database_reserve, MiB(16));
  EXPECT_EQ(c->PropagatedLimits(), (std::set<int>{RLIMIT_NOFILE, RLIMIT_CORE}));
  ApplyDefaultPaths(*c, "/opt/colo/bin");
  EXPECT_EQ(c->jobs_dir, "/srv/colo-logs");
  auto none = ParseConfig("[jobs]\npropagate_limits = \"none\"", "test.toml");
  ASSERT_TRUE(none.ok());
  EXPECT_TRUE(none->PropagatedLimits().empty());
}

TEST(DaemonConfig, MistakesAreErrorsNamingTheKey) {
  const std::pair<const char*, const char*> cases[] = {
      {"[scheduler]\npolcy = \"worst-fit\"", "unknown key scheduler.polcy"},
      {"[colo]\nx = 1", "unknown section [colo]"},
      {"[scheduler]\nwindow = \"thirty\"", "scheduler.window must be a number"},
      {"[scheduler]\nsample_interval = \"soon\"", "scheduler.sample_interval"},
      {"[scheduler]\npolicy = \"fastest\"", "unknown policy"},
      {"[sharing]\ndefault = \"shared\"", "not mps, plain or exclusive"},
      {"[gates]\nsmact_max = 3", "smact"},
      {"[scheduler\n", "test.toml:"},
      {"[fairness]\norder = \"lottery\"", "unknown queue order 'lottery'"},
      {"[fairness]\nhalf_life = \"0s\"", "fairness.half_life"},
      {"[fairness]\nlimits = { gpu = 2 }", "unknown key fairness.limits.gpu"},
      {"[fairness.users]\nalice = { share = -1 }", "fairness.users.alice.share"},
      {"[fairness.groups]\nlab = { gpu_memory = \"lots\" }", "fairness.groups.lab.gpu_memory"},
      {"[jobs]\npropagate_limits = \"nofile,files\"", "'files' is not a resource"},
      {"[jobs]\nlog_limit = \"lots\"", "jobs.log_limit"},
      {"[limits]\ndatabase_reserve = \"-3\"", "limits.database_reserve"},
      {"[slurm]\nshard_size = \"512KiB\"", "slurm.shard_size must be between 1MiB and 1TiB"},
      {"[slurm]\nbusy_wait = \"-1s\"", "slurm.busy_wait"},
      {"[slurm]\ndirect_submit = \"yes\"", "slurm.direct_submit"},
  };
  for (const auto& [text, expected] : cases) {
    auto c = ParseConfig(text, "test.toml");
    ASSERT_FALSE(c.ok()) << text;
    EXPECT_NE(c.status().message().find(expected), std::string::npos)
        << text << " -> " << c.status().message();
  }
}

TEST(DaemonConfig, ASlurmNodeTakesNoDirectSubmitsUnlessToldTo) {
  auto defaults = ParseConfig("[slurm]\nnode = \"gpu01\"\n", "test.toml");
  ASSERT_TRUE(defaults.ok()) << defaults.status().message();
  EXPECT_FALSE(defaults->slurm_direct_submit);
  EXPECT_EQ(defaults->slurm_shard_size, GiB(1));
  auto c = ParseConfig(
      "[slurm]\nnode = \"gpu01\"\ndirect_submit = true\nshard_size = \"512MiB\"\n"
      "busy_wait = \"3s\"\n",
      "test.toml");
  ASSERT_TRUE(c.ok()) << c.status().message();
  EXPECT_TRUE(c->slurm_direct_submit);
  EXPECT_EQ(c->slurm_shard_size, MiB(512));
  EXPECT_EQ(c->scheduler.booked_busy_wait, Seconds(3));
}

}  // namespace
}  // namespace colo
