// Owned device and pinned host memory. Allocation failures are errors that say what was being
// allocated, how many bytes, and what the device had free (cudaMemGetInfo), never a crash.
#pragma once

#include <cstddef>
#include <string>

#include "kernels/core/status.h"

namespace kiln::cuda {

class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  DeviceBuffer(DeviceBuffer&& other) noexcept;
  DeviceBuffer& operator=(DeviceBuffer&& other) noexcept;
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  ~DeviceBuffer();

  // `what` names the use in the error: "the activation arena", "weights of node 'conv1'".
  static Result<DeviceBuffer> allocate(size_t bytes, const std::string& what);

  void* data() const { return data_; }
  size_t bytes() const { return bytes_; }

 private:
  void* data_ = nullptr;
  size_t bytes_ = 0;
};

// Page-locked host memory: what asynchronous copies and captured graphs need.
class PinnedBuffer {
 public:
  PinnedBuffer() = default;
  PinnedBuffer(PinnedBuffer&& other) noexcept;
  PinnedBuffer& operator=(PinnedBuffer&& other) noexcept;
  PinnedBuffer(const PinnedBuffer&) = delete;
  PinnedBuffer& operator=(const PinnedBuffer&) = delete;
  ~PinnedBuffer();

  static Result<PinnedBuffer> allocate(size_t bytes, const std::string& what);

  void* data() const { return data_; }
  size_t bytes() const { return bytes_; }

 private:
  void* data_ = nullptr;
  size_t bytes_ = 0;
};

// "out of device memory: the activation arena needs 1.50 GiB (1610612736 bytes); 0.42 GiB of
// 79.19 GiB is free on this device"
std::string out_of_memory_message(const std::string& what, size_t requested, size_t free_bytes, size_t total_bytes);

}  // namespace kiln::cuda
