#include "estimate/caching_allocator.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <tuple>

#include "common/rng.h"

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

TEST(CachingAllocatorModel, BestFitIsTheSmallestFittingBlockThenTheLowestAddress) {
  CachingAllocatorModel m;
  // Free blocks of 12, 14 and 16 MiB, each a segment of its own.
  const int64_t a = m.Allocate(12 * kMiB);
  const int64_t b = m.Allocate(14 * kMiB);
  const int64_t c = m.Allocate(16 * kMiB);
  m.Free(a);
  m.Free(b);
  m.Free(c);
  // 13.5 MiB: the 14 rather than the 16 (its 0.5 MiB rest is not split off); then 15.5 MiB fits
  // only the 16, and 12 MiB the 12: no new segment.
  m.Allocate(13 * kMiB + kMiB / 2);
  m.Allocate(15 * kMiB + kMiB / 2);
  m.Allocate(12 * kMiB);
  EXPECT_EQ(m.reserved(), 42 * kMiB);
  EXPECT_EQ(m.stats().segments, 3);

  // Equal sizes: the lowest address. A 20 MiB segment cut into five 4 MiB blocks, the first and
  // the third free; the first must be taken, so that freeing the second and the fourth leaves
  // 12 MiB in one piece.
  CachingAllocatorModel n;
  std::vector<int64_t> blocks;
  for (int i = 0; i < 5; ++i) blocks.push_back(n.Allocate(4 * kMiB));
  EXPECT_EQ(n.reserved(), 20 * kMiB);
  n.Free(blocks[0]);
  n.Free(blocks[2]);
  n.Allocate(4 * kMiB);
  n.Free(blocks[1]);
  n.Free(blocks[3]);
  n.Allocate(12 * kMiB);
  EXPECT_EQ(n.reserved(), 20 * kMiB);
}

// The allocator's rules written as plainly as possible (an ordered set of free blocks, blocks by
// address), to check the model's faster free lists against on random sequences.
class ReferenceAllocator {
 public:
  int64_t Allocate(int64_t bytes, int stream) {
    const int64_t size = CachingAllocatorModel::RoundSize(bytes);
    const bool small = size <= kMiB;
    auto it = free_.lower_bound({stream, small, size, 0});
    int64_t address;
    if (it != free_.end() && std::get<0>(*it) == stream && std::get<1>(*it) == small) {
      address = std::get<3>(*it);
      free_.erase(it);
    } else {
      address = next_;
      const int64_t segment = CachingAllocatorModel::SegmentSize(size);
      next_ += segment + 2 * kMiB;
      blocks_[address] = {segment, address, stream, small, false};
      reserved_ += segment;
      peak_reserved_ = std::max(peak_reserved_, reserved_);
      ++segments_;
    }
    Block& b = blocks_[address];
    const int64_t rest = b.size - size;
    if (small ? rest >= 512 : rest > kMiB) {
      blocks_[address + size] = {rest, b.segment, stream, small, false};
      free_.insert({stream, small, rest, address + size});
      b.size = size;
    }
    b.allocated = true;
    allocated_ += b.size;  // the whole block when its rest was too small to split off
    peak_allocated_ = std::max(peak_allocated_, allocated_);
    return address;
  }
  void Free(int64_t address) {
    auto it = blocks_.find(address);
    it->second.allocated = false;
    allocated_ -= it->second.size;
    if (auto next = std::next(it); next != blocks_.end() && Mergeable(it, next)) Merge(it, next);
    if (it != blocks_.begin()) {
      if (auto prev = std::prev(it); Mergeable(prev, it)) it = Merge(prev, it);
    }
    const Block& b = it->second;
    free_.insert({b.stream, b.small, b.size, it->first});
  }
  int64_t reserved() const { return reserved_; }
  int64_t peak_reserved() const { return peak_reserved_; }
  int64_t peak_allocated() const { return peak_allocated_; }
  int64_t segments() const { return segments_; }

