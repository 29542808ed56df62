#include "perfmodel/microbench/weight_reuse.h"

#include <algorithm>
#include <cmath>

#include "perfmodel/microbench/kernel_sweep.h"

namespace kiln::perf {

SweepShape weight_reuse_shape(bool quick) {
  SweepShape s;
  s.op = SweepOp::conv;
  s.batch = 1;
  s.in_c = s.out_c = quick ? 64 : 512;
  s.h = s.w = 7;
  s.kernel = 3;
  s.stride = 1;
  s.pad = 1;
  return s;
}

namespace {

double conv_weight_bytes(const std::string& dtype, int64_t out_c, int64_t in_c, int64_t kernel_h, int64_t kernel_w) {
  return dtype_element_bytes(dtype) * static_cast<double>(out_c * in_c * kernel_h * kernel_w) + 4.0 * static_cast<double>(out_c);
}

}  // namespace

double weight_reuse_copy_bytes(const SweepShape& s, const std::string& dtype) {
  return conv_weight_bytes(dtype, s.out_c, s.in_c, s.kernel, s.kernel);
}

double weight_reuse_copy_bytes(const Measurement& m) { return conv_weight_bytes(m.dtype, m.out_c, m.in_c, m.kernel_h, m.kernel_w); }

std::vector<int64_t> weight_reuse_copies(const TargetFingerprint& fp, const SweepShape& shape, const std::string& dtype,
                                         bool quick) {
  if (quick) return {1, 4};
  const double copy = weight_reuse_copy_bytes(shape, dtype);
  // The graph holds every copy's float32 weights besides the kernels' own packed ones.
  const double float_copy = weight_reuse_copy_bytes(shape, "f32");
  const double memory_cap = fp.memory_bytes > 0 ? static_cast<double>(fp.memory_bytes) / 8 : 2.0 * (1 << 30);
  std::vector<int64_t> copies{1};
  for (int mib : {16, 32, 64, 128, 256}) {
    const auto k = static_cast<int64_t>(std::lround(mib * double(1 << 20) / copy));
    if (k <= copies.back() || static_cast<double>(k) * (float_copy + copy) > memory_cap) continue;
    copies.push_back(k);
  }
  return copies;
}

std::vector<BenchPoint> weight_reuse_points(const TargetFingerprint& fp, const BenchPlanOptions& options) {
  TimingOptions timing = options.timing;
  timing.budget_ms = options.quick ? 10 : 200;
  timing.min_runs = options.quick ? 3 : 7;
  timing.warmup = 1;
  const SweepShape one = weight_reuse_shape(options.quick);
  std::vector<BenchPoint> points;
  for (const char* dtype : {"f32", "bf16", "int8"}) {
    if (!fingerprint_dtype_unsupported(fp, dtype).empty()) continue;  // the sweep reports those as skipped
    for (int64_t k : weight_reuse_copies(fp, one, dtype, options.quick)) {
      SweepShape s = one;
      s.copies = k;
      for (int threads : options.threads) {
        BenchPoint p = sweep_point(s, dtype, threads, timing);
        p.record.kind = kKindWeightReuse;
        p.record.working_set_bytes = static_cast<int64_t>(static_cast<double>(k) * weight_reuse_copy_bytes(s, dtype));
        points.push_back(std::move(p));
      }
    }
  }
  return points;
}

}  // namespace kiln::perf
