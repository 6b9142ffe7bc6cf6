// Names of a job record's enums, as logs and the stored record write them.
#include "daemon/job.h"

namespace colo {

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

void CollectRuns(const Job& job, size_t limit, ModelRuns& runs) {
  if (!RunsCount(job.state)) return;
  for (auto a = job.attempts.rbegin(); a != job.attempts.rend(); ++a) {
    const bool measured =
        a->peak > Bytes(0) &&
        (a->exit == ExitKind::kSuccess || (a->over_plan && a->exit != ExitKind::kOutOfMemory));
    if (measured && runs.peaks.size() < limit) runs.peaks.push_back(a->peak);
    if (a->solo_smact >= 0 && runs.solo_smact.size() < limit)
      runs.solo_smact.push_back(a->solo_smact);
  }
}

}  // namespace colo
