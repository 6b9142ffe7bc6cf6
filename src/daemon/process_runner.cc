// ProcessRunner: an attempt as colod's own process tree, started and watched through the
// ProcessLauncher (attempt_runner.h).
#include <fmt/format.h>

#include "daemon/attempt_runner.h"

namespace colo {

AttemptRef RefOf(const Job& job) {
  AttemptRef ref;
  ref.job = job.id();
  ref.owner = job.owner;
  if (const Attempt* a = job.current()) {
    ref.attempt = a->number;
    ref.process = ProcessHandle{a->pid, a->pid_start};
  }
  return ref;
}

Result<std::optional<ProcessHandle>> ProcessRunner::Start(const Job& job, const Attempt& attempt,
                                                          const AttemptEnv& env) {
  LaunchSpec spec;
  spec.job = job.id();
  spec.attempt = attempt.number;
  spec.owner = job.owner;
  spec.argv = job.spec.command;
  spec.context = job.context;
  spec.output_file = OutputFileOf(job, job.output_pattern);
  spec.error_file = OutputFileOf(job, job.error_pattern);
  // The first attempt starts the files afresh; a retry's output follows its predecessor's.
  spec.append_output = attempt.number > 1;
  spec.env = ProcessEnvironment(job, env);
  auto started = launcher_.Start(spec);
  if (!started.ok()) return started.status();
  return std::optional<ProcessHandle>(*started);
}

std::optional<AttemptEnd> ProcessRunner::Check(const Job& job) {
  return launcher_.Check(RefOf(job));
}

void ProcessRunner::Signal(const Job& job, int signal) {
  launcher_.Signal(RefOf(job), signal);
}

void ProcessRunner::Release(const Job& job) {
  launcher_.Release(RefOf(job));
}

AttemptRunner::Recovered ProcessRunner::Recover(const Job& job) {
  const ProcessLauncher::Found found = launcher_.FindLaunched(RefOf(job));
  return Recovered{found.running, found.may_have_started};
}

std::string ProcessRunner::Describe(const Job&, const Attempt& attempt) const {
  return fmt::format("pid {}", attempt.pid);
}

}  // namespace colo
