// The instruction sets kiln's own CPU kernels have paths for, detected at run time. Each kernel
// registers one implementation per ISA (registry.cpp), best first; an implementation's supports()
// refuses when cpu_isa_available() says no. KILN_CPU_ISA=avx2|portable caps the choice (to
// compare paths, or to test the lower ones on a machine that has AVX-512).
#pragma once

#include <string_view>

namespace kiln {

enum class CpuIsa { portable, avx2, avx512 };  // ordered: each implies the ones before

std::string_view cpu_isa_name(CpuIsa isa);  // "portable", "avx2", "avx512"
// True when this CPU has `isa` (avx2: AVX2+FMA; avx512: AVX-512 F/BW/DQ/VL) and KILN_CPU_ISA does
// not cap it below.
bool cpu_isa_available(CpuIsa isa);
// The best ISA cpu_isa_available() allows here.
CpuIsa best_cpu_isa();

// True when this CPU has an 8-bit dot product into 32 bits (AVX512-VNNI or AVX-VNNI; AMX machines
// have VNNI too). Without it, u8 x s8 products are summed pairwise into saturating 16 bits
// (vpmaddubsw), so full-range int8 codes can overflow (quantization.h: int8_weight_max_code).
bool cpu_has_int8_dot_product();

// True when oneDNN has bfloat16 convolutions and matmuls on this CPU: oneDNN 2.6 runs them on
// AVX-512 (avx512_core, emulated) and natively with AVX512_BF16/AMX; below, none.
bool cpu_has_bf16_compute();

}  // namespace kiln
