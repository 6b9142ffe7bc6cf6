// colo's SPANK plugin: Slurm keeps the cluster's queue and picks the node and the GPU, booking
// GPU memory per GPU (shards, docs/slurm-design.md); the node's colod runs the job on the GPU
// Slurm chose, sets its MPS limits, watches it and recovers out-of-memory crashes through
// Slurm's requeue.
//
// Local context (sbatch, srun, salloc, as the user): the options are checked, an estimate file
// is turned into a memory need (`colo estimate`), and the need is handed to job_submit/lua (which
// books it as shards of one GPU) through the job-control environment.
// Remote context (slurmstepd, as root): every step of a GPU job asks the node's colod for the
// job's placement (one Slurm job is one tenant), waits while colod starts it, and exports the
// answer into its tasks; the batch script's end is reported. slurmd's prolog (as root) tells
// colod which run of the job begins and what Slurm booked for it, its epilog that the job is
// over on the node. A step that cannot reach colod puts its job back in Slurm's queue and drains
// the node until colod is back (colod resumes it, as does packaging/slurm/colo-health-check).
//
// Plugin arguments (plugstack.conf): socket=PATH (%h: this host's name; default
// /run/colo/colod.sock), colo=PATH (default /usr/bin/colo), scontrol=PATH (default
// /usr/bin/scontrol), unreachable=requeue|fail|run (default requeue), connect_timeout=SECONDS
// (default 10), max_wait=SECONDS (default 600), end_wait=SECONDS (default 60: how long a failed
// batch script's step waits for colod to judge its end, so that a job colod requeues after an
// out-of-memory crash is never seen by Slurm as failed).
extern "C" {
#include <slurm/slurm.h>
#include <slurm/spank.h>
}

#include <fmt/format.h>
#include <stdarg.h>
#include <stdio.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "api/client.h"
#include "common/strings.h"
#include "common/subprocess.h"
#include "common/units.h"

extern "C" {
extern const char plugin_name[];
extern const char plugin_type[];
extern const unsigned int plugin_version;
const char plugin_name[] = "colo";
const char plugin_type[] = "spank";
const unsigned int plugin_version = SLURM_VERSION_NUMBER;
}

