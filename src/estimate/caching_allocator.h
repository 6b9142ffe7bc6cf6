// A model of PyTorch's CUDA caching allocator, faithful enough to predict how much memory it
// reserves from the driver for a given sequence of allocations and frees.
//
// What it reproduces (c10/cuda/CUDACachingAllocator.cpp, default settings):
//  * requests are rounded up to 512 bytes;
//  * requests of at most 1 MiB come from the small pool, whose segments are 2 MiB; larger
//    requests come from the large pool: below 10 MiB a 20 MiB segment, above it the request
//    rounded up to 2 MiB;
//  * a free block is reused best-fit (smallest block that fits, same stream, same pool);
//  * a block is split when the remainder is at least 512 bytes (small pool) or more than 1 MiB
//    (large pool); freed blocks merge with free neighbours of the same segment, never across
//    segments; segments are never returned (no empty_cache, no OOM retry);
//  * with expandable segments, each pool and stream has one segment that grows at its end in
//    2 MiB (small) or 20 MiB (large) pages.
#pragma once

#include <algorithm>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"

namespace colo {

// A convolution the profile saw: cuDNN allocates its workspace inside the call and frees it before
// returning, so fake tensors never show it; its size depends on the GPU, the pass and the shape.
struct ConvCall {
  // The kinds of convolution cuDNN runs with different kernels (and workspaces).
  enum class Shape : uint8_t { kGeneral, kPointwise, kStem, kDepthwise, kGrouped };
  static constexpr int kShapes = 5;
  bool backward = false;
  // Whether the profile recorded the geometry; older profiles gave only the two largest tensors
  // (input_bytes and output_bytes), with no weight, kernel or channels.
  bool geometry = false;
  int64_t input_bytes = 0, output_bytes = 0, weight_bytes = 0;
  int64_t kernel_h = 0, kernel_w = 0, in_channels = 0, groups = 1;
  // Whether its input is laid out channels-last (NHWC): ATen then runs depthwise convolutions
  // through cuDNN's NHWC kernels, whose workspaces differ (ConvNeXt's blocks, whose permuted
  // output feeds the next block's depthwise convolution).
  bool channels_last = false;

  Shape shape() const;
  int64_t largest() const { return std::max({input_bytes, output_bytes, weight_bytes}); }
  // What cuDNN's implicit-GEMM kernels take workspace in proportion to.
  int64_t operand_bytes() const { return input_bytes + output_bytes + weight_bytes; }
  // How much larger cuDNN's grouped kernels see the operands than they are: each group runs at a
  // power-of-two channel count, so a group of 24 channels (RegNet's) is padded to 32 and the call
  // takes 4/3 of its operands as workspace, where groups of 4, 8 or 16 take 1.0 (measured on
  // H100 and H200 at batch 16 to 256). 1 for any other shape.
  double group_padding() const;
};
std::string_view ShapeName(ConvCall::Shape shape);

// One allocation trace, as colo-profile (or torch's memory history) wrote it.
struct AllocationTrace {
  struct Event {
    // kWorkspace: a library call that allocates scratch memory inside the kernel and frees it
    // before returning (cuDNN convolutions); its size is not known on fake tensors.
    enum Kind : uint8_t { kAlloc, kFree, kWorkspace } kind;
    int32_t stream;  // kAlloc only
    // kAlloc: bytes; kFree: the allocation's index (0-based, in order of kAlloc);
    // kWorkspace: the call's index in `convs`.
    int64_t value;
  };
  std::vector<Event> events;
  std::vector<ConvCall> convs;
  int64_t allocations = 0;
  // Index of the first event after the "m steps" marker (parameters come before it); 0 if none.
  size_t steps_begin = 0;
  // Where each training step begins: "m steps" and every later "m stepN" marker (colo-profile
  // writes "m stepN" when step N-1 has finished), in order.
  std::vector<size_t> step_begins;
};

// Parses the text format: "colo-alloc-trace 1", then lines "a BYTES [STREAM]", "f INDEX",
// "w KIND INPUT OUTPUT [WEIGHT KERNEL_H KERNEL_W IN_CHANNELS GROUPS [CHANNELS_LAST]]" (a
// convolution's workspace: KIND conv or conv_bwd, sizes in bytes, CHANNELS_LAST 1 for an NHWC
// input, else 0 or left out), "m LABEL" (a marker) and "# ..." (comments).
// Errors name the origin and line.
Result<AllocationTrace> ParseAllocationTrace(const std::string& text, const std::string& origin);

struct AllocatorStats {
  int64_t peak_reserved = 0;
  int64_t peak_allocated = 0;  // block bytes (rounded sizes) in use at the worst moment
  int64_t peak_requested = 0;  // requested bytes in use at the worst moment
  int64_t segments = 0;
  int64_t largest_workspace_tensor = 0;  // the largest tensor of any workspace event
};

class CachingAllocatorModel {
 public:
  explicit CachingAllocatorModel(bool expandable_segments = false);
  ~CachingAllocatorModel();
  // A copy is a snapshot: it goes on from the same state, independently of the original.
  CachingAllocatorModel(const CachingAllocatorModel& other);
  CachingAllocatorModel& operator=(const CachingAllocatorModel&) = delete;

