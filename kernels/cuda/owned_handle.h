// A library handle destroyed with its owner (cuDNN and cuBLASLt descriptors, CUDA events): one
// template instead of a wrapper per library.
#pragma once

namespace kiln::cuda {

template <typename T, auto Destroy>
struct OwnedHandle {
  T handle = nullptr;
  OwnedHandle() = default;
  OwnedHandle(const OwnedHandle&) = delete;
  OwnedHandle& operator=(const OwnedHandle&) = delete;
  ~OwnedHandle() {
    if (handle) Destroy(handle);
  }
};

}  // namespace kiln::cuda
