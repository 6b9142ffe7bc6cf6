#include "cli/client_commands.h"

#include <fmt/format.h>
#include <unistd.h>

#include <chrono>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "cli/estimate_command.h"
#include "common/strings.h"
#include "common/units.h"
#include "daemon/api.h"
#include "daemon/config.h"
#include "formats/rad.h"

extern char** environ;

namespace colo {

using nlohmann::json;
namespace fs = std::filesystem;

namespace {

Result<json> Call(const ClientOptions& o, json request) {
  auto client = ApiClient::Connect(o.socket.empty() ? DefaultSocketPath() : o.socket);
  if (!client.ok()) return client.status();
  return client->Call(std::move(request));
}

int Fail(const Status& s) {
  fmt::print(stderr, "colo: {}\n", s.message());
  return 1;
}

std::string StateCode(const std::string& state) {
  if (state == "queued") return "PD";
  if (state == "recovering") return "RQ";
  if (state == "running") return "R";
  if (state == "succeeded") return "CD";
  if (state == "failed") return "F";
  if (state == "cancelled") return "CA";
  if (state == "lost") return "LO";
  return "?";
}

std::string Elapsed(double seconds) {
  if (seconds < 0) seconds = 0;
  const auto s = static_cast<long long>(seconds);
  if (s >= 86400)
    return fmt::format("{}-{:02}:{:02}:{:02}", s / 86400, s / 3600 % 24, s / 60 % 60, s % 60);
  return fmt::format("{}:{:02}:{:02}", s / 3600, s / 60 % 60, s % 60);
}

double Now() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

std::string FormatWallTime(double t) {
  if (t <= 0) return "-";
  const std::time_t tt = static_cast<std::time_t>(t);
  std::tm tm{};
  localtime_r(&tt, &tm);
  char buffer[32];
  std::strftime(buffer, sizeof buffer, "%Y-%m-%dT%H:%M:%S", &tm);
  return buffer;
}

std::string Truncate(const std::string& s, size_t n) {
  return s.size() <= n ? s : s.substr(0, n - 1) + "+";
}

void PrintJobs(const json& jobs, bool history) {
  fmt::print("{:>7} {:<18} {:<10} {:>2} {:>4} {:>10} {:>11}  {}\n", "JOBID", "NAME", "USER", "ST",
             "GPUS", "MEM", "TIME", history ? "END / REASON" : "GPUS(REASON)");
  for (const auto& j : jobs) {
    const std::string state = j.value("state", "");
    const double started = j.value("started", 0.0);
    const double finished = j.value("finished", 0.0);
    double elapsed = 0;
    if (state == "running")
      elapsed = Now() - started;
    else if (history && started > 0)
      elapsed = finished - started;
    std::string where;
    if (state == "running") {
      std::string uuids;
      for (const auto& u : j.value("gpu_uuids", std::vector<std::string>{}))
        uuids += (uuids.empty() ? "" : ",") + u;
      where = fmt::format("{} ({})", uuids, j.value("mode", ""));
    } else if (history) {
      where = FormatWallTime(finished) +
              (j.value("reason", "").empty() ? "" : "  " + j.value("reason", ""));
    } else {
      where = "(" + j.value("reason", "") + ")";
    }
    fmt::print("{:>7} {:<18} {:<10} {:>2} {:>4} {:>10} {:>11}  {}\n", j.value("id", 0),
               Truncate(j.value("name", ""), 18), Truncate(j.value("user", ""), 10),
               StateCode(state), j.value("gpus", 1), j.value("memory", ""), Elapsed(elapsed),
               where);
  }
}

std::string Gib(int64_t bytes) {
  return bytes < 0 ? "-" : fmt::format("{:.1f}", bytes / double(1LL << 30));
}
std::string Pct(double v) {
  return v < 0 ? "-" : fmt::format("{:.0f}%", 100 * v);
}

int Submit(const ClientOptions& o) {
  if (o.command.empty())
    return Fail(InvalidArgument("nothing to submit: give a job file or -- COMMAND"));
  json request{{"op", "submit"}};
  std::vector<std::string> command = o.command;
  int gpus = o.gpus;
  std::string memory = o.memory, share = o.share, name = o.name, source = "cli";
  int threads = o.threads;
  const std::string& first = command.front();
  if (command.size() == 1 && fs::is_regular_file(first) && first.size() > 4 &&
      first.substr(first.size() - 4) == ".rad") {
    auto text = ReadTextFile(first);
    if (!text.ok()) return Fail(text.status());
    auto task = ParseRad(*text, first);
    if (!task.ok()) return Fail(task.status());
    std::string shell = task->command;
    if (!task->environment.empty()) shell = task->environment + " && " + shell;
    command = {"/bin/sh", "-c", shell};
    if (gpus == 0) gpus = task->gpus;
    if (memory.empty()) {
      // The most trustworthy number the file has: measured, then the estimators CARMA ran.
      for (const auto& m : {task->measured_peak, task->gpumemnet, task->horus, task->faketensor}) {
        if (m) {
          memory = std::to_string(m->count()) + "B";
          break;
        }
      }
    }
    if (name.empty()) name = fs::path(first).stem().string();
    source = "rad " + first;
  } else if (fs::is_regular_file(first)) {
    auto text = ReadTextFile(first);
    if (!text.ok()) return Fail(text.status());
    if (text->find("#COLO") != std::string::npos) {
      std::string error;
      const ScriptDirectives d = ParseDirectives(*text, &error);
      if (!error.empty()) return Fail(InvalidArgument(fmt::format("{}: {}", first, error)));
      if (gpus == 0) gpus = d.gpus;
      if (memory.empty()) memory = d.memory;
      if (share.empty()) share = d.share;
      if (name.empty()) name = d.name;
      if (threads == 0) threads = d.threads;
      command.front() = fs::absolute(first).string();
      if (access(first.c_str(), X_OK) != 0) command.insert(command.begin(), "/bin/sh");
      source = "script " + first;
    }
  }
  if (!o.estimate_from.empty()) {
    // Estimated here, where the user's files are; colod stores the answer with the job, refines
    // it with earlier runs of the same model and plans with it unless --mem was given.
    EstimateCommandOptions eo;
    eo.summary = o.estimate_from;
    eo.batch = o.batch;
    eo.gpu = o.estimate_gpu;
    auto report = RunEstimates(eo);
    if (!report.ok()) return Fail(report.status());
    const NamedEstimate* best = BestEstimate(report->estimates);
    if (!best) {
      std::string why;
      for (const auto& e : report->estimates)
        why += fmt::format("\n  {}: {}", e.estimator, e.estimate.status().message());
      return Fail(InvalidArgument(
          fmt::format("no estimator could answer for {}:{}", o.estimate_from, why)));
    }
    request["estimate"] = {
        {"estimator", best->estimator},
        {"peak", best->estimate->peak.count()},
        {"lower", best->estimate->lower.count()},
        {"upper", best->estimate->upper.count()},
        {"detail", best->estimate->detail},
        {"signature", fmt::format("{:016x}-b{}", report->summary->Signature(), report->batch)}};
    if (!o.json) {
      // Say why the better estimators could not answer (no trace for this batch, no calibration).
      for (const auto& e : report->estimates) {
        if (&e == best) break;
        if (!e.estimate.ok() && e.estimator != "history" && e.estimator != "declared")
          fmt::print(stderr, "colo: {}: {}\n", e.estimator, e.estimate.status().message());
      }
      fmt::print(stderr, "colo: {} estimates {} (plans with {})\n", best->estimator,
                 FormatBytes(best->estimate->peak), FormatBytes(best->estimate->upper));
    }
  }
  request["command"] = command;
  request["gpus"] = gpus > 0 ? gpus : 1;
  if (!memory.empty()) request["memory"] = memory;
  if (!share.empty()) request["share"] = share;
  if (threads) request["threads"] = threads;
  if (o.smact >= 0) request["expected_smact"] = o.smact;
  if (!name.empty()) request["name"] = name;
  request["workdir"] =
      o.workdir.empty() ? fs::current_path().string() : fs::absolute(o.workdir).string();
  std::vector<std::string> env;
  for (char** e = environ; *e; ++e) env.push_back(*e);
  request["env"] = env;
  request["source"] = source;
  auto reply = Call(o, request);
  if (!reply.ok()) return Fail(reply.status());
  if (o.json)
    fmt::print("{}\n", reply->dump());
  else
    fmt::print("Submitted job {}\n", (*reply)["job"].get<long long>());
  return 0;
}

int Logs(const ClientOptions& o) {
  auto reply = Call(o, {{"op", "logs"}, {"job", o.job}});
  if (!reply.ok()) return Fail(reply.status());
  if (o.json) {
    fmt::print("{}\n", reply->dump());
    return 0;
  }
  const std::string path = reply->value(o.stderr_log ? "stderr" : "stdout", "");
  if (path.empty()) {
    fmt::print(stderr, "colo: job {} has not started yet\n", o.job);
    return 0;
  }
  std::ifstream in(path);
  if (!in) return Fail(NotFound(fmt::format("cannot read {}", path)));
  std::string line;
  auto drain = [&] {
    char buffer[8192];
    while (in.read(buffer, sizeof buffer) || in.gcount() > 0) {
      fwrite(buffer, 1, static_cast<size_t>(in.gcount()), stdout);
      if (in.gcount() < static_cast<std::streamsize>(sizeof buffer)) break;
    }
    in.clear();
    fflush(stdout);
  };
  drain();
  while (o.follow) {
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
    drain();
    auto state = Call(o, {{"op", "logs"}, {"job", o.job}});
    if (!state.ok() || state->value("state", "") != "running") {
      drain();
      break;
    }
  }
  return 0;
}

}  // namespace

ScriptDirectives ParseDirectives(const std::string& text, std::string* error) {
  ScriptDirectives d;
  int line_number = 0;
  for (const std::string& raw : Split(text, '\n')) {
    ++line_number;
    const std::string line(Trim(raw));
    if (line.rfind("#!", 0) == 0 || line.empty()) continue;
    if (line[0] != '#') break;  // directives end at the first command, as #SBATCH's do
    if (line.rfind("#COLO", 0) != 0) continue;
    for (const std::string& word : Split(line.substr(5), ' ')) {
      if (word.empty()) continue;
      const size_t eq = word.find('=');
      const std::string key = word.substr(0, eq),
                        value = eq == std::string::npos ? "" : word.substr(eq + 1);
      auto bad = [&](const std::string& why) {
        if (error->empty()) *error = fmt::format("line {}: {}", line_number, why);
      };
      if (value.empty()) {
        bad(fmt::format("'{}' needs a value (--key=value)", word));
      } else if (key == "--gpus") {
        auto n = ParseInt(value);
        if (!n.ok() || *n < 1)
          bad(fmt::format("--gpus takes a positive number, not '{}'", value));
        else
          d.gpus = static_cast<int>(*n);
      } else if (key == "--mem") {
        if (auto b = ParseBytes(value); !b.ok())
          bad("--mem: " + b.status().message());
        else
          d.memory = value;
      } else if (key == "--share") {
        d.share = value;
      } else if (key == "--name") {
        d.name = value;
      } else if (key == "--threads") {
        auto n = ParseInt(value);
        if (!n.ok() || *n < 1 || *n > 100)
          bad(fmt::format("--threads takes 1..100, not '{}'", value));
        else
          d.threads = static_cast<int>(*n);
      } else {
        bad(fmt::format("unknown directive '{}'", key));
      }
    }
  }
  return d;
}

void AddClientCommands(CLI::App& app, ClientOptions& o) {
  app.add_option("--socket", o.socket,
                 "colod's socket (default: $COLO_SOCKET, then the user's or system's)");
  auto* submit = app.add_subcommand(
      "submit", "submit a job: colo submit [options] -- CMD ARGS, or a job.sh / task.rad file");
  submit->add_option("--gpus", o.gpus, "GPUs the job needs, all on one server (default 1)");
  submit->add_option("--mem", o.memory, "peak GPU memory per GPU, e.g. 12GiB");
  submit->add_option("--share", o.share, "mps, plain or exclusive (default: the GPU's mode)");
  submit->add_option("--threads", o.threads,
                     "MPS active-thread percentage (default: from --smact)");
  submit
      ->add_option("--smact", o.smact,
                   "the job's SM activity when alone, 0..1 (e.g. from a solo run): sets its MPS "
                   "thread share")
      ->check(CLI::Range(0.0, 1.0));
  submit->add_option("--name", o.name, "job name (default: the command)");
  submit->add_option("--workdir", o.workdir, "working directory (default: the current one)");
  submit->add_option("--estimate-from", o.estimate_from, "model summary to estimate memory from");
  submit->add_option("--batch", o.batch, "batch size, with --estimate-from");
  submit->add_option("--gpu-model", o.estimate_gpu,
                     "GPU model whose calibration the estimate uses (default: the first shipped)");
  submit->add_option("command", o.command, "the command, or a job file")->expected(-1);
  submit->add_flag("--json", o.json);
  auto* queue = app.add_subcommand("queue", "jobs waiting and running (like squeue)");
  queue->add_option("--user", o.user, "only this user's jobs");
  queue->add_flag("--json", o.json);
  for (auto [name, help] :
       {std::pair{"show", "everything about one job"},
        std::pair{"cancel", "cancel a job (your own; root may cancel any)"},
        std::pair{"explain", "why a job waits: the gate that stopped it on each GPU"}}) {
    auto* sub = app.add_subcommand(name, help);
    sub->add_option("job", o.job, "job id")->required();
    sub->add_flag("--json", o.json);
  }
  auto* logs = app.add_subcommand("logs", "a job's output");
  logs->add_option("job", o.job, "job id")->required();
  logs->add_flag("-f,--follow", o.follow, "keep printing while the job runs");
  logs->add_flag("--stderr", o.stderr_log, "show stderr instead of stdout");
  logs->add_flag("--json", o.json);
  auto* gpus = app.add_subcommand("gpus", "live per-GPU memory, SMACT, power and jobs");
  gpus->add_flag("--json", o.json);
  auto* history = app.add_subcommand("history", "jobs that ended (like sacct)");
  history->add_option("--limit", o.limit, "how many")->capture_default_str();
  history->add_flag("--all", o.all, "every user's jobs");
  history->add_flag("--json", o.json);
}

int RunClientCommand(CLI::App& app, const ClientOptions& o) {
  if (app.got_subcommand("submit")) return Submit(o);
  if (app.got_subcommand("logs")) return Logs(o);
  json request;
  if (app.got_subcommand("queue"))
    request = {{"op", "queue"}, {"user", o.user}};
  else if (app.got_subcommand("show"))
    request = {{"op", "show"}, {"job", o.job}};
  else if (app.got_subcommand("cancel"))
    request = {{"op", "cancel"}, {"job", o.job}};
  else if (app.got_subcommand("explain"))
    request = {{"op", "explain"}, {"job", o.job}};
  else if (app.got_subcommand("gpus"))
    request = {{"op", "gpus"}};
  else if (app.got_subcommand("history"))
    request = {{"op", "history"}, {"limit", o.limit}, {"all", o.all}};
  else
    return -1;
  auto reply = Call(o, request);
  if (!reply.ok()) return Fail(reply.status());
  if (o.json) {
    fmt::print("{}\n", reply->dump(2));
    return 0;
  }
  const json& r = *reply;
  if (app.got_subcommand("queue")) {
    PrintJobs(r["jobs"], false);
  } else if (app.got_subcommand("history")) {
    PrintJobs(r["jobs"], true);
  } else if (app.got_subcommand("cancel")) {
    fmt::print("job {}: {}\n", o.job, r.value("state", ""));
  } else if (app.got_subcommand("explain")) {
    fmt::print("job {} ({}): {}\n", o.job, r.value("state", ""), r.value("summary", ""));
    if (r.contains("position"))
      fmt::print("  position {} in the {} queue\n", r["position"].get<int>(), r.value("queue", ""));
    for (const auto& g : r.value("gpus", json::array()))
      fmt::print("  GPU {:<3} {:<14} {}\n", g.value("gpu", 0), g.value("gate", ""),
                 g.value("detail", ""));
  } else if (app.got_subcommand("gpus")) {
    fmt::print("{:>3} {:<24} {:>6} {:>6} {:>8} {:>6} {:>6} {:>7} {:>10} {:<9} {}\n", "GPU", "NAME",
               "USED", "TOTAL", "FREE4JOB", "SMACT", "SMOCC", "POWER", "ENERGY_kJ", "MODE", "JOBS");
    for (const auto& g : r["gpus"]) {
      std::string jobs;
      for (const auto& j : g["jobs"])
        jobs += fmt::format("{}{}({},{})", jobs.empty() ? "" : " ", j.value("id", 0),
                            j.value("user", ""), j.value("mode", ""));
      const double power = g.value("power_watts", -1.0), energy = g.value("energy_joules", -1.0);
      fmt::print("{:>3} {:<24} {:>6} {:>6} {:>8} {:>6} {:>6} {:>7} {:>10} {:<9} {}\n",
                 g.value("index", 0), Truncate(g.value("name", ""), 24),
                 Gib(g.value("memory_used", int64_t{-1})),
                 Gib(g.value("memory_total", int64_t{-1})),
                 Gib(g.value("free_for_placement", int64_t{-1})), Pct(g.value("smact", -1.0)),
                 Pct(g.value("smocc", -1.0)), power < 0 ? "-" : fmt::format("{:.0f}W", power),
                 energy < 0 ? "-" : fmt::format("{:.1f}", energy / 1000), g.value("mode", ""),
                 jobs.empty() ? "-" : jobs);
    }
  } else if (app.got_subcommand("show")) {
    const json& j = r["job"];
    fmt::print("JobId={} Name={} User={} State={} Attempts={}\n", j.value("id", 0),
               j.value("name", ""), j.value("user", ""), j.value("state", ""),
               j.value("attempts", 0));
    std::string cmd;
    for (const auto& a : j.value("command", std::vector<std::string>{}))
      cmd += (cmd.empty() ? "" : " ") + a;
    fmt::print("   Command={}\n   WorkDir={} Source={}\n", cmd, j.value("workdir", ""),
               j.value("source", ""));
    fmt::print("   Gpus={} Memory={} Need={} ({}) Share={}\n", j.value("gpus", 1),
               j.value("memory", ""), j.value("need", "-"), j.value("need_source", "-"),
               j.value("share", ""));
    if (j.contains("estimate")) {
      const json& e = j["estimate"];
      fmt::print("   Estimate={} peak={} GiB upper={} GiB ({})\n", e.value("estimator", ""),
                 Gib(e.value("peak", int64_t{0})), Gib(e.value("upper", int64_t{0})),
                 e.value("detail", ""));
      if (e.contains("history")) {
        fmt::print("   Learned from {} earlier run(s): peak={} GiB upper={} GiB\n",
                   e["history"].value("runs", 0), Gib(e["history"].value("peak", int64_t{0})),
                   Gib(e["history"].value("upper", int64_t{0})));
      }
    }
    fmt::print("   SubmitTime={} EndTime={}\n", FormatWallTime(j.value("submitted", 0.0)),
               FormatWallTime(j.value("finished", 0.0)));
    if (!j.value("reason", "").empty()) fmt::print("   Reason={}\n", j.value("reason", ""));
    for (const auto& a : j.value("attempt_list", json::array())) {
      std::string uuids;
      for (const auto& u : a.value("gpu_uuids", std::vector<std::string>{}))
        uuids += (uuids.empty() ? "" : ",") + u;
      fmt::print("   Attempt {}: {} {} pid={} peak={} GiB {} {}\n", a.value("number", 0), uuids,
                 a.value("mode", ""), a.value("pid", 0), Gib(a.value("peak", int64_t{0})),
                 a.value("exit_kind", "").empty() ? "running" : a.value("exit_kind", ""),
                 a.value("detail", ""));
    }
    for (const auto& e : j.value("events", json::array()))
      fmt::print("   {} {:<10} {}\n", FormatWallTime(e.value("time", 0.0)), e.value("kind", ""),
                 e.value("detail", ""));
  }
  return 0;
}

}  // namespace colo
