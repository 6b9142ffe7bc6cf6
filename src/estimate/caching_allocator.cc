#include "estimate/caching_allocator.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <bit>
#include <cstring>
#include <limits>
#include <map>
#include <tuple>

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

// One trace line, read field by field without copying: traces have tens of thousands of lines,
// and reading them is most of a job's first estimate.
class LineFields {
 public:
  explicit LineFields(std::string_view line) : p_(line.data()), end_(line.data() + line.size()) {}
  // The next field, or an empty view when there is none.
  std::string_view Word() {
    SkipSpaces();
    const char* begin = p_;
    while (p_ < end_ && *p_ != ' ') ++p_;
    return {begin, static_cast<size_t>(p_ - begin)};
  }
  // The next field as a non-negative integer below 10^18, or -1 when it is missing or not one.
  int64_t Count() {
    SkipSpaces();
    const char* begin = p_;
    int64_t value = 0;
    for (; p_ < end_ && static_cast<unsigned>(*p_ - '0') < 10; ++p_) {
      if (p_ - begin < 18) value = value * 10 + (*p_ - '0');  // more digits are refused below
    }
    const ptrdiff_t digits = p_ - begin;
    if (digits == 0 || digits > 18 || (p_ < end_ && *p_ != ' ')) return -1;
    return value;
  }
  bool AtEnd() {
    SkipSpaces();
    return p_ == end_;
  }

