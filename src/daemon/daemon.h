// colod's shell around the JobController: its state directory and lock, the store, the process
// launcher, the API socket and the metrics port (each its own bounded connection pool), the GPU
// sampler thread, colod's MPS daemon, and the poll loop that drives them. The job lifecycle
// itself is the controller's.
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <optional>

#include "common/clock.h"
#include "core/scheduler.h"
#include "daemon/api_handlers.h"
#include "daemon/config.h"
#include "daemon/connections.h"
#include "daemon/gpu_sampler.h"
#include "daemon/history_store.h"
#include "daemon/job_controller.h"
#include "daemon/mps.h"
#include "daemon/state_dir.h"
#include "gpu/gpu.h"

namespace colo {

class JobStore;
class ProcessLauncher;
class SlurmBridge;
class ThreadedJobStore;

class Daemon {
 public:
  struct Options {
    DaemonConfig config;
    // colod's own process blocks SIGCHLD/SIGTERM/SIGINT and reads them from a signalfd; tests
    // running a Daemon inside another program leave signals alone.
    bool handle_signals = true;
    // Makes the config again, for a reload at SIGHUP; absent: SIGHUP is ignored.
    std::function<Result<DaemonConfig>()> reload = nullptr;
  };
  static Result<std::unique_ptr<Daemon>> Create(Options options, GpuBackend& gpus);
  ~Daemon();

  // Serves until RequestStop() or SIGTERM/SIGINT; SIGHUP reloads the config. Running jobs keep
  // running after it returns; the next colod takes them back.
  Status Run();
  void RequestStop();  // any thread
  const DaemonConfig& config() const { return config_; }

 private:
  Daemon(Options options, GpuBackend& gpus);
  Status Init();
  Status Listen();
  Result<Identity> Identify(unsigned uid, unsigned gid) const;
  std::string ServeMetrics(std::string_view request);
  void CheckMps();
  // Fair-share usage: read back at start (decayed over the time colod was away), stored often.
  Status RestoreUsage();
  void SaveUsage();
  // Takes the database's reserve again once there is room, and says what became of it.
  void CheckReserve();
  void RecordHistory(const GpuSampleSet& sample);
  // What the loop does while a call of the store's runs (ThreadedJobStore::WhileWaiting).
  void ServeWhileStoring(int done_fd);
  void Wake();
  // Applies what a reloaded config changed that can change live, and logs what needs a restart.
  void Reload();

  DaemonConfig config_;
  bool handle_signals_;
  std::function<Result<DaemonConfig>()> reload_;
  bool personal_;
  GpuBackend& gpus_;
  SystemClock clock_;
  StateLock lock_;
  SpaceReserve reserve_;
  TimePoint next_reserve_check_;
  std::unique_ptr<JobStore> store_;
  ThreadedJobStore* threaded_store_ = nullptr;  // store_, whose calls run on a thread of its own
  std::unique_ptr<ProcessLauncher> launcher_;
  std::unique_ptr<PlacementPolicy> policy_;
  std::unique_ptr<Scheduler> scheduler_;
  std::unique_ptr<MpsDaemon> mps_;
  std::unique_ptr<JobController> controller_;
  std::unique_ptr<SlurmBridge> slurm_;  // on a Slurm node only
  std::optional<GpuSnapshot> latest_sample_;
  std::unique_ptr<ApiHandlers> handlers_;
  int api_fd_ = -1, metrics_fd_ = -1, signal_fd_ = -1, wake_fd_ = -1;
  bool own_socket_ = false;  // remove it at exit only if this colod made it
  std::unique_ptr<ConnectionSet> api_clients_, metrics_clients_;
  std::unique_ptr<GpuSampler> sampler_;
  std::unique_ptr<HistoryStore> history_;  // absent: disabled, or its file could not be opened
  std::string history_problem_;
  TimePoint next_mps_check_;
  // Fair-share usage is stored this often and at a stop, so a restart keeps the past week's.
  static constexpr Duration kUsageSaveInterval = std::chrono::seconds(60);
  TimePoint next_usage_save_;
  std::atomic<bool> stop_{false};
};

}  // namespace colo
