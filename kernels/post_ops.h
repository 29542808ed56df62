// Fused epilogues of compute ops (Conv, Gemm, MatMul; BatchNormalization without residual):
// y = act(op(x) + residual). Fusion passes
// record them as node attributes; every backend reads them through post_ops_from_attrs, so the
// reference kernels and the fast kernels agree on one meaning.
//   attributes: "activation" (string, see activation_name), "activation_alpha", "activation_beta"
//   residual:   the op's last optional input (input 3 of Conv, Gemm and MatMul)
#pragma once

#include <optional>
#include <string_view>

#include "kernels/core/attrs.h"
#include "kernels/op_def.h"

namespace kiln {

enum class Activation { none, relu, clip, leaky_relu, sigmoid, silu, hard_swish, hard_sigmoid, gelu_erf, tanh, elu };

// The input a fused residual takes: Conv, Gemm and MatMul 3; -1 for ops without one.
int fused_residual_input(OpKind op);

std::string_view activation_name(Activation act);  // "relu", "clip", ...
std::optional<Activation> activation_from_name(std::string_view name);

struct PostOps {
  Activation activation = Activation::none;
  float alpha = 0.0f;  // clip: min; leaky_relu/elu/hard_sigmoid: alpha
  float beta = 0.0f;   // clip: max; hard_sigmoid: beta

  bool empty() const { return activation == Activation::none; }
};

// `prefix` names a second activation of a fused op (DepthFirstConv's "dw_activation", ...).
Result<PostOps> post_ops_from_attrs(const Attrs& attrs, std::string_view prefix = "");
void post_ops_to_attrs(const PostOps& post_ops, Attrs& attrs, std::string_view prefix = "");

// The activation on one value, in float: the definition every kernel must match.
float activation_apply(const PostOps& post_ops, float x);

}  // namespace kiln
