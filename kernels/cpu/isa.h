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

}  // namespace kiln
