// A synthetic kernel sweep with known roofline parameters, for the predictor and predict CLI tests.
#pragma once

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include <catch2/catch.hpp>

#include "perfmodel/fingerprint.h"
#include "perfmodel/measurement.h"
#include "perfmodel/predictor.h"
#include "perfmodel/store.h"
#include "tests/perfmodel/temp_dir.h"

namespace kiln::perf::testing {

// Points over channels, plane and batch whose times follow `p` exactly: some compute-bound, some
// memory-bound, some overhead-bound.
inline std::vector<Measurement> synthetic_sweep(const RooflineParams& p, const std::string& op, const std::string& dtype,
                                                int threads) {
  std::vector<Measurement> out;
  for (int64_t c : {16, 32, 64, 128, 256, 512})
    for (int64_t hw : {7, 14, 28, 56})
      for (int64_t b : {1, 8}) {
        Measurement m;
        m.kind = kKindKernel;
        m.op = op;
        m.dtype = dtype;
        m.threads = threads;
        m.batch = b;
        m.in_c = m.out_c = c;
        m.in_h = m.in_w = m.out_h = m.out_w = hw;
        m.kernel_h = m.kernel_w = op == "conv" ? (c <= 64 ? 3 : 1) : 0;
        m.stride = 1;
        m.key = op + " " + std::to_string(c) + " " + std::to_string(hw) + " b" + std::to_string(b);
        m.macs = static_cast<double>(b * hw * hw * c * c * std::max<int64_t>(m.kernel_h * m.kernel_w, 1));
        if (c >= 256 && hw >= 28) m.macs = static_cast<double>(b * hw * hw * c);  // memory-bound, like a depthwise conv
        m.bytes = 4.0 * static_cast<double>(2 * b * c * hw * hw + c * c);
        m.median_ms = roofline_ms(p, m.macs, m.bytes);
        m.load_avg = 0.5;
        out.push_back(m);
      }
  return out;
}

inline std::vector<Measurement> synthetic_bandwidth(double bytes_per_ms, int threads) {
  std::vector<Measurement> out;
  for (int64_t kib : {16, 256, 4096, 65536}) {
    Measurement m;
    m.kind = kKindBandwidth;
    m.op = "read";
    m.dtype = "f32";
    m.threads = threads;
    m.key = "read " + std::to_string(kib) + " KiB";
    m.working_set_bytes = kib * 1024;
    m.median_ms = static_cast<double>(m.working_set_bytes) / bytes_per_ms;
    m.throughput = bytes_per_ms / 1e6;
    out.push_back(m);
  }
  return out;
}

// A whole profile in which every dtype and thread count has its own roofline: bf16 twice and int8
// four times fp32's compute, two threads 1.8x one; conv, gemm, maxpool and add, and bandwidth.
inline std::vector<Measurement> synthetic_profile_all_dtypes() {
  std::vector<Measurement> rows;
  for (int threads : {1, 2})
    for (const auto& [dtype, speed] : std::vector<std::pair<std::string, double>>{{"f32", 1}, {"bf16", 2}, {"int8", 4}})
      for (const char* op : {"conv", "gemm", "maxpool", "add"}) {
        const double t = threads == 1 ? 1.0 : 1.8;
        for (const Measurement& m : synthetic_sweep({0.005, 30e6 * speed * t, 15e6 * t}, op, dtype, threads)) rows.push_back(m);
      }
  for (int threads : {1, 2})
    for (const Measurement& m : synthetic_bandwidth(20e6 * threads, threads)) rows.push_back(m);
  return rows;
}

// A benchmark store at DIR/b.sqlite holding synthetic_profile_all_dtypes() for this machine.
inline std::string synthetic_store(const TempDir& dir) {
  const std::string path = dir.file("b.sqlite");
  auto store = BenchmarkStore::open(path);
  REQUIRE(store);
  const TargetFingerprint fp = fingerprint_local();
  REQUIRE((*store)->target_put(fp, "measured"));
  auto run = (*store)->run_begin(fp.id, "synthetic");
  REQUIRE(run);
  for (const Measurement& m : synthetic_profile_all_dtypes()) REQUIRE((*store)->measurement_put(fp.id, *run, m));
  return path;
}

}  // namespace kiln::perf::testing
