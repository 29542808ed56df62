// Development scaffold for the nn group: ops listed here link to a definition that
// reports "no reference kernel yet". Delete an op's line when its real file exists; delete
// this file (and its line in nn.cmake) when the list is empty.
#include "kernels/op_def.h"

namespace kiln {
namespace {
Status infer_pending(InferContext&) { return make_error(ErrorCode::unsupported, "no reference kernel yet"); }
Status run_pending(RunContext&) { return make_error(ErrorCode::unsupported, "no reference kernel yet"); }
const OpDef kPending{0, -1, 1, 8, infer_pending, run_pending};
}  // namespace

#define PENDING_OP(name) const OpDef& op_def_##name() { return kPending; }
PENDING_OP(Gemm)
PENDING_OP(MatMul)
PENDING_OP(BatchNormalization)
PENDING_OP(InstanceNormalization)
PENDING_OP(LayerNormalization)
PENDING_OP(Softmax)
PENDING_OP(LogSoftmax)
PENDING_OP(ReduceMean)
PENDING_OP(ReduceSum)
PENDING_OP(ReduceMax)
PENDING_OP(ReduceMin)
#undef PENDING_OP

}  // namespace kiln
