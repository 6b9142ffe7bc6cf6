#include "daemon/history_store.h"

#include <fmt/format.h>
#include <sqlite3.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <set>

#include "common/text.h"
#include "daemon/sqlite_db.h"

namespace colo {
namespace {

// Rows one Read may return per table: a reply of a few megabytes at most.
constexpr int kMaxReadRows = 100000;

// Tier 0: samples as taken; 1: one-minute means; 2: ten-minute means. A mean's time is the middle
// of its minute, so a ten-minute bucket groups the minutes it covers.
constexpr const char kCreateSchema[] = R"sql(
  CREATE TABLE meta(key TEXT PRIMARY KEY, value TEXT NOT NULL);
  CREATE TABLE gpu_samples(
    tier INTEGER NOT NULL, time REAL NOT NULL, gpu INTEGER NOT NULL,
    memory_used REAL, smact REAL, smocc REAL, drama REAL, power REAL, energy REAL);
  CREATE INDEX gpu_samples_time ON gpu_samples(time);
  CREATE TABLE job_samples(
    tier INTEGER NOT NULL, time REAL NOT NULL, job INTEGER NOT NULL, gpu INTEGER NOT NULL,
    memory REAL NOT NULL);
  CREATE INDEX job_samples_time ON job_samples(time);
  CREATE TABLE queue_samples(
    tier INTEGER NOT NULL, time REAL NOT NULL, queued REAL NOT NULL, running REAL NOT NULL);
  CREATE INDEX queue_samples_time ON queue_samples(time);
  INSERT INTO meta VALUES ('schema', '1');
)sql";
constexpr const char kCheckColumns[] = R"sql(
  SELECT (SELECT count(*) FROM (SELECT key, value FROM meta LIMIT 0)),
         (SELECT count(*) FROM (SELECT tier, time, gpu, memory_used, smact, smocc, drama, power,
                                       energy FROM gpu_samples LIMIT 0)),
         (SELECT count(*) FROM (SELECT tier, time, job, gpu, memory FROM job_samples LIMIT 0)),
         (SELECT count(*) FROM (SELECT tier, time, queued, running FROM queue_samples LIMIT 0))
)sql";

// Moves the rows of tier ?2 older than ?1 into tier ?2 + 1, as means over buckets of ?3 seconds.
constexpr const char kThinGpus[] = R"sql(
  INSERT INTO gpu_samples
  SELECT ?2 + 1, CAST(time / ?3 AS INTEGER) * ?3 + ?3 / 2.0 AS b, gpu, avg(memory_used),
         avg(smact), avg(smocc), avg(drama), avg(power), max(energy)
  FROM gpu_samples WHERE time < ?1 AND tier = ?2 GROUP BY b, gpu)sql";
constexpr const char kDropGpus[] = "DELETE FROM gpu_samples WHERE time < ?1 AND tier = ?2";
constexpr const char kThinJobs[] = R"sql(
  INSERT INTO job_samples
  SELECT ?2 + 1, CAST(time / ?3 AS INTEGER) * ?3 + ?3 / 2.0 AS b, job, gpu, avg(memory)
  FROM job_samples WHERE time < ?1 AND tier = ?2 GROUP BY b, job, gpu)sql";
constexpr const char kDropJobs[] = "DELETE FROM job_samples WHERE time < ?1 AND tier = ?2";
constexpr const char kThinQueue[] = R"sql(
  INSERT INTO queue_samples
  SELECT ?2 + 1, CAST(time / ?3 AS INTEGER) * ?3 + ?3 / 2.0 AS b, avg(queued), avg(running)
  FROM queue_samples WHERE time < ?1 AND tier = ?2 GROUP BY b)sql";
constexpr const char kDropQueue[] = "DELETE FROM queue_samples WHERE time < ?1 AND tier = ?2";

int Exec(sqlite3* db, const char* sql) {
  return sqlite3_exec(db, sql, nullptr, nullptr, nullptr);
}

