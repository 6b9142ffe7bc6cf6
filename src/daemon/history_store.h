// What colod saw over time, for `colo report`: every GPU's samples, every running job's memory
// and GPUs, and the queue's length, in a SQLite file of its own beside the job store
// (STATE/history.db), so that its writes never wait on, or delay, a job's.
//
// The event loop only appends to a bounded buffer (Record); a thread of the store's writes the
// buffer in one transaction every flush interval and thins out what has aged: samples older than
// an hour become one-minute means, those older than a day ten-minute means, and nothing is kept
// beyond the retention. A value the GPU did not report is stored as NULL, never as a number.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "common/clock.h"
#include "common/status.h"
#include "common/units.h"
#include "core/model.h"

struct sqlite3;

namespace colo {

constexpr int kHistorySchemaVersion = 1;

// One GPU at one time; seconds since the epoch. Absent: the GPU did not report it.
struct GpuHistoryPoint {
  double time = 0;
  int gpu = 0;
  std::optional<double> memory_used;  // bytes (a mean, once thinned out)
  std::optional<double> smact, smocc, drama, power_watts, energy_joules;
};
// A running job's memory on one of its GPUs.
struct JobHistoryPoint {
  double time = 0;
  JobId job = 0;
  int gpu = 0;
  double memory = 0;  // bytes
};
struct QueueHistoryPoint {
  double time = 0;
  double queued = 0, running = 0;  // jobs (means, once thinned out)
};
struct HistoryBatch {
  std::vector<GpuHistoryPoint> gpus;
  std::vector<JobHistoryPoint> jobs;
  std::vector<QueueHistoryPoint> queue;
  size_t size() const { return gpus.size() + jobs.size() + queue.size(); }
};

struct HistoryOptions {
  Duration retention = Seconds(14 * 86400);
  Duration flush_interval = Seconds(10);
  // Samples younger than this are kept as taken; older ones become one-minute means.
  Duration full_resolution = Seconds(3600);
  // One-minute means older than this become ten-minute means.
  Duration minute_resolution = Seconds(86400);
  // Points held in memory while they cannot be written (a full disk): the oldest go first.
  size_t max_pending = 200000;
};

// What the writer has done, for the cost per sample (colo report prints it with --verbose, and
// the benchmark reads it).
struct HistoryWriteStats {
  int64_t flushes = 0;
  int64_t points = 0;
  int64_t dropped = 0;  // points lost while they could not be written
  double write_seconds = 0;
  double compact_seconds = 0;
  std::string last_error;
};

class HistoryStore {
 public:
  // Opens or creates the file, owner-only, with the job store's checks on its path. A file of a
  // newer schema or of another program is an error naming it.
  static Result<std::unique_ptr<HistoryStore>> Open(const std::string& path,
                                                    HistoryOptions options);
  ~HistoryStore();  // writes what is pending
  HistoryStore(const HistoryStore&) = delete;
  HistoryStore& operator=(const HistoryStore&) = delete;

  // Starts the writer thread (tests may leave it off and call Flush and Compact themselves).
  void StartWriter();
  // Any thread; never touches the file.
  void Record(HistoryBatch batch);
  // Writes what is pending now, in one transaction.
  Status Flush();
  // Thins out what is older than the resolutions allow and drops what is beyond the retention,
  // as of `now` (seconds since the epoch).
  Status Compact(double now);

  // Everything in [since, until), as at most about `max_points` times per series: when the range
  // holds more, points are averaged into equal buckets (energy: the largest reading).
  struct Series {
    std::vector<GpuHistoryPoint> gpus;
    std::vector<JobHistoryPoint> jobs;
    std::vector<QueueHistoryPoint> queue;
    double bucket_seconds = 0;  // 0: as stored
  };
  Result<Series> Read(double since, double until, int max_points);
  HistoryWriteStats stats() const;

 private:
  HistoryStore(std::string path, HistoryOptions options, sqlite3* writer, sqlite3* reader);
  void WriterLoop();
  Status WriteBatch(const HistoryBatch& batch);

  const std::string path_;
  const HistoryOptions options_;
  sqlite3* writer_;
  sqlite3* reader_;
  std::mutex write_mutex_;  // the writer connection
  std::mutex read_mutex_;   // the reader connection
  mutable std::mutex pending_mutex_;
  std::condition_variable wake_;
  HistoryBatch pending_;
  bool stop_ = false;
  HistoryWriteStats stats_;  // under pending_mutex_
  std::thread thread_;
};

}  // namespace colo
