// A depthwise 2-D convolution's geometry over NCHW (group = input channels = output channels,
// weights [C, 1, kh, kw]) and the output tile each block of depthwise_conv.cu computes. No CUDA
// header: nvcc sees it as __host__ __device__, g++ as plain C++ (the CPU test checks the tiling).
#pragma once

#include <cstdint>

#include "kernels/cuda/host_device.h"

namespace kiln::cuda {

struct Depthwise2d {
  int64_t batch = 0, channels = 0;
  int in_h = 0, in_w = 0, out_h = 0, out_w = 0;
  int kernel_h = 1, kernel_w = 1, stride_h = 1, stride_w = 1, dilation_h = 1, dilation_w = 1;
  int pad_top = 0, pad_left = 0;  // windows start at out * stride - pad; taps outside the input read 0
  // The launch: a block per tile_h x tile_w outputs of one plane; its tile_w x thread_rows threads
  // each compute rows_per_thread consecutive rows of the tile (tile_h = thread_rows * rows_per_thread),
  // in one column.
  int tile_h = 1, tile_w = 1, thread_rows = 1, rows_per_thread = 1;

  KILN_HOST_DEVICE int in_tile_h() const { return (tile_h - 1) * stride_h + (kernel_h - 1) * dilation_h + 1; }
  KILN_HOST_DEVICE int in_tile_w() const { return (tile_w - 1) * stride_w + (kernel_w - 1) * dilation_w + 1; }
  KILN_HOST_DEVICE int tiles_w() const { return (out_w + tile_w - 1) / tile_w; }
  KILN_HOST_DEVICE int tiles_h() const { return (out_h + tile_h - 1) / tile_h; }
  // Shared memory of one block: the input tile and the plane's weights, as float.
  KILN_HOST_DEVICE int64_t shared_bytes() const {
    return (static_cast<int64_t>(in_tile_h()) * in_tile_w() + static_cast<int64_t>(kernel_h) * kernel_w) * 4;
  }
};

// Tiles of at most 32 columns and about 256 threads, split evenly over the plane (a 56-wide
// plane: two tiles of 28, not 32 + 24); a thread takes 4 consecutive rows on planes of 16 rows or
// more (each input row's taps, read once from shared memory, serve the outputs of every row whose
// window holds it), else 1 (a 7x7 plane is one 49-thread block).
inline void choose_depthwise_tiles(Depthwise2d& p) {
  auto even_split = [](int extent, int most) {
    const int parts = (extent + most - 1) / most;
    return (extent + parts - 1) / parts;
  };
  p.tile_w = even_split(p.out_w, 32);
  p.rows_per_thread = p.out_h >= 16 ? 4 : 1;
  const int most_thread_rows = 256 / p.tile_w > 0 ? 256 / p.tile_w : 1;
  const int most_rows = most_thread_rows * p.rows_per_thread;
  const int rows = even_split(p.out_h, most_rows < p.out_h ? most_rows : p.out_h);
  p.thread_rows = (rows + p.rows_per_thread - 1) / p.rows_per_thread;
  p.tile_h = p.thread_rows * p.rows_per_thread;
}

}  // namespace kiln::cuda
