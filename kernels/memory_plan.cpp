#include "kernels/memory_plan.h"

#include <algorithm>
#include <limits>
#include <numeric>
#include <queue>
#include <string>
#include <utility>

namespace kiln {
namespace {

constexpr int64_t kUnassigned = std::numeric_limits<int64_t>::max();

bool live_together(const BufferRequest& a, const BufferRequest& b) {
  return a.first_step <= b.last_step && b.first_step <= a.last_step;
}

Status check_requests(const std::vector<BufferRequest>& requests, int64_t alignment) {
  KILN_REQUIRE(alignment > 0, invalid_argument, "memory plan alignment must be positive, got ", alignment);
  int64_t total = 0;
  for (size_t i = 0; i < requests.size(); ++i) {
    const BufferRequest& r = requests[i];
    KILN_REQUIRE(r.bytes >= 0, invalid_argument, "buffer ", i, " has a negative size (", r.bytes, " bytes)");
    KILN_REQUIRE(r.first_step <= r.last_step, invalid_argument, "buffer ", i, " ends (step ", r.last_step,
                 ") before it starts (step ", r.first_step, ")");
    KILN_REQUIRE(r.bytes <= std::numeric_limits<int64_t>::max() - alignment &&
                     !__builtin_add_overflow(total, align_bytes(r.bytes, alignment), &total),
                 limit_exceeded, "the buffers' total size overflows 64 bits");
  }
  return Status::ok();
}

}  // namespace

int64_t align_bytes(int64_t bytes, int64_t alignment) { return (bytes + alignment - 1) / alignment * alignment; }

int64_t memory_lower_bound(const std::vector<BufferRequest>& requests, int64_t alignment) {
  // (step, delta): a buffer joins at first_step and leaves after last_step; at one step,
  // departures (from the step before) are applied before arrivals.
  std::vector<std::pair<int64_t, int64_t>> events;
  events.reserve(requests.size() * 2);
  for (const BufferRequest& r : requests) {
    const int64_t size = align_bytes(r.bytes, alignment);
    if (size == 0) continue;
    events.emplace_back(r.first_step, size);
    events.emplace_back(static_cast<int64_t>(r.last_step) + 1, -size);
  }
  std::sort(events.begin(), events.end());
  int64_t live = 0, peak = 0;
  for (const auto& [step, delta] : events) {
    live += delta;
    peak = std::max(peak, live);
  }
  return peak;
}

namespace {

// Placed buffers kept by increasing offset, for the gap searches of both heuristics.
class Placement {
 public:
  Placement(const std::vector<BufferRequest>& requests, const std::vector<int64_t>& size)
      : requests_(requests), size_(size), offsets_(requests.size(), 0) {
    by_offset_.reserve(requests.size());
  }

  // Where `id` goes: the smallest gap (the lowest on ties; with `lowest_gap`, simply the lowest)
  // between placed buffers live at a common step with it that holds it; above them all if none.
  int64_t fit(size_t id, bool lowest_gap) const {
    const BufferRequest& r = requests_[id];
    int64_t best_offset = kUnassigned, best_gap = kUnassigned;
    int64_t top = 0;  // end of the highest buffer so far that is live together with `r`
    for (size_t other : by_offset_) {
      if (!live_together(requests_[other], r)) continue;
      const int64_t offset = offsets_[other];
      if (offset >= top) {
        const int64_t gap = offset - top;
        if (gap >= size_[id] && gap < best_gap) {
          if (lowest_gap) return top;
          best_gap = gap;
          best_offset = top;
        }
      }
      top = std::max(top, offset + size_[other]);
    }
    return best_offset == kUnassigned ? top : best_offset;
  }

  void place(size_t id, int64_t offset) {
    offsets_[id] = offset;
    arena_ = std::max(arena_, offset + size_[id]);
    auto at = std::upper_bound(by_offset_.begin(), by_offset_.end(), offset,
                               [&](int64_t o, size_t other) { return o < offsets_[other]; });
    by_offset_.insert(at, id);
  }

  struct Placed {
    std::vector<int64_t> offsets;
    int64_t arena = 0;
  };
  Placed take() && { return Placed{std::move(offsets_), arena_}; }

 private:
  const std::vector<BufferRequest>& requests_;
  const std::vector<int64_t>& size_;
  std::vector<int64_t> offsets_;
  std::vector<size_t> by_offset_;
  int64_t arena_ = 0;
};

using Placed = Placement::Placed;

// TFLite's greedy by size: largest first (equal sizes by first step, then request order), each
// in the smallest gap that holds it.

Placed greedy_by_size(const std::vector<BufferRequest>& requests, const std::vector<int64_t>& size) {
  Placement placement(requests, size);
  std::vector<size_t> order(requests.size());
  std::iota(order.begin(), order.end(), size_t{0});
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    if (size[a] != size[b]) return size[a] > size[b];
    return requests[a].first_step < requests[b].first_step;
  });
  for (size_t id : order)
    if (size[id] > 0) placement.place(id, placement.fit(id, false));
  return std::move(placement).take();
}