namespace {

using colo::Bytes;

// What a step does when its node's colod cannot be reached.
enum class Unreachable {
  kRequeue,  // back to Slurm's queue, and the node drained until colod is back
  kFail,
  kRun,  // without colo
};

struct Settings {
  std::string socket = "/run/colo/colod.sock";
  std::string colo = "/usr/bin/colo";
  std::string scontrol = "/usr/bin/scontrol";
  Unreachable unreachable = Unreachable::kRequeue;
  int connect_timeout_s = 10;
  int max_wait_s = 600;
  int end_wait_s = 60;
};

// What the user asked for (the options' callbacks fill it, in every context).
struct Request {
  std::optional<Bytes> memory;
  std::string estimate_from;
  int batch = 0;
  int gpus = 0;  // 0: not given (1)
  std::string share;
  bool any() const {
    return memory || !estimate_from.empty() || batch > 0 || gpus > 0 || !share.empty();
  }
};

Settings g_settings;
Request g_request;
bool g_attached = false;  // this step asked colod and got GPUs
// Why this step may not run (colod refused it, or could not be asked). It fails in its tasks,
// not in slurmstepd's setup: a step whose plugin stack fails to start drains the node.
std::string g_refusal;
std::vector<std::string> g_env;
std::vector<std::string> g_env_defaults;  // set only where the step has not set them itself

bool ParseSettings(int argc, char** argv) {
  for (int i = 0; i < argc; ++i) {
    const std::string arg = argv[i];
    const size_t eq = arg.find('=');
    const std::string key = arg.substr(0, eq),
                      value = eq == std::string::npos ? "" : arg.substr(eq + 1);
    if (key == "socket") {
      g_settings.socket = value;
    } else if (key == "colo") {
      g_settings.colo = value;
    } else if (key == "scontrol") {
      g_settings.scontrol = value;
    } else if (key == "unreachable" && value == "requeue") {
      g_settings.unreachable = Unreachable::kRequeue;
    } else if (key == "unreachable" && value == "fail") {
      g_settings.unreachable = Unreachable::kFail;
    } else if (key == "unreachable" && value == "run") {
      g_settings.unreachable = Unreachable::kRun;
    } else if (key == "connect_timeout" && atoi(value.c_str()) > 0) {
      g_settings.connect_timeout_s = atoi(value.c_str());
    } else if (key == "max_wait" && atoi(value.c_str()) > 0) {
      g_settings.max_wait_s = atoi(value.c_str());
    } else if (key == "end_wait" && atoi(value.c_str()) > 0) {
      g_settings.end_wait_s = atoi(value.c_str());
    } else {
      slurm_error("colo: unknown plugin argument '%s' in plugstack.conf", arg.c_str());
      return false;
    }
  }
  return true;
}

std::string SocketPath() {
  std::string path = g_settings.socket;
  const size_t at = path.find("%h");
  if (at != std::string::npos) {
    char host[256] = {};
    gethostname(host, sizeof host - 1);
    path.replace(at, 2, host);
  }
  return path;
}

// The options sbatch, srun and salloc take for colo; each is checked where the user gives it.

int OnMem(int, const char* value, int) {
  auto bytes = colo::ParseBytes(value ? value : "");
  if (!bytes.ok() || *bytes <= Bytes(0) || bytes->count() > (int64_t{1} << 50)) {
    slurm_error(
        "colo: --colo-mem=%s: %s", value ? value : "",
        bytes.ok() ? "must be more than 0 and at most 1 PiB" : bytes.status().message().c_str());
    return -1;
  }
  g_request.memory = *bytes;
  return 0;
}

int OnEstimateFrom(int, const char* value, int) {
  if (!value || !*value) {
    slurm_error("colo: --colo-estimate-from needs a model summary file");
    return -1;
  }
  g_request.estimate_from = value;
  return 0;
}

int PositiveInt(const char* value, const char* option, int max, int& out) {
  char* end = nullptr;
  errno = 0;
  const long n = value ? strtol(value, &end, 10) : 0;
  if (!value || !*value || *end || errno || n < 1 || n > max) {
    slurm_error("colo: %s=%s: must be a whole number from 1 to %d", option, value ? value : "",
                max);
    return -1;
  }
  out = static_cast<int>(n);
  return 0;
}

int OnBatch(int, const char* value, int) {
  return PositiveInt(value, "--colo-batch", 1 << 20, g_request.batch);
}

int OnGpus(int, const char* value, int) {
  return PositiveInt(value, "--colo-gpus", 64, g_request.gpus);
}

int OnShare(int, const char* value, int) {
  const std::string v = value ? value : "";
  if (v != "mps" && v != "plain" && v != "exclusive") {
    slurm_error("colo: --colo-share=%s: must be mps, plain or exclusive", v.c_str());
    return -1;
  }
  g_request.share = v;
  return 0;
}

struct spank_option g_options[] = {
    {const_cast<char*>("colo-mem"), const_cast<char*>("SIZE"),
     const_cast<char*>("[colo] GPU memory the job needs per GPU, e.g. 12GiB: colo places it on a "
                       "GPU with room for it"),
     1, 0, OnMem},
    {const_cast<char*>("colo-estimate-from"), const_cast<char*>("FILE"),
     const_cast<char*>("[colo] estimate the GPU memory from a model summary (as colo estimate)"), 1,
     0, OnEstimateFrom},
    {const_cast<char*>("colo-batch"), const_cast<char*>("N"),
     const_cast<char*>("[colo] batch size for --colo-estimate-from"), 1, 0, OnBatch},
    {const_cast<char*>("colo-gpus"), const_cast<char*>("N"),
     const_cast<char*>("[colo] GPUs per node colo gives the job (default 1)"), 1, 0, OnGpus},
    {const_cast<char*>("colo-share"), const_cast<char*>("MODE"),
     const_cast<char*>("[colo] how its GPU is shared: mps, plain or exclusive"), 1, 0, OnShare},
    SPANK_OPTIONS_TABLE_END};

// What runs in the local context: sbatch, srun and salloc, as the user.

// `colo estimate` as the user, where the user's files are: the same answer `colo submit
// --estimate-from` plans with (the best estimator's upper bound).
std::optional<Bytes> Estimate() {
  std::vector<std::string> argv = {g_settings.colo, "estimate", "--json", g_request.estimate_from};
  if (g_request.batch > 0) {
    argv.push_back("--batch");
    argv.push_back(std::to_string(g_request.batch));
  }
  std::vector<std::string> env;
  for (char** e = environ; e && *e; ++e) env.push_back(*e);
  auto run = colo::RunCommand(argv, env, std::chrono::seconds(60));
  if (!run.ok() || run->exit_code != 0) {
    slurm_error("colo: --colo-estimate-from=%s: %s", g_request.estimate_from.c_str(),
                run.ok() ? run->output.substr(0, 2000).c_str() : run.status().message().c_str());
    return std::nullopt;
  }
  // RunCommand gives stdout and stderr as one: colo estimate's warnings (its lines that start
  // "colo estimate: ") come before the JSON, which stdout writes at once when colo exits.
  std::string json_text;
  for (const std::string& line : colo::Split(run->output, '\n')) {
    if (line.rfind("colo estimate: ", 0) != 0) json_text += line + "\n";
  }
  const auto j = nlohmann::json::parse(json_text, nullptr, false);
  if (j.is_object() && j.contains("best") && j["best"].is_string()) {
    for (const auto& e : j.value("estimates", nlohmann::json::array())) {
      if (e.is_object() && e.value("estimator", "") == j["best"].get<std::string>() &&
          e.contains("upper") && e["upper"].is_number_integer())
        return Bytes(e["upper"].get<int64_t>());
    }
  }
  slurm_error("colo: no estimator could answer for %s (run colo estimate %s to see why)",
              g_request.estimate_from.c_str(), g_request.estimate_from.c_str());
  return std::nullopt;
}

int LocalPostOpt(spank_t sp) {
  if (!g_request.any()) return 0;
  if (g_request.memory && !g_request.estimate_from.empty()) {
    slurm_error("colo: give --colo-mem or --colo-estimate-from, not both");
    return -1;
  }
  if (g_request.batch > 0 && g_request.estimate_from.empty()) {
    slurm_error("colo: --colo-batch goes with --colo-estimate-from");
    return -1;
  }
  if (!g_request.estimate_from.empty()) {
    auto estimate = Estimate();
    if (!estimate) return -1;
    g_request.memory = *estimate;
  }
  const std::string share = g_request.share.empty() ? "any" : g_request.share;
  const int gpus = g_request.gpus > 0 ? g_request.gpus : 1;
  if (g_request.memory) {
    const std::string bytes = std::to_string(g_request.memory->count());
    // For job_submit/lua (a gpumem GRES) and the epilog; and for the job's own steps, where an
    // estimate is not made again (slurmstepd runs as root and does not read users' files).
    spank_job_control_setenv(sp, "COLO_MEM", bytes.c_str(), 1);
  }
  spank_job_control_setenv(sp, "COLO_GPUS", std::to_string(gpus).c_str(), 1);
  spank_job_control_setenv(sp, "COLO_SHARE", share.c_str(), 1);
  return 0;
}

// What runs in the remote context: slurmd and slurmstepd, on the node that runs the job.

std::string Getenv(spank_t sp, const char* name) {
  char value[4096] = {};
  if (spank_getenv(sp, name, value, sizeof value) != ESPANK_SUCCESS) return "";
  return value;
}

// COLO_MEM as the local context wrote it: a whole number of bytes (not colo's SIZE syntax, in
// which a bare number is MiB).
std::optional<Bytes> ByteCount(const char* text) {
  if (!text || !*text) return std::nullopt;
  char* end = nullptr;
  errno = 0;
  const long long n = strtoll(text, &end, 10);
  if (*end || errno || n <= 0 || n > (1LL << 50)) return std::nullopt;
  return Bytes(n);
}

// "0,2" (SLURM_JOB_GPUS) as its numbers; an entry that is not one ends the list.
std::vector<int> GpuIndexes(const char* list) {
  std::vector<int> out;
  for (const char* p = list; p && *p && out.size() < 64;) {
    char* end = nullptr;
    errno = 0;
    const long n = strtol(p, &end, 10);
    if (end == p || errno || n < 0 || n > 1023 || (*end && *end != ',')) break;
    out.push_back(static_cast<int>(n));
    p = *end ? end + 1 : end;
  }
  return out;
}

int CountList(const std::string& list) {
  if (list.empty()) return 0;
  int n = 1;
  for (char c : list) n += c == ',';
  return n;
}

colo::Result<colo::api::Client> ConnectWithRetry(const std::string& path, int timeout_s) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(timeout_s);
  for (;;) {
    auto client = colo::api::Client::Connect(path, std::chrono::seconds(30));
    if (client.ok() || std::chrono::steady_clock::now() >= deadline) return client;
    // colod restarting: it is back within seconds, and the job should not fail for that.
    std::this_thread::sleep_for(std::chrono::milliseconds(250));
  }
}

