#include "sim/trace.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <set>

#include "sim/simulator.h"

namespace colo {
namespace {

TEST(ColoCsv, ReadsWorkloadsAndInlineProfiles) {
  auto trace = ParseColoCsv(
      "# a comment\nsubmit_s,workload,gpus,declared_mem,owner,duration_s,peak_mem,smact\n"
      "10,resnet50-imagenet-bs64,,12GiB,alice,,,\n"
      "0,,2,,bob,600,3GiB,0.3\n",
      "t.csv");
  ASSERT_TRUE(trace.ok()) << trace.status().ToString();
  ASSERT_EQ(trace->jobs.size(), 2u);
  EXPECT_EQ(trace->jobs[0].owner, "bob") << "sorted by submit time";
  EXPECT_EQ(trace->jobs[0].id, 1);
  EXPECT_EQ(trace->jobs[0].profile.gpus, 2);
  EXPECT_EQ(trace->jobs[0].profile.peak, GiB(3));
  EXPECT_EQ(trace->jobs[1].declared, GiB(12));
  EXPECT_EQ(trace->jobs[1].profile.peak, MiB(8536));
}

TEST(ColoCsv, ErrorsNameFileAndLine) {
  const char* header = "submit_s,workload,gpus,smact\n";
  const std::pair<std::string, std::string> cases[] = {
      {"0,no-such-model,,\n", "unknown workload"},
      {"-5,resnet50-imagenet-bs64,,\n", "submit_s"},
      {"0,resnet50-imagenet-bs64,0,\n", "gpus"},
      {"0,resnet50-imagenet-bs64,1,7\n", "smact"},
      {"0,resnet50-imagenet-bs64,1,0.5,extra,fields\n", "fields"},
  };
  for (const auto& [line, expected] : cases) {
    auto trace = ParseColoCsv(std::string(header) + line, "bad.csv");
    ASSERT_FALSE(trace.ok()) << line;
    EXPECT_NE(trace.status().message().find("bad.csv:2:"), std::string::npos)
        << trace.status().message();
    EXPECT_NE(trace.status().message().find(expected), std::string::npos)
        << trace.status().message();
  }
  EXPECT_FALSE(ParseColoCsv("workload\nresnet50-imagenet-bs64\n", "nosubmit.csv").ok());
  EXPECT_FALSE(ParseColoCsv("", "empty.csv").ok());
}

TEST(CarmaScript, SleepsAdvanceTimeAndRadFilesBecomeJobs) {
  auto trace = ReadCarmaScript(std::string(COLO_TEST_DATA) + "/carma/submit.sh");
  ASSERT_TRUE(trace.ok()) << trace.status().ToString();
  ASSERT_EQ(trace->jobs.size(), 2u);
  EXPECT_EQ(trace->jobs[0].profile.name, "resnet50-imagenet-bs64");
  EXPECT_EQ(trace->jobs[0].profile.peak, MiB(8536)) << "table 6.2's peak";
  ASSERT_NE(trace->jobs[0].task_file, nullptr);
  EXPECT_EQ(trace->jobs[0].task_file->measured, MiB(8536));
  EXPECT_EQ(trace->jobs[0].task_file->horus, MiB(9000));
  EXPECT_FALSE(trace->jobs[0].task_file->faketensor.has_value()) << "40000: not known";
  EXPECT_EQ(trace->jobs[1].submit, Seconds(73));
  EXPECT_EQ(trace->jobs[1].profile.gpus, 2);
  EXPECT_EQ(trace->jobs[1].profile.name, "gpt2_large-wiki-bs8");
  EXPECT_FALSE(ReadCarmaScript("/nonexistent/submit.sh").ok());
}

const std::string kCarmaTraces =
    std::string(COLO_TEST_DATA) + "/carma/assets/philly-based-evaluation-traces/";

TEST(CarmaScript, CarmasTaskFilesBecomeTheirModels) {
  auto trace = ReadCarmaScript(kCarmaTraces + "philly_trace-t2.sh");
  ASSERT_TRUE(trace.ok()) << trace.status().ToString();
  ASSERT_EQ(trace->jobs.size(), 60u);
  EXPECT_TRUE(trace->notes.empty());
  auto find = [&](const std::string& name) -> const TraceJob* {
    for (const TraceJob& j : trace->jobs)
      if (j.name == name) return &j;
    return nullptr;
  };
  const TraceJob* maskrcnn = find("maskrcnn");
  ASSERT_NE(maskrcnn, nullptr);
  EXPECT_EQ(maskrcnn->profile.name, "maskrcnn-coco-bs8") << "-b 8 on its command line";
  EXPECT_EQ(maskrcnn->task_file->horus, MiBf(7902.3));
  const TraceJob* e50 = find("resnet18_cifar100_50e_1");
  const TraceJob* e20 = find("resnet18_cifar100_20e_1");
  ASSERT_TRUE(e50 && e20);
  EXPECT_EQ(e50->profile.name, "resnet18-cifar100-bs32-e50");
  EXPECT_EQ(e20->profile.name, "resnet18-cifar100-bs32-e20");
  EXPECT_NEAR(ToSeconds(e50->profile.duration) / ToSeconds(e20->profile.duration), 2.5, 1e-9);
  EXPECT_EQ(find("efficientNet_cifar100_50e_1")->profile.name, "efficientnet_b0-cifar100-bs32-e50");
  EXPECT_EQ(find("efficientNet2")->profile.name, "efficientnet_b0-imagenet-bs64");
  EXPECT_EQ(find("mobilenet")->profile.name, "mobilenet_v2-imagenet-bs32");
  EXPECT_EQ(find("mobilenet_cifar100_20e_3")->profile.name, "mobilenetv3_small-cifar100-bs128-e20");
  EXPECT_EQ(find("vgg3")->profile.name, "vgg16-imagenet-bs128");
  EXPECT_EQ(find("UNet")->profile.name, "unet-voc-bs32");
  EXPECT_EQ(find("dlrm")->profile.name, "dlrm-criteo-bs32768-e1");
  EXPECT_EQ(find("gpt2_large_2")->profile.gpus, 2);
  EXPECT_FALSE(find("dlrm")->task_file->gpumemnet.has_value()) << "40000: not known";
}

TEST(CarmaScript, MissingTaskFilesAreReplayedByNameWithANote) {
  auto trace = ReadCarmaScript(kCarmaTraces + "philly_scenario_old.sh");
  ASSERT_TRUE(trace.ok()) << trace.status().ToString();
  EXPECT_FALSE(trace->notes.empty());
  bool densenet = false;
  for (const TraceJob& j : trace->jobs) densenet |= j.profile.name == "densenet121-imagenet-bs128";
  EXPECT_TRUE(densenet);
}

// Every script CARMA publishes replays under CARMA's policy names, each job once.
TEST(CarmaScript, AllSixScriptsReplayUnderCarmasPolicies) {
  const char* scripts[] = {"philly_heavy-60-tasks.sh", "philly_mix-90-tasks.sh",
                           "philly_scenario_old.sh",   "philly_trace-t1.sh",
                           "philly_trace-t2.sh",       "test.sh"};
  const size_t jobs[] = {60, 90, 107, 60, 60, 5};
  SimOptions options;
  options.server = *FindServer("a100x4");
  options.record_timeline = false;
  for (size_t i = 0; i < 6; ++i) {
    auto trace = ReadCarmaScript(kCarmaTraces + scripts[i]);
    ASSERT_TRUE(trace.ok()) << scripts[i] << ": " << trace.status().ToString();
    ASSERT_EQ(trace->jobs.size(), jobs[i]) << scripts[i];
    for (const char* name : {"exclusive", "oracle-MAGM", "OR-LUG", "EST-MAGM-GPUMemNet",
                             "EST-LUG-Horus", "oracle-FF"}) {
      auto spec = ParseRunSpec(name, RunSpec{});
      ASSERT_TRUE(spec.ok()) << name;
      auto result = Simulate(*trace, *spec, options);
      ASSERT_TRUE(result.ok()) << scripts[i] << " " << name << ": " << result.status().ToString();
      EXPECT_EQ(result->metrics.succeeded, static_cast<int>(jobs[i])) << scripts[i] << " " << name;
      EXPECT_EQ(result->metrics.estimator, spec->estimator);
      if (std::string(name) == "exclusive") {
        EXPECT_EQ(result->metrics.oom_crashes, 0);
      }
    }
  }
  // The estimator lines need task files.
  auto spec = ParseRunSpec("EST-MAGM-Horus", RunSpec{});
  EXPECT_FALSE(Simulate(ThesisTrace(90), *spec, options).ok());
}

TEST(Philly, ReadsTheClusterJobLogShape) {
  const char* log = R"([
    {"status":"Pass","user":"u1","submitted_time":"2017-10-03 02:43:15",
     "attempts":[{"start_time":"2017-10-03 02:43:20","end_time":"2017-10-03 03:43:20",
                  "detail":[{"ip":"m1","gpus":["gpu0","gpu1"]}]}]},
    {"status":"Failed","user":"u2","submitted_time":"2017-10-03 02:44:00","attempts":[]},
    {"status":"Pass","user":"u3","submitted_time":"2017-10-03 02:45:15",
     "attempts":[{"start_time":"None","end_time":"None","detail":[]}]},
    {"status":"Pass","user":"u4","submitted_time":"2017-10-03 02:53:15",
     "attempts":[{"start_time":"2017-10-03 03:00:00","end_time":"2017-10-03 03:10:00",
                  "detail":[{"ip":"m2","gpus":["gpu3"]}]}]}
  ])";
  auto trace = ParsePhillyJson(log, "philly.json", PhillyOptions{});
  ASSERT_TRUE(trace.ok()) << trace.status().ToString();
  ASSERT_EQ(trace->jobs.size(), 2u);
  EXPECT_EQ(trace->jobs[0].profile.gpus, 2);
  EXPECT_EQ(trace->jobs[0].profile.duration, Seconds(3600));
  EXPECT_EQ(trace->jobs[1].submit, Seconds(600));
  EXPECT_EQ(trace->jobs[1].owner, "u4");
  EXPECT_FALSE(ParsePhillyJson("{not json", "x.json", {}).ok());
  EXPECT_FALSE(ParsePhillyJson("{}", "x.json", {}).ok());
}

