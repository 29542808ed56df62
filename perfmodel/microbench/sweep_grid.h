// The kernel sweep's grid: shapes typical of CNNs and MLPs, designed rather than copied from any
// model (kernels 1/3/5/7, strides 1/2, channels 16..2048, spatial 7..112, batch 1/8/32; Gemm
// M 1..128, K and N 64..4096), enumerated per op, capped in work per point, and sampled
// deterministically (a fixed seed, round-robin over kernel/stride/batch strata) so the full grid
// runs in minutes and is the same on every machine.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace kiln::perf {

// eltwise: an ElementwiseChain written out as ONNX ops, `kernel` of them: SiLU (2: Sigmoid, Mul)
// or GELU (5: Div, Erf, Add, Mul, Mul), the transcendental epilogues and chains of EfficientNet
// and ConvNeXt.
enum class SweepOp { conv, depthwise_conv, gemm, maxpool, avgpool, global_avgpool, add, concat, eltwise };

struct SweepShape {
  SweepOp op = SweepOp::conv;
  int64_t batch = 1;
  int64_t in_c = 0, out_c = 0, h = 0, w = 0;  // input NCHW (concat: each of two inputs); conv/pool output derived
  int64_t kernel = 0, stride = 1, pad = 0;
  int64_t m = 0, k = 0, n = 0;  // gemm: [m, k] x [k, n]
};

std::string sweep_op_name(SweepOp op);  // "conv", "depthwise_conv", ...
bool sweep_op_has_precisions(SweepOp op);  // Conv/Gemm run in bf16 and int8; pooling, Add and Concat in f32 only

int64_t sweep_out_h(const SweepShape& s);
int64_t sweep_out_w(const SweepShape& s);
double sweep_macs(const SweepShape& s);  // multiply-accumulates; window reads for pooling, adds for Add, elements for Concat, elements x ops for eltwise
// Inputs + weights + bias + outputs, with activations and weights of `element_bytes` each.
double sweep_bytes(const SweepShape& s, double element_bytes);
std::string sweep_key(const SweepShape& s);  // "conv k3 s1 64->64 56x56 b1"

// The grid: `quick` is a handful of small shapes (seconds); else the sampled design.
std::vector<SweepShape> sweep_grid(bool quick);

}  // namespace kiln::perf
