// SqliteJobStore: the state database's files and their modes, its schema and migration, and the
// transactions behind each JobStore call. Everything read from the file is decoded strictly
// (job_codec.h); nothing in it can end colod.
#include "daemon/sqlite_job_store.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <sqlite3.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <climits>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <set>
#include <sstream>

#include "common/strings.h"
#include "common/text.h"
#include "daemon/job_codec.h"

namespace colo {
namespace {

constexpr int kBusyTimeoutMs = 5000;
constexpr mode_t kOwnerOnly = 0600;
// A batch of rows rewritten at a time by the migration, so it never holds the whole table.
constexpr int kMigrationBatch = 500;

// Schema 3. `ended` and `signature` repeat what the record says so that history, live jobs and
// the history estimator's peaks are index lookups; `quarantined` is the reason a row could not be
// read back (NULL while it can), and such a row is never overwritten. A command or environment of
// kListBytes or more is a row of `lists` that every job holding it names (`command_list`,
// `env_list`; the record's own is then empty): the thousand tasks of an array store it once, and a
// job's record stays small however large its environment; a list no job names is deleted.
// `submit_tokens` are the tokens submits came with, so that a submit sent again (its reply was
// lost) gets the job stored the first time: kept kSubmitTokenLifetime.
constexpr const char kCreateTables[] = R"sql(
  CREATE TABLE meta(key TEXT PRIMARY KEY, value TEXT NOT NULL);
  CREATE TABLE jobs(
    id INTEGER PRIMARY KEY,
    uid INTEGER NOT NULL,
    state TEXT NOT NULL,
    submitted REAL NOT NULL,
    finished REAL NOT NULL,
    record TEXT NOT NULL,
    ended INTEGER NOT NULL DEFAULT 0,
    signature TEXT,
    quarantined TEXT,
    command_list INTEGER,
    env_list INTEGER);
  CREATE TABLE events(
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    time REAL NOT NULL,
    job INTEGER NOT NULL,
    kind TEXT NOT NULL,
    detail TEXT NOT NULL);
  CREATE INDEX events_job ON events(job);
  INSERT INTO meta VALUES ('schema', '3'), ('next_job_id', '1');
)sql";
constexpr const char kCreateIndexes[] = R"sql(
  CREATE INDEX jobs_ended ON jobs(ended, id);
  CREATE INDEX jobs_uid ON jobs(uid, ended, id);
  CREATE INDEX jobs_signature ON jobs(signature, state, id) WHERE signature IS NOT NULL;
)sql";
// What schema 3 added to schema 2.
constexpr const char kCreateSchema3[] = R"sql(
  CREATE TABLE lists(id INTEGER PRIMARY KEY, data TEXT NOT NULL);
  CREATE INDEX jobs_command_list ON jobs(command_list) WHERE command_list IS NOT NULL;
  CREATE INDEX jobs_env_list ON jobs(env_list) WHERE env_list IS NOT NULL;
  CREATE TABLE submit_tokens(
    uid INTEGER NOT NULL,
    token TEXT NOT NULL,
    job INTEGER NOT NULL,
    time REAL NOT NULL,
    PRIMARY KEY(uid, token));
  CREATE INDEX submit_tokens_time ON submit_tokens(time);
)sql";
constexpr const char kMigrateToSchema3[] = R"sql(
  ALTER TABLE jobs ADD COLUMN command_list INTEGER;
  ALTER TABLE jobs ADD COLUMN env_list INTEGER;
  UPDATE meta SET value = '3' WHERE key = 'schema';
)sql";
// Schema 1 had no columns for queries; its state index is replaced by the ones above.
constexpr const char kMigrateColumns[] = R"sql(
  ALTER TABLE jobs ADD COLUMN ended INTEGER NOT NULL DEFAULT 0;
  ALTER TABLE jobs ADD COLUMN signature TEXT;
  ALTER TABLE jobs ADD COLUMN quarantined TEXT;
  DROP INDEX IF EXISTS jobs_state;
  UPDATE jobs SET ended = state IN ('succeeded', 'failed', 'cancelled', 'lost');
  UPDATE meta SET value = '2' WHERE key = 'schema';
)sql";
// Every column the statements below use: a database with the right version but not these is not
// one colod can work with, and Open says so instead of the first query.
constexpr const char kCheckColumns[] = R"sql(
  SELECT (SELECT count(*) FROM (SELECT key, value FROM meta LIMIT 0)),
         (SELECT count(*) FROM (SELECT id, uid, state, submitted, finished, record, ended,
                                       signature, quarantined, command_list, env_list
                                FROM jobs LIMIT 0)),
         (SELECT count(*) FROM (SELECT seq, time, job, kind, detail FROM events LIMIT 0)),
         (SELECT count(*) FROM (SELECT id, data FROM lists LIMIT 0)),
         (SELECT count(*) FROM (SELECT uid, token, job, time FROM submit_tokens LIMIT 0))
)sql";

constexpr const char kUserTables[] =
    "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite\\_%' ESCAPE "
    "'\\'";
constexpr const char kSchemaVersion[] = "SELECT value FROM meta WHERE key = 'schema'";
// The counter may be missing or garbage (CAST gives 0) and the table may hold ids above it: the
// new id is above both.
constexpr const char kIdState[] =
    "SELECT (SELECT CAST(value AS INTEGER) FROM meta WHERE key = 'next_job_id'), "
    "(SELECT max(id) FROM jobs)";
constexpr const char kSetCounter[] =
    "INSERT OR REPLACE INTO meta(key, value) VALUES('next_job_id', CAST(?1 AS TEXT))";
// Fair-share usage: "AS_OF_MS\n" then "USAGE USER\n" per user (user names have no spaces).
constexpr const char kGetUsage[] = "SELECT value FROM meta WHERE key = 'usage'";
constexpr const char kSetUsage[] = "INSERT OR REPLACE INTO meta(key, value) VALUES('usage', ?1)";
constexpr const char kInsertJob[] =
    "INSERT INTO jobs(id, uid, state, submitted, finished, record, ended, signature, quarantined, "
    "command_list, env_list) VALUES(?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, NULL, ?9, ?10)";
constexpr const char kUpdateJob[] =
    "UPDATE jobs SET uid = ?2, state = ?3, submitted = ?4, finished = ?5, record = ?6, ended = ?7, "
    "signature = ?8, command_list = ?9, env_list = ?10 WHERE id = ?1 AND quarantined IS NULL";
constexpr const char kListsOfJob[] = "SELECT command_list, env_list FROM jobs WHERE id = ?1";
constexpr const char kQuarantineOf[] = "SELECT quarantined FROM jobs WHERE id = ?1";
constexpr const char kInsertEvent[] =
    "INSERT INTO events(time, job, kind, detail) VALUES(?1, ?2, ?3, ?4)";
constexpr const char kLiveJobs[] =
    "SELECT id, record, command_list, env_list, quarantined FROM jobs WHERE ended = 0 ORDER BY id";
constexpr const char kQuarantine[] =
    "UPDATE jobs SET quarantined = ?2 WHERE id = ?1 AND quarantined IS NULL";
constexpr const char kFindJob[] =
    "SELECT id, record, command_list, env_list, quarantined FROM jobs WHERE id = ?1";
