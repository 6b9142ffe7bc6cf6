#include "estimate/caching_allocator.h"

#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

namespace colo {
namespace {

constexpr int64_t kMiB = int64_t{1} << 20;

TEST(CachingAllocatorModel, RoundsRequestsAndSizesSegmentsLikePyTorch) {
  EXPECT_EQ(CachingAllocatorModel::RoundSize(1), 512);
  EXPECT_EQ(CachingAllocatorModel::RoundSize(512), 512);
  EXPECT_EQ(CachingAllocatorModel::RoundSize(513), 1024);
  EXPECT_EQ(CachingAllocatorModel::SegmentSize(1 * kMiB), 2 * kMiB);         // small pool
  EXPECT_EQ(CachingAllocatorModel::SegmentSize(1 * kMiB + 512), 20 * kMiB);  // 1-10 MiB
  EXPECT_EQ(CachingAllocatorModel::SegmentSize(10 * kMiB - 512), 20 * kMiB);
  EXPECT_EQ(CachingAllocatorModel::SegmentSize(10 * kMiB), 10 * kMiB);  // rounded to 2 MiB
  EXPECT_EQ(CachingAllocatorModel::SegmentSize(11 * kMiB), 12 * kMiB);
}

TEST(CachingAllocatorModel, SmallRequestsShareOneTwoMiBSegment) {
  CachingAllocatorModel m;
  for (int i = 0; i < 4; ++i) m.Allocate(100 * 1024);
  EXPECT_EQ(m.reserved(), 2 * kMiB);
  EXPECT_EQ(m.stats().segments, 1);
  EXPECT_EQ(m.stats().peak_allocated, 4 * 100 * 1024);
}

TEST(CachingAllocatorModel, MidSizedRequestsSplitATwentyMiBSegment) {
  CachingAllocatorModel m;
  m.Allocate(3 * kMiB);
  m.Allocate(3 * kMiB);
  EXPECT_EQ(m.reserved(), 20 * kMiB);  // the second comes from the first segment's remainder
}

TEST(CachingAllocatorModel, FreedBlocksAreReusedBestFitAndNeverReturned) {
  CachingAllocatorModel m;
  const int64_t a = m.Allocate(40 * kMiB);
  const int64_t b = m.Allocate(12 * kMiB);
  m.Free(a);
  m.Free(b);
  EXPECT_EQ(m.reserved(), 52 * kMiB);
  // 12 MiB fits both free segments: the smaller (best fit) is taken, so 40 MiB stays whole.
  m.Allocate(12 * kMiB);
  m.Allocate(40 * kMiB);
  EXPECT_EQ(m.reserved(), 52 * kMiB);
}

TEST(CachingAllocatorModel, LargeRemaindersOfOneMiBOrLessAreNotSplit) {
  CachingAllocatorModel m;
  const int64_t a = m.Allocate(12 * kMiB);
  m.Free(a);
  // 11.5 MiB leaves 0.5 MiB: not split, so the whole 12 MiB block is used.
  m.Allocate(11 * kMiB + kMiB / 2);
  EXPECT_EQ(m.stats().peak_allocated, 12 * kMiB);
  // Another request needs a new segment.
  m.Allocate(kMiB / 4 + 2 * kMiB);
  EXPECT_EQ(m.reserved(), 12 * kMiB + 20 * kMiB);
}

TEST(CachingAllocatorModel, FreeNeighboursMergeWithinASegmentOnly) {
  CachingAllocatorModel m;
  const int64_t a = m.Allocate(4 * kMiB);
  const int64_t b = m.Allocate(4 * kMiB);
  const int64_t c = m.Allocate(4 * kMiB);
  EXPECT_EQ(m.reserved(), 20 * kMiB);
  m.Free(a);
  m.Free(c);
  m.Free(b);  // merges a, b, c and the tail back into one 20 MiB block
  m.Allocate(18 * kMiB);
  EXPECT_EQ(m.reserved(), 20 * kMiB);
  // Two separate segments never merge: 30 MiB needs a third.
  const int64_t d = m.Allocate(22 * kMiB);
  m.Free(d);
  m.Allocate(30 * kMiB);
  EXPECT_EQ(m.reserved(), 20 * kMiB + 22 * kMiB + 30 * kMiB);
}

TEST(CachingAllocatorModel, StreamsDoNotShareBlocks) {
  CachingAllocatorModel m;
  const int64_t a = m.Allocate(40 * kMiB, 0);
  m.Free(a);
  m.Allocate(40 * kMiB, 1);
  EXPECT_EQ(m.reserved(), 80 * kMiB);
}

TEST(CachingAllocatorModel, ExpandableSegmentsGrowInPages) {
  CachingAllocatorModel m(/*expandable_segments=*/true);
  const int64_t a = m.Allocate(30 * kMiB);
  EXPECT_EQ(m.reserved(), 40 * kMiB);  // two 20 MiB pages
  m.Free(a);
  // The freed block is the segment's end: growing it by one page is enough.
  m.Allocate(50 * kMiB);
  EXPECT_EQ(m.reserved(), 60 * kMiB);
}

TEST(AllocationTrace, ParsesEventsMarkersAndWorkspaces) {
  auto t = ParseAllocationTrace(
      "colo-alloc-trace 1\n# batch 2\na 1000\nm steps\na 2000 7\nw conv 10 30\nf 0\nf 1\n", "t");
  ASSERT_TRUE(t.ok()) << t.status().message();
  EXPECT_EQ(t->allocations, 2);
  EXPECT_EQ(t->steps_begin, 1u);
  ASSERT_EQ(t->events.size(), 5u);
  EXPECT_EQ(t->events[1].stream, 1);  // streams are numbered in order of appearance
  EXPECT_EQ(t->events[2].kind, AllocationTrace::Event::kWorkspace);
  EXPECT_EQ(t->events[2].value, 30);
}

TEST(AllocationTrace, RejectsMalformedInputWithTheLine) {
  auto header = ParseAllocationTrace("hello\n", "x.trace");
  ASSERT_FALSE(header.ok());
  EXPECT_NE(header.status().message().find("not an allocation trace"), std::string::npos);
  auto unknown = ParseAllocationTrace("colo-alloc-trace 1\na 10\nf 3\n", "x.trace");
  ASSERT_FALSE(unknown.ok());
  EXPECT_NE(unknown.status().message().find("x.trace:3"), std::string::npos);
  EXPECT_FALSE(ParseAllocationTrace("colo-alloc-trace 1\na 10\nf 0\nf 0\n", "x").ok());
  EXPECT_FALSE(ParseAllocationTrace("colo-alloc-trace 1\na -5\n", "x").ok());
  EXPECT_FALSE(ParseAllocationTrace("colo-alloc-trace 1\nz 1\n", "x").ok());
  EXPECT_FALSE(ParseAllocationTrace("", "x").ok());
}

std::string Read(const std::string& name) {
  std::ifstream in(std::string(COLO_TEST_DATA) + "/estimate/" + name);
  std::stringstream b;
  b << in.rdbuf();
  return b.str();
}

// torch.cuda.memory's own history of a real ResNet-50 run (batch 32, Adam, 8 steps, H200) after
// the parameters colo-profile recorded: the model must reserve exactly what torch reported.
TEST(CachingAllocatorModel, ReproducesTorchsPeakOnARealAllocationHistory) {
  auto params = ParseAllocationTrace(Read("tv-resnet50-b32-adam.b32.trace"), "params");
  auto real = ParseAllocationTrace(Read("tv-resnet50-b32-adam.real.trace"), "real");
  ASSERT_TRUE(params.ok() && real.ok());
  AllocationTrace joined;
  for (size_t i = 0; i < params->steps_begin; ++i) joined.events.push_back(params->events[i]);
  const int64_t shift = static_cast<int64_t>(joined.events.size());
  for (auto e : real->events) {
    if (e.kind == AllocationTrace::Event::kFree) e.value += shift;
    joined.events.push_back(e);
  }
  joined.allocations = shift + real->allocations;
  joined.steps_begin = static_cast<size_t>(shift);
  auto stats = Replay(joined, {});
  ASSERT_TRUE(stats.ok());
  EXPECT_EQ(stats->peak_reserved, 3720347648);  // torch.cuda.max_memory_reserved() of that run
}

}  // namespace
}  // namespace colo