  // Returns a handle for Free; a block keeps its handle while it is allocated, in copies too.
  int Allocate(int64_t bytes, int stream = 0);
  void Free(int handle);
  // Whether a request of `bytes` would be served from a cached free block, reserving nothing.
  bool Fits(int64_t bytes, int stream = 0) const;

  const AllocatorStats& stats() const;
  int64_t reserved() const;
  // What the pool that serves requests of `bytes` on `stream` has reserved: each pool (small or
  // large blocks, per stream) keeps its segments to itself.
  int64_t PoolReserved(int64_t bytes, int stream = 0) const;

  // Whether this model and `other` would serve any sequence of requests of the pool of `bytes`
  // on `stream` alike (the same new segments, the same blocks split and merged), whatever each
  // has reserved or allocated so far, there or in other pools: the pool's blocks at the same
  // addresses, each allocated or free. Handles may differ; a block's address names it in both.
  // New segments come above every block in both, wherever the other pools put the next one.
  bool SameLayout(const CachingAllocatorModel& other, int64_t bytes, int stream = 0) const;
  int64_t AddressOf(int handle) const;

  static int64_t RoundSize(int64_t bytes);
  static int64_t SegmentSize(int64_t rounded);

 private:
  class Impl;
  std::unique_ptr<Impl> impl_;
};

struct ReplayOptions {
  // Blocks that live for the whole run (cuBLAS workspaces), allocated where the steps begin.
  std::vector<int64_t> permanent;
  // Per entry of the trace's `convs`, the workspaces that call allocates and frees inside it, one
  // after another (a backward takes the input's gradient's, then the weight's); none when empty.
  std::vector<std::vector<int64_t>> workspaces;
  bool expandable_segments = false;
};

// Refuses a trace whose allocations add up to more than kMaxTraceBytes (no GPU holds an exabyte,
// and the sums a replay keeps must stay far from overflowing, probes and workspaces included).
inline constexpr int64_t kMaxTraceBytes = int64_t{1} << 60;
Result<AllocatorStats> Replay(const AllocationTrace& trace, const ReplayOptions& options);

// A replay, and how much more its peak reserved memory could be because of fragmentation the
// trace cannot pin down. The caching allocator reuses a freed block for any smaller request, so
// whether a large cached block (a language model's logits) is intact when it is needed again can
// hinge on a single activation-sized block: on a real GPU, kernels' scratch and the autograd
// engine's in-place accumulation, which fake tensors do not show, shift that by a block or two,
// and the peak moves by a whole large segment (BERT-base at batch 16: one more 954 MiB segment, 8%
// of the peak). The probe holds one to three more of the trace's most common blocks of 1 MiB or
// more from the start of each of its first three steps, through that step, and takes the largest
// rise of the peak beyond the held blocks' own bytes.
struct ProbedReplay {
  AllocatorStats stats;
  int64_t fragmentation_risk = 0;  // 0 when no held block raises the peak
  // How many were replayed: the others could not matter, or repeat a later step's.
  int probes = 0;
};
Result<ProbedReplay> ReplayWithFragmentationProbe(const AllocationTrace& trace,
                                                  const ReplayOptions& options);

}  // namespace colo
