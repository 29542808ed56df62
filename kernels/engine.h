// The compiled executor. Built once from a Plan with concrete shapes: it selects a kernel per
// step (kernel_select), lets layouts flow from producers to consumers and inserts conversions
// to plain layout only where a consumer cannot read the producer's layout, plans one arena for
// all intermediates, and then runs the steps without allocating (outputs aside).
#pragma once

#include <memory>
#include <ostream>
#include <string>
#include <vector>

#include "kernels/kernel.h"
#include "kernels/memory_plan.h"
#include "kernels/plan.h"

namespace kiln {

struct EngineOptions {
  int threads = 0;              // 0: the CPU quota of this container (cpu_quota_threads())
  std::ostream* verbose = nullptr;  // when set: which kernel runs each step and why others did not
};

struct EngineStep {
  std::string node;    // the plan step's name; "<value> to plain" for inserted conversions
  std::string kernel;  // implementation name
  std::string output_layout;
  std::string op;  // the plan step's op; "ToPlain" for conversions
};

struct EngineMemory {
  int64_t arena_bytes = 0;        // planned peak of intermediates
  int64_t lower_bound_bytes = 0;  // liveness lower bound in this step order
  int64_t sum_of_buffers_bytes = 0;
  int64_t weight_bytes = 0;       // plan constants (kernels may hold prepacked copies too)
  int64_t scratch_bytes = 0;
  int in_place_steps = 0;         // steps whose output reuses an input's buffer (fused residuals)
};

class Engine {
 public:
  static Result<std::unique_ptr<Engine>> create(const Plan& plan, const EngineOptions& options = {});
  ~Engine();

  // Inputs in Plan::inputs order, plain float/int tensors of the compiled shapes.
  // With `step_ms`, also times every step (steps() order), for profiles; the timing costs a
  // clock read per step.
  Result<std::vector<Tensor>> run(const std::vector<Tensor>& inputs, std::vector<double>* step_ms = nullptr);

  const std::vector<EngineStep>& steps() const;
  const EngineMemory& memory() const;
  int threads() const;

  struct State;  // defined in engine.cpp

 private:
  explicit Engine(std::unique_ptr<State> state);
  std::unique_ptr<State> state_;
};

// Threads this process may use: the cgroup CPU quota (cpu.max) when set, else the CPUs in the
// affinity mask.
int cpu_quota_threads();

}  // namespace kiln
