#include "perfmodel/microbench/speed_drift.h"

#include <cstdio>

#include "perfmodel/measurement.h"
#include "perfmodel/microbench/foreign_load.h"
#include "perfmodel/microbench/peak.h"

namespace kiln::perf {

Result<std::vector<SpeedReading>> speed_probe(const TargetFingerprint& fp, const BenchPlanOptions& plan) {
  // The quick peak (512^3, 40 ms a thread count): a ratio needs no more, and the run's first point
  // must not wait (an interrupted run keeps what it measured; under sanitizers the full peak took
  // seconds).
  BenchPlanOptions quick = plan;
  quick.quick = true;
  std::vector<SpeedReading> out;
  for (BenchPoint& p : peak_points(fp, quick, nullptr)) {
    if (p.record.dtype != "f32") continue;
    Measurement m = p.record;
    const ForeignLoadMeter foreign;
    KILN_TRY(p.measure(m));
    out.push_back({m.threads, m.throughput, foreign.busy_cpus().value_or(0.0) > kLoadSlack});
  }
  return out;
}

std::vector<SpeedDrift> speed_drift(const std::vector<SpeedReading>& start, const std::vector<SpeedReading>& end) {
  std::vector<SpeedDrift> out;
  for (const SpeedReading& s : start)
    for (const SpeedReading& e : end)
      if (s.threads == e.threads && s.gflops > 0 && e.gflops > 0) out.push_back({s.threads, s.gflops, e.gflops, s.loaded || e.loaded});
  return out;
}

std::string speed_drift_text(const SpeedDrift& d) {
  char text[160];
  std::snprintf(text, sizeof text, "f32 peak at %d thread%s %.1f -> %.1f GFLOP/s (%+.0f%%)%s", d.threads, d.threads == 1 ? "" : "s",
                d.start_gflops, d.end_gflops, 100.0 * d.change(), d.loaded ? " (under load)" : "");
  return text;
}

}  // namespace kiln::perf
