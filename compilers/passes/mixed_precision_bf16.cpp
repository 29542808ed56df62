#include "compilers/passes/mixed_precision_bf16.h"

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
  if (ctx.log && marked > 0) {
    *ctx.log << "  mixed_precision_bf16: " << marked << " layers in bf16";
    if (!ctx.keep_fp32.empty()) {
      *ctx.log << "; kept in fp32:";
      for (const std::string& name : ctx.keep_fp32) *ctx.log << ' ' << name;
    }
    *ctx.log << '\n';
  }
  return marked > 0;
}

}  // namespace kiln
