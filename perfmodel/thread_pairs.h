// Sweep points whose thread pair contradicts itself: a compute-bound convolution or GEMM timed at one
// thread and at T threads must run at most T times faster and clearly faster at all. A pair outside
// that range had one of its readings taken while the host ran slow: on AMX Xeon VMs bf16/int8
// kernels switch between two speeds about 2.4x apart for minutes at a time (bench/results/
// emr-2026-12-06), and a bf16 3x3 conv of 925 MMACs stored 1.26 ms at one thread and 2.34 ms at two.
// The slow mode only ever adds time, so the slower reading is the wrong one: it is priced again from
// the other reading at the ratio the pairs of the same op and dtype that agree show.
#pragma once

#include <vector>

#include "perfmodel/measurement.h"

namespace kiln::perf {

// Work below this many MACs may not speed up with threads at all (fork/join against microseconds).
inline constexpr double kThreadPairMinMacs = 50e6;
// A pair agrees when one-thread time / T-thread time lies in [kThreadPairLowest * T, kThreadPairHighest * T]:
// a reading 2.4x slow puts a pair near 0.8 (T slow) or 4.6 (one thread slow) at T = 2; agreeing pairs
// measured 1.3-2.2 on the AMX VM and 1.6-2.0 on Zen 4.
inline constexpr double kThreadPairLowest = 0.6, kThreadPairHighest = 1.15;
// Fewer agreeing pairs than this in an op and dtype: nothing to take the ratio from, nothing repaired.
inline constexpr int kThreadPairMinAgreeing = 5;

// Reprices, in place, the slower reading of every contradicting pair of interior conv/gemm kernel points
// (same kind, op, dtype and key at one thread and at T > 1 threads) as the other reading times (or
// over) the median ratio of the agreeing pairs of that op, dtype and T. Returns how many points it changed.
int repair_contradicting_thread_pairs(std::vector<Measurement>& kernels);

}  // namespace kiln::perf
