// LayerNormalization over the last axis (float32, plain X): oneDNN's layer_normalization with
// use_scale (and use_shift when B is given), one pass per row. Scale and B are [C] with C the last
// dimension (what fuse_layer_norm makes of a decomposed LayerNorm, and what exporters write).
// With bf16_output (mixed_precision_bf16: every reader is a bf16 MatMul) an X in bfloat16 rows (a bf16
// conv's output through a Transpose view: ConvNeXt) is normalized in bfloat16 (statistics in float32
// inside oneDNN) into bfloat16 rows, which the MatMul reads as they are: before, X was converted to
// float32 for the LayerNorm and the MatMul converted the result back (oneDNN 2.6 takes one type for
// src and dst, so a float32 X keeps a float32 output).
// Not here: other axes, broadcast Scale/B, the optional Mean/InvStdDev outputs (the reference
// kernel does those).
#include "kernels/onednn/onednn_kernels.h"

#include <cmath>

#include "kernels/onednn/onednn_common.h"

namespace kiln::onednn {
namespace {

std::optional<std::string> layernorm_supports(const KernelBuild& b) {
  if (b.op != OpKind::LayerNormalization) return "handles LayerNormalization only";
  if (b.inputs.size() < 2 || b.inputs.size() > 3) return "needs X, Scale and maybe B";
  if (is_bf16_rows(b.inputs[0])) {
    const auto flag = bf16_output_from_attrs(*b.attrs);
    if (!flag || !*flag) return "X is bfloat16: read only with bf16_output (oneDNN 2.6 writes src's type)";
  } else if (auto why = check_plain_f32(b.inputs[0], "X")) {
    return why;
  }
  const Shape& x = b.inputs[0].shape;
  if (x.size() < 2 || x.size() > 5 || x.back() < 1) return "needs rank 2 to 5";
  auto axis = b.attrs->get_int("axis", -1);
  if (!axis || (*axis != -1 && *axis != static_cast<int64_t>(x.size()) - 1)) return "normalizes the last axis only";
  const char* names[] = {"X", "Scale", "B"};
  for (size_t i = 1; i < b.inputs.size(); ++i) {
    if (!b.inputs[i].present) continue;
    if (auto why = check_plain_f32(b.inputs[i], names[i])) return why;
    if (b.inputs[i].shape != Shape{x.back()}) return std::string(names[i]) + " is not [C] of the last axis";
  }
  if (!b.inputs[1].present) return "needs Scale";
  auto eps = b.attrs->get_float("epsilon", 1e-5f);
  if (!eps || !std::isfinite(*eps) || *eps < 0) return "bad epsilon";
  if (b.outputs.size() != 1 || b.outputs[0].dtype != DType::f32) return "needs one float32 output (no Mean/InvStdDev)";
  return std::nullopt;
}

Result<std::unique_ptr<Kernel>> layernorm_create(const KernelBuild& b) {
  return guarded_create("onednn.layernorm", [&]() -> Result<std::unique_ptr<Kernel>> {
    ensure_threads(b.threads);
    KILN_ASSIGN(eps, b.attrs->get_float("epsilon", 1e-5f));
    const bool bf16 = is_bf16_rows(b.inputs[0]);
    const md x_md = retyped(plain_desc(b.inputs[0].shape), bf16 ? data_type::bf16 : data_type::f32);
    const bool shift = b.inputs.size() > 2 && b.inputs[2].present;
    auto flags = dnnl::normalization_flags::use_scale;
    if (shift) flags |= dnnl::normalization_flags::use_shift;
    dnnl::layer_normalization_forward::desc d(dnnl::prop_kind::forward_inference, x_md, eps, flags);
    dnnl::layer_normalization_forward::primitive_desc pd(d, user_scratchpad_attr(), cpu_engine());
    Program program(b.threads);
    const md c_md = plain_desc(b.inputs[1].shape);  // Scale and B stay float32
    std::unordered_map<int, dnnl::memory> args{{DNNL_ARG_SRC, program.input(0, x_md)},
                                               {DNNL_ARG_SCALE, program.input(1, c_md)},
                                               {DNNL_ARG_DST, program.output(0, x_md)}};
    if (shift) args.emplace(DNNL_ARG_SHIFT, program.input(2, c_md));
    program.add(dnnl::layer_normalization_forward(pd), pd, std::move(args));
    std::vector<Layout> layouts{bf16 ? layout_of(x_md, b.inputs[0].shape, b.threads) : Layout{}};
    return std::unique_ptr<Kernel>(std::make_unique<ProgramKernel>(std::move(program), std::move(layouts)));
  });
}

}  // namespace
}  // namespace kiln::onednn

namespace kiln {
const KernelImpl kOneDnnLayerNorm{"onednn.layernorm", onednn::layernorm_supports, onednn::layernorm_create};
}  // namespace kiln