 private:
  struct Block {
    int64_t size, segment;
    int stream;
    bool small, allocated;
  };
  using Blocks = std::map<int64_t, Block>;
  bool Mergeable(Blocks::iterator low, Blocks::iterator high) const {
    return low->second.segment == high->second.segment && !low->second.allocated &&
           !high->second.allocated;
  }
  // Joins `high` into `low`; `low` must not be in the free set, `high` is taken out of it.
  Blocks::iterator Merge(Blocks::iterator low, Blocks::iterator high) {
    const Block& h = high->second;
    if (!free_.erase({h.stream, h.small, h.size, high->first})) {
      // `low` is the one in the free set (freeing merges towards the lower address).
      const Block& l = low->second;
      free_.erase({l.stream, l.small, l.size, low->first});
    }
    low->second.size += h.size;
    blocks_.erase(high);
    return low;
  }
  std::set<std::tuple<int, bool, int64_t, int64_t>> free_;  // stream, pool, size, address
  Blocks blocks_;
  int64_t next_ = 0, reserved_ = 0, peak_reserved_ = 0, allocated_ = 0, peak_allocated_ = 0;
  int64_t segments_ = 0;
};

TEST(CachingAllocatorModel, AgreesWithAPlainModelOfTheSameRulesOnRandomSequences) {
  for (uint64_t seed = 1; seed <= 200; ++seed) {
    Rng rng(seed);
    CachingAllocatorModel model;
    ReferenceAllocator reference;
    std::vector<std::pair<int64_t, int64_t>> live;  // model handle, reference address
    // A few sizes recur, as a training step's tensors do, so that equal sizes tie.
    std::vector<int64_t> recurring;
    for (int i = 0; i < 8; ++i) recurring.push_back(1 + static_cast<int64_t>(rng.Below(64 * kMiB)));
    for (int op = 0; op < 2000; ++op) {
      if (!live.empty() && rng.Uniform() < 0.45) {
        const size_t i = rng.Below(live.size());
        model.Free(live[i].first);
        reference.Free(live[i].second);
        live[i] = live.back();
        live.pop_back();
        continue;
      }
      int64_t bytes;
      const double kind = rng.Uniform();
      if (kind < 0.3) {
        bytes = recurring[rng.Below(recurring.size())];
      } else if (kind < 0.6) {
        bytes = 1 + static_cast<int64_t>(rng.Below(kMiB));  // small pool
      } else if (kind < 0.85) {
        bytes = kMiB + static_cast<int64_t>(rng.Below(9 * kMiB));  // 20 MiB segments
      } else {
        bytes = 10 * kMiB + static_cast<int64_t>(rng.Below(200 * kMiB));
      }
      const int stream = rng.Uniform() < 0.1 ? 1 : 0;
      live.emplace_back(model.Allocate(bytes, stream), reference.Allocate(bytes, stream));
      ASSERT_EQ(model.reserved(), reference.reserved()) << "seed " << seed << ", operation " << op;
    }
    EXPECT_EQ(model.stats().peak_reserved, reference.peak_reserved()) << "seed " << seed;
    EXPECT_EQ(model.stats().peak_allocated, reference.peak_allocated()) << "seed " << seed;
    EXPECT_EQ(model.stats().segments, reference.segments()) << "seed " << seed;
  }
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
  ASSERT_EQ(t->convs.size(), 1u);
  EXPECT_EQ(t->events[2].value, 0);    // the call's index
  EXPECT_FALSE(t->convs[0].geometry);  // an older profile: the two largest tensors only
  EXPECT_EQ(t->convs[0].largest(), 30);
  EXPECT_EQ(t->convs[0].shape(), ConvCall::Shape::kGeneral);
}

TEST(AllocationTrace, ConvolutionGeometryClassifiesTheShape) {
  auto t = ParseAllocationTrace(
      "colo-alloc-trace 1\n"
      "w conv 100 200 9 3 3 64 1\n"      // 3x3, 64 channels
      "w conv_bwd 100 200 9 1 1 64 1\n"  // pointwise, backward
      "w conv 100 200 9 7 7 3 1\n"       // an image's stem
      "w conv 100 200 9 3 3 96 96\n"     // depthwise
      "w conv 100 200 9 3 3 128 32\n",   // grouped
      "t");
  ASSERT_TRUE(t.ok()) << t.status().message();
  ASSERT_EQ(t->convs.size(), 5u);
  EXPECT_EQ(t->convs[0].shape(), ConvCall::Shape::kGeneral);
  EXPECT_FALSE(t->convs[0].backward);
  EXPECT_EQ(t->convs[0].operand_bytes(), 309);
  EXPECT_EQ(t->convs[1].shape(), ConvCall::Shape::kPointwise);
  EXPECT_TRUE(t->convs[1].backward);
  EXPECT_EQ(t->convs[2].shape(), ConvCall::Shape::kStem);
  EXPECT_EQ(t->convs[3].shape(), ConvCall::Shape::kDepthwise);
  EXPECT_EQ(t->convs[4].shape(), ConvCall::Shape::kGrouped);
  EXPECT_FALSE(ParseAllocationTrace("colo-alloc-trace 1\nw conv 1 2 3 0 3 64 1\n", "x").ok());
  EXPECT_FALSE(ParseAllocationTrace("colo-alloc-trace 1\nw conv 1 2 3 3 3 64\n", "x").ok());
}

