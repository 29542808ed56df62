// How many CPUs other processes (and the hypervisor) kept busy while a benchmark point ran: the
// busy time of all CPUs in /proc/stat minus this process's own CPU time (getrusage), over the
// wall time. The 1-minute load average cannot tell: it counts the benchmark's own threads and
// lags a minute, so a quiet 1-thread sweep interleaved with 2-thread points read as "loaded".
#pragma once

#include <chrono>
#include <optional>

namespace kiln::perf {

class ForeignLoadMeter {
 public:
  ForeignLoadMeter();  // starts counting
  // CPUs busy with other work since construction, 0 up to the online CPUs. /proc/stat counts
  // ticks (10 ms), so one tick per CPU is taken as noise: a point shorter than a few ticks reads
  // as unloaded unless other work filled several ticks; nullopt where /proc/stat cannot be read.
  std::optional<double> busy_cpus() const;

 private:
  std::optional<double> start_busy_s_;
  double start_self_s_ = 0;
  std::chrono::steady_clock::time_point start_;
};

}  // namespace kiln::perf
