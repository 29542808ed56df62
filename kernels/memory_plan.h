// Arena planning for intermediate buffers: offsets so that buffers alive at the same step never
// share a byte. Used by the engine at load time and by compilers/planning at compile time.
//
// Two placement heuristics, both O(n^2) or so in the number of buffers:
//  - greedy by size, TFLite's (Pisarchyk & Lee, "Efficient Memory Management for Deep Neural Net
//    Inference", 2020; tflite/delegates/gpu/common/memory_management/greedy_by_size_assignment.cc):
//    largest buffer first (ties: earlier first step, then request order), each in the smallest
//    gap between already placed buffers live at a common step, or above them all.
//  - lowest offset first: repeatedly the buffer that fits lowest, ties to the larger
//    size x lifetime. Greedy by size keeps big buffers at the bottom of the arena, so a chain of
//    long-lived buffers (ConvNeXt's residual stream) alternates above them; this one lets them
//    alternate between the bottom and the top instead.
// `lower_bound_bytes` (the largest total of buffers live at one step) is a bound no placement
// can beat for the given execution order.
#pragma once

#include <cstdint>
#include <vector>

#include "kernels/core/status.h"

namespace kiln {

struct BufferRequest {
  int64_t bytes = 0;
  int first_step = 0;  // step that writes it
  int last_step = 0;   // last step that reads it (inclusive)
};

struct MemoryPlan {
  std::vector<int64_t> offsets;  // per request
  int64_t arena_bytes = 0;
  int64_t lower_bound_bytes = 0;     // max over steps of the (aligned) bytes alive at that step
  int64_t sum_of_buffers_bytes = 0;  // what no reuse would take
};

enum class PlacementStrategy {
  greedy_by_size,
  lowest_offset_first,
  best_of_both,  // greedy by size, and lowest offset first when that misses the bound: the smaller arena
};

// Rounds `bytes` up to a multiple of `alignment` (> 0).
int64_t align_bytes(int64_t bytes, int64_t alignment);

// Places every request (zero-size ones at offset 0). Offsets are multiples of `alignment`, sizes
// are rounded up to it; arena_bytes = max(offset + aligned size); lower_bound_bytes and
// sum_of_buffers_bytes count aligned sizes. Errors (invalid_argument): alignment <= 0, negative
// sizes, last_step < first_step; limit_exceeded when the total overflows.
Result<MemoryPlan> plan_buffers(const std::vector<BufferRequest>& requests, int64_t alignment = 64,
                                 PlacementStrategy strategy = PlacementStrategy::best_of_both);

// The largest total of aligned sizes live at one step (the plan's lower bound).
int64_t memory_lower_bound(const std::vector<BufferRequest>& requests, int64_t alignment = 64);

// Checks a plan: one aligned offset per request, every buffer inside the arena, and no two
// buffers that are live at a common step share a byte. The error names the first offending pair.
Status verify_memory_plan(const std::vector<BufferRequest>& requests, const MemoryPlan& plan,
                          int64_t alignment = 64);

}  // namespace kiln
