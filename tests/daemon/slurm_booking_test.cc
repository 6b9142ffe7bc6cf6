// What colod makes of Slurm's booking: which GPU a job runs on, with what memory and sharing,
// what is refused and why, and what a job's next run books when it goes back to Slurm's queue.
#include "daemon/slurm_booking.h"

#include <gtest/gtest.h>

namespace colo {
namespace {

TEST(WithShardsTest, ReplacesOnlyTheShardCount) {
  EXPECT_EQ(WithShards("gres:shard:12", 20), "gres:shard:20");
  EXPECT_EQ(WithShards("gres:foo:1,gres:shard:12", 20), "gres:foo:1,gres:shard:20");
  EXPECT_EQ(WithShards("gres:gpu:2", 10), "gres:gpu:2");
}

TEST(ParseBookingTest, ReadsWholeGpusShardsAndAnMpsPercentage) {
  EXPECT_EQ(ParseBooking("gres:gpu:2", "").whole_gpus, 2);
  EXPECT_EQ(ParseBooking("gres:gpu:a100:1", "").whole_gpus, 1);
  const SlurmBooking shards = ParseBooking("gres:shard:19", "my run colo:mps=50");
  EXPECT_EQ(shards.shards, 19);
  EXPECT_EQ(shards.whole_gpus, 0);
  EXPECT_EQ(shards.mps_percent, 50);
  EXPECT_EQ(ParseBooking("gres:gpu:1", "colo:mps=50").mps_percent, 0) << "shards only";
  EXPECT_EQ(ParseBooking("gres:shard:5", "colo:mps=500").mps_percent, 0);
  EXPECT_EQ(ParseBooking("gres:shard:5", "colo:mps=").mps_percent, 0);
  EXPECT_EQ(ParseBooking("", "").shards, 0);
  EXPECT_EQ(ParseBooking("gres:shard:-3,gres:gpu:x", "").shards, 0);
}

TEST(ParseGresIndexesTest, ReadsIndexesAndRanges) {
  EXPECT_EQ(ParseGresIndexes("shard:7(IDX:0)"), std::vector<int>{0});
  EXPECT_EQ(ParseGresIndexes("gpu:3(IDX:0-1,3)"), (std::vector<int>{0, 1, 3}));
  EXPECT_TRUE(ParseGresIndexes("gpu:1").empty());
  EXPECT_TRUE(ParseGresIndexes("gpu:1(IDX:2-1)").empty());
  EXPECT_TRUE(ParseGresIndexes("gpu:1(IDX:x)").empty());
}

// The test cluster's node: gres.conf lists /dev/nvidia0 first, NVML lists it second, so Slurm's
// GPU 0 is colod's GPU 1 and Slurm's GPU 1 colod's GPU 0.
SlurmGpuMap CrossedGpus() {
  SlurmGpuMap map;
  map.by_slurm_index = {{0, 1}, {1, 0}};
  return map;
}

api::SlurmAttachRequest Step(uint32_t job = 40) {
  api::SlurmAttachRequest step;
  step.job = job;
  step.uid = 1001;
  step.name = "train";
  step.restarts = 2;
  return step;
}

// slurmd's prolog of a colo job (`--colo-mem`, maybe `--colo-share`) Slurm gave `gpus`.
api::SlurmRunRequest ColoProlog(Bytes memory, std::vector<int> gpus,
                                SharingPreference share = SharingPreference::kAny) {
  api::SlurmRunRequest prolog;
  prolog.job = 40;
  prolog.restarts = 2;
  prolog.share = share;
  prolog.memory = memory;
  prolog.gpus = static_cast<int>(gpus.size());
  prolog.slurm_gpus = std::move(gpus);
  return prolog;
}

// slurmd's prolog of a job without colo's options.
api::SlurmRunRequest PlainProlog(std::vector<int> gpus) {
  api::SlurmRunRequest prolog;
  prolog.job = 40;
  prolog.gpus = static_cast<int>(gpus.size());
  prolog.slurm_gpus = std::move(gpus);
  return prolog;
}

Result<TenantRequest> Book(const api::SlurmAttachRequest& step, const api::SlurmRunRequest* prolog,
                           const RecordedBooking* record) {
  return BookTenant(step, prolog, record, CrossedGpus(), GiB(1));
}

TEST(BookTenantTest, AColoJobRunsOnTheGpuThePrologNamedWithWhatItAskedForAtSubmission) {
  // The step's own numbers are its user's to write: they do not count where the prolog spoke.
  api::SlurmAttachRequest step = Step();
  step.memory = GiB(70);
  step.share = SharingPreference::kExclusive;
  const api::SlurmRunRequest prolog = ColoProlog(GiB(12), {0}, SharingPreference::kMps);
  auto tenant = Book(step, &prolog, nullptr);
  ASSERT_TRUE(tenant.ok()) << tenant.status().message();
  EXPECT_EQ(tenant->booked_gpus, std::vector<GpuIndex>{1}) << "Slurm's GPU 0 is colod's GPU 1";
  EXPECT_EQ(tenant->gpus, 1);
  EXPECT_EQ(tenant->memory, GiB(12));
  EXPECT_EQ(tenant->share, SharingPreference::kMps);
  EXPECT_EQ(tenant->slurm_job, 40u);
  EXPECT_EQ(tenant->restarts, 2);
  EXPECT_EQ(tenant->name, "train");
  EXPECT_EQ(tenant->threads, 0) << "colod chooses a colo job's MPS threads";
}

TEST(BookTenantTest, ThePrologsGpusWinOverSlurmsRecordAndTheStepsAreNeverAsked) {
  const api::SlurmRunRequest prolog = ColoProlog(GiB(4), {1});
  const RecordedBooking record{{0}, "gres:shard:4", ""};
  auto tenant = Book(Step(), &prolog, &record);
  ASSERT_TRUE(tenant.ok()) << tenant.status().message();
  EXPECT_EQ(tenant->booked_gpus, std::vector<GpuIndex>{0});
  // Without the prolog's word, Slurm's record names the GPU.
  auto from_record = Book(Step(), nullptr, &record);
  ASSERT_TRUE(from_record.ok()) << from_record.status().message();
  EXPECT_EQ(from_record->booked_gpus, std::vector<GpuIndex>{1});
}

TEST(BookTenantTest, AColoJobOnSeveralGpusOrExclusiveOrOfUnknownNeedHasItsGpusWhole) {
  const api::SlurmRunRequest two = ColoProlog(GiB(30), {0, 1}, SharingPreference::kMps);
  auto tenant = Book(Step(), &two, nullptr);
  ASSERT_TRUE(tenant.ok()) << tenant.status().message();
  EXPECT_EQ(tenant->booked_gpus, (std::vector<GpuIndex>{1, 0}));
  EXPECT_EQ(tenant->share, SharingPreference::kExclusive);
  const api::SlurmRunRequest exclusive = ColoProlog(GiB(30), {1}, SharingPreference::kExclusive);
  EXPECT_EQ(Book(Step(), &exclusive, nullptr)->share, SharingPreference::kExclusive);
  api::SlurmRunRequest unknown = ColoProlog(GiB(30), {1}, SharingPreference::kPlain);
  unknown.memory.reset();
  auto whole = Book(Step(), &unknown, nullptr);
  ASSERT_TRUE(whole.ok());
  EXPECT_EQ(whole->share, SharingPreference::kExclusive);
  EXPECT_FALSE(whole->memory);
}

TEST(BookTenantTest, ShardAndMpsJobsPlanWithWhatSlurmBooked) {
  const api::SlurmRunRequest prolog = PlainProlog({1});
  const RecordedBooking shards{{1}, "gres:shard:20", ""};
  auto shard_job = Book(Step(), &prolog, &shards);
  ASSERT_TRUE(shard_job.ok()) << shard_job.status().message();
  EXPECT_EQ(shard_job->booked_gpus, std::vector<GpuIndex>{0});
  EXPECT_EQ(shard_job->memory, GiB(20));
  EXPECT_EQ(shard_job->share, SharingPreference::kPlain) << "as Slurm's shards share a GPU";
  // --gres=mps:25, which job_submit.lua booked as 20 shards and noted in the Comment.
  const RecordedBooking mps{{1}, "gres:shard:20", "nightly colo:mps=25"};
  auto mps_job = Book(Step(), &prolog, &mps);
  ASSERT_TRUE(mps_job.ok()) << mps_job.status().message();
  EXPECT_EQ(mps_job->share, SharingPreference::kMps);
  EXPECT_EQ(mps_job->threads, 25);
  EXPECT_EQ(mps_job->memory, GiB(20));
  // --gres=gpu:2: whole GPUs, nobody shares them.
  const api::SlurmRunRequest two = PlainProlog({0, 1});
  const RecordedBooking whole{{0, 1}, "gres:gpu:2", ""};
  auto whole_job = Book(Step(), &two, &whole);
  ASSERT_TRUE(whole_job.ok()) << whole_job.status().message();
  EXPECT_EQ(whole_job->gpus, 2);
  EXPECT_EQ(whole_job->share, SharingPreference::kExclusive);
  EXPECT_FALSE(whole_job->memory);
}

TEST(BookTenantTest, AColoStepWhosePrologColodMissedCountsOnlyWithinTheBooking) {
  const RecordedBooking record{{0}, "gres:shard:12", ""};
  api::SlurmAttachRequest step = Step();
  step.memory = GiB(30);
  step.share = SharingPreference::kMps;
  auto more = Book(step, nullptr, &record);
  ASSERT_TRUE(more.ok()) << more.status().message();
  EXPECT_EQ(more->memory, GiB(12)) << "no more than its 12 shards";
  EXPECT_EQ(more->share, SharingPreference::kMps);
  step.memory = GiB(8);
  EXPECT_EQ(Book(step, nullptr, &record)->memory, GiB(8));
  // Shards share a GPU: a step cannot make them a whole GPU.
  step.share = SharingPreference::kExclusive;
  EXPECT_EQ(Book(step, nullptr, &record)->share, SharingPreference::kPlain);
}

// The reason a booking is refused, or "" where it is taken.
std::string Refusal(const api::SlurmAttachRequest& step, const api::SlurmRunRequest* prolog,
                    const RecordedBooking* record) {
  auto tenant = Book(step, prolog, record);
  return tenant.ok() ? "" : tenant.status().message();
}

TEST(BookTenantTest, WhatCannotRunHereIsRefusedWithTheReason) {
  const RecordedBooking shards{{0}, "gres:shard:8", ""};
  // No GPU of this node: a job submitted without job_submit.lua, or a CPU job whose steps claim
  // colo's options.
  const api::SlurmRunRequest none = ColoProlog(GiB(8), {});
  EXPECT_NE(Refusal(Step(), &none, nullptr).find("Slurm booked no GPU of this node"),
            std::string::npos);
  // A GPU colod does not have (gres.conf lists more GPUs than this node has).
  const api::SlurmRunRequest unknown = ColoProlog(GiB(8), {5});
  EXPECT_NE(Refusal(Step(), &unknown, nullptr).find("GPU 5 of this node, which colod does not"),
            std::string::npos);
  // Fewer GPUs than the colo job asked for.
  api::SlurmRunRequest fewer = ColoProlog(GiB(8), {0});
  fewer.gpus = 2;
  EXPECT_NE(Refusal(Step(), &fewer, nullptr)
                .find("asked colo for 2 GPU(s) per node but Slurm "
                      "gave it 1"),
            std::string::npos);
  // Shards come from one GPU.
  const api::SlurmRunRequest two = PlainProlog({0, 1});
  const RecordedBooking split{{0, 1}, "gres:shard:8", ""};
  EXPECT_NE(Refusal(Step(), &two, &split).find("2 GPUs here for its shards"), std::string::npos);
  // Slurm gave GPUs but booked neither gpu nor shard (an administrator's GRES of another name):
  // a step's claim of colo's options books nothing.
  api::SlurmAttachRequest forged = Step();
  forged.memory = Bytes(1);
  forged.share = SharingPreference::kExclusive;
  forged.gpus = 2;
  const RecordedBooking other{{0}, "gres:nic:1", ""};
  const api::SlurmRunRequest plain = PlainProlog({0});
  EXPECT_NE(Refusal(forged, &plain, &other).find("Slurm booked no GPU for the job"),
            std::string::npos);
  // Without Slurm's record, only a colo job's prolog says what it booked.
  EXPECT_FALSE(Refusal(Step(), &plain, nullptr).empty());
  EXPECT_FALSE(Refusal(Step(), nullptr, nullptr).empty());
  EXPECT_EQ(Refusal(Step(), nullptr, &shards), "");
}

TEST(ShardsForTest, ANeedBooksWholeShardsRoundedUp) {
  EXPECT_EQ(ShardsFor(GiB(12), GiB(1)), 12);
  EXPECT_EQ(ShardsFor(GiB(22) + MiB(512), GiB(1)), 23);
  EXPECT_EQ(ShardsFor(Bytes(1), GiB(1)), 1);
  EXPECT_EQ(ShardsFor(GiB(5), GiB(2)), 3);
  EXPECT_EQ(ShardsFor(Bytes(0), GiB(1)), 0) << "no need: the booking stays as it is";
}

TEST(RerunChangesTest, ANodeThatCouldNotPlaceTheJobIsAvoidedBesideTheUsersOwnExclusions) {
  EXPECT_EQ(RerunChanges("gres:shard:30", "", "", 0, "n1"),
            std::vector<std::string>{"ExcNodeList=n1"});
  EXPECT_EQ(RerunChanges("gres:shard:30", "n3", "", 0, "n1"),
            std::vector<std::string>{"ExcNodeList=n3,n1"});
  EXPECT_EQ(RerunChanges("gres:shard:30", "n1,n3", "", 0, "n1"),
            std::vector<std::string>{"ExcNodeList=n1,n3"});
  // Its user named its nodes: excluding one would leave it pending for ever.
  EXPECT_TRUE(RerunChanges("gres:shard:30", "", "n1", 0, "n1").empty());
  EXPECT_TRUE(RerunChanges("gres:shard:30", "n3", "", 0, "").empty()) << "nothing to avoid";
}

TEST(RerunChangesTest, ARaisedNeedRaisesTheShardsOfAShardBookingOnly) {
  EXPECT_EQ(RerunChanges("gres:shard:20", "", "", 23, ""),
            std::vector<std::string>{"TresPerNode=gres:shard:23"});
  EXPECT_EQ(RerunChanges("gres:nic:1,gres:shard:20", "", "", 23, "n2"),
            (std::vector<std::string>{"ExcNodeList=n2", "TresPerNode=gres:nic:1,gres:shard:23"}));
  // Whole GPUs stay whole: the raised need is colod's to plan with on them.
  EXPECT_TRUE(RerunChanges("gres:gpu:1", "", "", 23, "").empty());
}

}  // namespace
}  // namespace colo