// Creates the schema in a new file, or checks that an existing one is this schema.
Status PrepareSchema(sqlite3* db, const std::string& path) {
  const auto error = [&](const std::string& why) {
    return FailedPrecondition(fmt::format("cannot open the history database {}: {}", path, why));
  };
  {
    SqliteStatement wal(db, "PRAGMA journal_mode=WAL");
    if (const int rc = wal.Step(); rc != SQLITE_ROW) return error(Reason(db, rc));
    if (wal.Text(0) != "wal") return error("it cannot use write-ahead logging");
  }
  // NORMAL: a power loss may lose the last flush of samples, never corrupt the file; each flush
  // then costs no fsync.
  if (const int rc = Exec(db, "PRAGMA synchronous=NORMAL"); rc != SQLITE_OK)
    return error(Reason(db, rc));
  SqliteTransaction transaction(db);
  if (const int rc = transaction.Begin(); rc != SQLITE_OK) return error(Reason(db, rc));
  std::set<std::string, std::less<>> tables;
  if (const int rc = ReadUserTables(db, tables); rc != SQLITE_DONE) return error(Reason(db, rc));
  if (tables.empty()) {
    if (const int rc = Exec(db, kCreateSchema); rc != SQLITE_OK) return error(Reason(db, rc));
  } else {
    if (!tables.contains("meta")) return error("it is not colo's history (no meta table)");
    std::string version;
    {
      SqliteStatement schema(db, "SELECT value FROM meta WHERE key = 'schema'");
      if (schema.Step() != SQLITE_ROW) return error("it is not colo's history (no schema version)");
      version = schema.Text(0);
    }
    int number = 0;
    const auto [end, ec] = std::from_chars(version.data(), version.data() + version.size(), number);
    if (ec != std::errc() || end != version.data() + version.size())
      return error(
          fmt::format("schema version '{}' is not colo's", Printable(TruncateUtf8(version, 32))));
    if (number > kHistorySchemaVersion)
      return error(fmt::format("it has schema version {}, newer than this colod reads ({})", number,
                               kHistorySchemaVersion));
    if (number != kHistorySchemaVersion)
      return error(fmt::format("schema version {} is not one colod knows", number));
  }
  {
    SqliteStatement columns(db, kCheckColumns);
    if (const int rc = columns.Step(); rc != SQLITE_ROW)
      return error("its tables are not colo's history: " + Reason(db, rc));
  }
  if (const int rc = transaction.Commit(); rc != SQLITE_OK) return error(Reason(db, rc));
  return Status::Ok();
}

}  // namespace

HistoryStore::HistoryStore(std::string path, HistoryOptions options, sqlite3* writer,
                           sqlite3* reader)
    : path_(std::move(path)), options_(options), writer_(writer), reader_(reader) {}

Result<std::unique_ptr<HistoryStore>> HistoryStore::Open(const std::string& path,
                                                         HistoryOptions options) {
  if (Status s = PrepareDatabaseFile(path); !s.ok())
    return Unavailable(fmt::format("history: {}", s.message()));
  auto writer = OpenDatabase(path, "history database");
  if (!writer.ok()) return writer.status();
  if (Status s = PrepareSchema(*writer, path); !s.ok()) {
    sqlite3_close(*writer);
    return s;
  }
  auto reader = OpenDatabase(path, "history database");
  if (!reader.ok()) {
    sqlite3_close(*writer);
    return reader.status();
  }
  return std::unique_ptr<HistoryStore>(new HistoryStore(path, options, *writer, *reader));
}

HistoryStore::~HistoryStore() {
  if (thread_.joinable()) {
    {
      std::lock_guard lock(pending_mutex_);
      stop_ = true;
    }
    wake_.notify_all();
    thread_.join();
  }
  // The samples of colod's last seconds; should they not be stored, say so where colod's log is.
  if (Status flushed = Flush(); !flushed.ok())
    fmt::print(stderr, "colod: the last GPU samples could not be stored: {}\n", flushed.message());
  sqlite3_close(writer_);
  sqlite3_close(reader_);
}

