// The Slurm habits of `colo`: what sbatch's --time, --dependency and --export take, and the
// commands that act on jobs already submitted — cancel (several, or by filters), hold, release,
// requeue (scontrol's) and wait.
#pragma once

#include <CLI/CLI.hpp>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "api/types.h"
#include "cli/client_commands.h"
#include "common/status.h"

namespace colo {

// sbatch's --time: MIN, MIN:SEC, H:MIN:SEC, D-H, D-H:MIN, D-H:MIN:SEC; "UNLIMITED" is 0 (none).
Result<int64_t> ParseTimeLimit(std::string_view text);
// sbatch's --signal: [B:]SIG[@SECONDS] (SIG a name such as USR1 or a number; SECONDS 60 unless
// given). colo signals every process of the job, so B: (the batch shell) changes nothing.
Result<api::JobSignal> ParseSignalOption(std::string_view text);
// sbatch's --dependency: afterok:ID[:ID...],afterany:ID,afternotok:ID (comma-separated).
Result<std::vector<api::Dependency>> ParseDependencyList(std::string_view text);
// sbatch's --array: 0-99, 1,3,5, 0-15:4 (a step), with %N after any of them (at most N at once).
// `max_tasks` bounds the count before the list is made.
Result<api::ArraySpec> ParseArraySpec(std::string_view text,
                                      size_t max_tasks = api::kMaxArrayTasks);
// sbatch's --export: ALL (the default), NONE, or NAME[=value],... (with ALL among them: added to
// the whole environment; without: only those). A bare NAME takes its value from `environment`.
Result<std::vector<std::string>> ApplyExport(std::string_view spec,
                                             const std::vector<std::string>& environment);

// A job as the command line names it: its id, or a task of an array as Slurm writes it,
// ARRAY_TASK (12_3: task 3 of array 12). IsJobRef checks the form; ResolveJobRef finds the task
// among the live jobs, then in the history (newest first, back to the array's id).
bool IsJobRef(std::string_view text);
Result<JobId> ResolveJobRef(const ClientOptions& options, std::string_view text);
// The check CLI11 runs on a job argument, so that a malformed one is a usage error.
CLI::Validator JobRefValidator();

// Every task of the array `array` (its first task's id), live or ended, by id.
Result<std::vector<JobId>> ArrayTasks(const ClientOptions& options, JobId array);
// How the user knows each live job of `jobs`: ARRAY_TASK (12_3) for a task of an array, else its
// id. Jobs that are not live are left out.
std::map<JobId, std::string> LiveJobIdTexts(const ClientOptions& options,
                                            const std::vector<JobId>& jobs);

void AddControlCommands(CLI::App& app, ClientOptions& options);
// Runs cancel, hold, release, requeue or wait; -1 when none of them was given.
int RunControlCommand(CLI::App& app, const ClientOptions& options);

}  // namespace colo