// Logs why the step cannot run, for its tasks to fail with (slurm_spank_task_init).
[[gnu::format(printf, 1, 2)]] int Refuse(const char* format, ...) {
  char text[2048];
  va_list args;
  va_start(args, format);
  vsnprintf(text, sizeof text, format, args);
  va_end(args);
  slurm_error("%s", text);
  g_refusal = text;
  return 0;
}

// Runs Slurm's scontrol as root, with slurmstepd's environment (its SLURM_CONF).
colo::Result<colo::CommandResult> Scontrol(std::vector<std::string> args) {
  args.insert(args.begin(), g_settings.scontrol);
  std::vector<std::string> env;
  for (char** e = environ; e && *e; ++e) env.push_back(*e);
  return colo::RunCommand(args, env, std::chrono::seconds(15), 64 << 10);
}

// Drains `node` so that Slurm sends it no more jobs while its colod is away; a node an
// administrator drained keeps their reason (colod resumes only drains of colo's own).
std::string DrainNode(const std::string& node, const std::string& why) {
  if (node.empty()) return "the node's name is unknown, so it was not drained";
  auto shown = Scontrol({"show", "node", "-o", node});
  if (shown.ok() && shown->exit_code == 0 && shown->output.find("DRAIN") != std::string::npos &&
      shown->output.find("Reason=colo:") == std::string::npos) {
    return "node " + node + " stays drained by its administrator";
  }
  auto drained = Scontrol({"update", "NodeName=" + node, "State=DRAIN", "Reason=colo: " + why});
  if (!drained.ok() || drained->exit_code != 0) {
    return "node " + node + " could not be drained: " +
           (drained.ok() ? drained->output.substr(0, 500) : drained.status().message());
  }
  return "node " + node + " is drained until colod is back";
}

