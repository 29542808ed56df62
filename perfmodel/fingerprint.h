// The target fingerprint: what a benchmark result was measured on (CPU model, ISA flags, cores,
// memory, caches, library versions). Its id keys the benchmark store, so results from one machine
// kind are reused (incremental runs) and results from another are never mixed in.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "kernels/core/status.h"
#include "kernels/device/device_backend.h"

namespace kiln::perf {

// A CUDA device is a target too (fingerprint_cuda), in the same fields, so the store and JSON
// profiles hold it unchanged: cpu_model is the device's name, isa {"cuda", "sm_90"}.
struct TargetFingerprint {
  std::string id;         // 16 hex digits over the identity fields below (not the host name)
  std::string cpu_model;  // /proc/cpuinfo "model name"; a GPU: the device's name ("NVIDIA H100 80GB HBM3")
  std::string vendor;     // "GenuineIntel", "AuthenticAMD", ...
  std::vector<std::string> isa;  // the ISA flags kernels care about, sorted (avx2, avx512f, amx_bf16, ...)
  int logical_cpus = 0;          // CPUs online
  int usable_threads = 0;        // this process's CPU quota (cgroup cpu.max or affinity mask)
  int64_t memory_bytes = 0;      // MemTotal, rounded down to whole MiB
  std::string caches;            // "L1d 48K, L2 2048K, L3 ..." from sysfs, per core as the kernel reports them
  std::string onednn_version;    // "2.6.0"
  std::string kiln_version;      // the perfmodel's version string (KILN_VERSION)
  std::string host;              // host name: informative only, not part of the id
};

// Reads the fingerprint of the machine this process runs on. Two calls give the same id.
TargetFingerprint fingerprint_local();

// The ISA flag that marks a CUDA device's fingerprint: never among a CPU's flags (relevant_flags),
// so the two kinds stay apart without a field of their own (the store's schema is unchanged).
inline constexpr const char* kCudaFlag = "cuda";

// A CUDA device as probed by the plugin: cpu_model = its name, vendor "NVIDIA", isa {"cuda",
// "sm_<major><minor>"}, one logical CPU and one usable thread (a device is measured as one unit,
// threads 1), memory = the device's to the MiB, caches and onednn_version empty (neither applies),
// this kiln's version, this host.
TargetFingerprint fingerprint_cuda(const DeviceProbe& probe);

// Whether `fp` is a CUDA device's (fingerprint_cuda) rather than a CPU's.
bool fingerprint_is_cuda(const TargetFingerprint& fp);

// The id of `fp`'s identity fields (everything but `id` and `host`); memory counts in GiB so a
// few MiB of firmware reservation do not split one machine kind in two.
std::string fingerprint_id(const TargetFingerprint& fp);

// Whether kiln plans and sweeps a dtype on this fingerprint ("f32" always; "bf16": AVX512_BF16 or
// AMX-BF16, as oneDNN emulates it below and runs it slower than float32; "int8": AVX512-VNNI,
// AVX-VNNI, AMX-INT8, or AVX2, where oneDNN's int8 kernels still beat float32: ResNet-50 at
// batch 1 ran 2.0x faster on an AVX2-only EPYC). Empty when supported, else why not (recorded
// with the skipped benchmarks and the plan's excluded choices).
std::string fingerprint_dtype_unsupported(const TargetFingerprint& fp, const std::string& dtype);

// What a plan should say about a supported dtype that runs without its dot-product instruction
// (int8 on AVX2: 16-bit pair sums, so weights take 7 bits); empty when it runs natively.
std::string fingerprint_dtype_note(const TargetFingerprint& fp, const std::string& dtype);

bool fingerprint_has(const TargetFingerprint& fp, const std::string& flag);

}  // namespace kiln::perf