TEST(Replay, ConvolutionWorkspacesAreAllocatedInsideTheCall) {
  // 40 MiB live, then a convolution whose workspace (60 MiB) exists only during the call.
  const int64_t mib = 1 << 20;
  auto t = ParseAllocationTrace(fmt::format("colo-alloc-trace 1\na {}\nw conv {} {} 0 3 3 64 1\n"
                                            "f 0\na {}\n",
                                            40 * mib, 20 * mib, 10 * mib, 30 * mib),
                                "t");
  ASSERT_TRUE(t.ok()) << t.status().message();
  auto none = Replay(*t, {});
  ASSERT_TRUE(none.ok());
  EXPECT_EQ(none->peak_reserved, 40 * mib);
  ReplayOptions options;
  options.workspaces = {{2 * t->convs[0].operand_bytes()}};
  auto with = Replay(*t, options);
  ASSERT_TRUE(with.ok());
  // A second segment for the workspace; the later 30 MiB reuses the freed 40 MiB one.
  EXPECT_EQ(with->peak_reserved, 100 * mib);
  EXPECT_EQ(with->largest_workspace_tensor, 20 * mib);
  // A backward's two workspaces one after the other: the second, 2 MiB larger than the first,
  // does not fit in the first's freed segment and takes one of its own, as cuDNN's do.
  options.workspaces = {{60 * mib, 62 * mib}};
  auto two = Replay(*t, options);
  ASSERT_TRUE(two.ok());
  EXPECT_EQ(two->peak_reserved, 162 * mib) << "40 live + 60 freed + 62";
  options.workspaces = {{62 * mib, 60 * mib}};
  EXPECT_EQ(Replay(*t, options)->peak_reserved, 102 * mib) << "the smaller one reuses the larger";
}

TEST(AllocationTrace, RecordsWhereEachStepBegins) {
  auto t = ParseAllocationTrace(
      "colo-alloc-trace 1\na 1\nm steps\na 2\nm step1\nf 1\nm stepping\nm step\nm step2x\n"
      "a 3\nm step2\n",
      "t");
  ASSERT_TRUE(t.ok()) << t.status().message();
  EXPECT_EQ(t->steps_begin, 1u);
  EXPECT_EQ(t->step_begins, (std::vector<size_t>{1, 2, 4})) << "other labels are no steps";
}

TEST(CachingAllocatorModel, ACopyGoesOnFromTheSameStateIndependently) {
  CachingAllocatorModel original;
  const int a = original.Allocate(30 * kMiB);
  const int b = original.Allocate(3 * kMiB);
  original.Free(a);
  EXPECT_TRUE(original.Fits(30 * kMiB)) << "the freed 30 MiB block is cached";
  EXPECT_FALSE(original.Fits(31 * kMiB));
  EXPECT_TRUE(original.Fits(4 * kMiB)) << "the rest of the 20 MiB segment";
  EXPECT_FALSE(original.Fits(4 * kMiB, 1)) << "not on another stream";
  CachingAllocatorModel copy(original);
  copy.Free(b);  // the original's handle is the copy's too
  copy.Allocate(40 * kMiB);
  EXPECT_EQ(copy.reserved(), 90 * kMiB);
  EXPECT_EQ(original.reserved(), 50 * kMiB);
  EXPECT_EQ(original.stats().peak_reserved, 50 * kMiB);
  original.Allocate(30 * kMiB);
  EXPECT_EQ(original.reserved(), 50 * kMiB) << "reuses its own cached block";
  EXPECT_EQ(copy.stats().segments, 3);
  EXPECT_EQ(original.stats().segments, 2);
}

