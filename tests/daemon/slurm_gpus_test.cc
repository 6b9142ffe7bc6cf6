#include "daemon/slurm_gpus.h"

#include <gtest/gtest.h>

#include "daemon/config.h"

namespace colo {
namespace {

// What `slurmd -G` printed on the test cluster's node n2 (Slurm 22.05.8).
constexpr const char* kSlurmdGres =
    "slurmd: Gres Name=shard Type=(null) Count=78 Index=0 ID=1918986455 File=/dev/nvidia0 "
    "Cores=0-7 CoreCnt=8 (null)\n"
    "slurmd: Gres Name=gpu Type=(null) Count=1 Index=0 ID=7696487 File=/dev/nvidia0 Cores=0-7 "
    "CoreCnt=8 (null)\n"
    "slurmd: Gres Name=shard Type=(null) Count=38 Index=1 ID=1918986455 File=/dev/nvidia2 "
    "Cores=0-7 CoreCnt=8 (null)\n"
    "slurmd: Gres Name=gpu Type=(null) Count=1 Index=1 ID=7696487 File=/dev/nvidia2 Cores=0-7 "
    "CoreCnt=8 (null)\n"
    "slurmd: Gres Name=nic Type=(null) Count=1 Index=0 ID=1 File=/dev/infiniband/uverbs0\n";

std::vector<DeviceInfo> Devices(std::vector<std::pair<int, Bytes>> minors_and_sizes) {
  std::vector<DeviceInfo> out;
  for (const auto& [minor, size] : minors_and_sizes) {
    DeviceInfo d;
    d.index = static_cast<int>(out.size());
    d.minor = minor;
    d.uuid = "GPU-" + std::to_string(minor);
    d.memory_total = size;
    out.push_back(d);
  }
  return out;
}

TEST(SlurmGpusTest, ReadsSlurmdsGpusAndTheirShards) {
  const auto gres = ParseSlurmdGres(kSlurmdGres);
  ASSERT_EQ(gres.size(), 2u);
  EXPECT_EQ(gres.at(0).file, "/dev/nvidia0");
  EXPECT_EQ(gres.at(0).shards, 78);
  EXPECT_EQ(gres.at(1).file, "/dev/nvidia2");
  EXPECT_EQ(gres.at(1).shards, 38);
  EXPECT_TRUE(ParseSlurmdGres("garbage\nName=gpu Index=x\n").empty());
}

TEST(SlurmGpusTest, SlurmsIndexNamesTheGpuOfItsDeviceFilesMinorNumber) {
  EXPECT_EQ(NvidiaMinor("/dev/nvidia12"), 12);
  EXPECT_EQ(NvidiaMinor("/tmp/c/dev/n1/nvidia0"), 0);
  EXPECT_EQ(NvidiaMinor("/dev/nvidiactl"), -1);
  EXPECT_EQ(NvidiaMinor("/dev/nvidia"), -1);
  // colod's GPU 0 is /dev/nvidia2, its GPU 1 /dev/nvidia0: NVML and gres.conf order differ.
  const auto map = MapSlurmGpus(ParseSlurmdGres(kSlurmdGres), Devices({{2, GiB(40)}, {0, GiB(80)}}),
                                GiB(1), GiB(2));
  EXPECT_TRUE(map.problems.empty()) << map.problems.front();
  EXPECT_EQ(map.by_slurm_index.at(0), 1);
  EXPECT_EQ(map.by_slurm_index.at(1), 0);
}

TEST(SlurmGpusTest, ShardsBeyondAGpusMemoryAreAProblem) {
  // gres.conf books 78 shards of the 40 GiB GPU: Slurm would send it jobs that do not fit.
  const auto map = MapSlurmGpus(ParseSlurmdGres(kSlurmdGres), Devices({{0, GiB(40)}, {2, GiB(40)}}),
                                GiB(1), GiB(2));
  ASSERT_EQ(map.problems.size(), 1u);
  EXPECT_NE(map.problems[0].find("books 78 shards"), std::string::npos) << map.problems[0];
  EXPECT_EQ(map.overbooked, map.problems);
  const auto unknown =
      MapSlurmGpus(ParseSlurmdGres(kSlurmdGres), Devices({{0, GiB(80)}}), GiB(1), GiB(2));
  ASSERT_EQ(unknown.problems.size(), 1u);
  EXPECT_NE(unknown.problems[0].find("/dev/nvidia2"), std::string::npos);
  EXPECT_TRUE(unknown.overbooked.empty()) << "a GPU colod does not know is not overbooked";
  EXPECT_EQ(unknown.by_slurm_index.count(1), 0u);
}

TEST(SlurmGpusTest, WithoutSlurmdsListTheMinorNumbersGiveTheOrder) {
  const auto map = MapSlurmGpus({}, Devices({{3, GiB(80)}, {1, GiB(80)}}), GiB(1), GiB(2));
  EXPECT_EQ(map.by_slurm_index.at(0), 1);
  EXPECT_EQ(map.by_slurm_index.at(1), 0);
}

TEST(SlurmGpusTest, GresConfLinesBookEachGpuLessTheMargin) {
  DaemonConfig config;
  config.memory_margin = "2GiB";
  config.slurm_shard_size = GiB(1);
  auto lines = GresConfLines(Devices({{0, GiB(80)}, {1, GiB(40)}}), config, 16);
  ASSERT_TRUE(lines.ok()) << lines.status().message();
  EXPECT_NE(lines->find("Name=gpu File=/dev/nvidia0 Cores=0-15\n"), std::string::npos) << *lines;
  EXPECT_NE(lines->find("Name=shard Count=78 File=/dev/nvidia0\n"), std::string::npos);
  EXPECT_NE(lines->find("Name=shard Count=38 File=/dev/nvidia1\n"), std::string::npos);
  EXPECT_NE(lines->find("Gres=gpu:2,shard:116"), std::string::npos);
  EXPECT_EQ(ShardsOf(GiB(80), MiB(512), GiB(2)), 156);
  EXPECT_EQ(ShardsOf(GiB(1), GiB(1), GiB(2)), 0);
}

}  // namespace
}  // namespace colo
