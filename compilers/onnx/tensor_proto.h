// Conversions from ONNX protobuf messages to kiln types (internal to the importer).
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

}  // namespace kiln::onnx_detail