// Two statements rather than an optional filter, so each has its index.
constexpr const char kHistory[] =
    "SELECT id, record, command_list, env_list"
    " FROM jobs WHERE ended = 1 AND id < ?1 AND quarantined IS NULL ORDER BY id DESC";
constexpr const char kHistoryOfUser[] =
    "SELECT id, record, command_list, env_list"
    " FROM jobs WHERE uid = ?2 AND ended = 1 AND id < ?1 AND quarantined IS NULL "
    "ORDER BY id DESC";
constexpr const char kEvents[] =
    "SELECT time, job, kind, detail FROM events WHERE job = ?1 ORDER BY seq";
// By the primary key, so only the rows returned are read.
constexpr const char kRecentEvents[] =
    "SELECT time, job, kind, detail FROM events ORDER BY seq DESC LIMIT ?1";
constexpr const char kPeakJobs[] =
    "SELECT id, record, command_list, env_list"
    " FROM jobs WHERE signature = ?1 AND state IN (?2, ?3) AND quarantined IS NULL "
    "ORDER BY id DESC";
// By the time columns: no index (a report's scan of a table of job rows takes milliseconds), no
// decoding of the rows outside the range.
constexpr const char kEndedBetween[] =
    "SELECT id, record, command_list, env_list"
    " FROM jobs WHERE ended = 1 AND quarantined IS NULL AND finished >= ?1 AND submitted < ?2 "
    "ORDER BY id";
constexpr const char kMigrationRows[] =
    "SELECT id, record FROM jobs WHERE id > ?1 ORDER BY id LIMIT ?2";
constexpr const char kMigrationQuarantine[] = "UPDATE jobs SET quarantined = ?2 WHERE id = ?1";
constexpr const char kInsertList[] = "INSERT INTO lists(data) VALUES(?1)";
constexpr const char kFindList[] = "SELECT data FROM lists WHERE id = ?1";
// Gone once no job names it.
constexpr const char kDropList[] =
    "DELETE FROM lists WHERE id = ?1 AND NOT EXISTS (SELECT 1 FROM jobs WHERE command_list = ?1) "
    "AND NOT EXISTS (SELECT 1 FROM jobs WHERE env_list = ?1)";
constexpr const char kInsertToken[] =
    "INSERT OR REPLACE INTO submit_tokens(uid, token, job, time) VALUES(?1, ?2, ?3, ?4)";
constexpr const char kFindToken[] =
    "SELECT job FROM submit_tokens WHERE uid = ?1 AND token = ?2 AND time >= ?3";
constexpr const char kExpireTokens[] = "DELETE FROM submit_tokens WHERE time < ?1";

std::string ErrnoText(int error) {
  return std::strerror(error);
}

// What is wrong with a place the state database cannot be written in, in the words an
// administrator searches for.
std::string UnwritableReason(int error) {
  if (error == EACCES || error == EPERM)
    return fmt::format("read-only directory ({})", ErrnoText(error));
  if (error == EROFS) return "read-only directory (read-only file system)";
  return ErrnoText(error);
}

// An existing file of the database (the database, its -wal or -shm) made owner-only; checks that
// it is a regular file, not a link, and colod's own. Absent is fine: SQLite creates the -wal and
// -shm files with the database's mode.
Status SecureExistingFile(const std::string& file, const std::string& db_path) {
  const auto error = [&](std::string_view reason) {
    return Unavailable(
        fmt::format("cannot open the state database {}: {} {}", db_path, file, reason));
  };
  struct stat st {};
  if (lstat(file.c_str(), &st) != 0) {
    if (errno == ENOENT) return Status::Ok();
    return error(ErrnoText(errno));
  }
  if (S_ISLNK(st.st_mode)) return error("is a symbolic link");
  if (!S_ISREG(st.st_mode)) return error("is not a regular file");
  // O_NONBLOCK: should it have been swapped for a FIFO since, open must not wait on it.
  const int fd = open(file.c_str(), O_RDWR | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) {
    return error(errno == ELOOP ? std::string("is a symbolic link")
                                : "cannot be opened: " + ErrnoText(errno));
  }
  Status status;
  if (fstat(fd, &st) != 0) {
    status = error(ErrnoText(errno));
  } else if (!S_ISREG(st.st_mode)) {
    status = error("is not a regular file");
  } else if (st.st_uid != geteuid()) {
    // Whoever owns it could write jobs that colod would run as anyone.
    status =
        error(fmt::format("belongs to uid {}, not to colod's user (uid {})", st.st_uid, geteuid()));
  } else if ((st.st_mode & 07777) != kOwnerOnly && fchmod(fd, kOwnerOnly) != 0) {
    status = error("cannot be made owner-only: " + ErrnoText(errno));
  }
  close(fd);
  return status;
}

// Creates the database file owner-only before SQLite opens it (SQLite would create it with the
// umask's mode, world-readable under the usual 022), and secures every file of it that exists.
Status PrepareFiles(const std::string& path) {
  const auto error = [&](std::string_view reason) {
    return Unavailable(fmt::format("cannot open the state database {}: {}", path, reason));
  };
  if (path.empty()) return InvalidArgument("the state database needs a path");
  std::string dir = std::filesystem::path(path).parent_path().string();
  if (dir.empty()) dir = ".";
  struct stat dir_stat {};
  if (stat(dir.c_str(), &dir_stat) != 0) {
    return error(errno == ENOENT ? fmt::format("directory {} does not exist", dir)
                                 : fmt::format("directory {}: {}", dir, ErrnoText(errno)));
  }
  if (!S_ISDIR(dir_stat.st_mode)) return error(fmt::format("{} is not a directory", dir));
  // Anyone who may write the directory may put their own -wal file there before colod's.
  if (dir_stat.st_mode & S_IWOTH)
    return error(fmt::format("directory {} is writable by every user", dir));
  // SQLite creates the -wal and -shm files beside the database: the directory must be writable
  // even when the database exists.
  if (faccessat(AT_FDCWD, dir.c_str(), W_OK | X_OK, AT_EACCESS) != 0)
    return error(UnwritableReason(errno));

  COLO_RETURN_IF_ERROR(SecureExistingFile(path, path));
  const int fd =
      open(path.c_str(), O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK, kOwnerOnly);
  if (fd < 0) {
    if (errno == ELOOP) return error("it is a symbolic link");
    return error(UnwritableReason(errno));
  }
  // Closed before SQLite opens the file: closing any descriptor of a file drops every POSIX lock
  // this process holds on it, SQLite's included.
  close(fd);
  COLO_RETURN_IF_ERROR(SecureExistingFile(path, path));
  COLO_RETURN_IF_ERROR(SecureExistingFile(path + "-wal", path));
  COLO_RETURN_IF_ERROR(SecureExistingFile(path + "-shm", path));
  return Status::Ok();
}

std::string_view SignatureOf(const Job& job) {
  return job.estimate ? std::string_view(job.estimate->signature) : std::string_view();
}

// A schema version that is a number above ours: a newer colod wrote the file.
bool IsNewerVersion(std::string_view version) {
  int number = 0;
  const auto [end, error] =
      std::from_chars(version.data(), version.data() + version.size(), number);
  return error == std::errc() && end == version.data() + version.size() &&
         number > kStateSchemaVersion;
}

}  // namespace

