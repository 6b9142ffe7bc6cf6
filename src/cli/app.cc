#include "cli/app.h"

#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <string_view>

#include "cli/client_commands.h"
#include "cli/estimate_command.h"
#include "cli/job_table.h"
#include "cli/report_command.h"
#include "cli/sim_command.h"
#include "cli/top.h"
#include "docgen/program_docs.h"

namespace colo {
namespace {
constexpr std::string_view kManDescription =
    "colo submits deep-learning training jobs to colod, the daemon that runs them on this "
    "server's GPUs, several to a GPU when their memory and SM activity allow, and shows them: "
    "colo queue (like squeue), colo history (like sacct), colo show (like scontrol show job), "
    "colo logs, colo cancel (like scancel), colo explain, colo gpus and colo top (a live view "
    "like nvtop). colo sim replays job "
    "traces against the same scheduler on simulated GPUs; colo estimate predicts a job's GPU "
    "memory.\n\nEvery command that talks to colod takes --json and prints the API's reply, or "
    "{\"error\": {\"code\": CODE, \"message\": TEXT}} when it fails.";
}  // namespace

int RunColo(int argc, char** argv) {
  CLI::App app{"colo: a collocation-aware GPU job manager for deep-learning training", "colo"};
  app.set_version_flag("--version", "colo 0.1.0");
  SimCommandOptions sim;
  AddSimCommand(app, sim);
  ClientOptions client;
  AddClientCommands(app, client);
  EstimateCommandOptions estimate;
  AddEstimateCommand(app, estimate);
  TopOptions top;
  AddTopCommand(app, top);
  app.footer(StateLegend() +
             "\nExit codes: 0 ok; 1 the job failed, or colod refused or failed; 2 usage error.\n"
             "Socket: --socket, else $COLO_SOCKET, else your personal colod's "
             "($XDG_RUNTIME_DIR/colo/colod.sock) when it runs, else /run/colo/colod.sock.");
  // Man page and completions are generated from this very definition at build time.
  std::string generate;
  app.add_option("--generate", generate)
      ->check(CLI::IsMember(std::vector<std::string>(kDocFormats.begin(), kDocFormats.end())))
      ->group("");
  ReportCommandOptions report;
  AddReportCommand(app, report);
  app.require_subcommand(0, 1);
  try {
    app.parse(argc, argv);
    if (generate.empty() && app.get_subcommands().empty()) throw CLI::RequiredError("A subcommand");
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) return app.exit(e);  // --help, --version
    // With --json a script gets the usage error as JSON too.
    const bool json = std::any_of(argv + 1, argv + argc,
                                  [](const char* a) { return std::string_view(a) == "--json"; });
    if (json) return ReportError(InvalidArgument(e.what()), true, kExitUsage);
    app.exit(e);
    return kExitUsage;
  }
  if (!generate.empty()) {
    fmt::print("{}", GenerateDoc(app, generate, kManDescription));
    return kExitOk;
  }
  if (app.got_subcommand("sim")) return RunSimCommand(sim);
  if (app.got_subcommand("estimate")) return RunEstimateCommand(estimate);
  if (app.got_subcommand("report")) return RunReportCommand(report, client.socket);
  if (app.got_subcommand("top")) return RunTopCommand(top, client.socket);
  const int code = RunClientCommand(app, client);
  return code >= 0 ? code : kExitUsage;
}

}  // namespace colo
