// What colod asks of slurmctld, through Slurm's own commands (scontrol, squeue, slurmd -G): a
// job's record and state, its requeue and next run, this node's GRES and drain state, and a job's
// output file read or written as its user. The bridge (slurm_bridge.h) calls them on its worker
// thread; tests give it a fake. Also the parsers of what those commands print, and colo's note in
// a job's AdminComment.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "common/units.h"
#include "daemon/job.h"

namespace colo {

// What colod needs of Slurm's record of a job.
struct SlurmJobInfo {
  uint32_t job = 0;
  std::string state;  // RUNNING, PENDING, COMPLETED, ...
  std::string nodes;  // the node list, as Slurm writes it
  std::string admin_comment;
  std::string std_out, std_err;  // absolute paths, Slurm's filename pattern expanded
  std::string user, name, work_dir;
  std::string excluded_nodes, required_nodes;  // as the job's user asked
  uint32_t array_job = 0;                      // 0: not part of an array
  std::optional<uint32_t> array_task;
  int exit_code = 0;    // the batch script's exit code
  int exit_signal = 0;  // or the signal that ended it
  int restarts = 0;
  std::string tres_per_node;  // e.g. gres:gpu:1 or gres:shard:12
  std::string comment;        // the job's Comment (its user may write it)
  // The GPUs Slurm gave the job on each of its nodes, by their index in the node's gres.conf
  // (squeue --json's gres_detail, e.g. "shard:7(IDX:0)").
  std::map<std::string, std::vector<int>> gpus_by_node;
};

// A node as `scontrol show node` has it: drained or not, and why.
struct SlurmNodeState {
  bool drained = false;
  std::string reason;
};

// colo's own note in a job's AdminComment.
struct SlurmNote {
  std::optional<Bytes> need;
  int ooms = 0;
};
SlurmNote ParseSlurmNote(std::string_view admin_comment);
std::string FormatSlurmNote(const SlurmNote& note);
// `admin_comment` with its colo note (if any) replaced by `note`, the rest kept.
std::string WithNote(std::string_view admin_comment, const SlurmNote& note);

// Slurm's commands, called on the bridge's worker thread (they block); a fake in tests.
class SlurmCommands {
 public:
  virtual ~SlurmCommands() = default;
  // Slurm's records of those of `jobs` it still knows.
  virtual Result<std::map<uint32_t, SlurmJobInfo>> ShowJobs(const std::vector<uint32_t>& jobs) = 0;
  // One job's record; nullopt when Slurm no longer knows it.
  Result<std::optional<SlurmJobInfo>> ShowJob(uint32_t job);
  // What squeue says of `jobs` (state, restarts, nodes only: a cheap query), those it knows.
  virtual Result<std::map<uint32_t, SlurmJobInfo>> JobStates(const std::vector<uint32_t>& jobs) = 0;
  // Puts the job back in Slurm's queue (running or ended), with `note` in its AdminComment.
  virtual Status Requeue(uint32_t job, const SlurmNote& note) = 0;
  // Once the requeued job is pending: `note` in its AdminComment, its shards made `shards` per
  // node (when it books shards and `shards` > 0), kept off `avoid_node` too (when not empty),
  // eligible at once.
  // False (nothing done) while it is not pending yet.
  virtual Result<bool> PrepareRerun(uint32_t job, const SlurmNote& note, int64_t shards,
                                    const std::string& avoid_node) = 0;
  // What squeue says a job booked (restarts, tres_per_node, comment only: a cheap query of one
  // job); nullopt when Slurm no longer knows it.
  virtual Result<std::optional<SlurmJobInfo>> Booking(uint32_t job) = 0;
  // What `slurmd -G` prints of this node's GRES (each GPU's index, device file and shards).
  virtual Result<std::string> SlurmdGres(const std::string& node) = 0;
  virtual Result<SlurmNodeState> ShowNode(const std::string& node) = 0;
  // Drains the node with `reason`, or (drain false) resumes it.
  virtual Status UpdateNode(const std::string& node, bool drain, const std::string& reason) = 0;
  // The last `max_bytes` of a file, read as `who` — never as root: the path is the user's.
  virtual Result<std::string> TailAsUser(const Identity& who, const std::string& path,
                                         size_t max_bytes) = 0;
  // Appends `text` to a file as `who` (the job's output: what colo did, in the user's view).
  virtual Status AppendAsUser(const Identity& who, const std::string& path,
                              const std::string& text) = 0;
};

// The real commands: scontrol and squeue of the node's Slurm, setpriv + tail for a user's file.
class SlurmCliCommands : public SlurmCommands {
 public:
  // `bin_dir`: where scontrol and squeue are; `slurmd`: slurmd's path; `environment`:
  // SLURM_CONF and such for them.
  SlurmCliCommands(std::string bin_dir, std::string slurmd, std::vector<std::string> environment);
  Result<std::map<uint32_t, SlurmJobInfo>> ShowJobs(const std::vector<uint32_t>& jobs) override;
  Result<std::map<uint32_t, SlurmJobInfo>> JobStates(const std::vector<uint32_t>& jobs) override;
  Status Requeue(uint32_t job, const SlurmNote& note) override;
  Result<bool> PrepareRerun(uint32_t job, const SlurmNote& note, int64_t shards,
                            const std::string& avoid_node) override;
  Result<std::optional<SlurmJobInfo>> Booking(uint32_t job) override;
  Result<std::string> SlurmdGres(const std::string& node) override;
  Result<SlurmNodeState> ShowNode(const std::string& node) override;
  Status UpdateNode(const std::string& node, bool drain, const std::string& reason) override;
  Result<std::string> TailAsUser(const Identity& who, const std::string& path,
                                 size_t max_bytes) override;
  Status AppendAsUser(const Identity& who, const std::string& path,
                      const std::string& text) override;

 private:
  // squeue of `jobs`, with `args`; nullopt when Slurm knows none of them.
  Result<std::optional<std::string>> Squeue(const std::vector<uint32_t>& jobs,
                                            std::vector<std::string> args,
                                            size_t max_output = 1 << 20);
  // Runs `command` (scontrol, squeue) of `bin_dir`; an error unless it succeeds.
  Result<std::string> Run(const std::string& command, std::vector<std::string> args,
                          size_t max_output = 1 << 20);
  std::string bin_dir_;
  std::string slurmd_;
  std::vector<std::string> env_;
};

// Parses `squeue --noheader --Format=JobID:|,State:|,RestartCnt:|,NodeList:|`.
std::map<uint32_t, SlurmJobInfo> ParseSqueueStates(std::string_view text);
// Parses `squeue --noheader --Format=JobID:|,RestartCnt:|,tres-per-node:|,Comment:|` (the
// Comment last: its user may write a '|' into it).
std::map<uint32_t, SlurmJobInfo> ParseSqueueBookings(std::string_view text);
// Parses `squeue --json`: the jobs it lists, by Slurm job id.
Result<std::map<uint32_t, SlurmJobInfo>> ParseSqueueJobs(std::string_view text);

}  // namespace colo
