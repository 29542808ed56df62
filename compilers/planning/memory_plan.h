// Graph-level memory planning: arena requests from a shape-inferred graph's values, placed with
// kernels/memory_plan.h.
#pragma once

#include <cstdint>
#include <unordered_map>
#include <vector>

#include "compilers/ir/graph.h"
#include "kernels/memory_plan.h"

namespace kiln {

// ---- Graph level -------------------------------------------------------------------------------

// Elementwise unary ops whose output may overwrite their (first) input.
bool op_can_run_in_place(OpKind op);

struct GraphMemoryOptions {
  int64_t alignment = 64;
  PlacementStrategy strategy = PlacementStrategy::best_of_both;
  // An op from op_can_run_in_place writes its output into its input's buffer when that input is
  // an arena value read for the last time by this node (and only as input 0), with the same size.
  bool in_place = false;
  // Values known at compile time (ShapeInferenceResult::known_values): constants, not in the arena.
  const std::unordered_map<ValueId, Tensor>* constant_values = nullptr;
};

struct GraphMemoryPlan {
  std::vector<BufferRequest> buffers;  // one per arena buffer; steps are node indices
  MemoryPlan memory;                   // offsets per buffer
  std::vector<int> value_buffer;       // by ValueId: index into `buffers`; -1 outside the arena
  int in_place_values = 0;             // values that took over their input's buffer
  int64_t intermediate_bytes = 0;      // unaligned sum of every arena value's size
  int64_t weights_bytes = 0;           // initializers (outside the arena)
  int64_t io_bytes = 0;                // graph inputs and outputs: user buffers, outside the arena

  int64_t value_offset(ValueId id) const;  // -1 for values outside the arena
};

// Plans the intermediates of a shape-inferred graph with concrete shapes (bind symbolic dims
// first), executed in its current node order. Arena values: node outputs that are not graph
// outputs; each lives from its producing node to its last reader (a value nobody reads: its
// producing node only). Graph inputs, graph outputs and initializers stay outside the arena.
// Errors: a non-concrete arena value (invalid_argument), a node order that reads a value
// before its producer (invalid_graph), a size that overflows (limit_exceeded).
Result<GraphMemoryPlan> plan_graph_memory(const Graph& graph, const GraphMemoryOptions& options = {});

}  // namespace kiln
