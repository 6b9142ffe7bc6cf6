#include "estimate/caching_allocator.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <bit>
#include <map>

#include "common/strings.h"

namespace colo {

namespace {

constexpr int64_t kMinBlockSize = 512;
constexpr int64_t kSmallSize = int64_t{1} << 20;     // largest small-pool request
constexpr int64_t kSmallBuffer = int64_t{2} << 20;   // small-pool segment
constexpr int64_t kLargeBuffer = int64_t{20} << 20;  // segment for 1-10 MiB requests
constexpr int64_t kMinLargeAlloc = int64_t{10} << 20;
constexpr int64_t kRoundLarge = int64_t{2} << 20;

int64_t RoundUp(int64_t value, int64_t step) {
  return (value + step - 1) / step * step;
}

// A trace line's space-separated fields, without copying (traces have tens of thousands of
// lines, and parsing them is most of a first estimate's time). Returns the field count; more
// than `fields` holds is reported as fields.size() + 1.
size_t SplitFields(std::string_view line, std::array<std::string_view, 4>& fields) {
  size_t count = 0;
  while (!line.empty()) {
    const size_t end = std::min(line.find(' '), line.size());
    if (end > 0) {
      if (count == fields.size()) return count + 1;
      fields[count++] = line.substr(0, end);
    }
    line.remove_prefix(std::min(end + 1, line.size()));
  }
  return count;
}

}  // namespace

int64_t CachingAllocatorModel::RoundSize(int64_t bytes) {
  return bytes < kMinBlockSize ? kMinBlockSize : RoundUp(bytes, kMinBlockSize);
}

int64_t CachingAllocatorModel::SegmentSize(int64_t rounded) {
  if (rounded <= kSmallSize) return kSmallBuffer;
  if (rounded < kMinLargeAlloc) return kLargeBuffer;
  return RoundUp(rounded, kRoundLarge);
}

class CachingAllocatorModel::Impl {
 public:
  Impl(CachingAllocatorModel& owner, bool expandable) : owner_(owner), expandable_(expandable) {}

  int64_t Allocate(int64_t bytes, int stream) {
    const int64_t size = RoundSize(bytes);
    const bool small = size <= kSmallSize;
    auto& pool = small ? small_free_ : large_free_;
    int block = pool.TakeBestFit(stream, size);
    if (block < 0) block = Grow(small, stream, size);
    Block& b = blocks_[block];
    const int64_t remaining = b.size - size;
    if (small ? remaining >= kMinBlockSize : remaining > kSmallSize) {
      const int rest = NewBlock(b.address + size, remaining, b.stream, small);
      Block& head = blocks_[block];  // NewBlock may have moved the vector
      blocks_[rest].prev = block;
      blocks_[rest].next = head.next;
      if (head.next >= 0) blocks_[head.next].prev = rest;
      head.next = rest;
      head.size = size;
      pool.insert(Key(rest));
      MoveTail(block, rest);
    }
    Block& used = blocks_[block];
    used.allocated = true;
    used.requested = bytes;
    allocated_ += used.size;
    requested_ += bytes;
    auto& stats = owner_.stats_;
    if (allocated_ > stats.peak_allocated) stats.peak_allocated = allocated_;
    if (requested_ > stats.peak_requested) stats.peak_requested = requested_;
    return block;
  }

  void Free(int64_t handle) {
    int block = static_cast<int>(handle);
    Block& b = blocks_[block];
    b.allocated = false;
    allocated_ -= b.size;
    requested_ -= b.requested;
    auto& pool = b.small ? small_free_ : large_free_;
    // Merge with free neighbours of the same segment.
    for (int neighbour : {b.prev, b.next}) {
      if (neighbour < 0 || blocks_[neighbour].allocated) continue;
      pool.erase(Key(neighbour));
      block = Merge(block, neighbour);
    }
    pool.insert(Key(block));
  }