// A cached prepared statement for one use: reset and unbound when it goes out of scope, so no
// statement keeps a read transaction open.
class SqliteJobStore::Statement {
 public:
  Statement(SqliteJobStore& store, const char* sql) : stmt_(store.Prepare(sql, rc_)) {}
  ~Statement() {
    if (stmt_) {
      sqlite3_reset(stmt_);
      sqlite3_clear_bindings(stmt_);
    }
  }
  Statement(const Statement&) = delete;
  Statement& operator=(const Statement&) = delete;

  void Bind(int index, int64_t value) {
    if (stmt_) Check(sqlite3_bind_int64(stmt_, index, value));
  }
  void Bind(int index, double value) {
    if (stmt_) Check(sqlite3_bind_double(stmt_, index, value));
  }
  void Bind(int index, std::string_view text) {
    if (stmt_)
      Check(sqlite3_bind_text64(stmt_, index, text.data(), text.size(), SQLITE_TRANSIENT,
                                SQLITE_UTF8));
  }
  void BindNull(int index) {
    if (stmt_) Check(sqlite3_bind_null(stmt_, index));
  }

  // SQLITE_ROW, SQLITE_DONE, or the error (a failed prepare or bind included).
  int Step() {
    if (rc_ != SQLITE_OK) return rc_;
    const int rc = sqlite3_step(stmt_);
    if (rc != SQLITE_ROW && rc != SQLITE_DONE) rc_ = rc;
    return rc;
  }

  bool IsNull(int column) { return sqlite3_column_type(stmt_, column) == SQLITE_NULL; }
  int64_t Int64(int column) { return sqlite3_column_int64(stmt_, column); }
  double Double(int column) { return sqlite3_column_double(stmt_, column); }
  // The column's bytes as they are (a record may hold NUL bytes in strings); empty for NULL.
  std::string_view Text(int column) {
    const auto* text = reinterpret_cast<const char*>(sqlite3_column_text(stmt_, column));
    if (!text) return {};
    return {text, static_cast<size_t>(sqlite3_column_bytes(stmt_, column))};
  }

 private:
  void Check(int rc) {
    if (rc_ == SQLITE_OK && rc != SQLITE_OK) rc_ = rc;
  }

  int rc_ = SQLITE_OK;
  sqlite3_stmt* stmt_;
};

// BEGIN IMMEDIATE … COMMIT; rolled back when it goes out of scope uncommitted. IMMEDIATE takes
// the write lock first, so a transaction never fails half way for want of it.
class SqliteJobStore::Transaction {
 public:
  explicit Transaction(sqlite3* db) : db_(db) {}
  ~Transaction() {
    // A failed COMMIT or a full disk may have rolled back already.
    if (open_ && !sqlite3_get_autocommit(db_))
      sqlite3_exec(db_, "ROLLBACK", nullptr, nullptr, nullptr);
  }
  Transaction(const Transaction&) = delete;
  Transaction& operator=(const Transaction&) = delete;

  int Begin() {
    const int rc = sqlite3_exec(db_, "BEGIN IMMEDIATE", nullptr, nullptr, nullptr);
    open_ = rc == SQLITE_OK;
    return rc;
  }
  int Commit() {
    const int rc = sqlite3_exec(db_, "COMMIT", nullptr, nullptr, nullptr);
    if (rc == SQLITE_OK) open_ = false;
    return rc;
  }

 private:
  sqlite3* db_;
  bool open_ = false;
};

SqliteJobStore::SqliteJobStore(std::string path, sqlite3* db) : path_(std::move(path)), db_(db) {}

SqliteJobStore::~SqliteJobStore() {
  for (auto& [sql, stmt] : statements_) sqlite3_finalize(stmt);
  sqlite3_close(db_);
}

Result<std::unique_ptr<SqliteJobStore>> SqliteJobStore::Open(const std::string& path) {
  COLO_RETURN_IF_ERROR(PrepareFiles(path));
  sqlite3* db = nullptr;
  // NOFOLLOW: the file was checked above; it must not have become a link since. No mutex:
  // mutex_ serializes every use of the connection.
  const int rc =
      sqlite3_open_v2(path.c_str(), &db,
                      SQLITE_OPEN_READWRITE | SQLITE_OPEN_NOFOLLOW | SQLITE_OPEN_NOMUTEX, nullptr);
  if (rc != SQLITE_OK) {
    const std::string reason = db ? sqlite3_errmsg(db) : sqlite3_errstr(rc);
    sqlite3_close(db);
    return Unavailable(fmt::format("cannot open the state database {}: {}", path, reason));
  }
  std::unique_ptr<SqliteJobStore> store(new SqliteJobStore(path, db));
  COLO_RETURN_IF_ERROR(store->Configure());
  COLO_RETURN_IF_ERROR(store->PrepareSchema());
  return store;
}

Status SqliteJobStore::Configure() {
  sqlite3_extended_result_codes(db_, 1);
  sqlite3_busy_timeout(db_, kBusyTimeoutMs);
  // The file is treated as untrusted input: no writable schema, no functions with side effects
  // run from views or triggers someone may have put in it.
  sqlite3_db_config(db_, SQLITE_DBCONFIG_DEFENSIVE, 1, nullptr);
  sqlite3_db_config(db_, SQLITE_DBCONFIG_TRUSTED_SCHEMA, 0, nullptr);
  const auto error = [&](int rc) {
    const int primary = rc & 0xff;
    if (primary == SQLITE_NOTADB) {
      return FailedPrecondition(fmt::format(
          "cannot open the state database {}: it is not a colo database ({})", path_, Reason(rc)));
    }
    if (primary == SQLITE_CORRUPT)
      return FailedPrecondition(
          fmt::format("cannot open the state database {}: {}", path_, Reason(rc)));
    return Unavailable(fmt::format("cannot open the state database {}: {}", path_, Reason(rc)));
  };
  // The first statement that reads the file: a file that is not a database fails here.
  std::string mode;
  {
    Statement wal(*this, "PRAGMA journal_mode=WAL");
    int rc = wal.Step();
    if (rc != SQLITE_ROW) return error(rc);
    mode = wal.Text(0);
  }
  if (mode != "wal")
    return Unavailable(fmt::format(
        "cannot open the state database {}: it cannot use write-ahead logging (journal mode {})",
        path_, Printable(mode)));
  // FULL: a commit is on disk before Insert returns, so an acknowledged job survives power loss.
  if (int rc = sqlite3_exec(db_, "PRAGMA synchronous=FULL", nullptr, nullptr, nullptr);
      rc != SQLITE_OK)
    return error(rc);
  return Status::Ok();
}

