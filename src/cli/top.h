// `colo top`: a live view of one colod (GPUs and their memory by job, the queue and why each job
// waits, recent events) in the terminal, refreshed every few seconds, with keys to sort, filter,
// select and cancel. The screen is top_view.h's; this is the terminal and colod around it.
#pragma once

#include <CLI/CLI.hpp>
#include <string>

namespace colo {

struct TopOptions {
  double delay = 1;  // seconds between refreshes
};

void AddTopCommand(CLI::App& app, TopOptions& options);
// `socket`: colod's socket as --socket gave it (empty: the default).
int RunTopCommand(const TopOptions& options, const std::string& socket);

}  // namespace colo
