#include "perfmodel/plan_features.h"

#include <algorithm>
#include <cmath>
#include <string_view>

#include "kernels/post_ops.h"
#include "kernels/precision.h"

namespace kiln::perf {
namespace {

struct PlanView {
  const Plan& plan;
  std::vector<const Tensor*> constant;  // per slot

  explicit PlanView(const Plan& p) : plan(p), constant(static_cast<size_t>(p.num_slots), nullptr) {
    for (const auto& [slot, t] : p.constants) constant[static_cast<size_t>(slot)] = &t;
  }
  bool known(int slot) const {
    if (slot < 0 || static_cast<size_t>(slot) >= plan.slot_types.size()) return false;
    const ValueType& t = plan.slot_types[static_cast<size_t>(slot)];
    return t.rank_known && sym_shape_is_concrete(t.shape);
  }
  Shape shape(int slot) const { return known(slot) ? sym_shape_concrete(plan.slot_types[static_cast<size_t>(slot)].shape) : Shape{}; }
  double numel(int slot) const { return known(slot) ? static_cast<double>(shape_numel(shape(slot))) : 0.0; }
  bool is_constant(int slot) const { return slot >= 0 && constant[static_cast<size_t>(slot)] != nullptr; }
};

int input(const PlanStep& s, size_t i) { return i < s.inputs.size() ? s.inputs[i] : -1; }
int output(const PlanStep& s) { return s.outputs.empty() ? -1 : s.outputs[0]; }

std::string dtype_of(const PlanStep& s) {
  auto p = precision_from_attrs(s.attrs);
  if (!p) return "f32";
  return *p == Precision::bf16 ? "bf16" : *p == Precision::int8 ? "int8" : "f32";
}

int64_t attr_int(const Attrs& a, const std::string& name, int64_t fallback) {
  auto v = a.get_int(name, fallback);
  return v ? *v : fallback;
}

int64_t attr_at(const Attrs& a, const std::string& name, size_t i, int64_t fallback) {
  auto v = a.get_ints(name);
  return v && i < v->size() ? (*v)[i] : fallback;
}

// Conv: NCHW in and out, weights [M, C/group, kh, kw]; depthwise when group == C == M. The output at
// `out_bytes`, the element size of the layout it writes (float32 from an int8 conv before a float op, as
// against the codes the sweep's int8 points write for their reader).
bool conv_features(const PlanView& v, const PlanStep& s, Measurement& m, double& weight_bytes, double out_bytes) {
  const Shape x = v.shape(input(s, 0)), w = v.shape(input(s, 1)), y = v.shape(output(s));
  if (x.size() != 4 || w.size() != 4 || y.size() != 4) return false;
  const int64_t group = attr_int(s.attrs, "group", 1);
  const bool depthwise = group > 1 && group == x[1] && w[0] == x[1];
  m.op = depthwise ? "depthwise_conv" : "conv";
  m.batch = x[0];
  m.in_c = group > 1 && !depthwise ? x[1] / group : x[1];  // a grouped conv costs like its per-group slice
  m.in_h = x[2];
  m.in_w = x[3];
  m.out_c = y[1];
  m.out_h = y[2];
  m.out_w = y[3];
  m.kernel_h = w[2];
  m.kernel_w = w[3];
  m.stride = attr_at(s.attrs, "strides", 0, 1);
  m.pad = attr_at(s.attrs, "pads", 0, 0);
  m.groups = depthwise ? x[1] : group;
  const double e = dtype_element_bytes(m.dtype);
  m.macs = static_cast<double>(shape_numel(y)) * static_cast<double>(shape_numel(w) / w[0]);
  weight_bytes = e * static_cast<double>(shape_numel(w)) + 4.0 * static_cast<double>(w[0]);
  m.bytes = e * v.numel(input(s, 0)) + out_bytes * v.numel(output(s)) + weight_bytes;
  return true;
}

// Gemm [M,K] x [K,N]; MatMul with leading dims folded into M. A and B at the compute dtype's size (a float32
// A converted in the step is priced apart), the output at `out_bytes` (bf16 rows or codes for a reader in
// the same precision, else float32).
bool gemm_features(const PlanView& v, const PlanStep& s, Measurement& m, double& weight_bytes, double out_bytes) {
  const Shape a = v.shape(input(s, 0)), y = v.shape(output(s));
  if (a.empty() || y.empty()) return false;
  int64_t k = a.back();
  if (s.op == OpKind::Gemm && attr_int(s.attrs, "transA", 0) != 0) k = a.front();
  m.op = "gemm";
  m.n = y.back();
  m.k = k;
  m.m = shape_numel(y) / std::max<int64_t>(m.n, 1);
  m.batch = m.m;
  const double e = dtype_element_bytes(m.dtype);
  m.macs = static_cast<double>(m.m) * static_cast<double>(m.k) * static_cast<double>(m.n);
  m.bytes = e * static_cast<double>(m.m * m.k + m.k * m.n) + out_bytes * static_cast<double>(m.m * m.n) + 4.0 * static_cast<double>(m.n);
  if (v.is_constant(input(s, 1))) weight_bytes = e * static_cast<double>(m.k * m.n) + 4.0 * static_cast<double>(m.n);
  return true;
}

bool pool_features(const PlanView& v, const PlanStep& s, Measurement& m) {
  const Shape x = v.shape(input(s, 0)), y = v.shape(output(s));
  if (x.size() != 4 || y.size() != 4) return false;
  m.op = s.op == OpKind::MaxPool ? "maxpool" : s.op == OpKind::AveragePool ? "avgpool" : "global_avgpool";
  m.batch = x[0];
  m.in_c = m.out_c = x[1];
  m.in_h = x[2];
  m.in_w = x[3];
  m.out_h = y[2];
  m.out_w = y[3];
  if (s.op == OpKind::GlobalAveragePool) {
    m.macs = static_cast<double>(shape_numel(x));
  } else {
    m.kernel_h = attr_at(s.attrs, "kernel_shape", 0, 1);
    m.kernel_w = attr_at(s.attrs, "kernel_shape", 1, m.kernel_h);
    m.stride = attr_at(s.attrs, "strides", 0, 1);
    m.pad = attr_at(s.attrs, "pads", 0, 0);
    m.macs = static_cast<double>(shape_numel(y) * m.kernel_h * m.kernel_w);
  }
  m.bytes = dtype_element_bytes(m.dtype) * (v.numel(input(s, 0)) + v.numel(output(s)));
  return true;
}

// The ops of a fused activation's written-out form (attributes under `prefix`), as the sweep's
// eltwise counts them; 0 for the ones as cheap as the sweep's fused ReLU.
double epilogue_op_count(const Attrs& attrs, std::string_view prefix = "") {
  auto act = post_ops_from_attrs(attrs, prefix);
  if (!act) return 0;
  switch (act->activation) {
    case Activation::silu: return 2;
    case Activation::sigmoid:
    case Activation::tanh: return 1;
    case Activation::gelu_erf: return 5;
    default: return 0;
  }
}

// DepthFirstConv ([expansion 1x1 ->] depthwise [-> scale -> projection 1x1], tile by tile; inputs
// 0 X, 1 DW, 2 DB, 3 scale, 4 PW, 5 PB, 6 residual, 7 EW, 8 EB), in the sweep's depth_first
// terms: MACs of the expansion at the input plane and of the rest at the output's, bytes of its
// border and weights only (the intermediates stay in cache), and its activations' element-ops.
// The op names its form: "depth_first", "depth_first_dw" (no expansion), "depth_first_expand"
// (no projection).
bool depth_first_features(const PlanView& v, const PlanStep& s, Measurement& m, double& weight_bytes, double& epilogue_ops) {
  const Shape x = v.shape(input(s, 0)), y = v.shape(output(s));
  const Shape dw = v.shape(input(s, 1));
  if (x.size() != 4 || y.size() != 4) return false;
  const bool expand = v.is_constant(input(s, 7)), project = v.is_constant(input(s, 4));
  if (!v.is_constant(input(s, 1))) {
    // Scale and projection only (EfficientNet's squeeze-excite product into its 1x1): a 1x1
    // convolution as the sweep times them, with its input scaled on the way.
    if (!project) return false;
    m.op = "conv";
    m.batch = x[0];
    m.in_c = x[1];
    m.in_h = m.out_h = x[2];
    m.in_w = m.out_w = x[3];
    m.out_c = y[1];
    m.kernel_h = m.kernel_w = 1;
    m.groups = 1;
    m.macs = static_cast<double>(shape_numel(y)) * static_cast<double>(x[1]);
    weight_bytes = dtype_element_bytes(m.dtype) * (v.numel(input(s, 4)) + v.numel(input(s, 5)));
    m.bytes = dtype_element_bytes(m.dtype) * (v.numel(input(s, 0)) + v.numel(output(s)) + v.numel(input(s, 6))) + weight_bytes;
    return true;
  }
  if (dw.size() != 4) return false;
  m.op = !expand ? "depth_first_dw" : !project ? "depth_first_expand" : "depth_first";
  m.batch = x[0];
  m.in_c = x[1];
  m.in_h = x[2];
  m.in_w = x[3];
  m.out_c = y[1];
  m.out_h = y[2];
  m.out_w = y[3];
  m.kernel_h = dw[2];
  m.kernel_w = dw[3];
  m.stride = attr_at(s.attrs, "dw_strides", 0, 1);
  m.pad = attr_at(s.attrs, "dw_pads", 0, 0);
  m.groups = 1;
  const double mid = static_cast<double>(dw[0]);
  const double in_plane = static_cast<double>(x[0] * x[2] * x[3]), out_plane = static_cast<double>(y[0] * y[2] * y[3]);
  m.macs = out_plane * mid * static_cast<double>(dw[2] * dw[3]);
  if (expand) m.macs += in_plane * mid * static_cast<double>(x[1]);
  if (project) m.macs += out_plane * mid * static_cast<double>(y[1]);
  double weights = 0;
  for (int i : {1, 2, 4, 5, 7, 8})
    if (v.is_constant(input(s, static_cast<size_t>(i)))) weights += v.numel(input(s, static_cast<size_t>(i)));
  weight_bytes = dtype_element_bytes(m.dtype) * weights;
  m.bytes = dtype_element_bytes(m.dtype) * (v.numel(input(s, 0)) + v.numel(output(s)) + v.numel(input(s, 6))) + weight_bytes;
  // The sweep's blocks use ReLU (free beside the kernel); SiLU and the like cost their element-ops.
  epilogue_ops = (expand ? epilogue_op_count(s.attrs, "ex_") * in_plane * mid : 0.0) +
                 epilogue_op_count(s.attrs, "dw_") * out_plane * mid;
  return m.macs > 0;
}

// Batch, channels and plane of a shape-preserving step's output (4-D; batch only otherwise).
void same_shape_features(const Shape& y, Measurement& m) {
  m.batch = y[0];
  if (y.size() != 4) return;
  m.in_c = m.out_c = y[1];
  m.in_h = m.out_h = y[2];
  m.in_w = m.out_w = y[3];
}

// Elementwise Add of two equal shapes (the sweep's add), in float32.
bool add_features(const PlanView& v, const PlanStep& s, Measurement& m) {
  const Shape a = v.shape(input(s, 0)), b = v.shape(input(s, 1)), y = v.shape(output(s));
  if (a != b || a != y || a.empty() || v.is_constant(input(s, 0)) || v.is_constant(input(s, 1))) return false;
  m.op = "add";
  same_shape_features(a, m);
  m.macs = static_cast<double>(shape_numel(a));
  m.bytes = 4.0 * 3.0 * m.macs;
  return true;
}

// Channel Concat of 4-D activations (the sweep's concat): reads and writes the output's elements
// at the element size of the layout it writes.
bool concat_features(const PlanView& v, const PlanStep& s, Measurement& m, double element_bytes) {
  const Shape y = v.shape(output(s));
  const int64_t axis = attr_int(s.attrs, "axis", 0);
  if (y.size() != 4 || (axis != 1 && axis != -3)) return false;
  for (size_t i = 0; i < s.inputs.size(); ++i)
    if (v.shape(input(s, i)).size() != 4 || v.is_constant(input(s, i))) return false;
  m.op = "concat";
  same_shape_features(y, m);
  m.in_c = y[1] / static_cast<int64_t>(std::max<size_t>(1, s.inputs.size()));
  m.macs = static_cast<double>(shape_numel(y));
  m.bytes = element_bytes * 2.0 * m.macs;
  return true;
}

// ConcatAffine (the sweep's concat_affine): the channel Concat of its activation inputs (2.. after
// scale and shift), normalized into its output; `kernel` counts the inputs. Bytes as it moves them:
// each input at the element size of the layout it is read in (bfloat16 from bf16 convs), the output at
// `out_element_bytes` (bfloat16 or int8 codes for bf16/int8 readers, as the sweep's bf16/int8 points).
bool concat_affine_features(const PlanView& v, const PlanStep& s, Measurement& m,
                            const std::vector<std::string>& slot_layout, double out_element_bytes) {
  const Shape y = v.shape(output(s));
  if (y.size() != 4 || s.inputs.size() < 3) return false;
  const int64_t parts = static_cast<int64_t>(s.inputs.size()) - 2;
  m.op = "concat_affine";
  same_shape_features(y, m);
  m.in_c = y[1] / parts;
  m.kernel_h = m.kernel_w = parts;
  m.macs = static_cast<double>(shape_numel(y));
  m.bytes = out_element_bytes * m.macs;
  for (size_t i = 2; i < s.inputs.size(); ++i)
    if (const int slot = s.inputs[i]; slot >= 0)
      m.bytes += static_cast<double>(v.numel(slot)) * layout_element_bytes(slot_layout[static_cast<size_t>(slot)]);
  return true;
}

// LayerNormalization over the last axis (the sweep's layernorm): batch, channels (the last axis) and the
// positions per sample between; its elements as MACs; bytes read at the layout it reads (bfloat16 rows from
// a bf16 producer, else float32) and written at `out_bytes`, with its scale and bias.
bool layernorm_features(const PlanView& v, const PlanStep& s, Measurement& m, const std::vector<std::string>& slot_layout,
                        double out_bytes) {
  const Shape x = v.shape(input(s, 0));
  const int64_t axis = attr_int(s.attrs, "axis", -1);
  if (x.size() < 2 || (axis != -1 && axis != static_cast<int64_t>(x.size()) - 1)) return false;
  m.op = "layernorm";
  m.batch = x[0];
  m.in_c = m.out_c = x.back();
  m.in_h = m.out_h = shape_numel(x) / std::max<int64_t>(x[0] * x.back(), 1);
  m.in_w = m.out_w = 1;
  const double elements = static_cast<double>(shape_numel(x));
  m.macs = elements;
  m.bytes = elements * (layout_element_bytes(slot_layout[static_cast<size_t>(input(s, 0))]) + out_bytes) + 8.0 * static_cast<double>(x.back());
  return true;
}

// Whether an ElementwiseChain op (elementwise_program.h's names) costs as much as a load or a store does:
// arithmetic, comparisons, ReLU. Transcendentals (sigmoid, tanh, erf, exp, log, sqrt, pow) cost many.
bool is_cheap_chain_op(const std::string& op) {
  return op == "add" || op == "sub" || op == "mul" || op == "div" || op == "max" || op == "min" || op == "prelu" ||
         op == "relu" || op == "neg" || op == "abs" || op == "reciprocal";
}

// ElementwiseChain (the sweep's eltwise): elements x ops of its program; reads its non-constant
// inputs and writes its output. A chain of cheap ops only (ConvNeXt's layer scale and residual sum:
// x * gamma + r) streams its bytes as the sweep's Add does: priced from the "add" group (priced from the
// SiLU/GELU chains, ConvNeXt-T's 18 at bf16 b8: 13.4 ms, measured 8.5).
bool chain_features(const PlanView& v, const PlanStep& s, Measurement& m, double element_bytes) {
  const Shape y = v.shape(output(s));
  auto ops = s.attrs.get_strings("ops");
  if (y.empty() || !ops || ops->empty()) return false;
  const bool cheap = std::all_of(ops->begin(), ops->end(), is_cheap_chain_op);
  m.op = cheap ? "add" : "eltwise";
  same_shape_features(y, m);
  m.kernel_h = m.kernel_w = cheap ? 0 : static_cast<int64_t>(ops->size());
  const double elements = static_cast<double>(shape_numel(y));
  m.macs = elements * (cheap ? 1.0 : static_cast<double>(ops->size()));
  m.bytes = element_bytes * elements;
  for (size_t i = 0; i < s.inputs.size(); ++i)
    if (!v.is_constant(input(s, i))) m.bytes += 4.0 * v.numel(input(s, i));
  return true;
}

bool is_view_op(OpKind op) {
  return op == OpKind::Reshape || op == OpKind::Flatten || op == OpKind::Squeeze || op == OpKind::Unsqueeze ||
         op == OpKind::Identity || op == OpKind::Dropout;
}

// Steps without a sweep counterpart: what they read (activations, not weights) and write.
double generic_bytes(const PlanView& v, const PlanStep& s, double out_element_bytes) {
  double bytes = 0;
  for (int slot : s.inputs)
    if (slot >= 0 && !v.is_constant(slot)) bytes += v.numel(slot) * out_element_bytes;
  for (int slot : s.outputs)
    if (slot >= 0) bytes += v.numel(slot) * out_element_bytes;
  return bytes;
}

// "onednn:acdb:u8*0.03" -> "onednn:acdb"; "plain" -> "plain".
std::string layout_format(const std::string& layout) {
  const size_t first = layout.find(':');
  if (first == std::string::npos) return layout;
  return layout.substr(0, layout.find(':', first + 1));
}

// The precision a layout stores: "bf16", "int8" (u8/s8) or "f32".
std::string layout_dtype(const std::string& layout) {
  if (layout.find(":bf16") != std::string::npos) return "bf16";
  if (layout.find(":u8") != std::string::npos || layout.find(":s8") != std::string::npos) return "int8";
  return "f32";
}

}  // namespace

double layout_element_bytes(const std::string& layout) { return dtype_element_bytes(layout_dtype(layout)); }

std::vector<StepFeatures> plan_features(const Plan& plan, const std::vector<EngineStep>& steps, int threads) {
  const PlanView v(plan);
  std::vector<StepFeatures> out;
  size_t next_plan_step = 0;
  double last_element_bytes = 4;  // of the layout the previous kernel wrote
  std::vector<std::string> slot_layout(static_cast<size_t>(std::max(plan.num_slots, 0)), "plain");  // as last written
  for (size_t i = 0; i < steps.size(); ++i) {
    const EngineStep& e = steps[i];
    StepFeatures f;
    f.node = e.node;
    f.op = e.op;
    f.kernel = e.kernel;
    Measurement& m = f.m;
    m.kind = kKindKernel;
    m.key = e.node;
    m.threads = threads;
    m.kernel = e.kernel;
    m.layout = e.output_layout;
    m.backend = e.kernel.substr(0, e.kernel.find('.'));
    m.dtype = "f32";
    if (e.op == "ToPlain") {
      // Converts the value the next kernel reads (or a graph output at the end) to plain float32.
      double elements = 0;
      int converted = -1;
      for (size_t j = next_plan_step; j < plan.steps.size() && elements == 0; ++j)
        for (int slot : plan.steps[j].inputs)
          if (slot >= 0 && !v.is_constant(slot)) {
            elements = v.numel(slot);
            converted = slot;
            break;
          }
      if (next_plan_step >= plan.steps.size())
        for (const auto& [slot, name] : plan.outputs)
          if (v.numel(slot) > elements) elements = v.numel(slot), converted = slot;
      if (const Shape shape = v.shape(converted); !shape.empty()) {
        m.batch = shape[0];
        // A 4-D value leaving a oneDNN format: the reverse of the conversion the sweep's plain-input
        // convolutions time, priced from those points (the predictor's "convert" groups).
        if (shape.size() == 4 && converted >= 0 && slot_layout[static_cast<size_t>(converted)].starts_with("onednn:")) {
          m.in_c = shape[1];
          m.in_h = shape[2];
          m.in_w = shape[3];
          m.dtype = layout_dtype(slot_layout[static_cast<size_t>(converted)]);
          f.input_conversion = "from layout";
        }
      }
      m.bytes = elements * (last_element_bytes + 4.0);
      if (converted >= 0) slot_layout[static_cast<size_t>(converted)] = "plain";
      out.push_back(std::move(f));
      continue;
    }
    // Engine steps other than conversions follow the plan's steps in order.
    size_t p = next_plan_step;
    while (p < plan.steps.size() && plan.steps[p].name != e.node) ++p;
    if (p == plan.steps.size()) {
      out.push_back(std::move(f));
      continue;
    }
    next_plan_step = p + 1;
    const PlanStep& s = plan.steps[p];
    const double out_bytes = layout_element_bytes(e.output_layout);
    m.dtype = dtype_of(s);
    bool mapped = false;
    switch (s.op) {
      case OpKind::Conv: mapped = conv_features(v, s, m, f.weight_bytes, out_bytes); break;
      case OpKind::Gemm:
      case OpKind::MatMul: mapped = gemm_features(v, s, m, f.weight_bytes, out_bytes); break;
      case OpKind::MaxPool:
      case OpKind::AveragePool:
      case OpKind::GlobalAveragePool:
        // Pooling has no precision of its own: in an int8 or bf16 region it reads and writes the
        // region's layout (ResNet-18 int8's max pool at batch 8: 0.8 ms on u8, 6.2 priced as float32).
        m.dtype = layout_dtype(e.output_layout);
        mapped = pool_features(v, s, m);
        break;
      case OpKind::DepthFirstConv: mapped = depth_first_features(v, s, m, f.weight_bytes, f.epilogue_ops); break;
      case OpKind::Add: mapped = add_features(v, s, m); break;
      case OpKind::Concat:
        // A Concat joins what its producers wrote, in the layout's precision: int8 codes at one scale
        // (quantize_int8's joined codes), bfloat16 (SqueezeNet int8 b8: 8 Concats of codes priced 3.06 ms
        // as float32 concats, 1.08 measured).
        m.dtype = layout_dtype(e.output_layout);
        mapped = concat_features(v, s, m, out_bytes);
        break;
      case OpKind::ConcatAffine:
        // Float32 arithmetic, stored as its readers take it: priced from the sweep's points that write
        // the same (bfloat16 for bf16 convs, u8 codes for int8 ones).
        m.dtype = layout_dtype(e.output_layout);
        mapped = concat_affine_features(v, s, m, slot_layout, out_bytes);
        break;
      case OpKind::ElementwiseChain: mapped = chain_features(v, s, m, out_bytes); break;
      case OpKind::LayerNormalization:
        // Float32 arithmetic on what it reads and writes: bfloat16 rows for bf16 MatMuls, else float32.
        m.dtype = layout_dtype(e.output_layout);
        mapped = layernorm_features(v, s, m, slot_layout, out_bytes);
        break;
      default: break;
    }
    if (mapped && (s.op == OpKind::Conv || s.op == OpKind::Gemm || s.op == OpKind::MatMul))
      f.epilogue_ops = epilogue_op_count(s.attrs) * static_cast<double>(v.numel(output(s)));
    // A bf16/int8 Gemm/MatMul reading float32 A (a classifier after its pooling, ConvNeXt int8's first Linear
    // after its float32 LayerNorm) converts it in its own step; one reading a producer's bfloat16 rows or
    // codes converts nothing (the sweep's interior gemm points).
    if (mapped && m.op == "gemm" && m.dtype != "f32" && input(s, 0) >= 0 &&
        layout_dtype(slot_layout[static_cast<size_t>(input(s, 0))]) == "f32")
      f.input_conversion = "precision";
    if (mapped && s.op == OpKind::Conv && input(s, 3) >= 0) f.residual_elements = static_cast<double>(v.numel(input(s, 3)));
    if (mapped && s.op == OpKind::Conv && m.backend == "onednn" && e.output_layout != "plain" && input(s, 0) >= 0) {
      // oneDNN reorders an input in another format or precision inside the convolution's step.
      const std::string& from = slot_layout[static_cast<size_t>(input(s, 0))];
      if (layout_format(from) != layout_format(e.output_layout)) f.input_conversion = "layout";
      else if (layout_dtype(from) != m.dtype) f.input_conversion = "precision";
      else f.signed_input = m.dtype == "int8" && from.find(":s8") != std::string::npos;
    }
    if (!mapped) {
      m.op.clear();
      m.macs = 0;
      f.weight_bytes = 0;
      f.view = is_view_op(s.op) || e.kernel.find("view") != std::string::npos;
      m.bytes = f.view ? 0 : generic_bytes(v, s, out_bytes);
      const Shape y = v.shape(output(s));
      m.batch = y.empty() ? 1 : y[0];
      // A 4-D Transpose that moves the innermost axis (ConvNeXt's NCHW <-> NHWC) is the permutation a
      // oneDNN reorder does, not a copy of contiguous rows: priced from the "convert" groups.
      if (const Shape x = v.shape(input(s, 0)); !f.view && s.op == OpKind::Transpose && x.size() == 4 &&
                                                 attr_at(s.attrs, "perm", 3, 3) != 3) {
        const bool to_channels_last = attr_at(s.attrs, "perm", 3, 3) == 1;  // (0,2,3,1): x is NCHW
        m.batch = x[0];
        m.in_c = to_channels_last ? x[1] : x[3];
        m.in_h = to_channels_last ? x[2] : x[1];
        m.in_w = to_channels_last ? x[3] : x[2];
        m.dtype = layout_dtype(slot_layout[static_cast<size_t>(input(s, 0))]);
        f.input_conversion = "transpose";
      }
    }
    last_element_bytes = out_bytes;
    for (int slot : s.outputs)
      if (slot >= 0) slot_layout[static_cast<size_t>(slot)] = e.output_layout;
    out.push_back(std::move(f));
  }
  return out;
}

int64_t plan_io_bytes(const Plan& plan) {
  std::vector<int> slots;
  for (const PlanInput& in : plan.inputs) slots.push_back(in.slot);
  for (const auto& [slot, name] : plan.outputs) slots.push_back(slot);
  int64_t bytes = 0;
  for (int slot : slots) {
    const ValueType& t = plan.slot_types[static_cast<size_t>(slot)];
    if (t.rank_known && sym_shape_is_concrete(t.shape))
      bytes += shape_numel(sym_shape_concrete(t.shape)) * static_cast<int64_t>(dtype_size(t.dtype));
  }
  return bytes;
}

}  // namespace kiln::perf
