// Whether this machine's threads still help each other. A shared VM can fall into a mode where two
// vCPUs handle cached data far slower together than apart (the Zen 4 VM of 2026-11-27: a streaming
// Add took 3.3x its profiled time on two threads, longer than on one, for minutes at a time, while
// /proc/stat showed no other work and no steal; data from DRAM and convolutions were unaffected):
// the host's doing, which the foreign-load meter cannot see. The probe times one streaming Add
// (32 x 112 x 112 floats, 4.8 MB with its output) on one thread and on T; T threads slower than one
// means CPUs lost to the host, counted as foreign load of the multi-thread points measured
// meanwhile, so the fit drops them as it drops loaded ones (docs/benchmark-store.md).
#pragma once

#include <memory>
#include <vector>

#include "kernels/core/status.h"
#include "kernels/core/tensor.h"
#include "kernels/engine.h"

namespace kiln::perf {

struct ThreadPace {
  int threads = 1;
  double one_thread_ms = 0;  // median, the Add on one thread
  double threads_ms = 0;     // median, the same Add on `threads`
  double speedup() const { return threads_ms > 0 ? one_thread_ms / threads_ms : 0; }
};

// CPUs' worth lost to other work when the threads together are slower than one alone (below
// kThreadPaceNoise x its speed): threads x (1 - speedup), and at least one, else 0. A memory-bound
// op need not speed up with threads (one thread may fill the memory bus), but it does not slow
// down on a quiet machine. At least one CPU, so that every point measured in that mode is flagged
// (kLoadSlack): the mode is not a share of the work lost. On the Zen 3 VM of 2026-11-29, at
// 0.83-0.92x, every two-thread int8 conv took about 0.065 ms more (0.005 ms ones 0.07), which the
// proportional count (0.2-0.3 CPUs) left unflagged.
inline constexpr double kThreadPaceNoise = 0.95;
double thread_pace_lost_cpus(const ThreadPace& pace);

class ThreadPaceProbe {
 public:
  // Compiles the Add for one thread and for `threads` (> 1) once; measure() only runs them.
  static Result<ThreadPaceProbe> create(int threads);
  // About 20 ms: a few runs of each, interleaved so both see the same minute of the machine.
  Result<ThreadPace> measure();

 private:
  int threads_ = 2;
  std::unique_ptr<Engine> one_, many_;
  std::vector<Tensor> inputs_;
};

}  // namespace kiln::perf
