#include "perfmodel/microbench/bandwidth.h"

#include <omp.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <memory>

namespace kiln::perf {
namespace {

constexpr int kLanes = 128;  // independent partial sums: enough vector chains to keep the loads busy

// Sums n floats (n a multiple of kLanes). Compiled per ISA and chosen at load time (GCC
// target_clones), so the loads are as wide as the machine allows.
__attribute__((target_clones("avx512f", "avx2", "default"))) float sum_floats(const float* p, int64_t n) {
  float acc[kLanes] = {};
  for (int64_t i = 0; i < n; i += kLanes)
    for (int j = 0; j < kLanes; ++j) acc[j] += p[i + j];
  float s = 0;
  for (float a : acc) s += a;
  return s;
}

std::string size_name(int64_t bytes) {
  if (bytes >= (int64_t{1} << 30)) return std::to_string(bytes >> 30) + " GiB";
  if (bytes >= (int64_t{1} << 20)) return std::to_string(bytes >> 20) + " MiB";
  return std::to_string(bytes >> 10) + " KiB";
}

volatile float g_sink;  // keeps the sums alive

Status measure_read(int64_t bytes, const TimingOptions& timing, Measurement& m) {
  const int64_t n = bytes / static_cast<int64_t>(sizeof(float));
  float* raw = static_cast<float*>(std::aligned_alloc(64, static_cast<size_t>(bytes)));
  KILN_REQUIRE(raw != nullptr, io, "bandwidth: cannot allocate ", size_name(bytes));
  std::unique_ptr<float, decltype(&std::free)> buf(raw, &std::free);
  const int threads = m.threads;
  // Each thread touches (first) and then reads the same share, so it stays in its own caches.
  const int64_t share = n / threads / kLanes * kLanes;
#pragma omp parallel num_threads(threads)
  {
    const int64_t t = omp_get_thread_num();
    std::memset(raw + t * share, 0, static_cast<size_t>(share) * sizeof(float));
  }
  // Enough repetitions per sample that a sample takes well over the timer's resolution.
  const int64_t reps = std::max<int64_t>(1, (int64_t{64} << 20) / bytes);
  const Timing t = time_call(
      [&] {
        float total = 0;
#pragma omp parallel num_threads(threads) reduction(+ : total)
        {
          const int64_t tid = omp_get_thread_num();
          for (int64_t r = 0; r < reps; ++r) total += sum_floats(raw + tid * share, share);
        }
        g_sink = total;
      },
      timing);
  const double per_rep_ms = t.median_ms / static_cast<double>(reps);
  const double read = static_cast<double>(share * threads) * sizeof(float);
  m.median_ms = per_rep_ms;
  m.p10_ms = t.p10_ms / static_cast<double>(reps);
  m.p90_ms = t.p90_ms / static_cast<double>(reps);
  m.runs = t.runs;
  m.total_median_ms = per_rep_ms;
  m.throughput = read / (per_rep_ms * 1e6);  // GB/s
  m.kernel = "read.sum";
  return Status::ok();
}

}  // namespace

std::vector<int64_t> bandwidth_working_sets(const TargetFingerprint& fp, bool quick) {
  const int64_t limit = fp.memory_bytes > 0 ? fp.memory_bytes / 4 : int64_t{1} << 30;
  std::vector<int64_t> sizes;
  if (quick) {
    sizes = {16 << 10, 1 << 20, 64 << 20};
  } else {
    for (int64_t s = 16 << 10; s <= (int64_t{1} << 30); s *= 4) sizes.push_back(s);  // 16 KiB .. 1 GiB by 4x
  }
  std::erase_if(sizes, [&](int64_t s) { return s > limit; });
  return sizes;
}

std::vector<BenchPoint> bandwidth_points(const TargetFingerprint& fp, const BenchPlanOptions& options) {
  TimingOptions timing = options.timing;
  timing.budget_ms = options.quick ? 20 : 150;
  std::vector<BenchPoint> points;
  for (int64_t bytes : bandwidth_working_sets(fp, options.quick)) {
    for (int threads : options.threads) {
      BenchPoint p;
      Measurement& m = p.record;
      m.kind = kKindBandwidth;
      m.op = "read";
      m.key = "read " + size_name(bytes);
      m.dtype = "f32";
      m.threads = threads;
      m.working_set_bytes = bytes;
      m.bytes = static_cast<double>(bytes);
      m.backend = "cpu";
      p.measure = [bytes, timing](Measurement& out) { return measure_read(bytes, timing, out); };
      points.push_back(std::move(p));
    }
  }
  return points;
}

}  // namespace kiln::perf
