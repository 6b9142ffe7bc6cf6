// The signals a job may be sent before it is stopped (submit --signal). colod sends it to every
// process of the attempt, colo-shim included: the shim ignores exactly these and gives its job
// their defaults back. Header-only, for the shim links no library.
#pragma once

#include <signal.h>

#include <algorithm>
#include <iterator>

namespace colo {

inline constexpr int kJobSignals[] = {SIGHUP,  SIGINT,  SIGQUIT, SIGUSR1, SIGUSR2,
                                      SIGALRM, SIGTERM, SIGURG,  SIGWINCH};

inline bool IsJobSignal(int number) {
  return std::find(std::begin(kJobSignals), std::end(kJobSignals), number) != std::end(kJobSignals);
}

}  // namespace colo
