// ThreadedJobStore: each call runs on the store's thread and returns the store's own answer; the
// caller does its other work (WhileWaiting) while a call runs, and only then. Every JobStore
// promise is checked through it on SQLite by job_store_conformance_test.
#include "daemon/threaded_job_store.h"

#include <gtest/gtest.h>
#include <poll.h>

#include <atomic>
#include <future>
#include <stdexcept>
#include <thread>

#include "daemon/fake_job_store.h"
#include "daemon/job_store_test_support.h"

namespace colo {
namespace {

using testing::QueuedJob;

// A store whose Update waits until the test lets it finish, and says on which thread it ran; the
// rest is a FakeJobStore's.
class GatedStore final : public JobStore {
 public:
  std::promise<void> open_gate;
  std::atomic<std::thread::id> update_thread{};
  bool throw_on_update = false;

  Status Insert(Job& job, const std::vector<JobEvent>& events, std::string_view token) override {
    return fake_.Insert(job, events, token);
  }
  Result<JobId> ReserveIds(int count) override { return fake_.ReserveIds(count); }
  Status InsertReserved(const std::vector<Job>& jobs, const std::vector<JobEvent>& events,
                        std::string_view token) override {
    return fake_.InsertReserved(jobs, events, token);
  }
  Result<std::optional<JobId>> SubmittedWith(unsigned uid, std::string_view token,
                                             WallTime since) override {
    return fake_.SubmittedWith(uid, token, since);
  }
  Status Update(const Job& job, const std::vector<JobEvent>& events) override {
    update_thread = std::this_thread::get_id();
    gate_.wait();
    if (throw_on_update) throw std::runtime_error("the store threw");
    return fake_.Update(job, events);
  }
  Status UpdateMany(const std::vector<JobChange>& changes) override {
    return fake_.UpdateMany(changes);
  }
  Status AddEvents(const std::vector<JobEvent>& events) override { return fake_.AddEvents(events); }
  Result<LiveJobs> LoadLive() override { return fake_.LoadLive(); }
  Result<std::optional<Job>> Find(JobId id) override { return fake_.Find(id); }
  Result<HistoryPage> History(const HistoryQuery& query) override { return fake_.History(query); }
  Result<std::vector<JobEvent>> Events(JobId id) override { return fake_.Events(id); }
  Result<std::vector<JobEvent>> RecentEvents(int limit) override {
    return fake_.RecentEvents(limit);
  }
  Result<ModelRuns> EarlierRuns(const std::string& signature, int limit) override {
    return fake_.EarlierRuns(signature, limit);
  }
  Status SaveUsage(const UsageRecord& usage) override { return fake_.SaveUsage(usage); }
  Result<UsageRecord> LoadUsage() override { return fake_.LoadUsage(); }

 private:
  std::shared_future<void> gate_ = open_gate.get_future().share();
  FakeJobStore fake_;
};

bool Readable(int fd) {
  pollfd p{fd, POLLIN, 0};
  return poll(&p, 1, 0) == 1;
}

TEST(ThreadedJobStoreTest, CallsRunOnTheStoresThreadAndGiveItsAnswers) {
  auto inner = std::make_unique<GatedStore>();
  GatedStore& gated = *inner;
  gated.open_gate.set_value();
  ThreadedJobStore store(std::move(inner));
  Job job = QueuedJob("first");
  ASSERT_TRUE(store.Insert(job, {}).ok());
  EXPECT_EQ(job.id(), 1);  // the id the store gave, in the caller's job
  job.reason = "changed";
  ASSERT_TRUE(store.Update(job, {}).ok());
  EXPECT_NE(gated.update_thread.load(), std::this_thread::get_id());
  auto found = store.Find(1);
  ASSERT_TRUE(found.ok() && found->has_value());
  EXPECT_EQ((*found)->reason, "changed");
  auto missing = store.Find(7);
  ASSERT_TRUE(missing.ok());
  EXPECT_FALSE(missing->has_value());
  job.spec.id = 99;  // never inserted: the store's own error comes back
  EXPECT_EQ(store.Update(job, {}).code(), StatusCode::kNotFound);
}

TEST(ThreadedJobStoreTest, TheCallerWorksWhileACallRunsAndTheCallEndsOnlyWhenTheStoreIsDone) {
  auto inner = std::make_unique<GatedStore>();
  GatedStore& gated = *inner;
  ThreadedJobStore store(std::move(inner));
  Job job = QueuedJob("first");
  ASSERT_TRUE(store.Insert(job, {}).ok());

  const std::thread::id caller = std::this_thread::get_id();
  int turns = 0;
  bool done_seen = false;
  store.SetWhileWaiting([&](int done_fd) {
    EXPECT_EQ(std::this_thread::get_id(), caller);
    // The store is still in Update: nothing says it is done.
    if (++turns < 3) {
      EXPECT_FALSE(Readable(done_fd));
      return;
    }
    if (turns == 3) gated.open_gate.set_value();
    pollfd p{done_fd, POLLIN, 0};
    ASSERT_EQ(poll(&p, 1, 10000), 1);
    done_seen = true;
  });
  ASSERT_TRUE(store.Update(job, {}).ok());
  EXPECT_EQ(turns, 3);
  EXPECT_TRUE(done_seen);
}

TEST(ThreadedJobStoreTest, ACallMadeWhileWaitingWaitsForItsTurnWithoutWorkingAgain) {
  auto inner = std::make_unique<GatedStore>();
  GatedStore& gated = *inner;
  ThreadedJobStore store(std::move(inner));
  Job job = QueuedJob("first");
  ASSERT_TRUE(store.Insert(job, {}).ok());
  int depth = 0, deepest = 0, turns = 0;
  std::optional<bool> found_during;
  store.SetWhileWaiting([&](int) {
    deepest = std::max(deepest, ++depth);
    if (++turns == 1) {
      gated.open_gate.set_value();
      // Runs once the Update before it is done, in order, and without this being called again.
      auto found = store.Find(job.id());
      found_during = found.ok() && found->has_value();
    }
    --depth;
  });
  ASSERT_TRUE(store.Update(job, {}).ok());
  EXPECT_EQ(deepest, 1);
  EXPECT_EQ(found_during, true);
}

TEST(ThreadedJobStoreTest, WhatTheStoreThrowsReachesTheCaller) {
  auto inner = std::make_unique<GatedStore>();
  GatedStore& gated = *inner;
  gated.throw_on_update = true;
  gated.open_gate.set_value();
  ThreadedJobStore store(std::move(inner));
  Job job = QueuedJob("first");
  ASSERT_TRUE(store.Insert(job, {}).ok());
  EXPECT_THROW((void)store.Update(job, {}), std::runtime_error);  // it throws: no Status comes back
  // The thread goes on serving.
  EXPECT_TRUE(store.Find(job.id()).ok());
}

}  // namespace
}  // namespace colo
