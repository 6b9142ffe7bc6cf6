// PosixProcessLauncher with real processes: how jobs end, their logs, what they leave behind, a
// job's directory turned hostile, acting as another user, and finding attempts again. Each test
// that tracks processes runs with cgroups (skipped where colod could not create them) and without.
#include "daemon/posix_launcher.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <pwd.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <functional>
#include <future>
#include <sstream>
#include <thread>

namespace colo {
namespace {

namespace fs = std::filesystem;
using Cgroups = PosixProcessLauncher::Cgroups;

// Generous: the machine may be loaded; nothing here asserts how long anything took.
constexpr auto kDeadline = std::chrono::seconds(60);

bool Root() {
  return geteuid() == 0;
}

Identity Self() {
  const passwd* pw = getpwuid(getuid());
  return {getuid(), getgid(), pw ? pw->pw_name : ""};
}

std::optional<Identity> Nobody() {
  const passwd* pw = getpwnam("nobody");
  if (pw == nullptr) return std::nullopt;
  return Identity{pw->pw_uid, pw->pw_gid, pw->pw_name};
}

// Running, not a zombie: a zombie holds no memory and has ended.
bool Running(pid_t pid) {
  std::ifstream in(fmt::format("/proc/{}/stat", pid));
  std::string line;
  if (!std::getline(in, line)) return false;
  const size_t paren = line.rfind(')');
  return paren != std::string::npos && paren + 2 < line.size() && line[paren + 2] != 'Z' &&
         line[paren + 2] != 'X';
}

std::string ReadAll(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream out;
  out << in.rdbuf();
  return out.str();
}

std::vector<std::string> BaseEnv() {
  return {"PATH=/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin"};
}

class LauncherTest : public ::testing::TestWithParam<Cgroups> {
 protected:
  void SetUp() override {
    // As colod: orphans of a killed shim come to this process, and Refresh() reaps them.
    prctl(PR_SET_CHILD_SUBREAPER, 1);
    char pattern[] = "/tmp/colo-launcher-XXXXXX";
    ASSERT_NE(mkdtemp(pattern), nullptr);
    dir_ = pattern;
    ASSERT_EQ(chmod(dir_.c_str(), 0711), 0);
    jobs_ = dir_ + "/jobs";
    ASSERT_EQ(mkdir(jobs_.c_str(), 0711), 0);
    ASSERT_EQ(chmod(jobs_.c_str(), 0711), 0);  // whatever the umask
    options_.jobs_dir = jobs_;
    options_.shim = COLO_SHIM_PATH;
    options_.cgroups = GetParam();
    options_.leftover_grace = Seconds(1);
    auto launcher = PosixProcessLauncher::Create(options_);
    ASSERT_TRUE(launcher.ok()) << launcher.status().message();
    launcher_ = std::move(*launcher);
    if (GetParam() == Cgroups::kAuto && !launcher_->uses_cgroups()) {
      GTEST_SKIP() << "cgroups unavailable: " << launcher_->tracking();
    }
    if (GetParam() == Cgroups::kOff) {
      EXPECT_FALSE(launcher_->uses_cgroups());
    }
    // The realistic case under root: the job belongs to someone else, who must reach colo-shim
    // (a build in a private home is out of their reach: then the jobs are root's).
    const auto nobody = Nobody();
    owner_ = Self();
    if (Root() && nobody &&
        launcher_->CheckWorkdir(*nobody, fs::path(COLO_SHIM_PATH).parent_path()).ok()) {
      owner_ = *nobody;
    }
    work_ = dir_ + "/work";
    ASSERT_EQ(mkdir(work_.c_str(), 0700), 0);
    ASSERT_EQ(chown(work_.c_str(), owner_.uid, owner_.gid), 0);
  }

  void TearDown() override {
    // Leave no process behind, whatever the test did.
    if (launcher_) {
      for (const AttemptRef& ref : started_) {
        launcher_->Signal(ref, SIGKILL);
        WaitEnd(ref);
        launcher_->Release(ref);
      }
      launcher_->Refresh();
    }
    std::error_code ignored;
    fs::remove_all(dir_, ignored);
  }