TEST(CachingAllocatorModel, EachPoolKeepsItsReservationAndLayoutToItself) {
  CachingAllocatorModel a, b;
  for (CachingAllocatorModel* m : {&a, &b}) m->Free(m->Allocate(30 * kMiB));
  a.Allocate(1000);         // a small block: a 2 MiB segment of the small pool
  a.Allocate(4 * kMiB, 1);  // another stream's pool: a 20 MiB segment
  EXPECT_EQ(a.PoolReserved(30 * kMiB), 30 * kMiB);
  EXPECT_EQ(a.PoolReserved(1000), 2 * kMiB);
  EXPECT_EQ(a.PoolReserved(4 * kMiB, 1), 20 * kMiB);
  EXPECT_EQ(a.PoolReserved(4 * kMiB, 2), 0) << "a stream that asked for nothing";
  EXPECT_EQ(a.reserved(), 52 * kMiB);
  EXPECT_TRUE(a.SameLayout(b, 30 * kMiB)) << "the large pool of stream 0 is alike in both";
  EXPECT_FALSE(a.SameLayout(b, 1000));
  EXPECT_FALSE(a.SameLayout(b, 4 * kMiB, 1));
  b.Allocate(10 * kMiB);  // splits b's cached 30 MiB block
  EXPECT_FALSE(a.SameLayout(b, 30 * kMiB));
}

TEST(Replay, RefusesATraceBeyondAnyGpu) {
  // Each size is within the format's 18 digits; together they are beyond 2^60 bytes.
  auto t =
      ParseAllocationTrace("colo-alloc-trace 1\na 900000000000000000\na 900000000000000000\n", "t");
  ASSERT_TRUE(t.ok());
  auto stats = Replay(*t, {});
  ASSERT_FALSE(stats.ok());
  EXPECT_NE(stats.status().message().find("no GPU holds that"), std::string::npos);
}

// A large block freed in one step and needed again in the next, with exactly as many 24 MiB
// blocks cached as the next step asks for: one more live 24 MiB block (scratch the trace does
// not show) makes a 24 MiB request split the cached 100 MiB block, and the 100 MiB request then
// takes a segment of its own.
TEST(FragmentationProbe, FindsAPeakThatHingesOnOneBlock) {
  const int64_t mib = 1 << 20;
  const std::string step0 =
      fmt::format("a {0}\na {1}\na {1}\nf 1\nf 2\nf 0\n", 100 * mib, 24 * mib);
  const std::string step1 = fmt::format("a {1}\na {1}\na {0}\n", 100 * mib, 24 * mib);
  auto fragile = ParseAllocationTrace("colo-alloc-trace 1\nm steps\n" + step0 + "m step1\n" + step1,
                                      "fragile");
  ASSERT_TRUE(fragile.ok()) << fragile.status().message();
  auto probed = ReplayWithFragmentationProbe(*fragile, {});
  ASSERT_TRUE(probed.ok()) << probed.status().message();
  EXPECT_EQ(probed->stats.peak_reserved, 148 * mib);
  EXPECT_EQ(probed->stats.peak_reserved, Replay(*fragile, {})->peak_reserved);
  // One held 24 MiB block at step 1: 24 + 24 + 100 cached, then 100 more; 248 - 24 - 148.
  EXPECT_EQ(probed->fragmentation_risk, 76 * mib);
  // One to three blocks at each of two steps; at the first nothing is cached yet, and blocks that
  // fill segments of their own change nothing.
  EXPECT_EQ(probed->probes, 3);

  // Without the large block nothing hinges on a held one.
  auto sturdy = ParseAllocationTrace(
      fmt::format("colo-alloc-trace 1\nm steps\na {0}\nf 0\nm step1\na {0}\n", 24 * mib), "sturdy");
  ASSERT_TRUE(sturdy.ok());
  EXPECT_EQ(ReplayWithFragmentationProbe(*sturdy, {})->fragmentation_risk, 0);
  // Repeated markers, and markers before any event or after the last one, are one start each.
  auto repeated = ParseAllocationTrace("colo-alloc-trace 1\nm steps\nm step1\nm step2\n" + step0 +
                                           "m step3\nm step3\n" + step1 + "m step4\n",
                                       "repeated");
  ASSERT_TRUE(repeated.ok());
  EXPECT_EQ(ReplayWithFragmentationProbe(*repeated, {})->fragmentation_risk, 76 * mib);
  // Blocks of 1-10 MiB take 20 MiB segments by themselves; that is no fragmentation.
  auto small_blocks = ParseAllocationTrace(
      fmt::format("colo-alloc-trace 1\nm steps\na {0}\nf 0\nm step1\na {0}\n", 6 * mib),
      "small blocks");
  ASSERT_TRUE(small_blocks.ok());
  EXPECT_EQ(ReplayWithFragmentationProbe(*small_blocks, {})->fragmentation_risk, 0);
  // Nothing of 1 MiB or more: no probe.
  auto small = ParseAllocationTrace("colo-alloc-trace 1\na 4096\nf 0\n", "small");
  ASSERT_TRUE(small.ok());
  EXPECT_EQ(ReplayWithFragmentationProbe(*small, {})->probes, 0);
}

