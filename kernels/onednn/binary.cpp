// Add, Sub, Mul, Div, Max, Min and two-input Sum (float32) with oneDNN's binary primitive and
// numpy broadcasting. oneDNN 2.6 broadcasts its second source only, so the first source must
// have the output's shape (the inputs of a commutative op are swapped when the second one has
// it). Layouts: a full-shape oneDNN-layout input sets the output layout; the other full-shape
// input is reordered into it (in scratch) when its layout differs. A broadcast input is read
// as is (plain, or a oneDNN layout of the output's rank).
// Not here: the opset<7 legacy axis form, Mean, variadic Sum/Max/Min, integer types.
#include "kernels/onednn/onednn_kernels.h"

#include "kernels/onednn/onednn_common.h"

namespace kiln::onednn {
namespace {

struct BinaryPlan {
  dnnl::algorithm alg;
  size_t first = 0, second = 1;  // input indices for src0, src1
  dims second_dims;              // src1 dims at the output's rank
};

std::optional<std::string> binary_plan(const KernelBuild& b, BinaryPlan& p) {
  bool commutative = true;
  switch (b.op) {
    case OpKind::Add: case OpKind::Sum: p.alg = dnnl::algorithm::binary_add; break;
    case OpKind::Mul: p.alg = dnnl::algorithm::binary_mul; break;
    case OpKind::Max: p.alg = dnnl::algorithm::binary_max; break;
    case OpKind::Min: p.alg = dnnl::algorithm::binary_min; break;
    case OpKind::Sub: p.alg = dnnl::algorithm::binary_sub; commutative = false; break;
    case OpKind::Div: p.alg = dnnl::algorithm::binary_div; commutative = false; break;
    default: return "handles Add, Sub, Mul, Div, Max, Min, Sum only";
  }
  if (b.inputs.size() != 2) return "needs exactly two inputs";
  if (b.attrs->has("legacy_axis")) return "legacy (opset < 7) axis broadcasting";
  if (b.outputs.empty() || b.outputs[0].dtype != DType::f32) return "needs a float32 output";
  const Shape& out = b.outputs[0].shape;
  if (out.empty()) return "scalar output";
  for (size_t i = 0; i < 2; ++i) {
    const ValueDesc& v = b.inputs[i];
    if (!v.present) return "an input is missing";
    if (v.dtype != DType::f32) return "input is " + std::string(dtype_name(v.dtype)) + ", needs float32";
    if (v.shape.empty() && !v.layout.plain()) return "scalar input in an opaque layout";
    if (!v.shape.empty())
      if (auto why = check_value(v, i == 0 ? "A" : "B")) return why;
  }
  if (b.inputs[0].shape != out) {
    if (!commutative || b.inputs[1].shape != out)
      return "input A broadcasts (oneDNN 2.6 broadcasts the second source only)";
    p.first = 1;
    p.second = 0;
  } else if (commutative && b.inputs[1].shape == out && b.inputs[0].layout.plain() && is_onednn(b.inputs[1])) {
    p.first = 1;  // let the oneDNN layout set the output layout
    p.second = 0;
  }
  const ValueDesc& s = b.inputs[p.second];
  if (s.shape.size() > out.size()) return "input rank above the output rank";
  p.second_dims.assign(out.size() - s.shape.size(), 1);
  for (int64_t d : s.shape) p.second_dims.push_back(d);
  for (size_t d = 0; d < out.size(); ++d)
    if (p.second_dims[d] != out[d] && p.second_dims[d] != 1) return "shapes do not broadcast";
  if (!s.layout.plain() && s.shape != out && s.shape.size() != out.size())
    return "a broadcast input in a oneDNN layout of another rank";
  return std::nullopt;
}

std::optional<std::string> binary_supports(const KernelBuild& b) {
  BinaryPlan p;
  return binary_plan(b, p);
}

Result<std::unique_ptr<Kernel>> binary_create(const KernelBuild& b) {
  return guarded_create("onednn.binary", [&]() -> Result<std::unique_ptr<Kernel>> {
    ensure_threads(b.threads);
    BinaryPlan p;
    if (auto why = binary_plan(b, p)) return make_error(ErrorCode::unsupported, *why);
    const Shape& out = b.outputs[0].shape;
    const ValueDesc& v0 = b.inputs[p.first];
    const ValueDesc& v1 = b.inputs[p.second];
    Program program(b.threads);
    const bool second_full = v1.shape == out;
    // The output layout: src0's, unless only src1 (full shape) has a oneDNN layout.
    md target = value_desc(v0);
    if (v0.layout.plain() && second_full && is_onednn(v1)) target = value_desc(v1);

    auto bring = [&](size_t index, const ValueDesc& v) {
      const md have = value_desc(v);
      dnnl::memory m = program.input(index, have);
      if (have == target) return m;
      dnnl::memory t = program.temp(target);
      dnnl::reorder::primitive_desc rpd(cpu_engine(), have, cpu_engine(), target, user_scratchpad_attr());
      program.add(dnnl::reorder(rpd), rpd, {{DNNL_ARG_FROM, m}, {DNNL_ARG_TO, t}});
      return t;
    };
    dnnl::memory src0 = bring(p.first, v0);
    dnnl::memory src1;
    md src1_md;
    if (second_full) {
      src1 = bring(p.second, v1);
      src1_md = target;
    } else {
      src1_md = v1.layout.plain() ? plain_desc(Shape(p.second_dims.begin(), p.second_dims.end())) : value_desc(v1);
      src1 = program.input(p.second, src1_md);
    }
    dnnl::binary::desc d(p.alg, target, src1_md, target);
    dnnl::binary::primitive_desc pd(d, user_scratchpad_attr(), cpu_engine());
    program.add(dnnl::binary(pd), pd,
                {{DNNL_ARG_SRC_0, src0}, {DNNL_ARG_SRC_1, src1}, {DNNL_ARG_DST, program.output(0, target)}});
    std::vector<Layout> layouts{layout_of(target, out, b.threads)};
    return std::unique_ptr<Kernel>(std::make_unique<ProgramKernel>(std::move(program), std::move(layouts)));
  });
}

}  // namespace
}  // namespace kiln::onednn

namespace kiln {
const KernelImpl kOneDnnBinary{"onednn.binary", onednn::binary_supports, onednn::binary_create};
}  // namespace kiln
