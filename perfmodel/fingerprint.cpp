#include "perfmodel/fingerprint.h"

#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <set>
#include <sstream>

#include <oneapi/dnnl/dnnl.hpp>

#include "kernels/engine.h"

namespace kiln::perf {
namespace {

// The flags that decide which kernels run; the rest of /proc/cpuinfo's list (virtualisation,
// mitigations) changes between hosts of one machine kind and would split its results.
const std::set<std::string>& relevant_flags() {
  static const std::set<std::string> flags = {
      "sse4_2",      "avx",        "avx2",         "fma",         "f16c",        "avx512f",
      "avx512bw",    "avx512dq",   "avx512vl",     "avx512cd",    "avx512_vnni", "avx512_bf16",
      "avx512_fp16", "avx_vnni",   "amx_tile",     "amx_bf16",    "amx_int8",    "avx512vbmi",
      "asimd",       "sve",        "sve2",         "bf16",        "i8mm"};
  return flags;
}

std::string trim(const std::string& s) {
  const size_t b = s.find_first_not_of(" \t");
  const size_t e = s.find_last_not_of(" \t\r\n");
  return b == std::string::npos ? std::string() : s.substr(b, e - b + 1);
}

std::string read_line(const std::string& path) {
  std::ifstream in(path);
  std::string line;
  std::getline(in, line);
  return trim(line);
}

std::string cache_summary() {
  std::string out;
  for (int i = 0; i < 8; ++i) {
    const std::string dir = "/sys/devices/system/cpu/cpu0/cache/index" + std::to_string(i) + "/";
    const std::string level = read_line(dir + "level");
    if (level.empty()) break;
    const std::string type = read_line(dir + "type");
    if (type == "Instruction") continue;
    out += (out.empty() ? "" : ", ") + std::string("L") + level + (type == "Data" ? "d" : "") + " " + read_line(dir + "size");
  }
  return out;
}

// FNV-1a, 64 bits: a stable id across builds and machines (std::hash is neither).
uint64_t fnv1a(const std::string& s) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : s) {
    h ^= c;
    h *= 1099511628211ull;
  }
  return h;
}

}  // namespace

bool fingerprint_has(const TargetFingerprint& fp, const std::string& flag) {
  return std::find(fp.isa.begin(), fp.isa.end(), flag) != fp.isa.end();
}

std::string fingerprint_id(const TargetFingerprint& fp) {
  std::ostringstream key;
  key << fp.cpu_model << '|' << fp.vendor << '|';
  for (const std::string& f : fp.isa) key << f << ',';
  key << '|' << fp.logical_cpus << '|' << fp.memory_bytes / (int64_t{1} << 30) << '|' << fp.caches << '|'
      << fp.onednn_version << '|' << fp.kiln_version;
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(fnv1a(key.str())));
  return hex;
}

namespace {

bool int8_dot_product(const TargetFingerprint& fp) {
  return fingerprint_has(fp, "avx512_vnni") || fingerprint_has(fp, "avx_vnni") || fingerprint_has(fp, "amx_int8");
}

}  // namespace

std::string fingerprint_dtype_unsupported(const TargetFingerprint& fp, const std::string& dtype) {
  if (dtype == "f32") return {};
  if (dtype == "bf16")
    return fingerprint_has(fp, "avx512_bf16") || fingerprint_has(fp, "amx_bf16")
               ? std::string()
               : "no native bf16 dot product (needs AVX512_BF16 or AMX-BF16); oneDNN would emulate it";
  if (dtype == "int8")
    return int8_dot_product(fp) || fingerprint_has(fp, "avx2")
               ? std::string()
               : "no int8 path (needs AVX2, AVX512-VNNI, AVX-VNNI or AMX-INT8)";
  return "unknown dtype '" + dtype + "'";
}

std::string fingerprint_dtype_note(const TargetFingerprint& fp, const std::string& dtype) {
  if (dtype != "int8" || int8_dot_product(fp) || !fingerprint_dtype_unsupported(fp, dtype).empty()) return {};
  return "int8 runs without VNNI here: oneDNN's AVX2 kernels sum u8 x s8 products in 16-bit pairs, so kiln "
         "quantizes weights to 7 bits (max|w| / 63), a little less exact than on VNNI; verify it like any int8";
}

TargetFingerprint fingerprint_cuda(const DeviceProbe& probe) {
  TargetFingerprint fp;
  fp.cpu_model = probe.device_name.empty() ? "unknown CUDA device" : probe.device_name;
  fp.vendor = "NVIDIA";
  fp.isa = {kCudaFlag, "sm_" + std::to_string(probe.compute_major) + std::to_string(probe.compute_minor)};
  fp.logical_cpus = 1;
  fp.usable_threads = 1;
  fp.memory_bytes = probe.total_memory_bytes / (int64_t{1} << 20) * (int64_t{1} << 20);
  fp.kiln_version = KILN_VERSION;
  char host[256] = {};
  if (gethostname(host, sizeof host - 1) == 0) fp.host = host;
  fp.id = fingerprint_id(fp);
  return fp;
}

bool fingerprint_is_cuda(const TargetFingerprint& fp) { return fingerprint_has(fp, kCudaFlag); }

TargetFingerprint fingerprint_local() {
  TargetFingerprint fp;
  std::ifstream cpuinfo("/proc/cpuinfo");
  std::set<std::string> flags;
  std::string line;
  while (std::getline(cpuinfo, line)) {
    const size_t colon = line.find(':');
    if (colon == std::string::npos) continue;
    const std::string key = trim(line.substr(0, colon)), value = trim(line.substr(colon + 1));
    if (key == "model name" && fp.cpu_model.empty()) fp.cpu_model = value;
    if (key == "vendor_id" && fp.vendor.empty()) fp.vendor = value;
    if ((key == "flags" || key == "Features") && flags.empty()) {
      std::istringstream words(value);
      for (std::string w; words >> w;)
        if (relevant_flags().count(w)) flags.insert(w);
    }
  }
  fp.isa.assign(flags.begin(), flags.end());
  if (fp.cpu_model.empty()) fp.cpu_model = "unknown CPU";
  fp.logical_cpus = static_cast<int>(sysconf(_SC_NPROCESSORS_ONLN));
  fp.usable_threads = cpu_quota_threads();
  std::ifstream meminfo("/proc/meminfo");
  while (std::getline(meminfo, line))
    if (line.rfind("MemTotal:", 0) == 0) fp.memory_bytes = std::stoll(line.substr(9)) / 1024 * 1024 * 1024;
  fp.caches = cache_summary();
  const dnnl_version_t* v = dnnl_version();
  fp.onednn_version = std::to_string(v->major) + "." + std::to_string(v->minor) + "." + std::to_string(v->patch);
  fp.kiln_version = KILN_VERSION;
  char host[256] = {};
  if (gethostname(host, sizeof host - 1) == 0) fp.host = host;
  fp.id = fingerprint_id(fp);
  return fp;
}

}  // namespace kiln::perf
