// Names of a job record's enums, as logs and the stored record write them.
#include "daemon/job.h"

#include <unistd.h>

#include <algorithm>

#include "api/output_pattern.h"

namespace colo {
namespace {

std::string ShortHostName() {
  char host[256] = {};
  if (gethostname(host, sizeof host - 1) != 0) return "localhost";
  std::string name(host);
  return name.substr(0, name.find('.'));
}

}  // namespace

std::string_view ToString(Attempt::Phase phase) {
  switch (phase) {
    case Attempt::Phase::kLaunching:
      return "launching";
    case Attempt::Phase::kRunning:
      return "running";
    case Attempt::Phase::kEnded:
      return "ended";
  }
  return "?";
}

int OutOfMemoryAttempts(const Job& job) {
  return static_cast<int>(
      std::count_if(job.attempts.begin(), job.attempts.end(),
                    [](const Attempt& a) { return a.exit == ExitKind::kOutOfMemory; }));
}

int Restarts(const Job& job) {
  return static_cast<int>(
      std::count_if(job.attempts.begin(), job.attempts.end(),
                    [](const Attempt& a) { return a.exit && *a.exit != ExitKind::kOutOfMemory; }));
}

api::JobSignal SignalOf(const Job& job) {
  return job.context.signal.value_or(api::JobSignal{});
}

RunEvidence EvidenceOf(const Attempt& attempt) {
  return RunEvidence{attempt.exit, attempt.over_plan, attempt.peak, attempt.solo_smact};
}

void CollectRuns(const Job& job, size_t limit, ModelRuns& runs) {
  if (!RunsCount(job.state)) return;
  for (auto a = job.attempts.rbegin(); a != job.attempts.rend(); ++a)
    AddRun(EvidenceOf(*a), limit, runs);
}

std::string OutputFileOf(const Job& job, std::string_view pattern) {
  if (pattern.empty()) return "";
  static const std::string host = ShortHostName();
  api::OutputNames names;
  names.job = job.id();
  if (job.array) {
    names.array_job = job.array->job;
    names.array_task = job.array->task;
  }
  names.user = job.owner.user;
  names.name = job.spec.name;
  names.host = host;
  std::string file = api::ExpandOutputPattern(pattern, names);
  if (!file.starts_with('/'))
    file = job.context.workdir + (job.context.workdir.ends_with('/') ? "" : "/") + file;
  return file;
}

}  // namespace colo
