#include "compilers/passes/mixed_precision_bf16.h"

#include <algorithm>

#include "compilers/ir/rewrite.h"
#include "compilers/passes/keep_fp32.h"
#include "kernels/precision.h"

namespace kiln {

Result<bool> pass_mixed_precision_bf16(Graph& graph, const PassContext& ctx) {
  KILN_TRY(check_kept_layers(graph, ctx));
  int marked = 0;
  for (Node& node : graph.nodes) {
    if (node.op != OpKind::Conv && node.op != OpKind::Gemm && node.op != OpKind::MatMul) continue;
    if (kept_in_fp32(ctx, node)) continue;
    KILN_ASSIGN(precision, precision_from_attrs(node.attrs));
    if (precision == Precision::bf16) continue;
    precision_to_attrs(Precision::bf16, node.attrs);
    ++marked;
  }
  // A float32 ConcatAffine (DenseNet's BatchNorm+ReLU over the joined features) whose every reader
  // is a bf16 conv writes bfloat16, which they read as is: half the bytes, and no conversion in the
  // conv (DenseNet-121 bf16: before each of its 1x1 convs). Likewise a bf16 MatMul (without a
  // residual) read only by bf16 MatMuls: ConvNeXt's and transformers' Linear+GELU before the next
  // Linear; and a LayerNormalization read only by bf16 MatMuls (ConvNeXt's and transformers' norm
  // before the first Linear), which then normalizes bfloat16 input rows in bfloat16 where it gets them.
  const auto consumers = graph_consumers(graph);
  int bf16_affines = 0, bf16_matmuls = 0, bf16_norms = 0;
  for (Node& node : graph.nodes) {
    const bool concat_affine = node.op == OpKind::ConcatAffine;
    const bool layer_norm = node.op == OpKind::LayerNormalization;
    const auto precision = precision_from_attrs(node.attrs);
    const bool matmul = node.op == OpKind::MatMul && precision && *precision == Precision::bf16 &&
                        (node.inputs.size() <= 3 || node.inputs[3] == kNoValue);
    if (!(concat_affine || matmul || layer_norm) || node.outputs.size() != 1 || graph_is_output(graph, node.outputs[0]))
      continue;
    const OpKind reader_op = concat_affine ? OpKind::Conv : OpKind::MatMul;
    const auto& readers = consumers[static_cast<size_t>(node.outputs[0])];
    const bool all_bf16 = !readers.empty() && std::all_of(readers.begin(), readers.end(), [&](int r) {
      const Node& reader = graph.nodes[static_cast<size_t>(r)];
      auto p = precision_from_attrs(reader.attrs);
      return reader.op == reader_op && p && *p == Precision::bf16 && reader.inputs[0] == node.outputs[0] &&
             std::count(reader.inputs.begin(), reader.inputs.end(), node.outputs[0]) == 1;
    });
    if (!all_bf16) continue;
    if (auto already = bf16_output_from_attrs(node.attrs); already && *already) continue;
    node.attrs.set(std::string(kBf16OutputAttr), int64_t{1});
    ++(concat_affine ? bf16_affines : layer_norm ? bf16_norms : bf16_matmuls);
  }
  const int bf16_writers = bf16_affines + bf16_matmuls + bf16_norms;
  if (ctx.log && (marked > 0 || bf16_writers > 0)) {
    *ctx.log << "  mixed_precision_bf16: " << marked << " layers in bf16";
    if (bf16_affines > 0) *ctx.log << ", " << bf16_affines << " BatchNorm+ReLU writing bf16";
    if (bf16_matmuls > 0) *ctx.log << ", " << bf16_matmuls << " MatMuls writing bf16 for the next";
    if (bf16_norms > 0) *ctx.log << ", " << bf16_norms << " LayerNorms writing bf16 for MatMuls";
    if (!ctx.keep_fp32.empty()) {
      *ctx.log << "; kept in fp32:";
      for (const std::string& name : ctx.keep_fp32) *ctx.log << ' ' << name;
    }
    *ctx.log << '\n';
  }
  return marked > 0 || bf16_writers > 0;
}

}  // namespace kiln
