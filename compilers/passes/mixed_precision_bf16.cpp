#include "compilers/passes/mixed_precision_bf16.h"

#include "kernels/precision.h"

namespace kiln {

Result<bool> pass_mixed_precision_bf16(Graph& graph, const PassContext&) {
  bool changed = false;
  for (Node& node : graph.nodes) {
    if (node.op != OpKind::Conv && node.op != OpKind::Gemm && node.op != OpKind::MatMul) continue;
    KILN_ASSIGN(precision, precision_from_attrs(node.attrs));
    if (precision == Precision::bf16) continue;
    precision_to_attrs(Precision::bf16, node.attrs);
    changed = true;
  }
  return changed;
}

}  // namespace kiln
