// What every JobStore promises, checked on the SQLite store and on the fake that controller tests
// use: the same tests, so the fake cannot drift from the real one.
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <poll.h>

#include <algorithm>
#include <memory>
#include <set>

#include "daemon/fake_job_store.h"
#include "daemon/job_codec.h"
#include "daemon/job_store_test_support.h"
#include "daemon/sqlite_job_store.h"
#include "daemon/threaded_job_store.h"

namespace colo {
namespace {

using testing::Ended;
using testing::EstimateWithSignature;
using testing::Page;
using testing::QueuedJob;

// Each store with the same handles on its faults. `Threaded`: the SQLite store behind
// ThreadedJobStore, as colod uses it (every call on the store's thread, the caller waiting with
// other work of its own).
template <bool Threaded>
class SqliteHarness {
 public:
  SqliteHarness() {
    auto opened = SqliteJobStore::Open(path());
    EXPECT_TRUE(opened.ok()) << opened.status().message();
    if (!opened.ok()) return;
    sqlite_ = opened->get();
    if (!Threaded) {
      store_ = std::move(*opened);
      return;
    }
    auto threaded = std::make_unique<ThreadedJobStore>(std::move(*opened));
    threaded->SetWhileWaiting([](int done_fd) {
      pollfd p{done_fd, POLLIN, 0};
      poll(&p, 1, -1);
    });
    store_ = std::move(threaded);
  }
  JobStore& store() { return *store_; }
  void Corrupt(JobId id) {
    testing::RawDb(path()).Exec(
        fmt::format("UPDATE jobs SET record = '{{\"format\": 2, \"spec\": 7}}' WHERE id = {}", id));
  }
  void ForgetIdCounter() {
    testing::RawDb(path()).Exec("DELETE FROM meta WHERE key = 'next_job_id'");
  }
  // Writes that need more room fail as on a full disk: the failing writes below are large. (Between
  // calls: the store's thread is not using the connection.)
  void BreakWrites() { ASSERT_TRUE(sqlite_->LimitPagesForTesting(1).ok()); }
  void HealWrites() { ASSERT_TRUE(sqlite_->LimitPagesForTesting(std::nullopt).ok()); }

 private:
  std::string path() const { return dir_.File("colo.db"); }
  testing::TempDir dir_;
  SqliteJobStore* sqlite_ = nullptr;
  std::unique_ptr<JobStore> store_;
};
using SqliteStoreHarness = SqliteHarness<false>;
using ThreadedSqliteStoreHarness = SqliteHarness<true>;

class FakeStoreHarness {
 public:
  JobStore& store() { return store_; }
  void Corrupt(JobId id) { store_.CorruptRecord(id, "spec: not an object"); }
  void ForgetIdCounter() { store_.ForgetIdCounter(); }
  void BreakWrites() { store_.FailAllWrites(Unavailable("disk full")); }
  void HealWrites() { store_.HealWrites(); }

 private:
  FakeJobStore store_;
};

template <typename Harness>
class JobStoreTest : public ::testing::Test {
 protected:
  JobStore& store() { return harness_.store(); }

  JobId Insert(Job job, const std::vector<JobEvent>& events = {}) {
    const Status status = store().Insert(job, events);
    EXPECT_TRUE(status.ok()) << status.message();
    return job.id();
  }
  Job Stored(JobId id) {
    auto found = store().Find(id);
    EXPECT_TRUE(found.ok()) << found.status().message();
    EXPECT_TRUE(found.ok() && found->has_value()) << "job " << id;
    return found.ok() && found->has_value() ? **found : Job{};
  }
  std::vector<JobId> Ids(const std::vector<Job>& jobs) {
    std::vector<JobId> ids;
    for (const Job& job : jobs) ids.push_back(job.id());
    return ids;
  }

