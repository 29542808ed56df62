#include "kernels/cuda/cuda_status.h"

#include <string>

namespace kiln::cuda {
namespace {

// "cudnnConvolutionForward(handle, ...)" -> "cudnnConvolutionForward": the function, not its arguments.
std::string call_name(const char* call) {
  const std::string text(call);
  return text.substr(0, text.find('('));
}

}  // namespace

Status cuda_status(cudaError_t error, const char* call) {
  if (error == cudaSuccess) return Status::ok();
  return make_error(ErrorCode::internal, call_name(call), " failed: ", cudaGetErrorName(error), " (", cudaGetErrorString(error), ")");
}

Status cudnn_status(cudnnStatus_t status, const char* call) {
  if (status == CUDNN_STATUS_SUCCESS) return Status::ok();
  return make_error(ErrorCode::internal, call_name(call), " failed: ", cudnnGetErrorString(status));
}

Status cublas_status(cublasStatus_t status, const char* call) {
  if (status == CUBLAS_STATUS_SUCCESS) return Status::ok();
  return make_error(ErrorCode::internal, call_name(call), " failed: cuBLAS status ", static_cast<int>(status));
}

}  // namespace kiln::cuda