void HistoryStore::StartWriter() {
  if (!thread_.joinable()) thread_ = std::thread([this] { WriterLoop(); });
}

void HistoryStore::Record(HistoryBatch batch) {
  std::lock_guard lock(pending_mutex_);
  auto append = [](auto& to, auto& from) {
    to.insert(to.end(), std::make_move_iterator(from.begin()), std::make_move_iterator(from.end()));
  };
  append(pending_.gpus, batch.gpus);
  append(pending_.jobs, batch.jobs);
  append(pending_.queue, batch.queue);
  // Bounded while the file cannot be written: the oldest points go first.
  auto trim = [&](auto& points, size_t cap) {
    if (points.size() <= cap) return;
    const size_t drop = points.size() - cap;
    points.erase(points.begin(), points.begin() + static_cast<std::ptrdiff_t>(drop));
    stats_.dropped += static_cast<int64_t>(drop);
  };
  trim(pending_.gpus, options_.max_pending);
  trim(pending_.jobs, options_.max_pending);
  trim(pending_.queue, options_.max_pending / 8 + 1);
}

Status HistoryStore::Flush() {
  std::lock_guard write_lock(write_mutex_);
  HistoryBatch batch;
  {
    std::lock_guard lock(pending_mutex_);
    std::swap(batch, pending_);
  }
  if (batch.size() == 0) return Status::Ok();
  const auto began = std::chrono::steady_clock::now();
  Status status = WriteBatch(batch);
  const double took =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - began).count();
  std::lock_guard lock(pending_mutex_);
  if (status.ok()) {
    stats_.flushes++;
    stats_.points += static_cast<int64_t>(batch.size());
    stats_.write_seconds += took;
    return status;
  }
  stats_.last_error = status.message();
  // Kept for the next flush, before what came since (bounded by Record's trim on the next call).
  auto prepend = [](auto& to, auto& from) {
    from.insert(from.end(), std::make_move_iterator(to.begin()), std::make_move_iterator(to.end()));
    to = std::move(from);
  };
  prepend(pending_.gpus, batch.gpus);
  prepend(pending_.jobs, batch.jobs);
  prepend(pending_.queue, batch.queue);
  return status;
}

Status HistoryStore::WriteBatch(const HistoryBatch& batch) {
  const auto error = [&](int rc) {
    return Unavailable(
        fmt::format("cannot write the history database {}: {}", path_, Reason(writer_, rc)));
  };
  SqliteTransaction transaction(writer_);
  if (const int rc = transaction.Begin(); rc != SQLITE_OK) return error(rc);
  {
    SqliteStatement insert(writer_,
                           "INSERT INTO gpu_samples VALUES(0, ?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)");
    for (const GpuHistoryPoint& p : batch.gpus) {
      insert.Bind(1, p.time);
      insert.Bind(2, int64_t{p.gpu});
      insert.Bind(3, p.memory_used);
      insert.Bind(4, p.smact);
      insert.Bind(5, p.smocc);
      insert.Bind(6, p.drama);
      insert.Bind(7, p.power_watts);
      insert.Bind(8, p.energy_joules);
      if (const int rc = insert.Step(); rc != SQLITE_DONE) return error(rc);
      insert.Reset();
    }
  }
  {
    SqliteStatement insert(writer_, "INSERT INTO job_samples VALUES(0, ?1, ?2, ?3, ?4)");
    for (const JobHistoryPoint& p : batch.jobs) {
      insert.Bind(1, p.time);
      insert.Bind(2, int64_t{p.job});
      insert.Bind(3, int64_t{p.gpu});
      insert.Bind(4, p.memory);
      if (const int rc = insert.Step(); rc != SQLITE_DONE) return error(rc);
      insert.Reset();
    }
  }
  {
    SqliteStatement insert(writer_, "INSERT INTO queue_samples VALUES(0, ?1, ?2, ?3)");
    for (const QueueHistoryPoint& p : batch.queue) {
      insert.Bind(1, p.time);
      insert.Bind(2, p.queued);
      insert.Bind(3, p.running);
      if (const int rc = insert.Step(); rc != SQLITE_DONE) return error(rc);
      insert.Reset();
    }
  }
  if (const int rc = transaction.Commit(); rc != SQLITE_OK) return error(rc);
  return Status::Ok();
}

