#include "perfmodel/microbench/thread_pace.h"

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <strings.h>

#include "compilers/lower/to_plan.h"
#include "compilers/passes/pass_runner.h"
#include "perfmodel/microbench/kernel_sweep.h"
#include "perfmodel/microbench/timing.h"

namespace kiln::perf {

double thread_pace_lost_cpus(const ThreadPace& pace) {
  const double s = pace.speedup();
  if (!(s > 0) || s >= 1) return 0;
  return static_cast<double>(pace.threads) * (1 - s);
}

std::string omp_passive_wait_warning() {
  const char* policy = std::getenv("OMP_WAIT_POLICY");
  if (!policy || strcasecmp(policy, "passive") != 0) return "";
  return "OMP_WAIT_POLICY=" + std::string(policy) +
         ": OpenMP threads sleep between kernels, and waking them adds a fixed time (about 0.06 ms on a 2-vCPU VM) to "
         "every multi-thread kernel that kiln, deployed with the default policy, does not pay; unset it to time "
         "multi-thread runs as they will run";
}

Result<ThreadPaceProbe> ThreadPaceProbe::create(int threads) {
  KILN_REQUIRE(threads > 1, invalid_argument, "the thread pace probe compares one thread with more: got ", threads);
  const SweepShape add{SweepOp::add, 1, 32, 32, 112, 112};
  Graph g = sweep_graph(add);
  PassRunOptions options;
  options.check_numerics = false;
  KILN_TRY(run_passes(g, sweep_pipeline("f32"), options).status());
  const Plan plan = graph_to_plan(g);
  ThreadPaceProbe probe;
  probe.threads_ = threads;
  KILN_ASSIGN(one, Engine::create(plan, {1, nullptr}));
  KILN_ASSIGN(many, Engine::create(plan, {threads, nullptr}));
  probe.one_ = std::move(one);
  probe.many_ = std::move(many);
  uint32_t seed = 3;
  for (ValueId in : g.inputs) probe.inputs_.push_back(sweep_random_tensor(sym_shape_concrete(g.value(in).type.shape), seed++));
  return probe;
}

Result<ThreadPace> ThreadPaceProbe::measure() {
  constexpr int kRuns = 9;
  std::vector<double> one_ms, many_ms;
  const auto timed = [&](Engine& e, std::vector<double>* out) -> Status {
    const auto start = std::chrono::steady_clock::now();
    KILN_TRY(e.run(inputs_).status());
    if (out) out->push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count());
    return Status::ok();
  };
  KILN_TRY(timed(*one_, nullptr));  // warm-up: first touch of the arena and the thread pool
  KILN_TRY(timed(*many_, nullptr));
  for (int r = 0; r < kRuns; ++r) {
    KILN_TRY(timed(*one_, &one_ms));
    KILN_TRY(timed(*many_, &many_ms));
  }
  std::sort(one_ms.begin(), one_ms.end());
  std::sort(many_ms.begin(), many_ms.end());
  return ThreadPace{threads_, nearest_rank(one_ms, 0.5), nearest_rank(many_ms, 0.5)};
}

}  // namespace kiln::perf