// This node's colod cannot be reached: the job goes back to Slurm's queue (a job that cannot be
// requeued fails) and the node is drained, or, with unreachable=run, the job runs without colo.
int Unreached(spank_t sp, uint32_t job_id, const std::string& path, const std::string& error) {
  if (g_settings.unreachable == Unreachable::kRun) {
    slurm_info("colo: job %u runs without colo: colod at %s is unreachable (%s)", job_id,
               path.c_str(), error.c_str());
    return 0;
  }
  if (g_settings.unreachable == Unreachable::kFail) {
    return Refuse("colo: job %u cannot start: this node's colod (%s) is unreachable: %s", job_id,
                  path.c_str(), error.c_str());
  }
  const std::string node = Getenv(sp, "SLURMD_NODENAME");
  const std::string drained =
      DrainNode(node, fmt::format("colod unreachable at {} ({})", path, error).substr(0, 200));
  auto requeued = Scontrol({"requeue", std::to_string(job_id)});
  if (!requeued.ok() || requeued->exit_code != 0) {
    return Refuse(
        "colo: job %u cannot start: this node's colod (%s) is unreachable: %s; Slurm "
        "did not requeue it (%s); %s",
        job_id, path.c_str(), error.c_str(),
        requeued.ok() ? requeued->output.substr(0, 500).c_str()
                      : requeued.status().message().c_str(),
        drained.c_str());
  }
  return Refuse(
      "colo: job %u goes back to Slurm's queue: this node's colod (%s) is unreachable: "
      "%s; %s",
      job_id, path.c_str(), error.c_str(), drained.c_str());
}

