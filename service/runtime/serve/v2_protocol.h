// The KServe v2 / Triton JSON inference protocol: datatype names, infer requests parsed into
// tensors, and the response, metadata and error bodies. Pure functions over strings: no sockets,
// no model (checks against the model's inputs live in model_signature.h).
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "kernels/core/dtype.h"
#include "kernels/core/status.h"
#include "kernels/io/npz.h"

namespace kiln::serve {

// "FP32", "FP16", "BF16", "INT8", "UINT8", "INT32", "INT64", "BOOL": one per kiln DType.
std::string_view v2_datatype_name(DType dtype);
std::optional<DType> v2_datatype_from_name(std::string_view name);

struct V2InferRequest {
  std::string id;                    // echoed in the response; empty when the request has none
  NamedTensors inputs;               // request order; shapes and datatypes as sent
  std::vector<std::string> outputs;  // the requested subset by name; empty: every output
};

// Parses an infer request body. `data` may be flat (row-major) or nested to any depth up to the
// rank; its element count must equal product(shape). Errors: ErrorCode::parse for malformed
// JSON; invalid_argument for a missing or ill-typed field, an unknown datatype or a value that
// does not fit the datatype; shape_mismatch when the data length differs from product(shape);
// limit_exceeded for shapes beyond kernels/core/limits.h. Each names the input and the field.
Result<V2InferRequest> v2_infer_request_parse(std::string_view body);

// The inverse, for clients and tests: {"id", "inputs": [{name, shape, datatype, data}]}.
std::string v2_infer_request_write(std::string_view id, const NamedTensors& inputs);

// {"model_name", "model_version": "1", "id" (when not empty), "outputs": [{name, shape, datatype, data}]}.
// Floats are written in their shortest round-trip form; NaN and infinities (which JSON cannot
// spell) as null.
std::string v2_infer_response_write(std::string_view model, std::string_view id, const NamedTensors& outputs);

// Model metadata: name, versions ["1"], platform "kiln", inputs/outputs {name, datatype, shape}
// with -1 where the dim is the batch a request chooses.
struct V2TensorMetadata {
  std::string name;
  DType dtype = DType::f32;
  std::vector<int64_t> shape;
};
std::string v2_model_metadata_write(std::string_view model, const std::vector<V2TensorMetadata>& inputs,
                                    const std::vector<V2TensorMetadata>& outputs);

// {"error": message}
std::string v2_error_write(std::string_view message);

}  // namespace kiln::serve
