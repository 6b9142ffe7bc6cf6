// The `colo` commands that show what colod knows, as tables a Slurm user recognises: queue,
// history, show, explain, share and gpus.
#pragma once

#include <CLI/CLI.hpp>

#include "cli/client_commands.h"

namespace colo {

// Runs queue, history, show, explain, share or gpus; -1 when none of them was given.
int RunViewCommand(CLI::App& app, const ClientOptions& options);

}  // namespace colo
