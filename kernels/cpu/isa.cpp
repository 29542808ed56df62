#include "kernels/cpu/isa.h"

#include <cpuid.h>

#include <cstdlib>
#include <string>

namespace kiln {
namespace {

CpuIsa detected() {
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512dq") &&
      __builtin_cpu_supports("avx512vl"))
    return CpuIsa::avx512;
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return CpuIsa::avx2;
  return CpuIsa::portable;
}

CpuIsa cap() {
  const char* env = std::getenv("KILN_CPU_ISA");
  const std::string v = env ? env : "";
  if (v == "portable") return CpuIsa::portable;
  if (v == "avx2") return CpuIsa::avx2;
  return CpuIsa::avx512;
}

}  // namespace

std::string_view cpu_isa_name(CpuIsa isa) {
  switch (isa) {
    case CpuIsa::portable: return "portable";
    case CpuIsa::avx2: return "avx2";
    case CpuIsa::avx512: return "avx512";
  }
  return "portable";
}

bool cpu_has_int8_dot_product() {
  __builtin_cpu_init();
  // AVX-VNNI (CPUID leaf 7 subleaf 1, EAX bit 4) read directly: clang 14's builtin lacks its name.
  static const bool has = __builtin_cpu_supports("avx512vnni") || [] {
    unsigned a = 0, b = 0, c = 0, d = 0;
    return __get_cpuid_count(7, 1, &a, &b, &c, &d) != 0 && (a & (1u << 4)) != 0 && __builtin_cpu_supports("avx2");
  }();
  return has;
}

bool cpu_has_bf16_compute() {
  static const bool has = detected() == CpuIsa::avx512;
  return has;
}

bool cpu_isa_available(CpuIsa isa) {
  static const CpuIsa best = detected();
  return isa <= best && isa <= cap();
}

CpuIsa best_cpu_isa() {
  for (CpuIsa isa : {CpuIsa::avx512, CpuIsa::avx2})
    if (cpu_isa_available(isa)) return isa;
  return CpuIsa::portable;
}

}  // namespace kiln
