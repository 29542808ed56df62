// Sample fingerprints and measurements for the store and profile tests.
#pragma once

#include "perfmodel/store.h"

namespace kiln::perf::testing {

inline TargetFingerprint sample_fingerprint(const std::string& model = "Test CPU 9000") {
  TargetFingerprint fp;
  fp.cpu_model = model;
  fp.vendor = "GenuineTest";
  fp.isa = {"avx2", "avx512_bf16", "avx512f", "fma"};
  fp.logical_cpus = 4;
  fp.usable_threads = 2;
  fp.memory_bytes = int64_t{16} << 30;
  fp.caches = "L1d 48K, L2 2048K";
  fp.onednn_version = "2.6.0";
  fp.kiln_version = "0.1.0";
  fp.host = "node01";
  fp.id = fingerprint_id(fp);
  return fp;
}

inline Measurement sample_conv(int threads, double median, const std::string& dtype = "f32") {
  Measurement m;
  m.kind = kKindKernel;
  m.key = "conv k3 s1 64->64 56x56 b1";
  m.op = "conv";
  m.dtype = dtype;
  m.threads = threads;
  m.batch = 1;
  m.in_c = m.out_c = 64;
  m.in_h = m.in_w = m.out_h = m.out_w = 56;
  m.kernel_h = m.kernel_w = 3;
  m.stride = 1;
  m.pad = 1;
  m.groups = 1;
  m.macs = 115605504;
  m.bytes = 1753344;
  m.backend = "onednn";
  m.kernel = "onednn.conv";
  m.layout = "onednn:aBcd16b";
  m.median_ms = median;
  m.p10_ms = median * 0.9;
  m.p90_ms = median * 1.2;
  m.runs = 17;
  m.total_median_ms = median * 1.5;
  m.throughput = 2 * m.macs / (median * 1e6);
  m.measured_at = "2026-11-24T07:00:00Z";
  return m;
}

inline Measurement sample_peak() {
  Measurement m;
  m.kind = kKindPeak;
  m.key = "matmul 1024x1024x1024";
  m.op = "matmul";
  m.dtype = "bf16";
  m.threads = 2;
  m.m = m.n = m.k = 1024;
  m.macs = 1073741824.0;
  m.bytes = 8388608;
  m.backend = "onednn";
  m.kernel = "brg:avx512_core_amx";
  m.median_ms = 2.5;
  m.p10_ms = 2.4;
  m.p90_ms = 2.9;
  m.runs = 100;
  m.total_median_ms = 2.5;
  m.throughput = 859;
  m.measured_at = "2026-11-24T07:00:01Z";
  return m;
}

inline bool same_measurement(const Measurement& a, const Measurement& b) {
  bool same = true;
#define KILN_SAME(f) same = same && a.f == b.f;
  KILN_MEASUREMENT_FIELDS(KILN_SAME)
#undef KILN_SAME
  return same;
}

}  // namespace kiln::perf::testing
