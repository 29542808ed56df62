// The verdict on a DeviceProbe: ok, or the one message that says what is missing and what to do.
// Pure (no device calls), so every case is tested on machines without a GPU.
#pragma once

#include "kernels/core/status.h"
#include "kernels/device/device_backend.h"

namespace kiln {

// Errors (ErrorCode::unsupported), in the order they are checked: no driver; a runtime failure
// (a driver older than the runtime named with both versions); "no CUDA device"; an index past
// the devices there are; a compute capability below the oldest the plugin was built for.
Status device_check(const DeviceProbe& probe, int device_index);

}  // namespace kiln
