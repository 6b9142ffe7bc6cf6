// A ProcessLauncher that runs nothing: tests start, end and lose "processes" by hand. Its state
// outlives a JobController, as real processes outlive colod, so restarts can be tested.
#pragma once

#include <signal.h>

#include <map>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "daemon/process_launcher.h"

namespace colo {

// Thrown by a fake at a chosen point: the controller stops there as if colod were killed.
struct SimulatedCrash {};

class FakeLauncher final : public ProcessLauncher {
 public:
  struct Process {
    LaunchSpec spec;
    ProcessHandle handle;
    bool running = true;
    std::optional<AttemptEnd> end;  // once it ended
    std::vector<int> signals;
  };
  enum class CrashPoint { kNone, kBeforeStart, kAfterStart };

  Status CheckWorkdir(const Identity&, const std::string& workdir) override {
    if (denied_workdirs.count(workdir))
      return PermissionDenied("workdir " + workdir + ": Permission denied");
    return Status::Ok();
  }

  Result<ProcessHandle> Start(const LaunchSpec& spec) override {
    if (crash == CrashPoint::kBeforeStart) {
      crash = CrashPoint::kNone;
      throw SimulatedCrash{};
    }
    if (!fail_next_start.ok()) {
      Status s = fail_next_start;
      fail_next_start = Status::Ok();
      return s;
    }
    Process p;
    p.spec = spec;
    p.handle = ProcessHandle{next_pid_++, 1000};
    starts[{spec.job, spec.attempt}]++;
    const ProcessHandle handle = p.handle;
    processes_[{spec.job, spec.attempt}] = std::move(p);
    if (crash == CrashPoint::kAfterStart) {
      crash = CrashPoint::kNone;
      throw SimulatedCrash{};
    }
    return handle;
  }

  std::optional<AttemptEnd> Check(const AttemptRef& ref) override {
    auto it = processes_.find({ref.job, ref.attempt});
    if (it == processes_.end()) {
      // Nothing ever ran (or it left no trace): how it ended is unknown.
      return AttemptEnd{ProcessEnd{false, 0, false}, "", ""};
    }
    if (it->second.running) return std::nullopt;
    return it->second.end;
  }

  void Signal(const AttemptRef& ref, int signal) override {
    auto it = processes_.find({ref.job, ref.attempt});
    if (it == processes_.end()) return;
    it->second.signals.push_back(signal);
    if (it->second.running && signal_ends && (signal == SIGKILL || !ignores_sigterm)) {
      End(ref.job, ref.attempt, ProcessEnd{false, signal, true});
    }
  }

  Found FindLaunched(const AttemptRef& ref) override {
    auto it = processes_.find({ref.job, ref.attempt});
    if (it == processes_.end()) return Found{std::nullopt, false};
    if (it->second.running) return Found{it->second.handle, true};
    return Found{std::nullopt, true};
  }

  std::optional<std::pair<JobId, int>> AttemptOf(int pid) override {
    for (const auto& [key, p] : processes_) {
      if (p.running && (p.handle.pid == pid || extra_pids.count({key, pid}))) return key;
    }
    return std::nullopt;
  }

  void Refresh() override { refreshes++; }
  void Release(const AttemptRef& ref) override { released.insert({ref.job, ref.attempt}); }

  AttemptFiles Files(JobId job, int attempt) const override {
    return AttemptFiles{
        "/fake/" + std::to_string(job) + "/attempt-" + std::to_string(attempt) + ".out",
        "/fake/" + std::to_string(job) + "/attempt-" + std::to_string(attempt) + ".err"};
  }

  // --- For tests ---
  void End(JobId job, int attempt, ProcessEnd end, std::string stderr_tail = "",
           std::string stdout_tail = "") {
    Process& p = processes_.at({job, attempt});
    p.running = false;
    p.end = AttemptEnd{end, std::move(stderr_tail), std::move(stdout_tail)};
  }
  void Succeed(JobId job, int attempt) { End(job, attempt, ProcessEnd{true, 0, true}); }
  bool IsRunning(JobId job, int attempt) const {
    auto it = processes_.find({job, attempt});
    return it != processes_.end() && it->second.running;
  }
  const Process* process(JobId job, int attempt) const {
    auto it = processes_.find({job, attempt});
    return it == processes_.end() ? nullptr : &it->second;
  }
  int running_count() const {
    int n = 0;
    for (const auto& [key, p] : processes_) n += p.running;
    return n;
  }

  std::set<std::string> denied_workdirs;
  Status fail_next_start;
  CrashPoint crash = CrashPoint::kNone;
  bool signal_ends = true;       // a signal ends the attempt (as the job's processes die)
  bool ignores_sigterm = false;  // the job ignores SIGTERM: only SIGKILL ends it
  std::map<std::pair<JobId, int>, int> starts;
  std::set<std::pair<JobId, int>> released;
  std::set<std::pair<std::pair<JobId, int>, int>> extra_pids;
  int refreshes = 0;

 private:
  int next_pid_ = 1000;
  std::map<std::pair<JobId, int>, Process> processes_;
};

}  // namespace colo
