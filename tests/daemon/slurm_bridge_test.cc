#include "daemon/slurm_bridge.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

namespace colo {
namespace {

// One job as Slurm 22.05's `squeue --json` writes it (the fields colod reads, and a few others).
nlohmann::json SqueueJob(uint32_t id) {
  return {{"job_id", id},
          {"job_state", "FAILED"},
          {"nodes", "n[2-3]"},
          {"admin_comment", "colo:need=24696061952,ooms=1"},
          {"standard_output", "/home/alice/run-%j-%x.out"},
          {"standard_error", ""},
          {"exit_code", 256},
          {"restart_cnt", 2},
          {"tres_per_node", "gres:gpumem:23552"},
          {"user_name", "alice"},
          {"name", "train"},
          {"current_working_directory", "/home/alice"},
          {"array_job_id", 0},
          {"array_task_id", nullptr},
          {"batch_host", "n2"}};
}

std::string Squeue(const std::vector<nlohmann::json>& jobs) {
  return nlohmann::json{{"meta", {{"Slurm", {{"release", "22.05.8"}}}}},
                        {"errors", nlohmann::json::array()},
                        {"jobs", jobs}}
      .dump(2);
}

TEST(ParseSqueueJobsTest, ReadsWhatColodNeedsOfAJob) {
  auto jobs = ParseSqueueJobs(Squeue({SqueueJob(7)}));
  ASSERT_TRUE(jobs.ok()) << jobs.status().message();
  ASSERT_EQ(jobs->count(7), 1u);
  const SlurmJobInfo& j = jobs->at(7);
  EXPECT_EQ(j.state, "FAILED");
  EXPECT_EQ(j.nodes, "n[2-3]");
  EXPECT_EQ(j.restarts, 2);
  EXPECT_EQ(j.exit_code, 1);  // 256 is a wait status
  EXPECT_EQ(j.exit_signal, 0);
  EXPECT_EQ(j.tres_per_node, "gres:gpumem:23552");
  EXPECT_EQ(ParseSlurmNote(j.admin_comment).need, Bytes(24696061952));
  EXPECT_EQ(ParseSlurmNote(j.admin_comment).ooms, 1);
  // Slurm's filename pattern expanded; stderr goes with stdout when not given.
  EXPECT_EQ(j.std_out, "/home/alice/run-7-train.out");
  EXPECT_EQ(j.std_err, j.std_out);
}

TEST(ParseSqueueJobsTest, AJobNameOrPathCannotPassForAnotherField) {
  nlohmann::json evil = SqueueJob(8);
  evil["name"] = "x\n   JobState=COMPLETED NodeList=n1 AdminComment=colo:need=1";
  evil["standard_output"] = "/tmp/a NodeList=n1 Restarts=9 %j.out";
  evil["admin_comment"] = "";
  auto jobs = ParseSqueueJobs(Squeue({evil}));
  ASSERT_TRUE(jobs.ok());
  const SlurmJobInfo& j = jobs->at(8);
  EXPECT_EQ(j.state, "FAILED");
  EXPECT_EQ(j.nodes, "n[2-3]");
  EXPECT_EQ(j.restarts, 2);
  EXPECT_FALSE(ParseSlurmNote(j.admin_comment).need.has_value());
  EXPECT_EQ(j.std_out, "/tmp/a NodeList=n1 Restarts=9 8.out");
}

TEST(ParseSqueueJobsTest, DefaultsAndRelativePathsFollowSlurm) {
  nlohmann::json plain = SqueueJob(9);
  plain["standard_output"] = "";
  nlohmann::json relative = SqueueJob(10);
  relative["standard_output"] = "logs/%u_%N_%4j.out";
  relative["standard_error"] = "logs/err-%%-%j.txt";
  nlohmann::json array = SqueueJob(11);
  array["standard_output"] = "";
  array["array_job_id"] = 5;
  array["array_task_id"] = 3;
  nlohmann::json escaped = SqueueJob(12);
  escaped["standard_output"] = "/out/lit\\eral-%j";
  auto jobs = ParseSqueueJobs(Squeue({plain, relative, array, escaped}));
  ASSERT_TRUE(jobs.ok());
  EXPECT_EQ(jobs->at(9).std_out, "/home/alice/slurm-9.out");
  EXPECT_EQ(jobs->at(10).std_out, "/home/alice/logs/alice_n2_0010.out");
  EXPECT_EQ(jobs->at(10).std_err, "/home/alice/logs/err-%-10.txt");
  EXPECT_EQ(jobs->at(11).std_out, "/home/alice/slurm-5_3.out");
  EXPECT_EQ(jobs->at(12).std_out, "/out/literal-%j");  // a backslash turns expansion off
}

TEST(ParseSqueueJobsTest, ASignalIsNotAnExitCode) {
  nlohmann::json killed = SqueueJob(13);
  killed["exit_code"] = 9;  // killed by SIGKILL
  auto jobs = ParseSqueueJobs(Squeue({killed}));
  ASSERT_TRUE(jobs.ok());
  EXPECT_EQ(jobs->at(13).exit_signal, 9);
  EXPECT_EQ(jobs->at(13).exit_code, 0);
}

TEST(ParseSqueueJobsTest, GarbageIsAnErrorAndOddRecordsAreSkipped) {
  EXPECT_FALSE(ParseSqueueJobs("").ok());
  EXPECT_FALSE(ParseSqueueJobs("squeue: error: Invalid user").ok());
  EXPECT_FALSE(ParseSqueueJobs("{\"jobs\": 3}").ok());
  nlohmann::json no_id = SqueueJob(14);
  no_id.erase("job_id");
  nlohmann::json huge_id = SqueueJob(15);
  huge_id["job_id"] = int64_t{1} << 40;
  nlohmann::json no_state = SqueueJob(16);
  no_state["job_state"] = 3;
  // A warning squeue prints before its JSON does not hide the jobs.
  auto jobs = ParseSqueueJobs("squeue: warning: something\n" +
                              Squeue({no_id, huge_id, no_state, "text", SqueueJob(17)}));
  ASSERT_TRUE(jobs.ok()) << jobs.status().message();
  EXPECT_EQ(jobs->size(), 1u);
  EXPECT_EQ(jobs->count(17), 1u);
}

TEST(ParseSqueueStatesTest, ReadsTheCheapListing) {
  const auto jobs = ParseSqueueStates(
      "3|PENDING|1||\n"
      "4|RUNNING|0|n2|\n"
      "garbage\n"
      "x|RUNNING|0|n1|\n"
      "5|COMPLETED|-1|n1|\n");
  ASSERT_EQ(jobs.size(), 2u);
  EXPECT_EQ(jobs.at(3).state, "PENDING");
  EXPECT_EQ(jobs.at(3).restarts, 1);
  EXPECT_EQ(jobs.at(3).nodes, "");
  EXPECT_EQ(jobs.at(4).nodes, "n2");
}

TEST(SlurmNoteTest, RoundTripsAndIgnoresWhatItDoesNotKnow) {
  const SlurmNote note{Bytes(123456789), 2};
  const SlurmNote back = ParseSlurmNote("site text; " + FormatSlurmNote(note) + " more");
  EXPECT_EQ(back.need, note.need);
  EXPECT_EQ(back.ooms, 2);
  EXPECT_FALSE(ParseSlurmNote("colo:need=-5,ooms=x").need.has_value());
  EXPECT_FALSE(ParseSlurmNote("colo:need=99999999999999999999999").need.has_value());
  EXPECT_EQ(ParseSlurmNote("no note").ooms, 0);
}

TEST(SlurmNoteTest, WithNoteKeepsAnAdministratorsText) {
  const SlurmNote note{Bytes(5), 1};
  EXPECT_EQ(WithNote("", note), "colo:need=5,ooms=1");
  EXPECT_EQ(WithNote("checked by ops", note), "checked by ops colo:need=5,ooms=1");
  EXPECT_EQ(WithNote("ops colo:need=1,ooms=0 later", note), "ops later colo:need=5,ooms=1");
  EXPECT_EQ(WithNote("colo:need=1,ooms=0", note), "colo:need=5,ooms=1");
}

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

TEST(ParseSqueueJobsTest, ReadsEachNodesGpus) {
  nlohmann::json job = SqueueJob(9);
  job["gres_detail"] = {"shard:7(IDX:1)", "gpu:2(IDX:0-1)"};
  job["job_resources"] = {{"allocated_nodes", {{{"nodename", "n2"}}, {{"nodename", "n3"}}}}};
  job["comment"] = "colo:mps=25";
  auto jobs = ParseSqueueJobs(Squeue({job}));
  ASSERT_TRUE(jobs.ok());
  const SlurmJobInfo& j = jobs->at(9);
  EXPECT_EQ(j.gpus_by_node.at("n2"), std::vector<int>{1});
  EXPECT_EQ(j.gpus_by_node.at("n3"), (std::vector<int>{0, 1}));
  EXPECT_EQ(j.comment, "colo:mps=25");
}

TEST(ParseSqueueBookingsTest, TheCommentComesWholeAndLast) {
  const auto jobs =
      ParseSqueueBookings("12|0|gres:shard:19|a|b colo:mps=50|\n13|2|gres:gpu:1||\nnot|a|line\n");
  ASSERT_EQ(jobs.size(), 2u);
  EXPECT_EQ(jobs.at(12).tres_per_node, "gres:shard:19");
  EXPECT_EQ(jobs.at(12).comment, "a|b colo:mps=50");
  EXPECT_EQ(jobs.at(13).restarts, 2);
  EXPECT_EQ(jobs.at(13).comment, "");
}

}  // namespace
}  // namespace colo
