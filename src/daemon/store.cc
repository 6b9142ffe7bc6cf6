#include "daemon/store.h"

#include <fmt/format.h>
#include <sqlite3.h>

namespace colo {
namespace {

// A prepared statement that finalizes itself.
class Statement {
 public:
  Statement(sqlite3* db, const char* sql) {
    rc_ = sqlite3_prepare_v2(db, sql, -1, &stmt_, nullptr);
  }
  ~Statement() { sqlite3_finalize(stmt_); }
  bool ok() const { return rc_ == SQLITE_OK; }
  sqlite3_stmt* get() { return stmt_; }

 private:
  sqlite3_stmt* stmt_ = nullptr;
  int rc_;
};

Status Error(sqlite3* db, const std::string& what) {
  return Internal(fmt::format("state database: {}: {}", what, sqlite3_errmsg(db)));
}

}  // namespace

Result<std::unique_ptr<Store>> Store::Open(const std::string& path) {
  sqlite3* db = nullptr;
  if (sqlite3_open_v2(path.c_str(), &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, nullptr) !=
      SQLITE_OK) {
    std::string message = db ? sqlite3_errmsg(db) : "out of memory";
    sqlite3_close(db);
    return Unavailable(fmt::format("cannot open the state database {}: {}", path, message));
  }
  std::unique_ptr<Store> store(new Store(db));
  sqlite3_busy_timeout(db, 5000);
  COLO_RETURN_IF_ERROR(store->Exec("PRAGMA journal_mode=WAL"));
  COLO_RETURN_IF_ERROR(store->Exec("PRAGMA synchronous=NORMAL"));
  COLO_RETURN_IF_ERROR(store->Exec(R"sql(
    CREATE TABLE IF NOT EXISTS meta(key TEXT PRIMARY KEY, value TEXT NOT NULL);
    INSERT OR IGNORE INTO meta VALUES ('schema', '1');
    INSERT OR IGNORE INTO meta VALUES ('next_job_id', '1');
    CREATE TABLE IF NOT EXISTS jobs(
      id INTEGER PRIMARY KEY,
      uid INTEGER NOT NULL,
      state TEXT NOT NULL,
      submitted REAL NOT NULL,
      finished REAL NOT NULL,
      record TEXT NOT NULL);
    CREATE INDEX IF NOT EXISTS jobs_state ON jobs(state);
    CREATE TABLE IF NOT EXISTS events(
      seq INTEGER PRIMARY KEY AUTOINCREMENT,
      time REAL NOT NULL,
      job INTEGER NOT NULL,
      kind TEXT NOT NULL,
      detail TEXT NOT NULL);
    CREATE INDEX IF NOT EXISTS events_job ON events(job);
  )sql"));
  return store;
}

Store::~Store() {
  sqlite3_close(db_);
}

Status Store::Exec(const char* sql) {
  char* error = nullptr;
  if (sqlite3_exec(db_, sql, nullptr, nullptr, &error) != SQLITE_OK) {
    std::string message = error ? error : "unknown error";
    sqlite3_free(error);
    return Internal(fmt::format("state database: {}", message));
  }
  return Status::Ok();
}

Result<JobId> Store::NextJobId() {
  // One statement, so two daemons on one database could never hand out the same id.
  Statement s(db_,
              "UPDATE meta SET value = CAST(value AS INTEGER) + 1 WHERE key = 'next_job_id' "
              "RETURNING CAST(value AS INTEGER) - 1");
  if (!s.ok()) return Error(db_, "next job id");
  if (sqlite3_step(s.get()) != SQLITE_ROW) return Error(db_, "next job id");
  return static_cast<JobId>(sqlite3_column_int64(s.get(), 0));
}

Status Store::Save(const JobRecordDoc& job) {
  Statement s(db_,
              "INSERT INTO jobs(id, uid, state, submitted, finished, record) VALUES(?,?,?,?,?,?) "
              "ON CONFLICT(id) DO UPDATE SET state=excluded.state, finished=excluded.finished, "
              "record=excluded.record");
  if (!s.ok()) return Error(db_, "save job");
  const std::string record = ToJson(job).dump();
  sqlite3_bind_int64(s.get(), 1, job.spec.id);
  sqlite3_bind_int64(s.get(), 2, job.uid);
  sqlite3_bind_text(s.get(), 3, job.state.c_str(), -1, SQLITE_TRANSIENT);
  sqlite3_bind_double(s.get(), 4, job.submitted);
  sqlite3_bind_double(s.get(), 5, job.finished);
  sqlite3_bind_text(s.get(), 6, record.c_str(), -1, SQLITE_TRANSIENT);
  if (sqlite3_step(s.get()) != SQLITE_DONE) return Error(db_, "save job");
  return Status::Ok();
}

namespace {
Result<std::vector<JobRecordDoc>> ReadRecords(sqlite3* db, sqlite3_stmt* stmt) {
  std::vector<JobRecordDoc> out;
  int rc;
  while ((rc = sqlite3_step(stmt)) == SQLITE_ROW) {
    const auto* text = reinterpret_cast<const char*>(sqlite3_column_text(stmt, 0));
    auto parsed = nlohmann::json::parse(text ? text : "", nullptr, false);
    if (parsed.is_discarded())
      return Internal(fmt::format("state database: job {} has an unreadable record",
                                  sqlite3_column_int64(stmt, 1)));
    auto record = JobRecordFromJson(parsed);
    if (!record.ok()) return record.status();
    out.push_back(std::move(*record));
  }
  if (rc != SQLITE_DONE) return Error(db, "read jobs");
  return out;
}
}  // namespace

Result<std::vector<JobRecordDoc>> Store::LoadAll() {
  Statement s(db_, "SELECT record, id FROM jobs ORDER BY id");
  if (!s.ok()) return Error(db_, "load jobs");
  return ReadRecords(db_, s.get());
}

Result<std::vector<JobRecordDoc>> Store::History(int limit, unsigned uid_filter, bool all_users) {
  Statement s(
      db_,
      "SELECT record, id FROM jobs WHERE state IN ('succeeded','failed','cancelled','lost') "
      "AND (?1 OR uid = ?2) ORDER BY finished DESC, id DESC LIMIT ?3");
  if (!s.ok()) return Error(db_, "history");
  sqlite3_bind_int(s.get(), 1, all_users ? 1 : 0);
  sqlite3_bind_int64(s.get(), 2, uid_filter);
  sqlite3_bind_int(s.get(), 3, limit);
  return ReadRecords(db_, s.get());
}

Status Store::AddEvent(double time, JobId job, const std::string& kind, const std::string& detail) {
  Statement s(db_, "INSERT INTO events(time, job, kind, detail) VALUES(?,?,?,?)");
  if (!s.ok()) return Error(db_, "add event");
  sqlite3_bind_double(s.get(), 1, time);
  sqlite3_bind_int64(s.get(), 2, job);
  sqlite3_bind_text(s.get(), 3, kind.c_str(), -1, SQLITE_TRANSIENT);
  sqlite3_bind_text(s.get(), 4, detail.c_str(), -1, SQLITE_TRANSIENT);
  if (sqlite3_step(s.get()) != SQLITE_DONE) return Error(db_, "add event");
  return Status::Ok();
}

Result<std::vector<StoredEvent>> Store::Events(JobId job) {
  Statement s(db_, "SELECT seq, time, job, kind, detail FROM events WHERE job = ? ORDER BY seq");
  if (!s.ok()) return Error(db_, "events");
  sqlite3_bind_int64(s.get(), 1, job);
  std::vector<StoredEvent> out;
  while (sqlite3_step(s.get()) == SQLITE_ROW) {
    StoredEvent e;
    e.seq = sqlite3_column_int64(s.get(), 0);
    e.time = sqlite3_column_double(s.get(), 1);
    e.job = sqlite3_column_int64(s.get(), 2);
    e.kind = reinterpret_cast<const char*>(sqlite3_column_text(s.get(), 3));
    e.detail = reinterpret_cast<const char*>(sqlite3_column_text(s.get(), 4));
    out.push_back(std::move(e));
  }
  return out;
}

}  // namespace colo
