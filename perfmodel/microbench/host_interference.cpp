#include "perfmodel/microbench/host_interference.h"

#include <algorithm>
#include <cstdio>
#include <thread>

#include "perfmodel/microbench/foreign_load.h"

namespace kiln::perf {

double HostInterference::lost_cpus(int threads, bool fresh) {
  if (stand_in_) return stand_in_(threads, fresh);
  constexpr double kRepeatSeconds = 15;
  Probe& p = probes_[threads];
  const auto now = std::chrono::steady_clock::now();
  if (p.failed || (!fresh && p.probe && std::chrono::duration<double>(now - p.at).count() < kRepeatSeconds)) return p.lost;
  if (!p.probe) {
    auto created = ThreadPaceProbe::create(threads);
    if (!created) return fail(p, created.error().message);
    p.probe = std::make_unique<ThreadPaceProbe>(std::move(*created));
  }
  auto pace = p.probe->measure();
  if (!pace) return fail(p, pace.error().message);
  p.at = std::chrono::steady_clock::now();
  p.speedup = pace->speedup();
  const double lost = thread_pace_lost_cpus(*pace);
  if (progress_ && (lost > 0) != (p.lost > 0)) {
    char line[256];
    if (lost > 0)
      std::snprintf(line, sizeof line,
                    "kiln: %d threads now run a streaming Add at %.2fx the speed of one thread (%.3f vs %.3f ms): the host is "
                    "slowing them down\n",
                    threads, pace->speedup(), pace->threads_ms, pace->one_thread_ms);
    else
      std::snprintf(line, sizeof line, "kiln: %d threads are faster than one again (%.2fx)\n", threads, pace->speedup());
    *progress_ << line << std::flush;
  }
  p.lost = lost;
  return lost;
}

double HostInterference::speedup(int threads) const {
  auto it = probes_.find(threads);
  return it == probes_.end() ? 0 : it->second.speedup;
}

// Without a probe the work goes on unchecked (the foreign-load meter alone), said once.
double HostInterference::fail(Probe& p, const std::string& why) {
  p.failed = true;
  if (progress_) *progress_ << "kiln: thread pace probe unavailable (" << why << "): multi-thread points are not checked for host interference\n";
  return 0;
}

bool wait_for_full_speed(HostInterference& host, int threads, double& budget_left_s, std::ostream* progress,
                         const SettleOptions& options) {
  if (threads < 2) return false;
  if (host.lost_cpus(threads) <= 0) return false;
  if (progress && budget_left_s > 0) {
    char line[160];
    std::snprintf(line, sizeof line, "kiln: waiting up to %.0f s for %d threads to run at full speed before timing on them\n",
                  budget_left_s, threads);
    *progress << line << std::flush;
  }
  const auto pause = [&](double seconds) -> double {
    if (options.pause) return options.pause(seconds);
    ForeignLoadMeter meter;
    std::this_thread::sleep_for(std::chrono::duration<double>(seconds));
    return meter.busy_cpus().value_or(0.0);
  };
  for (bool first = true; budget_left_s > 0; first = false) {
    const double step = std::min(first ? options.first_step_s : options.step_s, budget_left_s);
    const double foreign = pause(step);
    budget_left_s -= step;
    if (foreign >= kForeignCpusNotTheHost) {
      if (progress) {
        char line[200];
        std::snprintf(line, sizeof line, "kiln: other processes keep %.1f CPUs busy: that, not the host, slows the threads; timing on\n",
                      foreign);
        *progress << line << std::flush;
      }
      budget_left_s = 0;
      return true;
    }
    if (host.lost_cpus(threads, /*fresh=*/true) <= 0) return false;
  }
  return true;
}

}  // namespace kiln::perf
