// The target fingerprint: what a benchmark result was measured on (CPU model, ISA flags, cores,
// memory, caches, library versions). Its id keys the benchmark store, so results from one machine
// kind are reused (incremental runs) and results from another are never mixed in.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "kernels/core/status.h"

namespace kiln::perf {

struct TargetFingerprint {
  std::string id;         // 16 hex digits over the identity fields below (not the host name)
  std::string cpu_model;  // /proc/cpuinfo "model name"
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

// The id of `fp`'s identity fields (everything but `id` and `host`); memory counts in GiB so a
// few MiB of firmware reservation do not split one machine kind in two.
std::string fingerprint_id(const TargetFingerprint& fp);

// The native dot-product instructions for a dtype on this fingerprint ("f32" always; "bf16":
// AVX512_BF16 or AMX-BF16; "int8": AVX512-VNNI, AVX-VNNI or AMX-INT8). Empty when supported,
// else why not (recorded with the skipped benchmarks).
std::string fingerprint_dtype_unsupported(const TargetFingerprint& fp, const std::string& dtype);

bool fingerprint_has(const TargetFingerprint& fp, const std::string& flag);

}  // namespace kiln::perf
