// What a served model accepts and returns, read from its compiled Plan, and the checks that
// turn a request's named tensors into the engine's inputs.
//
// Compiled plans have fixed shapes. When every input and every output leads with the same dim B
// (the compiled batch), the model is batchable: a request may carry any number b >= 1 of samples
// along dim 0 and the batcher packs, pads or chunks them into runs of B. Otherwise requests must
// match the compiled shapes exactly and run one at a time.
#pragma once

#include <string>
#include <vector>

#include "kernels/core/status.h"
#include "kernels/io/npz.h"
#include "kernels/plan.h"

namespace kiln::serve {

struct TensorSpec {
  std::string name;
  DType dtype = DType::f32;
  Shape shape;  // the compiled shape (dim 0 = batch when batchable)
};

struct ModelSignature {
  std::vector<TensorSpec> inputs;   // Plan::inputs order
  std::vector<TensorSpec> outputs;  // Plan::outputs order
  int64_t batch = 0;                // B when batchable, else 0
};

// Fails when a shape is not concrete (the plan was not compiled for fixed shapes).
Result<ModelSignature> model_signature_of(const Plan& plan);

// The shape clients see: the compiled shape with -1 for the batch dim when batchable.
std::vector<int64_t> model_shape_public(const ModelSignature& signature, const TensorSpec& spec);

struct MatchedInputs {
  std::vector<Tensor> tensors;  // in ModelSignature::inputs order
  int64_t samples = 0;          // the common leading dim (batchable), else 1
};

// Matches request tensors to the model's inputs by name. Errors (invalid_argument or
// shape_mismatch) name the input: unknown or missing inputs (listing the model's), another
// datatype, another shape (per sample when batchable), differing or zero sample counts.
Result<MatchedInputs> model_inputs_match(const ModelSignature& signature, NamedTensors inputs);

// Indices into ModelSignature::outputs for the requested names (all when `names` is empty);
// an unknown name is an invalid_argument error that lists the model's outputs.
Result<std::vector<size_t>> model_outputs_select(const ModelSignature& signature, const std::vector<std::string>& names);

}  // namespace kiln::serve
