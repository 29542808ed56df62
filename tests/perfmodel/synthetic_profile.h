// A synthetic kernel sweep with known roofline parameters, for the predictor and predict CLI tests;
// and a synthetic GPU profile, as `kiln bench-target --device cuda` stores one.
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

// A GPU as `kiln bench-target --device cuda` fingerprints it (fingerprint_cuda of an H100's probe).
inline TargetFingerprint synthetic_gpu_fingerprint() {
  DeviceProbe probe;
  probe.device_name = "NVIDIA H100 80GB HBM3";
  probe.compute_major = 9;
  probe.compute_minor = 0;
  probe.total_memory_bytes = int64_t{85520809984};
  return fingerprint_cuda(probe);
}

// The known roofline of each op on the synthetic GPU: 3 us per kernel; Conv/Gemm 20 TMAC/s in f32
// and 8x on f16 tensor cores, the other ops 2 TMAC/s; 2 TB/s (2.4 for the streaming ops).
inline RooflineParams synthetic_gpu_roofline(const std::string& op, const std::string& dtype) {
  const bool dense = op == "conv" || op == "gemm";
  const double compute = (dense ? 20e9 : 2e9) * (dense && dtype == "f16" ? 8 : 1);  // MACs per ms
  const double bandwidth = op == "add" || op == "concat" || op == "eltwise" ? 2.4e9 : 2.0e9;  // bytes per ms
  return {0.003, compute, bandwidth};
}

inline const std::vector<std::string>& synthetic_gpu_ops() {
  static const std::vector<std::string> ops = {"conv", "depthwise_conv", "gemm", "maxpool", "avgpool",
                                               "global_avgpool", "add", "concat", "eltwise"};
  return ops;
}

// Every sweep op in f32 and f16 at threads 1 following synthetic_gpu_roofline, and the bandwidth
// table (3 TB/s); rows as the GPU sweep stores them (backend cuda, load = threads).
inline std::vector<Measurement> synthetic_gpu_profile() {
  std::vector<Measurement> rows;
  for (const std::string& op : synthetic_gpu_ops())
    for (const char* dtype : {"f32", "f16"})
      for (Measurement m : synthetic_sweep(synthetic_gpu_roofline(op, dtype), op, dtype, 1)) {
        m.backend = "cuda";
        m.load_avg = 1;
        rows.push_back(m);
      }
  for (Measurement m : synthetic_bandwidth(3e9, 1)) {
    m.backend = "cuda";
    rows.push_back(m);
  }
  return rows;
}

// Stores synthetic_gpu_profile() under synthetic_gpu_fingerprint() in the store at `path`.
inline void synthetic_gpu_store_put(const std::string& path) {
  auto store = BenchmarkStore::open(path);
  REQUIRE(store);
  const TargetFingerprint fp = synthetic_gpu_fingerprint();
  REQUIRE((*store)->target_put(fp, "measured"));
  auto run = (*store)->run_begin(fp.id, "synthetic --device cuda");
  REQUIRE(run);
  for (const Measurement& m : synthetic_gpu_profile()) REQUIRE((*store)->measurement_put(fp.id, *run, m));
}

// Adds to the store at `path`, for this machine, one-thread sweeps of conv, gemm, maxpool and add in
// `dtype` on one roofline (and the bandwidth rows with f32): a profile of one dtype at a time.
inline void synthetic_one_thread_put(const std::string& path, const std::string& dtype) {
  auto store = BenchmarkStore::open(path);
  REQUIRE(store);
  const TargetFingerprint fp = fingerprint_local();
  REQUIRE((*store)->target_put(fp, "measured"));
  auto run = (*store)->run_begin(fp.id, "synthetic " + dtype);
  REQUIRE(run);
  for (const char* op : {"conv", "gemm", "maxpool", "add"})
    for (const Measurement& m : synthetic_sweep({0.01, 40e6, 15e6}, op, dtype, 1)) REQUIRE((*store)->measurement_put(fp.id, *run, m));
  if (dtype == "f32")
    for (const Measurement& m : synthetic_bandwidth(20e6, 1)) REQUIRE((*store)->measurement_put(fp.id, *run, m));
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