 private:
  struct Block {
    int64_t address, size, requested;
    int stream;
    int prev = -1, next = -1;
    bool small, allocated = false;
  };
  // Ordered by stream, size, address (best fit is the first key not below (stream, size, 0)),
  // packed into two words so that the comparison compiles without branches: searching the free
  // lists is most of a replay's time.
  struct FreeKey {
    uint64_t hi;  // stream << 48 | size
    uint64_t lo;  // address
    int block;
    bool operator<(const FreeKey& o) const { return (hi < o.hi) | ((hi == o.hi) & (lo < o.lo)); }
    bool operator==(const FreeKey& o) const { return hi == o.hi && lo == o.lo; }
  };
  static FreeKey MakeKey(int stream, int64_t size, int64_t address, int block) {
    return {static_cast<uint64_t>(stream) << 48 | static_cast<uint64_t>(size),
            static_cast<uint64_t>(address), block};
  }

  // The free blocks of a pool, in size classes (powers of two), each class a sorted vector: a
  // replay does a few searches per event, and classes keep both the binary searches and the
  // shifting short. Best fit stays exact: the smallest fitting block is the first one not below
  // (stream, size) in the request's class, or else the stream's first block in the next occupied
  // class up.
  class FreeSet {
   public:
    void insert(const FreeKey& k) {
      const int c = ClassOf(k);
      auto& v = classes_[c];
      v.insert(std::lower_bound(v.begin(), v.end(), k), k);
      occupied_ |= uint64_t{1} << c;
    }
    void erase(const FreeKey& k) {
      const int c = ClassOf(k);
      auto& v = classes_[c];
      auto it = std::lower_bound(v.begin(), v.end(), k);
      if (it != v.end() && *it == k) v.erase(it);
      if (v.empty()) occupied_ &= ~(uint64_t{1} << c);
    }
    // Removes the best fit from the set and returns its block, or -1.
    int TakeBestFit(int stream, int64_t size) {
      FreeKey wanted = MakeKey(stream, size, 0, -1);
      for (uint64_t left = occupied_ & ~((uint64_t{1} << ClassOf(wanted)) - 1); left != 0;
           left &= left - 1) {
        const int c = std::countr_zero(left);
        auto& v = classes_[c];
        auto it = std::lower_bound(v.begin(), v.end(), wanted);
        if (it != v.end() && (it->hi >> 48) == static_cast<uint64_t>(stream)) {
          const int block = it->block;
          v.erase(it);
          if (v.empty()) occupied_ &= ~(uint64_t{1} << c);
          return block;
        }
        // Nothing of the stream fits here: in a larger class any of its blocks fits.
        wanted = MakeKey(stream, 0, 0, -1);
      }
      return -1;
    }

   private:
    // Sizes are below 2^48, so the class (the size's bit width) is below 64.
    static int ClassOf(const FreeKey& k) {
      return std::bit_width(k.hi & ((uint64_t{1} << 48) - 1));
    }
    std::array<std::vector<FreeKey>, 64> classes_;
    uint64_t occupied_ = 0;
  };

  FreeKey Key(int block) const {
    const Block& b = blocks_[block];
    return MakeKey(b.stream, b.size, b.address, block);
  }

  int NewBlock(int64_t address, int64_t size, int stream, bool small) {
    int id;
    if (!spare_.empty()) {
      id = spare_.back();
      spare_.pop_back();
    } else {
      id = static_cast<int>(blocks_.size());
      blocks_.emplace_back();
    }
    Block& b = blocks_[id];
    b = Block{address, size, 0, stream, -1, -1, small, false};
    return id;
  }

  // `a` and `b` are adjacent; the lower one survives.
  int Merge(int a, int b) {
    if (blocks_[b].address < blocks_[a].address) std::swap(a, b);
    Block& low = blocks_[a];
    Block& high = blocks_[b];
    low.size += high.size;
    low.next = high.next;
    if (high.next >= 0) blocks_[high.next].prev = a;
    spare_.push_back(b);
    MoveTail(b, a);
    return a;
  }

