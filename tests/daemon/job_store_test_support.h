// What the job store tests share: a private temporary directory, jobs with every field set, and
// a raw SQLite connection to tamper with a state database the way a crash or a person could.
#pragma once

#include <gtest/gtest.h>
#include <sqlite3.h>
#include <stdlib.h>

#include <filesystem>
#include <string>
#include <vector>

#include "daemon/job.h"
#include "daemon/job_store.h"

namespace colo::testing {

class TempDir {
 public:
  TempDir() {
    std::string pattern = (std::filesystem::temp_directory_path() / "colo-store-XXXXXX").string();
    path_ = mkdtemp(pattern.data());
  }
  ~TempDir() {
    std::error_code ignored;
    std::filesystem::remove_all(path_, ignored);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::string& path() const { return path_; }
  std::string File(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

inline WallTime AtEpochMicros(int64_t micros) {
  return WallTime(
      std::chrono::duration_cast<WallTime::duration>(std::chrono::microseconds(micros)));
}

// A job as the controller submits it: queued, no attempts, an environment.
inline Job QueuedJob(const std::string& name, unsigned uid = 1000) {
  Job job;
  job.spec.name = name;
  job.spec.owner = "user" + std::to_string(uid);
  job.spec.command = {"python", "train.py", "--name", name};
  job.spec.gpus = 1;
  job.spec.memory = MemoryNeed{GiB(8), MemorySource::kDeclared, 0.0};
  job.owner = Identity{uid, uid, job.spec.owner};
  job.context.workdir = "/home/" + job.spec.owner;
  job.env = {"HOME=/home/" + job.spec.owner, "SECRET_TOKEN=abc"};
  job.submitted = AtEpochMicros(1'700'000'000'000'000);
  return job;
}

// `job` ended in `state` after one attempt that ended with `exit` and used `peak`.
inline Job Ended(Job job, JobState state, ExitKind exit, Bytes peak = GiB(5)) {
  Attempt& attempt = job.attempts.emplace_back();
  attempt.number = static_cast<int>(job.attempts.size());
  attempt.phase = Attempt::Phase::kEnded;
  attempt.pid = 4242;
  attempt.gpu_uuids = {"GPU-0"};
  attempt.started = job.submitted + std::chrono::seconds(1);
  attempt.ended = job.submitted + std::chrono::seconds(60);
  attempt.exit = exit;
  attempt.peak = peak;
  job.state = state;
  job.finished = attempt.ended;
  job.env.clear();
  return job;
}

inline api::JobEstimate EstimateWithSignature(const std::string& signature) {
  api::JobEstimate estimate;
  estimate.estimator = "trace";
  estimate.peak = GiB(6);
  estimate.lower = GiB(5);
  estimate.upper = GiB(7);
  estimate.signature = signature;
  return estimate;
}

inline HistoryQuery Page(int limit, std::optional<JobId> before = std::nullopt,
                         std::optional<unsigned> uid = std::nullopt) {
  HistoryQuery query;
  query.limit = limit;
  query.before = before;
  query.uid = uid;
  return query;
}

// A connection of its own to a state database, for what colod would never do to it.
class RawDb {
 public:
  explicit RawDb(const std::string& path) {
    EXPECT_EQ(sqlite3_open(path.c_str(), &db_), SQLITE_OK);
    sqlite3_busy_timeout(db_, 5000);
  }
  ~RawDb() { sqlite3_close(db_); }
  RawDb(const RawDb&) = delete;
  RawDb& operator=(const RawDb&) = delete;

  void Exec(const std::string& sql) {
    char* error = nullptr;
    const int rc = sqlite3_exec(db_, sql.c_str(), nullptr, nullptr, &error);
    EXPECT_EQ(rc, SQLITE_OK) << sql << ": " << (error ? error : "");
    sqlite3_free(error);
  }
  // The first column of every row of `sql`, as text ("NULL" for NULL).
  std::vector<std::string> Column(const std::string& sql) {
    std::vector<std::string> out;
    sqlite3_stmt* stmt = nullptr;
    EXPECT_EQ(sqlite3_prepare_v2(db_, sql.c_str(), -1, &stmt, nullptr), SQLITE_OK)
        << sql << ": " << sqlite3_errmsg(db_);
    while (sqlite3_step(stmt) == SQLITE_ROW) {
      const auto* text = reinterpret_cast<const char*>(sqlite3_column_text(stmt, 0));
      out.push_back(text ? text : "NULL");
    }
    sqlite3_finalize(stmt);
    return out;
  }
  std::string Value(const std::string& sql) {
    const std::vector<std::string> column = Column(sql);
    return column.empty() ? "no row" : column.front();
  }
  sqlite3* get() { return db_; }

 private:
  sqlite3* db_ = nullptr;
};

}  // namespace colo::testing