Status SqliteJobStore::PrepareSchema() {
  const auto error = [&](int rc) {
    return Unavailable(fmt::format("cannot open the state database {}: {}", path_, Reason(rc)));
  };
  const auto not_ours = [&](std::string_view why) {
    return FailedPrecondition(fmt::format(
        "cannot open the state database {}: it is not a colo database ({})", path_, why));
  };
  // Inside one write transaction: two colods opening one new file cannot both create or migrate.
  Transaction transaction(db_);
  if (int rc = transaction.Begin(); rc != SQLITE_OK) return error(rc);
  std::set<std::string, std::less<>> tables;
  {
    Statement list(*this, kUserTables);
    int rc;
    while ((rc = list.Step()) == SQLITE_ROW) tables.emplace(list.Text(0));
    if (rc != SQLITE_DONE) return error(rc);
  }
  if (tables.empty()) {
    char* message = nullptr;
    int rc = sqlite3_exec(db_, kCreateTables, nullptr, nullptr, &message);
    if (rc == SQLITE_OK) rc = sqlite3_exec(db_, kCreateIndexes, nullptr, nullptr, &message);
    if (rc == SQLITE_OK) rc = sqlite3_exec(db_, kCreateSchema3, nullptr, nullptr, &message);
    sqlite3_free(message);
    if (rc != SQLITE_OK) return error(rc);
  } else {
    if (!tables.contains("meta") || !tables.contains("jobs") || !tables.contains("events"))
      return not_ours("it has no colo tables");
    std::string version;
    {
      Statement schema(*this, kSchemaVersion);
      const int rc = schema.Step();
      if (rc == SQLITE_DONE) return not_ours("no schema version");
      if (rc != SQLITE_ROW) return not_ours(Reason(rc));
      version = schema.Text(0);
    }
    if (version == "1" || version == "2") {
      COLO_RETURN_IF_ERROR(MigrateToSchema3(version == "1"));
    } else if (version != std::to_string(kStateSchemaVersion)) {
      if (IsNewerVersion(version))
        return FailedPrecondition(fmt::format(
            "cannot open the state database {}: it has schema version {}, newer than this colod "
            "reads ({})",
            path_, version, kStateSchemaVersion));
      return not_ours(fmt::format("schema version '{}'", Printable(TruncateUtf8(version, 32))));
    }
  }
  {
    Statement columns(*this, kCheckColumns);
    if (int rc = columns.Step(); rc != SQLITE_ROW) return not_ours(Reason(rc));
  }
  if (int rc = transaction.Commit(); rc != SQLITE_OK) return error(rc);
  return Status::Ok();
}

// Schema 3's tables and columns, then (from schema 1) every record rewritten in this codec's
// format, and the long lists moved out of the records, inside the caller's transaction.
Status SqliteJobStore::MigrateToSchema3(bool from_schema1) {
  const auto error = [&](std::string_view what, int rc) {
    return Unavailable(fmt::format("cannot migrate the state database {} to schema 3: {}: {}",
                                   path_, what, Reason(rc)));
  };
  char* message = nullptr;
  int rc = SQLITE_OK;
  if (from_schema1) {
    rc = sqlite3_exec(db_, kMigrateColumns, nullptr, nullptr, &message);
    if (rc == SQLITE_OK) rc = sqlite3_exec(db_, kCreateIndexes, nullptr, nullptr, &message);
  }
  if (rc == SQLITE_OK) rc = sqlite3_exec(db_, kMigrateToSchema3, nullptr, nullptr, &message);
  if (rc == SQLITE_OK) rc = sqlite3_exec(db_, kCreateSchema3, nullptr, nullptr, &message);
  sqlite3_free(message);
  if (rc != SQLITE_OK) return error("tables and columns", rc);
  if (from_schema1) COLO_RETURN_IF_ERROR(RewriteSchema1Records());
  return MoveLongLists();
}

// Rewrites every schema-1 record in this codec's format, inside the caller's transaction. A
// record that cannot be read is quarantined with the reason, not lost and not fatal.
Status SqliteJobStore::RewriteSchema1Records() {
  const auto error = [&](std::string_view what, int rc) {
    return Unavailable(fmt::format("cannot migrate the state database {} from schema 1: {}: {}",
                                   path_, what, Reason(rc)));
  };
  return ForEachRecord(error, [&](JobId id, const std::string& text) {
    Result<Job> job = DecodeSchema1Job(text);
    std::string problem;
    if (!job.ok()) {
      problem = job.status().message();
    } else if (job->id() != id) {
      problem = fmt::format("spec.id: {} in the record of job {}", job->id(), id);
    }
    if (!problem.empty()) {
      Statement quarantine(*this, kMigrationQuarantine);
      quarantine.Bind(1, id);
      quarantine.Bind(2, std::string_view(problem));
      if (int rc = quarantine.Step(); rc != SQLITE_DONE)
        return error(fmt::format("quarantine job {}", id), rc);
      return Status::Ok();
    }
    // Its lists stay in the record; MoveLongLists moves the long ones out.
    Row row;
    row.record = EncodeJob(*job);
    Statement update(*this, kUpdateJob);
    BindJobRow(update, *job, row);
    if (int rc = update.Step(); rc != SQLITE_DONE)
      return error(fmt::format("rewrite job {}", id), rc);
    return Status::Ok();
  });
}

template <typename Error, typename Visit>
Status SqliteJobStore::ForEachRecord(const Error& error, const Visit& visit) {
  JobId after = INT64_MIN;
  while (true) {
    std::vector<std::pair<JobId, std::string>> batch;
    {
      Statement rows(*this, kMigrationRows);
      rows.Bind(1, after);
      rows.Bind(2, int64_t{kMigrationBatch});
      int rc;
      while ((rc = rows.Step()) == SQLITE_ROW) batch.emplace_back(rows.Int64(0), rows.Text(1));
      if (rc != SQLITE_DONE) return error("read jobs", rc);
    }
    if (batch.empty()) return Status::Ok();
    for (const auto& [id, text] : batch) COLO_RETURN_IF_ERROR(visit(id, text));
    after = batch.back().first;
  }
}

// Every command and environment of kListBytes or more moved out of the records into `lists`,
// one row per distinct list (a thousand tasks of an array that held a copy each now name one
// row), inside the caller's transaction.
Status SqliteJobStore::MoveLongLists() {
  const auto error = [&](std::string_view what, int rc) {
    return Unavailable(fmt::format("cannot migrate the state database {} to schema 3: {}: {}",
                                   path_, what, Reason(rc)));
  };
  // Lists already moved, by the hash of their text (the text itself is compared on a match).
  std::unordered_multimap<size_t, int64_t> moved;
  const auto row_of = [&](const std::vector<std::string>& list) -> Result<std::optional<int64_t>> {
    const std::string text = EncodeStrings(list);
    if (text.size() < kListBytes) return std::optional<int64_t>();
    const size_t hash = std::hash<std::string>{}(text);
    for (auto [it, end] = moved.equal_range(hash); it != end; ++it) {
      Statement known(*this, kFindList);
      known.Bind(1, it->second);
      if (known.Step() == SQLITE_ROW && known.Text(0) == text)
        return std::optional<int64_t>(it->second);
    }
    Statement insert(*this, kInsertList);
    insert.Bind(1, std::string_view(text));
    if (int step = insert.Step(); step != SQLITE_DONE) return error("a list", step);
    const int64_t id = sqlite3_last_insert_rowid(db_);
    moved.emplace(hash, id);
    return std::optional<int64_t>(id);
  };
  return ForEachRecord(error, [&](JobId id, const std::string& text) {
    // A record that cannot be read is left as it is: LoadLive quarantines it, naming why.
    Result<Job> job = DecodeJob(text);
    if (!job.ok() || job->id() != id) return Status::Ok();
    Row row;
    auto command = row_of(job->spec.command);
    if (!command.ok()) return command.status();
    auto env = row_of(job->env);
    if (!env.ok()) return env.status();
    row.command_list = *command;
    row.env_list = *env;
    if (!row.command_list && !row.env_list) return Status::Ok();
    if (row.command_list) job->spec.command.clear();
    if (row.env_list) job->env.clear();
    row.record = EncodeJob(*job);
    Statement update(*this, kUpdateJob);
    BindJobRow(update, *job, row);
    if (int rc = update.Step(); rc != SQLITE_DONE)
      return error(fmt::format("rewrite job {}", id), rc);
    return Status::Ok();
  });
}

