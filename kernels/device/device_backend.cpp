#include "kernels/device/device_backend.h"

namespace kiln {

std::string_view device_precision_name(DevicePrecision p) {
  switch (p) {
    case DevicePrecision::fp32: return "fp32";
    case DevicePrecision::tf32: return "tf32";
    case DevicePrecision::fp16: return "fp16";
    case DevicePrecision::bf16: return "bf16";
  }
  return "fp32";
}

namespace {
constexpr DevicePrecision kDevicePrecisions[] = {DevicePrecision::fp32, DevicePrecision::tf32, DevicePrecision::fp16,
                                                 DevicePrecision::bf16};
}  // namespace

std::optional<DevicePrecision> device_precision_from_name(std::string_view name) {
  for (DevicePrecision p : kDevicePrecisions)
    if (device_precision_name(p) == name) return p;
  return std::nullopt;
}

std::vector<std::string> device_precision_names() {
  std::vector<std::string> names;
  for (DevicePrecision p : kDevicePrecisions) names.emplace_back(device_precision_name(p));
  return names;
}

}  // namespace kiln
