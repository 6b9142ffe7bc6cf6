// Signals by name, as kill(1) and sbatch's --signal write them: "TERM", "SIGUSR1" or a number.
#pragma once

#include <string>
#include <string_view>

#include "common/status.h"

namespace colo {

// "SIGTERM"; a signal without a name here as its number ("SIG40").
std::string SignalName(int number);
// TERM, SIGTERM, term or 15; an error names what is not a signal.
Result<int> ParseSignal(std::string_view text);

}  // namespace colo
