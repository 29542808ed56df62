// post_ops.h's activation as the device kernels' parameter (activation_math.h): one case per
// enumerator, so a new activation that is not mapped fails the build (-Wswitch).
#pragma once

#include "kernels/cuda/activation_math.h"
#include "kernels/post_ops.h"

namespace kiln::cuda {

inline ActivationParams device_activation(const PostOps& post_ops) {
  ActivationParams p;
  p.alpha = post_ops.alpha;
  p.beta = post_ops.beta;
  switch (post_ops.activation) {
    case Activation::none: p.kind = DeviceActivation::none; break;
    case Activation::relu: p.kind = DeviceActivation::relu; break;
    case Activation::clip: p.kind = DeviceActivation::clip; break;
    case Activation::leaky_relu: p.kind = DeviceActivation::leaky_relu; break;
    case Activation::sigmoid: p.kind = DeviceActivation::sigmoid; break;
    case Activation::silu: p.kind = DeviceActivation::silu; break;
    case Activation::hard_swish: p.kind = DeviceActivation::hard_swish; break;
    case Activation::hard_sigmoid: p.kind = DeviceActivation::hard_sigmoid; break;
    case Activation::gelu_erf: p.kind = DeviceActivation::gelu_erf; break;
    case Activation::tanh: p.kind = DeviceActivation::tanh; break;
    case Activation::elu: p.kind = DeviceActivation::elu; break;
  }
  return p;
}

}  // namespace kiln::cuda