 private:
  void SkipSpaces() {
    while (p_ < end_ && *p_ == ' ') ++p_;
  }
  const char* p_;
  const char* end_;
};

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
    FreeSet& pool = Pool(small, stream);
    int block = pool.TakeBestFit(blocks_, size);
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
      pool.Insert(blocks_, rest);
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
    // The block's pool exists: it was made when the block was allocated.
    FreeSet& pool = (b.small ? small_free_ : large_free_)[b.stream];
    // Merge with free neighbours of the same segment.
    for (int neighbour : {b.prev, b.next}) {
      if (neighbour < 0 || blocks_[neighbour].allocated) continue;
      pool.Remove(blocks_, neighbour);
      block = Merge(block, neighbour);
    }
    pool.Insert(blocks_, block);
  }

 private:
  struct Block {
    int64_t address, size, requested;
    int stream;
    int prev = -1, next = -1;
    int slot = -1;           // while free: its place in its free set's class
    uint8_t size_class = 0;  // while free: that class
    bool small, allocated = false;
  };
  // The free blocks of one pool and stream, in size classes: four per power of two, so a class
  // holds few blocks (on the evaluation traces 1-10 per search on average, at most 119). A class is
  // an unordered vector and each free block knows its slot in it, so inserting and removing cost
  // O(1); best fit scans the request's class for the smallest block that fits, the lowest
  // address among equals as PyTorch orders them, or else takes the smallest block of the next
  // occupied class up, where every block fits. A replay is a few of these operations per event,
  // so they are most of its time.
  class FreeSet {
   public:
    void Insert(std::vector<Block>& blocks, int block) {
      Block& b = blocks[block];
      const int c = ClassOf(b.size);
      auto& v = classes_[c];
      b.slot = static_cast<int>(v.size());
      b.size_class = static_cast<uint8_t>(c);
      v.push_back({b.size, b.address, block});
      occupied_[c >> 6] |= uint64_t{1} << (c & 63);
    }
    void Remove(std::vector<Block>& blocks, int block) {
      Block& b = blocks[block];
      const int c = b.size_class;
      auto& v = classes_[c];
      const int slot = b.slot;
      b.slot = -1;
      if (slot + 1 != static_cast<int>(v.size())) {
        v[slot] = v.back();
        blocks[v[slot].block].slot = slot;
      }
      v.pop_back();
      if (v.empty()) occupied_[c >> 6] &= ~(uint64_t{1} << (c & 63));
    }
    // Removes the best fit for `size` bytes and returns its block, or -1.
    int TakeBestFit(std::vector<Block>& blocks, int64_t size) {
      const int c = ClassOf(size);
      int found = Smallest(classes_[c], size);
      if (found < 0) {
        const int above = OccupiedAbove(c);
        if (above < 0) return -1;
        found = Smallest(classes_[above], 0);
      }
      Remove(blocks, found);
      return found;
    }

   private:
    struct Entry {
      int64_t size, address;
      int block;
    };
    static constexpr int kClasses = 256;

    // The block with the smallest (size, address) of at least `size` bytes, or -1. Written
    // without branches on the data: which block wins is unpredictable.
    static int Smallest(const std::vector<Entry>& v, int64_t size) {
      int best = -1;
      int64_t best_size = std::numeric_limits<int64_t>::max();
      int64_t best_address = 0;
      for (const Entry& e : v) {
        const bool better =
            (e.size >= size) &
            ((e.size < best_size) | ((e.size == best_size) & (e.address < best_address)));
        best = better ? e.block : best;
        best_size = better ? e.size : best_size;
        best_address = better ? e.address : best_address;
      }
      return best;
    }
    // Classes grow with the size: [2^k, 2^(k+1)) is split into four equal ranges.
    static int ClassOf(int64_t size) {
      const auto s = static_cast<uint64_t>(size);
      const int width = std::bit_width(s);
      if (width <= 2) return static_cast<int>(s);
      return (width - 1) * 4 + static_cast<int>((s >> (width - 3)) & 3);
    }
    // The first occupied class above `c`, or -1.
    int OccupiedAbove(int c) const {
      int word = (c + 1) >> 6;
      if (word >= kClasses / 64) return -1;
      uint64_t bits = occupied_[word] & (~uint64_t{0} << ((c + 1) & 63));
      while (bits == 0) {
        if (++word == kClasses / 64) return -1;
        bits = occupied_[word];
      }
      return word * 64 + std::countr_zero(bits);
    }
    std::array<std::vector<Entry>, kClasses> classes_;
    std::array<uint64_t, kClasses / 64> occupied_{};
  };

  FreeSet& Pool(bool small, int stream) {
    auto& pools = small ? small_free_ : large_free_;
    if (static_cast<size_t>(stream) >= pools.size()) pools.resize(stream + 1);
    return pools[stream];
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
    b = Block{address, size, 0, stream, -1, -1, -1, 0, small, false};
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
      Pool(small, stream).Remove(blocks_, tail);
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
  std::vector<FreeSet> small_free_, large_free_;  // by stream
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
  // One event per line, and an event's line is at least 4 bytes with its newline: reserving
  // for that many is cheaper than growing the vector (copying it about twice over).
  trace.events.reserve(text.size() / 4 + 1);
  freed.reserve(text.size() / 4 + 1);
  while (pos < text.size()) {
    const void* newline = std::memchr(text.data() + pos, '\n', text.size() - pos);
    const size_t end = newline
                           ? static_cast<size_t>(static_cast<const char*>(newline) - text.data())
                           : text.size();
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
    auto bad = [&](std::string_view why) {
      return InvalidArgument(fmt::format("{}:{}: {}: '{}'", origin, line_no, why, line));
    };
    LineFields fields(line);
    const std::string_view kind = fields.Word();
    if (kind == "a") {
      const int64_t bytes = fields.Count();
      if (bytes <= 0) return bad("allocation size must be a positive integer");
      int64_t stream = 0;
      if (!fields.AtEnd()) {
        const int64_t s = fields.Count();
        if (s < 0) return bad("bad stream");
        // Streams are opaque identifiers (torch's history names them by handle): number them
        // in order of appearance.
        stream = streams.try_emplace(s, static_cast<int>(streams.size())).first->second;
        if (stream >= (1 << 15)) return bad("more than 32768 streams");
      }
      if (!fields.AtEnd()) return bad("expected 'a BYTES [STREAM]'");
      trace.events.push_back({AllocationTrace::Event::kAlloc, static_cast<int32_t>(stream), bytes});
      ++trace.allocations;
      freed.push_back(false);
    } else if (kind == "f") {
      const int64_t index = fields.Count();
      if (!fields.AtEnd()) return bad("expected 'f INDEX'");
      if (index < 0 || index >= trace.allocations) {
        return bad("free of an allocation that was never made");
      }
      if (freed[index]) return bad("allocation freed twice");
      freed[index] = true;
      trace.events.push_back({AllocationTrace::Event::kFree, 0, index});
    } else if (kind == "w") {
      const std::string_view call = fields.Word();
      ConvCall conv;
      conv.backward = call == "conv_bwd";
      conv.input_bytes = fields.Count();
      conv.output_bytes = fields.Count();
      if (call.empty() || conv.input_bytes < 0 || conv.output_bytes < 0) {
        return bad("expected 'w KIND INPUT OUTPUT [WEIGHT KERNEL_H KERNEL_W IN_CHANNELS GROUPS]'");
      }
      if (!fields.AtEnd()) {
        conv.geometry = true;
        conv.weight_bytes = fields.Count();
        conv.kernel_h = fields.Count();
        conv.kernel_w = fields.Count();
        conv.in_channels = fields.Count();
        conv.groups = fields.Count();
        if (conv.weight_bytes < 0 || conv.kernel_h <= 0 || conv.kernel_w <= 0 ||
            conv.in_channels <= 0 || conv.groups <= 0 || !fields.AtEnd()) {
          return bad(
              "expected 'w KIND INPUT OUTPUT WEIGHT KERNEL_H KERNEL_W IN_CHANNELS GROUPS' "
              "(sizes non-negative, the rest positive integers)");
        }
      }
      trace.events.push_back(
          {AllocationTrace::Event::kWorkspace, 0, static_cast<int64_t>(trace.convs.size())});
      trace.convs.push_back(conv);
    } else if (kind == "m") {
      const std::string_view label = fields.Word();
      if (label == "steps") trace.steps_begin = trace.events.size();
      if (label == "steps" || (label.starts_with("step") && label.size() > 4 &&
                               std::all_of(label.begin() + 4, label.end(),
                                           [](char c) { return c >= '0' && c <= '9'; }))) {
        trace.step_begins.push_back(trace.events.size());
      }
    } else {
      return bad("expected 'a BYTES [STREAM]', 'f INDEX', 'w KIND IN OUT' or 'm LABEL'");
    }
  }
  if (!header) return InvalidArgument(fmt::format("{}: empty allocation trace", origin));
  return trace;
}