Status PrepareDatabaseFile(const std::string& path) {
  return PrepareFiles(path);
}

sqlite3_stmt* SqliteJobStore::Prepare(const char* sql, int& rc) {
  for (const auto& [text, stmt] : statements_) {
    if (text == sql) {
      rc = SQLITE_OK;
      return stmt;
    }
  }
  sqlite3_stmt* stmt = nullptr;
  rc = sqlite3_prepare_v3(db_, sql, -1, SQLITE_PREPARE_PERSISTENT, &stmt, nullptr);
  if (rc != SQLITE_OK) {
    sqlite3_finalize(stmt);
    // A statement that is not cached is not reset by Statement: none was made.
    return nullptr;
  }
  statements_.emplace_back(sql, stmt);
  return stmt;
}

std::string SqliteJobStore::Reason(int rc) const {
  const int system_error = sqlite3_system_errno(db_);
  switch (rc & 0xff) {
    case SQLITE_FULL:
      return "disk full";
    case SQLITE_IOERR:
      if (system_error == ENOSPC) return "disk full";
      if (system_error == EDQUOT) return "disk quota exceeded";
      return system_error ? fmt::format("I/O error ({})", ErrnoText(system_error)) : "I/O error";
    case SQLITE_CORRUPT:
      return "the database file is corrupted";
    case SQLITE_NOTADB:
      return "file is not a database";
    case SQLITE_READONLY:
      return "the database is read-only";
    case SQLITE_BUSY:
    case SQLITE_LOCKED:
      return "the database is locked by another process";
    case SQLITE_NOMEM:
      return "out of memory";
    case SQLITE_CANTOPEN:
      return system_error ? fmt::format("cannot open a file of it ({})", ErrnoText(system_error))
                          : "cannot open a file of it";
    default:
      return Printable(sqlite3_errmsg(db_));
  }
}

Status SqliteJobStore::WriteError(const std::string& what, int rc) const {
  disk_full_ = disk_full_ || (rc & 0xff) == SQLITE_FULL ||
               ((rc & 0xff) == SQLITE_IOERR && sqlite3_system_errno(db_) == ENOSPC);
  return Unavailable(fmt::format("cannot store {} in {}: {}", what, path_, Reason(rc)));
}

Status SqliteJobStore::ReadError(const std::string& what, int rc) const {
  return Unavailable(fmt::format("cannot read {} from {}: {}", what, path_, Reason(rc)));
}

Status SqliteJobStore::InsertEvents(const std::vector<JobEvent>& events, JobId new_job) {
  for (const JobEvent& event : events) {
    const JobEvent stored = StoredEvent(event);
    Statement insert(*this, kInsertEvent);
    insert.Bind(1, ToEpochSeconds(stored.time));
    insert.Bind(2, stored.job == 0 && new_job != 0 ? new_job : stored.job);
    insert.Bind(3, std::string_view(stored.kind));
    insert.Bind(4, std::string_view(stored.detail));
    if (int rc = insert.Step(); rc != SQLITE_DONE) return WriteError("an event", rc);
  }
  return Status::Ok();
}

Result<JobId> SqliteJobStore::NextId(const std::string& what) {
  Statement ids(*this, kIdState);
  if (int rc = ids.Step(); rc != SQLITE_ROW) return WriteError(what, rc);
  const JobId counter = ids.IsNull(0) ? 0 : ids.Int64(0);
  const JobId max_id = ids.IsNull(1) ? 0 : ids.Int64(1);
  // INT64_MAX is never handed out, so the counter after it always fits.
  if (max_id >= INT64_MAX - 1 || counter >= INT64_MAX)
    return FailedPrecondition(
        fmt::format("cannot store {} in {}: job ids are used up", what, path_));
  return std::max({counter, max_id + 1, JobId{1}});
}

Status SqliteJobStore::SetNextId(JobId next, const std::string& what) {
  Statement counter(*this, kSetCounter);
  counter.Bind(1, next);
  if (int rc = counter.Step(); rc != SQLITE_DONE) return WriteError(what, rc);
  return Status::Ok();
}

Result<std::optional<int64_t>> SqliteJobStore::ListRow(const SharedStrings& list,
                                                       const std::string& what) {
  const auto& shared = list.shared();
  if (!shared) return std::optional<int64_t>();
  if (auto it = stored_lists_.find(shared.get());
      it != stored_lists_.end() && it->second.list.lock() == shared)
    return std::optional<int64_t>(it->second.id);
  for (const auto& [address, stored] : new_lists_) {
    if (address == shared.get()) return std::optional<int64_t>(stored.id);
  }
  const std::string text = EncodeStrings(*shared);
  if (text.size() < kListBytes) return std::optional<int64_t>();
  Statement insert(*this, kInsertList);
  insert.Bind(1, std::string_view(text));
  if (int rc = insert.Step(); rc != SQLITE_DONE) return WriteError(what, rc);
  const int64_t id = sqlite3_last_insert_rowid(db_);
  new_lists_.emplace_back(shared.get(), StoredList{shared, id});
  return std::optional<int64_t>(id);
}

void SqliteJobStore::SettleLists(bool committed) {
  if (committed) {
    for (auto& [address, stored] : new_lists_) stored_lists_[address] = std::move(stored);
    // Entries whose list no job holds any more go now and then: the map follows what is live.
    if (stored_lists_.size() > 2 * live_lists_ + 64) {
      std::erase_if(stored_lists_, [](const auto& entry) { return entry.second.list.expired(); });
      live_lists_ = stored_lists_.size();
    }
  }
  new_lists_.clear();
}

Status SqliteJobStore::DropListIfUnnamed(int64_t id, const std::string& what) {
  Statement drop(*this, kDropList);
  drop.Bind(1, id);
  if (int rc = drop.Step(); rc != SQLITE_DONE) return WriteError(what, rc);
  if (sqlite3_changes(db_) > 0)
    std::erase_if(stored_lists_, [id](const auto& entry) { return entry.second.id == id; });
  return Status::Ok();
}

Result<SqliteJobStore::Row> SqliteJobStore::RowOf(const Job& job, const std::string& what) {
  Row row;
  auto command = ListRow(job.spec.command, what);
  if (!command.ok()) return command.status();
  auto env = ListRow(job.env, what);
  if (!env.ok()) return env.status();
  row.command_list = *command;
  row.env_list = *env;
  if (row.command_list || row.env_list) {
    Job kept = job;  // cheap: the lists are shared, not copied
    if (row.command_list) kept.spec.command.clear();
    if (row.env_list) kept.env.clear();
    row.record = EncodeJob(kept);
  } else {
    row.record = EncodeJob(job);
  }
  if (row.record.size() > kMaxJobRecordBytes)
    return InvalidArgument(fmt::format("cannot store {}: its record is {} bytes, more than {}",
                                       what, row.record.size(), kMaxJobRecordBytes));
  return row;
}

Status SqliteJobStore::InsertRow(const Job& job, const std::string& what) {
  auto row = RowOf(job, what);
  if (!row.ok()) return row.status();
  Statement insert(*this, kInsertJob);
  BindJobRow(insert, job, *row);
  if (int rc = insert.Step(); rc != SQLITE_DONE) return WriteError(what, rc);
  return Status::Ok();
}

