// The `colo` commands that talk to colod: submit, queue, show, logs, cancel, gpus, explain,
// history. Each prints a table a SLURM user recognises, or JSON with --json.
#pragma once

#include <CLI/CLI.hpp>
#include <string>
#include <vector>

namespace colo {

struct ClientOptions {
  std::string socket;
  bool json = false;
  // submit
  int gpus = 0;  // 0: from the file's directives, else 1
  std::string memory, share, name, workdir, estimate_from, estimate_gpu;
  int threads = 0, batch = 0;
  double smact = -1;  // expected SM activity alone, 0..1; -1: unknown
  std::vector<std::string> command;
  // show, logs, cancel, explain
  long long job = 0;
  bool follow = false, stderr_log = false, all = false;
  int limit = 50;
  std::string user;
};

void AddClientCommands(CLI::App& app, ClientOptions& options);
// Runs the subcommand that was parsed; returns the exit code, or -1 if none of ours was given.
int RunClientCommand(CLI::App& app, const ClientOptions& options);

// `#COLO --gpus=2 --mem=8GiB` lines of a job script, as colo submit reads them.
struct ScriptDirectives {
  int gpus = 0;
  std::string memory, share, name;
  int threads = 0;
};
ScriptDirectives ParseDirectives(const std::string& script_text, std::string* error);

}  // namespace colo
