// The CPUs the host takes from this machine's multi-thread work (thread_pace.h), probed again
// when the last probe for that thread count is older than 15 s (the slow mode it catches lasts
// minutes), or at once when asked for a fresh reading. Shared by `kiln bench-target`, which puts
// multi-thread points off while it lasts, and `kiln optimize`, which waits before timing a
// multi-thread candidate.
#pragma once

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <ostream>
#include <string>

#include "perfmodel/microbench/thread_pace.h"

namespace kiln::perf {

class HostInterference {
 public:
  // `progress` (optional) hears when the host starts and stops slowing threads down; `stand_in`
  // (tests) replaces the probe: CPUs lost at these threads, `fresh` asking for a new reading.
  HostInterference(std::ostream* progress, std::function<double(int threads, bool fresh)> stand_in = {})
      : progress_(progress), stand_in_(std::move(stand_in)) {}

  // CPUs' worth lost at `threads` (> 1), 0 when the threads run at full speed or no probe runs.
  double lost_cpus(int threads, bool fresh = false);
  // The last probe's speedup of `threads` over one thread (0: none, or a stand-in).
  double speedup(int threads) const;

 private:
  struct Probe {
    std::unique_ptr<ThreadPaceProbe> probe;
    std::chrono::steady_clock::time_point at;
    double lost = 0;
    double speedup = 0;
    bool failed = false;
  };
  double fail(Probe& p, const std::string& why);
  std::ostream* progress_;
  std::function<double(int, bool)> stand_in_;
  std::map<int, Probe> probes_;
};

// How wait_for_full_speed waits: in steps, the first one short; `pause` sleeps that long and returns
// the CPUs other processes kept busy meanwhile (ForeignLoadMeter; a stand-in in tests).
struct SettleOptions {
  double first_step_s = 1;
  double step_s = 5;
  std::function<double(double seconds)> pause;  // empty: sleep and read /proc/stat
};
// Other work keeping this many CPUs busy explains slow threads without the host: waiting for the
// host then helps nothing (under a parallel test run the other CPU is busy for minutes).
inline constexpr double kForeignCpusNotTheHost = 0.5;

// Before timing work on `threads` (> 1; one thread returns false at once): while the host slows
// that many threads down, waits, taking the time from `budget_left_s` (shared by one measurement's
// waits), and says so on `progress` (optional). Stops waiting, and spends the rest of the budget,
// when other processes keep kForeignCpusNotTheHost CPUs busy. Returns whether the threads are still
// slowed when it stops: the timing that follows then carries the slowdown.
bool wait_for_full_speed(HostInterference& host, int threads, double& budget_left_s, std::ostream* progress,
                         const SettleOptions& options = {});

}  // namespace kiln::perf
