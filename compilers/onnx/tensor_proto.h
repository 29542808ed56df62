// Conversions between ONNX protobuf messages and kiln types (internal to the importer and exporter).
#pragma once

#include <memory>
#include <string>

#include <onnx/onnx_pb.h>

#include "kernels/op_def.h"

namespace kiln::onnx_detail {

Result<DType> dtype_from_onnx(int32_t elem_type, const std::string& what);

// `keep_alive` owns the protobuf message holding raw_data; such tensors borrow it without a
// copy. External data is memory-mapped from `external_dir` (paths may not leave that folder).
Result<Tensor> tensor_from_proto(const onnx::TensorProto& proto, const std::string& external_dir,
                                 const std::shared_ptr<const void>& keep_alive);

// A value's declared type; non-tensor types (sequence, map, optional) are unsupported.
Result<ValueType> value_type_from_proto(const onnx::ValueInfoProto& info);

// The other way, for the exporter: every kiln dtype has an ONNX element type.
int32_t dtype_to_onnx(DType dtype);
// Fills `proto` with t's dtype, dims and bytes (raw_data, little-endian as ONNX stores it).
void tensor_to_proto(const Tensor& t, const std::string& name, onnx::TensorProto& proto);
// Known dims as dim_value, named ones as dim_param; no shape when the rank is unknown.
void value_type_to_proto(const ValueType& type, const std::string& name, onnx::ValueInfoProto& info);

}  // namespace kiln::onnx_detail
