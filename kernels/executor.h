// The reference executor: runs a Plan step by step with the reference kernels, allocating each
// output from its op's shape inference and freeing every value after its last use.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <vector>

#include "kernels/core/limits.h"
#include "kernels/plan.h"

namespace kiln {

// Largest value the executor allocates by default (16 GiB, the limit on one .npy array too).
inline constexpr int64_t kDefaultMaxValueBytes = limits::kMaxValueBytes;

struct ExecuteOptions {
  bool keep_all_values = false;  // keep intermediates (for debugging and pass verification)
  // A step whose output would need more bytes than this fails with limit_exceeded before
  // anything is allocated.
  int64_t max_value_bytes = kDefaultMaxValueBytes;
  // TF32 emulation (kernels/verify/precision_emulation.h) rounds operands here: the hook gets
  // shallow copies of what a step reads and may replace them. May be empty.
  std::function<void(const PlanStep&, std::span<Tensor> inputs)> step_inputs;
  // Threads for the heavy reference kernels (RunContext::threads); 0: every CPU this process may
  // use. The outputs do not depend on it.
  int threads = 0;
};

struct ExecuteResult {
  std::vector<Tensor> outputs;       // in Plan::outputs order
  std::vector<Tensor> slot_values;   // filled only with keep_all_values
};

// Errors name the graph input or the node (and op) that failed.
Result<ExecuteResult> execute_reference(const Plan& plan, const std::vector<Tensor>& inputs,
                                        const ExecuteOptions& options = {});

// Checks one input against its declared type: dtype, rank and every known dimension.
Status check_input(const PlanInput& declared, const Tensor& value);

// Checks a compiled step against its op before fast kernels trust the plan's types: the arity,
// and that the op's own inference, run on the input slots' types (and constant values), gives
// exactly the output slots' dtypes and shapes. A .kiln file is input like any other: a step
// whose recorded shapes disagree with its op is refused, naming the node.
// `constants` is the plan's constant per slot (nullptr where none).
Status check_step_types(const Plan& plan, const PlanStep& step, const std::vector<const Tensor*>& constants);

}  // namespace kiln
