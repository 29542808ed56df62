// Launchers for kiln's own CUDA kernels (elementwise.cu, elementwise_chain.cu, pool.cu, softmax.cu, layer_norm.cu, copy.cu,
// depthwise_conv.cu). Plain types only:
// this header is read by nvcc and by the C++ side, so it includes no kiln header. Every launcher
// enqueues on `stream` and returns the launch's error (cudaSuccess when nothing went wrong).
#pragma once

#include <cstdint>

#include <cuda_runtime_api.h>

#include "kernels/cuda/broadcast_shape.h"  // BroadcastShape
#include "kernels/cuda/pool_window.h"      // Pool2d
#include "kernels/cuda/depthwise_window.h" // Depthwise2d
#include "kernels/cuda/strided_view.h"     // StridedView
#include "kernels/cuda/activation_math.h"  // ActivationParams

namespace kiln::cuda {

// Storage of float values on the device; kernels compute in float whatever the storage.
enum class FloatType { f32, f16, bf16 };


// y[i] = act(x[i]); x may equal y.
cudaError_t launch_activation(FloatType type, const ActivationParams& act, const void* x, void* y, int64_t n, cudaStream_t stream);

enum class BinaryOp : int { add, sub, mul, div, max, min };

cudaError_t launch_binary(FloatType type, BinaryOp op, const void* a, const void* b, void* y, const BroadcastShape& shape,
                          cudaStream_t stream);

// y[o, c, i] = act(x[o, c, i] * scale[c] + shift[c]) over [outer, channels, inner]; scale and
// shift are float32 whatever `type` is (BatchNormalization folded at load).
cudaError_t launch_channel_affine(FloatType type, const void* x, const float* scale, const float* shift, void* y,
                                  int64_t outer, int64_t channels, int64_t inner, const ActivationParams& act,
                                  cudaStream_t stream);

// y[o, c, i] = act(y[o, c, i] + bias[c]) in place over [outer, channels, inner], bias of y's type
// (a convolution's bias and activation in one pass after cuDNN).
cudaError_t launch_bias_activation(FloatType type, void* y, const void* bias, int64_t outer, int64_t channels, int64_t inner,
                                   const ActivationParams& act, cudaStream_t stream);

// float32 <-> float16 or bfloat16 `type` (round to nearest even), n elements.
cudaError_t launch_from_f32(FloatType type, const float* src, void* dst, int64_t n, cudaStream_t stream);
cudaError_t launch_to_f32(FloatType type, const void* src, float* dst, int64_t n, cudaStream_t stream);

// 2-D pooling over NCHW (pool_window.h).
cudaError_t launch_pool2d(FloatType type, const Pool2d& p, const void* x, void* y, cudaStream_t stream);

// y[r] = mean (or max) of x[r, 0..plane) for r < rows (GlobalAveragePool / GlobalMaxPool).
cudaError_t launch_global_pool(FloatType type, bool max, const void* x, void* y, int64_t rows, int64_t plane,
                               cudaStream_t stream);

// Softmax (or log-softmax) along the middle axis of [outer, axis, inner], accumulated in float.
cudaError_t launch_softmax(FloatType type, bool log, const void* x, void* y, int64_t outer, int64_t axis, int64_t inner,
                           cudaStream_t stream);

// LayerNormalization over the last axis of [rows, cols]; scale (and bias, when not null) are
// float32 [cols] whatever `type` is.
cudaError_t launch_layer_norm(FloatType type, const void* x, const float* scale, const float* bias, void* y, int64_t rows,
                              int64_t cols, float epsilon, cudaStream_t stream);

// An ElementwiseChain program (kernels/elementwise_program.h) in a form the device reads: ops in
// ChainOp's order (elementwise_chain_op.cpp checks the two agree), register numbers as there, and
// per operand the element strides over the output's (collapsed) dims, 0 where it is broadcast.
inline constexpr int kMaxChainOperands = 6;  // inputs after X
inline constexpr int kMaxChainRegisters = 32;
inline constexpr int kMaxChainCode = 24;
struct DeviceChain {
  int operands = 0, first_scalar = 0, first_result = 0, code_size = 0;
  float scalars[kMaxChainRegisters] = {};
  uint8_t op[kMaxChainCode] = {};
  int8_t a[kMaxChainCode] = {}, b[kMaxChainCode] = {};
  int rank = 0;  // of dims, after collapsing (X itself is contiguous)
  int64_t dims[kMaxBroadcastRank] = {};
  int64_t strides[kMaxChainOperands][kMaxBroadcastRank] = {};
};

// y[i] = the chain's last register on element i of x (n elements); operands[k] is input k + 1.
cudaError_t launch_elementwise_chain(FloatType type, const DeviceChain& chain, const void* x, const void* const* operands, void* y,
                                     int64_t n, cudaStream_t stream);

// Depthwise 2-D convolution over NCHW (depthwise_window.h): y = act(conv(x, w) + bias + residual);
// bias [C] and residual (y's shape) may be null; w is [C, 1, kh, kw], all of `type`.
cudaError_t launch_depthwise_conv(FloatType type, const Depthwise2d& p, const void* x, const void* w, const void* bias,
                                  const void* residual, void* y, const ActivationParams& act, cudaStream_t stream);

// y[i] = x[strided_source(view, i)] for every output element, `element_bytes` (1, 2, 4 or 8) each.
cudaError_t launch_strided_copy(int element_bytes, const void* x, void* y, const StridedView& view, cudaStream_t stream);

}  // namespace kiln::cuda
