#include "perfmodel/microbench/foreign_load.h"

#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <string>

namespace kiln::perf {
namespace {

// Busy seconds of all CPUs: user, nice, system, irq, softirq and steal (another guest on our
// vCPU is noise too); idle and iowait are not busy.
std::optional<double> all_cpus_busy_s() {
  std::ifstream in("/proc/stat");
  std::string cpu;
  long long user = 0, nice = 0, system = 0, idle = 0, iowait = 0, irq = 0, softirq = 0, steal = 0;
  if (!(in >> cpu >> user >> nice >> system >> idle >> iowait >> irq >> softirq >> steal) || cpu != "cpu")
    return std::nullopt;
  const long ticks = sysconf(_SC_CLK_TCK);
  return static_cast<double>(user + nice + system + irq + softirq + steal) / static_cast<double>(ticks > 0 ? ticks : 100);
}

double self_cpu_s() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  const auto s = [](const timeval& t) { return static_cast<double>(t.tv_sec) + static_cast<double>(t.tv_usec) * 1e-6; };
  return s(u.ru_utime) + s(u.ru_stime);
}

}  // namespace

ForeignLoadMeter::ForeignLoadMeter()
    : start_busy_s_(all_cpus_busy_s()), start_self_s_(self_cpu_s()), start_(std::chrono::steady_clock::now()) {}

std::optional<double> ForeignLoadMeter::busy_cpus() const {
  const auto busy = all_cpus_busy_s();
  if (!busy || !start_busy_s_) return std::nullopt;
  const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  if (wall <= 0) return 0.0;
  // /proc/stat counts in ticks, each CPU's may fall on either side of the interval: up to one tick
  // per CPU is the counter's own noise, not load. Without that slack a single 10 ms tick over a
  // 2 ms point read as 5 busy CPUs on a 2-CPU machine, and short points were flagged at random.
  const long ticks = sysconf(_SC_CLK_TCK);
  const long online = sysconf(_SC_NPROCESSORS_ONLN);
  const double cpus = static_cast<double>(online > 0 ? online : 1);
  const double resolution_s = cpus / static_cast<double>(ticks > 0 ? ticks : 100);
  const double foreign_s = *busy - *start_busy_s_ - (self_cpu_s() - start_self_s_);
  return std::clamp((foreign_s - resolution_s) / wall, 0.0, cpus);
}

}  // namespace kiln::perf
