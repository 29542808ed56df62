// KILN_HOST_DEVICE: __host__ __device__ under nvcc, nothing under g++, for the few functions
// that the device kernels and the CPU tests share.
#pragma once

#if defined(__CUDACC__)
#define KILN_HOST_DEVICE __host__ __device__
#else
#define KILN_HOST_DEVICE
#endif
