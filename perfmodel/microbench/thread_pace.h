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
#include <string>
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

// CPUs' worth lost to other work: threads x (1 - speedup) when the threads together are slower
// than one alone (two threads at 0.5x: 1 CPU), else 0. A memory-bound op need not speed up with
// threads (one thread may fill the memory bus), but it does not slow down on a quiet machine.
double thread_pace_lost_cpus(const ThreadPace& pace);

// A warning when this process's OpenMP threads sleep between kernels (OMP_WAIT_POLICY=passive, as
// scripts/test.sh sets for tests run side by side), else "". Waking them costs every multi-thread
// kernel a fixed time (about 0.06 ms on the 2-vCPU Zen 3 VM of 2026-11-29: a 0.005 ms int8 conv took
// 0.07 on two threads) that an engine run with the default policy, as kiln deploys it, does not pay.
std::string omp_passive_wait_warning();

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
