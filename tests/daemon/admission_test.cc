// What may enter the scheduler's queue and when: per-user limits, dependencies, array caps and
// holds, decided by Admission apart from the controller that stores and queues.
#include "daemon/admission.h"

#include <gtest/gtest.h>

#include "fake_job_store.h"

namespace colo {
namespace {

Job MakeJob(JobId id, unsigned uid = 1000, JobState state = JobState::kQueued) {
  Job job;
  job.spec.id = id;
  job.owner = Identity{uid, uid, "user" + std::to_string(uid)};
  job.state = state;
  return job;
}

TEST(Admission, OneUserMayHaveOnlySoManyLiveJobsAndRootAny) {
  FakeJobStore store;
  Admission admission(store, AdmissionOptions{2, 3});
  const Identity alice{1000, 1000, "alice"}, root{0, 0, "root"};
  EXPECT_TRUE(admission.MayAdd(alice, 2).ok());
  admission.Count(MakeJob(1));
  admission.Count(MakeJob(2));
  const Status full = admission.MayAdd(alice, 1);
  EXPECT_EQ(full.code(), StatusCode::kResourceExhausted);
  EXPECT_NE(full.message().find("alice has 2 jobs waiting or running"), std::string::npos);
  EXPECT_TRUE(admission.MayAdd(root, 100).ok());
  admission.Uncount(MakeJob(2));
  EXPECT_TRUE(admission.MayAdd(alice, 1).ok());
  EXPECT_TRUE(admission.dependencies_changed()) << "an ended job may release others";
  EXPECT_EQ(admission.CheckArray(alice, api::ArraySpec{{1, 2, 3, 4}, 0}).code(),
            StatusCode::kInvalidArgument)
      << "more tasks than limits.max_array_size";
  EXPECT_EQ(admission.CheckArray(alice, api::ArraySpec{{1, 2}, 0}).code(),
            StatusCode::kResourceExhausted);
}

TEST(Admission, DependenciesNameJobsThatExistAndAreMetAsSlurmMeetsThem) {
  FakeJobStore store;
  Job done = MakeJob(0, 1000, JobState::kSucceeded);
  ASSERT_TRUE(store.Insert(done, {}).ok());  // id 1
  Job failed = MakeJob(0, 1000, JobState::kFailed);
  ASSERT_TRUE(store.Insert(failed, {}).ok());  // id 2
  Admission admission(store, AdmissionOptions{});
  std::map<JobId, Job> live;
  live.emplace(3, MakeJob(3, 1000, JobState::kRunning));

  using api::Dependency;
  using api::DependencyKind;
  EXPECT_EQ(admission.DependenciesOf({{DependencyKind::kAfterOk, 99}}, live).status().code(),
            StatusCode::kInvalidArgument);
  const auto deps = admission.DependenciesOf({{DependencyKind::kAfterOk, 1},
                                              {DependencyKind::kAfterOk, 1},
                                              {DependencyKind::kAfterAny, 3}},
                                             live);
  ASSERT_TRUE(deps.ok());
  EXPECT_EQ(deps->size(), 2u) << "repeats dropped";

  Job waits = MakeJob(4);
  waits.dependencies = *deps;
  live.emplace(4, waits);
  Job never = MakeJob(5);
  never.dependencies = {{DependencyKind::kAfterOk, 2}};
  live.emplace(5, never);
  Job unaffected = MakeJob(6);
  unaffected.dependencies = {{DependencyKind::kAfterAny, 3}};
  live.emplace(6, unaffected);
  admission.DependenciesChanged();
  const auto changes = admission.ReviewDependencies(live);
  EXPECT_FALSE(admission.dependencies_changed());
  ASSERT_EQ(changes.size(), 2u) << "job 6 still waits for the same";
  EXPECT_EQ(changes[0].job, 4);
  EXPECT_EQ(changes[0].left, (std::vector<Dependency>{{DependencyKind::kAfterAny, 3}}));
  EXPECT_TRUE(changes[0].never.empty());
  EXPECT_EQ(changes[1].job, 5);
  EXPECT_EQ(changes[1].never, "afterok:2 but job 2 ended failed");
  EXPECT_EQ(Admission::HeldReason(live.at(6), false), "dependency afterany:3");
}

TEST(Admission, AnArraysTasksEnterInOrderUpToItsCap) {
  FakeJobStore store;
  Admission admission(store, AdmissionOptions{});
  std::map<JobId, Job> live;
  for (JobId id = 10; id < 15; ++id) {
    Job task = MakeJob(id);
    task.array = ArrayMembership{10, static_cast<int>(id - 10), 2};
    live.emplace(id, task);
  }
  live.at(10).state = JobState::kRunning;
  live.at(11).held = true;
  EXPECT_TRUE(Admission::Throttled(live.at(12)));
  EXPECT_EQ(Admission::HeldReason(live.at(11), false), "held: colo release 11");
  EXPECT_EQ(Admission::HeldReason(live.at(12), false), "array 10: at most 2 of its tasks at once");
  EXPECT_EQ(Admission::HeldReason(live.at(12), true), "");
  admission.ArraysChanged();
  const auto none_queued = [](JobId) { return false; };
  EXPECT_EQ(admission.ArrayTurns(live, none_queued), std::vector<JobId>{12})
      << "one running, the held one skipped: one more may go";
  EXPECT_FALSE(admission.arrays_changed());
  const auto twelve_queued = [](JobId id) { return id == 12; };
  EXPECT_TRUE(admission.ArrayTurns(live, twelve_queued).empty());
}

}  // namespace
}  // namespace colo
