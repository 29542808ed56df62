// `kiln bench-target` as a library call: fingerprints this machine (or a CUDA device of it), plans
// the peak, bandwidth and kernel-sweep points, skips those already stored for this fingerprint
// (unless forced), measures the rest with a progress line each and stores every point as soon as
// it is measured, so an interrupted run keeps its work and the next run continues where it stopped.
// Each point records the load it was measured under: other processes' CPUs and, for multi-thread
// points, CPUs lost to the host (microbench/thread_pace.h); the fit drops loaded points. While
// the host slows threads down, multi-thread points are put off and waited for (settle_seconds).
#pragma once

#include <atomic>
#include <functional>
#include <ostream>
#include <string>
#include <vector>

#include "kernels/core/status.h"
#include "perfmodel/fingerprint.h"
#include "perfmodel/microbench/cuda_sweep.h"
#include "perfmodel/microbench/speed_drift.h"
#include "perfmodel/store.h"

namespace kiln::perf {

inline constexpr const char* kSectionPeak = "peak";
inline constexpr const char* kSectionBandwidth = "bandwidth";
inline constexpr const char* kSectionSweep = "sweep";
inline constexpr const char* kSectionWeights = "weights";  // weight_reuse.h; CPU only

struct BenchTargetOptions {
  bool quick = false;
  std::vector<std::string> only;  // sections to run (kSection*); empty: all
  std::vector<int> threads;       // empty: 1 and every usable core (CPU only)
  // The sweep section's points restricted to these recorded ops (sweep_record_op: "conv", "conv_stem",
  // "maxpool", ...) and these dtypes ("f32", "bf16", "int8"; CPU only: a GPU's are cuda_precisions);
  // empty: all. Either set and `only` empty: only the sweep section runs.
  std::vector<std::string> sweep_ops;
  std::vector<std::string> sweep_dtypes;
  // Set: this CUDA device is measured instead of the CPU (microbench/cuda_sweep.h), at these
  // precisions (empty: fp32 and fp16), threads 1. Opened by the caller, before any store is touched.
  const CudaBenchDevice* cuda = nullptr;
  std::vector<DevicePrecision> cuda_precisions;
  bool force = false;             // re-measure points already stored
  bool remeasure_loaded = false;  // re-measure stored points that were measured under load
  // Re-measure every stored point and combine the two times by reading_choice: the faster where
  // they differ by more than kReadingsAgreeRatio (contention and a VM's slow spells only add time,
  // so two sweeps minutes apart give the machine's own speed), else their mean.
  bool keep_faster = false;
  bool dry_run = false;           // list the plan (each point, stored or to measure) without measuring or writing
  // While the host slows multi-thread work down (microbench/thread_pace.h), multi-thread points are
  // deferred to the end of their section (one-thread points go on meanwhile), and there the run waits
  // for that mode to end, at most this many seconds in all; points it could not wait out are
  // measured and flagged as loaded. 0: no deferring, flag at once (the CLI's default with --quick:
  // under a parallel test run the other CPU is busy for minutes, and a quick run takes seconds).
  double settle_seconds = 120;
  // Stands in for the thread pace probe when set (tests): CPUs lost to the host at these threads;
  // `fresh` asks for a new reading rather than one up to 15 s old.
  std::function<double(int threads, bool fresh)> host_lost_cpus;
  std::string options_text;       // recorded with the run
  std::ostream* progress = nullptr;
  const std::atomic<bool>* stop = nullptr;  // set (by a signal handler) to stop after the current point
};

struct BenchTargetSummary {
  TargetFingerprint fingerprint;
  int64_t run_id = 0;
  int64_t planned = 0;         // points in the plan
  int64_t measured = 0;        // measured and stored by this run
  int64_t already_stored = 0;  // skipped: stored before (incremental)
  int64_t kept_stored = 0;     // keep_faster: measured again over kReadingsAgreeRatio slower: the stored time stays
  int64_t averaged = 0;        // keep_faster: measured again within kReadingsAgreeRatio: the mean of the two is stored
  int64_t failed = 0;
  int64_t loaded = 0;          // of those measured, how many under load (other work, or threads slowed by the host)
  int64_t deferred = 0;        // multi-thread points put off while the host slowed threads down
  double settle_waited_seconds = 0;  // time spent waiting for that to end
  int64_t to_measure = 0;      // dry run: points not stored yet
  bool interrupted = false;
  double seconds = 0;
  std::vector<SkippedBenchmark> skipped;  // dtypes this CPU cannot run natively
  std::vector<std::string> failures;      // one line per failed point
  // The f32 peak before the first point measured and after the last (CPU runs that measured
  // something; microbench/speed_drift.h): how far the machine's own speed moved during the run.
  std::vector<SpeedDrift> drift;
};

// Two readings of one point minutes apart that agree within this ratio differ by the machine's
// noise, and their mean is the better estimate: the faster of two noisy readings sits below the
// truth (one-thread sweep points of a 2-vCPU EPYC VM: 95% of pairs within 15%, median ratio 1.003;
// a profile of the faster readings priced whole models 2-4% fast). Beyond it, the slower one ran
// in a slow spell (two-thread pairs: 22-25% of them apart by more, mostly the first reading slow).
inline constexpr double kReadingsAgreeRatio = 1.15;

enum class ReadingChoice { stored, mean, fresh };

// --keep-faster's rule for a stored time and a new one of the same point: the mean where they agree
// within kReadingsAgreeRatio, else the faster. A reading taken under load counts only against another
// taken under load: a loaded stored one gives way, a loaded new one leaves a quiet stored one as it is
// (a mean would carry the load flag, and the fit would drop the point).
ReadingChoice reading_choice(double stored_ms, bool stored_loaded, double fresh_ms, bool fresh_loaded);

// Refuses unknown section names (naming the known ones).
Status bench_target_check_sections(const std::vector<std::string>& only);
// Refuses unknown sweep ops and dtypes (naming the known ones), a sweep filter with an `only` that
// leaves the sweep out, and dtypes with a GPU (`cuda`).
Status bench_target_check_sweep_filter(const std::vector<std::string>& sweep_ops, const std::vector<std::string>& sweep_dtypes,
                                       const std::vector<std::string>& only, bool cuda);

Result<BenchTargetSummary> bench_target_run(BenchmarkStore& store, const BenchTargetOptions& options);

}  // namespace kiln::perf
