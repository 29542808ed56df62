// ElementwiseChain on the device: one thread per output element loads X and each operand (at its
// broadcast offset), runs the program in float registers and stores the last one, so ConvNeXt's
// bias + GELU written out (six nodes) reads and writes memory once instead of six times. Each op
// is computed as kernels/elementwise_program.h's chain_op_apply defines it.
#include <cfloat>

#include "kernels/cuda/device_math.cuh"

namespace kiln::cuda {
namespace {

// ChainOp's order (kernels/elementwise_program.h).
enum DeviceChainOp : uint8_t { add, sub, mul, div_, max_, min_, pow_, prelu, relu, sigmoid, tanh_, erf_, exp_, log_, sqrt_, neg, abs_, reciprocal };

__device__ inline float chain_apply(uint8_t op, float a, float b) {
  switch (op) {
    case add: return a + b;
    case sub: return a - b;
    case mul: return a * b;
    case div_: return a / b;
    case max_: return isnan(a) || isnan(b) ? __int_as_float(0x7fc00000) : (a < b ? b : a);
    case min_: return isnan(a) || isnan(b) ? __int_as_float(0x7fc00000) : (b < a ? b : a);
    case pow_: return static_cast<float>(pow(static_cast<double>(a), static_cast<double>(b)));
    case prelu: return a < 0.0f ? b * a : a;
    case relu: return a < 0.0f ? 0.0f : a;
    case sigmoid: return a >= 0.0f ? 1.0f / (1.0f + expf(-a)) : expf(a) / (1.0f + expf(a));
    case tanh_: return tanhf(a);
    case erf_: return erff(a);
    case exp_: return expf(a);
    case log_: return logf(a);
    case sqrt_: return sqrtf(a);
    case neg: return -a;
    case abs_: return fabsf(a);
    case reciprocal: return 1.0f / a;
  }
  return __int_as_float(0x7fc00000);
}

struct Operands {
  const void* p[kMaxChainOperands];
};

template <typename T, typename Index>
__global__ void chain_kernel(DeviceChain c, const T* x, Operands operands, T* y, Index n) {
  float r[kMaxChainRegisters];
  for (Index i = static_cast<Index>(global_thread()); i < n; i += static_cast<Index>(grid_threads())) {
    r[0] = load_float(x, i);
    // Coordinates of i over the collapsed dims, then each operand's offset.
    Index coord[kMaxBroadcastRank];
    Index rest = i;
    for (int d = c.rank - 1; d > 0; --d) {
      const Index dim = static_cast<Index>(c.dims[d]);
      coord[d] = rest % dim;
      rest /= dim;
    }
    coord[0] = rest;
    for (int k = 0; k < c.operands; ++k) {
      Index at = 0;
      for (int d = 0; d < c.rank; ++d) at += coord[d] * static_cast<Index>(c.strides[k][d]);
      r[1 + k] = load_float(static_cast<const T*>(operands.p[k]), at);
    }
    for (int s = c.first_scalar; s < c.first_result; ++s) r[s] = c.scalars[s - c.first_scalar];
    for (int j = 0; j < c.code_size; ++j) r[c.first_result + j] = chain_apply(c.op[j], r[c.a[j]], c.b[j] < 0 ? 0.0f : r[c.b[j]]);
    store_float(y, i, r[c.first_result + c.code_size - 1]);
  }
}

template <typename T>
void chain(const DeviceChain& c, const void* x, const void* const* operands, void* y, int64_t n, cudaStream_t stream) {
  Operands p{};
  for (int k = 0; k < c.operands; ++k) p.p[k] = operands[k];
  const T* tx = static_cast<const T*>(x);
  if (n < kIndex32Limit) chain_kernel<<<grid_for(n), kBlock, 0, stream>>>(c, tx, p, static_cast<T*>(y), static_cast<int32_t>(n));
  else chain_kernel<<<grid_for(n), kBlock, 0, stream>>>(c, tx, p, static_cast<T*>(y), n);
}

}  // namespace

cudaError_t launch_elementwise_chain(FloatType type, const DeviceChain& c, const void* x, const void* const* operands, void* y,
                                     int64_t n, cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  if (c.code_size < 1 || c.operands > kMaxChainOperands || c.first_result + c.code_size > kMaxChainRegisters)
    return cudaErrorInvalidValue;
  if (type == FloatType::f32) chain<float>(c, x, operands, y, n, stream);
  else chain<__half>(c, x, operands, y, n, stream);
  return cudaGetLastError();
}

}  // namespace kiln::cuda
