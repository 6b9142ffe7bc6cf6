// The rules colod and the simulator both learn by: which runs teach, what a waiting job plans
// with after them, and whose runs count.
#include "core/run_learning.h"

#include <gtest/gtest.h>

namespace colo {
namespace {

RunEvidence Ended(std::optional<ExitKind> exit, Bytes peak, bool over_plan = false,
                  double solo_smact = -1) {
  return RunEvidence{exit, over_plan, peak, solo_smact};
}

TEST(RunLearning, ASignatureLinksOneModelOfOneUser) {
  EXPECT_EQ(ModelSignature::OfUid("resnet50/b64/adam/fp16", 1000).text(),
            "resnet50/b64/adam/fp16@uid1000");
  EXPECT_NE(ModelSignature::OfUid("m", 1000), ModelSignature::OfUid("m", 1001));
  EXPECT_EQ(ModelSignature::OfUid("m", 7), ModelSignature::FromText("m@uid7"));
  EXPECT_TRUE(ModelSignature::OfUid("", 1000).empty()) << "no model named: nothing links it";
  EXPECT_EQ(ModelSignature("bert", "alice").text(), "bert@alice");
}

TEST(RunLearning, APeakTeachesWhenTheRunSucceededOrWasSeenAboveItsPlan) {
  EXPECT_TRUE(MeasuredPeak(Ended(ExitKind::kSuccess, GiB(8))));
  EXPECT_TRUE(MeasuredPeak(Ended(ExitKind::kFailure, GiB(8), /*over_plan=*/true)))
      << "a use that was seen, whatever ended the run later";
  EXPECT_FALSE(MeasuredPeak(Ended(ExitKind::kOutOfMemory, GiB(8), /*over_plan=*/true)))
      << "an out-of-memory crash proves only that it needed more";
  EXPECT_FALSE(MeasuredPeak(Ended(ExitKind::kFailure, GiB(8))));
  EXPECT_FALSE(MeasuredPeak(Ended(ExitKind::kSuccess, Bytes(0))));
  EXPECT_TRUE(Teaches(Ended(ExitKind::kFailure, Bytes(0), false, 0.4))) << "SM activity alone";
  EXPECT_FALSE(Teaches(Ended(ExitKind::kCancelled, GiB(3))));

  ModelRuns runs;
  AddRun(Ended(ExitKind::kSuccess, GiB(8), false, 0.5), 1, runs);
  AddRun(Ended(ExitKind::kSuccess, GiB(9), false, 0.6), 1, runs);
  EXPECT_EQ(runs.peaks, std::vector<Bytes>{GiB(8)}) << "up to the limit";
  EXPECT_EQ(runs.solo_smact, std::vector<double>{0.5});
}

TEST(RunLearning, TheNeedIsTheHighestPeakWithAMarginThatShrinksWithEvidence) {
  EXPECT_FALSE(LearnNeed({}).has_value());
  const auto one = LearnNeed({GiB(10)});
  ASSERT_TRUE(one);
  EXPECT_EQ(one->upper, GiB(11)) << "10% after one run";
  EXPECT_EQ(one->need().source, MemorySource::kLearned);
  EXPECT_EQ(one->need().Upper(), GiB(11));
  const auto four = LearnNeed({GiB(10), GiB(10), GiB(10), GiB(10)});
  EXPECT_EQ(four->upper, GiB(10) + GiB(10).Scaled(0.05)) << "10%/sqrt(4)";
  const auto spread = LearnNeed({GiB(6), GiB(10), GiB(10), GiB(10)});
  EXPECT_EQ(spread->upper, GiB(14)) << "never below the spread the runs showed";
  EXPECT_EQ(spread->lowest, GiB(6));
  EXPECT_EQ(spread->runs, 4);
}

TEST(RunLearning, AWaitingJobPlansWithTheRunsUnlessTheUserSaidOtherwise) {
  const ModelRuns runs{{GiB(10)}, {0.40, 0.60}, {}};
  const MemoryNeed estimated{GiB(14), MemorySource::kEstimated, 0.2};
  const MemoryNeed declared{GiB(14), MemorySource::kDeclared, 0.0};

  Lesson lesson = Learn(runs, estimated, -1, SmactSource::kUnknown);
  ASSERT_TRUE(lesson.memory);
  EXPECT_EQ(lesson.memory->need().Upper(), GiB(11));
  ASSERT_TRUE(lesson.smact);
  EXPECT_DOUBLE_EQ(*lesson.smact, 0.5);

  lesson = Learn(runs, declared, 0.3, SmactSource::kUser);
  EXPECT_FALSE(lesson.memory) << "a declared need is the limit the job runs under";
  EXPECT_FALSE(lesson.smact) << "the user's --smact stands";

  lesson = Learn(runs, estimated, 0.9, SmactSource::kPredicted);
  ASSERT_TRUE(lesson.smact) << "a prediction gives way to what runs measured";
  EXPECT_DOUBLE_EQ(*lesson.smact, 0.5);

  EXPECT_FALSE(Learn(runs, estimated, 0.498, SmactSource::kLearned).smact)
      << "a learned value moves only by 0.005 or more";
  EXPECT_TRUE(Learn(runs, estimated, 0.45, SmactSource::kLearned).smact);
  EXPECT_FALSE(Learn(ModelRuns{}, estimated, -1, SmactSource::kUnknown).memory);
}

TEST(RunLearning, AModelsRunsKeepTheNewestFirstUpToTheLimit) {
  ModelRuns runs;
  for (int i = 1; i <= static_cast<int>(kRunsLearnedFrom) + 5; ++i)
    AddNewestRun(Ended(ExitKind::kSuccess, GiB(i)), runs);
  AddNewestRun(Ended(ExitKind::kOutOfMemory, GiB(99)), runs);  // teaches nothing
  ASSERT_EQ(runs.peaks.size(), kRunsLearnedFrom);
  EXPECT_EQ(runs.peaks.front(), GiB(static_cast<int64_t>(kRunsLearnedFrom) + 5)) << "newest first";
  EXPECT_EQ(runs.peaks.back(), GiB(6));
}

TEST(RunLearning, TheRunTimeIsTheMeanOfTheNewestTwoSuccessfulRuns) {
  EXPECT_FALSE(LearnRunTime({}).has_value());
  EXPECT_EQ(LearnRunTime({Seconds(100)}), Seconds(100));
  EXPECT_EQ(LearnRunTime({Seconds(100), Seconds(300), Seconds(9000)}), Seconds(200))
      << "the newest two: what the model does now";

  RunEvidence succeeded = Ended(ExitKind::kSuccess, Bytes(0));
  succeeded.run_time = Seconds(120);
  EXPECT_TRUE(MeasuredRunTime(succeeded));
  EXPECT_TRUE(Teaches(succeeded)) << "a run time alone teaches";
  RunEvidence failed = Ended(ExitKind::kFailure, Bytes(0));
  failed.run_time = Seconds(5);
  EXPECT_FALSE(MeasuredRunTime(failed)) << "a failed run says nothing of a whole run";
  EXPECT_FALSE(MeasuredRunTime(Ended(ExitKind::kSuccess, GiB(1)))) << "no time measured";

  ModelRuns runs;
  AddRun(failed, 20, runs);
  AddRun(succeeded, 20, runs);
  EXPECT_EQ(runs.run_times, std::vector<Duration>{Seconds(120)});
  const MemoryNeed declared{GiB(4), MemorySource::kDeclared, 0.0};
  EXPECT_EQ(Learn(runs, declared, 0.5, SmactSource::kUser).run_time, Seconds(120))
      << "a declared need or --smact does not stop it learning the run time";

  ModelRuns history;
  for (int s : {10, 20, 30}) {
    RunEvidence run = succeeded;
    run.run_time = Seconds(s);
    AddNewestRun(run, history);
  }
  EXPECT_EQ(history.run_times, (std::vector<Duration>{Seconds(30), Seconds(20), Seconds(10)}))
      << "newest first";
  EXPECT_EQ(LearnRunTime(history.run_times), Seconds(25));
}

}  // namespace
}  // namespace colo
