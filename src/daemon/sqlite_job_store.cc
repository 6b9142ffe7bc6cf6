// SqliteJobStore: the transactions behind each JobStore call, on the schema sqlite_schema.h
// creates. Everything read from the file is decoded strictly (job_codec.h); nothing in it can end
// colod.
#include "daemon/sqlite_job_store.h"

#include <fmt/format.h>
#include <sqlite3.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cmath>
#include <sstream>

#include "common/strings.h"
#include "common/text.h"
#include "daemon/job_codec.h"
#include "daemon/sqlite_db.h"

namespace colo {
namespace {

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
// Gone once no job names it.
constexpr const char kDropList[] =
    "DELETE FROM lists WHERE id = ?1 AND NOT EXISTS (SELECT 1 FROM jobs WHERE command_list = ?1) "
    "AND NOT EXISTS (SELECT 1 FROM jobs WHERE env_list = ?1)";
constexpr const char kInsertToken[] =
    "INSERT OR REPLACE INTO submit_tokens(uid, token, job, time) VALUES(?1, ?2, ?3, ?4)";
constexpr const char kFindToken[] =
    "SELECT job FROM submit_tokens WHERE uid = ?1 AND token = ?2 AND time >= ?3";
constexpr const char kExpireTokens[] = "DELETE FROM submit_tokens WHERE time < ?1";

}  // namespace

// A statement of the store's cache for one use.
class SqliteJobStore::Statement final : public SqliteStatement {
 public:
  Statement(SqliteJobStore& store, const char* sql) : SqliteStatement(store.statements_.Get(sql)) {}
};

SqliteJobStore::SqliteJobStore(std::string path, sqlite3* db)
    : path_(std::move(path)), db_(db), statements_(db) {}

SqliteJobStore::~SqliteJobStore() {
  statements_.Clear();
  sqlite3_close(db_);
}

Result<std::unique_ptr<SqliteJobStore>> SqliteJobStore::Open(const std::string& path) {
  COLO_RETURN_IF_ERROR(PrepareDatabaseFile(path));
  // mutex_ serializes every use of the connection.
  auto db = OpenDatabase(path, "state database");
  if (!db.ok()) return db.status();
  std::unique_ptr<SqliteJobStore> store(new SqliteJobStore(path, *db));
  COLO_RETURN_IF_ERROR(store->Configure());
  COLO_RETURN_IF_ERROR(PrepareStateSchema(*db, path));
  return store;
}

Status SqliteJobStore::Configure() {
  const auto error = [&](int rc) {
    const int primary = rc & 0xff;
    if (primary == SQLITE_NOTADB) {
      return FailedPrecondition(
          fmt::format("cannot open the state database {}: it is not a colo database ({})", path_,
                      Reason(db_, rc)));
    }
    if (primary == SQLITE_CORRUPT)
      return FailedPrecondition(
          fmt::format("cannot open the state database {}: {}", path_, Reason(db_, rc)));
    return Unavailable(
        fmt::format("cannot open the state database {}: {}", path_, Reason(db_, rc)));
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

Status SqliteJobStore::WriteError(const std::string& what, int rc) const {
  disk_full_ = disk_full_ || (rc & 0xff) == SQLITE_FULL ||
               ((rc & 0xff) == SQLITE_IOERR && sqlite3_system_errno(db_) == ENOSPC);
  return Unavailable(fmt::format("cannot store {} in {}: {}", what, path_, Reason(db_, rc)));
}

Status SqliteJobStore::ReadError(const std::string& what, int rc) const {
  return Unavailable(fmt::format("cannot read {} from {}: {}", what, path_, Reason(db_, rc)));
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

Result<JobRow> SqliteJobStore::RowOf(const Job& job, const std::string& what) {
  JobRow row;
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
  Statement insert(*this, kInsertJobRow);
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
    Statement update(*this, kUpdateJobRow);
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
  SqliteTransaction transaction(db_);
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
  SqliteTransaction transaction(db_);
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
  SqliteTransaction transaction(db_);
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
  SqliteTransaction transaction(db_);
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
  SqliteTransaction transaction(db_);
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
    SqliteTransaction transaction(db_);
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
