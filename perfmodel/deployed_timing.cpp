#include "perfmodel/deployed_timing.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <memory>
#include <thread>
#include <vector>

#include "kernels/engine.h"
#include "kernels/verify/verify.h"

namespace kiln::perf {
namespace {

using Clock = std::chrono::steady_clock;

std::vector<Tensor> one_batch_of_random_inputs(const Plan& plan) {
  const VerifyData random = verify_random_data(plan, 1, 1);
  std::vector<Tensor> inputs;
  for (size_t i = 0; i < plan.inputs.size(); ++i) {
    const PlanInput& in = plan.inputs[i];
    inputs.push_back(batch_slice(random.inputs[i], sym_shape_concrete(plan.slot_types[static_cast<size_t>(in.slot)].shape),
                                 in.type.dtype, 0, 1));
  }
  return inputs;
}

}  // namespace

Result<Timing> time_deployed(const Plan& plan, int threads, int instances, const TimingOptions& options) {
  KILN_REQUIRE(threads >= 1 && instances >= 1, invalid_argument, "time_deployed needs threads and instances >= 1, got ",
               threads, " and ", instances);
  std::vector<std::unique_ptr<Engine>> engines;
  for (int i = 0; i < instances; ++i) {
    KILN_ASSIGN(engine, Engine::create(plan, {threads, nullptr}));
    engines.push_back(std::move(engine));
  }
  const std::vector<Tensor> inputs = one_batch_of_random_inputs(plan);

  std::vector<std::vector<double>> times(static_cast<size_t>(instances));
  std::vector<Status> failed(static_cast<size_t>(instances), Status::ok());
  std::atomic<int> still_timing{instances};
  auto run_instance = [&](size_t i) {
    Engine& engine = *engines[i];
    auto run_once = [&]() -> bool {
      if (auto out = engine.run(inputs); !out) {
        failed[i] = out.status();
        return false;
      }
      return true;
    };
    bool ok = true;
    for (int w = 0; ok && w < options.warmup; ++w) ok = run_once();
    double spent = 0;
    while (ok && static_cast<int>(times[i].size()) < options.max_runs &&
           (static_cast<int>(times[i].size()) < options.min_runs || spent < options.budget_ms)) {
      const auto t0 = Clock::now();
      ok = run_once();
      const double ms = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
      spent += ms;
      if (ok) times[i].push_back(ms);
    }
    still_timing.fetch_sub(1);
    // Keep the load on until every neighbour has its runs.
    while (ok && still_timing.load() > 0) ok = run_once();
    if (!ok) still_timing.store(0);
  };
  if (instances == 1) {
    run_instance(0);
  } else {
    std::vector<std::thread> workers;
    for (int i = 0; i < instances; ++i) workers.emplace_back(run_instance, static_cast<size_t>(i));
    for (std::thread& w : workers) w.join();
  }
  for (const Status& s : failed) KILN_TRY(s);
  std::vector<double> all;
  for (const auto& t : times) all.insert(all.end(), t.begin(), t.end());
  KILN_REQUIRE(!all.empty(), internal, "time_deployed: no timed runs (max_runs ", options.max_runs, ")");
  std::sort(all.begin(), all.end());
  return Timing{nearest_rank(all, 0.5), nearest_rank(all, 0.1), nearest_rank(all, 0.9), static_cast<int>(all.size()),
                nearest_rank(all, 0.99)};
}

namespace {

double middle(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 == 1 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

}  // namespace

Timing combine_rounds(const std::vector<Timing>& rounds) {
  Timing out;
  if (rounds.empty()) return out;
  std::vector<double> medians, p10s, p90s;
  for (const Timing& t : rounds) {
    medians.push_back(t.median_ms);
    p10s.push_back(t.p10_ms);
    p90s.push_back(t.p90_ms);
    out.p99_ms = std::max(out.p99_ms, t.p99_ms);
    out.runs += t.runs;
  }
  out.median_ms = middle(medians);
  out.p10_ms = middle(p10s);
  out.p90_ms = middle(p90s);
  return out;
}

RoundOptions candidate_round_options(int runs, int rounds) {
  rounds = std::max(rounds, 1);
  const TimingOptions whole = candidate_timing_options(runs);
  RoundOptions r;
  r.first.min_runs = (std::max(runs, 1) + rounds - 1) / rounds;
  r.first.max_runs = 5 * r.first.min_runs;
  r.first.budget_ms = whole.budget_ms / rounds;
  r.first.warmup = whole.warmup;
  r.later = r.first;
  r.later.warmup = 1;
  return r;
}

Result<std::vector<Timing>> time_deployed_in_rounds(const std::vector<DeployedRun>& runs, int rounds, const TimingOptions& first,
                                                    const TimingOptions& later, const RoundHooks& hooks) {
  KILN_REQUIRE(rounds >= 1, invalid_argument, "time_deployed_in_rounds needs rounds >= 1, got ", rounds);
  std::vector<std::vector<Timing>> per_run(runs.size());
  for (int round = 1; round <= rounds; ++round)
    for (size_t i = 0; i < runs.size(); ++i) {
      const DeployedRun& r = runs[i];
      KILN_REQUIRE(r.plan != nullptr, invalid_argument, "time_deployed_in_rounds: run ", i, " has no plan");
      if (hooks.before) hooks.before(round, i);
      KILN_ASSIGN(t, time_deployed(*r.plan, r.threads, r.instances, round == 1 ? first : later));
      if (hooks.on_timed) hooks.on_timed(round, i, t);
      per_run[i].push_back(t);
    }
  std::vector<Timing> out;
  for (const auto& r : per_run) out.push_back(combine_rounds(r));
  return out;
}

}  // namespace kiln::perf
