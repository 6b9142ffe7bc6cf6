// colod's side of the API: one handler per request type, each turning a typed request from an
// identified caller into a typed reply through the JobController. Who may see or do what is
// decided here: details of a job (command, workdir, errors, logs) only for its owner and root,
// cancelling likewise; other users' jobs are listed without them.
#pragma once

#include <deque>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "api/types.h"
#include "common/clock.h"
#include "daemon/history_store.h"
#include "daemon/job_controller.h"
#include "daemon/slurm_bridge.h"
#include "gpu/gpu.h"

namespace colo {

// The latest GPU sample colod has taken.
struct GpuSnapshot {
  WallTime wall;
  std::vector<DeviceSample> devices;
};

struct HandlerContext {
  const Clock& clock;
  JobController& controller;
  JobStore& store;
  ProcessLauncher& launcher;
  const GpuBackend& gpus;
  const std::optional<GpuSnapshot>& latest_sample;
  bool personal = false;            // a personal colod: serves its owner only
  SlurmBridge* slurm = nullptr;     // set on a Slurm node
  HistoryStore* history = nullptr;  // absent: no history kept (history_problem says why)
  const std::string* history_problem = nullptr;
  std::string policy = {};  // the policy spec colod places with, gates included
  // On a Slurm node, whether users other than root may submit here (slurm.direct_submit).
  bool direct_submit = true;
};

class ApiHandlers {
 public:
  explicit ApiHandlers(HandlerContext context) : c_(context) {}

  // One request line from `caller` → one reply line (without the newline). Never throws; any
  // request, however malformed, gets an error reply naming the problem.
  std::string Handle(const Identity& caller, std::string_view line);
  // The reply, as Handle gives it, to a request answered from colod's memory alone (hello, queue,
  // gpus, share: no store, no change), or to one that cannot be read; nullopt for any other. What
  // colod answers while its loop waits on the store (ConnectionSet::ServeQuick).
  std::optional<std::string> HandleFromMemory(const Identity& caller, std::string_view line);

 private:
  Result<api::HelloReply> Handle(const Identity& caller, const api::HelloRequest&);
  Result<api::SubmitReply> Handle(const Identity& caller, const api::SubmitRequest&);
  Result<api::QueueReply> Handle(const Identity& caller, const api::QueueRequest&);
  Result<api::ShowReply> Handle(const Identity& caller, const api::ShowRequest&);
  Result<api::CancelReply> Handle(const Identity& caller, const api::CancelRequest&);
  Result<api::ExplainReply> Handle(const Identity& caller, const api::ExplainRequest&);
  Result<api::LogsReply> Handle(const Identity& caller, const api::LogsRequest&);
  Result<api::GpusReply> Handle(const Identity& caller, const api::GpusRequest&);
  Result<api::HistoryReply> Handle(const Identity& caller, const api::HistoryRequest&);
  Result<api::EventsReply> Handle(const Identity& caller, const api::EventsRequest&);
  Result<api::ShareReply> Handle(const Identity& caller, const api::ShareRequest&);
  Result<api::SlurmAttachReply> Handle(const Identity& caller, const api::SlurmAttachRequest&);
  Result<api::SlurmEndReply> Handle(const Identity& caller, const api::SlurmEndRequest&);
  Result<api::SlurmRunReply> Handle(const Identity& caller, const api::SlurmRunRequest&);
  Result<api::ControlReply> Handle(const Identity& caller, const api::ControlRequest&);
  Result<api::RunReportReply> Handle(const Identity& caller, const api::RunReportRequest&);

  // The job, if the caller may see its details; errors name why not.
  Result<Job> JobForOwner(const Identity& caller, JobId id, std::string_view what) const;
  api::JobSummary Summarize(const Job& job, const Identity& caller) const;
  api::JobDetail Detail(const Job& job) const;
  std::vector<int> GpuIndices(const std::vector<std::string>& uuids) const;

  // The reply to a decoded request (Handle's second half).
  std::string Reply(const Identity& caller, const api::Request& request);

  HandlerContext c_;
  // When each user's latest reports were asked for: a report is read on the event loop, so one
  // user may ask for a few in any window (root is not limited).
  std::map<unsigned, std::deque<TimePoint>> recent_reports_;
};

}  // namespace colo
