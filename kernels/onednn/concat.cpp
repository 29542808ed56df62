// Concat (float32) with oneDNN's concat primitive. Inputs are read in their own layouts (plain
// or oneDNN, mixed); oneDNN picks the output layout from them, and when it cannot build that
// (a blocked dim cut at offsets off the block size) the output is plain.
#include "kernels/onednn/onednn_kernels.h"

#include "kernels/onednn/onednn_common.h"

namespace kiln::onednn {
namespace {

std::optional<std::string> concat_supports(const KernelBuild& b) {
  if (b.op != OpKind::Concat) return "handles Concat only";
  if (b.inputs.empty()) return "needs inputs";
  for (const ValueDesc& v : b.inputs)
    if (auto why = check_value(v, "an input")) return why;
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
    if (!chosen) pd = dnnl::concat::primitive_desc(plain_desc(out), axis, srcs, cpu_engine(), user_scratchpad_attr());
    Program program(b.threads);
    std::unordered_map<int, dnnl::memory> args;
    for (size_t i = 0; i < srcs.size(); ++i)
      args[DNNL_ARG_MULTIPLE_SRC + static_cast<int>(i)] = program.input(i, srcs[i]);
    args[DNNL_ARG_DST] = program.output(0, pd.dst_desc());
    program.add(dnnl::concat(pd), pd, std::move(args));
    std::vector<Layout> layouts{layout_of(pd.dst_desc(), out, b.threads)};
    return std::unique_ptr<Kernel>(std::make_unique<ProgramKernel>(std::move(program), std::move(layouts)));
  });
}

}  // namespace
}  // namespace kiln::onednn

namespace kiln {
const KernelImpl kOneDnnConcat{"onednn.concat", onednn::concat_supports, onednn::concat_create};
}  // namespace kiln
