// The SQLite job store beyond the interface: its files and their modes, what it says about a
// place or a file it cannot use, a full disk, damage done to the file by hand, the migration from
// schema 1, and queries over many jobs.
#include "daemon/sqlite_job_store.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <iostream>
#include <map>
#include <random>
#include <set>

#include "daemon/job_codec.h"
#include "daemon/job_store_test_support.h"

namespace colo {
namespace {

using testing::Ended;
using testing::EstimateWithSignature;
using testing::Page;
using testing::QueuedJob;
using testing::RawDb;
using testing::TempDir;

std::unique_ptr<SqliteJobStore> OpenOrDie(const std::string& path) {
  auto store = SqliteJobStore::Open(path);
  EXPECT_TRUE(store.ok()) << store.status().message();
  return store.ok() ? std::move(*store) : nullptr;
}

std::string OpenError(const std::string& path) {
  auto store = SqliteJobStore::Open(path);
  EXPECT_FALSE(store.ok()) << path;
  return store.ok() ? "" : store.status().message();
}

mode_t ModeOf(const std::string& path) {
  struct stat st {};
  EXPECT_EQ(lstat(path.c_str(), &st), 0) << path;
  return st.st_mode & 07777;
}

void WriteFile(const std::string& path, const std::string& text, mode_t mode) {
  const int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, mode);
  ASSERT_GE(fd, 0) << path;
  ASSERT_EQ(write(fd, text.data(), text.size()), static_cast<ssize_t>(text.size()));
  close(fd);
  ASSERT_EQ(chmod(path.c_str(), mode), 0);
}

TEST(SqliteJobStore, JobsAndEventsSurviveReopening) {
  TempDir dir;
  const std::string path = dir.File("colo.db");
  Job job = QueuedJob("train");
  job.estimate = EstimateWithSignature("sig");
  {
    auto store = OpenOrDie(path);
    ASSERT_TRUE(store->Insert(job, {{0, {}, "submitted", "by user1000"}}).ok());
    job.state = JobState::kRunning;
    Attempt& attempt = job.attempts.emplace_back();
    attempt.number = 1;
    attempt.phase = Attempt::Phase::kRunning;
    attempt.pid = 77;
    ASSERT_TRUE(store->Update(job, {{job.id(), {}, "started", "attempt 1"}}).ok());
  }
  auto store = OpenOrDie(path);
  auto found = store->Find(job.id());
  ASSERT_TRUE(found.ok() && found->has_value());
  EXPECT_EQ(EncodeJob(**found), EncodeJob(job));
  EXPECT_EQ(store->Events(job.id())->size(), 2u);
  EXPECT_EQ(store->LoadLive()->jobs.size(), 1u);

  RawDb raw(path);
  EXPECT_EQ(raw.Value("PRAGMA journal_mode"), "wal");
  EXPECT_EQ(raw.Value("SELECT value FROM meta WHERE key = 'schema'"), "3");
  EXPECT_EQ(raw.Value("SELECT signature FROM jobs"), "sig");
  EXPECT_EQ(raw.Value("SELECT ended FROM jobs"), "0");
}

TEST(SqliteJobStore, IdsStayAboveEveryStoredJobWhateverHappensToTheCounter) {
  TempDir dir;
  const std::string path = dir.File("colo.db");
  auto store = OpenOrDie(path);
  for (int i = 0; i < 5; ++i) {
    Job job = QueuedJob("j");
    ASSERT_TRUE(store->Insert(job, {}).ok());
  }
  const auto next_id = [&] {
    Job job = QueuedJob("next");
    EXPECT_TRUE(store->Insert(job, {}).ok());
    return job.id();
  };
  RawDb raw(path);
  raw.Exec("DELETE FROM meta WHERE key = 'next_job_id'");
  EXPECT_EQ(next_id(), 6);
  raw.Exec("UPDATE meta SET value = '1' WHERE key = 'next_job_id'");
  EXPECT_EQ(next_id(), 7);
  raw.Exec("UPDATE meta SET value = 'garbage' WHERE key = 'next_job_id'");
  EXPECT_EQ(next_id(), 8);
  // A counter ahead of the rows (ids handed out whose jobs are gone) is kept.
  raw.Exec("UPDATE meta SET value = '100' WHERE key = 'next_job_id'");
  EXPECT_EQ(next_id(), 100);
  EXPECT_EQ(raw.Value("SELECT value FROM meta WHERE key = 'next_job_id'"), "101");
  EXPECT_EQ(raw.Value("SELECT count(*) FROM jobs"), "9");
  EXPECT_EQ(raw.Value("SELECT json_extract(record, '$.spec.name') FROM jobs WHERE id = 1"), "j");
}

TEST(SqliteJobStore, RowsThatCannotBeReadAreQuarantinedNamedAndTheRestLoads) {
  TempDir dir;
  const std::string path = dir.File("colo.db");
  auto store = OpenOrDie(path);
  for (int i = 0; i < 5; ++i) {
    Job job = QueuedJob("job" + std::to_string(i + 1));
    ASSERT_TRUE(store->Insert(job, {}).ok());
  }
  Job done = Ended(QueuedJob("done"), JobState::kSucceeded, ExitKind::kSuccess);
  ASSERT_TRUE(store->Insert(done, {}).ok());
  {
    RawDb raw(path);
    raw.Exec("UPDATE jobs SET record = 'garbage' WHERE id = 2");
    raw.Exec("UPDATE jobs SET record = json_set(record, '$.spec.gpus', 'two') WHERE id = 3");
    raw.Exec("UPDATE jobs SET id = 40 WHERE id = 4");  // a record of another job
    raw.Exec("UPDATE jobs SET ended = 0 WHERE id = 6");
  }
  const std::string bad_field_record = RawDb(path).Value("SELECT record FROM jobs WHERE id = 3");

  auto live = store->LoadLive();
  ASSERT_TRUE(live.ok()) << live.status().message();
  ASSERT_EQ(live->jobs.size(), 2u);
  EXPECT_EQ(live->jobs[0].spec.name, "job1");
  EXPECT_EQ(live->jobs[1].spec.name, "job5");
  ASSERT_EQ(live->quarantined.size(), 4u);
  EXPECT_EQ(live->quarantined[0].id, 2);
  EXPECT_EQ(live->quarantined[0].reason, "record: not JSON (error at byte 1)");
  EXPECT_EQ(live->quarantined[1].id, 3);
  EXPECT_EQ(live->quarantined[1].reason, "spec.gpus: not an integer");
  EXPECT_EQ(live->quarantined[2].id, 6);
  EXPECT_EQ(live->quarantined[2].reason,
            "state: 'succeeded' in the record of a job stored as live");
  EXPECT_EQ(live->quarantined[3].id, 40);
  EXPECT_EQ(live->quarantined[3].reason, "spec.id: 4 in the record of job 40");

  RawDb raw(path);
  EXPECT_EQ(raw.Value("SELECT quarantined FROM jobs WHERE id = 3"), "spec.gpus: not an integer");
  EXPECT_EQ(raw.Value("SELECT count(*) FROM jobs WHERE quarantined IS NULL"), "2");
  EXPECT_EQ(store->Find(3).status().message(), "job 3 is quarantined: spec.gpus: not an integer");

  // The rows are kept as they were, and named again after a restart.
  Job overwrite = QueuedJob("overwrite");
  overwrite.spec.id = 3;
  EXPECT_EQ(store->Update(overwrite, {}).code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(raw.Value("SELECT record FROM jobs WHERE id = 3"), bad_field_record);
  store.reset();
  store = OpenOrDie(path);
  auto again = store->LoadLive();
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->jobs.size(), 2u);
  ASSERT_EQ(again->quarantined.size(), 4u);
  EXPECT_EQ(again->quarantined[1].reason, "spec.gpus: not an integer");
}

TEST(SqliteJobStore, AnUnreadableRowThatIsNotYetQuarantinedIsAnErrorNamingIt) {
  TempDir dir;
  const std::string path = dir.File("colo.db");
  auto store = OpenOrDie(path);
  Job job = Ended(QueuedJob("x"), JobState::kFailed, ExitKind::kFailure);
  ASSERT_TRUE(store->Insert(job, {}).ok());
  RawDb(path).Exec(
      "UPDATE jobs SET record = json_set(record, '$.attempts[0].exit', 'boom') WHERE id = 1");
  EXPECT_EQ(store->Find(1).status().message(), "job 1: attempts[0].exit: unknown exit kind 'boom'");
  EXPECT_TRUE(store->History({})->jobs.empty());
}

TEST(SqliteJobStore, AFullDiskFailsTheWriteNamesItAndLeavesTheStoreUsable) {
  TempDir dir;
  const std::string path = dir.File("colo.db");
  auto store = OpenOrDie(path);
  Job first = QueuedJob("first");
  ASSERT_TRUE(store->Insert(first, {}).ok());

  ASSERT_TRUE(store->LimitPagesForTesting(1).ok());
  Job large = QueuedJob("large");
  large.env = {"BIG=" + std::string(256 << 10, 'x')};
  const Status insert = store->Insert(large, {{0, {}, "submitted", ""}});
  EXPECT_EQ(insert.code(), StatusCode::kUnavailable);
  EXPECT_EQ(insert.message(), "cannot store the new job in " + path + ": disk full");
  EXPECT_EQ(large.id(), 0);
  Job grown = first;
  grown.env = large.env;
  EXPECT_EQ(store->Update(grown, {}).message(), "cannot store job 1 in " + path + ": disk full");
  {
    RawDb raw(path);
    EXPECT_EQ(raw.Value("SELECT count(*) FROM jobs"), "1");
    EXPECT_EQ(raw.Value("SELECT count(*) FROM events"), "0");
    EXPECT_EQ(raw.Value("SELECT value FROM meta WHERE key = 'next_job_id'"), "2");
  }
  EXPECT_EQ(EncodeJob(**store->Find(1)), EncodeJob(first));

  // Room again: the same writes work, with the id the failed insert did not take.
  ASSERT_TRUE(store->LimitPagesForTesting(std::nullopt).ok());
  ASSERT_TRUE(store->Insert(large, {{0, {}, "submitted", ""}}).ok());
  EXPECT_EQ(large.id(), 2);
  ASSERT_TRUE(store->Update(grown, {}).ok());
  store.reset();
  store = OpenOrDie(path);
  EXPECT_EQ(store->LoadLive()->jobs.size(), 2u);
  EXPECT_EQ(EncodeJob(**store->Find(1)), EncodeJob(grown));
}

TEST(SqliteJobStore, ItsFilesAreOwnerOnlyWhateverTheUmask) {
  TempDir dir;
  const std::string path = dir.File("colo.db");
  const mode_t old_umask = umask(0);
  auto store = SqliteJobStore::Open(path);
  umask(old_umask);
  ASSERT_TRUE(store.ok()) << store.status().message();
  Job job = QueuedJob("secret environment");
  ASSERT_TRUE((*store)->Insert(job, {}).ok());
  EXPECT_EQ(ModeOf(path), 0600u);
  EXPECT_EQ(ModeOf(path + "-wal"), 0600u);
  EXPECT_EQ(ModeOf(path + "-shm"), 0600u);
}

TEST(SqliteJobStore, AnExistingDatabaseAndItsWalAreMadeOwnerOnly) {
  TempDir dir;
  const std::string path = dir.File("colo.db");
  {
    auto store = OpenOrDie(path);
    Job job = QueuedJob("a");
    ASSERT_TRUE(store->Insert(job, {}).ok());
  }
  // As the daemon before the job store left them: readable by everyone.
  ASSERT_EQ(chmod(path.c_str(), 0644), 0);
  WriteFile(path + "-wal", "", 0644);
  WriteFile(path + "-shm", "", 0666);
  auto store = OpenOrDie(path);
  ASSERT_NE(store, nullptr);
  EXPECT_EQ(store->LoadLive()->jobs.size(), 1u);
  EXPECT_EQ(ModeOf(path), 0600u);
  EXPECT_EQ(ModeOf(path + "-wal"), 0600u);
  EXPECT_EQ(ModeOf(path + "-shm"), 0600u);
}

TEST(SqliteJobStore, ALinkADirectoryOrAFifoIsRefused) {
  TempDir dir;
  const std::string path = dir.File("colo.db");
  OpenOrDie(dir.File("real.db"));
  ASSERT_EQ(symlink(dir.File("real.db").c_str(), path.c_str()), 0);
  EXPECT_EQ(OpenError(path),
            "cannot open the state database " + path + ": " + path + " is a symbolic link");
  ASSERT_EQ(unlink(path.c_str()), 0);

  ASSERT_EQ(mkdir(path.c_str(), 0700), 0);
  EXPECT_EQ(OpenError(path),
            "cannot open the state database " + path + ": " + path + " is not a regular file");
  ASSERT_EQ(rmdir(path.c_str()), 0);

  ASSERT_EQ(mkfifo(path.c_str(), 0600), 0);
  EXPECT_EQ(OpenError(path),
            "cannot open the state database " + path + ": " + path + " is not a regular file");
  ASSERT_EQ(unlink(path.c_str()), 0);

  // Its -wal file too: SQLite would write the jobs wherever the link points.
  ASSERT_EQ(symlink(dir.File("elsewhere").c_str(), (path + "-wal").c_str()), 0);
  EXPECT_EQ(OpenError(path),
            "cannot open the state database " + path + ": " + path + "-wal is a symbolic link");
  EXPECT_FALSE(std::filesystem::exists(dir.File("elsewhere")));
}

// Open's error for `path`, run as an unprivileged user when the test runs as root (root may write
// any directory).
std::string OpenErrorAsUnprivileged(const std::string& path) {
  if (geteuid() != 0) return OpenError(path);
  int pipe_fds[2];
  EXPECT_EQ(pipe(pipe_fds), 0);
  const pid_t child = fork();
  if (child == 0) {
    close(pipe_fds[0]);
    std::string message = "could not drop privileges";
    if (setgid(65534) == 0 && setuid(65534) == 0) {
      auto store = SqliteJobStore::Open(path);
      message = store.ok() ? "opened" : store.status().message();
    }
    (void)!write(pipe_fds[1], message.data(), message.size());
    _exit(0);
  }
  close(pipe_fds[1]);
  std::string message;
  char buffer[512];
  ssize_t n;
  while ((n = read(pipe_fds[0], buffer, sizeof buffer)) > 0) message.append(buffer, n);
  close(pipe_fds[0]);
  int status = 0;
  waitpid(child, &status, 0);
  return message;
}

TEST(SqliteJobStore, AnUnwritablePlaceIsNamedWithThePath) {
  TempDir dir;
  ASSERT_EQ(chmod(dir.path().c_str(), 0755), 0);  // so that another user may look inside
  const std::string readonly = dir.File("readonly");
  ASSERT_EQ(mkdir(readonly.c_str(), 0555), 0);
  const std::string path = readonly + "/colo.db";
  EXPECT_EQ(OpenErrorAsUnprivileged(path),
            "cannot open the state database " + path + ": read-only directory (Permission denied)");

  const std::string missing = dir.File("missing/colo.db");
  EXPECT_EQ(OpenError(missing), "cannot open the state database " + missing + ": directory " +
                                    dir.File("missing") + " does not exist");
}

TEST(SqliteJobStore, AFileThatIsNotAColoDatabaseIsNamed) {
  TempDir dir;
  const std::string garbage = dir.File("garbage.db");
  std::string text;
  for (int i = 0; i < 200; ++i) text += "this is not a database. ";
  WriteFile(garbage, text, 0600);
  EXPECT_EQ(OpenError(garbage), "cannot open the state database " + garbage +
                                    ": it is not a colo database (file is not a database)");

  const std::string other = dir.File("other.db");
  RawDb(other).Exec("CREATE TABLE accounts(name TEXT)");
  EXPECT_EQ(OpenError(other), "cannot open the state database " + other +
                                  ": it is not a colo database (it has no colo tables)");

  const std::string newer = dir.File("newer.db");
  OpenOrDie(newer);
  RawDb(newer).Exec("UPDATE meta SET value = '4' WHERE key = 'schema'");
  EXPECT_EQ(OpenError(newer), "cannot open the state database " + newer +
                                  ": it has schema version 4, newer than this colod reads (3)");

  const std::string broken = dir.File("broken.db");
  OpenOrDie(broken);
  RawDb(broken).Exec("ALTER TABLE jobs DROP COLUMN quarantined");
  EXPECT_EQ(OpenError(broken), "cannot open the state database " + broken +
                                   ": it is not a colo database (no such column: quarantined)");
}

TEST(SqliteJobStore, ADirectoryEveryoneMayWriteIsRefused) {
  TempDir dir;
  ASSERT_EQ(chmod(dir.path().c_str(), 01777), 0);
  const std::string path = dir.File("colo.db");
  EXPECT_EQ(OpenError(path), "cannot open the state database " + path + ": directory " +
                                 dir.path() + " is writable by every user");
  EXPECT_FALSE(std::filesystem::exists(path));
}

// Damage inside the file: an error naming it, never a crash.
TEST(SqliteJobStore, ADamagedFileIsAnErrorNotACrash) {
  TempDir dir;
  const std::string good = dir.File("good.db");
  {
    auto store = OpenOrDie(good);
    for (int i = 0; i < 200; ++i) {
      Job job = QueuedJob("job" + std::to_string(i));
      job.estimate = EstimateWithSignature("A");
      if (i % 2) job = Ended(job, JobState::kSucceeded, ExitKind::kSuccess);
      ASSERT_TRUE(store->Insert(job, {{0, {}, "submitted", std::string(300, 'e')}}).ok());
    }
  }  // closed: everything is in the database file, none in a -wal
  const auto size = std::filesystem::file_size(good);
  ASSERT_GT(size, 40u * 4096);
  const std::string garbage(4096 - 100, '\xA5');
  const auto damage = [&](const std::string& path, uint64_t offset) {
    const int fd = open(path.c_str(), O_WRONLY);
    ASSERT_GE(fd, 0);
    ASSERT_EQ(pwrite(fd, garbage.data(), garbage.size(), static_cast<off_t>(offset)),
              static_cast<ssize_t>(garbage.size()));
    close(fd);
  };

  // The schema (on the first page, after the file header).
  const std::string schema_damaged = dir.File("schema.db");
  std::filesystem::copy_file(good, schema_damaged);
  damage(schema_damaged, 100);
  EXPECT_EQ(OpenError(schema_damaged), "cannot open the state database " + schema_damaged +
                                           ": the database file is corrupted");

  // Pages of the tables and indexes.
  const std::string pages_damaged = dir.File("pages.db");
  std::filesystem::copy_file(good, pages_damaged);
  for (uint64_t page = 4; (page + 1) * 4096 <= size; page += 8) damage(pages_damaged, page * 4096);
  auto store = OpenOrDie(pages_damaged);
  ASSERT_NE(store, nullptr);
  int corrupted = 0;
  const auto note = [&](const Status& status) {
    if (status.ok()) return;
    EXPECT_NE(status.message().find("corrupted"), std::string::npos) << status.message();
    EXPECT_NE(status.message().find(pages_damaged), std::string::npos) << status.message();
    ++corrupted;
  };
  note(store->LoadLive().status());
  note(store->History(Page(500)).status());
  note(store->EarlierRuns("A", 100).status());
  for (JobId id = 1; id <= 200; ++id) {
    note(store->Events(id).status());
    // A record whose bytes were damaged may be unreadable: that names the job, not the file.
    auto found = store->Find(id);
    if (!found.ok() && found.status().message().find("job " + std::to_string(id)) == 0) continue;
    note(found.status());
  }
  Job job = QueuedJob("after the damage");
  note(store->Insert(job, {}));
  EXPECT_GT(corrupted, 0);
}

// The schema and the records of the daemon before the job store, as it wrote them.
constexpr const char kSchema1[] = R"sql(
  CREATE TABLE meta(key TEXT PRIMARY KEY, value TEXT NOT NULL);
  INSERT INTO meta VALUES ('schema', '1');
  INSERT INTO meta VALUES ('next_job_id', '12');
  CREATE TABLE jobs(
    id INTEGER PRIMARY KEY,
    uid INTEGER NOT NULL,
    state TEXT NOT NULL,
    submitted REAL NOT NULL,
    finished REAL NOT NULL,
    record TEXT NOT NULL);
  CREATE INDEX jobs_state ON jobs(state);
  CREATE TABLE events(
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    time REAL NOT NULL,
    job INTEGER NOT NULL,
    kind TEXT NOT NULL,
    detail TEXT NOT NULL);
  CREATE INDEX events_job ON events(job);
)sql";

