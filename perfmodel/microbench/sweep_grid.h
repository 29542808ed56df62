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
// and ConvNeXt. concat_affine: `kernel` inputs of in_c channels each, joined on channels and
// normalized (Concat -> BatchNormalization -> ReLU, fused into one ConcatAffine: DenseNet's
// layers). depth_first: see SweepShape::mid_c; float32 on AVX-512 only (where fuse_depth_first runs).
// layernorm: LayerNormalization over the channels of an NHWC view (in_c channels, h x w pixels), as
// ConvNeXt's and transformers' norms run.
enum class SweepOp { conv, depthwise_conv, gemm, maxpool, avgpool, global_avgpool, add, concat, eltwise, depth_first, concat_affine, layernorm };

struct SweepShape {
  SweepOp op = SweepOp::conv;
  int64_t batch = 1;
  int64_t in_c = 0, out_c = 0, h = 0, w = 0;  // input NCHW (concat: each of two inputs); conv/pool output derived
  int64_t kernel = 0, stride = 1, pad = 0;
  int64_t m = 0, k = 0, n = 0;  // gemm: [m, k] x [k, n]
  // conv/depthwise_conv at a region border: the op reads a plain float32 NCHW graph input and
  // converts it (layout, and to bf16/int8) inside its own step, as a layer after a Slice,
  // Transpose or the model's input does. The predictor takes the conversion's cost from these.
  bool plain_input = false;
  // conv reading float32 in its own format (a Concat of two producers' float32 outputs), as a
  // bf16/int8 conv after a float32 Concat does: a conversion of precision only. bf16/int8 points only.
  bool float_input = false;
  // conv/depthwise_conv with a fused SiLU (x * sigmoid(x), EfficientNet's) instead of ReLU: the
  // predictor takes an epilogue's cost inside a kernel from these.
  bool silu = false;
  // conv with a fused residual sum and ReLU (a ResNet or MobileNetV2 block's last conv): in a model the
  // sum reads the residual from wherever an earlier layer left it (ResNet-50's 64->256 56x56 at batch 8:
  // 3.8 ms without it, 7.1 ms with it on a Zen 5). The predictor takes the sum's cost from these.
  bool residual = false;
  // int8 conv/depthwise_conv reading signed codes (s8: a producer without ReLU), as a layer after a
  // linear bottleneck, a SiLU or a LayerNorm does. Every other int8 conv point reads u8 (a producer
  // with ReLU, as in ReLU networks): without VNNI oneDNN runs s8 inputs 4-25% slower (a 512->512 7x7
  // conv at batch 8 on a Zen 3: 10.7 ms, 8.0 on u8). int8 points only.
  bool signed_input = false;
  // bf16/int8 gemm whose A is a producer MatMul's output in its own precision (bfloat16 rows, s8 codes), as
  // a transformer's or ConvNeXt's second Linear reads its first's; the op is then a MatMul with a bias, as
  // those are. Set by sweep_points for bf16/int8 (float32 A needs nothing converted). With float_input
  // instead, a gemm reads float32 (a graph input) and converts it in its own step, as a classifier after
  // a pooling does.
  bool rows_input = false;
  // int8 conv/depthwise_conv (every form but the residual one, which always is) whose output a depthwise
  // conv reads (not timed), as a model's next layer reads it, so that it writes u8 codes. Set by
  // sweep_points for int8 (sweep_as_run). Without it the output left the graph and an int8 conv wrote
  // float32, four times the bytes a model's interior conv writes (SqueezeNet's 16->64 3x3 55x55 at batch 32,
  // one thread: 3.9-4.0 ms in the sweep, 2.8 in the model).
  bool codes_out = false;
  // depth_first: a MobileNet block run tile by tile (DepthFirstConv): 1x1 expansion in_c -> mid_c
  // + ReLU, depthwise kernel x kernel (stride, pad) + ReLU, 1x1 projection mid_c -> out_c.
  // Its two other forms: without the expansion (in_c == mid_c: depthwise + projection) or
  // without the projection (out_c == mid_c: expansion + depthwise).
  int64_t mid_c = 0;
  bool expand = true, project = true;
  // conv: the op `copies` times side by side on one producer's output, each with weights of its own,
  // timed per copy (weight_reuse.h): between two reads of one copy's weights the others pass
  // through the caches, as every other layer's do in a model.
  int64_t copies = 1;
};

// The record's op: the sweep op's name, "depth_first_dw" (no expansion), "depth_first_expand" (no
// projection), "<op>_from_plain" / "<op>_from_f32" / "<op>_silu" / "<op>_sum" / "<op>_from_s8" for
// border points (measurement.h).
std::string sweep_record_op(const SweepShape& s);
// Every op a sweep point is recorded under: sweep_record_op over the full grid, the border grid and
// the device grid, sorted (what `kiln bench-target --sweep-ops` accepts).
std::vector<std::string> sweep_record_ops();

std::string sweep_op_name(SweepOp op);  // "conv", "depthwise_conv", ...
// Conv/Gemm run in bf16 and int8, and so does a max pool after them (reading their layout: oneDNN 2.6's
// bf16 max pool ran 2.8-3.6x slower than the float32 pools' rate at half the compares predicted, GoogLeNet's
// 13 pools 1.8 ms of 5.4 at batch 1 on an AMX Xeon), and a ConcatAffine between them (it reads bf16 and
// writes bfloat16 or u8 codes for its conv: DenseNet-121 bf16 b8, 1 thread, 29 ms in float32, 21 so), and a
// Concat of their outputs (it joins codes or bfloat16: SqueezeNet int8 b8, 1 thread, 8 Concats 1.1 ms measured,
// 3.1 priced from float32 ones); average pooling and Add in f32 only.
bool sweep_op_has_precisions(SweepOp op);

int64_t sweep_out_h(const SweepShape& s);
int64_t sweep_out_w(const SweepShape& s);
double sweep_macs(const SweepShape& s);  // multiply-accumulates; window reads for pooling, adds for Add, elements for Concat, elements x ops for eltwise
// Inputs + weights + bias + outputs, with activations and weights of `element_bytes` each.
double sweep_bytes(const SweepShape& s, double element_bytes);
std::string sweep_key(const SweepShape& s);  // "conv k3 s1 64->64 56x56 b1" (" x16" with copies)

// The grid: `quick` is a handful of small shapes (seconds); else the sampled design.
std::vector<SweepShape> sweep_grid(bool quick);
// A device's large-work grid: convolutions (grid and real layers) and fully connected layers at
// batch 64 with more work than the grid's cap allows a CPU core (2.4 to 30 GMACs), the layers a GPU
// runs at large batch. Without them a GPU profile priced ResNet-18's batch-64 3x3 convolutions
// (7.4 GMACs) from points of at most 2.4 and predicted the model 1.8x too slow on an H200
// (docs/cuda-backend.md). Deterministic, as the grid.
std::vector<SweepShape> sweep_device_large_grid();
// The border grid: convolutions and depthwise convolutions reading plain float32 (plain_input),
// stems on 3 channels among them, convolutions reading float32 in their format (float_input), and
// convolutions with a SiLU epilogue (silu), with a residual sum (residual), and int8 convolutions and
// depthwise convolutions reading s8 (signed_input). CPU only: a GPU plan converts in steps of its own.
std::vector<SweepShape> sweep_border_grid(bool quick);

}  // namespace kiln::perf
