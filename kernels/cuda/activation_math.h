// The activations of kernels/post_ops.h in float, written once for the device kernels and the
// CPU test that compares them with post_ops.cpp's activation_apply (cuda_kernel.cpp maps the enums).
#pragma once

#include <cmath>

#include "kernels/cuda/host_device.h"

namespace kiln::cuda {

enum class DeviceActivation : int { none, relu, clip, leaky_relu, sigmoid, silu, hard_swish, hard_sigmoid, gelu_erf, tanh, elu, erf };

struct ActivationParams {
  DeviceActivation kind = DeviceActivation::none;
  float alpha = 0.0f;  // clip: min; leaky_relu/elu/hard_sigmoid: alpha
  float beta = 0.0f;   // clip: max; hard_sigmoid: beta
};

KILN_HOST_DEVICE inline float activation_value(const ActivationParams& p, float x) {
  switch (p.kind) {
    case DeviceActivation::none: return x;
    case DeviceActivation::relu: return x < 0.0f ? 0.0f : x;
    case DeviceActivation::clip: return fminf(fmaxf(x, p.alpha), p.beta);
    case DeviceActivation::leaky_relu: return x < 0.0f ? p.alpha * x : x;
    case DeviceActivation::sigmoid: return 1.0f / (1.0f + expf(-x));
    case DeviceActivation::silu: return x / (1.0f + expf(-x));
    case DeviceActivation::hard_swish: return x * fmaxf(0.0f, fminf(1.0f, x / 6.0f + 0.5f));
    case DeviceActivation::hard_sigmoid: return fmaxf(0.0f, fminf(1.0f, p.alpha * x + p.beta));
    case DeviceActivation::gelu_erf: return 0.5f * x * (1.0f + erff(x * 0.70710678118654752f));
    case DeviceActivation::tanh: return tanhf(x);
    case DeviceActivation::elu: return x < 0.0f ? p.alpha * (expf(x) - 1.0f) : x;
    case DeviceActivation::erf: return erff(x);  // the Erf node (no post-op: ConvNeXt's GELU written out)
  }
  return x;
}

}  // namespace kiln::cuda
