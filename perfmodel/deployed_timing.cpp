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

}  // namespace kiln::perf
