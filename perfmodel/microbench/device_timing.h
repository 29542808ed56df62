// Timing one benchmark point on an accelerator: a compiled one-op plan's engine is built at the
// point's precision, run once (inputs copied in), then timed on the device with CUDA events:
// the whole plan with time_on_device (total_median_ms: input staging, producers and op, as GPU
// frameworks are timed) and the op's own steps alone with time_steps_on_device (median, p10, p90:
// what the op costs inside a model's graph, without its producer or the input copies). The
// device's time does not depend on the host's load, so no foreign-load filter applies.
#pragma once

#include <functional>
#include <vector>

#include "kernels/core/status.h"
#include "kernels/device/device_backend.h"
#include "perfmodel/measurement.h"

namespace kiln::perf {

struct DevicePointTiming {
  int warmup = 3;
  int min_iters = 10;
  int max_iters = 50;
  double budget_ms = 20;  // per timing: iterations = budget / the plan's time, within [min, max]
  // A launch of the op's steps lasts at least this long (repeats back to back), well above the
  // events' resolution (~0.5 us) and the graph launch's own latency.
  double min_launch_ms = 0.05;
  // Before timing, the plan is replayed until this much device time has passed: the GPU idles while
  // the host builds each point, and an idle GPU's clock is low (an H200's SM clock reads 345 MHz),
  // whereas a model's kernels each follow others. Without it the smallest points (a few
  // microseconds, 3-5 ms of work in all) may be timed on a rising clock; a lead from the H200's
  // batch-1 over-predictions (docs/cuda-backend.md), cheap to rule out (1,349 points: +14 s).
  double warm_clock_ms = 10;
};

// Which engine steps are the op (the rest: producers).
using OpStepFilter = std::function<bool(const EngineStep&)>;

// Fills `m`'s timing (median_ms, p10_ms, p90_ms, runs, total_median_ms, throughput from m.macs),
// kernel (the op steps' implementations, "+"-joined), layout and backend ("cuda"). The op's steps
// must be the plan's last ones (producers first). Errors name the point (m.key, m.dtype).
Status device_point_measure(DeviceBackend& backend, const Plan& plan, const std::vector<Tensor>& inputs,
                            const DeviceEngineOptions& options, const OpStepFilter& is_op_step,
                            const DevicePointTiming& timing, Measurement& m);

// A host_link point (perfmodel/host_link.h): whole runs of `plan` through DeviceEngine::run (the
// inputs copied from pageable memory, the steps, the outputs copied back, one synchronization),
// timed on the host's clock, less the steps' device time. Fills median_ms (that difference, at the
// medians; p10/p90 likewise), total_median_ms (the whole run), runs, and throughput (GB/s over
// m.bytes, which the caller sets to the inputs' and outputs' bytes).
Status device_host_link_measure(DeviceBackend& backend, const Plan& plan, const std::vector<Tensor>& inputs,
                                const DeviceEngineOptions& options, const DevicePointTiming& timing, Measurement& m);

}  // namespace kiln::perf