TEST(Synthetic, HasPhillysStatistics) {
  SyntheticOptions options;
  options.jobs = 40000;
  options.seed = 3;
  const Trace trace = SyntheticPhilly(options);
  ASSERT_EQ(trace.jobs.size(), options.jobs);
  std::vector<double> gaps, durations;
  int single = 0;
  for (size_t i = 0; i < trace.jobs.size(); ++i) {
    if (i > 0) gaps.push_back(ToSeconds(trace.jobs[i].submit - trace.jobs[i - 1].submit));
    durations.push_back(ToSeconds(trace.jobs[i].profile.duration));
    single += trace.jobs[i].profile.gpus == 1;
  }
  double mean = 0, sq = 0;
  for (double g : gaps) mean += g;
  mean /= static_cast<double>(gaps.size());
  for (double g : gaps) sq += (g - mean) * (g - mean);
  const double cv = std::sqrt(sq / static_cast<double>(gaps.size())) / mean;
  EXPECT_NEAR(mean, 3600.0 / 42, 5.0);
  EXPECT_NEAR(cv, 2.2, 0.15);
  std::sort(durations.begin(), durations.end());
  EXPECT_NEAR(durations[durations.size() / 2] / 60, 19.0, 1.5);
  EXPECT_NEAR(static_cast<double>(single) / static_cast<double>(trace.jobs.size()), 0.93, 0.01);
  // Same seed, same trace.
  const Trace again = SyntheticPhilly(options);
  EXPECT_EQ(again.jobs[1234].submit, trace.jobs[1234].submit);
  EXPECT_EQ(again.jobs[1234].profile.name, trace.jobs[1234].profile.name);
}

