// `colo logs`: a job's output as its attempts wrote it, or (-f) as they write it.
#pragma once

#include "cli/client_commands.h"

namespace colo {

// Prints the output the options name (with -f, as it is written until the job ends); exits 1
// when the job has ended other than well.
int RunLogsCommand(const ClientOptions& options);

}  // namespace colo
