// LRN across channels (float32, rank 3 to 5) with oneDNN's lrn_across_channels, in the input's
// layout. oneDNN's window is symmetric, (size-1)/2 channels on each side, which is ONNX's only
// for odd sizes: even sizes are rejected.
#include "kernels/onednn/onednn_kernels.h"

#include <cmath>

#include "kernels/onednn/onednn_common.h"

namespace kiln::onednn {
namespace {

struct LrnParams {
  int64_t size = 1;
  float alpha = 1e-4f, beta = 0.75f, bias = 1.0f;
};

std::optional<std::string> lrn_params(const KernelBuild& b, LrnParams& p) {
  if (b.op != OpKind::LRN) return "handles LRN only";
  if (b.inputs.empty()) return "needs an input";
  if (auto why = check_value(b.inputs[0], "X")) return why;
  if (b.inputs[0].shape.size() < 3 || b.inputs[0].shape.size() > 5) return "needs rank 3 to 5";
  if (b.outputs.empty() || b.outputs[0].dtype != DType::f32) return "needs a float32 output";
  auto size = b.attrs->get_int("size", 0);
  auto alpha = b.attrs->get_float("alpha", 1e-4f);
  auto beta = b.attrs->get_float("beta", 0.75f);
  auto bias = b.attrs->get_float("bias", 1.0f);
  if (!size || !alpha || !beta || !bias) return "bad attributes";
  if (*size < 1 || *size % 2 == 0) return "even size (oneDNN's channel window is symmetric)";
  if (!std::isfinite(*alpha) || !std::isfinite(*beta) || !std::isfinite(*bias)) return "non-finite attributes";
  p = {*size, *alpha, *beta, *bias};
  return std::nullopt;
}

std::optional<std::string> lrn_supports(const KernelBuild& b) {
  LrnParams p;
  return lrn_params(b, p);
}

Result<std::unique_ptr<Kernel>> lrn_create(const KernelBuild& b) {
  return guarded_create("onednn.lrn", [&]() -> Result<std::unique_ptr<Kernel>> {
    ensure_threads(b.threads);
    LrnParams p;
    if (auto why = lrn_params(b, p)) return make_error(ErrorCode::unsupported, *why);
    const md x_md = value_desc(b.inputs[0]);
    dnnl::lrn_forward::desc d(dnnl::prop_kind::forward_inference, dnnl::algorithm::lrn_across_channels, x_md, p.size,
                              p.alpha, p.beta, p.bias);
    dnnl::lrn_forward::primitive_desc pd(d, user_scratchpad_attr(), cpu_engine());
    Program program(b.threads);
    program.add(dnnl::lrn_forward(pd), pd,
                {{DNNL_ARG_SRC, program.input(0, x_md)}, {DNNL_ARG_DST, program.output(0, pd.dst_desc())}});
    std::vector<Layout> layouts{layout_of(pd.dst_desc(), b.outputs[0].shape, b.threads)};
    return std::unique_ptr<Kernel>(std::make_unique<ProgramKernel>(std::move(program), std::move(layouts)));
  });
}

}  // namespace
}  // namespace kiln::onednn

namespace kiln {
const KernelImpl kOneDnnLrn{"onednn.lrn", onednn::lrn_supports, onednn::lrn_create};
}  // namespace kiln
