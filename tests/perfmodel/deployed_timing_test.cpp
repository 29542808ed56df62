// Timing a compiled plan as a candidate deploys it: instances side by side, every instance's
// timed runs pooled, the arguments checked.
#include <catch2/catch.hpp>

#include "compilers/lower/to_plan.h"
#include "compilers/passes/pass_runner.h"
#include "compilers/passes/pipeline.h"
#include "perfmodel/deployed_timing.h"
#include "perfmodel/microbench/host_interference.h"
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

TEST_CASE("rounds combine as the median of their medians, the worst p99 and every run", "[perfmodel][timing]") {
  // A slow spell in the middle round: the median of the rounds drops it, a pooled median would not.
  const std::vector<Timing> rounds = {{1.0, 0.9, 1.1, 10, 1.2}, {3.0, 2.8, 3.3, 10, 3.5}, {1.2, 1.0, 1.3, 10, 1.4}};
  const Timing t = combine_rounds(rounds);
  CHECK(t.median_ms == Approx(1.2));
  CHECK(t.p10_ms == Approx(1.0));
  CHECK(t.p90_ms == Approx(1.3));
  CHECK(t.p99_ms == Approx(3.5));
  CHECK(t.runs == 30);
  CHECK(combine_rounds({rounds[0], rounds[2]}).median_ms == Approx(1.1));  // even count: the middle two's mean
  CHECK(combine_rounds({}).runs == 0);

  const RoundOptions split = candidate_round_options(20, 3);
  CHECK(split.first.min_runs == 7);  // 3 x 7 >= 20
  CHECK(split.first.max_runs == 35);
  CHECK(split.first.warmup == candidate_timing_options(20).warmup);
  CHECK(split.later.warmup == 1);
  CHECK(split.first.budget_ms * 3 == Approx(candidate_timing_options(20).budget_ms));
}

TEST_CASE("deployments are timed round after round, each once per round", "[perfmodel][timing]") {
  const Plan plan = small_conv_plan();
  TimingOptions first, later;
  first.warmup = 1;
  first.min_runs = first.max_runs = 3;
  later = first;
  later.min_runs = later.max_runs = 2;
  std::vector<std::pair<int, size_t>> order;
  int before = 0;
  RoundHooks hooks;
  hooks.before = [&](int round, size_t i) {
    CHECK(static_cast<int>(order.size()) == before++);  // each timing announced just before it is taken
    CHECK(round == static_cast<int>(order.size() / 2) + 1);
    CHECK(i == order.size() % 2);
  };
  hooks.on_timed = [&](int round, size_t i, const Timing& t) {
    CHECK(t.median_ms > 0);
    order.emplace_back(round, i);
  };
  auto timed = time_deployed_in_rounds({{&plan, 1, 1}, {&plan, 1, 2}}, 3, first, later, hooks);
  REQUIRE(timed);
  REQUIRE(timed->size() == 2);
  CHECK(order == std::vector<std::pair<int, size_t>>{{1, 0}, {1, 1}, {2, 0}, {2, 1}, {3, 0}, {3, 1}});
  CHECK((*timed)[0].runs == 3 + 2 + 2);          // one instance
  CHECK((*timed)[1].runs == 2 * (3 + 2 + 2));    // two instances, each timed
  CHECK((*timed)[0].median_ms > 0);

  auto no_rounds = time_deployed_in_rounds({{&plan, 1, 1}}, 0, first, later);
  REQUIRE_FALSE(no_rounds);
  CHECK(no_rounds.error().code == ErrorCode::invalid_argument);
  auto no_plan = time_deployed_in_rounds({{nullptr, 1, 1}}, 1, first, later);
  REQUIRE_FALSE(no_plan);
  CHECK(no_plan.error().code == ErrorCode::invalid_argument);
}

TEST_CASE("kiln optimize waits while the host slows threads down, within its budget", "[perfmodel][timing]") {
  std::vector<std::pair<int, bool>> asked;
  int slow_readings = 2;  // the first two probes see the slow mode, then it ends
  HostInterference host(nullptr, [&](int threads, bool fresh) {
    asked.emplace_back(threads, fresh);
    return slow_readings-- > 0 ? 1.0 : 0.0;
  });
  SettleOptions quick;
  std::vector<double> paused;
  double foreign_cpus = 0;
  quick.pause = [&](double seconds) {
    paused.push_back(seconds);
    return foreign_cpus;
  };
  quick.first_step_s = 0.01;
  quick.step_s = 0.02;
  double budget = 1.0;
  CHECK_FALSE(wait_for_full_speed(host, 1, budget, nullptr, quick));  // one thread: not probed
  CHECK(asked.empty());
  CHECK_FALSE(wait_for_full_speed(host, 2, budget, nullptr, quick));  // slow, slow, then full speed
  CHECK(asked == std::vector<std::pair<int, bool>>{{2, false}, {2, true}, {2, true}});
  CHECK(paused == std::vector<double>{0.01, 0.02});
  CHECK(budget == Approx(0.97));

  slow_readings = 1000;  // never ends: the budget runs out and the caller is told
  budget = 0.05;
  CHECK(wait_for_full_speed(host, 2, budget, nullptr, quick));
  CHECK(budget <= 1e-9);
  paused.clear();
  CHECK(wait_for_full_speed(host, 2, budget, nullptr, quick));  // nothing left: no more waiting
  CHECK(paused.empty());

  // Other processes busy (a parallel test run): the host is not to blame, the rest of the budget goes.
  budget = 10;
  foreign_cpus = 1.2;
  CHECK(wait_for_full_speed(host, 2, budget, nullptr, quick));
  CHECK(paused == std::vector<double>{0.01});
  CHECK(budget == 0);
}