TEST(FragmentationProbe, SkipsABlockThatFitsNoCachedBlockAndFillsItsSegment) {
  // At the first step nothing is cached: 24 MiB blocks (24 MiB segments) held there stand apart
  // and change nothing; at the second the freed 100 MiB block is cached, and they would split it.
  const int64_t mib = 1 << 20;
  auto t = ParseAllocationTrace(
      fmt::format("colo-alloc-trace 1\nm steps\na {0}\na {1}\nf 0\nf 1\nm step1\na {1}\na {0}\n",
                  100 * mib, 24 * mib),
      "t");
  ASSERT_TRUE(t.ok());
  auto probed = ReplayWithFragmentationProbe(*t, {});
  ASSERT_TRUE(probed.ok());
  EXPECT_EQ(probed->probes, 3) << "only the second step's";
  // With expandable segments a new block can join the end of a segment: nothing is skipped.
  ReplayOptions expandable;
  expandable.expandable_segments = true;
  EXPECT_EQ(ReplayWithFragmentationProbe(*t, expandable)->probes, 6);
}

// The probe as plainly as it can be written: every probe replays the trace from its start, its
// blocks held from where its step begins to where the next begins.
int64_t PlainFragmentationRisk(const AllocationTrace& t, const std::vector<int64_t>& permanent) {
  // The most common block of 1 MiB or more, the larger on a tie, held where the first four
  // markers say steps begin.
  std::map<int64_t, int> counts;
  for (size_t i = t.steps_begin; i < t.events.size(); ++i) {
    const auto& e = t.events[i];
    if (e.kind == AllocationTrace::Event::kAlloc && e.value >= kMiB) ++counts[e.value];
  }
  int64_t bytes = 0;
  int most = 0;
  for (const auto& [size, count] : counts) {
    if (count >= most) bytes = size, most = count;
  }
  const std::vector<size_t> starts(t.step_begins.begin(), t.step_begins.begin() + 4);
  auto peak = [&](size_t held_at, int count, size_t end) {
    CachingAllocatorModel m;
    std::vector<int> handles;
    bool made = false;
    for (size_t i = 0; i <= end; ++i) {
      if (!made && i >= t.steps_begin) {
        for (int64_t p : permanent) m.Allocate(p);
        made = true;
      }
      if (i == held_at) {
        for (int k = 0; k < count; ++k) m.Allocate(bytes);
      }
      if (i == end) break;
      const auto& e = t.events[i];
      if (e.kind == AllocationTrace::Event::kAlloc)
        handles.push_back(m.Allocate(e.value, e.stream));
      if (e.kind == AllocationTrace::Event::kFree) m.Free(handles[e.value]);
    }
    return m.stats().peak_reserved;
  };
  const int64_t base = peak(SIZE_MAX, 0, t.events.size());
  int64_t risk = 0;
  for (int count = 1; count <= 3; ++count) {
    CachingAllocatorModel alone;
    for (int k = 0; k < count; ++k) alone.Allocate(bytes);
    for (size_t k = 0; k < 3 && k < starts.size(); ++k) {
      const size_t end = k + 1 < starts.size() ? starts[k + 1] : t.events.size();
      risk = std::max(risk, peak(starts[k], count, end) - alone.reserved() - base);
    }
  }
  return risk;
}

