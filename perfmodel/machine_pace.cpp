#include "perfmodel/machine_pace.h"

#include <cmath>
#include <set>
#include <string>
#include <tuple>

#include "perfmodel/microbench/kernel_sweep.h"
#include "perfmodel/store.h"

namespace kiln::perf {
namespace {

bool is_memory_canary(const std::string& op) { return op == "add" || op == "concat"; }

}  // namespace

std::map<int, PaceCanaries> pace_canaries(const TargetProfile& profile, const std::vector<int>& threads) {
  std::map<std::string, const Measurement*> stored;
  for (const Measurement& m : profile.measurements) {
    if (m.kind != kKindKernel || measured_under_load(m)) continue;
    if ((m.op == "conv" && m.median_ms >= 0.5 && m.median_ms <= 5) ||
        (is_memory_canary(m.op) && m.median_ms >= 0.02 && m.median_ms <= 2))
      stored[measurement_identity(m)] = &m;
  }
  BenchPlanOptions options;
  options.threads = threads;
  std::map<int, PaceCanaries> canaries;
  std::set<std::tuple<int, std::string, std::string>> taken;  // (threads, op, dtype): one point each
  for (BenchPoint& p : sweep_points(profile.target.fingerprint, options, nullptr)) {
    const auto it = stored.find(measurement_identity(p.record));
    if (it == stored.end() || !taken.insert({p.record.threads, p.record.op, p.record.dtype}).second) continue;
    PaceCanaries& c = canaries[p.record.threads];
    c.stored_ms.push_back(it->second->median_ms);
    c.memory.push_back(is_memory_canary(p.record.op));
    c.points.push_back(std::move(p));
  }
  return canaries;
}

MachinePace pace_measure(PaceCanaries& canaries) {
  double log_sum[2] = {0, 0};
  int n[2] = {0, 0};
  for (size_t i = 0; i < canaries.points.size(); ++i) {
    Measurement m = canaries.points[i].record;
    if (!canaries.points[i].measure(m) || !(m.median_ms > 0)) continue;
    log_sum[canaries.memory[i]] += std::log(m.median_ms / canaries.stored_ms[i]);
    ++n[canaries.memory[i]];
  }
  MachinePace pace;
  pace.compute_points = n[0];
  pace.memory_points = n[1];
  pace.compute = n[0] ? std::exp(log_sum[0] / n[0]) : 0.0;
  pace.memory = n[1] ? std::exp(log_sum[1] / n[1]) : 0.0;
  return pace;
}

PlanPrediction pace_calibrated(const PlanPrediction& p, const MachinePace& pace) {
  if (!(pace.compute > 0)) return p;
  PlanPrediction out = p;
  for (StepPrediction& s : out.steps) s.ms *= pace.compute;
  out.total_ms = p.total_ms * pace.compute;
  return out;
}

}  // namespace kiln::perf