TEST(Synthetic, JobsOfOneModelAndOwnerShareOneCopyOfEachName) {
  SyntheticOptions options;
  options.jobs = 2000;
  options.users = 4;
  const Trace trace = SyntheticPhilly(options);
  std::set<const std::string*> names, owners;
  for (const TraceJob& job : trace.jobs) {
    names.insert(&job.name.str());
    owners.insert(&job.owner.str());
    EXPECT_EQ(&job.name.str(), &job.profile.name.str());
  }
  EXPECT_EQ(owners.size(), 4u);
  EXPECT_LE(names.size(), ThesisCatalogue().size()) << "one text per model, not per job";
  EXPECT_EQ(&Interned(trace.jobs[0].owner.str()).str(), &trace.jobs[0].owner.str());
  EXPECT_EQ(&Interned().str(), &Interned("").str()) << "one empty text";
}

TEST(ThesisTraces, HaveTheThesisMixAndArrivals) {
  const Trace t90 = ThesisTrace(90);
  ASSERT_EQ(t90.jobs.size(), 90u);
  int light = 0, medium = 0, heavy = 0;
  for (const auto& j : t90.jobs) {
    light += j.profile.cls == WorkloadClass::kLight;
    medium += j.profile.cls == WorkloadClass::kMedium;
    heavy += j.profile.cls == WorkloadClass::kHeavy;
  }
  EXPECT_EQ(light, 59);
  EXPECT_EQ(medium, 24);
  EXPECT_EQ(heavy, 7);
  EXPECT_EQ(t90.jobs[1].submit, Seconds(73));
  EXPECT_EQ(t90.jobs[2].submit, Seconds(73 + 441));
  const Trace t60 = ThesisTrace(60);
  ASSERT_EQ(t60.jobs.size(), 60u);
  for (const auto& j : t60.jobs) EXPECT_NE(j.profile.cls, WorkloadClass::kLight);
}

}  // namespace
}  // namespace colo
