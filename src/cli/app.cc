#include "cli/app.h"

#include <CLI/CLI.hpp>

#include "cli/sim_command.h"

namespace colo {

int RunColo(int argc, char** argv) {
  CLI::App app{"colo: a collocation-aware GPU job manager for deep-learning training"};
  app.require_subcommand(1);
  app.set_version_flag("--version", "colo 0.1.0");
  SimCommandOptions sim;
  AddSimCommand(app, sim);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  if (app.got_subcommand("sim")) return RunSimCommand(sim);
  return 2;
}

}  // namespace colo
