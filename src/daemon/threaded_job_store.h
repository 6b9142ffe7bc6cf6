// A JobStore whose calls run on a thread of their own, so that colod's loop does not sit still
// while the disk works: a write (encoding records, SQLite's statements, the fsync that makes it
// durable) or a long read (a history page) of one user's request can take a hundred milliseconds,
// and other users' requests come in meanwhile.
//
// Each call still returns only once the store has answered, with the store's own answer: the
// controller's rules stand unchanged (a job is acknowledged once it is stored, an attempt's intent
// is stored before its process starts, a write that fails changed nothing). While the caller
// waits, it is handed `while_waiting`, which may do other work on the caller's thread (colod
// answers requests that read only its memory) until the call is done. One call runs at a time,
// in the order they were made; the store behind is only ever used from the store's thread.
#pragma once

#include <condition_variable>
#include <deque>
#include <functional>
#include <future>
#include <memory>
#include <mutex>
#include <thread>

#include "daemon/job_store.h"

namespace colo {

class ThreadedJobStore final : public JobStore {
 public:
  // Work the caller does while a call runs: it returns once `done_fd` is readable (or earlier;
  // it is called again while the call is not done). It must not wait for anything else.
  using WhileWaiting = std::function<void(int done_fd)>;

  explicit ThreadedJobStore(std::unique_ptr<JobStore> store);
  ~ThreadedJobStore() override;
  ThreadedJobStore(const ThreadedJobStore&) = delete;
  ThreadedJobStore& operator=(const ThreadedJobStore&) = delete;

  // None (the default): the caller only waits. A call made from `while_waiting` itself waits
  // without it.
  void SetWhileWaiting(WhileWaiting while_waiting) { while_waiting_ = std::move(while_waiting); }

  using JobStore::Insert;
  using JobStore::InsertReserved;
  Status Insert(Job& job, const std::vector<JobEvent>& events, std::string_view token) override;
  Result<JobId> ReserveIds(int count) override;
  Status InsertReserved(const std::vector<Job>& jobs, const std::vector<JobEvent>& events,
                        std::string_view token) override;
  Result<std::optional<JobId>> SubmittedWith(unsigned uid, std::string_view token,
                                             WallTime since) override;
  Status Update(const Job& job, const std::vector<JobEvent>& events) override;
  Status UpdateMany(const std::vector<JobChange>& changes) override;
  Status AddEvents(const std::vector<JobEvent>& events) override;
  Result<LiveJobs> LoadLive() override;
  Result<std::optional<Job>> Find(JobId id) override;
  Result<HistoryPage> History(const HistoryQuery& query) override;
  Result<std::vector<JobEvent>> Events(JobId id) override;
  Result<std::vector<JobEvent>> RecentEvents(int limit) override;
  Result<ModelRuns> EarlierRuns(const std::string& signature, int limit) override;
  Status SaveUsage(const UsageRecord& usage) override;
  Result<UsageRecord> LoadUsage() override;
  Result<std::vector<Job>> EndedBetween(WallTime since, WallTime until, size_t limit) override;

 private:
  // Runs `call` on the store's thread and returns its answer (or rethrows what it threw).
  template <typename Call>
  auto Run(Call call) -> decltype(call());
  void Serve();

  std::unique_ptr<JobStore> store_;
  WhileWaiting while_waiting_;
  bool waiting_ = false;  // a call is waiting with while_waiting_ (a call from it must not)
  int done_fd_ = -1;      // an eventfd: a call finished
  std::mutex mutex_;
  std::condition_variable work_ready_;
  std::deque<std::function<void()>> work_;  // guarded by mutex_
  bool stopping_ = false;                   // guarded by mutex_
  std::thread thread_;
};

}  // namespace colo
