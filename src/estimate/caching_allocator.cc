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
  explicit Impl(bool expandable) : expandable_(expandable) {}

  const AllocatorStats& stats() const { return stats_; }
  int64_t reserved() const { return reserved_; }

  // Whether a request of `bytes` would be served from a cached free block (no new memory).
  bool Fits(int64_t bytes, int stream) const {
    const int64_t size = RoundSize(bytes);
    const auto& pools = size <= kSmallSize ? small_free_ : large_free_;
    return static_cast<size_t>(stream) < pools.size() && pools[stream].Fits(size);
  }

  int Allocate(int64_t bytes, int stream) {
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
    if (allocated_ > stats_.peak_allocated) stats_.peak_allocated = allocated_;
    if (requested_ > stats_.peak_requested) stats_.peak_requested = requested_;
    return block;
  }

  int64_t AddressOf(int block) const { return blocks_[block].address; }

  int64_t PoolReserved(bool small, int stream) const {
    const auto& reserved = small ? small_reserved_ : large_reserved_;
    return static_cast<size_t>(stream) < reserved.size() ? reserved[stream] : 0;
  }

  bool SameLayout(const Impl& other, bool small, int stream) const {
    if (expandable_ != other.expandable_) return false;
    const std::pair key{small, stream};
    const auto base = segment_base_.find(key), other_base = other.segment_base_.find(key);
    const bool grown = base != segment_base_.end();
    if (grown != (other_base != other.segment_base_.end()) ||
        (grown && base->second != other_base->second)) {
      return false;
    }
    const auto tail = tails_.find(key), other_tail = other.tails_.find(key);
    const bool tailed = tail != tails_.end();
    if (tailed != (other_tail != other.tails_.end()) ||
        (tailed && AddressOrNone(tail->second) != other.AddressOrNone(other_tail->second))) {
      return false;
    }
    return Layout(small, stream) == other.Layout(small, stream);
  }

  void Free(int block) {
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
    bool Fits(int64_t size) const {
      const int c = ClassOf(size);
      return Smallest(classes_[c], size) >= 0 || OccupiedAbove(c) >= 0;
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

  int64_t AddressOrNone(int block) const { return block < 0 ? -1 : blocks_[block].address; }

  // What decides where a pool's later requests go: every block of the pool in use by the model
  // (free or allocated), with its segment neighbours, by address.
  struct Placed {
    int64_t address, size, prev, next;
    int stream;
    bool small, allocated;
    auto operator<=>(const Placed&) const = default;
  };
  std::vector<Placed> Layout(bool small, int stream) const {
    std::vector<bool> spare(blocks_.size());
    for (const int id : spare_) spare[id] = true;
    std::vector<Placed> layout;
    for (size_t id = 0; id < blocks_.size(); ++id) {
      const Block& b = blocks_[id];
      if (spare[id] || b.small != small || b.stream != stream) continue;
      layout.push_back({b.address, b.size, AddressOrNone(b.prev), AddressOrNone(b.next), b.stream,
                        b.small, b.allocated});
    }
    std::sort(layout.begin(), layout.end());
    return layout;
  }

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

  void Reserve(bool small, int stream, int64_t bytes) {
    auto& pools = small ? small_reserved_ : large_reserved_;
    if (static_cast<size_t>(stream) >= pools.size()) pools.resize(stream + 1);
    pools[stream] += bytes;
    reserved_ += bytes;
    if (reserved_ > stats_.peak_reserved) stats_.peak_reserved = reserved_;
  }

  // No free block fits: a new segment, or (expandable) more pages at the end of the pool's one.
  // Returns a free block of at least `size` bytes, not in the pool's free set.
  int Grow(bool small, int stream, int64_t size) {
    if (!expandable_) {
      const int64_t segment = SegmentSize(size);
      Reserve(small, stream, segment);
      ++stats_.segments;
      const int block = NewBlock(next_address_, segment, stream, small);
      next_address_ += segment + kSmallBuffer;  // a gap: segments are never adjacent
      return block;
    }
    const int64_t page = small ? kSmallBuffer : kLargeBuffer;
    auto [it, created] = tails_.try_emplace({small, stream}, -1);
    int& tail = it->second;
    if (created) {
      ++stats_.segments;
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
    Reserve(small, stream, mapped);
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

  bool expandable_;
  AllocatorStats stats_;
  int64_t reserved_ = 0;
  std::vector<Block> blocks_;
  std::vector<int> spare_;
  std::vector<FreeSet> small_free_, large_free_;          // by stream
  std::vector<int64_t> small_reserved_, large_reserved_;  // by stream
  int64_t next_address_ = 0;
  int64_t allocated_ = 0;
  int64_t requested_ = 0;
  // Expandable segments: the last block of each (pool, stream) segment, and where it starts.
  std::map<std::pair<bool, int>, int> tails_;
  std::map<std::pair<bool, int>, int64_t> segment_base_;
};

CachingAllocatorModel::CachingAllocatorModel(bool expandable_segments)
    : impl_(std::make_unique<Impl>(expandable_segments)) {}
CachingAllocatorModel::CachingAllocatorModel(const CachingAllocatorModel& other)
    : impl_(std::make_unique<Impl>(*other.impl_)) {}
CachingAllocatorModel::~CachingAllocatorModel() = default;

int CachingAllocatorModel::Allocate(int64_t bytes, int stream) {
  return impl_->Allocate(bytes, stream);
}
void CachingAllocatorModel::Free(int handle) {
  impl_->Free(handle);
}
bool CachingAllocatorModel::Fits(int64_t bytes, int stream) const {
  return impl_->Fits(bytes, stream);
}
const AllocatorStats& CachingAllocatorModel::stats() const {
  return impl_->stats();
}
int64_t CachingAllocatorModel::reserved() const {
  return impl_->reserved();
}
int64_t CachingAllocatorModel::PoolReserved(int64_t bytes, int stream) const {
  return impl_->PoolReserved(RoundSize(bytes) <= kSmallSize, stream);
}
bool CachingAllocatorModel::SameLayout(const CachingAllocatorModel& other, int64_t bytes,
                                       int stream) const {
  return impl_->SameLayout(*other.impl_, RoundSize(bytes) <= kSmallSize, stream);
}
int64_t CachingAllocatorModel::AddressOf(int handle) const {
  return impl_->AddressOf(handle);
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
        const int64_t layout = fields.AtEnd() ? 0 : fields.Count();
        if (conv.weight_bytes < 0 || conv.kernel_h <= 0 || conv.kernel_w <= 0 ||
            conv.in_channels <= 0 || conv.groups <= 0 || layout < 0 || layout > 1 ||
            !fields.AtEnd()) {
          return bad(
              "expected 'w KIND INPUT OUTPUT WEIGHT KERNEL_H KERNEL_W IN_CHANNELS GROUPS "
              "[CHANNELS_LAST]' (sizes non-negative, the rest positive integers, CHANNELS_LAST 0 "
              "or 1)");
        }
        conv.channels_last = layout == 1;
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

double ConvCall::group_padding() const {
  if (shape() != Shape::kGrouped) return 1.0;
  const int64_t width = in_channels / groups;
  if (width <= 0 || width > (int64_t{1} << 40)) return 1.0;
  return static_cast<double>(std::bit_ceil(static_cast<uint64_t>(width))) /
         static_cast<double>(width);
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

namespace {

Status CheckTotal(const AllocationTrace& trace) {
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
  return Status::Ok();
}

// A replay that can stop before any event and be copied there. The fragmentation probe goes on
// from copies made where steps begin instead of replaying everything before them again.
class TraceReplay {
 public:
  TraceReplay(const AllocationTrace& trace, const ReplayOptions& options)
      : trace_(&trace), options_(&options), model_(options.expandable_segments) {
    handles_.reserve(trace.allocations);
  }
  // Goes on with `trace` from its event `next` on a copy of `model`, where the trace's
  // allocations made before `next` are the blocks `earlier` (which must outlive it), and its
  // permanent blocks are already made.
  TraceReplay(const AllocationTrace& trace, const ReplayOptions& options, size_t next,
              const CachingAllocatorModel& model, const std::vector<int>& earlier)
      : trace_(&trace),
        options_(&options),
        model_(model),
        next_(next),
        permanent_made_(true),
        earlier_(&earlier),
        earlier_count_(earlier.size()) {}

  // Replays the events before `end`; the permanent blocks come where the steps begin.
  Status RunTo(size_t end) {
    const auto& events = trace_->events;
    end = std::min(end, events.size());
    for (; next_ < end; ++next_) {
      if (!permanent_made_ && next_ >= trace_->steps_begin) MakePermanent();
      const auto& event = events[next_];
      switch (event.kind) {
        case AllocationTrace::Event::kAlloc:
          handles_.push_back(model_.Allocate(event.value, event.stream));
          break;
        case AllocationTrace::Event::kFree: {
          const auto index = static_cast<size_t>(event.value);
          if (index < earlier_count_) {
            model_.Free((*earlier_)[index]);
          } else if (index - earlier_count_ < handles_.size()) {
            model_.Free(handles_[index - earlier_count_]);
          } else {
            return InvalidArgument("allocation trace frees an allocation before making it");
          }
          break;
        }
        case AllocationTrace::Event::kWorkspace: {
          if (event.value < 0 || static_cast<size_t>(event.value) >= trace_->convs.size()) {
            return InvalidArgument("allocation trace names a convolution it does not have");
          }
          const auto call = static_cast<size_t>(event.value);
          largest_workspace_tensor_ =
              std::max(largest_workspace_tensor_, trace_->convs[call].largest());
          if (call < options_->workspaces.size()) {
            for (const int64_t bytes : options_->workspaces[call]) {
              // Capped like the trace itself: a profile's convolution can name any size.
              if (bytes > 0) model_.Free(model_.Allocate(std::min(bytes, kMaxTraceBytes)));
            }
          }
          break;
        }
      }
    }
    if (!permanent_made_ && end >= trace_->steps_begin) MakePermanent();
    return Status::Ok();
  }

  size_t next() const { return next_; }
  // How many allocations of the trace were made so far, and the model's handle of one of them.
  size_t made() const { return earlier_count_ + handles_.size(); }
  int Handle(size_t index) const {
    return index < earlier_count_ ? (*earlier_)[index] : handles_[index - earlier_count_];
  }
  const CachingAllocatorModel& model() const { return model_; }
  CachingAllocatorModel& model() { return model_; }

  AllocatorStats Stats() const {
    AllocatorStats stats = model_.stats();
    stats.largest_workspace_tensor = largest_workspace_tensor_;
    return stats;
  }

 private:
  void MakePermanent() {
    for (const int64_t bytes : options_->permanent) model_.Allocate(bytes);
    permanent_made_ = true;
  }

  const AllocationTrace* trace_;
  const ReplayOptions* options_;
  CachingAllocatorModel model_;
  size_t next_ = 0;
  bool permanent_made_ = false;
  int64_t largest_workspace_tensor_ = 0;
  // The model's handle of each allocation, by its index in the trace: the first earlier_count_ in
  // the replay this one goes on from, the rest here.
  const std::vector<int>* earlier_ = nullptr;
  size_t earlier_count_ = 0;
  std::vector<int> handles_;
};

// The steps' most common block of 1 MiB or more (the larger on a tie): an activation, usually; 0
// when there is none.
int64_t MostCommonBlock(const AllocationTrace& trace) {
  std::map<int64_t, int64_t> counts;
  for (size_t i = trace.steps_begin; i < trace.events.size(); ++i) {
    const auto& event = trace.events[i];
    if (event.kind == AllocationTrace::Event::kAlloc && event.value >= int64_t{1} << 20) {
      ++counts[event.value];
    }
  }
  if (counts.empty()) return 0;
  return std::max_element(counts.begin(), counts.end(),
                          [](auto& a, auto& b) {
                            return std::tie(a.second, a.first) < std::tie(b.second, b.first);
                          })
      ->first;
}

// Where the first three distinct steps begin at an event (markers can repeat or come last), in
// order, and where the fourth begins, which ends the third; the steps' beginning when no marker
// says.
std::vector<size_t> ProbeStarts(const AllocationTrace& trace) {
  std::vector<size_t> starts;
  for (const size_t at : trace.step_begins) {
    if (at >= trace.steps_begin && at < trace.events.size() &&
        std::find(starts.begin(), starts.end(), at) == starts.end()) {
      starts.push_back(at);
    }
  }
  std::sort(starts.begin(), starts.end());
  if (starts.size() > 4) starts.resize(4);
  if (starts.empty() && trace.steps_begin < trace.events.size()) {
    starts.push_back(trace.steps_begin);
  }
  return starts;
}

}  // namespace

Result<AllocatorStats> Replay(const AllocationTrace& trace, const ReplayOptions& options) {
  COLO_RETURN_IF_ERROR(CheckTotal(trace));
  TraceReplay replay(trace, options);
  COLO_RETURN_IF_ERROR(replay.RunTo(trace.events.size()));
  return replay.Stats();
}

namespace {

// What held blocks of `bytes` on stream 0 can change: the caching allocator keeps each pool of
// each stream apart (segments of its own, free blocks of its own, and it never returns memory),
// so a probe needs only the requests that go where the held blocks go, and the rest of its peak is
// the plain replay's. The permanent blocks and the workspaces become allocations (and frees) of
// their own; `starts` are positions in it.
struct PoolTrace {
  AllocationTrace trace;
  std::vector<size_t> starts;
  // Per allocation here, the trace's allocation it is (-1: a permanent block or a workspace),
  // and how many were made before each start.
  std::vector<int64_t> source;
  std::vector<int64_t> made;
};

PoolTrace PoolOf(const AllocationTrace& trace, const ReplayOptions& options, int64_t bytes,
                 const std::vector<size_t>& starts) {
  const bool small = CachingAllocatorModel::RoundSize(bytes) <= kSmallSize;
  auto mine = [small](int64_t request, int stream) {
    return stream == 0 && (CachingAllocatorModel::RoundSize(request) <= kSmallSize) == small;
  };
  PoolTrace out;
  AllocationTrace& pool = out.trace;
  auto allocate = [&pool, &out](int64_t request, int64_t source) {
    pool.events.push_back({AllocationTrace::Event::kAlloc, 0, request});
    out.source.push_back(source);
    return pool.allocations++;
  };
  std::vector<int64_t> index(trace.allocations, -1);  // of each allocation here
  int64_t allocations = 0;
  bool permanent = false;
  size_t start = 0;
  for (size_t i = 0; i <= trace.events.size(); ++i) {
    if (!permanent && i >= trace.steps_begin) {
      for (const int64_t request : options.permanent) {
        if (mine(request, 0)) allocate(request, -1);
      }
      permanent = true;
    }
    for (; start < starts.size() && starts[start] == i; ++start) {
      out.starts.push_back(pool.events.size());
      out.made.push_back(pool.allocations);
    }
    if (i == trace.events.size()) break;
    const auto& event = trace.events[i];
    switch (event.kind) {
      case AllocationTrace::Event::kAlloc:
        if (mine(event.value, event.stream))
          index[allocations] = allocate(event.value, allocations);
        ++allocations;
        break;
      case AllocationTrace::Event::kFree:
        if (index[event.value] >= 0) {
          pool.events.push_back({AllocationTrace::Event::kFree, 0, index[event.value]});
        }
        break;
      case AllocationTrace::Event::kWorkspace:
        if (static_cast<size_t>(event.value) < options.workspaces.size()) {
          for (const int64_t request : options.workspaces[event.value]) {
            const int64_t capped = std::min(request, kMaxTraceBytes);
            if (request > 0 && mine(capped, 0)) {
              pool.events.push_back({AllocationTrace::Event::kFree, 0, allocate(capped, -1)});
            }
          }
        }
        break;
    }
  }
  return out;
}

// Whether the replays `a` and `b`, run on to `a_end` and `b_end`, would do the same: they stand at
// the same layout, and each event of the one asks what the other's asks at the same place
// (allocations of the same size, frees of the same block or of the allocation made as many
// allocations into the run). Whatever either is given first, it then reserves as much more.
bool SameRun(const AllocationTrace& trace, int64_t bytes, const TraceReplay& a, size_t a_end,
             const TraceReplay& b, size_t b_end) {
  const size_t a_begin = a.next(), b_begin = b.next();
  if (a_end - a_begin != b_end - b_begin || !a.model().SameLayout(b.model(), bytes)) return false;
  const auto a_made = static_cast<int64_t>(a.made()), b_made = static_cast<int64_t>(b.made());
  for (size_t i = 0; i < a_end - a_begin; ++i) {
    const auto& x = trace.events[a_begin + i];
    const auto& y = trace.events[b_begin + i];
    if (x.kind != y.kind || x.stream != y.stream) return false;
    if (x.kind != AllocationTrace::Event::kFree) {
      if (x.value != y.value) return false;
      continue;
    }
    const bool x_earlier = x.value < a_made, y_earlier = y.value < b_made;
    if (x_earlier != y_earlier) return false;
    if (x_earlier ? a.model().AddressOf(a.Handle(x.value)) != b.model().AddressOf(b.Handle(y.value))
                  : x.value - a_made != y.value - b_made) {
      return false;
    }
  }
  return true;
}

}  // namespace

Result<ProbedReplay> ReplayWithFragmentationProbe(const AllocationTrace& trace,
                                                  const ReplayOptions& options) {
  COLO_RETURN_IF_ERROR(CheckTotal(trace));
  const int64_t bytes = MostCommonBlock(trace);
  const std::vector<size_t> starts = bytes > 0 ? ProbeStarts(trace) : std::vector<size_t>{};
  // The probes replay only the requests of the held blocks' pool (the other pools cannot change
  // what the held blocks do), each from where the plain replay's allocator stood as its step began.
  const PoolTrace pool = starts.empty() ? PoolTrace{} : PoolOf(trace, options, bytes, starts);
  const ReplayOptions none;
  std::vector<std::vector<int>> earlier(starts.size());  // the pool's allocations there
  std::vector<TraceReplay> snapshots;
  snapshots.reserve(starts.size());
  // What the plain replay reserves where each step ends, in all and in the held blocks' pool
  // (reserved memory only grows, so a replay that stops there peaks there).
  std::vector<int64_t> reserved_at, pool_reserved_at;  // where steps 1.. begin, then at the end
  TraceReplay full(trace, options);
  for (size_t k = 0; k <= starts.size(); ++k) {
    COLO_RETURN_IF_ERROR(full.RunTo(k < starts.size() ? starts[k] : trace.events.size()));
    if (k > 0) {
      reserved_at.push_back(full.model().reserved());
      pool_reserved_at.push_back(full.model().PoolReserved(bytes));
    }
    if (k == starts.size()) break;
    earlier[k].reserve(pool.made[k]);
    for (size_t i = 0; i < static_cast<size_t>(pool.made[k]); ++i) {
      const int64_t source = pool.source[i];
      earlier[k].push_back(source < 0 ? -1 : full.Handle(static_cast<size_t>(source)));
    }
    snapshots.emplace_back(pool.trace, none, pool.starts[k], full.model(), earlier[k]);
  }
  ProbedReplay out;
  out.stats = full.Stats();
  if (starts.empty()) return out;
  // A block that fits no cached block and fills a segment of its own changes nothing else: the
  // replay goes on as without it, its segment beside, and the peak rises by that segment alone.
  const int64_t rounded = CachingAllocatorModel::RoundSize(bytes);
  const bool stands_alone = !options.expandable_segments && rounded >= kMinLargeAlloc &&
                            CachingAllocatorModel::SegmentSize(rounded) - rounded <= kSmallSize;
  // Probes hold their blocks through the step they perturb: the next step's start has probes of
  // its own.
  const size_t probed = std::min<size_t>(snapshots.size(), 3);
  auto step_end = [&pool](size_t k) {
    return k + 1 == pool.starts.size() ? pool.trace.events.size() : pool.starts[k + 1];
  };
  // A step that begins at the layout the next one begins at and asks for what the next asks for
  // (a training loop's steady state) reacts to held blocks exactly as the next: its probes reserve
  // what the next step's reserve beyond where they began, and need no replay of their own.
  std::array<bool, 3> repeats{};
  for (size_t k = 0; k + 1 < probed; ++k) {
    repeats[k] =
        SameRun(pool.trace, bytes, snapshots[k], step_end(k), snapshots[k + 1], step_end(k + 1));
  }
  for (int count = 1; count <= 3; ++count) {
    // What the held blocks reserve by themselves (a 1-10 MiB block takes a 20 MiB segment).
    CachingAllocatorModel alone;
    for (int i = 0; i < count; ++i) alone.Allocate(bytes);
    std::array<int64_t, 3> grown{};  // what each step's probe reserved beyond its snapshot
    std::array<bool, 3> known{};
    for (size_t k = probed; k-- > 0;) {
      if (stands_alone && !snapshots[k].model().Fits(bytes)) continue;
      if (repeats[k] && known[k + 1]) {
        grown[k] = grown[k + 1];
      } else {
        TraceReplay probe = snapshots[k];
        for (int i = 0; i < count; ++i) probe.model().Allocate(bytes);
        COLO_RETURN_IF_ERROR(probe.RunTo(step_end(k)));
        ++out.probes;
        grown[k] = probe.model().reserved() - snapshots[k].model().reserved();
      }
      known[k] = true;
      // The other pools and streams reserve what the plain replay does by then.
      const int64_t reserved = reserved_at[k] - pool_reserved_at[k] +
                               snapshots[k].model().PoolReserved(bytes) + grown[k] -
                               alone.reserved();
      out.fragmentation_risk = std::max(out.fragmentation_risk, reserved - out.stats.peak_reserved);
    }
  }
  return out;
}

}  // namespace colo
