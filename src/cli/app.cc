#include "cli/app.h"

#include <CLI/CLI.hpp>

#include "cli/client_commands.h"
#include "cli/estimate_command.h"
#include "cli/report_command.h"
#include "cli/sim_command.h"

namespace colo {

int RunColo(int argc, char** argv) {
  CLI::App app{"colo: a collocation-aware GPU job manager for deep-learning training"};
  app.require_subcommand(1);
  app.set_version_flag("--version", "colo 0.1.0");
  SimCommandOptions sim;
  AddSimCommand(app, sim);
  ClientOptions client;
  AddClientCommands(app, client);
  EstimateCommandOptions estimate;
  AddEstimateCommand(app, estimate);
  ReportCommandOptions report;
  AddReportCommand(app, report);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  if (app.got_subcommand("sim")) return RunSimCommand(sim);
  if (app.got_subcommand("estimate")) return RunEstimateCommand(estimate);
  if (app.got_subcommand("report")) return RunReportCommand(report, client.socket);
  const int code = RunClientCommand(app, client);
  return code >= 0 ? code : 2;
}

}  // namespace colo