int RemotePostOpt(spank_t sp) {
  uint32_t job_id = 0, uid = 0;
  if (spank_get_item(sp, S_JOB_ID, &job_id) != ESPANK_SUCCESS ||
      spank_get_item(sp, S_JOB_UID, &uid) != ESPANK_SUCCESS)
    return 0;
  colo::api::SlurmAttachRequest request;
  request.job = job_id;
  request.uid = uid;
  request.name = Getenv(sp, "SLURM_JOB_NAME");
  uint32_t restarts = 0;
  if (spank_get_item(sp, S_SLURM_RESTART_COUNT, &restarts) != ESPANK_SUCCESS)
    restarts = static_cast<uint32_t>(atoi(Getenv(sp, "SLURM_RESTART_COUNT").c_str()));
  request.restarts = static_cast<int>(std::min<uint32_t>(restarts, 1u << 20));
  if (g_request.any()) {
    if (!g_request.estimate_from.empty()) {
      // What the local context put in the job-control environment reaches every step with
      // Slurm's prefix.
      const auto bytes = ByteCount(Getenv(sp, "SLURM_SPANK_COLO_MEM").c_str());
      if (!bytes) {
        return Refuse(
            "colo: job %u: the estimate made at submission did not reach the job; "
            "give the memory with --colo-mem",
            job_id);
      }
      g_request.memory = *bytes;
    }
    request.memory = g_request.memory;
    request.gpus = g_request.gpus > 0 ? g_request.gpus : 1;
    auto share = colo::ParseSharingPreference(g_request.share.empty() ? "any" : g_request.share);
    request.share = share.ok() ? *share : colo::SharingPreference::kAny;
  } else {
    // GPUs from Slurm without colo's options (whole GPUs, or shards of one GPU, which Slurm
    // 22.05 announces with SLURM_SHARDS_ON_NODE alone): colod runs the job on the GPUs Slurm
    // booked, as slurmd's prolog told it.
    std::string gpus = Getenv(sp, "SLURM_STEP_GPUS");
    if (gpus.empty()) gpus = Getenv(sp, "SLURM_JOB_GPUS");
    const bool shards = !Getenv(sp, "SLURM_SHARDS_ON_NODE").empty();
    if (CountList(gpus) == 0 && !shards) return 0;  // no GPUs: nothing of colo's
    request.gpus = std::max(CountList(gpus), 1);
  }
  const std::string path = SocketPath();
  auto first = ConnectWithRetry(path, g_settings.connect_timeout_s);
  if (!first.ok()) return Unreached(sp, job_id, path, first.status().message());
  std::optional<colo::api::Client> client;
  client.emplace(std::move(*first));
  const auto deadline =
      std::chrono::steady_clock::now() + std::chrono::seconds(g_settings.max_wait_s);
  auto pause = std::chrono::milliseconds(20);
  for (;;) {
    auto reply = client->Call(request);
    if (!reply.ok() && reply.status().code() != colo::StatusCode::kUnavailable) {
      // colod answered, and refused: asking again would get the same answer.
      return Refuse("colo: job %u: colod refused it: %s", job_id, reply.status().message().c_str());
    }
    if (!reply.ok()) {
      if (std::chrono::steady_clock::now() >= deadline) {
        return Refuse("colo: job %u: colod did not answer within %d s: %s", job_id,
                      g_settings.max_wait_s, reply.status().message().c_str());
      }
      // A restarted colod: connect again and ask again (the job is stored, or is asked for anew).
      auto again = ConnectWithRetry(path, g_settings.connect_timeout_s);
      client.reset();
      if (!again.ok()) return Unreached(sp, job_id, path, again.status().message());
      client.emplace(std::move(*again));
      continue;
    }
    switch (reply->state) {
      case colo::api::SlurmPlacement::kPlaced:
        g_env = reply->env;
        g_env_defaults = reply->env_defaults;
        g_attached = true;
        return 0;
      case colo::api::SlurmPlacement::kRequeue:
        return Refuse("colo: job %u goes back to Slurm's queue: %s", job_id, reply->reason.c_str());
      case colo::api::SlurmPlacement::kFailed:
        return Refuse("colo: job %u cannot run here: %s", job_id, reply->reason.c_str());
      case colo::api::SlurmPlacement::kWaiting:
        break;
    }
    if (std::chrono::steady_clock::now() >= deadline) {
      return Refuse("colo: job %u waited %d s for GPUs on this node: %s", job_id,
                    g_settings.max_wait_s, reply->reason.c_str());
    }
    std::this_thread::sleep_for(pause);
    pause = std::min(pause * 2, std::chrono::milliseconds(500));
  }
}

