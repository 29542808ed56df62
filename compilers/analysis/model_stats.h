// Per-layer and total statistics of a shape-inferred graph: MACs, parameters, activation bytes.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "compilers/ir/graph.h"

namespace kiln {

struct LayerStats {
  std::string name;
  OpKind op;
  std::string output_type;  // "float32[1,64,112,112]"
  int64_t macs = -1;        // -1 when a shape it needs is unknown
  int64_t params = 0;       // elements of float initializers this node is the first to read
  int64_t activation_bytes = -1;  // bytes of its outputs; -1 when unknown
};

struct ModelStats {
  std::vector<LayerStats> layers;
  std::map<std::string, int64_t> op_counts;
  int64_t params = 0;
  int64_t param_bytes = 0;
  int64_t macs = 0;                     // sum over layers with known MACs
  int64_t activation_bytes_total = 0;   // sum of all intermediate outputs
  int64_t activation_bytes_peak = 0;    // largest total of simultaneously live intermediates, in node order
  bool complete = true;                 // false if some shape was unknown (or a weight malformed)
  bool shapes_unknown = false;          // some figure is missing because a shape is symbolic or unknown
  std::vector<std::string> malformed;   // layers whose weight shape allows no MAC count (a Conv with 0 output channels)
};

// Requires: graph_infer_shapes ran (bind symbolic dims first to get numbers).
ModelStats model_stats(const Graph& graph);

}  // namespace kiln
