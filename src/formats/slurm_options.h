// Slurm's option names as colo meets them: in #SBATCH lines of a job script and typed out of
// habit on colo's command line. What colo has is read under Slurm's names (-J, --gres=gpu:N,
// -G); what it has not is named back with what to do instead.
#pragma once

#include <string>
#include <string_view>

#include "common/status.h"

namespace colo {

// Slurm's GPU requests as a count of GPUs: --gres=gpu, gpu:N, gpu:TYPE:N (also several GRES,
// comma-separated, of which one is gpu), --gpus=N or TYPE:N. A GPU type cannot be chosen on a
// colo server: `type` receives it (empty when none was named), for a warning.
Result<int> ParseGpuGres(std::string_view text, std::string* type = nullptr);
Result<int> ParseGpuCount(std::string_view text, std::string* type = nullptr);

// What colo says of a Slurm option it does not have, by any of its names ("-p", "--partition"):
// why there is nothing like it, or what to use instead. Empty for a name Slurm does not have.
std::string_view SlurmOptionHint(std::string_view name);

// Whether a Slurm option takes a value when written apart from it ("-p gpu"), so that the next
// word is its value and not an option or a command. Slurm's flags: --exclusive, --requeue, ...
bool SlurmOptionTakesValue(std::string_view name);

}  // namespace colo
