#include "kernels/cuda/device_buffer.h"

#include <cstdio>
#include <utility>

#include <cuda_runtime_api.h>

#include "kernels/cuda/cuda_status.h"

namespace kiln::cuda {
namespace {

std::string gib(size_t bytes) {
  char text[32];
  std::snprintf(text, sizeof text, "%.2f GiB", static_cast<double>(bytes) / (1024.0 * 1024.0 * 1024.0));
  return text;
}

}  // namespace

std::string out_of_memory_message(const std::string& what, size_t requested, size_t free_bytes, size_t total_bytes) {
  return "out of device memory: " + what + " needs " + gib(requested) + " (" + std::to_string(requested) + " bytes); " +
         gib(free_bytes) + " of " + gib(total_bytes) + " is free on this device (cudaMemGetInfo)";
}

DeviceBuffer::DeviceBuffer(DeviceBuffer&& other) noexcept
    : data_(std::exchange(other.data_, nullptr)), bytes_(std::exchange(other.bytes_, 0)) {}

DeviceBuffer& DeviceBuffer::operator=(DeviceBuffer&& other) noexcept {
  if (this != &other) {
    if (data_) cudaFree(data_);
    data_ = std::exchange(other.data_, nullptr);
    bytes_ = std::exchange(other.bytes_, 0);
  }
  return *this;
}

DeviceBuffer::~DeviceBuffer() {
  if (data_) cudaFree(data_);
}

Result<DeviceBuffer> DeviceBuffer::allocate(size_t bytes, const std::string& what) {
  DeviceBuffer buffer;
  if (bytes == 0) return buffer;
  const cudaError_t error = cudaMalloc(&buffer.data_, bytes);
  if (error == cudaErrorMemoryAllocation) {
    cudaGetLastError();  // clears the sticky-free allocation error so later calls start clean
    size_t free_bytes = 0, total_bytes = 0;
    cudaMemGetInfo(&free_bytes, &total_bytes);
    return make_error(ErrorCode::limit_exceeded, out_of_memory_message(what, bytes, free_bytes, total_bytes));
  }
  KILN_TRY(cuda_status(error, "cudaMalloc"));
  buffer.bytes_ = bytes;
  return buffer;
}

PinnedBuffer::PinnedBuffer(PinnedBuffer&& other) noexcept
    : data_(std::exchange(other.data_, nullptr)), bytes_(std::exchange(other.bytes_, 0)) {}

PinnedBuffer& PinnedBuffer::operator=(PinnedBuffer&& other) noexcept {
  if (this != &other) {
    if (data_) cudaFreeHost(data_);
    data_ = std::exchange(other.data_, nullptr);
    bytes_ = std::exchange(other.bytes_, 0);
  }
  return *this;
}

PinnedBuffer::~PinnedBuffer() {
  if (data_) cudaFreeHost(data_);
}

Result<PinnedBuffer> PinnedBuffer::allocate(size_t bytes, const std::string& what) {
  PinnedBuffer buffer;
  if (bytes == 0) return buffer;
  const cudaError_t error = cudaHostAlloc(&buffer.data_, bytes, cudaHostAllocDefault);
  if (error != cudaSuccess) {
    cudaGetLastError();
    return make_error(ErrorCode::limit_exceeded, "cannot pin ", bytes, " bytes of host memory for ", what, ": ",
                      cudaGetErrorString(error));
  }
  buffer.bytes_ = bytes;
  return buffer;
}

}  // namespace kiln::cuda
