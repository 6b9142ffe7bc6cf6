// colod's state in SQLite (WAL): one row per job (its record as JSON, plus the columns queries
// need) and an append-only event log. Every change is written before colod acts on it, so a
// restart finds every job that was accepted.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "common/status.h"
#include "daemon/job_record.h"

struct sqlite3;

namespace colo {

struct StoredEvent {
  int64_t seq = 0;
  double time = 0;
  JobId job = 0;
  std::string kind;
  std::string detail;
};

class Store {
 public:
  static Result<std::unique_ptr<Store>> Open(const std::string& path);
  ~Store();
  Store(const Store&) = delete;
  Store& operator=(const Store&) = delete;

  Result<JobId> NextJobId();
  Status Save(const JobRecordDoc& job);
  Result<std::vector<JobRecordDoc>> LoadAll();
  // Jobs in a terminal state, newest first.
  Result<std::vector<JobRecordDoc>> History(int limit, unsigned uid_filter, bool all_users);
  Status AddEvent(double time, JobId job, const std::string& kind, const std::string& detail);
  Result<std::vector<StoredEvent>> Events(JobId job);

 private:
  explicit Store(sqlite3* db) : db_(db) {}
  Status Exec(const char* sql);
  sqlite3* db_;
};

}  // namespace colo
