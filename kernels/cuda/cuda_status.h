// CUDA, cuDNN and cuBLASLt return codes as kiln Status values: the call that failed and the
// library's own words, for errors that are the device's (launch failures, lost devices).
#pragma once

#include <cublasLt.h>
#include <cuda_runtime_api.h>
#include <cudnn.h>

#include "kernels/core/status.h"

namespace kiln::cuda {

Status cuda_status(cudaError_t error, const char* call);
Status cudnn_status(cudnnStatus_t status, const char* call);
Status cublas_status(cublasStatus_t status, const char* call);

}  // namespace kiln::cuda

#define KILN_CUDA_TRY(call) KILN_TRY(::kiln::cuda::cuda_status((call), #call))
#define KILN_CUDNN_TRY(call) KILN_TRY(::kiln::cuda::cudnn_status((call), #call))
#define KILN_CUBLAS_TRY(call) KILN_TRY(::kiln::cuda::cublas_status((call), #call))
