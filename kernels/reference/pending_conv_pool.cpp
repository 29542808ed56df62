// Development scaffold for the conv_pool group: ops listed here link to a definition that
// reports "no reference kernel yet". Delete an op's line when its real file exists; delete
// this file (and its line in conv_pool.cmake) when the list is empty.
#include "kernels/op_def.h"

namespace kiln {
namespace {
Status infer_pending(InferContext&) { return make_error(ErrorCode::unsupported, "no reference kernel yet"); }
Status run_pending(RunContext&) { return make_error(ErrorCode::unsupported, "no reference kernel yet"); }
const OpDef kPending{0, -1, 1, 8, infer_pending, run_pending};
}  // namespace

#define PENDING_OP(name) const OpDef& op_def_##name() { return kPending; }
PENDING_OP(Conv)
PENDING_OP(ConvTranspose)
PENDING_OP(MaxPool)
PENDING_OP(AveragePool)
PENDING_OP(GlobalAveragePool)
PENDING_OP(GlobalMaxPool)
PENDING_OP(LRN)
#undef PENDING_OP

}  // namespace kiln
