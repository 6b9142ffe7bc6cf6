#include "cli/client_commands.h"

#include <fmt/format.h>

#include <nlohmann/json.hpp>
#include <string>
#include <utility>

#include "api/output_pattern.h"
#include "cli/control_commands.h"
#include "cli/eff_command.h"
#include "cli/job_table.h"
#include "cli/logs_command.h"
#include "cli/submit_command.h"
#include "cli/view_commands.h"
#include "common/text.h"
#include "common/units.h"
#include "core/model.h"
#include "formats/slurm_options.h"

namespace colo {

void AddClientCommands(CLI::App& app, ClientOptions& o) {
  app.add_option("--socket", o.socket,
                 "colod's socket (default: $COLO_SOCKET, then a personal colod's, then the "
                 "system's)");
  auto* submit = app.add_subcommand(
      "submit",
      "submit a job (like sbatch): colo submit [options] -- CMD ARGS, a job script (job.sh "
      "[ARGS]) or a "
      "CARMA task (task.rad)");
  // Checked while parsing, so that a bad value is a usage error (exit 2) like any other. CLI11
  // names the option itself.
  auto parses = [](auto parse) {
    return CLI::Validator(
        [parse](std::string& text) {
          auto parsed = parse(text);
          if (parsed.ok()) return std::string();
          std::string message = parsed.status().message();
          if (message.starts_with("--") && message.find(": ") != std::string::npos)
            message.erase(0, message.find(": ") + 2);
          return message;
        },
        "");
  };
  auto* gpus_option =
      submit->add_option("-G,--gpus", o.gpus, "GPUs the job needs, all on one server (default 1)")
          ->check(CLI::Range(1, 64));
  submit
      ->add_option("--gres", o.gres,
                   "Slurm's form of --gpus: gpu:N (gpu:TYPE:N: the type is not chosen here)")
      ->check(parses([](const std::string& t) { return ParseGpuGres(t); }))
      ->excludes(gpus_option);
  submit->add_option("--mem", o.memory, "peak GPU memory per GPU, e.g. 12GiB")
      ->check(parses([](const std::string& t) { return ParseBytes(t); }));
  submit->add_option("--share", o.share, "mps, plain or exclusive (default: the GPU's mode)")
      ->check(parses([](const std::string& t) { return ParseSharingPreference(t); }));
  submit->add_option("--threads", o.threads, "MPS active-thread percentage (default: from --smact)")
      ->check(CLI::Range(1, 100));
  submit
      ->add_option("--smact", o.smact,
                   "the job's SM activity when alone, 0..1 (e.g. from a solo run): sets its MPS "
                   "thread share")
      ->check(CLI::Range(0.0, 1.0));
  submit->add_option("-J,--name,--job-name", o.name, "job name (default: the command)");
  submit->add_option("-D,--chdir,--workdir", o.workdir,
                     "working directory (default: the current one)");
  submit
      ->add_option("-t,--time", o.time_limit,
                   "time limit: MIN, MIN:SEC, H:MIN:SEC or D-H[:MIN[:SEC]]; then SIGTERM, "
                   "SIGKILL after the grace, state timeout")
      ->check(parses([](const std::string& t) { return ParseTimeLimit(t); }));
  submit
      ->add_option("-d,--dependency", o.dependency,
                   "start after other jobs end: afterok:ID[:ID],afterany:ID,afternotok:ID")
      ->check(parses([](const std::string& t) { return ParseDependencyList(t); }));
  submit->add_option("--after", o.after, "ID[:ID...]: start after these jobs end (afterany)")
      ->check(parses([](const std::string& t) { return ParseDependencyList("afterany:" + t); }));
  submit->add_flag("-H,--hold", o.hold, "submit held: it starts after colo release");
  submit->add_flag("--requeue", o.requeue,
                   "preemptible: it may be stopped for a user under their share (after its "
                   "--signal) and run again as its next attempt, with COLO_RESTART_COUNT");
  submit
      ->add_option("--signal", o.signal,
                   "[B:]SIG[@SECONDS]: what a --requeue job gets before it is stopped, and how "
                   "long before (default TERM@60); SIGKILL follows")
      ->check(parses([](const std::string& t) { return ParseSignalOption(t); }));
  submit
      ->add_option("--priority", o.priority,
                   "order among your own waiting jobs (higher first; never before other "
                   "users' jobs)")
      ->check(CLI::Range(-10000, 10000));
  submit->add_option("--nice", o.nice, "lowers --priority by this much")
      ->check(CLI::Range(-10000, 10000));
  submit
      ->add_option("-a,--array", o.array,
                   "a job array: 0-99, 1,3,5 or 0-15:4, with %N to run at most N at once; "
                   "each task gets COLO_ARRAY_JOB_ID and COLO_ARRAY_TASK_ID; %A and %a in "
                   "--name become them")
      ->check(parses([](const std::string& t) { return ParseArraySpec(t); }));
  const auto output_pattern = [](const std::string& t) -> Result<bool> {
    COLO_RETURN_IF_ERROR(api::CheckOutputPattern(t));
    return true;
  };
  submit
      ->add_option("-o,--output", o.output,
                   "also write the job's stdout (and its stderr, without -e) to this file: "
                   "%j job id, %A array id, %a task id, %u user, %x name, %N host, %% a "
                   "percent sign (relative to --chdir)")
      ->check(parses(output_pattern));
  submit->add_option("-e,--error", o.error, "also write the job's stderr to this file (as -o)")
      ->check(parses(output_pattern));
  submit
      ->add_option("--export", o.export_env,
                   "environment for the job: ALL (default), NONE, or NAME[=value],... (with "
                   "ALL: added to yours)")
      ->check(parses([](const std::string& t) { return ApplyExport(t, {}); }));
  submit->add_option("--estimate-from", o.estimate_from, "model summary to estimate memory from");
  submit->add_option("--batch", o.batch, "batch size, with --estimate-from")
      ->check(CLI::Range(1, 1 << 20));
  submit->add_option("--gpu-model", o.estimate_gpu,
                     "GPU model whose calibration the estimate uses (default: the first shipped)");
  submit->add_option("command", o.command, "the command, or a job file")->expected(-1);
  submit->add_flag("--parsable", o.parsable, "print only the job's id (an array's: its id)");
  submit->footer(
      "Words after the job's command or script are its own, as with sbatch; -- marks where a "
      "command starts. A job script's #SBATCH lines are read for -J, -G/--gpus, --gres, -t, -o, "
      "-e, -a and -d (every other option is named in a warning), its #COLO lines for colo's "
      "options (--mem, --share, ...); the command line wins over both, #COLO over #SBATCH. The "
      "command's first word must be a file you may run (a path from the working directory) or a "
      "command on the PATH the job gets.");
  submit->add_flag("--json", o.json, kJsonHelp);
  auto* queue = app.add_subcommand("queue", "jobs waiting and running (like squeue)");
  queue->add_option("-u,--user", o.user, "only this user's jobs");
  queue->add_flag("--json", o.json, kJsonHelp);
  queue->footer(StateLegend() + "\n" + FormatCodesHelp());
  for (auto [name, help] :
       {std::pair{"show", "everything about one of your jobs"},
        std::pair{"explain",
                  "why a job waits: its place in the queue and why (fair share, limits), the "
                  "GPUs kept for the queue's head, the gate that stopped it on each GPU"}}) {
    auto* sub = app.add_subcommand(name, help);
    sub->add_option("job", o.job_ref, "job id (ARRAY_TASK for a task of an array)")
        ->required()
        ->check(JobRefValidator());
    sub->add_flag("--json", o.json, kJsonHelp);
  }
  auto* logs = app.add_subcommand("logs", "a job's output (your own jobs)");
  logs->add_option("job", o.job_ref, "job id (ARRAY_TASK for a task of an array)")
      ->required()
      ->check(JobRefValidator());
  logs->add_flag("-f,--follow", o.follow, "keep printing while the job runs");
  auto* logs_stderr = logs->add_flag("--stderr", o.stderr_log, "show stderr instead of stdout");
  logs->add_flag("--both", o.both_logs, "show stdout and stderr (each on colo's own)")
      ->excludes(logs_stderr);
  logs->add_option("--attempt", o.attempt,
                   "this attempt's output (default: the latest; with -f: from this one on)")
      ->check(CLI::Range(1, 1 << 30));
  logs->add_flag("--json", o.json, "the files' paths and the job's state, as JSON");
  logs->footer(
      "With -f, colo logs waits for a job that has not started, prints every attempt's output "
      "(an out-of-memory retry's after a line '==> job N attempt K <==' on stderr) and exits "
      "like the job: 0 when it succeeded, 1 when it failed or was cancelled.");
  auto* gpus = app.add_subcommand("gpus", "live per-GPU memory, SMACT, power and jobs");
  gpus->add_flag("--json", o.json, kJsonHelp);
  auto* share = app.add_subcommand(
      "share", "every user's share of the server, recent usage and limits (like sshare)");
  share->add_flag("--json", o.json, kJsonHelp);
  share->footer(
      "USAGE is GPU-hours, each GPU weighted by the part of its memory the job planned, halving "
      "every half-life (colod's fairness.half_life); FACTOR is 2^-(USAGE% / SHARE%): a user who "
      "has had less than their share has a factor above 0.5 and their jobs go first.");
  auto* history = app.add_subcommand("history", "jobs that ended (like sacct)");
  history->add_option("--limit", o.limit, "how many")
      ->capture_default_str()
      ->check(CLI::Range(1, 10000000));
  history->add_flag("-a,--all,--allusers", o.all,
                    "every user's jobs (details of others' stay private)");
  history->add_option("-S,--starttime", o.since,
                      "jobs that ended at or after: a duration ago (2h, 1d), seconds since the "
                      "epoch or a local time (2024-05-01T09:00)");
  history->add_option("-E,--endtime", o.until, "jobs submitted at or before (likewise)");
  history->add_option("-s,--state", o.state_filter,
                      "only these states, comma-separated: CD,F,CA,TO,LO,RQ (or COMPLETED, ...)");
  history->add_option("-u,--user", o.user, "only these users' jobs, comma-separated");
  history->add_option("-j,--jobs", o.jobs_filter,
                      "only these jobs, comma-separated (ID, ARRAY_TASK, or an array's id: all "
                      "its tasks)");
  history->add_option("--name", o.name, "only jobs with these names, comma-separated");
  history->add_flag("--json", o.json, kJsonHelp);
  history->footer(StateLegend() + "\n" + FormatCodesHelp());
  for (CLI::App* table : {queue, history}) {
    table
        ->add_option("-o,--format", o.format,
                     "columns: squeue's codes ('%.7i %20j %.3t %N') or sacct's names "
                     "(JobID,State,Elapsed%12); both below")
        ->check(parses([](const std::string& t) { return JobFormat::Parse(t); }));
    table->add_flag("--noheader", o.no_header, "no header line");
  }
  AddControlCommands(app, o);
  AddEffCommand(app, o);
}

int ReportError(const Status& error, bool json, int exit_code) {
  if (json) {
    const nlohmann::json out = {
        {"error",
         {{"code", std::string(api::ToString(api::CodeOf(error)))}, {"message", error.message()}}}};
    fmt::print("{}\n", out.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
  } else {
    fmt::print(stderr, "colo: {}\n", Printable(error.message()));
  }
  return exit_code;
}

int RunClientCommand(CLI::App& app, const ClientOptions& options) {
  ClientOptions o = options;
  // Job arguments as typed become ids (an array task is looked up).
  if (!o.job_ref.empty()) {
    auto id = ResolveJobRef(o, o.job_ref);
    if (!id.ok()) return Fail(o, id.status());
    o.job = *id;
  }
  for (const std::string& ref : o.job_refs) {
    auto id = ResolveJobRef(o, ref);
    if (!id.ok()) return Fail(o, id.status());
    o.jobs.push_back(*id);
    if (ref.find('_') != std::string::npos) o.named_as_task.insert(*id);
  }
  if (app.got_subcommand("submit")) return RunSubmitCommand(o);
  if (app.got_subcommand("logs")) return RunLogsCommand(o);
  if (app.got_subcommand("eff")) return RunEffCommand(o);
  if (int code = RunViewCommand(app, o); code >= 0) return code;
  if (int code = RunControlCommand(app, o); code >= 0) return code;
  return -1;
}

}  // namespace colo
