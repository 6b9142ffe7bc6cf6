// `colo submit`: a job file or a command and sbatch's options, made into the request colod stores.
#pragma once

#include <string>
#include <vector>

#include "api/types.h"
#include "cli/client_commands.h"
#include "common/status.h"

namespace colo {

// What `colo submit` sends for these options: the documented forms `-- CMD ARGS`, a job script
// (`#COLO` lines; run with its interpreter when it is not executable) and a CARMA `.rad` task
// (inside its conda environment). `environment` is the submitter's, NAME=value.
Result<api::SubmitRequest> BuildSubmitRequest(const ClientOptions& options,
                                              const std::vector<std::string>& environment);
// Submits the job the options name and prints its id.
int RunSubmitCommand(const ClientOptions& options);

}  // namespace colo
