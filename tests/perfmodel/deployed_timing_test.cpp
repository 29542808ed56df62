// Timing a compiled plan as a candidate deploys it: instances side by side, every instance's
// timed runs pooled, the arguments checked.
#include <catch2/catch.hpp>

#include "compilers/lower/to_plan.h"
#include "compilers/passes/pass_runner.h"
#include "compilers/passes/pipeline.h"
#include "perfmodel/deployed_timing.h"
#include "perfmodel/microbench/kernel_sweep.h"

using namespace kiln;
using namespace kiln::perf;

namespace {

Plan small_conv_plan() {
  Graph g = sweep_graph(SweepShape{SweepOp::conv, 2, 8, 8, 14, 14, 3, 1, 1});
  PassRunOptions options;
  options.check_numerics = false;
  REQUIRE(run_passes(g, sweep_pipeline("f32"), options));
  return graph_to_plan(g);
}

}  // namespace

TEST_CASE("deployed timing pools the timed runs of every instance", "[perfmodel][timing]") {
  const Plan plan = small_conv_plan();
  TimingOptions options;
  options.warmup = 1;
  options.min_runs = options.max_runs = 4;
  for (int instances : {1, 2}) {
    auto t = time_deployed(plan, 1, instances, options);
    REQUIRE(t);
    CHECK(t->runs == 4 * instances);
    CHECK(t->median_ms > 0);
    CHECK(t->p10_ms <= t->median_ms);
    CHECK(t->median_ms <= t->p90_ms);
  }
}

TEST_CASE("deployed timing refuses zero threads or instances, throughput counts every instance", "[perfmodel][timing]") {
  const Plan plan = small_conv_plan();
  for (auto [threads, instances] : {std::pair{0, 1}, std::pair{1, 0}}) {
    auto t = time_deployed(plan, threads, instances, {});
    REQUIRE_FALSE(t);
    CHECK(t.error().code == ErrorCode::invalid_argument);
  }
  Timing t;
  t.median_ms = 2.0;
  CHECK(deployed_throughput(t, 4, 2) == Approx(4000.0));  // 2 instances x 4 samples every 2 ms
  CHECK(deployed_throughput(Timing{}, 4, 2) == 0.0);
}
