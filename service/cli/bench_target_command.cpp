// kiln bench-target: measures this machine's target profile (peak per dtype, memory bandwidth,
// the kernel sweep) into the benchmark store, incrementally, on the CPU or (--device cuda) on a
// GPU; exports and imports profiles as JSON; lists stored targets beside the built-in spec priors.
#include <algorithm>
#include <atomic>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <optional>

#include <nlohmann/json.hpp>

#include "perfmodel/bench_target.h"
#include "perfmodel/priors.h"
#include "perfmodel/profile_json.h"
#include "perfmodel/store.h"
#include "perfmodel/target_profile.h"
#include "service/cli/commands.h"

namespace kiln::cli {
namespace {

struct BenchTargetCli {
  std::string db;
  bool quick = false;
  std::vector<std::string> only;
  std::vector<int> threads;
  std::vector<std::string> sweep_ops;
  std::vector<std::string> sweep_dtypes;
  bool force = false;
  bool remeasure_loaded = false;
  bool keep_faster = false;
  bool dry_run = false;
  double settle_seconds = -1;  // not given: 120 s, or none with --quick
  std::string export_path;
  std::string import_path;
  bool list = false;
  bool json = false;
  std::string device = "cpu";
  std::vector<std::string> cuda_precisions;  // empty: fp32, fp16
  int cuda_device = -1;  // -1: not given (device 0)
};

std::atomic<bool> g_stop{false};

void on_interrupt(int) { g_stop.store(true); }

std::string options_text(const BenchTargetCli& o) {
  std::string s = o.quick ? "--quick" : "";
  const auto add = [&](const std::string& part) { s += (s.empty() ? "" : " ") + part; };
  // A list option as given: "--name a,b" (nothing when the list is empty).
  const auto add_list = [&](const char* name, const std::vector<std::string>& list) {
    std::string joined;
    for (const std::string& x : list) joined += (joined.empty() ? "" : ",") + x;
    if (!list.empty()) add(std::string(name) + " " + joined);
  };
  add_list("--only", o.only);
  add_list("--sweep-ops", o.sweep_ops);
  add_list("--dtypes", o.sweep_dtypes);
  if (!o.threads.empty()) {
    std::string t;
    for (int x : o.threads) t += (t.empty() ? "" : ",") + std::to_string(x);
    add("--threads " + t);
  }
  if (o.device == "cuda") {
    std::string p;
    for (const std::string& x : o.cuda_precisions) p += (p.empty() ? "" : ",") + x;
    add("--device cuda --cuda-precision " + (p.empty() ? std::string("fp32,fp16") : p) + " --cuda-device " +
        std::to_string(std::max(o.cuda_device, 0)));
  }
  if (o.force) add("--force");
  if (o.remeasure_loaded) add("--remeasure-loaded");
  if (o.keep_faster) add("--keep-faster");
  return s;
}

int list_targets(perf::BenchmarkStore& store, bool json) {
  auto stored = store.targets();
  if (!stored) return report_error(stored.error().message);
  nlohmann::json out = {{"db", store.path()}, {"targets", nlohmann::json::array()}};
  if (!json) std::printf("stored targets (%s):\n", store.path().c_str());
  for (const perf::StoredTarget& t : *stored) {
    const perf::TargetFingerprint& fp = t.fingerprint;
    const bool gpu = perf::fingerprint_is_cuda(fp);
    if (json) {
      out["targets"].push_back({{"id", fp.id}, {"name", fp.cpu_model}, {"source", t.source}, {"prior", false},
                                {"device", gpu ? "gpu" : "cpu"}, {"measurements", t.measurements},
                                {"last_measured", t.last_measured}, {"logical_cpus", fp.logical_cpus},
                                {"memory_bytes", fp.memory_bytes}, {"host", fp.host}});
    } else if (gpu) {
      std::printf("  %s  %-8s  %s (cuda %s), %lld MiB, %lld measurements%s%s\n", fp.id.c_str(), t.source.c_str(), fp.cpu_model.c_str(),
                  fp.isa.size() > 1 ? fp.isa.back().c_str() : "", static_cast<long long>(fp.memory_bytes >> 20),
                  static_cast<long long>(t.measurements), t.last_measured.empty() ? "" : ", last ", t.last_measured.c_str());
    } else {
      std::printf("  %s  %-8s  %s, %d CPUs, %lld MiB, %lld measurements%s%s\n", fp.id.c_str(), t.source.c_str(),
                  fp.cpu_model.c_str(), fp.logical_cpus, static_cast<long long>(fp.memory_bytes >> 20),
                  static_cast<long long>(t.measurements), t.last_measured.empty() ? "" : ", last ", t.last_measured.c_str());
    }
  }
  if (!json) std::printf("built-in spec priors (not measured):\n");
  for (const perf::TargetPrior& p : perf::target_priors()) {
    const std::string replaced = perf::prior_replaced_by(p, *stored);
    if (json) {
      nlohmann::json peaks = nlohmann::json::object();
      for (const perf::PriorPeak& k : p.peaks) peaks[k.dtype] = k.tflops;
      out["targets"].push_back({{"id", p.id}, {"name", p.name}, {"source", "prior"}, {"prior", true}, {"device", p.device},
                                {"peak_tflops", peaks}, {"memory_bandwidth_gbs", p.memory_bandwidth_gbs},
                                {"memory_gb", p.memory_gb}, {"replaced_by", replaced}, {"spec_source", p.source}});
    } else {
      std::string peaks;
      for (const perf::PriorPeak& k : p.peaks) {
        char buf[48];
        std::snprintf(buf, sizeof buf, "%s%s %g", peaks.empty() ? "" : ", ", k.dtype.c_str(), k.tflops);
        peaks += buf;
      }
      std::printf("  %-22s prior     %s: %s T(FL)OP/s, %g GB/s, %g GB%s\n", p.id.c_str(), p.name.c_str(), peaks.c_str(),
                  p.memory_bandwidth_gbs, p.memory_gb, replaced.empty() ? "" : (" (replaced by measured " + replaced + ")").c_str());
    }
  }
  if (json) std::cout << out.dump(2) << '\n';
  return kExitOk;
}

int run_bench_target(const BenchTargetCli& o) {
  if (Status ok = perf::bench_target_check_sections(o.only); !ok) return report_error(ok.message());
  const bool moves_data = !o.import_path.empty() || !o.export_path.empty() || o.list;
  const bool cuda = o.device == "cuda";
  if (Status ok = perf::bench_target_check_sweep_filter(o.sweep_ops, o.sweep_dtypes, o.only, cuda); !ok)
    return report_error(ok.message());
  if (!cuda && (!o.cuda_precisions.empty() || o.cuda_device >= 0))
    return report_error("--cuda-precision and --cuda-device measure a GPU: add --device cuda");
  if (cuda && !o.threads.empty())
    return report_error("--threads: a GPU is measured as one device (threads 1); leave --threads out with --device cuda");
  // The device first: without a usable GPU, one line and nothing written (not even the store).
  std::optional<perf::CudaBenchDevice> device;
  if (cuda && !moves_data) {
    auto opened = perf::cuda_bench_device_open(std::max(o.cuda_device, 0));
    if (!opened) return report_error(opened.error().message);
    device = std::move(*opened);
  }
  const std::string db_path = o.db.empty() ? perf::benchmark_store_default_path() : o.db;
  std::error_code ec;
  const std::filesystem::path parent = std::filesystem::path(db_path).parent_path();
  if (!parent.empty()) std::filesystem::create_directories(parent, ec);
  auto store = perf::BenchmarkStore::open(db_path);
  if (!store) return report_error(store.error().message);

  // --import, --export and --list only move or show data; without them the benchmarks run.
  if (moves_data) {
    nlohmann::json out = nlohmann::json::object();
    if (!o.import_path.empty()) {
      auto counts = perf::profile_import(**store, o.import_path);
      if (!counts) return report_error(counts.error().message);
      out["imported"] = {{"targets", counts->targets}, {"measurements", counts->measurements}};
      if (!o.json)
        std::printf("imported %lld measurements of %lld targets from %s into %s\n", static_cast<long long>(counts->measurements),
                    static_cast<long long>(counts->targets), o.import_path.c_str(), db_path.c_str());
    }
    if (!o.export_path.empty()) {
      auto counts = perf::profile_export(**store, o.export_path);
      if (!counts) return report_error(counts.error().message);
      out["exported"] = {{"targets", counts->targets}, {"measurements", counts->measurements}};
      if (!o.json)
        std::printf("exported %lld measurements of %lld targets to %s\n", static_cast<long long>(counts->measurements),
                    static_cast<long long>(counts->targets), o.export_path.c_str());
    }
    if (o.list) return list_targets(**store, o.json);
    if (o.json) std::cout << out.dump(2) << '\n';
    return kExitOk;
  }

  perf::BenchTargetOptions options;
  options.quick = o.quick;
  options.only = o.only;
  options.threads = o.threads;
  options.sweep_ops = o.sweep_ops;
  options.sweep_dtypes = o.sweep_dtypes;
  if (device) options.cuda = &*device;
  for (const std::string& p : o.cuda_precisions)
    if (const DevicePrecision precision = *device_precision_from_name(p);
        std::find(options.cuda_precisions.begin(), options.cuda_precisions.end(), precision) == options.cuda_precisions.end())
      options.cuda_precisions.push_back(precision);
  options.force = o.force;
  options.remeasure_loaded = o.remeasure_loaded;
  options.keep_faster = o.keep_faster;
  options.dry_run = o.dry_run;
  // A quick run takes seconds (tests, smoke checks): waiting minutes for the host would dwarf it.
  options.settle_seconds = o.settle_seconds >= 0 ? o.settle_seconds : o.quick ? 0.0 : 120.0;
  options.options_text = options_text(o);
  options.progress = &std::cerr;
  options.stop = &g_stop;
  // Ctrl-C stops after the point being measured; every point measured so far is already stored.
  g_stop.store(false);
  auto previous = std::signal(SIGINT, on_interrupt);
  auto summary = perf::bench_target_run(**store, options);
  std::signal(SIGINT, previous);
  if (!summary) return report_error(summary.error().message);
  const perf::BenchTargetSummary& s = *summary;
  if (o.json) {
    nlohmann::json skipped = nlohmann::json::array();
    for (const perf::SkippedBenchmark& k : s.skipped) skipped.push_back({{"kind", k.kind}, {"dtype", k.dtype}, {"reason", k.reason}});
    nlohmann::json drift = nlohmann::json::array();
    for (const perf::SpeedDrift& d : s.drift)
      drift.push_back({{"threads", d.threads}, {"start_gflops", d.start_gflops}, {"end_gflops", d.end_gflops}, {"change", d.change()},
                       {"moved", d.moved()}, {"loaded", d.loaded}});
    std::cout << nlohmann::json{{"db", db_path},           {"target", s.fingerprint.id}, {"cpu_model", s.fingerprint.cpu_model},
                                {"device", perf::fingerprint_is_cuda(s.fingerprint) ? "cuda" : "cpu"},
                                {"run", s.run_id},         {"planned", s.planned},       {"measured", s.measured},
                                {"already_stored", s.already_stored}, {"kept_stored", s.kept_stored}, {"averaged", s.averaged}, {"failed", s.failed}, {"loaded", s.loaded}, {"deferred", s.deferred}, {"settle_waited_seconds", s.settle_waited_seconds}, {"to_measure", s.to_measure}, {"dry_run", o.dry_run}, {"failures", s.failures},
                                {"interrupted", s.interrupted}, {"seconds", s.seconds},  {"skipped", skipped}, {"speed_drift", drift}}
                     .dump(2)
              << '\n';
  } else if (o.dry_run) {
    std::printf("target %s (%s): %lld points planned, %lld to measure, %lld already stored; %s\n", s.fingerprint.id.c_str(),
                s.fingerprint.cpu_model.c_str(), static_cast<long long>(s.planned), static_cast<long long>(s.to_measure),
                static_cast<long long>(s.already_stored), db_path.c_str());
  } else {
    std::printf("target %s (%s): %lld points planned, %lld measured (%lld under load), %lld already stored, %lld failed in %.1f s; %s\n",
                s.fingerprint.id.c_str(), s.fingerprint.cpu_model.c_str(), static_cast<long long>(s.planned),
                static_cast<long long>(s.measured), static_cast<long long>(s.loaded), static_cast<long long>(s.already_stored),
                static_cast<long long>(s.failed), s.seconds, db_path.c_str());
    for (const perf::SpeedDrift& d : s.drift)
      std::printf("machine speed from the first point to the last: %s%s\n", perf::speed_drift_text(d).c_str(),
                  d.moved() && !d.loaded ? ": moved" : "");
    if (s.averaged > 0)
      std::printf("%lld points measured again agreed with the stored time within %.0f%%: the mean of the two is stored (--keep-faster)\n",
                  static_cast<long long>(s.averaged), 100 * (perf::kReadingsAgreeRatio - 1));
    if (s.kept_stored > 0)
      std::printf("%lld points measured again were over %.0f%% slower than the stored time, which was kept (--keep-faster)\n",
                  static_cast<long long>(s.kept_stored), 100 * (perf::kReadingsAgreeRatio - 1));
    if (s.deferred > 0)
      std::printf("%lld multi-thread points were put off while the host slowed threads down (%.0f s spent waiting for it to end)\n",
                  static_cast<long long>(s.deferred), s.settle_waited_seconds);
  }
  if (s.interrupted) {
    std::fprintf(stderr, "kiln: interrupted: %lld points stored; run again to continue where it stopped\n",
                 static_cast<long long>(s.measured));
    return 130;
  }
  return s.failed ? kExitError : kExitOk;
}

}  // namespace

void add_bench_target_command(CLI::App& app, CommandRunner& run) {
  auto o = std::make_shared<BenchTargetCli>();
  CLI::App* cmd = app.add_subcommand(
      "bench-target",
      "Measure this machine's target profile (peak per dtype, memory bandwidth, kernel sweep), or a GPU's, into the benchmark store");
  cmd->add_option("--db", o->db, "Benchmark store (default $KILN_DATA_DIR/benchmarks.sqlite, else ~/.local/share/kiln/benchmarks.sqlite)");
  cmd->add_flag("--quick", o->quick, "A small grid (seconds), for tests");
  cmd->add_option("--only", o->only, "Sections to run: peak,bandwidth,sweep,weights (default all; weights: CPU only)")->delimiter(',');
  cmd->add_option("--sweep-ops", o->sweep_ops,
                  "Kernel sweep: only the points recorded under these ops, e.g. conv,conv_stem,maxpool (an unknown name lists "
                  "them); without --only, only the sweep section runs (peak, bandwidth and weights are not measured)")
      ->delimiter(',');
  cmd->add_option("--dtypes", o->sweep_dtypes,
                  "Kernel sweep: only the points at these dtypes: f32,bf16,int8 (CPU only); without --only, only the sweep "
                  "section runs (peak, bandwidth and weights are not measured)")
      ->delimiter(',');
  cmd->add_option("--threads", o->threads, "Thread counts, e.g. 1,2 (default 1 and every usable core)")
      ->delimiter(',')
      ->check(CLI::PositiveNumber);
  cmd->add_flag("--force", o->force, "Re-measure points already stored for this machine (default: skip them)");
  cmd->add_flag("--remeasure-loaded", o->remeasure_loaded,
                "Re-measure the stored points that were measured under load (other processes, or the host slowing threads down)");
  cmd->add_flag("--keep-faster", o->keep_faster,
                "Re-measure every point; where the stored and the new time differ by more than " +
                    std::to_string(static_cast<int>(std::lround((perf::kReadingsAgreeRatio - 1) * 100))) +
                    "% keep the faster (contention and a VM's slow spells only add time: two sweeps minutes apart give "
                    "the machine's own speed), else store their mean (the faster of two noisy readings is biased fast)");
  cmd->add_option("--settle", o->settle_seconds,
                  "While the host slows multi-thread work down, put those points off and wait at most this many seconds in "
                  "all for it to end (default 120, with --quick 0); 0 measures them at once and flags them as loaded")
      ->check(CLI::NonNegativeNumber);
  cmd->add_flag("--dry-run", o->dry_run, "List the points that would be measured (and those already stored); measure nothing");
  cmd->add_option("--export", o->export_path, "Write every stored target to this JSON profile (does not measure)");
  cmd->add_option("--import", o->import_path, "Read a JSON profile into the store (does not measure)");
  cmd->add_flag("--list", o->list, "List stored targets (measured/imported) and the built-in spec priors");
  cmd->add_flag("--json", o->json, "Print JSON");
  cmd->add_option("--device", o->device, "What to measure: cpu (default; this machine's cores) or cuda (a GPU, through libkiln_cuda.so)")
      ->check(CLI::IsMember({"cpu", "cuda"}));
  cmd->add_option("--cuda-precision", o->cuda_precisions, "With --device cuda: precisions to sweep, e.g. fp32,fp16 (default), tf32, bf16")
      ->delimiter(',')
      ->check(CLI::IsMember(device_precision_names()));
  cmd->add_option("--cuda-device", o->cuda_device, "With --device cuda: the GPU index (default 0)")
      ->check(CLI::NonNegativeNumber);
  cmd->callback([o, &run] { run = [o] { return run_bench_target(*o); }; });
}

}  // namespace kiln::cli
