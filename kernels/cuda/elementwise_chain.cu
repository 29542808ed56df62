// ElementwiseChain on the device: each thread loads X and each operand (at its broadcast offset),
// runs the program in float registers and stores the last one, so ConvNeXt's bias + GELU written
// out (six nodes) reads and writes memory once instead of six times. Each op is computed as
// kernels/elementwise_program.h's chain_op_apply defines it.
// The program is interpreted (decoded per instruction), so a thread takes four consecutive
// elements whenever the innermost dim allows: one decode, one index split and one register-file
// access serve four elements, and X and Y move in 4-element vectors. (One element per thread
// took 0.91 ms for ConvNeXt-T's 77M-element bias + GELU at batch 64 on an H100, about 10x its
// memory time: the interpretation, not memory, was the cost; four a thread: 0.345 ms. Keeping X,
// the scalars and the previous result out of shared memory, read through a branchy fetch, measured
// slower: 0.477 ms.)
#include <cfloat>
#include <cstdint>

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

// Splits element i into coordinates over the collapsed dims, innermost first, and sums each
// operand's offset; fixed trip counts, so `at` stays in registers.
template <typename Index>
__device__ inline void operand_offsets(const DeviceChain& c, Index i, Index (&at)[kMaxChainOperands]) {
  Index rest = i;
#pragma unroll
  for (int k = 0; k < kMaxChainOperands; ++k) at[k] = 0;
#pragma unroll
  for (int d = kMaxBroadcastRank - 1; d >= 0; --d) {
    if (d >= c.rank) continue;
    Index coord = rest;
    if (d > 0) {
      const Index dim = static_cast<Index>(c.dims[d]);
      coord = rest % dim;
      rest /= dim;
    }
#pragma unroll
    for (int k = 0; k < kMaxChainOperands; ++k)
      if (k < c.operands) at[k] += coord * static_cast<Index>(c.strides[k][d]);
  }
}

// The program's registers live in shared memory, one column per thread ([register][thread]: no
// bank conflicts): the program picks registers at run time, and a per-thread array indexed so
// spilled to local memory (ConvNeXt's GELU chain: 1.9 ms for 77M elements on an H100).
constexpr int kChainBlock = 128;

template <typename T, typename Index>
__global__ void __launch_bounds__(kChainBlock)
    chain_kernel(const KILN_GRID_CONSTANT DeviceChain c, const KILN_GRID_CONSTANT Operands operands, const T* x, T* y, Index n) {
  __shared__ float registers[kMaxChainRegisters * kChainBlock];
  float* r = registers + threadIdx.x;  // register k is r[k * kChainBlock]
  for (int s = c.first_scalar; s < c.first_result; ++s) r[s * kChainBlock] = c.scalars[s - c.first_scalar];
  for (Index i = static_cast<Index>(global_thread()); i < n; i += static_cast<Index>(grid_threads())) {
    r[0] = load_float(x, i);
    Index at[kMaxChainOperands];
    operand_offsets(c, i, at);
#pragma unroll
    for (int k = 0; k < kMaxChainOperands; ++k)
      if (k < c.operands) r[(1 + k) * kChainBlock] = load_float(static_cast<const T*>(operands.p[k]), at[k]);
    for (int j = 0; j < c.code_size; ++j)
      r[(c.first_result + j) * kChainBlock] =
          chain_apply(c.op[j], r[c.a[j] * kChainBlock], c.b[j] < 0 ? 0.0f : r[c.b[j] * kChainBlock]);
    store_float(y, i, r[(c.first_result + c.code_size - 1) * kChainBlock]);
  }
}

template <typename F>
__device__ inline float4 each4(F f, float4 a, float4 b) {
  return make_float4(f(a.x, b.x), f(a.y, b.y), f(a.z, b.z), f(a.w, b.w));
}

// Four elements per thread. The op's switch is outside the component loop, so it is decoded once.
__device__ inline float4 chain_apply4(uint8_t op, float4 a, float4 b) {
  switch (op) {
    case add: return each4([](float x, float y) { return x + y; }, a, b);
    case sub: return each4([](float x, float y) { return x - y; }, a, b);
    case mul: return each4([](float x, float y) { return x * y; }, a, b);
    case div_: return each4([](float x, float y) { return x / y; }, a, b);
    case erf_: return each4([](float x, float) { return erff(x); }, a, b);
    case relu: return each4([](float x, float) { return x < 0.0f ? 0.0f : x; }, a, b);
    default: return each4([op](float x, float y) { return chain_apply(op, x, y); }, a, b);
  }
}

template <typename T>
struct alignas(4 * sizeof(T)) Pack4 {
  T v[4];
};

template <typename T>
__device__ inline float4 load4(const T* p) {
  const Pack4<T> pack = *reinterpret_cast<const Pack4<T>*>(p);
  return make_float4(load_float(pack.v, 0), load_float(pack.v, 1), load_float(pack.v, 2), load_float(pack.v, 3));
}

