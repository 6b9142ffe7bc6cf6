// The `colo` commands that talk to colod: their options, their command line and the running of
// the one given. Each family of commands has its own file: submit (submit_command.h), logs
// (logs_command.h), queue, history, show, explain, share and gpus (view_commands.h), cancel, hold,
// release, requeue and wait (control_commands.h), eff (eff_command.h). Each prints a table a Slurm
// user recognises (everything that came from a job or a user escaped for the terminal), or the
// API's JSON with --json.
#pragma once

#include <CLI/CLI.hpp>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "api/client.h"
#include "api/types.h"
#include "common/status.h"

namespace colo {

struct ClientOptions {
  std::string socket;
  bool json = false;
  // submit
  int gpus = 0;           // 0: from the file's directives, else 1
  std::string gres;       // Slurm's --gres=gpu:N, for --gpus
  bool parsable = false;  // sbatch's --parsable: only the job's id
  std::string memory, share, name, workdir, estimate_from, estimate_gpu;
  int threads = 0, batch = 0;
  double smact = -1;  // expected SM activity alone, 0..1; -1: unknown
  std::vector<std::string> command;
  // submit: sbatch's --time, --dependency, --after, --hold, --priority, --nice, --export
  std::string time_limit, dependency, after, export_env, array;
  std::string output, error;  // sbatch's -o/-e file patterns
  std::string signal;         // sbatch's --signal, for a job submitted --requeue
  bool hold = false, requeue = false;
  int priority = 0, nice = 0;
  // cancel, hold, release, requeue, wait (cancel also filters by user, name and state): as
  // typed (job_refs: ID or Slurm's ARRAY_TASK), then resolved to ids (jobs)
  std::vector<std::string> job_refs;
  std::vector<long long> jobs;
  // Of jobs, those named as ARRAY_TASK: an array's id named so is its first task alone.
  std::set<long long> named_as_task;
  std::string state_filter;
  // show, logs, explain: as typed (job_ref), then resolved (job)
  std::string job_ref;
  long long job = 0;
  bool follow = false, stderr_log = false, all = false;
  bool both_logs = false;  // logs: stdout and stderr, each to its own stream
  int attempt = 0;         // logs: this attempt's output; 0: the latest
  int limit = 50;
  std::string user;
  // history: sacct's filters (-S/-E times as colo report takes them; comma-separated lists)
  std::string since, until, jobs_filter;
  // queue, history: squeue-style columns (cli/job_table.h)
  std::string format;
  bool no_header = false;
};

void AddClientCommands(CLI::App& app, ClientOptions& options);
// Runs the subcommand that was parsed; returns the exit code (kExitOk, kExitError, kExitUsage),
// or -1 if none of ours was given.
int RunClientCommand(CLI::App& app, const ClientOptions& options);

// What --json does for every command that asks colod.
constexpr const char* kJsonHelp =
    "print the API's reply as JSON (sizes in bytes, times in seconds since the epoch), and an "
    "error as {\"error\": {\"code\", \"message\"}}";

// colo's exit codes, the same for every command.
constexpr int kExitOk = 0;
constexpr int kExitError = 1;  // the job failed, or colod (or the system) refused or failed
constexpr int kExitUsage = 2;  // the command line was wrong

// A connection to colod: the socket of --socket, else the default one.
inline Result<api::Client> Connect(const ClientOptions& options) {
  return api::Client::Connect(options.socket.empty() ? api::DefaultSocketPath() : options.socket);
}

// One request to colod and its typed reply.
template <typename Req>
Result<typename api::ReplyOf<Req>::type> Call(const ClientOptions& options, const Req& request) {
  auto client = Connect(options);
  if (!client.ok()) return client.status();
  return client->Call(request);
}

// Every live job (only `user`'s when named), asked for a page at a time.
inline Result<api::QueueReply> CallQueue(const ClientOptions& options, std::string user = "") {
  auto client = Connect(options);
  if (!client.ok()) return client.status();
  api::QueueRequest request;
  request.user = std::move(user);
  return client->WholeQueue(std::move(request));
}

// Reports an error: with `json`, {"error": {"code": CODE, "message": ...}} on stdout (CODE as
// api::ErrorCode names it), else "colo: MESSAGE" on stderr. Returns `exit_code`.
int ReportError(const Status& error, bool json, int exit_code = kExitError);
// ReportError as the command's options ask (--json).
inline int Fail(const ClientOptions& options, const Status& error, int exit_code = kExitError) {
  return ReportError(error, options.json, exit_code);
}

}  // namespace colo