// Tells colod; while colod judges a failed run ("ending"), asks again, so that the step ends
// only once colod has requeued the job or let it fail.
void SendEnd(uint32_t job_id, std::optional<int> wait_status) {
  const std::string path = SocketPath();
  auto connected = colo::api::Client::Connect(path, std::chrono::seconds(5));
  if (!connected.ok()) return;  // colod reconciles with Slurm when it is back
  std::optional<colo::api::Client> client;
  client.emplace(std::move(*connected));
  colo::api::SlurmEndRequest end;
  end.job = job_id;
  end.wait_status = wait_status;
  const auto deadline =
      std::chrono::steady_clock::now() + std::chrono::seconds(g_settings.end_wait_s);
  auto pause = std::chrono::milliseconds(20);
  for (;;) {
    auto reply = client->Call(end);
    if (reply.ok() && reply->state != "ending") return;
    if (std::chrono::steady_clock::now() >= deadline) {
      slurm_info("colo: job %u: colod did not judge its end within %d s", job_id,
                 g_settings.end_wait_s);
      return;
    }
    if (!reply.ok()) {
      // colod restarting while it judged: ask the new one (it reads Slurm's record itself).
      auto again = ConnectWithRetry(path, g_settings.connect_timeout_s);
      client.reset();
      if (!again.ok()) return;
      client.emplace(std::move(*again));
      continue;
    }
    std::this_thread::sleep_for(pause);
    pause = std::min(pause * 2, std::chrono::milliseconds(500));
  }
}

}  // namespace

