// A Plan is what kernels execute: values live in numbered slots, steps are ops over slots in
// execution order. compilers/ lowers a Graph into a Plan; kernels/ never sees the Graph.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "kernels/op_def.h"

namespace kiln {

struct PlanStep {
  OpKind op;
  Attrs attrs;
  std::vector<int> inputs;   // slot per input; -1 for an absent optional input
  std::vector<int> outputs;  // slot per output; -1 for an unused optional output
  std::string name;          // the node's name, for errors
};

struct PlanInput {
  int slot;
  std::string name;
  ValueType type;  // dims may be symbolic ("batch"): checked for rank, dtype and known sizes
};

struct Plan {
  int num_slots = 0;
  std::vector<ValueType> slot_types;  // per slot, from shape inference (concrete in compiled plans)
  std::vector<std::pair<int, Tensor>> constants;  // slot, value
  std::vector<PlanInput> inputs;
  std::vector<std::pair<int, std::string>> outputs;  // slot, name
  std::vector<PlanStep> steps;
};

}  // namespace kiln
