// Development scaffold for the data group: ops listed here link to a definition that
// reports "no reference kernel yet". Delete an op's line when its real file exists; delete
// this file (and its line in data.cmake) when the list is empty.
#include "kernels/op_def.h"

namespace kiln {
namespace {
Status infer_pending(InferContext&) { return make_error(ErrorCode::unsupported, "no reference kernel yet"); }
Status run_pending(RunContext&) { return make_error(ErrorCode::unsupported, "no reference kernel yet"); }
const OpDef kPending{0, -1, 1, 8, infer_pending, run_pending};
}  // namespace

#define PENDING_OP(name) const OpDef& op_def_##name() { return kPending; }
PENDING_OP(Flatten)
PENDING_OP(Reshape)
PENDING_OP(Transpose)
PENDING_OP(Concat)
PENDING_OP(Split)
PENDING_OP(Slice)
PENDING_OP(Squeeze)
PENDING_OP(Unsqueeze)
PENDING_OP(Expand)
PENDING_OP(Tile)
PENDING_OP(Pad)
PENDING_OP(Gather)
PENDING_OP(Shape)
PENDING_OP(Constant)
PENDING_OP(ConstantOfShape)
PENDING_OP(Range)
PENDING_OP(Resize)
#undef PENDING_OP

}  // namespace kiln
