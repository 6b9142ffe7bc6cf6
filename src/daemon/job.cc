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

}  // namespace colo
