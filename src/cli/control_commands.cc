#include "cli/control_commands.h"

#include <fmt/format.h>
#include <pwd.h>
#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <chrono>
#include <functional>
#include <map>
#include <set>
#include <thread>

#include "api/client.h"
#include "cli/job_table.h"
#include "common/job_signals.h"
#include "common/signals.h"
#include "common/strings.h"
#include "common/text.h"

namespace colo {
namespace {

std::optional<int64_t> Number(std::string_view text) {
  int64_t value = 0;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (error != std::errc() || end != text.data() + text.size() || value < 0) return std::nullopt;
  return value;
}

std::string Lower(std::string_view text) {
  std::string out(text);
  std::transform(out.begin(), out.end(), out.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return out;
}

// The caller's passwd name: filters without --user pick one's own jobs.
std::string CallerName() {
  const passwd* pw = getpwuid(getuid());
  return pw ? pw->pw_name : "";
}

// The live states a cancel filter names: PD (also what waits after running out of memory), R
// or RO, as codes, Slurm's words or the API's; empty when it names none of them.
std::optional<std::vector<JobState>> LiveStatesNamed(std::string_view text) {
  const std::optional<JobState> state = StateNamed(text);
  if (state == JobState::kQueued)
    return std::vector<JobState>{JobState::kQueued, JobState::kRecovering};
  if (state == JobState::kRunning || state == JobState::kRecovering)
    return std::vector<JobState>{*state};
  return std::nullopt;
}

// One request for many jobs, in batches the API accepts; prints each job's answer. 1 when any
// failed.
// `alone`: the ids among `jobs` that are one job each (an array's id there is its first task),
// sent in requests of their own.
int ControlJobs(const ClientOptions& o, api::JobAction action, const std::vector<JobId>& jobs,
                const std::set<long long>& alone = {}) {
  // Asked before acting, while the jobs are live: a task of an array answers as ARRAY_TASK, an
  // array's id acting for the whole array as itself.
  std::map<JobId, std::string> names;
  if (!o.json) {
    for (const auto& [id, text] : LiveJobIdTexts(o, jobs)) {
      names[id] = alone.count(id) || text.find('_') == std::string::npos ||
                          !text.starts_with(std::to_string(id) + "_")
                      ? text
                      : std::to_string(id);
    }
  }
  const auto name = [&](JobId id) {
    const auto it = names.find(id);
    return it != names.end() ? it->second : std::to_string(id);
  };
  std::vector<api::ControlResult> results;
  for (const bool each_alone : {false, true}) {
    std::vector<JobId> group;
    for (JobId id : jobs) {
      if (alone.count(id) == (each_alone ? 1u : 0u)) group.push_back(id);
    }
    for (size_t begin = 0; begin < group.size(); begin += api::kMaxControlJobs) {
      const size_t end = std::min(group.size(), begin + api::kMaxControlJobs);
      api::ControlRequest request{action, {group.begin() + begin, group.begin() + end}, each_alone};
      auto reply = Call(o, request);
      if (!reply.ok()) return Fail(o, reply.status());
      results.insert(results.end(), reply->results.begin(), reply->results.end());
    }
  }
  bool failed = false;
  for (const api::ControlResult& r : results) failed = failed || !r.ok;
  if (o.json) {
    fmt::print("{}\n", api::EncodeReply(api::ControlReply{results}));
  } else {
    for (const api::ControlResult& r : results) {
      if (r.ok) {
        fmt::print("job {}: {}\n", name(r.job), Printable(r.state));
      } else {
        // colod's reason names the job itself ("job 12 is running; ...").
        const bool named = r.error.starts_with(fmt::format("job {} ", r.job));
        fmt::print(
            stderr, "colo: {}{}\n",
            named ? fmt::format("job {} ", name(r.job)) : fmt::format("job {}: ", name(r.job)),
            Printable(named ? r.error.substr(fmt::format("job {} ", r.job).size()) : r.error));
      }
    }
  }
  return failed ? 1 : 0;
}

int Cancel(const ClientOptions& o) {
  std::vector<JobId> jobs(o.jobs.begin(), o.jobs.end());
  const bool filtered = !o.user.empty() || !o.name.empty() || !o.state_filter.empty();
  if (jobs.empty() && !filtered)
    return Fail(o, InvalidArgument("cancel what? give job ids, or --user, --name or --state"),
                kExitUsage);
  if (jobs.size() == 1 && !filtered && o.named_as_task.empty() && o.json) {
    // One job: the cancel request and reply of one job, as before there were several.
    auto reply = Call(o, api::CancelRequest{jobs.front()});
    if (!reply.ok()) return Fail(o, reply.status());
    fmt::print("{}\n", api::EncodeReply(*reply));
    return 0;
  }
  if (filtered) {
    std::optional<std::vector<JobState>> states;
    if (!o.state_filter.empty()) {
      states = LiveStatesNamed(o.state_filter);
      if (!states)
        return Fail(o,
                    InvalidArgument(fmt::format(
                        "--state: '{}' is not PENDING (PD), RUNNING (R) or RECOVERING (RO)",
                        Printable(o.state_filter))),
                    kExitUsage);
    }
    // One's own jobs unless another user is named (root may name anyone; others are refused).
    const std::string user = o.user.empty() && getuid() != 0 ? CallerName() : o.user;
    auto queue = CallQueue(o, user);
    if (!queue.ok()) return Fail(o, queue.status());
    std::vector<JobId> matching;
    for (const api::JobSummary& j : queue->jobs) {
      if (!o.name.empty() && j.name != o.name) continue;
      if (states && std::find(states->begin(), states->end(), j.state) == states->end()) continue;
      if (!jobs.empty() && std::find(jobs.begin(), jobs.end(), j.id) == jobs.end()) continue;
      matching.push_back(j.id);
    }
    if (matching.empty()) {
      if (!o.json) fmt::print(stderr, "colo: no job matches\n");
      return 0;
    }
    jobs = std::move(matching);
  }
  // Jobs chosen by filters or named as ARRAY_TASK are each one job: an array's id among them is
  // its first task, not the whole array.
  return ControlJobs(o, api::JobAction::kCancel, jobs,
                     filtered ? std::set<long long>(jobs.begin(), jobs.end()) : o.named_as_task);
}

// The exit status `colo wait` gives for an ended job: 0 for success, else its exit code (a
// shell's 128+N for a signal), else 1.
int ExitStatusOf(const api::JobSummary& job) {
  if (job.state == JobState::kSucceeded) return 0;
  if (job.exit_signal && *job.exit_signal > 0 && *job.exit_signal < 128)
    return 128 + *job.exit_signal;  // as a shell says a signal ended a command
  if (job.exit_code && *job.exit_code > 0 && *job.exit_code < 256) return *job.exit_code;
  return 1;
}

int Wait(const ClientOptions& o) {
  // An array's id waits for every task of it (sbatch --wait), unless named as ARRAY_TASK.
  std::vector<JobId> jobs;
  for (long long id : o.jobs) {
    auto first = Call(o, api::ShowRequest{id});
    if (!first.ok()) return Fail(o, first.status());
    if (o.named_as_task.count(id) || first->job.summary.array_job != id) {
      jobs.push_back(id);
      continue;
    }
    auto tasks = ArrayTasks(o, id);
    if (!tasks.ok()) return Fail(o, tasks.status());
    jobs.insert(jobs.end(), tasks->begin(), tasks->end());
  }
  std::map<JobId, std::optional<api::JobSummary>> ended;
  for (JobId id : jobs) ended[id];
  // Bounded polling: quick at first (short jobs), then every 2 s at most.
  auto interval = std::chrono::milliseconds(200);
  for (;;) {
    bool all = true;
    for (auto& [id, summary] : ended) {
      if (summary) continue;
      auto reply = Call(o, api::ShowRequest{id});
      if (!reply.ok()) return Fail(o, reply.status());
      if (IsTerminal(reply->job.summary.state)) {
        summary = reply->job.summary;
        if (!o.json)
          fmt::print("job {}: {}{}\n", JobIdText(*summary), ToString(summary->state),
                     summary->exit_code ? fmt::format(" (exit code {})", *summary->exit_code) : "");
      } else {
        all = false;
      }
    }
    if (all) break;
    std::this_thread::sleep_for(interval);
    interval = std::min(interval * 2, std::chrono::milliseconds(2000));
  }
  int status = 0;
  for (JobId id : jobs) {
    const int s = ExitStatusOf(*ended[id]);
    if (status == 0) status = s;
  }
  if (o.json) {
    api::QueueReply reply;
    for (JobId id : jobs) reply.jobs.push_back(*ended[id]);
    fmt::print("{}\n", api::EncodeReply(reply));
  }
  return status;
}

}  // namespace

std::map<JobId, std::string> LiveJobIdTexts(const ClientOptions& o,
                                            const std::vector<JobId>& jobs) {
  // A few jobs are each the first of a one-job page of the queue: naming them costs a request
  // each, not every page of every user's live jobs (thousands where arrays wait).
  constexpr size_t kAskedOneByOne = 16;
  const std::set<JobId> wanted(jobs.begin(), jobs.end());
  std::map<JobId, std::string> names;
  if (wanted.empty()) return names;
  // On failure, the ids alone; the command itself reports the error.
  if (wanted.size() > kAskedOneByOne) {
    auto queue = CallQueue(o);
    if (!queue.ok()) return names;
    for (const api::JobSummary& j : queue->jobs) {
      if (wanted.count(j.id)) names[j.id] = JobIdText(j);
    }
    return names;
  }
  auto client = Connect(o);
  if (!client.ok()) return names;
  for (JobId id : wanted) {
    api::QueueRequest request;
    request.limit = 1;
    if (id > 1) request.after = id - 1;
    auto page = client->Call(request);
    if (!page.ok()) return names;
    if (!page->jobs.empty() && page->jobs.front().id == id)
      names[id] = JobIdText(page->jobs.front());
  }
  return names;
}

Result<api::JobSignal> ParseSignalOption(std::string_view text) {
  std::string_view rest = text;
  // R: (Slurm's "not at a reservation's end") has no meaning here: only B: is taken.
  if (rest.starts_with("B:")) rest.remove_prefix(2);
  api::JobSignal signal;
  const size_t at = rest.find('@');
  if (at != std::string_view::npos) {
    const auto lead = Number(rest.substr(at + 1));
    if (!lead || at + 1 == rest.size() || *lead > api::kMaxSignalLeadSeconds)
      return InvalidArgument(fmt::format("--signal: '{}' is not a number of seconds 0..{} after @",
                                         Printable(rest.substr(at + 1)),
                                         api::kMaxSignalLeadSeconds));
    signal.lead_s = static_cast<int>(*lead);
    rest = rest.substr(0, at);
  }
  auto number = ParseSignal(rest);
  if (!number.ok()) return InvalidArgument("--signal: " + number.status().message());
  if (!IsJobSignal(*number))
    return InvalidArgument(
        fmt::format("--signal: {} is not one colo sends (HUP, INT, QUIT, USR1, USR2, ALRM, TERM, "
                    "URG or WINCH)",
                    SignalName(*number)));
  signal.number = *number;
  return signal;
}

Result<int64_t> ParseTimeLimit(std::string_view text) {
  const std::string lower = Lower(text);
  if (lower == "unlimited" || lower == "infinite") return int64_t{0};
  const auto bad = [&] {
    return InvalidArgument(fmt::format(
        "--time: '{}' is not a time limit (MIN, MIN:SEC, H:MIN:SEC, D-H, D-H:MIN or D-H:MIN:SEC)",
        Printable(text)));
  };
  int64_t days = 0;
  std::string_view rest = text;
  const size_t dash = text.find('-');
  const bool with_days = dash != std::string_view::npos;
  if (with_days) {
    auto d = Number(text.substr(0, dash));
    if (!d) return bad();
    days = *d;
    rest = text.substr(dash + 1);
  }
  std::vector<int64_t> parts;
  for (const std::string& part : Split(std::string(rest), ':')) {
    auto n = Number(part);
    if (!n || part.empty() || *n > 1'000'000'000) return bad();
    parts.push_back(*n);
  }
  if (parts.empty() || parts.size() > 3 || days > 1'000'000) return bad();
  int64_t seconds = 0;
  if (with_days) {
    // D-H, D-H:M, D-H:M:S
    seconds = parts[0] * 3600 + (parts.size() > 1 ? parts[1] * 60 : 0) +
              (parts.size() > 2 ? parts[2] : 0);
  } else if (parts.size() == 1) {
    seconds = parts[0] * 60;  // minutes
  } else if (parts.size() == 2) {
    seconds = parts[0] * 60 + parts[1];  // minutes:seconds
  } else {
    seconds = parts[0] * 3600 + parts[1] * 60 + parts[2];
  }
  seconds += days * 86400;
  if (seconds <= 0) return InvalidArgument("--time: the limit must be more than 0 (or UNLIMITED)");
  if (seconds > api::kMaxTimeLimitSeconds)
    return InvalidArgument(
        fmt::format("--time: at most {} days", api::kMaxTimeLimitSeconds / 86400));
  return seconds;
}

Result<api::ArraySpec> ParseArraySpec(std::string_view text, size_t max_tasks) {
  const auto bad = [&](std::string_view why) {
    return InvalidArgument(fmt::format("--array: '{}' {}", Printable(text), why));
  };
  api::ArraySpec spec;
  std::string_view list = text;
  if (const size_t percent = text.find('%'); percent != std::string_view::npos) {
    auto limit = Number(text.substr(percent + 1));
    if (!limit || *limit < 1 || *limit > static_cast<int64_t>(api::kMaxArrayTasks))
      return bad("has a bad %N (at most N tasks at once, N from 1)");
    spec.limit = static_cast<int>(*limit);
    list = text.substr(0, percent);
  }
  std::set<int> tasks;
  for (const std::string& item : Split(std::string(list), ',')) {
    std::string_view range = item;
    int64_t step = 1;
    if (const size_t colon = range.find(':'); colon != std::string_view::npos) {
      auto s = Number(range.substr(colon + 1));
      if (!s || *s < 1) return bad("has a bad step (after ':')");
      step = *s;
      range = range.substr(0, colon);
    }
    const size_t dash = range.find('-');
    auto first = Number(range.substr(0, dash));
    auto last = dash == std::string_view::npos ? first : Number(range.substr(dash + 1));
    if (!first || !last || *first > *last || *last > api::kMaxArrayTaskId)
      return bad(fmt::format("is not a list of task ids or ranges A-B[:STEP] from 0 to {}",
                             api::kMaxArrayTaskId));
    for (int64_t t = *first; t <= *last; t += step) {
      tasks.insert(static_cast<int>(t));
      if (tasks.size() > max_tasks) return bad(fmt::format("has more than {} tasks", max_tasks));
    }
  }
  spec.tasks.assign(tasks.begin(), tasks.end());
  return spec;
}

Result<std::vector<api::Dependency>> ParseDependencyList(std::string_view text) {
  std::vector<api::Dependency> out;
  for (const std::string& item : Split(std::string(text), ',')) {
    const std::vector<std::string> words = Split(item, ':');
    if (words.size() < 2)
      return InvalidArgument(
          fmt::format("--dependency: '{}' is not TYPE:JOBID[:JOBID...]", Printable(item)));
    auto kind = api::ParseDependencyKind(Lower(words[0]));
    if (!kind.ok())
      return InvalidArgument(fmt::format(
          "--dependency: '{}' is not afterok, afterany or afternotok", Printable(words[0])));
    for (size_t i = 1; i < words.size(); ++i) {
      auto id = Number(words[i]);
      if (!id || *id < 1)
        return InvalidArgument(
            fmt::format("--dependency: '{}' is not a job id", Printable(words[i])));
      out.push_back(api::Dependency{*kind, *id});
    }
  }
  if (out.size() > api::kMaxDependencies)
    return InvalidArgument(fmt::format("--dependency: at most {} jobs", api::kMaxDependencies));
  return out;
}

Result<std::vector<std::string>> ApplyExport(std::string_view spec,
                                             const std::vector<std::string>& environment) {
  bool all = false;
  std::vector<std::string> named;
  for (const std::string& item : Split(std::string(spec), ',')) {
    if (item == "ALL") {
      all = true;
    } else if (item == "NONE") {
    } else if (item.empty() || item.front() == '=') {
      return InvalidArgument(
          fmt::format("--export: '{}' is not NAME or NAME=value", Printable(item)));
    } else {
      named.push_back(item);
    }
  }
  std::vector<std::string> env = all ? environment : std::vector<std::string>{};
  for (const std::string& item : named) {
    std::string entry = item;
    const std::string name = item.substr(0, item.find('='));
    if (item.find('=') == std::string::npos) {
      // A bare NAME: its value here, as sbatch does.
      const auto found =
          std::find_if(environment.begin(), environment.end(),
                       [&](const std::string& e) { return e.starts_with(name + "="); });
      if (found == environment.end()) continue;
      entry = *found;
    }
    std::erase_if(env, [&](const std::string& e) { return e.starts_with(name + "="); });
    env.push_back(entry);
  }
  return env;
}

namespace {
struct JobRef {
  int64_t id = 0;
  std::optional<int64_t> task;  // set: task `task` of array `id`
};
std::optional<JobRef> ParseJobRef(std::string_view text) {
  const size_t underscore = text.find('_');
  const auto id = Number(text.substr(0, underscore));
  if (!id || *id <= 0) return std::nullopt;
  if (underscore == std::string_view::npos) return JobRef{*id, std::nullopt};
  const auto task = Number(text.substr(underscore + 1));
  if (!task || *task > api::kMaxArrayTaskId) return std::nullopt;
  return JobRef{*id, *task};
}
}  // namespace

bool IsJobRef(std::string_view text) {
  return ParseJobRef(text).has_value();
}

CLI::Validator JobRefValidator() {
  return CLI::Validator(
      [](std::string& text) {
        return IsJobRef(text) ? std::string()
                              : fmt::format("'{}' is not a job id (ID, or ARRAY_TASK such as 12_3)",
                                            Printable(text));
      },
      "ID|ARRAY_TASK");
}

namespace {
// The live jobs, then the history (newest first) back to `lowest`, until `found` says stop.
// A task's id is never below its array's, so an array's tasks are all found above it.
Status ScanJobs(const ClientOptions& o, JobId lowest,
                const std::function<bool(const api::JobSummary&)>& found) {
  auto live = CallQueue(o);
  if (!live.ok()) return live.status();
  for (const api::JobSummary& j : live->jobs) {
    if (found(j)) return Status::Ok();
  }
  api::HistoryRequest request;
  request.all = true;
  request.limit = api::kMaxHistoryPage;
  for (;;) {
    auto page = Call(o, request);
    if (!page.ok()) return page.status();
    for (const api::JobSummary& j : page->jobs) {
      if (found(j)) return Status::Ok();
    }
    if (!page->next || *page->next <= lowest) return Status::Ok();
    request.before = page->next;
  }
}

}  // namespace

Result<std::vector<JobId>> ArrayTasks(const ClientOptions& o, JobId array) {
  std::set<JobId> tasks;
  COLO_RETURN_IF_ERROR(ScanJobs(o, array, [&](const api::JobSummary& j) {
    if (j.array_job == array) tasks.insert(j.id);
    return false;
  }));
  return std::vector<JobId>(tasks.begin(), tasks.end());
}

Result<JobId> ResolveJobRef(const ClientOptions& o, std::string_view text) {
  const std::optional<JobRef> ref = ParseJobRef(text);
  if (!ref) return InvalidArgument(fmt::format("'{}' is not a job id", Printable(text)));
  if (!ref->task) return ref->id;
  std::optional<JobId> task;
  COLO_RETURN_IF_ERROR(ScanJobs(o, ref->id, [&](const api::JobSummary& j) {
    if (j.array_job == ref->id && j.array_task == *ref->task) task = j.id;
    return task.has_value();
  }));
  if (!task) return NotFound(fmt::format("no task {} of array {}", *ref->task, ref->id));
  return *task;
}

void AddControlCommands(CLI::App& app, ClientOptions& o) {
  auto* cancel = app.add_subcommand(
      "cancel", "cancel jobs by id or by filters (like scancel; your own, root any)");
  cancel->add_option("jobs", o.job_refs, "job ids (ARRAY_TASK for one task of an array)")
      ->check(JobRefValidator());
  cancel->add_option("-u,--user", o.user, "only this user's jobs (default with filters: yours)");
  cancel->add_option("-n,--name", o.name, "only jobs with this name");
  cancel->add_option("-t,--state", o.state_filter,
                     "only jobs in this state: PD (pending), R (running) or RO (recovering)");
  cancel->add_flag("--json", o.json, kJsonHelp);
  for (auto [name, help] :
       {std::pair{"hold", "keep waiting jobs from starting (like scontrol hold)"},
        std::pair{"release", "let held jobs start (like scontrol release)"},
        std::pair{"requeue",
                  "stop a running job and queue it again, or queue an ended one again (like "
                  "scontrol requeue)"},
        std::pair{"wait",
                  "wait until jobs end; exits with the first failing job's exit code (0: all "
                  "succeeded)"}}) {
    auto* sub = app.add_subcommand(name, help);
    sub->add_option("jobs", o.job_refs, "job ids (ARRAY_TASK for one task of an array)")
        ->required()
        ->check(JobRefValidator());
    sub->add_flag("--json", o.json, kJsonHelp);
  }
}

int RunControlCommand(CLI::App& app, const ClientOptions& o) {
  const std::vector<JobId> jobs(o.jobs.begin(), o.jobs.end());
  if (app.got_subcommand("cancel")) return Cancel(o);
  if (app.got_subcommand("hold")) return ControlJobs(o, api::JobAction::kHold, jobs);
  if (app.got_subcommand("release")) return ControlJobs(o, api::JobAction::kRelease, jobs);
  if (app.got_subcommand("requeue")) return ControlJobs(o, api::JobAction::kRequeue, jobs);
  if (app.got_subcommand("wait")) return Wait(o);
  return -1;
}

}  // namespace colo
