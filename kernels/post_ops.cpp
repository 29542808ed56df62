#include "kernels/post_ops.h"

#include <algorithm>
#include <array>
#include <cmath>

namespace kiln {

int fused_residual_input(OpKind op) {
  switch (op) {
    case OpKind::Conv: return 3;
    case OpKind::Gemm:
    case OpKind::MatMul: return 3;
    default: return -1;
  }
}
namespace {

constexpr std::array<std::pair<Activation, std::string_view>, 11> kNames = {{
    {Activation::none, "none"},
    {Activation::relu, "relu"},
    {Activation::clip, "clip"},
    {Activation::leaky_relu, "leaky_relu"},
    {Activation::sigmoid, "sigmoid"},
    {Activation::silu, "silu"},
    {Activation::hard_swish, "hard_swish"},
    {Activation::hard_sigmoid, "hard_sigmoid"},
    {Activation::gelu_erf, "gelu_erf"},
    {Activation::tanh, "tanh"},
    {Activation::elu, "elu"},
}};

}  // namespace

std::string_view activation_name(Activation act) {
  for (const auto& [a, name] : kNames)
    if (a == act) return name;
  return "none";
}

std::optional<Activation> activation_from_name(std::string_view name) {
  for (const auto& [a, n] : kNames)
    if (n == name) return a;
  return std::nullopt;
}

Result<PostOps> post_ops_from_attrs(const Attrs& attrs, std::string_view prefix) {
  PostOps p;
  const std::string key = std::string(prefix) + "activation";
  KILN_ASSIGN(name, attrs.get_string(key, "none"));
  const auto act = activation_from_name(name);
  KILN_REQUIRE(act.has_value(), invalid_argument, "unknown fused activation '", name, "' in ", key);
  p.activation = *act;
  KILN_ASSIGN(alpha, attrs.get_float(key + "_alpha", 0.0f));
  KILN_ASSIGN(beta, attrs.get_float(key + "_beta", 0.0f));
  p.alpha = alpha;
  p.beta = beta;
  return p;
}

void post_ops_to_attrs(const PostOps& post_ops, Attrs& attrs, std::string_view prefix) {
  const std::string key = std::string(prefix) + "activation";
  if (post_ops.empty()) {
    attrs.erase(key);
    attrs.erase(key + "_alpha");
    attrs.erase(key + "_beta");
    return;
  }
  attrs.set(key, std::string(activation_name(post_ops.activation)));
  attrs.set(key + "_alpha", post_ops.alpha);
  attrs.set(key + "_beta", post_ops.beta);
}

float activation_apply(const PostOps& p, float x) {
  switch (p.activation) {
    case Activation::none: return x;
    case Activation::relu: return x < 0.0f ? 0.0f : x;
    case Activation::clip: return std::min(std::max(x, p.alpha), p.beta);
    case Activation::leaky_relu: return x < 0.0f ? p.alpha * x : x;
    case Activation::sigmoid: return 1.0f / (1.0f + std::exp(-x));
    case Activation::silu: return x / (1.0f + std::exp(-x));
    case Activation::hard_swish: return x * std::max(0.0f, std::min(1.0f, x / 6.0f + 0.5f));
    case Activation::hard_sigmoid: return std::max(0.0f, std::min(1.0f, p.alpha * x + p.beta));
    case Activation::gelu_erf: return 0.5f * x * (1.0f + std::erf(x * 0.70710678118654752f));
    case Activation::tanh: return std::tanh(x);
    case Activation::elu: return x < 0.0f ? p.alpha * (std::exp(x) - 1.0f) : x;
  }
  return x;
}

}  // namespace kiln
