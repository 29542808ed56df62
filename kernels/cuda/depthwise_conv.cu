// Depthwise 2-D convolution (MobileNet, EfficientNet, ShuffleNet, ConvNeXt's 7x7) on kiln's own
// kernel: a block stages one plane's input tile and weights in shared memory as float, and each
// thread computes a few consecutive rows of one column of the tile's outputs, with bias, residual
// and activation applied before the single store. cuDNN's NCHW depthwise paths were measured far from memory speed on an
// H100 in fp16 at batch 64 (ConvNeXt-T's 56x56x96 7x7: 0.78 ms for 77 MB of traffic; EfficientNet-B0's
// 3x3 stride 2 on 112x112x96: 0.36 ms).
#include "kernels/cuda/device_math.cuh"

namespace kiln::cuda {
namespace {

// The block's tile: its first output row and column, its channel and its (image, channel) plane.
struct BlockTile {
  int oh0, ow0, channel;
  int64_t plane;
};

__device__ inline BlockTile block_tile(const Depthwise2d& p) {
  const int tiles_w = p.tiles_w();
  const int c = static_cast<int>(blockIdx.y);
  return {static_cast<int>(blockIdx.x) / tiles_w * p.tile_h, static_cast<int>(blockIdx.x) % tiles_w * p.tile_w, c,
          static_cast<int64_t>(blockIdx.z) * p.channels + c};
}

// Stages the block's input tile (zeros outside the input) and its plane's weights as float.
template <typename T>
__device__ inline void stage_tile(const Depthwise2d& p, const T* in, const T* w, int c, int ih0, int iw0, int in_tile_h,
                                  int in_tile_w, int kernel_elements, float* tile, float* weights) {
  const int n = in_tile_h * in_tile_w;
#pragma unroll 4
  for (int k = static_cast<int>(threadIdx.x); k < n; k += static_cast<int>(blockDim.x)) {
    const int r = k / in_tile_w, col = k - r * in_tile_w;
    const int ih = ih0 + r, iw = iw0 + col;
    tile[k] = ih >= 0 && ih < p.in_h && iw >= 0 && iw < p.in_w ? load_float(in, static_cast<int64_t>(ih) * p.in_w + iw) : 0.0f;
  }
  for (int k = static_cast<int>(threadIdx.x); k < kernel_elements; k += static_cast<int>(blockDim.x))
    weights[k] = load_float(w, static_cast<int64_t>(c) * kernel_elements + k);
}

template <typename T>
__device__ inline void store_output(const Depthwise2d& p, T* y, const T* residual, int64_t at, float acc, float bias,
                                    const ActivationParams& act) {
  acc += bias;
  if (residual != nullptr) acc += load_float(residual, at);
  store_float(y, at, activation_value(act, acc));
}

// A kK x kK window (dilation 1) at stride kS, kR rows a thread: each of the kR outputs'
// (kR - 1) * kS + kK input rows is read once (kK taps) and used by every output row whose window
// holds it. Measured on an H100, fp16, batch 64: ConvNeXt-T's 56x56x96 7x7 0.396 -> 0.203 ms
// against one row a thread (cuDNN: 0.78 ms). A variant measured slower and was dropped (both
// changes in one run, so not told apart): the weights loaded into registers from global memory
// instead of the shared copy (still 40 registers: nvcc keeps only the weight rows in use live)
// with the staging loads predicated and batched eight a thread: 56x56 unchanged (0.205 ms),
// 14x14 planes 0.113 -> 0.148 ms.
template <typename T, int kK, int kS, int kR>
__global__ void depthwise_fixed_kernel(const KILN_GRID_CONSTANT Depthwise2d p, const T* x, const T* w, const T* bias,
                                       const T* residual, T* y, const KILN_GRID_CONSTANT ActivationParams act) {
  extern __shared__ float shared[];
  const int in_tile_h = (p.tile_h - 1) * kS + kK, in_tile_w = (p.tile_w - 1) * kS + kK;
  float* tile = shared;
  float* weights = shared + in_tile_h * in_tile_w;
  const BlockTile block = block_tile(p);
  const int oh0 = block.oh0, ow0 = block.ow0, c = block.channel;
  const int64_t plane = block.plane;
  stage_tile(p, x + plane * p.in_h * p.in_w, w, c, oh0 * kS - p.pad_top, ow0 * kS - p.pad_left, in_tile_h, in_tile_w, kK * kK,
             tile, weights);
  __syncthreads();

  const int tx = static_cast<int>(threadIdx.x) % p.tile_w, row0 = static_cast<int>(threadIdx.x) / p.tile_w * kR;
  const int ow = ow0 + tx;
  if (row0 >= p.tile_h || ow >= p.out_w || oh0 + row0 >= p.out_h) return;
  float wr[kK * kK];
#pragma unroll
  for (int k = 0; k < kK * kK; ++k) wr[k] = weights[k];
  float acc[kR];
#pragma unroll
  for (int o = 0; o < kR; ++o) acc[o] = 0.0f;
  const float* column = tile + row0 * kS * in_tile_w + tx * kS;
#pragma unroll
  for (int r = 0; r < (kR - 1) * kS + kK; ++r) {
    float tap[kK];
#pragma unroll
    for (int j = 0; j < kK; ++j) tap[j] = column[r * in_tile_w + j];
#pragma unroll
    for (int o = 0; o < kR; ++o) {
      const int i = r - o * kS;  // the window row of output o that input row r is
      if (i >= 0 && i < kK) {
#pragma unroll
        for (int j = 0; j < kK; ++j) acc[o] = fmaf(tap[j], wr[i * kK + j], acc[o]);
      }
    }
  }
  const float b = bias != nullptr ? load_float(bias, c) : 0.0f;
  const int64_t out_plane = plane * p.out_h * p.out_w;
#pragma unroll
  for (int o = 0; o < kR; ++o)
    if (oh0 + row0 + o < p.out_h)
      store_output(p, y, residual, out_plane + static_cast<int64_t>(oh0 + row0 + o) * p.out_w + ow, acc[o], b, act);
}

// Any window, stride and dilation: each output reads its window from shared memory.
template <typename T>
__global__ void depthwise_any_kernel(const KILN_GRID_CONSTANT Depthwise2d p, const T* x, const T* w, const T* bias,
                                     const T* residual, T* y, const KILN_GRID_CONSTANT ActivationParams act) {
  extern __shared__ float shared[];
  const int in_tile_h = p.in_tile_h(), in_tile_w = p.in_tile_w();
  float* tile = shared;
  float* weights = shared + in_tile_h * in_tile_w;
  const BlockTile block = block_tile(p);
  const int oh0 = block.oh0, ow0 = block.ow0, c = block.channel;
  const int64_t plane = block.plane;
  stage_tile(p, x + plane * p.in_h * p.in_w, w, c, oh0 * p.stride_h - p.pad_top, ow0 * p.stride_w - p.pad_left, in_tile_h,
             in_tile_w, p.kernel_h * p.kernel_w, tile, weights);
  __syncthreads();

  const int tx = static_cast<int>(threadIdx.x) % p.tile_w, row0 = static_cast<int>(threadIdx.x) / p.tile_w * p.rows_per_thread;
  const int ow = ow0 + tx;
  if (row0 >= p.tile_h || ow >= p.out_w) return;
  const float b = bias != nullptr ? load_float(bias, c) : 0.0f;
  const int64_t out_plane = plane * p.out_h * p.out_w;
  for (int ty = row0; ty < row0 + p.rows_per_thread && oh0 + ty < p.out_h; ++ty) {
    const float* taps = tile + ty * p.stride_h * in_tile_w + tx * p.stride_w;
    float acc = 0.0f;
    for (int i = 0; i < p.kernel_h; ++i)
      for (int j = 0; j < p.kernel_w; ++j)
        acc = fmaf(taps[i * p.dilation_h * in_tile_w + j * p.dilation_w], weights[i * p.kernel_w + j], acc);
    store_output(p, y, residual, out_plane + static_cast<int64_t>(oh0 + ty) * p.out_w + ow, acc, b, act);
  }
}

struct DepthwiseLaunch {
  dim3 grid, block;
  size_t shared = 0;
};

DepthwiseLaunch depthwise_launch(const Depthwise2d& p) {
  return {dim3(static_cast<unsigned>(p.tiles_w() * p.tiles_h()), static_cast<unsigned>(p.channels), static_cast<unsigned>(p.batch)),
          dim3(static_cast<unsigned>(p.tile_w * p.thread_rows)), static_cast<size_t>(p.shared_bytes())};
}

template <typename T, int kK, int kS>
bool try_fixed(const Depthwise2d& p, const T* x, const T* w, const T* bias, const T* residual, T* y, const ActivationParams& act,
               cudaStream_t stream) {
  if (p.kernel_h != kK || p.kernel_w != kK || p.stride_h != kS || p.stride_w != kS || p.dilation_h != 1 || p.dilation_w != 1)
    return false;
  const DepthwiseLaunch l = depthwise_launch(p);
  if (p.rows_per_thread == 4)
    depthwise_fixed_kernel<T, kK, kS, 4><<<l.grid, l.block, l.shared, stream>>>(p, x, w, bias, residual, y, act);
  else if (p.rows_per_thread == 1)
    depthwise_fixed_kernel<T, kK, kS, 1><<<l.grid, l.block, l.shared, stream>>>(p, x, w, bias, residual, y, act);
  else
    return false;
  return true;
}

template <typename T>
void depthwise(const Depthwise2d& p, const void* xv, const void* wv, const void* biasv, const void* residualv, void* yv,
               const ActivationParams& act, cudaStream_t stream) {
  const T* x = static_cast<const T*>(xv);
  const T* w = static_cast<const T*>(wv);
  const T* bias = static_cast<const T*>(biasv);
  const T* residual = static_cast<const T*>(residualv);
  T* y = static_cast<T*>(yv);
  if (try_fixed<T, 3, 1>(p, x, w, bias, residual, y, act, stream) || try_fixed<T, 3, 2>(p, x, w, bias, residual, y, act, stream) ||
      try_fixed<T, 5, 1>(p, x, w, bias, residual, y, act, stream) || try_fixed<T, 5, 2>(p, x, w, bias, residual, y, act, stream) ||
      try_fixed<T, 7, 1>(p, x, w, bias, residual, y, act, stream))
    return;
  const DepthwiseLaunch l = depthwise_launch(p);
  depthwise_any_kernel<T><<<l.grid, l.block, l.shared, stream>>>(p, x, w, bias, residual, y, act);
}

}  // namespace

cudaError_t launch_depthwise_conv(FloatType type, const Depthwise2d& p, const void* x, const void* w, const void* bias,
                                  const void* residual, void* y, const ActivationParams& act, cudaStream_t stream) {
  if (p.batch == 0 || p.channels == 0 || p.out_h == 0 || p.out_w == 0) return cudaSuccess;
  with_storage_type(type, [&](auto tag) { depthwise<typename decltype(tag)::type>(p, x, w, bias, residual, y, act, stream); });
  return cudaGetLastError();
}

}  // namespace kiln::cuda
