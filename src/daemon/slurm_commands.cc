#include "daemon/slurm_commands.h"

#include <fmt/format.h>

#include <algorithm>
#include <nlohmann/json.hpp>

#include "common/strings.h"
#include "common/subprocess.h"
#include "common/text.h"
#include "daemon/slurm_booking.h"

namespace colo {
namespace {

constexpr Duration kCommandTimeout = Seconds(15);
constexpr std::string_view kNotePrefix = "colo:";
// squeue --json of Slurm 22.05 lists every job of the cluster, a few KiB each.
constexpr size_t kMaxSqueueOutput = size_t{256} << 20;

}  // namespace

SlurmNote ParseSlurmNote(std::string_view comment) {
  SlurmNote note;
  const size_t at = comment.find(kNotePrefix);
  if (at == std::string_view::npos) return note;
  std::string_view rest = comment.substr(at + kNotePrefix.size());
  rest = rest.substr(0, rest.find_first_of(" ;\n"));
  while (!rest.empty()) {
    const size_t comma = rest.find(',');
    const std::string_view item = rest.substr(0, comma);
    rest = comma == std::string_view::npos ? std::string_view() : rest.substr(comma + 1);
    const size_t eq = item.find('=');
    if (eq == std::string_view::npos) continue;
    const std::string_view key = item.substr(0, eq), value = item.substr(eq + 1);
    uint64_t number = 0;
    if (value.empty() || value.size() > 19 ||
        !std::all_of(value.begin(), value.end(), [](char c) { return c >= '0' && c <= '9'; }))
      continue;
    for (char c : value) number = number * 10 + static_cast<uint64_t>(c - '0');
    if (key == "need" && number > 0 && number <= (uint64_t{1} << 50))
      note.need = Bytes(static_cast<int64_t>(number));
    if (key == "ooms" && number < 1000) note.ooms = static_cast<int>(number);
  }
  return note;
}

std::string WithNote(std::string_view admin_comment, const SlurmNote& note) {
  std::string out(admin_comment.substr(0, admin_comment.find(kNotePrefix)));
  const size_t at = admin_comment.find(kNotePrefix);
  if (at != std::string_view::npos) {
    const size_t end = admin_comment.find_first_of(" ;\n", at);
    if (end != std::string_view::npos) out += std::string(admin_comment.substr(end + 1)) + " ";
  } else if (!out.empty() && out.back() != ' ') {
    out += ' ';
  }
  return out + FormatSlurmNote(note);
}

std::string FormatSlurmNote(const SlurmNote& note) {
  return fmt::format("{}need={},ooms={}", kNotePrefix, note.need ? note.need->count() : 0,
                     note.ooms);
}

namespace {

// Slurm's filename pattern (sbatch(1) "filename pattern") made the path of this job's file.
std::string ExpandOutputPattern(std::string_view pattern, const SlurmJobInfo& info,
                                const std::string& first_node) {
  std::string out;
  // A backslash anywhere turns the pattern's expansion off.
  if (pattern.find('\\') != std::string_view::npos) {
    for (char c : pattern)
      if (c != '\\') out += c;
    return out;
  }
  for (size_t i = 0; i < pattern.size(); ++i) {
    if (pattern[i] != '%' || i + 1 == pattern.size()) {
      out += pattern[i];
      continue;
    }
    size_t j = i + 1;
    int width = 0;
    while (j < pattern.size() && pattern[j] >= '0' && pattern[j] <= '9' && width < 10)
      width = width * 10 + (pattern[j++] - '0');
    if (j == pattern.size()) {
      out += pattern.substr(i);
      break;
    }
    auto padded = [&](uint64_t n) { return fmt::format("{:0{}}", n, std::min(width, 10)); };
    switch (pattern[j]) {
      case '%':
        out += '%';
        break;
      case 'j':
        out += padded(info.job);
        break;
      case 'J':
        out += padded(info.job) + ".batch";
        break;
      case 'A':
        out += padded(info.array_job ? info.array_job : info.job);
        break;
      case 'a':
        out += info.array_task ? padded(*info.array_task) : std::string("4294967294");
        break;
      case 'N':
        out += first_node;
        break;
      case 'n':
      case 't':
        out += padded(0);
        break;
      case 's':
        out += "batch";
        break;
      case 'u':
        out += info.user;
        break;
      case 'x':
        out += info.name;
        break;
      default:
        out += pattern.substr(i, j + 1 - i);
        break;
    }
    i = j;
  }
  return out;
}

std::string FirstNode(const std::string& nodes) {
  // "n[1-3],m2" -> "n1"; "n2" -> "n2".
  const size_t bracket = nodes.find('[');
  const size_t comma = nodes.find(',');
  if (bracket == std::string::npos || (comma != std::string::npos && comma < bracket))
    return nodes.substr(0, comma);
  const size_t end = nodes.find_first_of("-,]", bracket + 1);
  return nodes.substr(0, bracket) + nodes.substr(bracket + 1, end == std::string::npos
                                                                  ? std::string::npos
                                                                  : end - bracket - 1);
}

std::string OutputPath(std::string_view pattern, const SlurmJobInfo& info) {
  std::string path = ExpandOutputPattern(pattern, info, FirstNode(info.nodes));
  if (!path.empty() && path[0] != '/' && !info.work_dir.empty())
    path = info.work_dir + (info.work_dir.back() == '/' ? "" : "/") + path;
  return path;
}

}  // namespace

Result<std::map<uint32_t, SlurmJobInfo>> ParseSqueueJobs(std::string_view text) {
  // `squeue --json`: a user's job name or paths cannot pass for other fields there, as they
  // can in scontrol's Key=Value form (a name may hold "\n   JobState=COMPLETED").
  const size_t open = text.find('{'), close = text.rfind('}');
  if (open == std::string_view::npos || close == std::string_view::npos || close < open)
    return InvalidArgument("squeue's output is not JSON");
  const nlohmann::json j = nlohmann::json::parse(text.substr(open, close + 1 - open), nullptr,
                                                 /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) return InvalidArgument("squeue's output is not JSON");
  const auto jobs = j.find("jobs");
  if (jobs == j.end() || !jobs->is_array()) return InvalidArgument("squeue's output has no jobs");
  std::map<uint32_t, SlurmJobInfo> out;
  for (const nlohmann::json& job : *jobs) {
    if (!job.is_object()) continue;
    auto text_of = [&](const char* key) -> std::string {
      const auto it = job.find(key);
      return it != job.end() && it->is_string() ? it->get<std::string>() : std::string();
    };
    auto int_of = [&](const char* key) -> std::optional<int64_t> {
      const auto it = job.find(key);
      if (it == job.end() || !it->is_number_integer()) return std::nullopt;
      return it->get<int64_t>();
    };
    const auto id = int_of("job_id");
    if (!id || *id <= 0 || *id > std::numeric_limits<uint32_t>::max()) continue;
    SlurmJobInfo info;
    info.job = static_cast<uint32_t>(*id);
    info.state = text_of("job_state");
    if (info.state.empty()) continue;
    info.nodes = text_of("nodes");
    info.admin_comment = text_of("admin_comment");
    info.restarts = static_cast<int>(
        std::clamp<int64_t>(int_of("restart_cnt").value_or(0), 0, std::numeric_limits<int>::max()));
    info.tres_per_node = text_of("tres_per_node");
    info.comment = text_of("comment");
    // gres_detail lists the job's GPUs per node, in the order of its allocated nodes.
    const auto detail = job.find("gres_detail");
    const auto resources = job.find("job_resources");
    if (detail != job.end() && detail->is_array() && resources != job.end() &&
        resources->is_object()) {
      const auto nodes = resources->find("allocated_nodes");
      for (size_t i = 0; nodes != resources->end() && nodes->is_array() && i < nodes->size() &&
                         i < detail->size();
           ++i) {
        const nlohmann::json& node = (*nodes)[i];
        const nlohmann::json& gres = (*detail)[i];
        if (!node.is_object() || !gres.is_string()) continue;
        const auto name = node.find("nodename");
        if (name == node.end() || !name->is_string()) continue;
        info.gpus_by_node[name->get<std::string>()] = ParseGresIndexes(gres.get<std::string>());
      }
    }
    info.user = text_of("user_name");
    info.name = text_of("name");
    info.work_dir = text_of("current_working_directory");
    info.excluded_nodes = text_of("excluded_nodes");
    info.required_nodes = text_of("required_nodes");
    if (const auto a = int_of("array_job_id"); a && *a > 0 && *a <= UINT32_MAX)
      info.array_job = static_cast<uint32_t>(*a);
    if (const auto t = int_of("array_task_id"); t && *t >= 0 && *t <= UINT32_MAX)
      info.array_task = static_cast<uint32_t>(*t);
    // A wait status, as waitpid gives it, in this version of the format.
    const int status = static_cast<int>(int_of("exit_code").value_or(0));
    if (WIFSIGNALED(status))
      info.exit_signal = WTERMSIG(status);
    else
      info.exit_code = WEXITSTATUS(status);
    const std::string out_pattern = text_of("standard_output");
    const std::string err_pattern = text_of("standard_error");
    info.std_out = OutputPath(
        out_pattern.empty() ? (info.array_job ? "slurm-%A_%a.out" : "slurm-%j.out") : out_pattern,
        info);
    info.std_err = err_pattern.empty() ? info.std_out : OutputPath(err_pattern, info);
    out[info.job] = std::move(info);
  }
  return out;
}

Result<std::optional<SlurmJobInfo>> SlurmCommands::ShowJob(uint32_t job) {
  auto jobs = ShowJobs({job});
  if (!jobs.ok()) return jobs.status();
  auto it = jobs->find(job);
  if (it == jobs->end()) return std::optional<SlurmJobInfo>();
  return std::optional<SlurmJobInfo>(std::move(it->second));
}

SlurmCliCommands::SlurmCliCommands(std::string bin_dir, std::string slurmd,
                                   std::vector<std::string> environment)
    : bin_dir_(std::move(bin_dir)), slurmd_(std::move(slurmd)), env_(std::move(environment)) {
  env_.push_back("PATH=/usr/local/bin:/usr/bin:/bin");
}

Result<std::string> SlurmCliCommands::Run(const std::string& command, std::vector<std::string> args,
                                          size_t max_output) {
  args.insert(args.begin(), bin_dir_ + "/" + command);
  auto run = RunCommand(args, env_, kCommandTimeout, max_output);
  if (!run.ok()) return run.status();
  std::string joined = command;
  for (size_t i = 1; i < args.size(); ++i) joined += " " + args[i];
  if (run->timed_out) return Unavailable(fmt::format("{}: no answer in time", joined));
  if (run->exit_code != 0) {
    return Unavailable(fmt::format("{}: {}", joined,
                                   std::string(Trim(TruncateUtf8(ValidUtf8(run->output), 400)))));
  }
  return std::move(run->output);
}

Result<std::optional<std::string>> SlurmCliCommands::Squeue(const std::vector<uint32_t>& jobs,
                                                            std::vector<std::string> args,
                                                            size_t max_output) {
  std::string list;
  for (uint32_t job : jobs) list += (list.empty() ? "" : ",") + std::to_string(job);
  args.insert(args.begin(), {"--states=all", "--jobs=" + list});
  auto out = Run("squeue", std::move(args), max_output);
  if (out.ok()) return std::optional<std::string>(std::move(*out));
  // None of them known to Slurm any more.
  if (out.status().message().find("Invalid job id") != std::string::npos)
    return std::optional<std::string>();
  return out.status();
}

Result<std::map<uint32_t, SlurmJobInfo>> SlurmCliCommands::ShowJobs(
    const std::vector<uint32_t>& jobs) {
  // Slurm 22.05's squeue --json lists every job whatever -j says; later ones honour it. Either
  // way the jobs asked for are picked by id.
  auto out = Squeue(jobs, {"--json"}, kMaxSqueueOutput);
  if (!out.ok()) return out.status();
  std::map<uint32_t, SlurmJobInfo> wanted;
  if (!*out) return wanted;
  auto all = ParseSqueueJobs(**out);
  if (!all.ok()) return all.status();
  for (uint32_t job : jobs) {
    if (auto it = all->find(job); it != all->end()) wanted.insert(std::move(*it));
  }
  return wanted;
}

std::map<uint32_t, SlurmJobInfo> ParseSqueueBookings(std::string_view text) {
  std::map<uint32_t, SlurmJobInfo> out;
  for (const std::string& line : Split(std::string(text), '\n')) {
    // Three fields, then the Comment whole (it may hold a '|' of its user's).
    std::vector<std::string> fields;
    size_t start = 0;
    for (int i = 0; i < 3; ++i) {
      const size_t bar = line.find('|', start);
      if (bar == std::string::npos) break;
      fields.push_back(std::string(Trim(line.substr(start, bar - start))));
      start = bar + 1;
    }
    if (fields.size() < 3) continue;
    std::string comment = line.substr(start);
    if (!comment.empty() && comment.back() == '|') comment.pop_back();
    const auto id = ParseInt(fields[0]);
    const auto restarts = ParseInt(fields[1]);
    if (!id.ok() || *id <= 0 || *id > 0xffffffffLL || !restarts.ok() || *restarts < 0) continue;
    SlurmJobInfo info;
    info.job = static_cast<uint32_t>(*id);
    info.restarts = static_cast<int>(std::min<int64_t>(*restarts, 1 << 20));
    info.tres_per_node = fields[2] == "N/A" ? "" : fields[2];
    info.comment = std::string(Trim(comment));
    out[info.job] = std::move(info);
  }
  return out;
}

std::map<uint32_t, SlurmJobInfo> ParseSqueueStates(std::string_view text) {
  std::map<uint32_t, SlurmJobInfo> out;
  while (!text.empty()) {
    const size_t eol = text.find('\n');
    std::string_view line = text.substr(0, eol);
    text = eol == std::string_view::npos ? std::string_view() : text.substr(eol + 1);
    std::vector<std::string_view> fields;
    while (!line.empty()) {
      const size_t bar = line.find('|');
      if (bar == std::string_view::npos) break;
      fields.push_back(Trim(line.substr(0, bar)));
      line = line.substr(bar + 1);
    }
    if (fields.size() < 4) continue;
    SlurmJobInfo info;
    const auto id = ParseInt(fields[0]);
    const auto restarts = ParseInt(fields[2]);
    if (!id.ok() || *id <= 0 || *id > 0xffffffffLL || !restarts.ok() || *restarts < 0) continue;
    info.job = static_cast<uint32_t>(*id);
    info.state = std::string(fields[1]);
    info.restarts = static_cast<int>(std::min<int64_t>(*restarts, 1 << 20));
    info.nodes = std::string(fields[3]);
    if (!info.state.empty()) out[info.job] = std::move(info);
  }
  return out;
}

Result<std::map<uint32_t, SlurmJobInfo>> SlurmCliCommands::JobStates(
    const std::vector<uint32_t>& jobs) {
  // Only fields a user cannot write, so that no job name or path can pass for another field.
  auto out = Squeue(jobs, {"--noheader", "--Format=JobID:|,State:|,RestartCnt:|,NodeList:|"});
  if (!out.ok()) return out.status();
  if (!*out) return std::map<uint32_t, SlurmJobInfo>();
  return ParseSqueueStates(**out);
}

Status SlurmCliCommands::Requeue(uint32_t job, const SlurmNote& note) {
  const std::string id = std::to_string(job);
  auto info = ShowJob(job);
  if (!info.ok()) return info.status();
  if (!*info) return NotFound(fmt::format("Slurm no longer knows job {}", job));
  if ((*info)->state == "PENDING") return Status::Ok();  // requeued already (Slurm, an admin)
  // The note first, while the job can still be updated (an ended one cannot; PrepareRerun
  // writes it again once the job is pending, so a failure here costs nothing). An administrator's
  // own text there stays.
  if (auto noted = Run("scontrol", {"update", "JobId=" + id,
                                    "AdminComment=" + WithNote((*info)->admin_comment, note)});
      !noted.ok())
    fmt::print(stderr, "colod: {}\n",
               Printable(fmt::format(
                   "Slurm job {}: the note could not be written before the requeue ({}); "
                   "it is written when the job waits again",
                   job, noted.status().message())));
  // Not held: should colod be gone before PrepareRerun, the job still runs again (Slurm makes
  // a requeued job wait out its credentials' expiry first), with the note already written.
  auto requeued = Run("scontrol", {"requeue", id});
  if (!requeued.ok() && requeued.status().message().find("pending execution") != std::string::npos)
    return Status::Ok();
  return requeued.ok() ? Status::Ok() : requeued.status();
}

Result<bool> SlurmCliCommands::PrepareRerun(uint32_t job, const SlurmNote& note, int64_t shards,
                                            const std::string& avoid_node) {
  const std::string id = std::to_string(job);
  // Pending only once its batch step and epilog are through.
  auto states = JobStates({job});
  if (!states.ok()) return states.status();
  const auto it = states->find(job);
  if (it == states->end()) return NotFound(fmt::format("Slurm no longer knows job {}", job));
  if (it->second.state != "PENDING") return false;
  auto full = ShowJob(job);
  if (!full.ok()) return full.status();
  if (!*full) return NotFound(fmt::format("Slurm no longer knows job {}", job));
  const SlurmJobInfo& record = **full;
  // Eligible a second from now: a start within the requeue's own second is refused by the node,
  // whose credentials for the job were revoked in that second.
  std::vector<std::string> update = {"update", "JobId=" + id,
                                     "AdminComment=" + WithNote(record.admin_comment, note),
                                     "StartTime=now+1"};
  for (std::string& change : RerunChanges(record.tres_per_node, record.excluded_nodes,
                                          record.required_nodes, shards, avoid_node))
    update.push_back(std::move(change));
  auto updated = Run("scontrol", update);
  if (!updated.ok()) return updated.status();
  return true;
}

Result<std::optional<SlurmJobInfo>> SlurmCliCommands::Booking(uint32_t job) {
  // Only fields a user cannot write, but the Comment, which comes last whole.
  auto out =
      Squeue({job}, {"--noheader", "--Format=JobID:|,RestartCnt:|,tres-per-node:|,Comment:|"});
  if (!out.ok()) return out.status();
  if (!*out) return std::optional<SlurmJobInfo>();
  auto jobs = ParseSqueueBookings(**out);
  auto it = jobs.find(job);
  if (it == jobs.end()) return std::optional<SlurmJobInfo>();
  return std::optional<SlurmJobInfo>(std::move(it->second));
}

Result<std::string> SlurmCliCommands::SlurmdGres(const std::string& node) {
  // slurmd -G reads slurm.conf and gres.conf as slurmd would, prints each GRES with its index
  // and file, and exits; -N names the node where one host runs several slurmds.
  auto run = RunCommand({slurmd_, "-G", "-N", node}, env_, kCommandTimeout, 1 << 20);
  if (!run.ok()) return run.status();
  if (run->timed_out || run->exit_code != 0)
    return Unavailable(fmt::format("{} -G -N {}: {}", slurmd_, node,
                                   std::string(Trim(TruncateUtf8(ValidUtf8(run->output), 400)))));
  return std::move(run->output);
}

Result<SlurmNodeState> SlurmCliCommands::ShowNode(const std::string& node) {
  auto out = Run("scontrol", {"show", "node", "-o", node});
  if (!out.ok()) return out.status();
  // One line; the reason (an administrator's text) is its last field.
  SlurmNodeState state;
  const size_t at = out->find(" State=");
  if (at != std::string::npos) {
    const std::string flags = out->substr(at + 7, out->find(' ', at + 7) - at - 7);
    state.drained = flags.find("DRAIN") != std::string::npos;
  }
  if (const size_t reason = out->find(" Reason="); reason != std::string::npos)
    state.reason = std::string(Trim(out->substr(reason + 8)));
  return state;
}

Status SlurmCliCommands::UpdateNode(const std::string& node, bool drain,
                                    const std::string& reason) {
  std::vector<std::string> args = {"update", "NodeName=" + node};
  if (drain) {
    args.push_back("State=DRAIN");
    args.push_back("Reason=" + reason);
  } else {
    args.push_back("State=RESUME");
  }
  auto out = Run("scontrol", args);
  return out.ok() ? Status::Ok() : out.status();
}

Status SlurmCliCommands::AppendAsUser(const Identity& who, const std::string& path,
                                      const std::string& text) {
  if (path.empty() || path[0] != '/') return InvalidArgument("not an absolute path: " + path);
  // As the user, as TailAsUser reads: the shell opens the file for appending with the user's
  // rights alone, and a FIFO costs at most the timeout.
  auto run = RunCommand(
      {"/usr/bin/setpriv", fmt::format("--reuid={}", who.uid), fmt::format("--regid={}", who.gid),
       "--init-groups", "--", "/bin/sh", "-c", "printf '%s\\n' \"$1\" >>\"$2\"", "sh", text, path},
      env_, Seconds(5), 4096);
  if (!run.ok()) return run.status();
  if (run->timed_out || run->exit_code != 0)
    return Unavailable(fmt::format("{} could not be written as {}", path, who.user));
  return Status::Ok();
}

Result<std::string> SlurmCliCommands::TailAsUser(const Identity& who, const std::string& path,
                                                 size_t max_bytes) {
  if (path.empty() || path[0] != '/') return InvalidArgument("not an absolute path: " + path);
  // setpriv drops to the user before tail opens anything: what the user cannot read, colod
  // does not read for them; a FIFO or endless device costs at most the timeout.
  auto run = RunCommand(
      {"/usr/bin/setpriv", fmt::format("--reuid={}", who.uid), fmt::format("--regid={}", who.gid),
       "--init-groups", "--", "/usr/bin/tail", "-c", std::to_string(max_bytes), "--", path},
      env_, Seconds(5), max_bytes);
  if (!run.ok()) return run.status();
  if (run->timed_out || run->exit_code != 0)
    return Unavailable(fmt::format("{} could not be read as {}", path, who.user));
  return ValidUtf8(run->output);
}

}  // namespace colo
