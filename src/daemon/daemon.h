// colod: the scheduling core fed by real events. One thread runs the event loop (API requests,
// child exits, samples, timers); a second thread samples the GPUs, so a hung driver call delays
// only the next sample, never a submission or a placement.
#pragma once

#include <atomic>
#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

#include "common/clock.h"
#include "core/scheduler.h"
#include "daemon/config.h"
#include "daemon/exit_classifier.h"
#include "daemon/job_record.h"
#include "daemon/mps.h"
#include "daemon/store.h"
#include "gpu/gpu.h"

namespace colo {

class Daemon {
 public:
  struct Options {
    DaemonConfig config;
    // colod's own process blocks SIGCHLD/SIGTERM/SIGINT and reads them from a signalfd; tests
    // running a Daemon inside another program leave signals alone and poll for child exits.
    bool handle_signals = true;
  };
  static Result<std::unique_ptr<Daemon>> Create(Options options, GpuBackend& gpus);
  ~Daemon();

  // Serves until RequestStop() or SIGTERM/SIGINT. Running jobs keep running after it returns.
  Status Run();
  void RequestStop();  // any thread
  const DaemonConfig& config() const { return config_; }

 private:
  struct Client {
    int fd = -1;
    unsigned uid = 0;
    int pid = 0;
    std::string in, out;
    bool closing = false;
    bool http = false;  // a metrics scrape
  };
  struct Running {
    JobId job = 0;
    bool child = true;  // false: adopted after a restart, not our child
    std::optional<TimePoint> kill_at;
  };
  struct SampleSet {
    WallTime wall;
    TimePoint time;
    std::vector<DeviceSample> devices;
    uint64_t seq = 0;
  };

  Daemon(Options options, GpuBackend& gpus);
  Status Init();
  Status Recover();
  void SamplerLoop();

  // Event handlers.
  void AcceptClients(int listen_fd, bool http);
  void ReadClient(Client& client);
  void HandleLine(Client& client, const std::string& line);
  nlohmann::json Dispatch(const Client& client, const nlohmann::json& request);
  void ReapChildren();
  void PollAdopted();
  void ConsumeSamples();
  void EscalateCancels();
  void SchedulePass();
  void CheckMps();

  // API operations.
  nlohmann::json Submit(const Client& client, const nlohmann::json& request);
  nlohmann::json AcceptEstimate(const nlohmann::json& estimate, JobRecordDoc& doc);
  std::vector<Bytes> PeaksOf(const std::string& signature) const;
  static std::optional<MemoryNeed> LearnedNeed(JobRecordDoc& doc, std::vector<Bytes> peaks);
  void RefineQueuedNeeds(const JobRecordDoc& finished);
  nlohmann::json Queue(const Client& client, const nlohmann::json& request);
  nlohmann::json Show(const Client& client, const nlohmann::json& request);
  nlohmann::json Cancel(const Client& client, const nlohmann::json& request);
  nlohmann::json Gpus();
  nlohmann::json Explain(const nlohmann::json& request);
  nlohmann::json History(const Client& client, const nlohmann::json& request);
  nlohmann::json Logs(const Client& client, const nlohmann::json& request);
  std::string Metrics();

  void Launch(const colo::Launch& launch);
  void Finish(JobId id, const ProcessEnd& end);
  void SyncState(JobRecordDoc& doc);
  void Persist(const JobRecordDoc& doc);
  void Event(JobId job, const std::string& kind, const std::string& detail);
  nlohmann::json Summary(const JobRecordDoc& doc) const;
  JobRecordDoc* Find(JobId id);
  double WallSeconds() const;

  DaemonConfig config_;
  bool handle_signals_;
  GpuBackend& gpus_;
  SystemClock clock_;
  std::unique_ptr<PlacementPolicy> policy_;
  std::unique_ptr<Scheduler> scheduler_;
  std::unique_ptr<Store> store_;
  std::unique_ptr<MpsDaemon> mps_;
  bool mps_usable_ = false;
  std::string mps_problem_;
  TimePoint next_mps_check_;

  std::map<JobId, JobRecordDoc> jobs_;
  std::map<int, Running> running_;  // by shim pid
  std::map<int, Client> clients_;   // by fd
  int listen_fd_ = -1, metrics_fd_ = -1, signal_fd_ = -1, wake_fd_ = -1;

  // Sampler thread.
  std::thread sampler_;
  std::mutex sample_mutex_;
  std::condition_variable sampler_cv_;
  bool sampler_stop_ = false;
  bool sampler_exited_ = false;
  std::optional<SampleSet> latest_;
  uint64_t consumed_seq_ = 0;
  std::optional<SampleSet> current_;  // the latest consumed, for `colo gpus` and metrics
  TimePoint sampler_started_at_;
  std::atomic<bool> stop_{false};

  // Metrics.
  std::map<std::string, int64_t> counters_;
  std::vector<double> pass_seconds_;  // recent pass latencies for the histogram
  std::vector<int64_t> pass_buckets_;
  double pass_sum_ = 0;
  int64_t pass_count_ = 0;
};

}  // namespace colo
