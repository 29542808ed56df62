#include "perfmodel/bench_target.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <memory>
#include <thread>

#include "perfmodel/microbench/bandwidth.h"
#include "perfmodel/microbench/foreign_load.h"
#include "perfmodel/microbench/host_interference.h"
#include "perfmodel/microbench/kernel_sweep.h"
#include "perfmodel/microbench/peak.h"
#include "perfmodel/microbench/sweep_grid.h"
#include "perfmodel/microbench/thread_pace.h"
#include "perfmodel/microbench/weight_reuse.h"

namespace kiln::perf {
namespace {

bool filters_sweep(const BenchTargetOptions& o) { return !o.sweep_ops.empty() || !o.sweep_dtypes.empty(); }

// A sweep filter without --only runs the sweep section alone.
bool wants(const BenchTargetOptions& o, const char* section) {
  if (o.only.empty()) return !filters_sweep(o) || std::string(section) == kSectionSweep;
  return std::find(o.only.begin(), o.only.end(), section) != o.only.end();
}

bool contains(const std::vector<std::string>& list, const std::string& s) { return std::find(list.begin(), list.end(), s) != list.end(); }

std::string joined(const std::vector<std::string>& list, const char* separator = ",") {
  std::string s;
  for (const std::string& x : list) s += (s.empty() ? "" : separator) + x;
  return s;
}

// Keeps the sweep points the filter names and returns the progress line that says how many.
std::string filter_sweep(std::vector<BenchPoint>& points, const BenchTargetOptions& o) {
  const size_t before = points.size();
  std::erase_if(points, [&](const BenchPoint& p) {
    return (!o.sweep_ops.empty() && !contains(o.sweep_ops, p.record.op)) ||
           (!o.sweep_dtypes.empty() && !contains(o.sweep_dtypes, p.record.dtype));
  });
  std::string filter;
  if (!o.sweep_ops.empty()) filter += "--sweep-ops " + joined(o.sweep_ops);
  if (!o.sweep_dtypes.empty()) filter += (filter.empty() ? "" : " ") + std::string("--dtypes ") + joined(o.sweep_dtypes);
  return "[" + std::string(kSectionSweep) + "] " + filter + ": kept " + std::to_string(points.size()) + " of " +
         std::to_string(before) + " points\n";
}

std::string duration_text(double seconds) {
  const int s = static_cast<int>(seconds + 0.5);
  return s >= 60 ? std::to_string(s / 60) + "m" + (s % 60 < 10 ? "0" : "") + std::to_string(s % 60) + "s"
                 : std::to_string(s) + "s";
}

std::string result_text(const Measurement& m) {
  char buf[96];
  if (m.kind == kKindBandwidth) std::snprintf(buf, sizeof buf, "%.1f GB/s", m.throughput);
  else if (m.kind == kKindPeak)
    std::snprintf(buf, sizeof buf, "%.3f ms, %.0f %s", m.median_ms, m.throughput, m.dtype == "int8" ? "Gop/s" : "GFLOP/s");
  else if (m.kind == kKindHostLink)
    std::snprintf(buf, sizeof buf, "%.3f ms beside the device's (%.1f GB/s; the run %.3f ms)", m.median_ms, m.throughput, m.total_median_ms);
  else std::snprintf(buf, sizeof buf, m.median_ms < 0.1 ? "%.4f ms" : "%.3f ms", m.median_ms);
  return buf;
}

// Sleeps up to `seconds`, in short steps so that Ctrl-C is not kept waiting.
void sleep_unless_stopped(double seconds, const std::atomic<bool>* stop) {
  const auto until = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  while (std::chrono::steady_clock::now() < until && !(stop && stop->load()))
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
}

}  // namespace

ReadingChoice reading_choice(double stored_ms, bool stored_loaded, double fresh_ms, bool fresh_loaded) {
  if (stored_loaded || !(stored_ms > 0)) return ReadingChoice::fresh;
  if (fresh_loaded) return ReadingChoice::stored;
  if (fresh_ms > stored_ms * kReadingsAgreeRatio) return ReadingChoice::stored;
  if (stored_ms > fresh_ms * kReadingsAgreeRatio) return ReadingChoice::fresh;
  return ReadingChoice::mean;
}

Status bench_target_check_sections(const std::vector<std::string>& only) {
  for (const std::string& s : only)
    KILN_REQUIRE(s == kSectionPeak || s == kSectionBandwidth || s == kSectionSweep || s == kSectionWeights, invalid_argument,
                 "--only: unknown section '", s, "' (known: peak, bandwidth, sweep, weights)");
  return Status::ok();
}

Status bench_target_check_sweep_filter(const std::vector<std::string>& sweep_ops, const std::vector<std::string>& sweep_dtypes,
                                       const std::vector<std::string>& only, bool cuda) {
  if (!sweep_ops.empty()) {
    const std::vector<std::string> known = sweep_record_ops();
    for (const std::string& op : sweep_ops)
      KILN_REQUIRE(contains(known, op), invalid_argument, "--sweep-ops: unknown op '", op, "' (known: ", joined(known, ", "), ")");
  }
  KILN_REQUIRE(!cuda || sweep_dtypes.empty(), invalid_argument,
               "--dtypes: a GPU's sweep precisions are chosen with --cuda-precision; leave --dtypes out with --device cuda");
  const std::vector<std::string> dtypes(kSweepDtypes.begin(), kSweepDtypes.end());
  for (const std::string& dtype : sweep_dtypes)
    KILN_REQUIRE(contains(dtypes, dtype), invalid_argument, "--dtypes: unknown dtype '", dtype, "' (known: ", joined(dtypes, ", "), ")");
  KILN_REQUIRE((sweep_ops.empty() && sweep_dtypes.empty()) || only.empty() || contains(only, kSectionSweep), invalid_argument,
               "--sweep-ops and --dtypes restrict the sweep section: add sweep to --only (or leave --only out)");
  return Status::ok();
}

Result<BenchTargetSummary> bench_target_run(BenchmarkStore& store, const BenchTargetOptions& options) {
  KILN_TRY(bench_target_check_sections(options.only));
  KILN_TRY(bench_target_check_sweep_filter(options.sweep_ops, options.sweep_dtypes, options.only, options.cuda != nullptr));
  KILN_REQUIRE(!options.cuda || options.threads.empty(), invalid_argument,
               "--threads: a GPU is measured as one device (threads 1); leave --threads out with --device cuda");
  const auto start = std::chrono::steady_clock::now();
  BenchTargetSummary summary;
  summary.fingerprint = options.cuda ? options.cuda->fingerprint : fingerprint_local();
  const TargetFingerprint& fp = summary.fingerprint;

  BenchPlanOptions plan;
  plan.quick = options.quick;
  plan.threads = options.threads;
  if (plan.threads.empty()) {
    plan.threads = {1};
    if (fp.usable_threads > 1) plan.threads.push_back(fp.usable_threads);
  }
  if (options.quick) plan.timing = {1, 3, 50, 10};

  struct Section {
    const char* name;
    std::vector<BenchPoint> points;
  };
  std::vector<Section> sections;
  if (options.cuda) {
    std::vector<DevicePrecision> precisions = options.cuda_precisions;
    if (precisions.empty()) precisions = {DevicePrecision::fp32, DevicePrecision::fp16};
    if (wants(options, kSectionPeak)) sections.push_back({kSectionPeak, cuda_peak_points(*options.cuda, precisions, options.quick)});
    if (wants(options, kSectionBandwidth)) sections.push_back({kSectionBandwidth, cuda_bandwidth_points(*options.cuda, options.quick)});
    if (wants(options, kSectionSweep)) sections.push_back({kSectionSweep, cuda_sweep_points(*options.cuda, precisions, options.quick)});
  } else {
    if (wants(options, kSectionPeak)) sections.push_back({kSectionPeak, peak_points(fp, plan, &summary.skipped)});
    if (wants(options, kSectionBandwidth)) sections.push_back({kSectionBandwidth, bandwidth_points(fp, plan)});
    if (wants(options, kSectionSweep)) sections.push_back({kSectionSweep, sweep_points(fp, plan, &summary.skipped)});
    if (wants(options, kSectionWeights)) sections.push_back({kSectionWeights, weight_reuse_points(fp, plan)});
  }
  std::string filter_note;  // the sweep filter's progress line: how many points it kept
  if (filters_sweep(options))
    for (Section& section : sections)
      if (std::string(section.name) == kSectionSweep) filter_note = filter_sweep(section.points, options);

  KILN_ASSIGN(stored, store.measurement_identities(fp.id, options.remeasure_loaded));
  // Whether this run measures a planned point: not stored yet, or every point (force, keep_faster).
  const auto to_measure = [&](const BenchPoint& p) {
    return options.force || options.keep_faster || !stored.count(measurement_identity(p.record));
  };
  std::map<std::string, Measurement> stored_rows;  // keep_faster: identity -> stored point
  if (options.keep_faster) {
    KILN_ASSIGN(rows, store.measurements(fp.id));
    for (Measurement& m : rows) stored_rows[measurement_identity(m)] = std::move(m);
  }
  if (options.dry_run) {
    if (options.progress) *options.progress << filter_note;
    for (const Section& section : sections)
      for (const BenchPoint& p : section.points) {
        const bool have = !to_measure(p);
        ++summary.planned;
        ++(have ? summary.already_stored : summary.to_measure);
        if (options.progress)
          *options.progress << "[" << section.name << "] " << p.record.key << " " << p.record.dtype << " t" << p.record.threads
                            << (have ? ": stored\n" : ": to measure\n");
      }
    return summary;
  }
  KILN_TRY(store.target_put(fp, "measured"));
  for (const SkippedBenchmark& s : summary.skipped) KILN_TRY(store.skipped_put(fp.id, s));
  KILN_ASSIGN(run_id, store.run_begin(fp.id, options.options_text));
  summary.run_id = run_id;
  if (options.progress && options.cuda) {
    const DeviceProbe& probe = options.cuda->probe;
    *options.progress << "kiln: target " << fp.id << " (" << fp.cpu_model << ", sm_" << probe.compute_major << probe.compute_minor
                      << ", " << fp.memory_bytes / (int64_t{1} << 20) << " MiB, CUDA runtime " << probe.runtime_version / 1000
                      << "." << probe.runtime_version % 1000 / 10 << ", driver " << probe.driver_version / 1000 << "."
                      << probe.driver_version % 1000 / 10 << "; device time, CUDA events)\n";
  } else if (options.progress) {
    *options.progress << "kiln: target " << fp.id << " (" << fp.cpu_model << ", " << fp.logical_cpus << " CPUs, "
                      << fp.memory_bytes / (int64_t{1} << 20) << " MiB, oneDNN " << fp.onednn_version << ")\n";
  }
  if (options.progress && !options.cuda)
    if (const std::string warning = omp_passive_wait_warning(); !warning.empty()) *options.progress << "kiln: warning: " << warning << '\n';
  if (options.progress) {
    for (const SkippedBenchmark& s : summary.skipped)
      *options.progress << "kiln: skipping " << s.kind << " " << s.dtype << ": " << s.reason << '\n';
    *options.progress << filter_note;
  }

  // The machine's speed before the first point (and after the last, below): CPU runs with points
  // to measure only.
  std::vector<SpeedReading> speed_at_start;
  if (!options.cuda) {
    bool measures_any = false;
    for (const Section& section : sections) measures_any = measures_any || std::any_of(section.points.begin(), section.points.end(), to_measure);
    // A probe that fails (the peak section would say why) only leaves the drift out.
    if (measures_any)
      if (auto r = speed_probe(fp, plan)) speed_at_start = std::move(*r);
  }

  HostInterference host(options.progress, options.host_lost_cpus);
  double settle_left = options.settle_seconds;
  const auto stopped = [&] { return options.stop && options.stop->load(); };
  for (Section& section : sections) {
    summary.planned += static_cast<int64_t>(section.points.size());
    std::vector<BenchPoint*> todo;
    for (BenchPoint& p : section.points) {
      if (to_measure(p)) todo.push_back(&p);
      else ++summary.already_stored;
    }
    if (options.progress && todo.size() < section.points.size())
      *options.progress << "[" << section.name << "] " << section.points.size() - todo.size() << " of "
                        << section.points.size() << " points already stored for this target (--force re-measures them; --remeasure-loaded, those "
                           "measured under load)\n";
    const auto section_start = std::chrono::steady_clock::now();
    size_t done = 0;
    // Measures and stores one point; `lost`: CPUs the host took from its threads just before.
    const auto measure_point = [&](const BenchPoint& point, double lost) -> Status {
      Measurement m = point.record;
      const ForeignLoadMeter foreign;
      Status ok = point.measure(m);
      // A device's time (CUDA events) does not depend on the host's cores: a GPU point is never "loaded".
      m.load_avg = m.threads + (options.cuda ? 0.0 : foreign.busy_cpus().value_or(0.0) + lost);
      ++done;
      const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - section_start).count();
      const double eta = elapsed / static_cast<double>(done) * static_cast<double>(todo.size() - done);
      std::string line("[");
      line.append(section.name).append(" ").append(std::to_string(done)).append("/").append(std::to_string(todo.size()));
      line.append("] ").append(m.key).append(" ").append(m.dtype).append(" t").append(std::to_string(m.threads)).append(": ");
      const bool loaded = measured_under_load(m);
      const auto stored_row = options.keep_faster ? stored_rows.find(measurement_identity(m)) : stored_rows.end();
      const ReadingChoice choice = ok && stored_row != stored_rows.end()
                                       ? reading_choice(stored_row->second.median_ms, measured_under_load(stored_row->second),
                                                        m.median_ms, loaded)
                                       : ReadingChoice::fresh;
      if (ok && choice == ReadingChoice::stored) {
        ++summary.kept_stored;
        char text[96];
        std::snprintf(text, sizeof text, loaded ? " (kept the stored %.4g ms: this one ran under load)" : " (kept the stored %.4g ms: faster)",
                      stored_row->second.median_ms);
        line += result_text(m) + text;
      } else if (ok) {
        if (choice == ReadingChoice::mean) {
          ++summary.averaged;
          const double mean_ms = 0.5 * (stored_row->second.median_ms + m.median_ms);
          char text[96];
          std::snprintf(text, sizeof text, " (stored %.4g ms: the mean of the two)", mean_ms);
          line += result_text(m) + text;
          // The spread and the rate move with the median: p10/p90 keep their distance from it in ratio.
          const double scale = mean_ms / m.median_ms;
          m.median_ms *= scale, m.p10_ms *= scale, m.p90_ms *= scale, m.total_median_ms *= scale;
          if (m.throughput > 0) m.throughput /= scale;
        } else {
          line += result_text(m);
        }
        m.measured_at = utc_now();
        KILN_TRY(store.measurement_put(fp.id, run_id, m));
        ++summary.measured;
        if (loaded) {
          ++summary.loaded;
          char load[64];
          std::snprintf(load, sizeof load, " [under load %.1f]", m.load_avg - m.threads);
          line += load;
        }
      } else {
        ++summary.failed;
        summary.failures.push_back(ok.message());
        line += "failed: " + ok.message();
      }
      if (options.progress) *options.progress << line << " (ETA " << duration_text(eta) << ")\n" << std::flush;
      return Status::ok();
    };
    const auto host_lost = [&](const BenchPoint& point, bool fresh) {
      return options.cuda || point.record.threads < 2 ? 0.0 : host.lost_cpus(point.record.threads, fresh);
    };
    // While the host slows threads down, multi-thread points wait for the end of the section.
    std::vector<const BenchPoint*> deferred;
    for (const BenchPoint* point : todo) {
      if (stopped()) {
        summary.interrupted = true;
        break;
      }
      const double lost = host_lost(*point, false);
      if (lost > 0 && settle_left > 0) {
        if (options.progress && deferred.empty())
          *options.progress << "kiln: [" << section.name << "] putting " << point->record.threads
                            << "-thread points off until the host stops slowing threads down; one-thread points go on\n";
        deferred.push_back(point);
        continue;
      }
      KILN_TRY(measure_point(*point, lost));
    }
    if (!deferred.empty() && !summary.interrupted && options.progress)
      *options.progress << "kiln: [" << section.name << "] " << deferred.size() << " multi-thread points were put off; waiting up to "
                        << duration_text(settle_left) << " for the host to let threads run at full speed (--settle)\n";
    summary.deferred += static_cast<int64_t>(deferred.size());
    for (const BenchPoint* point : deferred) {
      if (summary.interrupted || stopped()) {
        summary.interrupted = true;
        break;
      }
      double lost = host_lost(*point, false);
      double waited = 0;
      while (lost > 0 && settle_left > 0 && !stopped()) {
        constexpr double kSettleStep = 5;
        const double step = std::min(kSettleStep, settle_left);
        sleep_unless_stopped(step, options.stop);
        settle_left -= step;
        waited += step;
        summary.settle_waited_seconds += step;
        lost = host_lost(*point, true);
        if (options.progress && lost > 0 && static_cast<int>(waited) % 30 == 0) {
          char line[128];
          std::snprintf(line, sizeof line, "kiln: still slowed down (%d threads at %.2fx one); %s of waiting left\n",
                        point->record.threads, host.speedup(point->record.threads), duration_text(settle_left).c_str());
          *options.progress << line << std::flush;
        }
      }
      if (stopped()) {
        summary.interrupted = true;
        break;
      }
      KILN_TRY(measure_point(*point, lost));
    }
    if (summary.interrupted) break;
  }
  if (!speed_at_start.empty() && summary.measured + summary.kept_stored > 0 && !summary.interrupted) {
    if (auto speed_at_end = speed_probe(fp, plan)) summary.drift = speed_drift(speed_at_start, *speed_at_end);
    if (options.progress) {
      bool moved = false;
      for (const SpeedDrift& d : summary.drift) {
        *options.progress << "kiln: machine speed during the run: " << speed_drift_text(d) << '\n';
        moved = moved || (d.moved() && !d.loaded);
      }
      if (moved)
        *options.progress << "kiln: the machine's own speed moved by more than " << static_cast<int>(100 * kSpeedDriftWarn)
                          << "% while this run measured: the profile mixes both speeds, and predictions from it will be off "
                             "by as much; run again with --keep-faster (every point measured again, the faster time kept)\n";
    }
  }
  if (options.progress && summary.loaded > 0)
    *options.progress << "kiln: " << summary.loaded << " of the " << summary.measured
                      << " points measured were under load (other processes, or the host slowing threads down): the fit "
                         "leaves them out while enough quiet points remain; run again with --remeasure-loaded when the "
                         "machine is quiet\n";
  summary.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  KILN_TRY(store.run_finish(run_id, summary.interrupted ? "interrupted" : summary.failed ? "failed" : "complete",
                            summary.measured, summary.already_stored));
  return summary;
}

}  // namespace kiln::perf
