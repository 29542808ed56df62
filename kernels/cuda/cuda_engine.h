// The CUDA engine: the device twin of kernels/engine.cpp. At load it picks a CUDA kernel per
// step from cuda_registry (failing with the node and op when none fits), uploads every constant
// once (float32 weights converted to float16/bfloat16 in fp16/bf16 mode), places all intermediates in one
// device arena with plan_buffers (in-place steps as the CPU engine grants them), and allocates
// pinned host staging for inputs and outputs. A run copies the inputs in, enqueues every step on
// one stream and copies the outputs back; runs of small batches are captured once as a CUDA
// Graph and replayed (plain launches when capture fails). Values are plain NCHW/row-major.
#pragma once

#include <memory>

#include "kernels/device/device_backend.h"

namespace kiln::cuda {

// The device must be usable (device_check on its probe); errors name the node and op, or the
// allocation that did not fit and what was free.
Result<std::unique_ptr<DeviceEngine>> cuda_engine_create(const Plan& plan, const DeviceEngineOptions& options);

}  // namespace kiln::cuda