  // Expandable segments: keeps each segment's last block known when that block is split or merged.
  void MoveTail(int from, int to) {
    if (!expandable_) return;
    for (auto& [key, tail] : tails_) {
      if (tail == from) tail = to;
    }
  }

  void Reserve(int64_t bytes) {
    owner_.reserved_ += bytes;
    auto& stats = owner_.stats_;
    if (owner_.reserved_ > stats.peak_reserved) stats.peak_reserved = owner_.reserved_;
  }

  // No free block fits: a new segment, or (expandable) more pages at the end of the pool's one.
  // Returns a free block of at least `size` bytes, not in the pool's free set.
  int Grow(bool small, int stream, int64_t size) {
    auto& pool = small ? small_free_ : large_free_;
    if (!expandable_) {
      const int64_t segment = SegmentSize(size);
      Reserve(segment);
      ++owner_.stats_.segments;
      const int block = NewBlock(next_address_, segment, stream, small);
      next_address_ += segment + kSmallBuffer;  // a gap: segments are never adjacent
      return block;
    }
    const int64_t page = small ? kSmallBuffer : kLargeBuffer;
    auto [it, created] = tails_.try_emplace({small, stream}, -1);
    int& tail = it->second;
    if (created) {
      ++owner_.stats_.segments;
      segment_base_[{small, stream}] = next_address_;
      next_address_ += int64_t{1} << 40;  // room to grow
    }
    int64_t end = segment_base_[{small, stream}];
    int64_t have = 0;
    if (tail >= 0) {
      end = blocks_[tail].address + blocks_[tail].size;
      if (!blocks_[tail].allocated) have = blocks_[tail].size;
    }
    const int64_t mapped = RoundUp(size - have, page);
    Reserve(mapped);
    if (tail >= 0 && !blocks_[tail].allocated) {
      pool.erase(Key(tail));
      blocks_[tail].size += mapped;
      return tail;
    }
    const int block = NewBlock(end, mapped, stream, small);
    blocks_[block].prev = tail;
    if (tail >= 0) blocks_[tail].next = block;
    tail = block;
    return block;
  }