std::string Schema1Record(JobId id, const std::string& state, const std::string& attempts,
                          const std::string& estimate) {
  return fmt::format(
      R"({{"spec":{{"id":{},"name":"job{}","owner":"alice","command":["python","t.py"],"gpus":1,)"
      R"("memory":8589934592,"memory_source":"declared","memory_uncertainty":0.0,)"
      R"("sharing":"any","priority":0,"expected_smact":-1.0}},"uid":1000,"gid":1000,)"
      R"("workdir":"/home/alice","env":["HOME=/home/alice"],"state":"{}","reason":"",)"
      R"("submitted":1700000000.5,"finished":0.0,"cancel_requested":false,"attempts":[{}],)"
      R"("source":"cli","threads":0,"estimate":{}}})",
      id, id, state, attempts, estimate);
}

std::string Schema1Attempt(const std::string& exit_kind, int64_t peak) {
  return fmt::format(
      R"({{"number":1,"pid":4242,"pid_start":99,"gpus":[0],"gpu_uuids":["GPU-0"],"mode":"mps",)"
      R"("thread_percent":50,"memory_limit":0,"started":1700000001.0,"ended":1700000100.0,)"
      R"("exit_kind":"{}","detail":"","peak":{},"stdout":"/s/a.out","stderr":"/s/a.err",)"
      R"("exit_file":"/s/a.exit"}})",
      exit_kind, peak);
}

