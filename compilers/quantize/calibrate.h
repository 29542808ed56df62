// Runs a graph in float32 over a calibration set and returns the int8 clipping range of the
// values asked for. The graph runs on the compiled Engine (the reference executor would take
// minutes on a ResNet), with the values of interest added as extra outputs.
#pragma once

#include <map>
#include <ostream>
#include <string>
#include <vector>

#include "compilers/ir/graph.h"
#include "compilers/quantize/calibration.h"

namespace kiln {

// Samples for every graph input (in Graph::inputs order), [N, ...] with N >= 1 along dim 0; each
// sample is shaped like the graph input without its batch dimension.
struct CalibrationSet {
  std::vector<Tensor> inputs;
  std::string source;  // where the data came from, for reports ("IDX images ...", "random ...")
};

struct CalibrationOptions {
  CalibrationMethod method = CalibrationMethod::minmax;
  float percentile = kDefaultPercentile;
  int threads = 0;                  // Engine threads (0: the CPU quota)
  std::ostream* progress = nullptr; // a line per sweep
};

// Checks the set against the graph's inputs: count, dtype, sample shape, N > 0. Errors name the
// input and say what was expected.
Status check_calibration_set(const Graph& graph, const CalibrationSet& set);

// The calibrated range of each value in `values` (float32 values of `graph`).
Result<std::map<ValueId, TensorRange>> calibrate_values(const Graph& graph, const std::vector<ValueId>& values,
                                                        const CalibrationSet& set, const CalibrationOptions& options);

}  // namespace kiln
