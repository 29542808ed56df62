// BatchNormalization, inference (float32): oneDNN's batch_normalization with
// use_global_stats | use_scale | use_shift, in the input's layout. scale, B, mean and var are read
// from their buffers on every run, so they need not be constants. A fused Relu (fuse_activation:
// DenseNet's pre-activation BN -> ReLU) is oneDNN's fuse_norm_relu flag, computed in the same
// pass; any other fused activation is an eltwise step in place on the output.
// Not here: training_mode=1, rank-1 inputs.
#include "kernels/onednn/onednn_kernels.h"

#include <cmath>

#include "kernels/onednn/onednn_common.h"

namespace kiln::onednn {
namespace {

std::optional<std::string> batchnorm_supports(const KernelBuild& b) {
  if (b.op != OpKind::BatchNormalization) return "handles BatchNormalization only";
  if (b.inputs.size() != 5) return "needs X, scale, B, mean, var";
  if (auto why = check_value(b.inputs[0], "X")) return why;
  const Shape& x = b.inputs[0].shape;
  if (x.size() < 2 || x.size() > 5) return "needs rank 2 to 5";
  const char* names[] = {"X", "scale", "B", "mean", "var"};
  for (size_t i = 1; i < 5; ++i) {
    if (auto why = check_plain_f32(b.inputs[i], names[i])) return why;
    if (b.inputs[i].shape != Shape{x[1]}) return std::string(names[i]) + " is not [C]";
  }
  auto training = b.attrs->get_int("training_mode", 0);
  if (!training || *training != 0) return "training_mode";
  auto eps = b.attrs->get_float("epsilon", 1e-5f);
  if (!eps || !std::isfinite(*eps) || *eps < 0) return "bad epsilon";
  if (b.outputs.size() != 1 || b.outputs[0].dtype != DType::f32) return "needs one float32 output";
  std::vector<EltwiseStep> steps;
  return read_post_ops(*b.attrs, steps);
}

Result<std::unique_ptr<Kernel>> batchnorm_create(const KernelBuild& b) {
  return guarded_create("onednn.batchnorm", [&]() -> Result<std::unique_ptr<Kernel>> {
    ensure_threads(b.threads);
    KILN_ASSIGN(eps, b.attrs->get_float("epsilon", 1e-5f));
    const md x_md = value_desc(b.inputs[0]);
    KILN_ASSIGN(post, post_ops_from_attrs(*b.attrs));
    std::vector<EltwiseStep> steps;
    if (auto why = read_post_ops(*b.attrs, steps)) return make_error(ErrorCode::unsupported, *why);
    auto flags = dnnl::normalization_flags::use_global_stats | dnnl::normalization_flags::use_scale |
                 dnnl::normalization_flags::use_shift;
    if (post.activation == Activation::relu) {
      flags |= dnnl::normalization_flags::fuse_norm_relu;
      steps.clear();
    }
    dnnl::batch_normalization_forward::desc d(dnnl::prop_kind::forward_inference, x_md, eps, flags);
    dnnl::batch_normalization_forward::primitive_desc pd(d, user_scratchpad_attr(), cpu_engine());
    Program program(b.threads);
    const md c_md = plain_desc(b.inputs[1].shape);
    program.add(dnnl::batch_normalization_forward(pd), pd,
                {{DNNL_ARG_SRC, program.input(0, x_md)},
                 {DNNL_ARG_SCALE, program.input(1, c_md)},
                 {DNNL_ARG_SHIFT, program.input(2, c_md)},
                 {DNNL_ARG_MEAN, program.input(3, c_md)},
                 {DNNL_ARG_VARIANCE, program.input(4, c_md)},
                 {DNNL_ARG_DST, program.output(0, x_md)}});
    for (const EltwiseStep& e : steps) {
      dnnl::eltwise_forward::desc ed(dnnl::prop_kind::forward_inference, e.alg, x_md, e.alpha, e.beta);
      dnnl::eltwise_forward::primitive_desc epd(ed, user_scratchpad_attr(), cpu_engine());
      const dnnl::memory y = program.output(0, x_md);
      program.add(dnnl::eltwise_forward(epd), epd, {{DNNL_ARG_SRC, y}, {DNNL_ARG_DST, y}});
    }
    std::vector<Layout> layouts{b.inputs[0].layout};
    return std::unique_ptr<Kernel>(std::make_unique<ProgramKernel>(std::move(program), std::move(layouts)));
  });
}

}  // namespace
}  // namespace kiln::onednn

namespace kiln {
const KernelImpl kOneDnnBatchNorm{"onednn.batchnorm", onednn::batchnorm_supports, onednn::batchnorm_create};
}  // namespace kiln