  CachingAllocatorModel& owner_;
  bool expandable_;
  std::vector<Block> blocks_;
  std::vector<int> spare_;
  FreeSet small_free_, large_free_;
  int64_t next_address_ = 0;
  int64_t allocated_ = 0;
  int64_t requested_ = 0;
  // Expandable segments: the last block of each (pool, stream) segment, and where it starts.
  std::map<std::pair<bool, int>, int> tails_;
  std::map<std::pair<bool, int>, int64_t> segment_base_;
};

CachingAllocatorModel::CachingAllocatorModel(bool expandable_segments)
    : impl_(std::make_unique<Impl>(*this, expandable_segments)) {}
CachingAllocatorModel::~CachingAllocatorModel() = default;

int64_t CachingAllocatorModel::Allocate(int64_t bytes, int stream) {
  return impl_->Allocate(bytes, stream);
}
void CachingAllocatorModel::Free(int64_t handle) {
  impl_->Free(handle);
}

Result<AllocationTrace> ParseAllocationTrace(const std::string& text, const std::string& origin) {
  AllocationTrace trace;
  size_t line_no = 0;
  size_t pos = 0;
  bool header = false;
  std::vector<bool> freed;
  std::map<int64_t, int> streams{{0, 0}};
  while (pos < text.size()) {
    size_t end = text.find('\n', pos);
    if (end == std::string::npos) end = text.size();
    std::string_view line(text.data() + pos, end - pos);
    pos = end + 1;
    ++line_no;
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (line.empty() || line[0] == '#') continue;
    if (!header) {
      if (line != "colo-alloc-trace 1") {
        return InvalidArgument(fmt::format(
            "{}: not an allocation trace (first line must be 'colo-alloc-trace 1')", origin));
      }
      header = true;
      continue;
    }
    std::array<std::string_view, 4> fields;
    const size_t count = SplitFields(line, fields);
    auto bad = [&](std::string_view why) {
      return InvalidArgument(fmt::format("{}:{}: {}: '{}'", origin, line_no, why, line));
    };
    if (fields[0] == "w") {
      if (count != 4) return bad("expected 'w KIND INPUT_BYTES OUTPUT_BYTES'");
      auto in = ParseInt(fields[2]);
      auto out = ParseInt(fields[3]);
      if (!in.ok() || !out.ok() || *in < 0 || *out < 0)
        return bad("workspace sizes must be integers");
      trace.events.push_back({AllocationTrace::Event::kWorkspace, 0, std::max(*in, *out)});
      continue;
    }
    if (fields[0] == "m") {
      if (count >= 2 && fields[1] == "steps") trace.steps_begin = trace.events.size();
      continue;
    }
    if (fields[0] == "a" && (count == 2 || count == 3)) {
      auto bytes = ParseInt(fields[1]);
      if (!bytes.ok() || *bytes <= 0) return bad("allocation size must be a positive integer");
      int64_t stream = 0;
      if (count == 3) {
        auto s = ParseInt(fields[2]);
        if (!s.ok() || *s < 0) return bad("bad stream");
        // Streams are opaque identifiers (torch's history names them by handle): number them
        // in order of appearance.
        stream = streams.try_emplace(*s, static_cast<int>(streams.size())).first->second;
        if (stream >= (1 << 15)) return bad("more than 32768 streams");
      }
      trace.events.push_back(
          {AllocationTrace::Event::kAlloc, static_cast<int32_t>(stream), *bytes});
      ++trace.allocations;
      freed.push_back(false);
      continue;
    }
    if (fields[0] == "f" && count == 2) {
      auto index = ParseInt(fields[1]);
      if (!index.ok() || *index < 0 || *index >= trace.allocations) {
        return bad("free of an allocation that was never made");
      }
      if (freed[*index]) return bad("allocation freed twice");
      freed[*index] = true;
      trace.events.push_back({AllocationTrace::Event::kFree, 0, *index});
      continue;
    }
    return bad("expected 'a BYTES [STREAM]', 'f INDEX' or 'm LABEL'");
  }
  if (!header) return InvalidArgument(fmt::format("{}: empty allocation trace", origin));
  return trace;
}

Result<AllocatorStats> Replay(const AllocationTrace& trace, const ReplayOptions& options) {
  CachingAllocatorModel model(options.expandable_segments);
  int64_t workspace = 0;
  std::vector<int64_t> handles;
  handles.reserve(trace.allocations);
  auto permanent = [&] {
    for (int64_t bytes : options.permanent) model.Allocate(bytes);
  };
  size_t index = 0;
  for (const auto& event : trace.events) {
    if (index++ == trace.steps_begin) permanent();
    switch (event.kind) {
      case AllocationTrace::Event::kAlloc:
        handles.push_back(model.Allocate(event.value, event.stream));
        break;
      case AllocationTrace::Event::kFree:
        if (event.value >= static_cast<int64_t>(handles.size())) {
          return InvalidArgument("allocation trace frees an allocation before making it");
        }
        model.Free(handles[event.value]);
        break;
      case AllocationTrace::Event::kWorkspace:
        workspace = std::max(workspace, event.value);
        if (options.workspace_ratio > 0 && event.value > 0) {
          const auto bytes = static_cast<int64_t>(options.workspace_ratio * event.value);
          model.Free(model.Allocate(std::max<int64_t>(1, bytes)));
        }
        break;
    }
  }
  if (trace.steps_begin >= trace.events.size()) permanent();
  AllocatorStats stats = model.stats();
  stats.largest_workspace_tensor = workspace;
  return stats;
}

}  // namespace colo
