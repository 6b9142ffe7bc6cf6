// The job store in SQLite: one row per job (its record as job_codec.h encodes it, plus the
// columns queries need) and an append-only event log, in a file only colod's user can read (the
// records hold each user's environment).
//
// Every write is one transaction that is on disk before it returns (WAL, synchronous=FULL), so an
// acknowledged job survives a crash or a power loss; a failed write changes nothing and leaves the
// store usable. Rows that cannot be read back are quarantined, never fatal and never overwritten.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "daemon/job_store.h"
#include "daemon/sqlite_db.h"
#include "daemon/sqlite_schema.h"

struct sqlite3;

namespace colo {

class SqliteJobStore final : public JobStore {
 public:
  // Opens or creates the database at `path`, owner-only (0600, with its -wal and -shm files), and
  // migrates an older schema. Refuses a path that is a symlink or not a regular file, a database
  // of another program or of a newer schema; every error names the path and the reason.
  static Result<std::unique_ptr<SqliteJobStore>> Open(const std::string& path);
  ~SqliteJobStore() override;
  SqliteJobStore(const SqliteJobStore&) = delete;
  SqliteJobStore& operator=(const SqliteJobStore&) = delete;

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

  // Also lists the rows of unended jobs quarantined earlier, so every start names them again.
  Result<LiveJobs> LoadLive() override;
  Result<std::optional<Job>> Find(JobId id) override;
  // A row that cannot be read is left out of the page (LoadLive names it).
  Result<HistoryPage> History(const HistoryQuery& query) override;
  Result<std::vector<JobEvent>> Events(JobId id) override;
  Result<std::vector<JobEvent>> RecentEvents(int limit) override;
  // Successful attempts with a peak of 0 (never measured) are left out.
  Result<ModelRuns> EarlierRuns(const std::string& signature, int limit) override;
  Status SaveUsage(const UsageRecord& usage) override;
  Result<UsageRecord> LoadUsage() override;
  Result<std::vector<Job>> EndedBetween(WallTime since, WallTime until, size_t limit) override;

  // Called when a write finds the disk full: true if it gave room back (colod's SpaceReserve), and
  // the write is tried again once.
  void SetSpaceReserve(std::function<bool()> release_space) {
    release_space_ = std::move(release_space);
  }

  // For tests: the database file may grow to at most `max_pages` pages, and not at all when that
  // is fewer than it has (1 will do), so a full disk can be had on demand; nullopt lifts the limit.
  Status LimitPagesForTesting(std::optional<int64_t> max_pages);

 private:
  class Statement;

  SqliteJobStore(std::string path, sqlite3* db);
  template <typename Write>
  auto WithRoom(Write write) -> decltype(write());
  Status InsertOnce(Job& job, const std::vector<JobEvent>& events, std::string_view token);
  Result<JobId> ReserveIdsOnce(int count);
  Status InsertReservedOnce(const std::vector<Job>& jobs, const std::vector<JobEvent>& events,
                            std::string_view token);
  Status UpdateManyOnce(const std::vector<JobChange>& changes);
  Status AddEventsOnce(const std::vector<JobEvent>& events);
  // Write-ahead logging, and commits that are on disk before they return.
  Status Configure();
  Status InsertEvents(const std::vector<JobEvent>& events, JobId new_job);
  // Inside a transaction: the counter's and the table's view of ids (the next one to hand out).
  Result<JobId> NextId(const std::string& what);
  Status SetNextId(JobId next, const std::string& what);
  Status InsertToken(const Job& job, std::string_view token, const std::string& what);
  // Inside a transaction: a new row, or the existing row's replacement (its lists no longer
  // named by it deleted when no other job names them).
  Status InsertRow(const Job& job, const std::string& what);
  Status UpdateRow(const Job& job, const std::string& what);
  // The record of `job` and the rows of `lists` it names (inserted now when new).
  Result<JobRow> RowOf(const Job& job, const std::string& what);
  // The row of `lists` holding `list`, inserted now if it has none; nullopt for one the record
  // keeps (shorter than kListBytes).
  Result<std::optional<int64_t>> ListRow(const SharedStrings& list, const std::string& what);
  // After a transaction: the lists it inserted become known (committed) or are forgotten.
  void SettleLists(bool committed);
  // Deletes the row of `lists` `id` if no job names it now.
  Status DropListIfUnnamed(int64_t id, const std::string& what);
  // A job row (id, record, command_list, env_list) as the job it holds: its lists read (once per
  // `lists` cache) and remembered, so that writing the job again names the same rows.
  using ListCache = std::map<int64_t, SharedStrings>;
  Result<Job> DecodeRow(Statement& row, ListCache& lists);
  Result<SharedStrings> ReadList(int64_t id, ListCache& lists);
  // A row of kEvents or kRecentEvents: time, job, kind, detail.
  static JobEvent EventOfRow(Statement& row);
  Status Quarantine(JobId id, const std::string& reason);
  Status WriteError(const std::string& what, int rc) const;
  Status ReadError(const std::string& what, int rc) const;

  const std::string path_;
  sqlite3* db_;
  SqliteStatementCache statements_;
  // One connection and its statements serve one caller at a time.
  std::mutex mutex_;
  std::function<bool()> release_space_;
  mutable bool disk_full_ = false;  // the last write failed for want of space
  // The rows of `lists` by the one copy jobs share in memory: a job written again names its list's
  // row without writing the list again. The copy is held weakly: once no job holds it, its entry
  // no longer matches a later list made at the same address.
  struct StoredList {
    std::weak_ptr<const SharedStrings::List> list;
    int64_t id = 0;
  };
  std::unordered_map<const SharedStrings::List*, StoredList> stored_lists_;
  std::vector<std::pair<const SharedStrings::List*, StoredList>> new_lists_;  // this transaction's
  size_t live_lists_ = 0;  // entries of stored_lists_ at their last clean-up
};

}  // namespace colo