// The probe's replay of the whole trace is the plain replay's, every figure of it.
void ExpectSameStats(const AllocatorStats& probed, const AllocatorStats& plain, uint64_t seed) {
  EXPECT_EQ(probed.peak_reserved, plain.peak_reserved) << "seed " << seed;
  EXPECT_EQ(probed.peak_allocated, plain.peak_allocated) << "seed " << seed;
  EXPECT_EQ(probed.peak_requested, plain.peak_requested) << "seed " << seed;
  EXPECT_EQ(probed.segments, plain.segments) << "seed " << seed;
  EXPECT_EQ(probed.largest_workspace_tensor, plain.largest_workspace_tensor) << "seed " << seed;
}

TEST(FragmentationProbe, AgreesWithReplayingEveryProbeFromTheStartOnRandomTraces) {
  int risky = 0, skipped = 0;
  for (uint64_t seed = 1; seed <= 300; ++seed) {
    Rng rng(seed);
    // A few recurring sizes (activations), one large block per step (logits), some small ones.
    std::vector<int64_t> sizes;
    for (int i = 0; i < 4; ++i) sizes.push_back((4 + static_cast<int64_t>(rng.Below(60))) * kMiB);
    const int64_t large = (100 + static_cast<int64_t>(rng.Below(400))) * kMiB;
    std::string text = "colo-alloc-trace 1\n";
    int allocations = 0;
    for (int i = 0; i < 3; ++i) text += fmt::format("a {}\n", sizes[i] / 2), ++allocations;
    text += "m steps\n";
    for (int step = 0; step < 4; ++step) {
      if (step > 0) text += fmt::format("m step{}\n", step);
      std::vector<int> live;
      const int n = 6 + static_cast<int>(rng.Below(10));
      for (int i = 0; i < n; ++i) {
        if (!live.empty() && rng.Uniform() < 0.35) {
          const size_t j = rng.Below(live.size());
          text += fmt::format("f {}\n", live[j]);
          live[j] = live.back();
          live.pop_back();
        }
        const int64_t bytes = i == n / 2            ? large
                              : rng.Uniform() < 0.2 ? 1 + static_cast<int64_t>(rng.Below(kMiB))
                                                    : sizes[rng.Below(sizes.size())];
        text += fmt::format("a {}\n", bytes);
        live.push_back(allocations++);
      }
      for (int j : live) text += fmt::format("f {}\n", j);
    }
    auto t = ParseAllocationTrace(text, "random");
    ASSERT_TRUE(t.ok()) << t.status().message();
    ReplayOptions options;
    options.permanent = {4 * kMiB, 4 * kMiB};
    auto probed = ReplayWithFragmentationProbe(*t, options);
    ASSERT_TRUE(probed.ok()) << probed.status().message();
    EXPECT_EQ(probed->fragmentation_risk, PlainFragmentationRisk(*t, options.permanent))
        << "seed " << seed;
    ExpectSameStats(probed->stats, *Replay(*t, options), seed);
    risky += probed->fragmentation_risk > 0;
    skipped += probed->probes < 9;
  }
  EXPECT_GT(risky, 10) << "traces whose peak a held block raises";
  EXPECT_GT(skipped, 10) << "traces where a probe could not matter";
}

