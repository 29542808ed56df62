// Concat (float32) with oneDNN's concat primitive. Inputs are read in their own layouts (plain
// or oneDNN, mixed); oneDNN picks the output layout from them, and when it cannot build that
// (a blocked dim cut at offsets off the block size) the output is plain. Quantized inputs (int8
// codes) are joined as codes when every input has the same type and scale (quantize_int8 gives a
// Concat's parts its output's scale), and the output keeps them.
#include "kernels/onednn/onednn_kernels.h"

#include "kernels/onednn/onednn_common.h"

namespace kiln::onednn {
namespace {

std::optional<std::string> concat_supports(const KernelBuild& b) {
  if (b.op != OpKind::Concat) return "handles Concat only";
  if (b.inputs.empty()) return "needs inputs";
  for (const ValueDesc& v : b.inputs)
    if (auto why = check_value(v, "an input", Quantized::accept)) return why;
  const std::optional<QuantParams> q = quant_of(b.inputs[0]);
  for (size_t i = 1; i < b.inputs.size(); ++i) {
    const std::optional<QuantParams> qi = quant_of(b.inputs[i]);
    if (q.has_value() != qi.has_value() || (q && (q->type != qi->type || q->scale != qi->scale)))
      return "input " + std::to_string(i) + " is not quantized like input 0 (codes join only at one type and scale)";
  }
  if (b.outputs.empty() || b.outputs[0].dtype != DType::f32) return "needs a float32 output";
  auto axis = b.attrs->get_int("axis", 0);
  const int64_t rank = static_cast<int64_t>(b.outputs[0].shape.size());
  if (!axis || *axis < -rank || *axis >= rank) return "bad axis";
  return std::nullopt;
}

Result<std::unique_ptr<Kernel>> concat_create(const KernelBuild& b) {
  return guarded_create("onednn.concat", [&]() -> Result<std::unique_ptr<Kernel>> {
    ensure_threads(b.threads);
    KILN_ASSIGN(axis_attr, b.attrs->get_int("axis", 0));
    const Shape& out = b.outputs[0].shape;
    const int axis = static_cast<int>(axis_attr < 0 ? axis_attr + static_cast<int64_t>(out.size()) : axis_attr);
    std::vector<md> srcs;
    for (const ValueDesc& v : b.inputs) srcs.push_back(value_desc(v));
    dnnl::concat::primitive_desc pd;
    bool chosen = false;
    try {
      pd = dnnl::concat::primitive_desc(axis, srcs, cpu_engine(), user_scratchpad_attr());
      chosen = true;
    } catch (const dnnl::error&) {
    }
    if (!chosen) pd = dnnl::concat::primitive_desc(retyped(plain_desc(out), srcs[0].data_type()), axis, srcs, cpu_engine(), user_scratchpad_attr());
    Program program(b.threads);
    std::unordered_map<int, dnnl::memory> args;
    for (size_t i = 0; i < srcs.size(); ++i)
      args[DNNL_ARG_MULTIPLE_SRC + static_cast<int>(i)] = program.input(i, srcs[i]);
    args[DNNL_ARG_DST] = program.output(0, pd.dst_desc());
    program.add(dnnl::concat(pd), pd, std::move(args));
    const std::optional<QuantParams> q = quant_of(b.inputs[0]);
    std::vector<Layout> layouts{q ? layout_of(pd.dst_desc(), out, b.threads, q->scale) : layout_of(pd.dst_desc(), out, b.threads)};
    return std::unique_ptr<Kernel>(std::make_unique<ProgramKernel>(std::move(program), std::move(layouts)));
  });
}

}  // namespace
}  // namespace kiln::onednn

namespace kiln {
const KernelImpl kOneDnnConcat{"onednn.concat", onednn::concat_supports, onednn::concat_create};
}  // namespace kiln
