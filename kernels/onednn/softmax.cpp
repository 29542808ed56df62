// Softmax and LogSoftmax (float32) with oneDNN's softmax_v2 (softmax_accurate / softmax_log),
// along `axis`, in the input's layout. legacy_2d=1 (opset < 13: every dim from `axis` on is
// normalized together) is exact as is when axis is the last dim, and otherwise runs on a plain
// input viewed as 2-D [outer, inner]; a oneDNN-layout input is rejected there.
#include "kernels/onednn/onednn_kernels.h"

#include "kernels/onednn/onednn_common.h"

namespace kiln::onednn {
namespace {

struct SoftmaxPlan {
  int axis = 0;
  bool view_2d = false;
  Shape shape;  // the shape the primitive sees
};

std::optional<std::string> softmax_plan(const KernelBuild& b, SoftmaxPlan& p) {
  if (b.op != OpKind::Softmax && b.op != OpKind::LogSoftmax) return "handles Softmax and LogSoftmax only";
  if (b.inputs.empty()) return "needs an input";
  if (auto why = check_value(b.inputs[0], "X")) return why;
  if (b.outputs.empty() || b.outputs[0].dtype != DType::f32) return "needs a float32 output";
  auto axis_attr = b.attrs->get_int("axis", -1);
  auto legacy = b.attrs->get_int("legacy_2d", 0);
  if (!axis_attr || !legacy) return "bad axis or legacy_2d attribute";
  const Shape& x = b.inputs[0].shape;
  const int64_t rank = static_cast<int64_t>(x.size());
  int64_t axis = *axis_attr < 0 ? *axis_attr + rank : *axis_attr;
  if (axis < 0 || axis >= rank) return "axis out of range";
  p.shape = x;
  if (*legacy == 1 && axis != rank - 1) {
    if (!b.inputs[0].layout.plain()) return "legacy_2d over several dims needs a plain input";
    int64_t outer = 1, inner = 1;
    for (int64_t d = 0; d < rank; ++d) (d < axis ? outer : inner) *= x[static_cast<size_t>(d)];
    p.shape = {outer, inner};
    p.view_2d = true;
    axis = 1;
  }
  p.axis = static_cast<int>(axis);
  return std::nullopt;
}

std::optional<std::string> softmax_supports(const KernelBuild& b) {
  SoftmaxPlan p;
  return softmax_plan(b, p);
}

Result<std::unique_ptr<Kernel>> softmax_create(const KernelBuild& b) {
  return guarded_create("onednn.softmax", [&]() -> Result<std::unique_ptr<Kernel>> {
    ensure_threads(b.threads);
    SoftmaxPlan p;
    if (auto why = softmax_plan(b, p)) return make_error(ErrorCode::unsupported, *why);
    const md x_md = p.view_2d ? plain_desc(p.shape) : value_desc(b.inputs[0]);
    const dnnl::algorithm alg =
        b.op == OpKind::LogSoftmax ? dnnl::algorithm::softmax_log : dnnl::algorithm::softmax_accurate;
    dnnl::softmax_v2_forward::desc d(dnnl::prop_kind::forward_inference, alg, x_md, x_md, p.axis);
    dnnl::softmax_v2_forward::primitive_desc pd(d, user_scratchpad_attr(), cpu_engine());
    Program program(b.threads);
    program.add(dnnl::softmax_v2_forward(pd), pd,
                {{DNNL_ARG_SRC, program.input(0, x_md)}, {DNNL_ARG_DST, program.output(0, x_md)}});
    std::vector<Layout> layouts{p.view_2d ? Layout{} : b.inputs[0].layout};
    return std::unique_ptr<Kernel>(std::make_unique<ProgramKernel>(std::move(program), std::move(layouts)));
  });
}

}  // namespace
}  // namespace kiln::onednn

namespace kiln {
const KernelImpl kOneDnnSoftmax{"onednn.softmax", onednn::softmax_supports, onednn::softmax_create};
}  // namespace kiln
