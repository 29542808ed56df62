// Development scaffold for the elementwise group: ops listed here link to a definition that
// reports "no reference kernel yet". Delete an op's line when its real file exists; delete
// this file (and its line in elementwise.cmake) when the list is empty.
#include "kernels/op_def.h"

namespace kiln {
namespace {
Status infer_pending(InferContext&) { return make_error(ErrorCode::unsupported, "no reference kernel yet"); }
Status run_pending(RunContext&) { return make_error(ErrorCode::unsupported, "no reference kernel yet"); }
const OpDef kPending{0, -1, 1, 8, infer_pending, run_pending};
}  // namespace

#define PENDING_OP(name) const OpDef& op_def_##name() { return kPending; }
PENDING_OP(Add)
PENDING_OP(Sub)
PENDING_OP(Mul)
PENDING_OP(Div)
PENDING_OP(Pow)
PENDING_OP(Max)
PENDING_OP(Min)
PENDING_OP(Sum)
PENDING_OP(Mean)
PENDING_OP(Equal)
PENDING_OP(Where)
PENDING_OP(Relu)
PENDING_OP(LeakyRelu)
PENDING_OP(PRelu)
PENDING_OP(Elu)
PENDING_OP(Selu)
PENDING_OP(Clip)
PENDING_OP(Sigmoid)
PENDING_OP(HardSigmoid)
PENDING_OP(HardSwish)
PENDING_OP(Tanh)
PENDING_OP(Softplus)
PENDING_OP(Erf)
PENDING_OP(Exp)
PENDING_OP(Log)
PENDING_OP(Sqrt)
PENDING_OP(Neg)
PENDING_OP(Abs)
PENDING_OP(Reciprocal)
PENDING_OP(Cast)
#undef PENDING_OP

}  // namespace kiln