TEST(SqliteJobStore, MigratesASchema1Database) {
  TempDir dir;
  const std::string path = dir.File("colo.db");
  {
    RawDb raw(path);
    raw.Exec("PRAGMA journal_mode=WAL");
    raw.Exec(kSchema1);
    const auto add = [&](JobId id, const std::string& state, const std::string& record) {
      sqlite3_stmt* stmt = nullptr;
      sqlite3_prepare_v2(raw.get(), "INSERT INTO jobs VALUES(?, 1000, ?, 1700000000.5, 0, ?)", -1,
                         &stmt, nullptr);
      sqlite3_bind_int64(stmt, 1, id);
      sqlite3_bind_text(stmt, 2, state.c_str(), -1, SQLITE_TRANSIENT);
      sqlite3_bind_text(stmt, 3, record.c_str(), -1, SQLITE_TRANSIENT);
      EXPECT_EQ(sqlite3_step(stmt), SQLITE_DONE);
      sqlite3_finalize(stmt);
    };
    const std::string signature =
        R"({"estimator":"trace","peak":100,"lower":90,"upper":120,"detail":"","signature":"A",)"
        R"("history":{"runs":1,"peak":110,"upper":115}})";
    add(3, "succeeded",
        Schema1Record(3, "succeeded", Schema1Attempt("success", 7000000000), signature));
    add(5, "running", Schema1Record(5, "running", Schema1Attempt("", 0), "null"));
    add(7, "queued", Schema1Record(7, "queued", "", signature));
    add(9, "queued", "{not json");
    add(10, "cancelled", Schema1Record(10, "cancelled", Schema1Attempt("cancelled", 1000), "null"));
    raw.Exec(
        "INSERT INTO events(time, job, kind, detail) VALUES (1700000000.5, 5, 'submitted', "
        "'by alice'), (1700000001.0, 5, 'started', 'attempt 1')");
  }
  ASSERT_EQ(chmod(path.c_str(), 0644), 0);  // how the daemon before the job store left it

  auto store = OpenOrDie(path);
  ASSERT_NE(store, nullptr);
  EXPECT_EQ(ModeOf(path), 0600u);
  auto live = store->LoadLive();
  ASSERT_TRUE(live.ok()) << live.status().message();
  ASSERT_EQ(live->jobs.size(), 2u);
  EXPECT_EQ(live->jobs[0].id(), 5);
  EXPECT_EQ(live->jobs[0].state, JobState::kRunning);
  ASSERT_EQ(live->jobs[0].attempts.size(), 1u);
  EXPECT_EQ(live->jobs[0].attempts[0].phase, Attempt::Phase::kRunning);
  EXPECT_EQ(live->jobs[0].attempts[0].pid, 4242);
  EXPECT_EQ(live->jobs[0].attempts[0].mode, SharingMode::kMps);
  EXPECT_EQ(live->jobs[1].id(), 7);
  ASSERT_TRUE(live->jobs[1].estimate.has_value());
  EXPECT_EQ(live->jobs[1].estimate->learned->upper, Bytes(115));
  ASSERT_EQ(live->quarantined.size(), 1u);
  EXPECT_EQ(live->quarantined[0].id, 9);
  EXPECT_EQ(live->quarantined[0].reason, "record: not JSON (error at byte 3)");

  auto history = store->History({});
  ASSERT_TRUE(history.ok());
  ASSERT_EQ(history->jobs.size(), 2u);
  EXPECT_EQ(history->jobs[0].id(), 10);
  EXPECT_EQ(history->jobs[1].id(), 3);
  EXPECT_EQ(history->jobs[1].owner.user, "alice");
  EXPECT_EQ(history->jobs[1].attempts[0].exit, ExitKind::kSuccess);
  EXPECT_EQ(store->EarlierRuns("A", 5)->peaks, (std::vector<Bytes>{Bytes(7'000'000'000)}));
  EXPECT_EQ(store->Events(5)->size(), 2u);
  Job next = QueuedJob("after the migration");
  ASSERT_TRUE(store->Insert(next, {}).ok());
  EXPECT_EQ(next.id(), 12);  // schema 1's counter is kept

  RawDb raw(path);
  EXPECT_EQ(raw.Value("SELECT value FROM meta WHERE key = 'schema'"), "3");
  EXPECT_EQ(raw.Value("SELECT json_extract(record, '$.format') FROM jobs WHERE id = 3"), "2");
  EXPECT_EQ(raw.Value("SELECT ended FROM jobs WHERE id = 10"), "1");
  // Migrated once: opening again reads schema 3 as it is.
  store.reset();
  store = OpenOrDie(path);
  EXPECT_EQ(store->LoadLive()->jobs.size(), 3u);
}

// Inserts through the store, one transaction and one sync each, as colod does.
TEST(SqliteJobStore, HistoryPagesOverTwoThousandJobs) {
  TempDir dir;
  auto store = OpenOrDie(dir.File("colo.db"));
  std::map<unsigned, std::vector<JobId>> ended_by_user;
  std::vector<JobId> ended;
  for (int i = 0; i < 2000; ++i) {
    const unsigned uid = 1000 + i % 3;
    Job job = QueuedJob("j", uid);
    if (i % 50 != 7) job = Ended(job, JobState::kSucceeded, ExitKind::kSuccess);
    ASSERT_TRUE(store->Insert(job, {}).ok());
    if (!job.live()) {
      ended.insert(ended.begin(), job.id());
      ended_by_user[uid].insert(ended_by_user[uid].begin(), job.id());
    }
  }
  const auto all_pages = [&](HistoryQuery query, size_t page_size) {
    std::vector<JobId> seen;
    std::set<JobId> distinct;
    while (true) {
      auto page = store->History(query);
      EXPECT_TRUE(page.ok()) << page.status().message();
      if (!page.ok()) break;
      EXPECT_LE(page->jobs.size(), page_size);
      for (const Job& job : page->jobs) {
        seen.push_back(job.id());
        EXPECT_TRUE(distinct.insert(job.id()).second) << "job " << job.id() << " twice";
        EXPECT_FALSE(job.live());
        EXPECT_EQ(job.owner.uid, query.uid.value_or(job.owner.uid));
      }
      if (!page->next) break;
      query.before = page->next;
    }
    return seen;
  };
  EXPECT_EQ(all_pages(Page(api::kMaxHistoryPage), api::kMaxHistoryPage), ended);
  EXPECT_EQ(all_pages(Page(100000), api::kMaxHistoryPage), ended);
  EXPECT_EQ(all_pages(Page(64), 64), ended);
  for (const auto& [uid, ids] : ended_by_user) {
    EXPECT_EQ(all_pages(Page(100, std::nullopt, uid), 100), ids) << uid;
  }
}

// Not a check of speed (timings depend on the machine): prints what the queries colod makes on
// a busy server take, so a slow plan shows up.
TEST(SqliteJobStore, QueriesOverAHundredThousandEndedJobs) {
  TempDir dir;
  const std::string path = dir.File("colo.db");
  OpenOrDie(path);
  constexpr int kEnded = 100'000, kLive = 100;
  {
    // Written directly in one transaction: through Insert, each job would wait for its own sync.
    RawDb raw(path);
    raw.Exec("BEGIN");
    sqlite3_stmt* stmt = nullptr;
    ASSERT_EQ(sqlite3_prepare_v2(raw.get(),
                                 "INSERT INTO jobs(id, uid, state, submitted, finished, record, "
                                 "ended, signature) VALUES(?, ?, ?, ?, ?, ?, ?, ?)",
                                 -1, &stmt, nullptr),
              SQLITE_OK);
    for (int i = 1; i <= kEnded + kLive; ++i) {
      Job job = QueuedJob("job" + std::to_string(i), 1000 + i % 20);
      job.spec.id = i;
      job.estimate = EstimateWithSignature("model" + std::to_string(i % 50));
      // The live jobs are the newest, as on a server.
      if (i <= kEnded) job = Ended(job, JobState::kSucceeded, ExitKind::kSuccess, MiB(i % 4096));
      const std::string record = EncodeJob(job);
      sqlite3_bind_int64(stmt, 1, i);
      sqlite3_bind_int64(stmt, 2, job.owner.uid);
      sqlite3_bind_text(stmt, 3, ToString(job.state).data(), -1, SQLITE_TRANSIENT);
      sqlite3_bind_double(stmt, 4, ToEpochSeconds(job.submitted));
      sqlite3_bind_double(stmt, 5, ToEpochSeconds(job.finished));
      sqlite3_bind_text(stmt, 6, record.c_str(), -1, SQLITE_TRANSIENT);
      sqlite3_bind_int(stmt, 7, job.live() ? 0 : 1);
      sqlite3_bind_text(stmt, 8, job.estimate->signature.c_str(), -1, SQLITE_TRANSIENT);
      ASSERT_EQ(sqlite3_step(stmt), SQLITE_DONE);
      sqlite3_reset(stmt);
    }
    sqlite3_finalize(stmt);
    raw.Exec("COMMIT");
  }
  using Clock = std::chrono::steady_clock;
  const auto micros_since = [](Clock::time_point start) {
    return std::chrono::duration<double, std::micro>(Clock::now() - start).count();
  };

  auto start = Clock::now();
  auto store = OpenOrDie(path);
  const double open_us = micros_since(start);

  start = Clock::now();
  auto live = store->LoadLive();
  const double live_us = micros_since(start);
  ASSERT_TRUE(live.ok());
  EXPECT_EQ(live->jobs.size(), static_cast<size_t>(kLive));

  std::mt19937 rng(1);
  constexpr int kFinds = 2000;
  start = Clock::now();
  for (int i = 0; i < kFinds; ++i) {
    auto found = store->Find(1 + static_cast<JobId>(rng() % kEnded));
    ASSERT_TRUE(found.ok() && found->has_value());
  }
  const double find_us = micros_since(start) / kFinds;

  start = Clock::now();
  auto first_page = store->History(Page(500));
  const double first_page_us = micros_since(start);
  ASSERT_TRUE(first_page.ok());
  EXPECT_EQ(first_page->jobs.size(), static_cast<size_t>(api::kMaxHistoryPage));
  EXPECT_EQ(first_page->jobs.front().id(), kEnded);

  start = Clock::now();
  auto deep_page = store->History(Page(500, kEnded / 2));
  const double deep_page_us = micros_since(start);
  ASSERT_TRUE(deep_page.ok());
  EXPECT_EQ(deep_page->jobs.front().id(), kEnded / 2 - 1);

  start = Clock::now();
  auto user_page = store->History(Page(500, kEnded / 2, 1007u));
  const double user_page_us = micros_since(start);
  ASSERT_TRUE(user_page.ok());
  EXPECT_EQ(user_page->jobs.size(), static_cast<size_t>(api::kMaxHistoryPage));

  start = Clock::now();
  auto peaks = store->EarlierRuns("model7", 20);
  const double peaks_us = micros_since(start);
  ASSERT_TRUE(peaks.ok());
  EXPECT_EQ(peaks->peaks.size(), 20u);

  std::cout << fmt::format(
      "{} ended + {} live jobs: open {:.0f} us, LoadLive {:.0f} us, Find {:.1f} us (mean of {}), "
      "History page of {}: newest {:.0f} us, from the middle {:.0f} us, one user's {:.0f} us; "
      "EarlierRuns(20) {:.0f} us\n",
      kEnded, kLive, open_us, live_us, find_us, kFinds, api::kMaxHistoryPage, first_page_us,
      deep_page_us, user_page_us, peaks_us);
}

// The tasks of an array, each holding the array's command and environment (one copy, shared).
std::vector<Job> ArrayOf(int tasks, JobId first, const SharedStrings& command,
                         const SharedStrings& env) {
  std::vector<Job> jobs;
  for (int t = 0; t < tasks; ++t) {
    Job& job = jobs.emplace_back(QueuedJob(fmt::format("task{}", t)));
    job.spec.id = first + t;
    job.spec.command = command;
    job.env = env;
  }
  return jobs;
}

TEST(SqliteJobStore, AnArraysCommandAndEnvironmentAreStoredOnceAndGoWhenNoJobHoldsThem) {
  TempDir dir;
  const std::string path = dir.File("colo.db");
  auto store = OpenOrDie(path);
  const SharedStrings command({"train", std::string(32 << 10, 'c')});
  const SharedStrings env({"PATH=/bin", "BIG=" + std::string(250 << 10, 'e')});
  auto first = store->ReserveIds(1000);
  ASSERT_TRUE(first.ok());
  std::vector<Job> tasks = ArrayOf(1000, *first, command, env);
  ASSERT_TRUE(store->InsertReserved(tasks, {}, "token-1").ok());
  RawDb raw(path);
  EXPECT_EQ(raw.Value("SELECT count(*) FROM lists"), "2");
  EXPECT_EQ(raw.Value("SELECT count(DISTINCT env_list) FROM jobs"), "1");
  // Each record is small: the lists are named, not held.
  EXPECT_LT(std::stoll(raw.Value("SELECT max(length(record)) FROM jobs")), 2048);
  EXPECT_LT(std::stoll(raw.Value("SELECT sum(length(data)) FROM lists")), 300 << 10);

  // Read back, the tasks share one copy again, and writing them again adds no list.
  auto live = store->LoadLive();
  ASSERT_TRUE(live.ok());
  ASSERT_EQ(live->jobs.size(), 1000u);
  EXPECT_EQ(live->jobs[0].env, env);
  EXPECT_EQ(live->jobs[0].spec.command, command);
  EXPECT_EQ(live->jobs[0].env.shared(), live->jobs[999].env.shared());
  Job running = live->jobs[0];
  running.state = JobState::kRunning;
  ASSERT_TRUE(store->Update(running, {}).ok());
  EXPECT_EQ(raw.Value("SELECT count(*) FROM lists"), "2");

  // Ended (cancelled), a job's environment is dropped; once no job holds it, so is its row.
  std::vector<JobChange> changes;
  std::vector<Job> ended = live->jobs;
  for (Job& job : ended) {
    job.state = JobState::kCancelled;
    job.env.clear();
    changes.push_back({&job, {}});
  }
  changes.pop_back();
  ASSERT_TRUE(store->UpdateMany(changes).ok());
  EXPECT_EQ(raw.Value("SELECT count(*) FROM lists"), "2") << "a task still holds it";
  ASSERT_TRUE(store->Update(ended.back(), {}).ok());
  EXPECT_EQ(raw.Value("SELECT count(*) FROM lists"), "1");
  EXPECT_EQ(raw.Value("SELECT count(*) FROM jobs WHERE env_list IS NOT NULL"), "0");
  // The command stays, for `colo show`.
  auto shown = store->Find(*first + 5);
  ASSERT_TRUE(shown.ok() && shown->has_value());
  EXPECT_EQ((*shown)->spec.command, command);
  EXPECT_TRUE((*shown)->env.empty());
}

TEST(SqliteJobStore, AJobNamingAListThatIsGoneIsQuarantined) {
  TempDir dir;
  const std::string path = dir.File("colo.db");
  JobId id = 0;
  {
    auto store = OpenOrDie(path);
    Job job = QueuedJob("big");
    job.env = {"BIG=" + std::string(4096, 'x')};
    ASSERT_TRUE(store->Insert(job, {}).ok());
    id = job.id();
  }
  RawDb(path).Exec("DELETE FROM lists");
  auto store = OpenOrDie(path);
  auto live = store->LoadLive();
  ASSERT_TRUE(live.ok());
  EXPECT_TRUE(live->jobs.empty());
  ASSERT_EQ(live->quarantined.size(), 1u);
  EXPECT_EQ(live->quarantined[0].id, id);
  EXPECT_NE(live->quarantined[0].reason.find("env_list: no list"), std::string::npos)
      << live->quarantined[0].reason;
}

// Schema 2's tables, as colod before shared lists and submit tokens made them.
constexpr const char kSchema2[] = R"sql(
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
    quarantined TEXT);
  CREATE TABLE events(
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    time REAL NOT NULL,
    job INTEGER NOT NULL,
    kind TEXT NOT NULL,
    detail TEXT NOT NULL);
  CREATE INDEX events_job ON events(job);
  CREATE INDEX jobs_ended ON jobs(ended, id);
  CREATE INDEX jobs_uid ON jobs(uid, ended, id);
  INSERT INTO meta VALUES ('schema', '2'), ('next_job_id', '102');
)sql";

TEST(SqliteJobStore, MigratesASchema2DatabaseIntoSharedLists) {
  TempDir dir;
  const std::string path = dir.File("colo.db");
  const SharedStrings command({"train", std::string(8 << 10, 'c')});
  const SharedStrings env({"BIG=" + std::string(64 << 10, 'e')});
  {
    // As schema 2 kept an array: every record with its own copy of both lists.
    RawDb raw(path);
    raw.Exec("PRAGMA journal_mode=WAL");
    raw.Exec(kSchema2);
    std::vector<Job> jobs = ArrayOf(100, 1, command, env);
    jobs.push_back(QueuedJob("small"));
    jobs.back().spec.id = 101;
    for (const Job& job : jobs) {
      sqlite3_stmt* stmt = nullptr;
      sqlite3_prepare_v2(raw.get(),
                         "INSERT INTO jobs(id, uid, state, submitted, finished, record) "
                         "VALUES(?, 1000, 'queued', 0, 0, ?)",
                         -1, &stmt, nullptr);
      sqlite3_bind_int64(stmt, 1, job.id());
      const std::string record = EncodeJob(job);
      sqlite3_bind_text(stmt, 2, record.c_str(), -1, SQLITE_TRANSIENT);
      EXPECT_EQ(sqlite3_step(stmt), SQLITE_DONE);
      sqlite3_finalize(stmt);
    }
  }
  auto store = OpenOrDie(path);
  RawDb raw(path);
  EXPECT_EQ(raw.Value("SELECT value FROM meta WHERE key = 'schema'"), "3");
  EXPECT_EQ(raw.Value("SELECT count(*) FROM lists"), "2");
  EXPECT_EQ(raw.Value("SELECT count(*) FROM jobs WHERE env_list IS NOT NULL"), "100");
  EXPECT_LT(std::stoll(raw.Value("SELECT max(length(record)) FROM jobs")), 2048);
  auto live = store->LoadLive();
  ASSERT_TRUE(live.ok());
  ASSERT_EQ(live->jobs.size(), 101u);
  EXPECT_EQ(live->jobs[0].env, env);
  EXPECT_EQ(live->jobs[0].spec.command, command);
  EXPECT_EQ(live->jobs[0].env.shared(), live->jobs[99].env.shared());
  EXPECT_EQ(live->jobs[100].spec.name, "small");
  Job next = QueuedJob("after");
  ASSERT_TRUE(store->Insert(next, {}, "t").ok());
  EXPECT_EQ(next.id(), 102);
}

TEST(SqliteJobStore, SubmitTokensAreKeptForTheirUserAndTheirLifetime) {
  TempDir dir;
  const std::string path = dir.File("colo.db");
  auto store = OpenOrDie(path);
  Job job = QueuedJob("a", 1000);
  job.submitted = WallTime(std::chrono::seconds(1'700'000'000));
  ASSERT_TRUE(store->Insert(job, {}, "retry-me").ok());
  const WallTime long_ago = job.submitted - std::chrono::hours(1);
  EXPECT_EQ(*store->SubmittedWith(1000, "retry-me", long_ago), job.id());
  EXPECT_EQ(*store->SubmittedWith(1001, "retry-me", long_ago), std::nullopt);
  EXPECT_EQ(*store->SubmittedWith(1000, "other", long_ago), std::nullopt);
  EXPECT_EQ(*store->SubmittedWith(1000, "retry-me", job.submitted + std::chrono::seconds(1)),
            std::nullopt);
  // A day later the next submit with a token drops the old ones.
  Job later = QueuedJob("b", 1000);
  later.submitted = job.submitted + std::chrono::hours(25);
  ASSERT_TRUE(store->Insert(later, {}, "new").ok());
  EXPECT_EQ(RawDb(path).Value("SELECT count(*) FROM submit_tokens"), "1");
  store.reset();
  store = OpenOrDie(path);
  EXPECT_EQ(*store->SubmittedWith(1000, "new", long_ago), later.id());
}

}  // namespace
}  // namespace colo
