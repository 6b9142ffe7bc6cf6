// The state database's schema and its migrations. Schema 1's records are rewritten in this
// codec's format, and long lists moved out of every record, inside the transaction that checks
// the version: a migration is whole or not at all.
#include "daemon/sqlite_schema.h"

#include <fmt/format.h>

#include <charconv>
#include <climits>
#include <functional>
#include <set>
#include <unordered_map>
#include <utility>
#include <vector>

#include "common/strings.h"
#include "common/text.h"
#include "daemon/job_codec.h"
#include "daemon/sqlite_db.h"

namespace colo {
namespace {

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

constexpr const char kSchemaVersion[] = "SELECT value FROM meta WHERE key = 'schema'";
constexpr const char kMigrationRows[] =
    "SELECT id, record FROM jobs WHERE id > ?1 ORDER BY id LIMIT ?2";
constexpr const char kMigrationQuarantine[] = "UPDATE jobs SET quarantined = ?2 WHERE id = ?1";
// A schema version that is a number above ours: a newer colod wrote the file.
bool IsNewerVersion(std::string_view version) {
  int number = 0;
  const auto [end, error] =
      std::from_chars(version.data(), version.data() + version.size(), number);
  return error == std::errc() && end == version.data() + version.size() &&
         number > kStateSchemaVersion;
}

// The schema created, or checked and migrated, on one connection, with statements of its own
// (finalized before the store prepares its).
class SchemaPreparer {
 public:
  SchemaPreparer(sqlite3* db, const std::string& path) : path_(path), db_(db), statements_(db) {}
  Status Prepare();

 private:
  Status MigrateToSchema3(bool from_schema1);
  Status RewriteSchema1Records();
  Status MoveLongLists();
  // Calls `visit(id, record)` for every row, a batch of rows read at a time.
  template <typename Error, typename Visit>
  Status ForEachRecord(const Error& error, const Visit& visit);
  // The row of `job` replaced by `row`; SQLITE_DONE or the error.
  int Rewrite(const Job& job, const JobRow& row);

  const std::string& path_;
  sqlite3* db_;
  SqliteStatementCache statements_;
};

Status SchemaPreparer::Prepare() {
  const auto error = [&](int rc) {
    return Unavailable(
        fmt::format("cannot open the state database {}: {}", path_, Reason(db_, rc)));
  };
  const auto not_ours = [&](std::string_view why) {
    return FailedPrecondition(fmt::format(
        "cannot open the state database {}: it is not a colo database ({})", path_, why));
  };
  // Inside one write transaction: two colods opening one new file cannot both create or migrate.
  SqliteTransaction transaction(db_);
  if (int rc = transaction.Begin(); rc != SQLITE_OK) return error(rc);
  std::set<std::string, std::less<>> tables;
  if (int rc = ReadUserTables(db_, tables); rc != SQLITE_DONE) return error(rc);
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
      SqliteStatement schema(statements_.Get(kSchemaVersion));
      const int rc = schema.Step();
      if (rc == SQLITE_DONE) return not_ours("no schema version");
      if (rc != SQLITE_ROW) return not_ours(Reason(db_, rc));
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
    SqliteStatement columns(statements_.Get(kCheckColumns));
    if (int rc = columns.Step(); rc != SQLITE_ROW) return not_ours(Reason(db_, rc));
  }
  if (int rc = transaction.Commit(); rc != SQLITE_OK) return error(rc);
  return Status::Ok();
}

// Schema 3's tables and columns, then (from schema 1) every record rewritten in this codec's
// format, and the long lists moved out of the records, inside the caller's transaction.
Status SchemaPreparer::MigrateToSchema3(bool from_schema1) {
  const auto error = [&](std::string_view what, int rc) {
    return Unavailable(fmt::format("cannot migrate the state database {} to schema 3: {}: {}",
                                   path_, what, Reason(db_, rc)));
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
Status SchemaPreparer::RewriteSchema1Records() {
  const auto error = [&](std::string_view what, int rc) {
    return Unavailable(fmt::format("cannot migrate the state database {} from schema 1: {}: {}",
                                   path_, what, Reason(db_, rc)));
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
      SqliteStatement quarantine(statements_.Get(kMigrationQuarantine));
      quarantine.Bind(1, id);
      quarantine.Bind(2, std::string_view(problem));
      if (int rc = quarantine.Step(); rc != SQLITE_DONE)
        return error(fmt::format("quarantine job {}", id), rc);
      return Status::Ok();
    }
    // Its lists stay in the record; MoveLongLists moves the long ones out.
    JobRow row;
    row.record = EncodeJob(*job);
    if (int rc = Rewrite(*job, row); rc != SQLITE_DONE)
      return error(fmt::format("rewrite job {}", id), rc);
    return Status::Ok();
  });
}

template <typename Error, typename Visit>
Status SchemaPreparer::ForEachRecord(const Error& error, const Visit& visit) {
  JobId after = INT64_MIN;
  while (true) {
    std::vector<std::pair<JobId, std::string>> batch;
    {
      SqliteStatement rows(statements_.Get(kMigrationRows));
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
Status SchemaPreparer::MoveLongLists() {
  const auto error = [&](std::string_view what, int rc) {
    return Unavailable(fmt::format("cannot migrate the state database {} to schema 3: {}: {}",
                                   path_, what, Reason(db_, rc)));
  };
  // Lists already moved, by the hash of their text (the text itself is compared on a match).
  std::unordered_multimap<size_t, int64_t> moved;
  const auto row_of = [&](const std::vector<std::string>& list) -> Result<std::optional<int64_t>> {
    const std::string text = EncodeStrings(list);
    if (text.size() < kListBytes) return std::optional<int64_t>();
    const size_t hash = std::hash<std::string>{}(text);
    for (auto [it, end] = moved.equal_range(hash); it != end; ++it) {
      SqliteStatement known(statements_.Get(kFindList));
      known.Bind(1, it->second);
      if (known.Step() == SQLITE_ROW && known.Text(0) == text)
        return std::optional<int64_t>(it->second);
    }
    SqliteStatement insert(statements_.Get(kInsertList));
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
    JobRow row;
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
    if (int rc = Rewrite(*job, row); rc != SQLITE_DONE)
      return error(fmt::format("rewrite job {}", id), rc);
    return Status::Ok();
  });
}

int SchemaPreparer::Rewrite(const Job& job, const JobRow& row) {
  SqliteStatement update(statements_.Get(kUpdateJobRow));
  BindJobRow(update, job, row);
  return update.Step();
}

}  // namespace

const char kInsertJobRow[] =
    "INSERT INTO jobs(id, uid, state, submitted, finished, record, ended, signature, quarantined, "
    "command_list, env_list) VALUES(?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, NULL, ?9, ?10)";
const char kUpdateJobRow[] =
    "UPDATE jobs SET uid = ?2, state = ?3, submitted = ?4, finished = ?5, record = ?6, ended = ?7, "
    "signature = ?8, command_list = ?9, env_list = ?10 WHERE id = ?1 AND quarantined IS NULL";

const char kInsertList[] = "INSERT INTO lists(data) VALUES(?1)";
const char kFindList[] = "SELECT data FROM lists WHERE id = ?1";

Status PrepareStateSchema(sqlite3* db, const std::string& path) {
  return SchemaPreparer(db, path).Prepare();
}

void BindJobRow(SqliteStatement& statement, const Job& job, const JobRow& row) {
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

std::string_view SignatureOf(const Job& job) {
  return job.estimate ? std::string_view(job.estimate->signature) : std::string_view();
}

}  // namespace colo
