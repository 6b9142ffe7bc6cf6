// Whether a conda environment exists, asked of conda itself (`conda env list --json`) before a
// CARMA task file is submitted: a misspelt environment is then a clear error at submit time,
// not a job that fails once it finally gets its GPUs.
#pragma once

#include <string>
#include <vector>

#include "common/status.h"

namespace colo {

// `listing` is what `conda env list --json` printed (warnings around the JSON object are
// skipped); `environment` a name (`tf`: an environment directory of that name, `base`: conda's
// own) or a path. OK when it is listed; NotFound naming it and the listed ones when not;
// InvalidArgument when the listing is not conda's JSON.
Status FindCondaEnvironment(const std::string& listing, const std::string& environment);

// Runs `conda env list --json` (`conda`: the program, as found on PATH or in CONDA_EXE) with
// `env` as its environment, as the calling user, and checks `environment` is among them.
Status CheckCondaEnvironment(const std::string& conda, const std::string& environment,
                             const std::vector<std::string>& env);

}  // namespace colo
