// colod's configuration (TOML). Every key is optional; packaging/colod.toml (installed as
// PREFIX/etc/colo/colod.toml) documents each one with its default.
#pragma once

#include <map>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "common/status.h"
#include "core/model.h"
#include "core/scheduler.h"
#include "policies/registry.h"

namespace colo {

// colod's scheduler settings before its config: the core's, with fair share among users and EASY
// backfill on, as a server shared by many people needs (colo sim keeps the thesis' FIFO).
SchedulerConfig DaemonSchedulerDefaults();

struct DaemonConfig {
  // [scheduler]
  std::string policy = "worst-fit";  // a policy spec, as `colo sim --list-policies` shows
  // With [fairness]'s order, half-life, weights and default limits (fairness, user_limits).
  SchedulerConfig scheduler = DaemonSchedulerDefaults();
  // [fairness.users] and [fairness.groups]: what an administrator grants a user, or each member
  // of a group (a user's own entry wins; of several groups, the first by name).
  std::map<std::string, UserTerms> user_terms;
  std::map<std::string, UserTerms> group_terms;
  // [gates]: appended to the policy spec
  std::string memory_margin = "2GiB";
  double smact_max = 0.8;
  bool compound = false;
  bool exclusive_first = false;
  // [sharing]
  SharingMode default_mode = SharingMode::kMps;
  std::map<std::string, SharingMode> per_gpu;  // by UUID or index ("0")
  // What one process's CUDA context takes on a GPU (core/model.h's GpuInfo::cuda_context);
  // absent ("auto"): from colo's GPU calibration for the GPU's model.
  std::optional<Bytes> cuda_context;
  // [mps]
  bool mps_enabled = true;
  std::string mps_control = "nvidia-cuda-mps-control";
  std::string mps_pipe_dir;  // default: STATE/mps/pipe
  std::string mps_log_dir;   // default: STATE/mps/log
  Duration mps_health_interval = Seconds(30);
  // [paths]
  std::string state_dir;  // default: /var/lib/colo (root) or $XDG_STATE_HOME/colo
  std::string socket;  // default: /run/colo/colod.sock (root) or $XDG_RUNTIME_DIR/colo/colod.sock
  std::string shim;    // default: colo-shim next to colod
  // Where each job's directory (its logs, its exit records) lives; default: STATE/jobs. Another
  // file system keeps a full log from stopping colod's database.
  std::string jobs_dir;
  // [jobs]
  Duration cancel_grace = Seconds(10);
  // A job past its --time limit gets SIGTERM, then SIGKILL after this (Slurm's KillWait).
  Duration timeout_grace = Seconds(30);
  bool cgroups = true;  // "auto": a cgroup per attempt where colod may create one; "off"
  // What a job leaves running when its main process ends gets SIGTERM, then SIGKILL after this.
  Duration leftover_grace = Seconds(5);
  // The most one attempt may write to its logs (stdout and stderr together); past it the job is
  // stopped, its log saying why. 0: no limit.
  Bytes log_limit = Bytes(int64_t{1} << 30);
  // The submitter's resource limits a job takes (names of common/resource_limits.h, "all" or
  // "none"); the others are colod's own.
  std::string propagate_limits = "all";
  // [metrics]
  bool metrics_enabled = false;
  std::string metrics_address = "127.0.0.1";
  int metrics_port = 9464;
  int metrics_max_clients = 16;
  // [history]: what `colo report` shows (STATE/history.db)
  bool history_enabled = true;
  Duration history_retention = Seconds(14 * 86400);
  Duration history_flush_interval = Seconds(10);
  // [limits]
  size_t max_request_bytes = 1 << 20;
  int max_clients = 256;
  int max_clients_per_user = 32;
  int max_jobs_per_user = 10000;        // waiting or running at once; root has no limit
  int max_array_size = 1000;            // tasks of one job array (submit --array)
  Duration idle_timeout = Seconds(60);  // a connection with no request for this long is closed
  // Space kept for the database in the state directory's file system (a file colod gives up when
  // the disk is full, so that storing jobs goes on while users' logs have filled it).
  Bytes database_reserve = Bytes(int64_t{64} << 20);
  // [slurm]: this colod is the node layer of a Slurm cluster (the SPANK plugin asks it)
  std::string slurm_node;                         // this node's Slurm name; empty: not a Slurm node
  std::string slurm_bin_dir = "/usr/bin";         // where scontrol is
  std::string slurm_slurmd = "/usr/sbin/slurmd";  // `slurmd -G` lists this node's GPUs
  std::string slurm_conf;                         // SLURM_CONF for scontrol; empty: Slurm's default
  // A job Slurm sent here that its GPUs cannot take (something outside Slurm's booking holds
  // their memory) waits this long, then goes back to Slurm's queue, kept off this node.
  Duration slurm_wait_limit = Seconds(60);
  Duration slurm_reconcile_interval = Seconds(30);
  // The GPU memory one `shard` of Slurm's per-GPU booking stands for (job_submit.lua's SHARD_MIB).
  Bytes slurm_shard_size = GiB(1);
  // Whether users other than root may submit to colod directly on a Slurm node (their jobs would
  // run outside Slurm's queue, accounting and booking); read-only commands are always served.
  bool slurm_direct_submit = false;
  // How long a job waits for its busy GPU (utilization above gates.smact_max) is
  // scheduler.booked_busy_wait, [slurm] busy_wait in the file.

  // The gates a policy spec starts from: the [gates] settings.
  Result<GateConfig> GateDefaults() const;
  // scheduler.policy as colod runs it: read once, as colo sim reads it, from GateDefaults (the
  // spec's own settings win, a CARMA name's too). Refused, with the reason, where the spec asks
  // for what only colo sim does (its shards baseline, an estimator of its own).
  Result<PolicySpec> Policy() const;
  // The resources (RLIMIT_*) of propagate_limits.
  std::set<int> PropagatedLimits() const;
};

// Every setting as "table.key" and its value as TOML writes it, in the order of
// packaging/colod.toml: what `colod --check-config` prints (a valid config file) and what a reload
// compares.
std::vector<std::pair<std::string, std::string>> EffectiveSettings(const DaemonConfig& config);
// Whether a changed setting takes effect at a reload (SIGHUP); the others need a restart.
bool AppliesLive(const std::string& key);
// Copies into `running` the settings of `next` that apply live, and no other.
void TakeLiveSettings(DaemonConfig& running, const DaemonConfig& next);

// What the config grants `user`: their own entry, else the first group (by name) that lists them
// or is their primary group (the group database says), else a default user's terms.
UserTerms TermsFromConfig(const DaemonConfig& config, const std::string& user);

// Reads a TOML file; unknown keys and wrong types are errors naming the key.
Result<DaemonConfig> LoadConfig(const std::string& path);
Result<DaemonConfig> ParseConfig(const std::string& text, const std::string& origin);
// Fills the paths left empty with the defaults for this user.
void ApplyDefaultPaths(DaemonConfig& config, const std::string& program_dir);
// Where colod listens by default: $COLO_SOCKET, else the system socket (root) or the user's own.
std::string DaemonSocketPath();

}  // namespace colo
