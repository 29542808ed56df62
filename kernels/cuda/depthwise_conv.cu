// Depthwise 2-D convolution (MobileNet, EfficientNet, ShuffleNet, ConvNeXt's 7x7) on kiln's own
// kernel: a block stages one plane's input tile and weights in shared memory as float, and each
// thread computes one column of the tile's outputs with bias, residual and activation applied
// before the single store. cuDNN's NCHW depthwise paths were measured far from memory speed on an
// H100 in fp16 at batch 64 (ConvNeXt-T's 56x56x96 7x7: 0.78 ms for 77 MB of traffic; EfficientNet-B0's
// 3x3 stride 2 on 112x112x96: 0.36 ms).
#include "kernels/cuda/device_math.cuh"

namespace kiln::cuda {
namespace {

// kK > 0: a kK x kK window with dilation 1, unrolled; 0: any window from `p`.
template <typename T, int kK>
__global__ void depthwise_kernel(const KILN_GRID_CONSTANT Depthwise2d p, const T* x, const T* w, const T* bias, const T* residual,
                                 T* y, const KILN_GRID_CONSTANT ActivationParams act) {
  extern __shared__ float shared[];
  const int kernel_h = kK > 0 ? kK : p.kernel_h, kernel_w = kK > 0 ? kK : p.kernel_w;
  const int dilation_h = kK > 0 ? 1 : p.dilation_h, dilation_w = kK > 0 ? 1 : p.dilation_w;
  const int in_tile_h = (p.tile_h - 1) * p.stride_h + (kernel_h - 1) * dilation_h + 1;
  const int in_tile_w = (p.tile_w - 1) * p.stride_w + (kernel_w - 1) * dilation_w + 1;
  float* tile = shared;
  float* weights = shared + in_tile_h * in_tile_w;

  const int tiles_w = p.tiles_w();
  const int oh0 = static_cast<int>(blockIdx.x) / tiles_w * p.tile_h;
  const int ow0 = static_cast<int>(blockIdx.x) % tiles_w * p.tile_w;
  const int c = static_cast<int>(blockIdx.y);
  const int64_t plane = static_cast<int64_t>(blockIdx.z) * p.channels + c;
  const T* in = x + plane * p.in_h * p.in_w;
  const int ih0 = oh0 * p.stride_h - p.pad_top, iw0 = ow0 * p.stride_w - p.pad_left;
  for (int k = static_cast<int>(threadIdx.x); k < in_tile_h * in_tile_w; k += static_cast<int>(blockDim.x)) {
    const int r = k / in_tile_w, col = k - r * in_tile_w;
    const int ih = ih0 + r, iw = iw0 + col;
    tile[k] = ih >= 0 && ih < p.in_h && iw >= 0 && iw < p.in_w ? load_float(in, static_cast<int64_t>(ih) * p.in_w + iw) : 0.0f;
  }
  for (int k = static_cast<int>(threadIdx.x); k < kernel_h * kernel_w; k += static_cast<int>(blockDim.x))
    weights[k] = load_float(w, static_cast<int64_t>(c) * kernel_h * kernel_w + k);
  __syncthreads();

  const int tx = static_cast<int>(threadIdx.x) % p.tile_w, ty0 = static_cast<int>(threadIdx.x) / p.tile_w;
  const int ow = ow0 + tx;
  if (ty0 >= p.thread_rows || ow >= p.out_w) return;
  const float b = bias != nullptr ? load_float(bias, c) : 0.0f;
  const int64_t out_plane = plane * p.out_h * p.out_w;
  for (int ty = ty0; ty < p.tile_h; ty += p.thread_rows) {
    const int oh = oh0 + ty;
    if (oh >= p.out_h) break;
    const float* taps = tile + ty * p.stride_h * in_tile_w + tx * p.stride_w;
    float acc = 0.0f;
    // With kK > 0 the trip counts are constants and nvcc unrolls both loops.
    for (int i = 0; i < kernel_h; ++i)
      for (int j = 0; j < kernel_w; ++j)
        acc = fmaf(taps[i * dilation_h * in_tile_w + j * dilation_w], weights[i * kernel_w + j], acc);
    acc += b;
    const int64_t at = out_plane + static_cast<int64_t>(oh) * p.out_w + ow;
    if (residual != nullptr) acc += load_float(residual, at);
    store_float(y, at, activation_value(act, acc));
  }
}

template <typename T, int kK>
void depthwise(const Depthwise2d& p, const void* x, const void* w, const void* bias, const void* residual, void* y,
               const ActivationParams& act, cudaStream_t stream) {
  const dim3 grid(static_cast<unsigned>(p.tiles_w() * p.tiles_h()), static_cast<unsigned>(p.channels), static_cast<unsigned>(p.batch));
  const unsigned block = static_cast<unsigned>(p.tile_w * p.thread_rows);
  depthwise_kernel<T, kK><<<grid, block, static_cast<size_t>(p.shared_bytes()), stream>>>(
      p, static_cast<const T*>(x), static_cast<const T*>(w), static_cast<const T*>(bias), static_cast<const T*>(residual),
      static_cast<T*>(y), act);
}

}  // namespace

cudaError_t launch_depthwise_conv(FloatType type, const Depthwise2d& p, const void* x, const void* w, const void* bias,
                                  const void* residual, void* y, const ActivationParams& act, cudaStream_t stream) {
  if (p.batch == 0 || p.channels == 0 || p.out_h == 0 || p.out_w == 0) return cudaSuccess;
  const bool square = p.kernel_h == p.kernel_w && p.dilation_h == 1 && p.dilation_w == 1;
  with_storage_type(type, [&](auto tag) {
    using T = typename decltype(tag)::type;
    if (square && p.kernel_h == 3) depthwise<T, 3>(p, x, w, bias, residual, y, act, stream);
    else if (square && p.kernel_h == 5) depthwise<T, 5>(p, x, w, bias, residual, y, act, stream);
    else if (square && p.kernel_h == 7) depthwise<T, 7>(p, x, w, bias, residual, y, act, stream);
    else depthwise<T, 0>(p, x, w, bias, residual, y, act, stream);
  });
  return cudaGetLastError();
}

}  // namespace kiln::cuda
