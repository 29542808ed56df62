#include "perfmodel/model_runs.h"

#include <stdlib.h>

#include "perfmodel/measurement.h"
#include "perfmodel/precision_compile.h"
#include "perfmodel/store.h"

namespace kiln::perf {

Status store_model_runs(const std::string& db, const std::string& target_id, const std::string& label,
                        const std::vector<MeasuredModelRun>& runs) {
  KILN_ASSIGN(store, BenchmarkStore::open(db));
  KILN_ASSIGN(run, store->run_begin(target_id, label));
  double load[1] = {0};
  if (getloadavg(load, 1) != 1) load[0] = 0;
  int64_t stored = 0;
  const Status written = store->transaction([&]() -> Status {
    for (const MeasuredModelRun& r : runs) {
      Measurement m;
      m.kind = kKindModel;
      m.key = r.model + " " + r.precision + " b" + std::to_string(r.batch) + " t" + std::to_string(r.threads);
      m.op = "model";
      m.dtype = precision_dtype(r.precision);
      m.threads = r.threads;
      m.batch = r.batch;
      m.backend = "engine";
      m.kernel = r.model;
      m.median_ms = r.timing.median_ms;
      m.p10_ms = r.timing.p10_ms;
      m.p90_ms = r.timing.p90_ms;
      m.runs = r.timing.runs;
      m.throughput = static_cast<double>(r.batch) * 1000.0 / r.timing.median_ms;
      m.measured_at = utc_now();
      m.load_avg = load[0];
      KILN_TRY(store->measurement_put(target_id, run, m));
      ++stored;
    }
    return Status::ok();
  });
  KILN_TRY(store->run_finish(run, written.ok() ? "complete" : "failed", stored, 0));
  return written;
}

}  // namespace kiln::perf