  Harness harness_;
};

using Stores = ::testing::Types<SqliteStoreHarness, ThreadedSqliteStoreHarness, FakeStoreHarness>;
class StoreNames {
 public:
  template <typename T>
  static std::string GetName(int) {
    if (std::is_same_v<T, SqliteStoreHarness>) return "Sqlite";
    return std::is_same_v<T, ThreadedSqliteStoreHarness> ? "ThreadedSqlite" : "Fake";
  }
};
TYPED_TEST_SUITE(JobStoreTest, Stores, StoreNames);

// A job too large to fit in the room a full disk leaves (see SqliteStoreHarness::BreakWrites).
Job LargeJob(const std::string& name) {
  Job job = QueuedJob(name);
  job.env = {"BIG=" + std::string(256 << 10, 'x')};
  return job;
}

TYPED_TEST(JobStoreTest, InsertGivesEachJobANewIdAndStoresItAsGiven) {
  Job first = QueuedJob("first");
  first.spec.id = 99;  // not the caller's to choose
  ASSERT_TRUE(this->store().Insert(first, {}).ok());
  EXPECT_EQ(first.id(), 1);
  Job second = QueuedJob("second", 1001);
  second.estimate = EstimateWithSignature("sig");
  ASSERT_TRUE(this->store().Insert(second, {}).ok());
  EXPECT_EQ(second.id(), 2);

  EXPECT_EQ(EncodeJob(this->Stored(1)), EncodeJob(first));
  EXPECT_EQ(EncodeJob(this->Stored(2)), EncodeJob(second));
  auto missing = this->store().Find(3);
  ASSERT_TRUE(missing.ok());
  EXPECT_FALSE(missing->has_value());
}

TYPED_TEST(JobStoreTest, EventsOfANewJobAreItsOwnAndComeBackInOrder) {
  const JobId id = this->Insert(QueuedJob("a"), {{0, {}, "submitted", "by alice"}});
  const JobId other = this->Insert(QueuedJob("b"), {{0, {}, "submitted", "by bob"}});
  Job job = this->Stored(id);
  job.state = JobState::kRunning;
  ASSERT_TRUE(this->store().Update(job, {{id, {}, "started", "attempt 1"}}).ok());
  ASSERT_TRUE(this->store()
                  .AddEvents({{id, {}, "sample", "bad \xFF byte"},
                              {0, {}, "mps", "colod's own"},
                              {id, {}, "long", std::string(5000, 'x')}})
                  .ok());

  auto events = this->store().Events(id);
  ASSERT_TRUE(events.ok()) << events.status().message();
  ASSERT_EQ(events->size(), 4u);
  EXPECT_EQ((*events)[0].kind, "submitted");
  EXPECT_EQ((*events)[0].detail, "by alice");
  EXPECT_EQ((*events)[0].job, id);
  EXPECT_EQ((*events)[1].kind, "started");
  EXPECT_EQ((*events)[2].detail, "bad \xEF\xBF\xBD byte");
  EXPECT_EQ((*events)[3].detail.size(), kMaxEventDetailBytes);
  EXPECT_EQ(this->store().Events(other)->size(), 1u);
  ASSERT_EQ(this->store().Events(0)->size(), 1u);
  EXPECT_EQ(this->store().Events(0)->front().detail, "colod's own");
  EXPECT_TRUE(this->store().Events(77)->empty());
}

TYPED_TEST(JobStoreTest, RecentEventsAreTheNewestOfEveryJobNewestFirst) {
  const JobId a = this->Insert(QueuedJob("a"), {{0, {}, "submitted", "a"}});
  const JobId b = this->Insert(QueuedJob("b"), {{0, {}, "submitted", "b"}});
  ASSERT_TRUE(this->store()
                  .AddEvents({{a, {}, "started", "a1"},
                              {0, {}, "store-error", "colod's own"},
                              {b, {}, "cancelled", "b1"}})
                  .ok());
  auto recent = this->store().RecentEvents(3);
  ASSERT_TRUE(recent.ok()) << recent.status().message();
  ASSERT_EQ(recent->size(), 3u);
  EXPECT_EQ((*recent)[0].job, b);
  EXPECT_EQ((*recent)[0].kind, "cancelled");
  EXPECT_EQ((*recent)[1].job, 0);
  EXPECT_EQ((*recent)[2].detail, "a1");
  EXPECT_EQ(this->store().RecentEvents(100)->size(), 5u);
  EXPECT_TRUE(this->store().RecentEvents(0)->empty());
}

TYPED_TEST(JobStoreTest, UpdateReplacesTheRecordOfAStoredJobOnly) {
  const JobId id = this->Insert(QueuedJob("a"));
  Job job = this->Stored(id);
  job = Ended(job, JobState::kSucceeded, ExitKind::kSuccess);
  ASSERT_TRUE(this->store().Update(job, {}).ok());
  EXPECT_EQ(EncodeJob(this->Stored(id)), EncodeJob(job));

  Job stranger = QueuedJob("never inserted");
  stranger.spec.id = 5;
  const Status status = this->store().Update(stranger, {{5, {}, "started", ""}});
  EXPECT_EQ(status.code(), StatusCode::kNotFound);
  EXPECT_NE(status.message().find("job 5"), std::string::npos) << status.message();
  EXPECT_TRUE(this->store().Events(5)->empty());
  EXPECT_FALSE(this->store().Find(5)->has_value());
}

TYPED_TEST(JobStoreTest, IdsStayAboveEveryStoredJobWhenTheCounterIsLost) {
  for (int i = 0; i < 5; ++i) this->Insert(QueuedJob("j"));
  this->harness_.ForgetIdCounter();
  const JobId id = this->Insert(QueuedJob("after"));
  EXPECT_EQ(id, 6);
  for (JobId old = 1; old <= 5; ++old) EXPECT_EQ(this->Stored(old).spec.name, "j");
  EXPECT_EQ(this->Insert(QueuedJob("next")), 7);
}

TYPED_TEST(JobStoreTest, LoadLiveReturnsTheJobsThatHaveNotEnded) {
  Job running = QueuedJob("running");
  running.state = JobState::kRunning;
  Job recovering = QueuedJob("recovering");
  recovering.state = JobState::kRecovering;
  const JobId queued_id = this->Insert(QueuedJob("queued"));
  this->Insert(Ended(QueuedJob("done"), JobState::kSucceeded, ExitKind::kSuccess));
  const JobId running_id = this->Insert(running);
  this->Insert(Ended(QueuedJob("failed"), JobState::kFailed, ExitKind::kFailure));
  const JobId recovering_id = this->Insert(recovering);
  this->Insert(Ended(QueuedJob("lost"), JobState::kLost, ExitKind::kLost));
  this->Insert(Ended(QueuedJob("cancelled"), JobState::kCancelled, ExitKind::kCancelled));

  auto live = this->store().LoadLive();
  ASSERT_TRUE(live.ok()) << live.status().message();
  EXPECT_EQ(this->Ids(live->jobs), (std::vector<JobId>{queued_id, running_id, recovering_id}));
  EXPECT_TRUE(live->quarantined.empty());
  EXPECT_EQ(live->jobs[1].state, JobState::kRunning);

  Job finished = live->jobs[0];
  finished = Ended(finished, JobState::kCancelled, ExitKind::kCancelled);
  ASSERT_TRUE(this->store().Update(finished, {}).ok());
  EXPECT_EQ(this->Ids(this->store().LoadLive()->jobs),
            (std::vector<JobId>{running_id, recovering_id}));
}

TYPED_TEST(JobStoreTest, ARowThatCannotBeReadIsQuarantinedNamedAndKept) {
  for (int i = 0; i < 3; ++i) this->Insert(QueuedJob("live"));
  const JobId ended = this->Insert(Ended(QueuedJob("old"), JobState::kFailed, ExitKind::kFailure));
  this->Insert(Ended(QueuedJob("older"), JobState::kFailed, ExitKind::kFailure));
  this->harness_.Corrupt(2);
  this->harness_.Corrupt(ended);

  auto live = this->store().LoadLive();
  ASSERT_TRUE(live.ok()) << live.status().message();
  EXPECT_EQ(this->Ids(live->jobs), (std::vector<JobId>{1, 3}));
  ASSERT_EQ(live->quarantined.size(), 1u);
  EXPECT_EQ(live->quarantined[0].id, 2);
  EXPECT_NE(live->quarantined[0].reason.find("spec"), std::string::npos)
      << live->quarantined[0].reason;

  auto found = this->store().Find(2);
  ASSERT_FALSE(found.ok());
  EXPECT_NE(found.status().message().find("job 2"), std::string::npos);
  EXPECT_NE(found.status().message().find("spec"), std::string::npos);
  auto found_ended = this->store().Find(ended);
  ASSERT_FALSE(found_ended.ok());
  EXPECT_NE(found_ended.status().message().find(fmt::format("job {}", ended)), std::string::npos);

  // Quarantined: never overwritten, and named again at every load.
  Job replacement = QueuedJob("overwrite");
  replacement.spec.id = 2;
  const Status update = this->store().Update(replacement, {{2, {}, "x", ""}});
  EXPECT_EQ(update.code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(update.message().find("job 2"), std::string::npos);
  EXPECT_TRUE(this->store().Events(2)->empty());
  auto again = this->store().LoadLive();
  ASSERT_TRUE(again.ok());
  ASSERT_EQ(again->quarantined.size(), 1u);
  EXPECT_EQ(again->quarantined[0].id, 2);
  EXPECT_EQ(again->quarantined[0].reason, live->quarantined[0].reason);

  // History passes over the unreadable ended job.
  auto history = this->store().History({});
  ASSERT_TRUE(history.ok());
  EXPECT_EQ(this->Ids(history->jobs), (std::vector<JobId>{5}));
  // And a new job still gets a new id.
  EXPECT_EQ(this->Insert(QueuedJob("new")), 6);
}

TYPED_TEST(JobStoreTest, HistoryPagesAreNewestFirstDisjointAndComplete) {
  std::vector<JobId> ended_ids, ended_by_1001;
  for (int i = 0; i < 130; ++i) {
    const unsigned uid = i % 3 == 0 ? 1001 : 1000;
    if (i % 10 == 4) {
      this->Insert(QueuedJob("live", uid));
      continue;
    }
    const JobId id =
        this->Insert(Ended(QueuedJob("done", uid), JobState::kSucceeded, ExitKind::kSuccess));
    ended_ids.insert(ended_ids.begin(), id);
    if (uid == 1001) ended_by_1001.insert(ended_by_1001.begin(), id);
  }
  const auto all_pages = [&](HistoryQuery query) {
    std::vector<JobId> seen;
    for (int pages = 0; pages < 100; ++pages) {
      auto page = this->store().History(query);
      EXPECT_TRUE(page.ok()) << page.status().message();
      if (!page.ok()) break;
      EXPECT_LE(page->jobs.size(), static_cast<size_t>(query.limit));
      for (const Job& job : page->jobs) seen.push_back(job.id());
      EXPECT_EQ(page->next.has_value(), page->jobs.size() == static_cast<size_t>(query.limit));
      if (!page->next) break;
      EXPECT_EQ(*page->next, page->jobs.back().id());
      query.before = page->next;
    }
    return seen;
  };
  // Newest first with no id twice is exactly the descending list.
  EXPECT_EQ(all_pages(Page(50)), ended_ids);
  EXPECT_EQ(all_pages(Page(7, std::nullopt, 1001u)), ended_by_1001);
  // 117 ended jobs: a limit that divides them leaves a last, empty page without `next`.
  ASSERT_EQ(ended_ids.size(), 117u);
  EXPECT_EQ(all_pages(Page(39)), ended_ids);

  auto one = this->store().History(Page(0));
  ASSERT_TRUE(one.ok());
  EXPECT_EQ(this->Ids(one->jobs), (std::vector<JobId>{ended_ids[0]}));
  auto before = this->store().History(Page(3, ended_ids[10]));
  ASSERT_TRUE(before.ok());
  EXPECT_EQ(this->Ids(before->jobs),
            (std::vector<JobId>{ended_ids[11], ended_ids[12], ended_ids[13]}));
  EXPECT_TRUE(this->store().History(Page(50, std::nullopt, 4242u))->jobs.empty());
  EXPECT_FALSE(this->store().History(Page(50, std::nullopt, 4242u))->next.has_value());
}

TYPED_TEST(JobStoreTest, SuccessfulPeaksAreTheNewestSuccessfulRunsOfTheModel) {
  const auto with_signature = [](Job job, const std::string& signature) {
    job.estimate = EstimateWithSignature(signature);
    return job;
  };
  this->Insert(Ended(with_signature(QueuedJob("a1"), "A"), JobState::kSucceeded, ExitKind::kSuccess,
                     GiB(5)));
  this->Insert(Ended(with_signature(QueuedJob("a-oom"), "A"), JobState::kFailed,
                     ExitKind::kOutOfMemory, GiB(9)));
  this->Insert(
      Ended(with_signature(QueuedJob("b"), "B"), JobState::kSucceeded, ExitKind::kSuccess, GiB(6)));
  // An out-of-memory attempt, then a successful one: only the latter counts.
  Job retried = Ended(with_signature(QueuedJob("a2"), "A"), JobState::kRecovering,
                      ExitKind::kOutOfMemory, GiB(11));
  this->Insert(Ended(retried, JobState::kSucceeded, ExitKind::kSuccess, GiB(7)));
  // Never measured.
  this->Insert(Ended(with_signature(QueuedJob("a0"), "A"), JobState::kSucceeded, ExitKind::kSuccess,
                     Bytes(0)));
  this->Insert(with_signature(QueuedJob("a-queued"), "A"));
  this->Insert(Ended(QueuedJob("none"), JobState::kSucceeded, ExitKind::kSuccess, GiB(3)));

  auto peaks = this->store().EarlierRuns("A", 10);
  ASSERT_TRUE(peaks.ok()) << peaks.status().message();
  EXPECT_EQ(peaks->peaks, (std::vector<Bytes>{GiB(7), GiB(5)}));
  EXPECT_EQ(this->store().EarlierRuns("A", 1)->peaks, (std::vector<Bytes>{GiB(7)}));
  EXPECT_EQ(this->store().EarlierRuns("B", 10)->peaks, (std::vector<Bytes>{GiB(6)}));
  EXPECT_TRUE(this->store().EarlierRuns("C", 10)->peaks.empty());
  EXPECT_TRUE(this->store().EarlierRuns("", 10)->peaks.empty());
  EXPECT_TRUE(this->store().EarlierRuns("A", 0)->peaks.empty());
}

TYPED_TEST(JobStoreTest, AFailedInsertStoresNothingAndUsesUpNoId) {
  this->Insert(QueuedJob("a"));
  this->Insert(QueuedJob("b"));
  this->harness_.BreakWrites();
  Job job = LargeJob("large");
  EXPECT_FALSE(this->store().Insert(job, {{0, {}, "submitted", ""}}).ok());
  EXPECT_EQ(job.id(), 0);
  EXPECT_FALSE(this->store().Find(3)->has_value());
  EXPECT_TRUE(this->store().Events(3)->empty());
  EXPECT_EQ(this->store().LoadLive()->jobs.size(), 2u);

  this->harness_.HealWrites();
  ASSERT_TRUE(this->store().Insert(job, {{0, {}, "submitted", ""}}).ok());
  EXPECT_EQ(job.id(), 3);
  EXPECT_EQ(EncodeJob(this->Stored(3)), EncodeJob(job));
  EXPECT_EQ(this->store().Events(3)->size(), 1u);
  EXPECT_EQ(this->Insert(QueuedJob("c")), 4);
}

TYPED_TEST(JobStoreTest, ReservedIdsAreNeverHandedOutAgainAndABatchIsStoredWholeOrNot) {
  this->Insert(QueuedJob("a"));
  auto first = this->store().ReserveIds(3);
  ASSERT_TRUE(first.ok()) << first.status().message();
  EXPECT_EQ(*first, 2);
  EXPECT_EQ(this->Insert(QueuedJob("b")), 5) << "above the reserved ids";
  std::vector<Job> batch;
  std::vector<JobEvent> events;
  for (JobId id = 2; id <= 4; ++id) {
    Job& job = batch.emplace_back(LargeJob(fmt::format("task{}", id)));
    job.spec.id = id;
    events.push_back({id, {}, "submitted", fmt::format("task {}", id)});
  }
  // One id that was never handed out, or one that is stored already: nothing is stored.
  for (JobId bad : {JobId{9}, JobId{5}}) {
    std::vector<Job> wrong = batch;
    wrong.back().spec.id = bad;
    EXPECT_FALSE(this->store().InsertReserved(wrong, events).ok()) << bad;
    EXPECT_FALSE(this->store().Find(2)->has_value()) << bad;
  }
  this->harness_.BreakWrites();
  EXPECT_FALSE(this->store().InsertReserved(batch, events).ok());
  EXPECT_FALSE(this->store().Find(3)->has_value());
  this->harness_.HealWrites();
  ASSERT_TRUE(this->store().InsertReserved(batch, events).ok());
  for (const Job& job : batch) {
    EXPECT_EQ(EncodeJob(this->Stored(job.id())), EncodeJob(job));
    ASSERT_EQ(this->store().Events(job.id())->size(), 1u);
  }
  EXPECT_EQ(this->store().LoadLive()->jobs.size(), 5u);
  EXPECT_EQ(this->Insert(QueuedJob("c")), 6);
  EXPECT_FALSE(this->store().ReserveIds(0).ok());
  EXPECT_FALSE(this->store().ReserveIds(kMaxReservedIds + 1).ok());
}

TYPED_TEST(JobStoreTest, UpdateManyStoresEveryChangeOrNone) {
  const JobId a = this->Insert(QueuedJob("a"));
  const JobId b = this->Insert(QueuedJob("b"));
  Job held_a = this->Stored(a), held_b = this->Stored(b);
  held_a.held = held_b.held = true;
  Job ghost = QueuedJob("never stored");
  ghost.spec.id = 77;
  EXPECT_EQ(this->store().UpdateMany({{&held_a, {{a, {}, "held", ""}}}, {&ghost, {}}}).code(),
            StatusCode::kNotFound);
  EXPECT_FALSE(this->Stored(a).held) << "a change of the failed batch was kept";
  EXPECT_TRUE(this->store().Events(a)->empty());
  ASSERT_TRUE(this->store()
                  .UpdateMany({{&held_a, {{a, {}, "held", ""}}}, {&held_b, {{b, {}, "held", ""}}}})
                  .ok());
  EXPECT_TRUE(this->Stored(a).held);
  EXPECT_TRUE(this->Stored(b).held);
  EXPECT_EQ(this->store().Events(b)->size(), 1u);
}

TYPED_TEST(JobStoreTest, ASubmitsTokenFindsTheJobItStored) {
  Job job = QueuedJob("a", 1000);
  job.submitted = WallTime(std::chrono::seconds(1'700'000'000));
  ASSERT_TRUE(this->store().Insert(job, {}, "t1").ok());
  const WallTime since = job.submitted - kSubmitTokenLifetime;
  EXPECT_EQ(*this->store().SubmittedWith(1000, "t1", since), job.id());
  EXPECT_EQ(*this->store().SubmittedWith(1001, "t1", since), std::nullopt);
  auto first = this->store().ReserveIds(3);
  ASSERT_TRUE(first.ok());
  std::vector<Job> tasks;
  for (int t = 0; t < 3; ++t) {
    Job& task = tasks.emplace_back(QueuedJob("task", 1000));
    task.spec.id = *first + t;
    task.submitted = job.submitted;
  }
  ASSERT_TRUE(this->store().InsertReserved(tasks, {}, "t2").ok());
  EXPECT_EQ(*this->store().SubmittedWith(1000, "t2", since), *first);
}

TYPED_TEST(JobStoreTest, AFailedUpdateChangesNothing) {
  const JobId id = this->Insert(QueuedJob("a"), {{0, {}, "submitted", ""}});
  const Job before = this->Stored(id);
  this->harness_.BreakWrites();
  Job changed = LargeJob("a");
  changed.spec.id = id;
  changed.state = JobState::kRunning;
  EXPECT_FALSE(this->store().Update(changed, {{id, {}, "started", ""}}).ok());
  EXPECT_EQ(EncodeJob(this->Stored(id)), EncodeJob(before));
  EXPECT_EQ(this->store().Events(id)->size(), 1u);

  this->harness_.HealWrites();
  ASSERT_TRUE(this->store().Update(changed, {{id, {}, "started", ""}}).ok());
  EXPECT_EQ(this->Stored(id).state, JobState::kRunning);
  EXPECT_EQ(this->store().Events(id)->size(), 2u);
}

// The fake's own fault switches, which controller tests rely on.
TEST(FakeJobStore, FailsExactlyTheWritesItIsToldTo) {
  FakeJobStore store;
  store.FailWrites(2, Unavailable("disk full"));
  Job job = QueuedJob("a");
  EXPECT_EQ(store.Insert(job, {}).message(), "disk full");
  EXPECT_EQ(store.AddEvents({{0, {}, "x", ""}}).message(), "disk full");
  EXPECT_TRUE(store.all_events().empty());
  EXPECT_TRUE(store.ids().empty());
  EXPECT_EQ(store.failed_writes(), 2);
  ASSERT_TRUE(store.Insert(job, {}).ok());
  EXPECT_EQ(job.id(), 1);
  EXPECT_EQ(store.ids(), (std::vector<JobId>{1}));
  ASSERT_TRUE(store.stored_job(1).has_value());
  EXPECT_EQ(store.stored_job(1)->spec.name, "a");

  store.FailAllWrites(Unavailable("gone"));
  for (int i = 0; i < 5; ++i) EXPECT_FALSE(store.Update(job, {}).ok());
  store.HealWrites();
  EXPECT_TRUE(store.Update(job, {}).ok());
  EXPECT_EQ(store.failed_writes(), 7);

  store.CorruptRecord(1, "spec.gpus: not an integer");
  auto live = store.LoadLive();
  ASSERT_TRUE(live.ok());
  ASSERT_EQ(live->quarantined.size(), 1u);
  EXPECT_EQ(live->quarantined[0].reason, "spec.gpus: not an integer");
  EXPECT_EQ(store.row(1)->quarantined, "spec.gpus: not an integer");
}

}  // namespace
}  // namespace colo
