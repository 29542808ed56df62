#include "perfmodel/microbench/device_timing.h"
#include "perfmodel/microbench/timing.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <string>

namespace kiln::perf {

namespace {

// `plan`'s engine with every batch replayed as a CUDA Graph: the sweep records device time, which at
// large batches is what a step-by-step launch costs too (the kernels outlast their launches there),
// and the engine runs every batch so by default. Errors carry `point`.
Result<std::unique_ptr<DeviceEngine>> graphed_engine(DeviceBackend& backend, const Plan& plan, const DeviceEngineOptions& options,
                                                     const std::string& point) {
  if (Status supported = backend.check_plan(plan, options); !supported) return supported.with_context(point);
  DeviceEngineOptions engine_options = options;
  engine_options.graph_max_batch = std::numeric_limits<int64_t>::max();
  auto engine = backend.create_engine(plan, engine_options);
  if (!engine) return engine.status().with_context(point);
  return std::move(*engine);
}

}  // namespace

Status device_point_measure(DeviceBackend& backend, const Plan& plan, const std::vector<Tensor>& inputs,
                            const DeviceEngineOptions& options, const OpStepFilter& is_op_step,
                            const DevicePointTiming& timing, Measurement& m) {
  const std::string point = m.key + " " + m.dtype + ": ";
  KILN_ASSIGN(engine, graphed_engine(backend, plan, options, point));
  if (auto ran = engine->run(inputs); !ran) return ran.status().with_context(point + "running: ");

  const std::vector<EngineStep>& steps = engine->steps();
  size_t first = steps.size();
  for (size_t i = 0; i < steps.size(); ++i)
    if (is_op_step(steps[i])) {
      first = i;
      break;
    }
  KILN_REQUIRE(first < steps.size(), internal, point, "no step of the plan is the op");
  for (size_t i = first; i < steps.size(); ++i)
    KILN_REQUIRE(is_op_step(steps[i]), internal, point, "the op's steps are not the plan's last ones (step ", i, ", '",
                 steps[i].node, "', is not the op's)");

  // The whole plan first: its time sizes the iterations and the repeats of the op's steps.
  auto probe = engine->time_on_device(1, 3);
  if (!probe) return probe.status().with_context(point + "timing: ");
  std::sort(probe->begin(), probe->end());
  const double estimate = std::max((*probe)[probe->size() / 2], 1e-4);
  for (double warmed = 0; warmed < timing.warm_clock_ms;) {
    const int batch = std::clamp(static_cast<int>(std::ceil(timing.warm_clock_ms / estimate / 4)), 1, 1000);
    auto warm = engine->time_on_device(0, batch);
    if (!warm) return warm.status().with_context(point + "warming the clock: ");
    double spent = 0;
    for (double ms : *warm) spent += ms;
    warmed += std::max(spent, 1e-3);  // a broken timer must not spin forever
  }
  const int iters = std::clamp(static_cast<int>(timing.budget_ms / estimate), timing.min_iters, timing.max_iters);
  auto total = engine->time_on_device(timing.warmup, iters);
  if (!total) return total.status().with_context(point + "timing: ");
  std::sort(total->begin(), total->end());
  m.total_median_ms = nearest_rank(*total, 0.5);

  // The op's steps cost at most the whole plan: enough repeats that one launch lasts min_launch_ms.
  const int repeat = std::clamp(static_cast<int>(std::ceil(timing.min_launch_ms / std::max(m.total_median_ms, 1e-4))), 1, 64);
  auto op = engine->time_steps_on_device(first, steps.size() - first, repeat, timing.warmup, iters);
  if (!op) return op.status().with_context(point + "timing the op: ");
  KILN_REQUIRE(!op->empty(), internal, point, "no timed launches");
  std::sort(op->begin(), op->end());
  m.median_ms = nearest_rank(*op, 0.5);
  m.p10_ms = nearest_rank(*op, 0.1);
  m.p90_ms = nearest_rank(*op, 0.9);
  m.runs = static_cast<int>(op->size());
  m.throughput = m.median_ms > 0 ? 2.0 * m.macs / (m.median_ms * 1e6) : 0;  // GFLOP/s
  m.backend = std::string(backend.name());
  m.kernel.clear();
  for (size_t i = first; i < steps.size(); ++i) {
    m.kernel += (m.kernel.empty() ? "" : "+") + steps[i].kernel;
    m.layout = steps[i].output_layout;
  }
  return Status::ok();
}

Status device_host_link_measure(DeviceBackend& backend, const Plan& plan, const std::vector<Tensor>& inputs,
                                const DeviceEngineOptions& options, const DevicePointTiming& timing, Measurement& m) {
  const std::string point = m.key + ": ";
  KILN_ASSIGN(engine, graphed_engine(backend, plan, options, point));
  const auto run_ms = [&]() -> Result<double> {
    const auto start = std::chrono::steady_clock::now();
    auto ran = engine->run(inputs);
    if (!ran) return ran.status().with_context(point + "running: ");
    return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  };
  KILN_ASSIGN(first_ms, run_ms());  // captures the graph
  const int iters = std::clamp(static_cast<int>(timing.budget_ms / std::max(first_ms, 1e-3)), timing.min_iters, timing.max_iters);
  for (int i = 0; i < timing.warmup; ++i) KILN_TRY(run_ms().status());
  std::vector<double> whole;
  for (int i = 0; i < iters; ++i) {
    KILN_ASSIGN(ms, run_ms());
    whole.push_back(ms);
  }
  auto device = engine->time_on_device(timing.warmup, iters);
  if (!device) return device.status().with_context(point + "timing: ");
  KILN_REQUIRE(!device->empty(), internal, point, "no timed launches");
  std::sort(whole.begin(), whole.end());
  std::sort(device->begin(), device->end());
  const double device_ms = nearest_rank(*device, 0.5);
  m.total_median_ms = nearest_rank(whole, 0.5);
  m.median_ms = std::max(m.total_median_ms - device_ms, 0.0);
  m.p10_ms = std::max(nearest_rank(whole, 0.1) - device_ms, 0.0);
  m.p90_ms = std::max(nearest_rank(whole, 0.9) - device_ms, 0.0);
  m.runs = iters;
  m.throughput = m.median_ms > 0 ? m.bytes / (m.median_ms * 1e6) : 0;  // GB/s
  m.backend = std::string(backend.name());
  m.kernel.clear();
  for (const EngineStep& step : engine->steps()) m.kernel += (m.kernel.empty() ? "" : "+") + step.kernel;
  return Status::ok();
}

}  // namespace kiln::perf