Status HistoryStore::Compact(double now) {
  std::lock_guard write_lock(write_mutex_);
  const auto began = std::chrono::steady_clock::now();
  const auto error = [&](int rc) {
    return Unavailable(
        fmt::format("cannot thin out the history database {}: {}", path_, Reason(writer_, rc)));
  };
  SqliteTransaction transaction(writer_);
  if (const int rc = transaction.Begin(); rc != SQLITE_OK) return error(rc);
  // Each tier up to a whole bucket, so a bucket is thinned once, with all its samples.
  struct Tier {
    int64_t from;
    double bucket;
    double age;
  };
  for (const Tier& tier : {Tier{0, 60, ToSeconds(options_.full_resolution)},
                           Tier{1, 600, ToSeconds(options_.minute_resolution)}}) {
    const double cut = std::floor((now - tier.age) / tier.bucket) * tier.bucket;
    for (const auto& [thin, drop] :
         {std::pair{kThinGpus, kDropGpus}, std::pair{kThinJobs, kDropJobs},
          std::pair{kThinQueue, kDropQueue}}) {
      SqliteStatement insert(writer_, thin);
      insert.Bind(1, cut);
      insert.Bind(2, tier.from);
      insert.Bind(3, tier.bucket);
      if (const int rc = insert.Step(); rc != SQLITE_DONE) return error(rc);
      SqliteStatement remove(writer_, drop);
      remove.Bind(1, cut);
      remove.Bind(2, tier.from);
      if (const int rc = remove.Step(); rc != SQLITE_DONE) return error(rc);
    }
  }
  const double oldest = now - ToSeconds(options_.retention);
  for (const char* sql :
       {"DELETE FROM gpu_samples WHERE time < ?1", "DELETE FROM job_samples WHERE time < ?1",
        "DELETE FROM queue_samples WHERE time < ?1"}) {
    SqliteStatement remove(writer_, sql);
    remove.Bind(1, oldest);
    if (const int rc = remove.Step(); rc != SQLITE_DONE) return error(rc);
  }
  if (const int rc = transaction.Commit(); rc != SQLITE_OK) return error(rc);
  const double took =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - began).count();
  std::lock_guard lock(pending_mutex_);
  stats_.compact_seconds += took;
  return Status::Ok();
}

void HistoryStore::WriterLoop() {
  auto next_compact = std::chrono::steady_clock::now();
  std::unique_lock lock(pending_mutex_);
  while (!stop_) {
    wake_.wait_for(lock, options_.flush_interval, [&] { return stop_; });
    if (stop_) break;
    lock.unlock();
    Status flushed = Flush();
    if (std::chrono::steady_clock::now() >= next_compact) {
      next_compact = std::chrono::steady_clock::now() + std::chrono::minutes(1);
      const double now = ToEpochSeconds(SystemClock().WallNow());
      if (Status s = Compact(now); !s.ok() && flushed.ok()) flushed = s;
    }
    lock.lock();
    if (!flushed.ok()) stats_.last_error = flushed.message();
  }
}

HistoryWriteStats HistoryStore::stats() const {
  std::lock_guard lock(pending_mutex_);
  return stats_;
}

