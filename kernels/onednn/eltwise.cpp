// Elementwise unary ops (float32) with oneDNN's eltwise primitive, in the input's layout (plain
// or oneDNN), the output in the same layout. Ops without a single oneDNN algorithm run as two
// primitives, the second in place on the output:
//   Selu = linear(gamma) after elu(alpha); HardSigmoid = clip_v2(0, 1) after linear(alpha, beta);
//   Neg = linear(-1, 0). Clip needs constant min/max (min > max rejected: clip_v2 differs there).
// Not here: Erf (no oneDNN algorithm), Reciprocal (pow is not exact enough), integer inputs.
#include "kernels/onednn/onednn_kernels.h"

#include <cmath>
#include <limits>

#include "kernels/onednn/onednn_common.h"

namespace kiln::onednn {
namespace {

using A = dnnl::algorithm;

constexpr float kSeluAlpha = 1.67326319217681884765625f;
constexpr float kSeluGamma = 1.05070102214813232421875f;

// The eltwise steps for `b`, or why not.
std::optional<std::string> eltwise_steps(const KernelBuild& b, std::vector<EltwiseStep>& steps) {
  auto f = [&](const char* name, float fallback) -> float {
    auto v = b.attrs->get_float(name, fallback);
    return v ? *v : std::numeric_limits<float>::quiet_NaN();
  };
  switch (b.op) {
    case OpKind::Relu: steps.push_back({A::eltwise_relu, 0.0f, 0.0f}); break;
    case OpKind::LeakyRelu: steps.push_back({A::eltwise_relu, f("alpha", 0.01f), 0.0f}); break;
    case OpKind::Elu: steps.push_back({A::eltwise_elu, f("alpha", 1.0f), 0.0f}); break;
    case OpKind::Selu:
      steps.push_back({A::eltwise_elu, f("alpha", kSeluAlpha), 0.0f});
      steps.push_back({A::eltwise_linear, f("gamma", kSeluGamma), 0.0f});
      break;
    case OpKind::Sigmoid: steps.push_back({A::eltwise_logistic, 0.0f, 0.0f}); break;
    case OpKind::HardSigmoid:
      steps.push_back({A::eltwise_linear, f("alpha", 0.2f), f("beta", 0.5f)});
      steps.push_back({A::eltwise_clip_v2, 0.0f, 1.0f});
      break;
    case OpKind::HardSwish: steps.push_back({A::eltwise_hardswish, 0.0f, 0.0f}); break;
    case OpKind::Tanh: steps.push_back({A::eltwise_tanh, 0.0f, 0.0f}); break;
    case OpKind::Softplus: steps.push_back({A::eltwise_soft_relu, 0.0f, 0.0f}); break;
    case OpKind::Exp: steps.push_back({A::eltwise_exp, 0.0f, 0.0f}); break;
    case OpKind::Log: steps.push_back({A::eltwise_log, 0.0f, 0.0f}); break;
    case OpKind::Sqrt: steps.push_back({A::eltwise_sqrt, 0.0f, 0.0f}); break;
    case OpKind::Abs: steps.push_back({A::eltwise_abs, 0.0f, 0.0f}); break;
    case OpKind::Neg: steps.push_back({A::eltwise_linear, -1.0f, 0.0f}); break;
    case OpKind::Clip: {
      float lo = -std::numeric_limits<float>::infinity(), hi = std::numeric_limits<float>::infinity();
      for (size_t i = 1; i < 3 && i < b.inputs.size(); ++i) {
        const ValueDesc& v = b.inputs[i];
        if (!v.present) continue;
        if (v.constant == nullptr) return std::string(i == 1 ? "min" : "max") + " must be a constant";
        if (v.dtype != DType::f32 || v.constant->numel() != 1) return "min/max must be float32 scalars";
        (i == 1 ? lo : hi) = v.constant->data<float>()[0];
      }
      if (!(lo <= hi)) return "min > max (or NaN): oneDNN's clip differs from numpy's there";
      steps.push_back({A::eltwise_clip_v2, lo, hi});
      break;
    }
    default: return "handles unary activations and math ops only";
  }
  for (const EltwiseStep& s : steps)
    if (std::isnan(s.alpha) || std::isnan(s.beta)) return "an attribute is not a float";
  return std::nullopt;
}

std::optional<std::string> eltwise_supports(const KernelBuild& b) {
  std::vector<EltwiseStep> steps;
  if (auto why = eltwise_steps(b, steps)) return why;
  if (b.inputs.empty()) return "needs an input";
  if (auto why = check_value(b.inputs[0], "X")) return why;
  if (b.outputs.empty() || b.outputs[0].dtype != DType::f32) return "needs a float32 output";
  return std::nullopt;
}

Result<std::unique_ptr<Kernel>> eltwise_create(const KernelBuild& b) {
  return guarded_create("onednn.eltwise", [&]() -> Result<std::unique_ptr<Kernel>> {
    ensure_threads(b.threads);
    std::vector<EltwiseStep> steps;
    if (auto why = eltwise_steps(b, steps)) return make_error(ErrorCode::unsupported, *why);
    const md x_md = value_desc(b.inputs[0]);
    Program program(b.threads);
    dnnl::memory src = program.input(0, x_md);
    dnnl::memory dst = program.output(0, x_md);
    for (const EltwiseStep& s : steps) {
      dnnl::eltwise_forward::desc d(dnnl::prop_kind::forward_inference, s.alg, x_md, s.alpha, s.beta);
      dnnl::eltwise_forward::primitive_desc pd(d, user_scratchpad_attr(), cpu_engine());
      program.add(dnnl::eltwise_forward(pd), pd, {{DNNL_ARG_SRC, src}, {DNNL_ARG_DST, dst}});
      src = dst;  // later steps run in place
    }
    std::vector<Layout> layouts{b.inputs[0].layout};
    return std::unique_ptr<Kernel>(std::make_unique<ProgramKernel>(std::move(program), std::move(layouts)));
  });
}

}  // namespace
}  // namespace kiln::onednn

namespace kiln {
const KernelImpl kOneDnnEltwise{"onednn.eltwise", onednn::eltwise_supports, onednn::eltwise_create};
}  // namespace kiln