ConvCall::Shape ConvCall::shape() const {
  if (!geometry) return Shape::kGeneral;
  if (groups > 1) return groups == in_channels ? Shape::kDepthwise : Shape::kGrouped;
  if (kernel_h == 1 && kernel_w == 1) return Shape::kPointwise;
  // Images come with 1 to 4 channels; cuDNN picks other kernels for so few.
  if (in_channels <= 4) return Shape::kStem;
  return Shape::kGeneral;
}

std::string_view ShapeName(ConvCall::Shape shape) {
  switch (shape) {
    case ConvCall::Shape::kGeneral:
      return "general";
    case ConvCall::Shape::kPointwise:
      return "pointwise";
    case ConvCall::Shape::kStem:
      return "stem";
    case ConvCall::Shape::kDepthwise:
      return "depthwise";
    case ConvCall::Shape::kGrouped:
      return "grouped";
  }
  return "general";
}

Result<AllocatorStats> Replay(const AllocationTrace& trace, const ReplayOptions& options) {
  int64_t total = 0;
  for (const auto& event : trace.events) {
    if (event.kind != AllocationTrace::Event::kAlloc) continue;
    if (event.value > kMaxTraceBytes - total) {
      return InvalidArgument(
          fmt::format("allocation trace allocates more than {} bytes in all: no GPU holds that",
                      kMaxTraceBytes));
    }
    total += event.value;
  }
  CachingAllocatorModel model(options.expandable_segments);
  int64_t workspace = 0;
  std::vector<int64_t> handles;
  handles.reserve(trace.allocations);
  auto permanent = [&] {
    for (int64_t bytes : options.permanent) model.Allocate(bytes);
  };
  const auto& held = options.held;
  size_t index = 0;
  for (const auto& event : trace.events) {
    if (index == trace.steps_begin) permanent();
    if (held.count > 0 && index == held.at) {
      for (int i = 0; i < held.count; ++i) model.Allocate(held.bytes);
    }
    ++index;
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
      case AllocationTrace::Event::kWorkspace: {
        if (event.value < 0 || event.value >= static_cast<int64_t>(trace.convs.size())) {
          return InvalidArgument("allocation trace names a convolution it does not have");
        }
        const ConvCall& conv = trace.convs[event.value];
        workspace = std::max(workspace, conv.largest());
        if (options.workspaces) {
          for (const int64_t bytes : options.workspaces(conv)) {
            // Capped like the trace itself: a profile's convolution can name any size.
            if (bytes > 0) model.Free(model.Allocate(std::min(bytes, kMaxTraceBytes)));
          }
        }
        break;
      }
    }
  }
  if (trace.steps_begin >= trace.events.size()) permanent();
  AllocatorStats stats = model.stats();
  stats.largest_workspace_tensor = workspace;
  return stats;
}

Result<int64_t> FragmentationRisk(const AllocationTrace& trace, const ReplayOptions& options,
                                  int64_t peak_reserved) {
  // The steps' most common block of 1 MiB or more (the larger on a tie): an activation, usually.
  std::map<int64_t, int64_t> counts;
  for (size_t i = trace.steps_begin; i < trace.events.size(); ++i) {
    const auto& event = trace.events[i];
    if (event.kind == AllocationTrace::Event::kAlloc && event.value >= int64_t{1} << 20) {
      ++counts[event.value];
    }
  }
  if (counts.empty()) return int64_t{0};
  const auto common = std::max_element(counts.begin(), counts.end(), [](auto& a, auto& b) {
    return std::tie(a.second, a.first) < std::tie(b.second, b.first);
  });
  const int64_t bytes = common->first;
  // The first three distinct steps that begin at an event (markers can repeat or come last).
  std::vector<size_t> starts;
  for (const size_t at : trace.step_begins) {
    if (at >= trace.steps_begin && at < trace.events.size() &&
        std::find(starts.begin(), starts.end(), at) == starts.end() && starts.size() < 3) {
      starts.push_back(at);
    }
  }
  if (starts.empty() && trace.steps_begin < trace.events.size()) {
    starts.push_back(trace.steps_begin);
  }
  int64_t risk = 0;
  ReplayOptions probe = options;
  for (int count = 1; count <= 3; ++count) {
    // What the held blocks reserve by themselves (a 1-10 MiB block takes a 20 MiB segment).
    CachingAllocatorModel alone;
    for (int i = 0; i < count; ++i) alone.Allocate(bytes);
    for (const size_t at : starts) {
      probe.held = {at, bytes, count};
      auto stats = Replay(trace, probe);
      if (!stats.ok()) return stats.status();
      risk = std::max(risk, stats->peak_reserved - alone.reserved() - peak_reserved);
    }
  }
  return risk;
}

}  // namespace colo
