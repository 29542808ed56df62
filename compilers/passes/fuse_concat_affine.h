// fuse_concat_affine: an inference BatchNormalization (with its fused activation, if any) whose
// input is a Concat on axis 1 read by nothing else becomes one ConcatAffine node
// (kernels/reference/concat_affine.cpp): each input's channels are normalized straight into their
// place in the output, so the joined tensor is not written and read again. DenseNet's layers all
// start with cat -> norm -> relu: batch 16, 62 Concat + BatchNormalization pairs.
// Requires: inferred types; the BatchNormalization's parameters are float32 initializers.
// Left alone: other axes, a Concat with other readers or that is a graph output, a residual input.
// Guarantees: topological order (the new node takes the BatchNormalization's place, after every
// input of the Concat); results unchanged up to float rounding (the affine map is rounded to
// float once).
#pragma once

#include "compilers/passes/pass.h"

namespace kiln {

Result<bool> pass_fuse_concat_affine(Graph& graph, const PassContext& ctx);

}  // namespace kiln