Status SqliteJobStore::UpdateRow(const Job& job, const std::string& what) {
  std::optional<int64_t> before[2];
  {
    Statement lists(*this, kListsOfJob);
    lists.Bind(1, job.id());
    const int rc = lists.Step();
    if (rc == SQLITE_DONE) return NotFound(fmt::format("job {} is not in the store", job.id()));
    if (rc != SQLITE_ROW) return WriteError(what, rc);
    for (int i = 0; i < 2; ++i) {
      if (!lists.IsNull(i)) before[i] = lists.Int64(i);
    }
  }
  auto row = RowOf(job, what);
  if (!row.ok()) return row.status();
  {
    Statement update(*this, kUpdateJob);
    BindJobRow(update, job, *row);
    if (int rc = update.Step(); rc != SQLITE_DONE) return WriteError(what, rc);
  }
  if (sqlite3_changes(db_) == 0) {
    Statement quarantined(*this, kQuarantineOf);
    quarantined.Bind(1, job.id());
    const int rc = quarantined.Step();
    if (rc == SQLITE_DONE) return NotFound(fmt::format("job {} is not in the store", job.id()));
    if (rc != SQLITE_ROW) return WriteError(what, rc);
    return FailedPrecondition(
        fmt::format("job {} is quarantined ({}): its stored record is kept as it is", job.id(),
                    Printable(quarantined.Text(0))));
  }
  // A list the job no longer names (an ended job's environment) goes once no job names it.
  for (const auto& [was, now] :
       {std::pair{before[0], row->command_list}, std::pair{before[1], row->env_list}}) {
    if (was && was != now) COLO_RETURN_IF_ERROR(DropListIfUnnamed(*was, what));
  }
  return Status::Ok();
}

Status SqliteJobStore::InsertToken(const Job& job, std::string_view token,
                                   const std::string& what) {
  if (token.empty()) return Status::Ok();
  const double now = ToEpochSeconds(job.submitted);
  {
    Statement expire(*this, kExpireTokens);
    expire.Bind(1, now - ToSeconds(kSubmitTokenLifetime));
    if (int rc = expire.Step(); rc != SQLITE_DONE) return WriteError(what, rc);
  }
  Statement insert(*this, kInsertToken);
  insert.Bind(1, static_cast<int64_t>(job.owner.uid));
  insert.Bind(2, token.substr(0, kMaxSubmitTokenBytes));
  insert.Bind(3, job.id());
  insert.Bind(4, now);
  if (int rc = insert.Step(); rc != SQLITE_DONE) return WriteError(what, rc);
  return Status::Ok();
}

void SqliteJobStore::BindJobRow(Statement& statement, const Job& job, const Row& row) {
  statement.Bind(1, job.id());
  statement.Bind(2, static_cast<int64_t>(job.owner.uid));
  statement.Bind(3, ToString(job.state));
  statement.Bind(4, ToEpochSeconds(job.submitted));
  statement.Bind(5, ToEpochSeconds(job.finished));
  statement.Bind(6, std::string_view(row.record));
  statement.Bind(7, int64_t{job.live() ? 0 : 1});
  if (const std::string_view signature = SignatureOf(job); signature.empty())
    statement.BindNull(8);
  else
    statement.Bind(8, signature);
  for (const auto& [index, list] : {std::pair{9, row.command_list}, std::pair{10, row.env_list}}) {
    if (list)
      statement.Bind(index, *list);
    else
      statement.BindNull(index);
  }
}

// Each write, tried again once should it find the disk full and the reserve give room back.
template <typename Write>
auto SqliteJobStore::WithRoom(Write write) -> decltype(write()) {
  disk_full_ = false;
  auto result = write();
  if (!result.ok() && disk_full_ && release_space_ && release_space_()) {
    disk_full_ = false;
    result = write();
  }
  return result;
}

Status SqliteJobStore::Insert(Job& job, const std::vector<JobEvent>& events,
                              std::string_view token) {
  return WithRoom([&] { return InsertOnce(job, events, token); });
}

Result<JobId> SqliteJobStore::ReserveIds(int count) {
  return WithRoom([&] { return ReserveIdsOnce(count); });
}

Status SqliteJobStore::InsertReserved(const std::vector<Job>& jobs,
                                      const std::vector<JobEvent>& events, std::string_view token) {
  return WithRoom([&] { return InsertReservedOnce(jobs, events, token); });
}

Status SqliteJobStore::Update(const Job& job, const std::vector<JobEvent>& events) {
  return UpdateMany({JobChange{&job, events}});
}

Status SqliteJobStore::UpdateMany(const std::vector<JobChange>& changes) {
  return WithRoom([&] { return UpdateManyOnce(changes); });
}

Status SqliteJobStore::AddEvents(const std::vector<JobEvent>& events) {
  return WithRoom([&] { return AddEventsOnce(events); });
}

Status SqliteJobStore::InsertOnce(Job& job, const std::vector<JobEvent>& events,
                                  std::string_view token) {
  std::lock_guard lock(mutex_);
  const std::string what = "the new job";
  new_lists_.clear();
  Transaction transaction(db_);
  if (int rc = transaction.Begin(); rc != SQLITE_OK) return WriteError(what, rc);
  auto id = NextId(what);
  if (!id.ok()) return id.status();
  Job stored = job;
  stored.spec.id = *id;
  COLO_RETURN_IF_ERROR(InsertRow(stored, what));
  COLO_RETURN_IF_ERROR(SetNextId(*id + 1, what));
  COLO_RETURN_IF_ERROR(InsertToken(stored, token, what));
  COLO_RETURN_IF_ERROR(InsertEvents(events, *id));
  if (int rc = transaction.Commit(); rc != SQLITE_OK) return WriteError(what, rc);
  SettleLists(true);
  job.spec.id = *id;
  return Status::Ok();
}

Result<JobId> SqliteJobStore::ReserveIdsOnce(int count) {
  std::lock_guard lock(mutex_);
  const std::string what = fmt::format("{} new job ids", count);
  if (count < 1 || count > kMaxReservedIds)
    return InvalidArgument(
        fmt::format("cannot reserve {}: 1 to {} at once", what, kMaxReservedIds));
  Transaction transaction(db_);
  if (int rc = transaction.Begin(); rc != SQLITE_OK) return WriteError(what, rc);
  auto first = NextId(what);
  if (!first.ok()) return first.status();
  if (*first > INT64_MAX - 1 - count)
    return FailedPrecondition(
        fmt::format("cannot store {} in {}: job ids are used up", what, path_));
  COLO_RETURN_IF_ERROR(SetNextId(*first + count, what));
  if (int rc = transaction.Commit(); rc != SQLITE_OK) return WriteError(what, rc);
  return *first;
}

