#include "common/subprocess.h"

#include <gtest/gtest.h>
#include <sys/wait.h>

#include <atomic>
#include <thread>

namespace colo {
namespace {

const std::vector<std::string> kEnv = {"PATH=/usr/bin:/bin"};

TEST(RunCommandTest, CollectsOutputAndExitCode) {
  auto run = RunCommand({"/bin/sh", "-c", "echo out; echo err >&2; exit 3"}, kEnv, Seconds(10));
  ASSERT_TRUE(run.ok()) << run.status().message();
  EXPECT_EQ(run->exit_code, 3);
  EXPECT_FALSE(run->timed_out);
  EXPECT_NE(run->output.find("out\n"), std::string::npos);
  EXPECT_NE(run->output.find("err\n"), std::string::npos);
}

TEST(RunCommandTest, KeepsOnlyTheFirstBytesOfALongOutput) {
  auto run = RunCommand({"/bin/sh", "-c", "yes | head -c 100000"}, kEnv, Seconds(10), 1000);
  ASSERT_TRUE(run.ok()) << run.status().message();
  EXPECT_EQ(run->output.size(), 1000u);
  EXPECT_EQ(run->exit_code, 0);
}

TEST(RunCommandTest, KillsACommandThatOutlivesItsTimeout) {
  auto run = RunCommand({"/bin/sleep", "30"}, kEnv, std::chrono::milliseconds(200));
  ASSERT_TRUE(run.ok()) << run.status().message();
  EXPECT_TRUE(run->timed_out);
  EXPECT_EQ(run->exit_code, -1);
}

TEST(RunCommandTest, ACommandKilledByASignalHasNoExitCode) {
  auto run = RunCommand({"/bin/sh", "-c", "kill -9 $$"}, kEnv, Seconds(10));
  ASSERT_TRUE(run.ok()) << run.status().message();
  EXPECT_EQ(run->exit_code, -1);
  EXPECT_FALSE(run->timed_out);
}

TEST(RunCommandTest, AMissingProgramExitsWith127) {
  auto run = RunCommand({"/nonexistent/program"}, kEnv, Seconds(10));
  ASSERT_TRUE(run.ok()) << run.status().message();
  EXPECT_EQ(run->exit_code, 127);
}

TEST(RunCommandTest, RefusesARelativeProgram) {
  EXPECT_FALSE(RunCommand({"sh", "-c", "true"}, kEnv, Seconds(1)).ok());
}

// colod reaps its jobs' processes with waitpid(-1) on its loop while the Slurm bridge runs
// commands on a worker thread: neither may take the other's child.
TEST(RunCommandTest, ItsStatusIsNotTakenByAProcessWideReaper) {
  std::atomic<bool> stop{false};
  std::atomic<int> reaped{0};
  std::thread reaper([&] {
    while (!stop) {
      int status;
      if (waitpid(-1, &status, WNOHANG) > 0) reaped++;
      std::this_thread::yield();
    }
  });
  int failures = 0;
  for (int i = 0; i < 50; ++i) {
    auto run = RunCommand({"/bin/sh", "-c", "exit 7"}, kEnv, Seconds(10));
    if (!run.ok() || run->exit_code != 7) ++failures;
  }
  stop = true;
  reaper.join();
  EXPECT_EQ(failures, 0);
  EXPECT_EQ(reaped, 0);
}

}  // namespace
}  // namespace colo
