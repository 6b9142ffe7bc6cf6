// Who runs a job's attempts. colod's own processes (ProcessRunner, over the ProcessLauncher) and
// the runs an outside engine starts on this node (TenantRunner: Slurm's, whose steps Slurm starts
// and which take the GPUs colod chose) are its two implementations; the job controller speaks only
// to this interface, so another engine (Kubernetes, say) is one more implementation
// (docs/architecture.md, "A new cluster engine").
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "common/status.h"
#include "daemon/attempt_env.h"
#include "daemon/job.h"
#include "daemon/process_launcher.h"

namespace colo {

class AttemptRunner {
 public:
  virtual ~AttemptRunner() = default;

  // Starts an attempt the scheduler placed and whose intent is stored: its processes with `env`,
  // or nothing for an engine's run (its steps ask for their GPUs). An error is the attempt's
  // failure before the job's command could run.
  virtual Result<std::optional<ProcessHandle>> Start(const Job& job, const Attempt& attempt,
                                                     const AttemptEnv& env) = 0;
  // nullopt while the attempt runs. An engine's run is never polled: its end is reported.
  virtual std::optional<AttemptEnd> Check(const Job& job) = 0;
  // Sends `signal` to every process of the attempt; an engine's are the engine's to stop.
  virtual void Signal(const Job& job, int signal) = 0;
  // After the attempt's end was recorded: what was kept for it goes.
  virtual void Release(const Job& job) = 0;

  // An attempt stored as launching whose start was not stored (colod stopped between the two).
  struct Recovered {
    std::optional<ProcessHandle> running;  // it runs: taken back
    bool may_have_started = false;         // else: it may have run (Check says how it ended)
  };                                       // neither: it certainly never started
  virtual Recovered Recover(const Job& job) = 0;

  // Whether colod may act on the job itself (`what`: cancel, hold, release, requeue); an engine's
  // run is acted on through the engine, and the error says how.
  virtual Status MayControl(const Job& job, std::string_view what) const = 0;
  // Whether colod stops the attempt at the job's time limit (an engine keeps its own).
  virtual bool enforces_time_limit() const = 0;
  // Whether an attempt that crashed out of memory runs again through the engine (which picks
  // where) rather than from colod's recovery queue.
  virtual bool reruns_through_engine() const = 0;
  // What the attempt is, for its events: "pid 4242", "Slurm job 17".
  virtual std::string Describe(const Job& job, const Attempt& attempt) const = 0;
};

// colod's own processes: colo-shim as the job's user (ProcessLauncher).
class ProcessRunner final : public AttemptRunner {
 public:
  explicit ProcessRunner(ProcessLauncher& launcher) : launcher_(launcher) {}

  Result<std::optional<ProcessHandle>> Start(const Job& job, const Attempt& attempt,
                                             const AttemptEnv& env) override;
  std::optional<AttemptEnd> Check(const Job& job) override;
  void Signal(const Job& job, int signal) override;
  void Release(const Job& job) override;
  Recovered Recover(const Job& job) override;
  Status MayControl(const Job&, std::string_view) const override { return Status::Ok(); }
  bool enforces_time_limit() const override { return true; }
  bool reruns_through_engine() const override { return false; }
  std::string Describe(const Job& job, const Attempt& attempt) const override;

  ProcessLauncher& launcher() { return launcher_; }

 private:
  ProcessLauncher& launcher_;
};

// The attempt a record names, for the launcher.
AttemptRef RefOf(const Job& job);

}  // namespace colo
