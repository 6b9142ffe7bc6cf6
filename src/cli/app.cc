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
#include "common/text.h"
#include "docgen/program_docs.h"
#include "formats/slurm_options.h"

namespace colo {
namespace {
// colo(1) beside its options and commands.
ManPage ColoManPage() {
  return ManPage{
      "colo submits deep-learning training jobs to colod, the daemon that runs them on this "
      "server's GPUs, several to a GPU when their memory and SM activity allow, and shows them: "
      "colo queue (like squeue), colo history (like sacct), colo show (like scontrol show job), "
      "colo eff (like seff), colo logs, colo cancel (like scancel), colo explain, colo gpus and "
      "colo top (a live view like nvtop). colo report tells what colod recorded, per user and "
      "per GPU. colo sim replays job traces against the same scheduler on simulated GPUs; colo "
      "estimate predicts a job's GPU memory.\n\n"
      "colo keeps Slurm's habits where it has the same thing: sbatch's options and #SBATCH "
      "lines in job scripts, squeue's and sacct's format codes and names, Slurm's state codes "
      "and words, -o/-e file patterns, ARRAY_TASK ids (12_3) wherever a job id goes. Options "
      "after the job's command or script are the job's own.\n\n"
      "Every command that talks to colod takes --json and prints the API's reply, or "
      "{\"error\": {\"code\": CODE, \"message\": TEXT}} when it fails.",
      {{"colo submit --mem 12GiB -- python train.py --epochs 10",
        "one job, planned at 12 GiB of GPU memory per GPU, on one GPU"},
       {"colo submit job.sh", "a job script; its #SBATCH and #COLO lines say what it needs"},
       {"colo submit --gpus 2 --time 4:00:00 -o 'logs/%x-%j.out' -- torchrun train.py",
        "two GPUs, a time limit, and its output in a file of yours"},
       {"colo submit --array 0-99%8 --mem 6GiB -- python sweep.py",
        "an array of 100 tasks, at most 8 running at once (COLO_ARRAY_TASK_ID tells each which)"},
       {"colo queue", "the jobs waiting and running, and why each waits"},
       {"colo logs -f 12", "follow job 12's output until it ends; exits like the job"},
       {"colo explain 13", "the gate that keeps job 13 waiting, on each GPU"},
       {"colo history -S 1d -s F,TO --format JobID,JobName,State,Elapsed",
        "the jobs that failed or timed out in the last day"},
       {"colo eff 12", "what job 12 planned against what it used, and the --mem to ask next"},
       {"colo cancel --state PD", "every job of yours still waiting"},
       {"colo report --since 2h -o run.html", "the last two hours, per user and per GPU"},
       {"colo sim --trace thesis-90 --server a100x4 --compare thesis --report r.html",
        "every policy on the thesis' trace, simulated"}},
      {{"COLO_SOCKET", "colod's socket, when --socket is not given"},
       {"XDG_RUNTIME_DIR",
        "where a personal colod's socket is looked for ($XDG_RUNTIME_DIR/colo/colod.sock)"},
       {"PATH", "the job's PATH (with --export ALL) finds its command"},
       {"CONDA_EXE", "the conda that runs a CARMA .rad task's environment, else conda on PATH"}},
      {{"/run/colo/colod.sock", "the system colod's socket"},
       {"$XDG_RUNTIME_DIR/colo/colod.sock", "a personal colod's socket"},
       {"/var/lib/colo/jobs/N/attempt-K.out, attempt-K.err",
        "job N's output, attempt by attempt (a personal colod's under "
        "~/.local/state/colo/jobs); colo logs reads them"},
       {"PREFIX/share/colo",
        "colo's data: GPU calibrations, GPUMemNet's weights, the Python package"}},
      {{"0", "it worked; for colo wait and colo logs, the job completed"},
       {"1",
        "the job failed (or was cancelled, timed out, was lost), or colod refused the request or "
        "could not be reached; the message says which"},
       {"2", "a usage error: an unknown option, a bad value, no command"}},
      "colod(8), sbatch(1), squeue(1), sacct(1), seff(1). The guides: docs/ in colo's source "
      "(user-guide.md, slurm-users.md, job-environment.md, logs.md, faq.md)."};
}

// sbatch's rule: colo's options end at the job's script or command, and what follows is the
// job's own. A `--` goes before the first word after `submit` that is neither an option nor an
// option's value, so that `colo submit job.sh --epochs 3` and `colo submit python train.py -b 64`
// give those words to the job.
std::vector<std::string> SeparateJobCommand(const CLI::App& app, std::vector<std::string> args) {
  size_t i = 0;
  while (i < args.size() && args[i] != "submit") {
    if (!args[i].starts_with("-")) return args;  // another command
    i += args[i] == "--socket" ? 2 : 1;
  }
  const CLI::App* submit = app.get_subcommand("submit");
  for (++i; i < args.size() && submit; ++i) {
    const std::string& word = args[i];
    if (word == "--") break;
    if (!word.starts_with("-") || word == "-") {
      args.insert(args.begin() + static_cast<std::ptrdiff_t>(i), "--");
      break;
    }
    if (word.find('=') != std::string::npos) continue;
    const bool attached = !word.starts_with("--") && word.size() > 2;  // -t10
    const CLI::Option* option = submit->get_option_no_throw(attached ? word.substr(0, 2) : word);
    if (!option) break;  // unknown: the parse says so
    if (!attached && option->get_expected_max() > 0) ++i;
  }
  return args;
}

// CLI11's "The following argument was not expected: --partition", as colo says it: the option,
// what Slurm users mean by it, and where a job's own options go.
std::string UnexpectedArguments(const CLI::App& app, const std::vector<std::string>& extras) {
  const CLI::App* command = nullptr;
  for (const CLI::App* sub : app.get_subcommands()) command = sub;
  const std::string where = command ? "colo " + command->get_name() : "colo";
  // The first option among them (the words after it may be its value), else the first word.
  const auto option = std::find_if(extras.begin(), extras.end(), [](const std::string& extra) {
    return extra.starts_with("-") && extra != "-";
  });
  std::string out;
  if (option == extras.end()) {
    out = fmt::format("{}: unexpected argument '{}'", where,
                      Printable(extras.empty() ? "" : extras.front()));
  } else {
    const std::string name = option->substr(0, option->find('='));
    out = fmt::format("{}: unknown option {}", where, Printable(name));
    if (const std::string_view hint = SlurmOptionHint(name); !hint.empty())
      out += fmt::format(" (Slurm's {}: {})", Printable(name), hint);
  }
  if (command && command->get_name() == "submit")
    out +=
        "\n  a job's own options go after its command or script; -- marks where it starts: "
        "colo submit [options] -- CMD ARGS";
  return out + fmt::format("\n  {} --help lists its options", where);
}

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
  std::vector<std::string> args = SeparateJobCommand(app, {argv + 1, argv + argc});
  try {
    std::vector<std::string> reversed(args.rbegin(), args.rend());  // as CLI11 takes them
    app.parse(reversed);
    if (generate.empty() && app.get_subcommands().empty()) throw CLI::RequiredError("A subcommand");
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) return app.exit(e);  // --help, --version
    // With --json (colo's, before the job's command) a script gets the usage error as JSON too.
    const auto job_command = std::find(args.begin(), args.end(), "--");
    const bool json = std::find(args.begin(), job_command, "--json") != job_command;
    std::string message = e.what();
    if (dynamic_cast<const CLI::ExtrasError*>(&e))
      message = UnexpectedArguments(app, app.remaining(true));
    if (json) return ReportError(InvalidArgument(message), true, kExitUsage);
    if (dynamic_cast<const CLI::ExtrasError*>(&e)) {
      fmt::print(stderr, "{}\n", message);
      return kExitUsage;
    }
    app.exit(e);
    return kExitUsage;
  }
  if (!generate.empty()) {
    fmt::print("{}", GenerateDoc(app, generate, ColoManPage()));
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