template <typename T>
__device__ inline void store4(T* p, float4 v) {
  Pack4<T> pack;
  store_float(pack.v, 0, v.x);
  store_float(pack.v, 1, v.y);
  store_float(pack.v, 2, v.z);
  store_float(pack.v, 3, v.w);
  *reinterpret_cast<Pack4<T>*>(p) = pack;
}

// Operand k's four values at element offset `at` with innermost stride `step`: one value
// broadcast, a vector where contiguous and aligned, else four loads.
template <typename T, typename Index>
__device__ inline float4 load_operand4(const T* p, Index at, Index step) {
  if (step == 0) {
    const float v = load_float(p, at);
    return make_float4(v, v, v, v);
  }
  if (step == 1 && reinterpret_cast<uintptr_t>(p + at) % sizeof(Pack4<T>) == 0) return load4(p + at);
  return make_float4(load_float(p, at), load_float(p, at + step), load_float(p, at + 2 * step), load_float(p, at + 3 * step));
}

// The registers as float4 in dynamic shared memory, [register][thread] (a 16-byte access per
// thread: conflict-free by quarter warps). 64 threads: 32 registers take 32 KB.
constexpr int kChainBlock4 = 64;

template <typename T, typename Index>
__global__ void __launch_bounds__(kChainBlock4)
    chain_kernel4(const KILN_GRID_CONSTANT DeviceChain c, const KILN_GRID_CONSTANT Operands operands, const T* x, T* y, Index n) {
  extern __shared__ float4 registers4[];
  float4* r = registers4 + threadIdx.x;  // register k is r[k * kChainBlock4]
  for (int s = c.first_scalar; s < c.first_result; ++s) {
    const float v = c.scalars[s - c.first_scalar];
    r[s * kChainBlock4] = make_float4(v, v, v, v);
  }
  const Index groups = n / 4;
  for (Index g = static_cast<Index>(global_thread()); g < groups; g += static_cast<Index>(grid_threads())) {
    const Index i = g * 4;
    r[0] = load4(x + i);
    // The four elements share every coordinate but the innermost (dims[rank - 1] % 4 == 0).
    Index at[kMaxChainOperands];
    operand_offsets(c, i, at);
#pragma unroll
    for (int k = 0; k < kMaxChainOperands; ++k)
      if (k < c.operands)
        r[(1 + k) * kChainBlock4] =
            load_operand4(static_cast<const T*>(operands.p[k]), at[k], static_cast<Index>(c.strides[k][c.rank - 1]));
    for (int j = 0; j < c.code_size; ++j) {
      const float4 zero = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
      r[(c.first_result + j) * kChainBlock4] =
          chain_apply4(c.op[j], r[c.a[j] * kChainBlock4], c.b[j] < 0 ? zero : r[c.b[j] * kChainBlock4]);
    }
    store4(y + i, r[(c.first_result + c.code_size - 1) * kChainBlock4]);
  }
}

template <typename T>
void chain(const DeviceChain& c, const void* x, const void* const* operands, void* y, int64_t n, cudaStream_t stream) {
  Operands p{};
  for (int k = 0; k < c.operands; ++k) p.p[k] = operands[k];
  const T* tx = static_cast<const T*>(x);
  T* ty = static_cast<T*>(y);
  const bool aligned = reinterpret_cast<uintptr_t>(x) % sizeof(Pack4<T>) == 0 && reinterpret_cast<uintptr_t>(y) % sizeof(Pack4<T>) == 0;
  if (aligned && c.rank > 0 && c.dims[c.rank - 1] % 4 == 0) {
    const size_t shared = static_cast<size_t>(c.first_result + c.code_size) * kChainBlock4 * sizeof(float4);
    const unsigned grid = grid_for(n / 4, kChainBlock4);
    launch_indexed(n, n < kIndex32Limit,
                   [&](auto count) { chain_kernel4<<<grid, kChainBlock4, shared, stream>>>(c, p, tx, ty, count); });
    return;
  }
  const unsigned grid = grid_for(n, kChainBlock);
  launch_indexed(n, n < kIndex32Limit, [&](auto count) { chain_kernel<<<grid, kChainBlock, 0, stream>>>(c, p, tx, ty, count); });
}

}  // namespace

cudaError_t launch_elementwise_chain(FloatType type, const DeviceChain& c, const void* x, const void* const* operands, void* y,
                                     int64_t n, cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  if (c.code_size < 1 || c.operands > kMaxChainOperands || c.first_result + c.code_size > kMaxChainRegisters)
    return cudaErrorInvalidValue;
  with_storage_type(type, [&](auto tag) { chain<typename decltype(tag)::type>(c, x, operands, y, n, stream); });
  return cudaGetLastError();
}

}  // namespace kiln::cuda