extern "C" {

int slurm_spank_init(spank_t sp, int argc, char** argv) {
  if (!ParseSettings(argc, argv)) return -1;
  for (struct spank_option& option : g_options) {
    if (!option.name) break;
    if (spank_option_register(sp, &option) != ESPANK_SUCCESS) return -1;
  }
  return 0;
}

int slurm_spank_init_post_opt(spank_t sp, int, char**) {
  switch (spank_context()) {
    case S_CTX_LOCAL:
    case S_CTX_ALLOCATOR:
      return LocalPostOpt(sp);
    case S_CTX_REMOTE:
      return RemotePostOpt(sp);
    default:
      return 0;
  }
}

// As the user, just before exec: the tasks see colo's GPUs and limits.
int slurm_spank_task_init(spank_t sp, int, char**) {
  if (!g_refusal.empty()) {
    // The task's stderr is the job's: the user reads why there. Failing here ends the task
    // with exit code 1, as a failed job; the node stays in service.
    fprintf(stderr, "%s\n", g_refusal.c_str());
    return -1;
  }
  if (!g_attached) return 0;
  for (const std::string& entry : g_env) {
    const size_t eq = entry.find('=');
    if (eq == std::string::npos) continue;
    spank_setenv(sp, entry.substr(0, eq).c_str(), entry.c_str() + eq + 1, 1);
  }
  // The frameworks' sharing settings: a user who sets one for the job keeps it. JAX's settings
  // go together: a step that chose how JAX allocates (any XLA_PYTHON_CLIENT_ variable) gets
  // none of colod's, as a job run by colod directly.
  char ignored[256];
  bool jax_chosen = false;
  for (const char* name : {"XLA_PYTHON_CLIENT_PREALLOCATE", "XLA_PYTHON_CLIENT_MEM_FRACTION",
                           "XLA_PYTHON_CLIENT_ALLOCATOR"}) {
    jax_chosen |= spank_getenv(sp, name, ignored, sizeof ignored) != ESPANK_ENV_NOEXIST;
  }
  for (const std::string& entry : g_env_defaults) {
    const size_t eq = entry.find('=');
    if (eq == std::string::npos) continue;
    if (jax_chosen && entry.starts_with("XLA_PYTHON_CLIENT_")) continue;
    spank_setenv(sp, entry.substr(0, eq).c_str(), entry.c_str() + eq + 1, 0);
  }
  return 0;
}

// The batch script's end, with its status: colod reads why it failed (out of memory?).
int slurm_spank_task_exit(spank_t sp, int, char**) {
  if (!g_attached) return 0;
  uint32_t job_id = 0, step_id = 0;
  int status = 0;
  if (spank_get_item(sp, S_JOB_ID, &job_id) != ESPANK_SUCCESS ||
      spank_get_item(sp, S_JOB_STEPID, &step_id) != ESPANK_SUCCESS ||
      spank_get_item(sp, S_TASK_EXIT_STATUS, &status) != ESPANK_SUCCESS)
    return 0;
  if (step_id == SLURM_BATCH_SCRIPT) SendEnd(job_id, status);
  return 0;
}

// slurmd, as root, when a run of a job begins on the node: tells colod which run it is. Slurm
// 22.05 gives the batch step no restart count, and colod must tell a new run (whose need an
// earlier one may have raised, on any node) from a repeated ask of the last. Never fails: a
// failed prolog drains the node.
int slurm_spank_job_prolog(spank_t sp, int argc, char** argv) {
  if (!ParseSettings(argc, argv)) return 0;
  const char* count = getenv("SLURM_JOB_RESTART_COUNT");
  const long restarts = count ? strtol(count, nullptr, 10) : 0;
  if (restarts < 0 || restarts > (1 << 20)) return 0;
  uint32_t job_id = 0;
  if (spank_get_item(sp, S_JOB_ID, &job_id) != ESPANK_SUCCESS || job_id == 0) {
    const char* id = getenv("SLURM_JOB_ID");
    job_id = id ? static_cast<uint32_t>(strtoul(id, nullptr, 10)) : 0;
  }
  if (job_id == 0) return 0;
  auto client = colo::api::Client::Connect(SocketPath(), std::chrono::seconds(5));
  if (!client.ok()) return 0;  // the step's attach finds colod, or fails with a message
  colo::api::SlurmRunRequest run;
  run.job = job_id;
  run.restarts = static_cast<int>(restarts);
  // What the job booked, from slurmd's own environment for the prolog: the job-control
  // variables of its submission (SPANK_ prefixed), which job_submit/lua planned, and its GPUs.
  const char* share = getenv("SPANK_COLO_SHARE");
  if (share) {
    auto parsed = colo::ParseSharingPreference(share);
    run.share = parsed.ok() ? *parsed : colo::SharingPreference::kAny;
    const char* gpus = getenv("SPANK_COLO_GPUS");
    run.gpus = gpus ? std::clamp(atoi(gpus), 1, 64) : 1;
    run.memory = ByteCount(getenv("SPANK_COLO_MEM"));
  } else {
    const char* gpus = getenv("SLURM_JOB_GPUS");
    run.gpus = std::min(CountList(gpus ? gpus : ""), 64);
  }
  // The GPUs Slurm gave the job on this node, by their index in its gres.conf: slurmd's own
  // environment for the prolog, which the job's user cannot set.
  run.slurm_gpus = GpuIndexes(getenv("SLURM_JOB_GPUS"));
  // Its answer changes nothing here: the step asks for the placement.
  (void)client->Call(run);
  return 0;
}

// slurmd, as root, when the job is over on this node (PrologFlags=Alloc): its GPUs are free.
int slurm_spank_job_epilog(spank_t sp, int argc, char** argv) {
  if (!ParseSettings(argc, argv)) return 0;
  uint32_t job_id = 0;
  if (spank_get_item(sp, S_JOB_ID, &job_id) != ESPANK_SUCCESS || job_id == 0) {
    const char* id = getenv("SLURM_JOB_ID");
    job_id = id ? static_cast<uint32_t>(strtoul(id, nullptr, 10)) : 0;
  }
  if (job_id != 0) SendEnd(job_id, std::nullopt);
  return 0;  // never fail an epilog: Slurm would drain the node
}

}  // extern "C"
