// Helpers of the precision pass tests (tests/unit/quantize_test.cpp, quantize_layouts_test.cpp): seeded
// calibration sets, quantize_int8 alone on a graph, and a node by name.
#pragma once

#include <catch2/catch.hpp>

#include <ostream>
#include <string>
#include <vector>

#include "compilers/passes/pass_runner.h"
#include "compilers/quantize/calibrate.h"
#include "tests/support/graph_builder.h"

namespace kiln::testing {

// n seeded uniform samples of shape `sample`, one input.
inline CalibrationSet random_set(int64_t n, Shape sample, uint32_t seed) {
  Shape shape{n};
  shape.insert(shape.end(), sample.begin(), sample.end());
  return CalibrationSet{{GraphBuilder::random(shape, seed)}, "test"};
}

inline Result<std::vector<PassRecord>> quantize(Graph& g, const Int8Options& int8, std::ostream* log = nullptr,
                                                std::vector<std::string> keep_fp32 = {}) {
  PassRunOptions options;
  options.int8 = int8;
  options.keep_fp32 = std::move(keep_fp32);
  options.log = log;
  return run_passes(g, {"quantize_int8"}, options);
}

inline const Node& node_named(const Graph& g, const std::string& name) {
  for (const Node& n : g.nodes)
    if (n.name == name) return n;
  FAIL("no node " << name);
  return g.nodes.front();
}

}  // namespace kiln::testing