Status SqliteJobStore::InsertReservedOnce(const std::vector<Job>& jobs,
                                          const std::vector<JobEvent>& events,
                                          std::string_view token) {
  std::lock_guard lock(mutex_);
  const std::string what = fmt::format("{} new jobs", jobs.size());
  new_lists_.clear();
  Transaction transaction(db_);
  if (int rc = transaction.Begin(); rc != SQLITE_OK) return WriteError(what, rc);
  JobId handed_out_below = 0;
  {
    Statement counter(*this, kIdState);
    if (int rc = counter.Step(); rc != SQLITE_ROW) return WriteError(what, rc);
    handed_out_below = counter.IsNull(0) ? 0 : counter.Int64(0);
  }
  for (const Job& job : jobs) {
    if (job.id() < 1 || job.id() >= handed_out_below)
      return InvalidArgument(fmt::format("cannot store job {}: its id was not reserved", job.id()));
    // A stored id is refused by the table's key: nothing of the batch is kept.
    COLO_RETURN_IF_ERROR(InsertRow(job, fmt::format("job {}", job.id())));
  }
  if (!jobs.empty()) COLO_RETURN_IF_ERROR(InsertToken(jobs.front(), token, what));
  COLO_RETURN_IF_ERROR(InsertEvents(events, 0));
  if (int rc = transaction.Commit(); rc != SQLITE_OK) return WriteError(what, rc);
  SettleLists(true);
  return Status::Ok();
}

Status SqliteJobStore::UpdateManyOnce(const std::vector<JobChange>& changes) {
  std::lock_guard lock(mutex_);
  if (changes.empty()) return Status::Ok();
  const std::string what = changes.size() == 1 ? fmt::format("job {}", changes[0].job->id())
                                               : fmt::format("{} jobs", changes.size());
  new_lists_.clear();
  Transaction transaction(db_);
  if (int rc = transaction.Begin(); rc != SQLITE_OK) return WriteError(what, rc);
  for (const JobChange& change : changes) {
    COLO_RETURN_IF_ERROR(UpdateRow(*change.job, fmt::format("job {}", change.job->id())));
    COLO_RETURN_IF_ERROR(InsertEvents(change.events, 0));
  }
  if (int rc = transaction.Commit(); rc != SQLITE_OK) return WriteError(what, rc);
  SettleLists(true);
  return Status::Ok();
}

Result<std::optional<JobId>> SqliteJobStore::SubmittedWith(unsigned uid, std::string_view token,
                                                           WallTime since) {
  std::lock_guard lock(mutex_);
  Statement row(*this, kFindToken);
  row.Bind(1, static_cast<int64_t>(uid));
  row.Bind(2, token.substr(0, kMaxSubmitTokenBytes));
  row.Bind(3, ToEpochSeconds(since));
  const int rc = row.Step();
  if (rc == SQLITE_DONE) return std::optional<JobId>();
  if (rc != SQLITE_ROW) return ReadError("a submit's token", rc);
  return std::optional<JobId>(row.Int64(0));
}

Status SqliteJobStore::AddEventsOnce(const std::vector<JobEvent>& events) {
  if (events.empty()) return Status::Ok();
  std::lock_guard lock(mutex_);
  Transaction transaction(db_);
  if (int rc = transaction.Begin(); rc != SQLITE_OK) return WriteError("events", rc);
  COLO_RETURN_IF_ERROR(InsertEvents(events, 0));
  if (int rc = transaction.Commit(); rc != SQLITE_OK) return WriteError("events", rc);
  return Status::Ok();
}

Status SqliteJobStore::SaveUsage(const UsageRecord& usage) {
  std::string text = fmt::format(
      "{}\n", std::chrono::duration_cast<std::chrono::milliseconds>(usage.as_of.time_since_epoch())
                  .count());
  size_t kept = 0;
  for (const auto& [user, used] : usage.users) {
    if (++kept > kMaxUsageUsers) break;
    text += fmt::format("{:.6g} {}\n", used, user);
  }
  std::lock_guard lock(mutex_);
  Statement set(*this, kSetUsage);
  set.Bind(1, std::string_view(text));
  if (int rc = set.Step(); rc != SQLITE_DONE) return WriteError("fair-share usage", rc);
  return Status::Ok();
}

Result<UsageRecord> SqliteJobStore::LoadUsage() {
  std::lock_guard lock(mutex_);
  Statement get(*this, kGetUsage);
  UsageRecord usage;
  const int rc = get.Step();
  if (rc == SQLITE_DONE) return usage;
  if (rc != SQLITE_ROW) return ReadError("fair-share usage", rc);
  const std::string text(get.Text(0));
  auto bad = [&](const std::string& why) {
    return Internal(fmt::format("the fair-share usage in {} cannot be read: {}", path_, why));
  };
  std::istringstream in(text);
  std::string line;
  if (!std::getline(in, line)) return bad("it is empty");
  const Result<int64_t> ms = ParseInt(line);
  if (!ms.ok()) return bad("its first line is not a time");
  usage.as_of = WallTime(std::chrono::milliseconds(*ms));
  while (std::getline(in, line) && usage.users.size() < kMaxUsageUsers) {
    const size_t space = line.find(' ');
    const Result<double> used = space == std::string::npos ? InvalidArgument("no user")
                                                           : ParseDouble(line.substr(0, space));
    if (!used.ok() || !std::isfinite(*used) || *used < 0 || space + 1 >= line.size())
      return bad(fmt::format("line '{}'", Printable(TruncateUtf8(line, 80))));
    usage.users[line.substr(space + 1)] = *used;
  }
  return usage;
}

Status SqliteJobStore::Quarantine(JobId id, const std::string& reason) {
  Statement quarantine(*this, kQuarantine);
  quarantine.Bind(1, id);
  quarantine.Bind(2, std::string_view(reason));
  if (int rc = quarantine.Step(); rc != SQLITE_DONE)
    return WriteError(fmt::format("the quarantine of job {}", id), rc);
  return Status::Ok();
}

Result<SharedStrings> SqliteJobStore::ReadList(int64_t id, ListCache& lists) {
  if (auto it = lists.find(id); it != lists.end()) return it->second;
  Statement row(*this, kFindList);
  row.Bind(1, id);
  const int rc = row.Step();
  if (rc == SQLITE_DONE) return InvalidArgument(fmt::format("no list {}", id));
  if (rc != SQLITE_ROW) return ReadError(fmt::format("list {}", id), rc);
  auto strings = DecodeStrings(row.Text(0));
  if (!strings.ok())
    return InvalidArgument(fmt::format("list {}: {}", id, strings.status().message()));
  SharedStrings list(std::move(*strings));
  // Known from now on: the job written again names this row, without writing the list.
  stored_lists_[list.shared().get()] = StoredList{list.shared(), id};
  lists.emplace(id, list);
  return list;
}

// The job in a row, or why it cannot be read: its record must decode and be this row's, and the
// lists it names must be there.
Result<Job> SqliteJobStore::DecodeRow(Statement& row, ListCache& lists) {
  const JobId id = row.Int64(0);
  Result<Job> job = DecodeJob(row.Text(1));
  if (job.ok() && job->id() != id)
    return InvalidArgument(fmt::format("spec.id: {} in the record of job {}", job->id(), id));
  for (auto [column, field, list] :
       {std::tuple{2, "command_list", job.ok() ? &job->spec.command : nullptr},
        std::tuple{3, "env_list", job.ok() ? &job->env : nullptr}}) {
    if (!job.ok() || row.IsNull(column)) continue;
    auto read = ReadList(row.Int64(column), lists);
    if (!read.ok()) return InvalidArgument(fmt::format("{}: {}", field, read.status().message()));
    *list = *read;
  }
  return job;
}

