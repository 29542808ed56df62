#include "perfmodel/microbench/peak.h"

#include <omp.h>

#include <cstring>

#include <oneapi/dnnl/dnnl.hpp>

namespace kiln::perf {
namespace {

using dt = dnnl::memory::data_type;
using tag = dnnl::memory::format_tag;

struct DtypePlan {
  const char* dtype;
  dt src, weights, dst;
};

Status measure_matmul(const DtypePlan& d, int64_t size, const TimingOptions& timing, Measurement& m) {
  try {
    omp_set_num_threads(m.threads);
    dnnl::engine eng(dnnl::engine::kind::cpu, 0);
    dnnl::stream stream(eng);
    const dnnl::memory::dims a_dims{size, size}, b_dims{size, size}, c_dims{size, size};
    dnnl::matmul::desc desc(dnnl::memory::desc(a_dims, d.src, tag::ab), dnnl::memory::desc(b_dims, d.weights, tag::any),
                            dnnl::memory::desc(c_dims, d.dst, tag::ab));
    dnnl::matmul::primitive_desc pd(desc, eng);
    dnnl::memory a(pd.src_desc(), eng), b(pd.weights_desc(), eng), c(pd.dst_desc(), eng);
    // Small non-zero bytes: no denormals, no all-zero shortcuts.
    std::memset(a.get_data_handle(), 1, pd.src_desc().get_size());
    std::memset(b.get_data_handle(), 1, pd.weights_desc().get_size());
    dnnl::matmul prim(pd);
    const Timing t = time_call(
        [&] {
          prim.execute(stream, {{DNNL_ARG_SRC, a}, {DNNL_ARG_WEIGHTS, b}, {DNNL_ARG_DST, c}});
          stream.wait();
        },
        timing);
    m.median_ms = t.median_ms;
    m.p10_ms = t.p10_ms;
    m.p90_ms = t.p90_ms;
    m.runs = t.runs;
    m.total_median_ms = t.median_ms;
    m.kernel = pd.impl_info_str();
    m.throughput = 2.0 * m.macs / (t.median_ms * 1e6);  // GFLOP/s (Gop/s for int8)
    return Status::ok();
  } catch (const dnnl::error& e) {
    return make_error(ErrorCode::unsupported, "oneDNN matmul ", m.dtype, ": ", e.what());
  }
}

}  // namespace

std::vector<BenchPoint> peak_points(const TargetFingerprint& fp, const BenchPlanOptions& options,
                                    std::vector<SkippedBenchmark>* skipped) {
  static const DtypePlan plans[] = {
      {"f32", dt::f32, dt::f32, dt::f32},
      {"bf16", dt::bf16, dt::bf16, dt::f32},
      {"int8", dt::u8, dt::s8, dt::s32},
  };
  // Large enough that the multiply dominates packing and threading overheads.
  const int64_t size = options.quick ? 512 : 1024;
  TimingOptions timing = options.timing;
  timing.budget_ms = options.quick ? 40 : 300;
  std::vector<BenchPoint> points;
  for (const DtypePlan& d : plans) {
    const std::string why = fingerprint_dtype_unsupported(fp, d.dtype);
    if (!why.empty()) {
      if (skipped) skipped->push_back({kKindPeak, d.dtype, why});
      continue;
    }
    for (int threads : options.threads) {
      BenchPoint p;
      Measurement& m = p.record;
      m.kind = kKindPeak;
      m.op = "matmul";
      m.key = "matmul " + std::to_string(size) + "x" + std::to_string(size) + "x" + std::to_string(size);
      m.dtype = d.dtype;
      m.threads = threads;
      m.batch = 1;
      m.m = m.n = m.k = size;
      m.macs = static_cast<double>(size) * static_cast<double>(size) * static_cast<double>(size);
      const double in_bytes = d.src == dt::f32 ? 4 : d.src == dt::bf16 ? 2 : 1;
      m.bytes = static_cast<double>(size * size) * (2 * in_bytes + 4);
      m.backend = "onednn";
      p.measure = [d, size, timing](Measurement& out) { return measure_matmul(d, size, timing, out); };
      points.push_back(std::move(p));
    }
  }
  return points;
}

}  // namespace kiln::perf