// A training loop's steady state: after a first step of its own, every step allocates and frees
// the same, and begins where the one before began. A step whose next repeats it takes the next
// one's probes instead of replaying its own, to the same answer.
TEST(FragmentationProbe, AgreesOnRandomTracesWhoseStepsRepeat) {
  int repeated = 0, risky = 0;
  for (uint64_t seed = 1; seed <= 200; ++seed) {
    Rng rng(seed);
    std::vector<int64_t> sizes;
    for (int i = 0; i < 4; ++i) sizes.push_back((4 + static_cast<int64_t>(rng.Below(60))) * kMiB);
    const int64_t large = (100 + static_cast<int64_t>(rng.Below(400))) * kMiB;
    // One step's requests: sizes, and which allocation of the step (or the step's gradient kept
    // from the step before, -1) each free takes.
    struct Request {
      int64_t bytes;
      int free;
    };
    std::vector<Request> step;
    std::vector<int> live;
    const int n = 6 + static_cast<int>(rng.Below(10));
    int made = 0;
    bool gradient_freed = false;
    for (int i = 0; i < n; ++i) {
      if (!gradient_freed && rng.Uniform() < 0.2) {
        step.push_back({0, -1});
        gradient_freed = true;
      }
      if (!live.empty() && rng.Uniform() < 0.35) {
        const size_t j = rng.Below(live.size());
        step.push_back({0, live[j]});
        live[j] = live.back();
        live.pop_back();
      }
      const int64_t bytes = i == n / 2            ? large
                            : rng.Uniform() < 0.2 ? 1 + static_cast<int64_t>(rng.Below(kMiB))
                                                  : sizes[rng.Below(sizes.size())];
      step.push_back({bytes, 0});
      live.push_back(made++);
    }
    if (!gradient_freed) step.push_back({0, -1});
    // Everything but one allocation (the gradient the next step frees) is freed in the step.
    const int keep = live.back();
    for (int j : live) {
      if (j != keep) step.push_back({0, j});
    }
    std::string text = "colo-alloc-trace 1\n";
    int allocations = 0;
    text += fmt::format("a {}\n", sizes[0]), ++allocations;  // a parameter
    text += "m steps\n";
    int gradient = allocations;
    text += fmt::format("a {}\n", sizes[1]), ++allocations;  // the first step's own
    for (int s = 1; s <= 4; ++s) {
      text += fmt::format("m step{}\n", s);
      const int first = allocations;
      for (const Request& r : step) {
        if (r.bytes > 0) {
          text += fmt::format("a {}\n", r.bytes), ++allocations;
        } else {
          text += fmt::format("f {}\n", r.free < 0 ? gradient : first + r.free);
        }
      }
      gradient = first + keep;
    }
    auto t = ParseAllocationTrace(text, "repeating");
    ASSERT_TRUE(t.ok()) << t.status().message();
    ReplayOptions options;
    options.permanent = {4 * kMiB};
    auto probed = ReplayWithFragmentationProbe(*t, options);
    ASSERT_TRUE(probed.ok()) << probed.status().message();
    EXPECT_EQ(probed->fragmentation_risk, PlainFragmentationRisk(*t, options.permanent))
        << "seed " << seed;
    ExpectSameStats(probed->stats, *Replay(*t, options), seed);
    repeated += probed->probes < 9;
    risky += probed->fragmentation_risk > 0;
  }
  EXPECT_GT(repeated, 50) << "traces whose probes a repeated step spared";
  EXPECT_GT(risky, 5) << "traces whose peak a held block raises";
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
  EXPECT_FALSE(ParseAllocationTrace("colo-alloc-trace 1\na 1234567890123456789\n", "x").ok());
  EXPECT_FALSE(
      ParseAllocationTrace("colo-alloc-trace 1\na 99999999999999999999999999\n", "x").ok());
  EXPECT_TRUE(ParseAllocationTrace("colo-alloc-trace 1\na 999999999999999999\n", "x").ok());
  EXPECT_FALSE(ParseAllocationTrace("colo-alloc-trace 1\na 10 0 9\n", "x").ok());
  EXPECT_FALSE(ParseAllocationTrace("colo-alloc-trace 1\na 10x\n", "x").ok());
  EXPECT_FALSE(ParseAllocationTrace("colo-alloc-trace 1\na 10\nf\n", "x").ok());
  EXPECT_FALSE(ParseAllocationTrace("colo-alloc-trace 1\nw conv 10\n", "x").ok());
  EXPECT_FALSE(ParseAllocationTrace("colo-alloc-trace 1\nw 10 20\n", "x").ok());
  EXPECT_FALSE(ParseAllocationTrace("colo-alloc-trace 1\nab 10\n", "x").ok());
}

TEST(AllocationTrace, AcceptsWindowsLineEndsAndRepeatedSpaces) {
  auto t = ParseAllocationTrace("colo-alloc-trace 1\r\na  10   3\r\n\r\nf 0 \r\n", "t");
  ASSERT_TRUE(t.ok()) << t.status().message();
  ASSERT_EQ(t->events.size(), 2u);
  EXPECT_EQ(t->events[0].value, 10);
  EXPECT_EQ(t->events[0].stream, 1);
  EXPECT_EQ(t->events[1].kind, AllocationTrace::Event::kFree);
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