Result<JobStore::LiveJobs> SqliteJobStore::LoadLive() {
  std::lock_guard lock(mutex_);
  LiveJobs live;
  std::vector<QuarantinedJob> newly_quarantined;
  {
    Statement rows(*this, kLiveJobs);
    ListCache lists;
    int rc;
    while ((rc = rows.Step()) == SQLITE_ROW) {
      const JobId id = rows.Int64(0);
      if (!rows.IsNull(4)) {
        live.quarantined.push_back({id, ValidUtf8(rows.Text(4))});
        continue;
      }
      Result<Job> job = DecodeRow(rows, lists);
      if (job.ok() && !job->live()) {
        job = InvalidArgument(
            fmt::format("state: '{}' in the record of a job stored as live", ToString(job->state)));
      }
      if (!job.ok()) {
        newly_quarantined.push_back({id, job.status().message()});
        continue;
      }
      live.jobs.push_back(std::move(*job));
    }
    if (rc != SQLITE_DONE) return ReadError("the live jobs", rc);
  }
  if (!newly_quarantined.empty()) {
    // Best effort: marked, the row is left alone by every later write and read. Should marking
    // fail (a full disk), it is found again on the next load.
    Transaction transaction(db_);
    if (transaction.Begin() == SQLITE_OK) {
      bool marked = true;
      for (const QuarantinedJob& q : newly_quarantined)
        marked = marked && Quarantine(q.id, q.reason).ok();
      if (marked) (void)transaction.Commit();
    }
    live.quarantined.insert(live.quarantined.end(), newly_quarantined.begin(),
                            newly_quarantined.end());
    std::sort(live.quarantined.begin(), live.quarantined.end(),
              [](const QuarantinedJob& a, const QuarantinedJob& b) { return a.id < b.id; });
  }
  return live;
}

Result<std::optional<Job>> SqliteJobStore::Find(JobId id) {
  std::lock_guard lock(mutex_);
  Statement row(*this, kFindJob);
  row.Bind(1, id);
  const int rc = row.Step();
  if (rc == SQLITE_DONE) return std::optional<Job>();
  if (rc != SQLITE_ROW) return ReadError(fmt::format("job {}", id), rc);
  if (!row.IsNull(4))
    return Internal(fmt::format("job {} is quarantined: {}", id, Printable(row.Text(4))));
  ListCache lists;
  Result<Job> job = DecodeRow(row, lists);
  if (!job.ok()) return Internal(fmt::format("job {}: {}", id, job.status().message()));
  return std::optional<Job>(std::move(*job));
}

Result<HistoryPage> SqliteJobStore::History(const HistoryQuery& query) {
  std::lock_guard lock(mutex_);
  const size_t limit = static_cast<size_t>(std::clamp(query.limit, 1, api::kMaxHistoryPage));
  Statement rows(*this, query.uid ? kHistoryOfUser : kHistory);
  rows.Bind(1, query.before.value_or(INT64_MAX));
  if (query.uid) rows.Bind(2, static_cast<int64_t>(*query.uid));
  HistoryPage page;
  ListCache lists;
  int rc = SQLITE_DONE;
  // No LIMIT in the query: a row that cannot be read is passed over and the page still filled.
  while (page.jobs.size() < limit && (rc = rows.Step()) == SQLITE_ROW) {
    Result<Job> job = DecodeRow(rows, lists);
    if (job.ok() && !job->live()) page.jobs.push_back(std::move(*job));
  }
  if (page.jobs.size() < limit && rc != SQLITE_DONE) return ReadError("the job history", rc);
  if (page.jobs.size() == limit) page.next = page.jobs.back().id();
  return page;
}

Result<std::vector<Job>> SqliteJobStore::EndedBetween(WallTime since, WallTime until,
                                                      size_t limit) {
  std::lock_guard lock(mutex_);
  Statement rows(*this, kEndedBetween);
  rows.Bind(1, ToEpochSeconds(since));
  rows.Bind(2, ToEpochSeconds(until));
  std::vector<Job> jobs;
  ListCache lists;
  int rc = SQLITE_DONE;
  while (jobs.size() <= limit && (rc = rows.Step()) == SQLITE_ROW) {
    Result<Job> job = DecodeRow(rows, lists);
    if (job.ok() && !job->live()) jobs.push_back(std::move(*job));
  }
  if (jobs.size() <= limit && rc != SQLITE_DONE) return ReadError("the jobs of the range", rc);
  return jobs;
}

JobEvent SqliteJobStore::EventOfRow(Statement& row) {
  JobEvent event;
  event.time = FromEpochSeconds(row.Double(0)).value_or(WallTime());
  event.job = row.Int64(1);
  event.kind = ValidUtf8(row.Text(2));
  event.detail = ValidUtf8(row.Text(3));
  return event;
}

Result<std::vector<JobEvent>> SqliteJobStore::Events(JobId id) {
  std::lock_guard lock(mutex_);
  Statement rows(*this, kEvents);
  rows.Bind(1, id);
  std::vector<JobEvent> events;
  int rc;
  while ((rc = rows.Step()) == SQLITE_ROW) {
    events.push_back(EventOfRow(rows));
  }
  if (rc != SQLITE_DONE) return ReadError(fmt::format("the events of job {}", id), rc);
  return events;
}

Result<std::vector<JobEvent>> SqliteJobStore::RecentEvents(int limit) {
  std::lock_guard lock(mutex_);
  Statement rows(*this, kRecentEvents);
  rows.Bind(1, int64_t{std::max(limit, 0)});
  std::vector<JobEvent> events;
  int rc;
  while ((rc = rows.Step()) == SQLITE_ROW) {
    events.push_back(EventOfRow(rows));
  }
  if (rc != SQLITE_DONE) return ReadError("the recent events", rc);
  return events;
}

Result<ModelRuns> SqliteJobStore::EarlierRuns(const std::string& signature, int limit) {
  std::lock_guard lock(mutex_);
  ModelRuns runs;
  if (signature.empty() || limit <= 0) return runs;
  const auto wanted = static_cast<size_t>(limit);
  size_t read = 0;
  const auto full = [&] {
    return (runs.peaks.size() >= wanted && runs.solo_smact.size() >= wanted) ||
           read >= kJobsReadPerRun * wanted;
  };
  Statement rows(*this, kPeakJobs);
  rows.Bind(1, std::string_view(signature));
  rows.Bind(2, ToString(JobState::kSucceeded));
  rows.Bind(3, ToString(JobState::kFailed));
  ListCache lists;
  int rc = SQLITE_DONE;
  while (!full() && (rc = rows.Step()) == SQLITE_ROW) {
    Result<Job> job = DecodeRow(rows, lists);
    // The columns repeat the record; the record is what counts.
    if (!job.ok() || SignatureOf(*job) != signature) continue;
    ++read;
    CollectRuns(*job, wanted, runs);
  }
  if (!full() && rc != SQLITE_DONE)
    return ReadError(fmt::format("the runs of '{}'", Printable(signature)), rc);
  return runs;
}

Status SqliteJobStore::LimitPagesForTesting(std::optional<int64_t> max_pages) {
  std::lock_guard lock(mutex_);
  // 4294967294: SQLite's largest page count, the default.
  const std::string sql = fmt::format(
      "PRAGMA max_page_count = {}", std::max(int64_t{1}, max_pages.value_or(int64_t{4294967294})));
  if (int rc = sqlite3_exec(db_, sql.c_str(), nullptr, nullptr, nullptr); rc != SQLITE_OK)
    return WriteError("the page limit", rc);
  return Status::Ok();
}

}  // namespace colo