Result<HistoryStore::Series> HistoryStore::Read(double since, double until, int max_points) {
  std::lock_guard read_lock(read_mutex_);
  const auto error = [&](int rc) {
    return Unavailable(
        fmt::format("cannot read the history database {}: {}", path_, Reason(reader_, rc)));
  };
  Series out;
  if (!(until > since)) return out;
  max_points = std::clamp(max_points, 10, 100000);
  // Bucketed when the range holds more samples per GPU than asked for.
  int64_t rows = 0, gpus = 0;
  {
    SqliteStatement count(
        reader_,
        "SELECT count(*), count(DISTINCT gpu) FROM gpu_samples WHERE time >= ?1 AND "
        "time < ?2");
    count.Bind(1, since);
    count.Bind(2, until);
    if (const int rc = count.Step(); rc != SQLITE_ROW) return error(rc);
    rows = count.Int64(0);
    gpus = std::max<int64_t>(1, count.Int64(1));
  }
  // Outside any transaction, each query is its own snapshot; one read transaction makes the
  // three tables agree.
  if (const int rc = Exec(reader_, "BEGIN"); rc != SQLITE_OK) return error(rc);
  struct EndRead {
    sqlite3* db;
    ~EndRead() { Exec(db, "COMMIT"); }
  } end_read{reader_};
  const double step = rows / gpus > max_points ? (until - since) / max_points : 0;
  out.bucket_seconds = step;
  const std::string bucket =
      step > 0 ? fmt::format("CAST((time - ?1) / {} AS INTEGER)", step) : std::string("time");
  const std::string limit = fmt::format(" LIMIT {}", kMaxReadRows);
  {
    const std::string sql = fmt::format(
        "SELECT {} AS b, gpu, avg(time), avg(memory_used), avg(smact), avg(smocc), avg(drama), "
        "avg(power), max(energy) FROM gpu_samples WHERE time >= ?1 AND time < ?2 "
        "GROUP BY b, gpu ORDER BY b, gpu{}",
        bucket, limit);
    SqliteStatement q(reader_, sql.c_str());
    q.Bind(1, since);
    q.Bind(2, until);
    int rc;
    while ((rc = q.Step()) == SQLITE_ROW) {
      out.gpus.push_back(GpuHistoryPoint{q.Double(2), static_cast<int>(q.Int64(1)), q.Optional(3),
                                         q.Optional(4), q.Optional(5), q.Optional(6), q.Optional(7),
                                         q.Optional(8)});
    }
    if (rc != SQLITE_DONE) return error(rc);
  }
  {
    const std::string sql = fmt::format(
        "SELECT {} AS b, job, gpu, avg(time), avg(memory) FROM job_samples WHERE time >= ?1 AND "
        "time < ?2 GROUP BY b, job, gpu ORDER BY b, job, gpu{}",
        bucket, limit);
    SqliteStatement q(reader_, sql.c_str());
    q.Bind(1, since);
    q.Bind(2, until);
    int rc;
    while ((rc = q.Step()) == SQLITE_ROW)
      out.jobs.push_back(
          JobHistoryPoint{q.Double(3), q.Int64(1), static_cast<int>(q.Int64(2)), q.Double(4)});
    if (rc != SQLITE_DONE) return error(rc);
  }
  {
    const std::string sql = fmt::format(
        "SELECT {} AS b, avg(time), avg(queued), avg(running) FROM queue_samples WHERE time >= "
        "?1 AND time < ?2 GROUP BY b ORDER BY b{}",
        bucket, limit);
    SqliteStatement q(reader_, sql.c_str());
    q.Bind(1, since);
    q.Bind(2, until);
    int rc;
    while ((rc = q.Step()) == SQLITE_ROW)
      out.queue.push_back(QueueHistoryPoint{q.Double(1), q.Double(2), q.Double(3)});
    if (rc != SQLITE_DONE) return error(rc);
  }
  return out;
}

}  // namespace colo