// Lowest offset first: repeatedly places, among the buffers left, the one whose lowest fitting
// offset is lowest (ties: larger size x lifetime, larger size, request order). A buffer's lowest
// fitting offset only grows as others are placed, so stale queue keys are lower bounds: a popped
// buffer whose key is still current is the true minimum (lazy re-evaluation).
Placed lowest_offset_first(const std::vector<BufferRequest>& requests, const std::vector<int64_t>& size) {
  Placement placement(requests, size);
  struct Key {
    int64_t offset;
    int64_t area;  // size x steps live
    int64_t size;
    size_t id;
    bool operator>(const Key& o) const {
      if (offset != o.offset) return offset > o.offset;
      if (area != o.area) return area < o.area;
      if (size != o.size) return size < o.size;
      return id > o.id;
    }
  };
  std::priority_queue<Key, std::vector<Key>, std::greater<Key>> queue;
  for (size_t id = 0; id < requests.size(); ++id) {
    if (size[id] == 0) continue;
    const int64_t steps = static_cast<int64_t>(requests[id].last_step) - requests[id].first_step + 1;
    const int64_t area = size[id] > std::numeric_limits<int64_t>::max() / steps
                             ? std::numeric_limits<int64_t>::max() : size[id] * steps;
    queue.push(Key{0, area, size[id], id});
  }
  while (!queue.empty()) {
    Key key = queue.top();
    queue.pop();
    const int64_t offset = placement.fit(key.id, true);
    if (offset != key.offset) {
      key.offset = offset;
      queue.push(key);
      continue;
    }
    placement.place(key.id, offset);
  }
  return std::move(placement).take();
}

}  // namespace

Result<MemoryPlan> plan_buffers(const std::vector<BufferRequest>& requests, int64_t alignment,
                                 PlacementStrategy strategy) {
  KILN_TRY(check_requests(requests, alignment));
  const size_t n = requests.size();
  std::vector<int64_t> size(n);
  MemoryPlan plan;
  for (size_t i = 0; i < n; ++i) {
    size[i] = align_bytes(requests[i].bytes, alignment);
    plan.sum_of_buffers_bytes += size[i];
  }
  plan.lower_bound_bytes = memory_lower_bound(requests, alignment);

  Placed best = strategy == PlacementStrategy::lowest_offset_first ? lowest_offset_first(requests, size)
                                                                    : greedy_by_size(requests, size);
  if (strategy == PlacementStrategy::best_of_both && best.arena > plan.lower_bound_bytes) {
    Placed other = lowest_offset_first(requests, size);
    if (other.arena < best.arena) best = std::move(other);
  }
  plan.arena_bytes = best.arena;
  plan.offsets = std::move(best.offsets);
  return plan;
}

Status verify_memory_plan(const std::vector<BufferRequest>& requests, const MemoryPlan& plan, int64_t alignment) {
  KILN_TRY(check_requests(requests, alignment));
  KILN_REQUIRE(plan.offsets.size() == requests.size(), internal, "memory plan has ", plan.offsets.size(),
               " offsets for ", requests.size(), " buffers");
  const size_t n = requests.size();
  std::vector<size_t> by_offset;
  for (size_t i = 0; i < n; ++i) {
    const int64_t offset = plan.offsets[i], size = align_bytes(requests[i].bytes, alignment);
    KILN_REQUIRE(offset >= 0 && offset % alignment == 0, internal, "buffer ", i, " has offset ", offset,
                 ", not a non-negative multiple of ", alignment);
    KILN_REQUIRE(offset + size <= plan.arena_bytes, internal, "buffer ", i, " [", offset, ", ", offset + size,
                 ") ends past the arena of ", plan.arena_bytes, " bytes");
    if (size > 0) by_offset.push_back(i);
  }
  // Sweep by offset: a buffer can only collide with earlier-starting ones that reach past its start.
  std::sort(by_offset.begin(), by_offset.end(),
            [&](size_t a, size_t b) { return plan.offsets[a] < plan.offsets[b]; });
  for (size_t k = 0; k < by_offset.size(); ++k) {
    const size_t a = by_offset[k];
    const int64_t end_a = plan.offsets[a] + align_bytes(requests[a].bytes, alignment);
    for (size_t j = k + 1; j < by_offset.size() && plan.offsets[by_offset[j]] < end_a; ++j) {
      const size_t b = by_offset[j];
      KILN_REQUIRE(!live_together(requests[a], requests[b]), internal, "buffers ", a, " (steps ",
                   requests[a].first_step, "..", requests[a].last_step, ", bytes [", plan.offsets[a], ", ",
                   end_a, ")) and ", b, " (steps ", requests[b].first_step, "..", requests[b].last_step,
                   ", from byte ", plan.offsets[b], ") are live together and overlap");
    }
  }
  return Status::ok();
}

}  // namespace kiln