  LaunchSpec Spec(std::vector<std::string> argv, int attempt = 1) {
    LaunchSpec spec;
    spec.job = job_;
    spec.attempt = attempt;
    spec.owner = owner_;
    spec.argv = std::move(argv);
    spec.env = BaseEnv();
    spec.context.workdir = work_;
    return spec;
  }

  AttemptRef Started(const LaunchSpec& spec) {
    auto handle = launcher_->Start(spec);
    EXPECT_TRUE(handle.ok()) << handle.status().message();
    AttemptRef ref{spec.job, spec.attempt, spec.owner, handle.ok() ? *handle : ProcessHandle{}};
    if (handle.ok()) started_.push_back(ref);
    return ref;
  }
  AttemptRef Run(std::vector<std::string> argv, int attempt = 1) {
    return Started(Spec(std::move(argv), attempt));
  }

  // Calls Refresh() and Check() as colod's loop does until the attempt has ended.
  std::optional<AttemptEnd> WaitEnd(const AttemptRef& ref) { return WaitEndWith(*launcher_, ref); }
  static std::optional<AttemptEnd> WaitEndWith(PosixProcessLauncher& launcher,
                                               const AttemptRef& ref) {
    const auto until = std::chrono::steady_clock::now() + kDeadline;
    while (std::chrono::steady_clock::now() < until) {
      launcher.Refresh();
      if (auto end = launcher.Check(ref)) return end;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    ADD_FAILURE() << "attempt " << ref.attempt << " of job " << ref.job << " never ended";
    return std::nullopt;
  }
  void Forget(const AttemptRef& ref) {
    std::erase_if(started_, [&](const AttemptRef& r) {
      return r.job == ref.job && r.attempt == ref.attempt;
    });
  }

  std::string AttemptFile(int attempt, const std::string& suffix) const {
    return fmt::format("{}/{}/attempt-{}.{}", jobs_, job_, attempt, suffix);
  }
  // Waits until `path` holds a whole line; returns the content.
  static std::string WaitForLine(const std::string& path) {
    const auto until = std::chrono::steady_clock::now() + kDeadline;
    std::string text;
    while (std::chrono::steady_clock::now() < until) {
      text = ReadAll(path);
      if (text.find('\n') != std::string::npos) return text;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    ADD_FAILURE() << path << " never got a line";
    return text;
  }
  static void WaitForFile(const std::string& path) {
    const auto until = std::chrono::steady_clock::now() + kDeadline;
    struct stat st {};
    while (std::chrono::steady_clock::now() < until) {
      if (lstat(path.c_str(), &st) == 0) return;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    ADD_FAILURE() << path << " never appeared";
  }

  std::string dir_, jobs_, work_;
  Identity owner_;
  PosixProcessLauncher::Options options_;
  std::unique_ptr<PosixProcessLauncher> launcher_;
  std::vector<AttemptRef> started_;
  // Unique across test processes running at once: cgroups are named by job.
  JobId job_ = static_cast<JobId>(getpid()) * 1000 + 1;
};

INSTANTIATE_TEST_SUITE_P(Tracking, LauncherTest, ::testing::Values(Cgroups::kAuto, Cgroups::kOff),
                         [](const auto& tracking) {
                           return tracking.param == Cgroups::kAuto ? "Cgroups" : "NoCgroups";
                         });

TEST_P(LauncherTest, ReportsHowTheJobEnded) {
  const auto ok = WaitEnd(Run({"true"}, 1));
  ASSERT_TRUE(ok);
  EXPECT_TRUE(ok->end.known);
  EXPECT_TRUE(ok->end.exited);
  EXPECT_EQ(ok->end.code, 0);

  const auto three = WaitEnd(Run({"sh", "-c", "exit 3"}, 2));
  ASSERT_TRUE(three);
  EXPECT_TRUE(three->end.known);
  EXPECT_TRUE(three->end.exited);
  EXPECT_EQ(three->end.code, 3);

  const auto killed = WaitEnd(Run({"sh", "-c", "kill -KILL $$"}, 3));
  ASSERT_TRUE(killed);
  EXPECT_TRUE(killed->end.known);
  EXPECT_FALSE(killed->end.exited);
  EXPECT_EQ(killed->end.code, SIGKILL);

  const auto missing = WaitEnd(Run({"/nonexistent/command"}, 4));
  ASSERT_TRUE(missing);
  EXPECT_EQ(missing->end.code, 127);
  EXPECT_NE(missing->stderr_tail.find("cannot run /nonexistent/command"), std::string::npos);
}

TEST_P(LauncherTest, WithoutARecordTheShimsOwnEndStandsAndAForgedOneIsIgnored) {
  if (owner_.uid == 0) GTEST_SKIP() << "root writes the record whatever the permissions";
  // The job takes away the shim's way to write its record; the shim's exit code is the job's.
  LaunchSpec spec = Spec({"sh", "-c", "chmod 0500 \"$JOB_DIR\"; exit 4"});
  spec.env.push_back(fmt::format("JOB_DIR={}/{}", jobs_, job_));
  const auto end = WaitEnd(Started(spec));
  ASSERT_TRUE(end);
  EXPECT_FALSE(fs::exists(AttemptFile(1, "exit")));
  EXPECT_TRUE(end->end.known);
  EXPECT_TRUE(end->end.exited);
  EXPECT_EQ(end->end.code, 4);
  ASSERT_EQ(chmod(fmt::format("{}/{}", jobs_, job_).c_str(), 0700), 0);

  // A record the job forged in a form the shim never writes, and left in place: not an end.
  spec = Spec(
      {"sh", "-c",
       "printf 'exited 999\\n' > \"$JOB_DIR/attempt-2.exit\"; chmod 0500 \"$JOB_DIR\"; exit 5"},
      2);
  spec.env.push_back(fmt::format("JOB_DIR={}/{}", jobs_, job_));
  const auto forged = WaitEnd(Started(spec));
  ASSERT_TRUE(forged);
  EXPECT_EQ(ReadAll(AttemptFile(2, "exit")), "exited 999\n");
  EXPECT_TRUE(forged->end.known);
  EXPECT_EQ(forged->end.code, 5);
  ASSERT_EQ(chmod(fmt::format("{}/{}", jobs_, job_).c_str(), 0700), 0);
}

TEST_P(LauncherTest, GivesTheTailsOfStdoutAndStderrAsValidText) {
  const auto end = WaitEnd(Run({"sh", "-c", "echo out; echo err >&2; printf '\\377bad\\n' >&2"}));
  ASSERT_TRUE(end);
  EXPECT_EQ(end->stdout_tail, "out\n");
  EXPECT_EQ(end->stderr_tail,
            "err\n\xEF\xBF\xBD"
            "bad\n");  // U+FFFD for the stray byte

  const auto long_end =
      WaitEnd(Run({"sh", "-c", "head -c 300000 /dev/zero | tr '\\0' x; echo END"}, 2));
  ASSERT_TRUE(long_end);
  EXPECT_EQ(long_end->stdout_tail.size(), kTailBytes);
  EXPECT_TRUE(long_end->stdout_tail.ends_with("xxEND\n"));

  const AttemptFiles files = launcher_->Files(job_, 2);
  EXPECT_EQ(files.stdout_path, AttemptFile(2, "out"));
  EXPECT_EQ(files.stderr_path, AttemptFile(2, "err"));
  EXPECT_EQ(fs::file_size(files.stdout_path), 300000u + 4);
}

TEST_P(LauncherTest, EnvironmentAndWorkdirReachTheJobAndNothingOfColodDoes) {
  // A descriptor colod forgot to mark close-on-exec.
  const int stray = open("/dev/null", O_RDONLY);
  ASSERT_GE(stray, 0);
  ASSERT_GE(dup2(stray, 100), 0);
  LaunchSpec spec = Spec({"sh", "-c",
                          "echo \"$COLO_JOB_ID $COLO_ATTEMPT $FOO\"; pwd; "
                          "test -e /proc/$$/fd/100 && echo leaked || echo clean; "
                          "read line; echo \"stdin:$?\""});
  spec.env.push_back("FOO=bar baz");
  spec.env.push_back("COLO_JOB_ID=999");  // the attempt's own names win
  const auto end = WaitEnd(Started(spec));
  close(100);
  close(stray);
  ASSERT_TRUE(end);
  EXPECT_EQ(end->stdout_tail,
            fmt::format("{} 1 bar baz\n{}\nclean\nstdin:1\n", job_, fs::canonical(work_).string()));
}

TEST_P(LauncherTest, TheJobStartsWithItsSubmittersUmaskAndOtherwiseALoginShells) {
  LaunchSpec spec = Spec({"sh", "-c", "umask"});
  spec.context.umask = 027;
  const auto given = WaitEnd(Started(spec));
  ASSERT_TRUE(given);
  EXPECT_EQ(given->stdout_tail, "0027\n");
  // An older client's job (no umask stored) starts with 022, never with colod's own.
  const auto unset = WaitEnd(Run({"sh", "-c", "umask"}, 2));
  ASSERT_TRUE(unset);
  EXPECT_EQ(unset->stdout_tail, "0022\n");
}

TEST_P(LauncherTest, SignalKillsAChildThatLeftTheSessionAndCheckWaitsForIt) {
  const AttemptRef ref = Run({"sh", "-c", "setsid sleep 300 & echo $!; exec sleep 300"});
  const pid_t leftover = std::stoi(WaitForLine(AttemptFile(1, "out")));
  launcher_->Refresh();
  ASSERT_TRUE(Running(leftover));
  EXPECT_FALSE(launcher_->Check(ref));
  EXPECT_EQ(launcher_->AttemptOf(leftover), std::optional(std::pair{job_, 1}));
  EXPECT_EQ(launcher_->AttemptOf(getpid()), std::nullopt);

  launcher_->Signal(ref, SIGKILL);
  const auto end = WaitEnd(ref);
  ASSERT_TRUE(end);
  EXPECT_FALSE(Running(leftover)) << "the attempt ended while its process ran";
  EXPECT_FALSE(Running(ref.process.pid));
  EXPECT_FALSE(end->end.known);  // the shim was killed before it could record the end
}

TEST_P(LauncherTest, SigtermEndsTheJobAndTheShimRecordsIt) {
  const AttemptRef ref = Run({"sh", "-c", "echo started; exec sleep 300"});
  WaitForLine(AttemptFile(1, "out"));
  launcher_->Signal(ref, SIGTERM);
  const auto end = WaitEnd(ref);
  ASSERT_TRUE(end);
  EXPECT_TRUE(end->end.known);
  EXPECT_FALSE(end->end.exited);
  EXPECT_EQ(end->end.code, SIGTERM);
}

TEST_P(LauncherTest, KilledShimLeavesNothingRunningAndTheEndIsUnknown) {
  // Three processes outlive the shim: the main one (in the attempt's session); one that left the
  // session, lost its parent and writes nowhere, seen by a Refresh() before the shim died; one
  // that left the session after the last Refresh() and still writes to the attempt's log.
  const AttemptRef ref = Run({"sh", "-c",
                              "(setsid sleep 300 >/dev/null 2>&1 & echo $! > quiet); "
                              "while [ ! -e go ]; do sleep 0.05; done; "
                              "(setsid sleep 300 & echo $! $$); exec sleep 300"});
  WaitForLine(work_ + "/quiet");
  const pid_t quiet = std::stoi(ReadAll(work_ + "/quiet"));
  launcher_->Refresh();  // as colod's loop does
  { std::ofstream(work_ + "/go") << ""; }
  std::istringstream pids(WaitForLine(AttemptFile(1, "out")));
  pid_t late = 0, main = 0;
  pids >> late >> main;
  for (pid_t pid : {quiet, late, main}) ASSERT_TRUE(Running(pid)) << pid;

  ASSERT_EQ(kill(ref.process.pid, SIGKILL), 0);
  const auto until = std::chrono::steady_clock::now() + kDeadline;
  while (Running(ref.process.pid) && std::chrono::steady_clock::now() < until)
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  // The shim has ended and nothing but the launcher ends the others.
  for (pid_t pid : {quiet, late, main}) ASSERT_TRUE(Running(pid)) << pid;
  EXPECT_FALSE(launcher_->Check(ref)) << "the attempt ended while its processes ran";
  const auto end = WaitEnd(ref);
  ASSERT_TRUE(end);
  EXPECT_FALSE(end->end.known);
  for (pid_t pid : {quiet, late, main}) EXPECT_FALSE(Running(pid)) << pid;
}

TEST_P(LauncherTest, ShimEndsWhatTheJobLeftBehindBeforeRecordingTheEnd) {
  // One leftover takes SIGTERM; the other ignores it and needs SIGKILL after the grace.
  const AttemptRef ref = Run({"sh", "-c",
                              "setsid sleep 300 & echo $!; "
                              "setsid sh -c 'trap \"\" TERM; echo $$ > stubborn; exec sleep 300' & "
                              "while [ ! -s stubborn ]; do sleep 0.05; done; cat stubborn"});
  WaitForFile(AttemptFile(1, "exit"));
  // The record exists only once nothing of the job runs.
  std::istringstream pids(ReadAll(AttemptFile(1, "out")));
  pid_t polite = 0, stubborn = 0;
  pids >> polite >> stubborn;
  ASSERT_GT(polite, 1);
  ASSERT_GT(stubborn, 1);
  EXPECT_FALSE(Running(polite));
  EXPECT_FALSE(Running(stubborn));
  const auto end = WaitEnd(ref);
  ASSERT_TRUE(end);
  EXPECT_TRUE(end->end.known);
  EXPECT_TRUE(end->end.exited);
  EXPECT_EQ(end->end.code, 0);
}

TEST_P(LauncherTest, StartFailuresNameTheStepAndNeverHang) {
  // Start does not wait for the child (the user could stop it): a failed step ends the attempt,
  // and its end says which step and why.
  auto failure = [&](const LaunchSpec& spec) {
    const AttemptRef ref = Started(spec);
    const auto end = WaitEnd(ref);
    EXPECT_TRUE(end);
    if (!end) return std::string();
    EXPECT_TRUE(end->end.exited);
    EXPECT_EQ(end->end.code, 127);
    launcher_->Release(ref);
    return end->stderr_tail;
  };
  LaunchSpec missing = Spec({"true"});
  missing.context.workdir = work_ + "/missing";
  EXPECT_EQ(failure(missing),
            fmt::format("colo: cannot start the job: chdir {}/missing failed: No such file or "
                        "directory\n",
                        work_));

  // The user owns the job's directory and may leave a FIFO where the log goes.
  const std::string fifo = AttemptFile(2, "out");
  ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
  ASSERT_EQ(chown(fifo.c_str(), owner_.uid, owner_.gid), 0);
  EXPECT_NE(failure(Spec({"true"}, 2)).find("attempt-2.out"), std::string::npos);

  ASSERT_EQ(symlink("/etc/passwd", AttemptFile(3, "err").c_str()), 0);
  EXPECT_NE(failure(Spec({"true"}, 3)).find("attempt-3.err"), std::string::npos);

  PosixProcessLauncher::Options options = options_;
  options.shim = "/nonexistent/colo-shim";
  EXPECT_FALSE(PosixProcessLauncher::Create(options).ok());
  options.shim = "relative/colo-shim";
  EXPECT_FALSE(PosixProcessLauncher::Create(options).ok());
}

TEST_P(LauncherTest, HostileLogFilesGiveEmptyTailsNeverForeignContentNorAHang) {
  const std::string secret = dir_ + "/secret";
  {
    std::ofstream out(secret);
    out << "root-only secret\n";
  }
  ASSERT_EQ(chmod(secret.c_str(), 0600), 0);
  struct Case {
    std::string name;
    std::function<void(const std::string&)> make;
    bool needs_foreign_owner = false;
  };
  const std::vector<Case> cases = {
      {"symlink",
       [&](const std::string& path) { ASSERT_EQ(symlink(secret.c_str(), path.c_str()), 0); }},
      {"hard link to another user's file",
       [&](const std::string& path) { ASSERT_EQ(link(secret.c_str(), path.c_str()), 0); }, true},
      {"fifo",
       [&](const std::string& path) {
         ASSERT_EQ(mkfifo(path.c_str(), 0600), 0);
         ASSERT_EQ(chown(path.c_str(), owner_.uid, owner_.gid), 0);
       }},
      {"directory",
       [&](const std::string& path) {
         ASSERT_EQ(mkdir(path.c_str(), 0700), 0);
         ASSERT_EQ(chown(path.c_str(), owner_.uid, owner_.gid), 0);
       }},
      {"device",
       [&](const std::string& path) {
         ASSERT_EQ(mknod(path.c_str(), S_IFCHR | 0600, makedev(1, 5)), 0);  // /dev/zero
         ASSERT_EQ(chown(path.c_str(), owner_.uid, owner_.gid), 0);
       }},
  };
  // Each case: an attempt whose stderr is replaced, once the shim has recorded the end, by what
  // the user could leave there.
  int attempt = 0;
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    if (c.needs_foreign_owner && owner_.uid == getuid()) continue;
    if (c.name == "device" && !Root()) continue;
    const AttemptRef ref = Run({"sh", "-c", "echo visible >&2; echo visible"}, ++attempt);
    WaitForFile(AttemptFile(attempt, "exit"));
    const std::string err = AttemptFile(attempt, "err");
    ASSERT_EQ(unlink(err.c_str()), 0);
    c.make(err);
    // A FIFO opened for reading waits for a writer: if Check() ever did, open one to let it go.
    auto check = std::async(std::launch::async, [&] { return WaitEnd(ref); });
    if (check.wait_for(kDeadline) != std::future_status::ready) {
      ADD_FAILURE() << "Check() hangs";
      const int writer = open(err.c_str(), O_WRONLY | O_NONBLOCK);
      if (writer >= 0) close(writer);
    }
    const auto end = check.get();
    ASSERT_TRUE(end);
    EXPECT_EQ(end->stderr_tail, "");
    EXPECT_EQ(end->stdout_tail, "visible\n");  // the other log is read as ever
    EXPECT_TRUE(end->end.known);
  }
}

TEST_P(LauncherTest, FindLaunchedFindsARunningAttemptAfterARestart) {
  const AttemptRef ref = Run({"sh", "-c", "echo started; exec sleep 300"});
  WaitForLine(AttemptFile(1, "out"));
  // A new launcher knows nothing of the attempt: colod restarted between start and record.
  auto again = PosixProcessLauncher::Create(options_);
  ASSERT_TRUE(again.ok()) << again.status().message();
  PosixProcessLauncher& restarted = **again;
  AttemptRef unknown{job_, 1, owner_, {}};
  const auto found = restarted.FindLaunched(unknown);
  ASSERT_TRUE(found.running);
  EXPECT_EQ(found.running->pid, ref.process.pid);
  EXPECT_EQ(found.running->start_ticks, ref.process.start_ticks);
  EXPECT_TRUE(found.may_have_started);

  // Another attempt of the job never started; once its log exists it may have.
  AttemptRef second{job_, 2, owner_, {}};
  auto none = restarted.FindLaunched(second);
  EXPECT_FALSE(none.running);
  EXPECT_FALSE(none.may_have_started);
  { std::ofstream(AttemptFile(2, "out")) << ""; }
  none = restarted.FindLaunched(second);
  EXPECT_FALSE(none.running);
  EXPECT_TRUE(none.may_have_started);
  // The other user's attempt is not found as this one's.
  if (owner_.uid != getuid()) {
    AttemptRef as_root{job_, 1, Self(), {}};
    EXPECT_FALSE(restarted.FindLaunched(as_root).running);
  }

  // The restarted launcher takes it up from the record: tracks, signals and ends it.
  AttemptRef adopted{job_, 1, owner_, *found.running};
  restarted.Refresh();
  EXPECT_FALSE(restarted.Check(adopted));
  EXPECT_EQ(restarted.AttemptOf(ref.process.pid), std::optional(std::pair{job_, 1}));
  restarted.Signal(adopted, SIGKILL);
  const auto end = WaitEndWith(restarted, adopted);
  ASSERT_TRUE(end);
  EXPECT_FALSE(end->end.known);
  EXPECT_FALSE(Running(ref.process.pid));
  restarted.Release(adopted);
  Forget(ref);
}

// --- With cgroups only ---

class LauncherCgroupTest : public LauncherTest {};
INSTANTIATE_TEST_SUITE_P(Tracking, LauncherCgroupTest, ::testing::Values(Cgroups::kAuto),
                         [](const auto&) { return "Cgroups"; });

TEST_P(LauncherCgroupTest, HoldsTheAttemptUntilReleased) {
  const AttemptRef ref = Run({"sh", "-c", "echo started; exec sleep 300"});
  WaitForLine(AttemptFile(1, "out"));
  const std::string cgroup = launcher_->CgroupPath(job_, 1);
  const std::string procs = ReadAll(cgroup + "/cgroup.procs");
  EXPECT_NE(procs.find(std::to_string(ref.process.pid) + "\n"), std::string::npos) << procs;
  EXPECT_EQ(launcher_->AttemptOf(ref.process.pid), std::optional(std::pair{job_, 1}));
  launcher_->Signal(ref, SIGKILL);
  ASSERT_TRUE(WaitEnd(ref));
  launcher_->Release(ref);
  Forget(ref);
  // Removal may wait for the last process to be reaped; Refresh() tries again.
  const auto until = std::chrono::steady_clock::now() + kDeadline;
  while (fs::exists(cgroup) && std::chrono::steady_clock::now() < until) {
    launcher_->Refresh();
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  EXPECT_FALSE(fs::exists(cgroup));
}

// --- As another user; the workdir check ---

class LauncherAsUserTest : public LauncherTest {};
INSTANTIATE_TEST_SUITE_P(Tracking, LauncherAsUserTest, ::testing::Values(Cgroups::kOff),
                         [](const auto&) { return "NoCgroups"; });

TEST_P(LauncherAsUserTest, RunsAsTheOwnerInADirectoryOnlyTheOwnerCanEnter) {
  if (owner_.uid == getuid())
    GTEST_SKIP() << "needs root and a user 'nobody' who can run colo-shim";
  const auto end = WaitEnd(Run({"sh", "-c", "id -u; id -g; cat /proc/self/status | grep Cap"}));
  ASSERT_TRUE(end);
  EXPECT_TRUE(end->stdout_tail.starts_with(fmt::format("{}\n{}\n", owner_.uid, owner_.gid)))
      << end->stdout_tail;
  EXPECT_NE(end->stdout_tail.find("CapEff:\t0000000000000000"), std::string::npos)
      << end->stdout_tail;
  struct stat st {};
  ASSERT_EQ(stat(fmt::format("{}/{}", jobs_, job_).c_str(), &st), 0);
  EXPECT_EQ(st.st_uid, owner_.uid);
  EXPECT_EQ(st.st_gid, owner_.gid);
  EXPECT_EQ(st.st_mode & 07777, 0700u);
  ASSERT_EQ(stat(AttemptFile(1, "out").c_str(), &st), 0);
  EXPECT_EQ(st.st_uid, owner_.uid);
  EXPECT_EQ(st.st_mode & 07777, 0600u);
  ASSERT_EQ(stat(AttemptFile(1, "exit").c_str(), &st), 0);
  EXPECT_EQ(st.st_uid, owner_.uid);
}

TEST_P(LauncherAsUserTest, StartChecksTheWorkdirAsTheUser) {
  if (owner_.uid == getuid())
    GTEST_SKIP() << "needs root and a user 'nobody' who can run colo-shim";
  const std::string hidden = dir_ + "/hidden";
  ASSERT_EQ(mkdir(hidden.c_str(), 0700), 0);  // root's
  LaunchSpec spec = Spec({"true"});
  spec.context.workdir = hidden;
  const AttemptRef ref = Started(spec);
  const auto end = WaitEnd(ref);
  ASSERT_TRUE(end);
  EXPECT_EQ(end->end.code, 127);
  EXPECT_EQ(
      end->stderr_tail,
      fmt::format("colo: cannot start the job: chdir {} failed: Permission denied\n", hidden));
}

TEST_P(LauncherAsUserTest, CheckWorkdirLooksAsTheUser) {
  EXPECT_TRUE(launcher_->CheckWorkdir(owner_, "/tmp").ok());
  EXPECT_TRUE(launcher_->CheckWorkdir(owner_, work_).ok());
  const std::string file = dir_ + "/file";
  { std::ofstream(file) << "x"; }
  Status status = launcher_->CheckWorkdir(owner_, file);
  EXPECT_EQ(status.code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(status.message(), fmt::format("workdir {}: Not a directory", file));
  status = launcher_->CheckWorkdir(owner_, dir_ + "/nonexistent");
  EXPECT_EQ(status.message(),
            fmt::format("workdir {}/nonexistent: No such file or directory", dir_));
  if (owner_.uid == getuid()) return;
  // What the user cannot see gets one answer, whether or not it exists.
  const std::string hidden = dir_ + "/hidden";
  ASSERT_EQ(mkdir(hidden.c_str(), 0700), 0);
  ASSERT_EQ(mkdir((hidden + "/exists").c_str(), 0755), 0);
  status = launcher_->CheckWorkdir(owner_, hidden + "/exists");
  EXPECT_EQ(status.code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(status.message(), fmt::format("workdir {}/exists: Permission denied", hidden));
  status = launcher_->CheckWorkdir(owner_, hidden + "/missing");
  EXPECT_EQ(status.message(), fmt::format("workdir {}/missing: Permission denied", hidden));
  struct stat root_home {};
  if (stat("/root", &root_home) == 0 && (root_home.st_mode & 0007) == 0) {
    status = launcher_->CheckWorkdir(owner_, "/root/colo-no-such-dir");
    EXPECT_EQ(status.message(), "workdir /root/colo-no-such-dir: Permission denied");
  }
  // Root may, and is checked as itself.
  EXPECT_TRUE(launcher_->CheckWorkdir(Self(), hidden + "/exists").ok());
}

TEST_P(LauncherAsUserTest, CheckWorkdirRefusesMalformedPathsWithoutThrowing) {
  Status status = launcher_->CheckWorkdir(owner_, "relative/dir");
  EXPECT_EQ(status.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(status.message().find("not an absolute path"), std::string::npos);
  status = launcher_->CheckWorkdir(owner_, "/tmp/" + std::string(300, 'a'));
  EXPECT_EQ(status.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(status.message().find("component of 300 bytes"), std::string::npos) << status.message();
  status = launcher_->CheckWorkdir(owner_, std::string("/tmp/a\0b", 8));
  EXPECT_EQ(status.code(), StatusCode::kInvalidArgument);
  std::string deep;
  while (deep.size() < 5000) deep += "/" + std::string(200, 'd');
  status = launcher_->CheckWorkdir(owner_, deep);
  EXPECT_EQ(status.code(), StatusCode::kInvalidArgument);
  // A symlink loop is the filesystem's answer, not an exception.
  const std::string loop = work_ + "/loop";
  ASSERT_EQ(symlink(loop.c_str(), loop.c_str()), 0);
  status = launcher_->CheckWorkdir(owner_, loop + "/x");
  EXPECT_EQ(status.code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(status.message(), fmt::format("workdir {}/x: Too many levels of symbolic links", loop));
}

}  // namespace
}  // namespace colo
