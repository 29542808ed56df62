# libkiln_cuda.so: the CUDA backend plugin (included from kernels/CMakeLists.txt when
# KILN_CUDA_ENABLED). A MODULE library that kiln and kiln-runtime dlopen (kernels/device/), so no
# kiln executable links a CUDA library. It carries its own position-independent copy of the few
# kiln_kernels sources it uses (tensors, attributes, post-ops, the arena planner, window
# geometry): kiln_kernels itself is not built with -fPIC. Only kiln_device_backend is exported.

# kiln's own device code: plain launchers, no kiln headers, so nvcc compiles little.
add_library(kiln_cuda_device OBJECT
  cuda/elementwise.cu
  cuda/pool.cu
  cuda/softmax.cu
  cuda/layer_norm.cu
  cuda/elementwise_chain.cu
  cuda/copy.cu
  cuda/depthwise_conv.cu
)
target_include_directories(kiln_cuda_device PRIVATE ${PROJECT_SOURCE_DIR})
set_target_properties(kiln_cuda_device PROPERTIES POSITION_INDEPENDENT_CODE ON CUDA_VISIBILITY_PRESET hidden
                                                  CUDA_STANDARD 17 CUDA_STANDARD_REQUIRED ON)
target_compile_options(kiln_cuda_device PRIVATE --Werror all-warnings -Xcompiler=-Wall,-Wextra)

add_library(kiln_cuda MODULE
  cuda/cuda_backend.cpp
  cuda/cuda_engine.cpp
  cuda/cuda_registry.cpp
  cuda/cuda_kernel.cpp
  cuda/cuda_status.cpp
  cuda/device_buffer.cpp
  cuda/conv.cpp
  cuda/depthwise_conv_op.cpp
  cuda/pointwise_conv.cpp
  cuda/gemm.cpp
  cuda/pool_op.cpp
  cuda/softmax_op.cpp
  cuda/layer_norm_op.cpp
  cuda/elementwise_chain_op.cpp
  cuda/activation_op.cpp
  cuda/binary_op.cpp
  cuda/batchnorm_op.cpp
  cuda/data_movement.cpp
  # The kiln_kernels sources the plugin needs, compiled again with -fPIC.
  core/attrs.cpp
  core/dtype.cpp
  core/half.cpp
  core/shape.cpp
  core/status.cpp
  core/tensor.cpp
  post_ops.cpp
  elementwise_program.cpp
  memory_plan.cpp
  reference/window.cpp
  reference/common.cpp
  reference/slice.cpp
  reference/data_util.cpp
  device/device_backend.cpp
  device/mixed_precision.cpp
  device/device_check.cpp
  $<TARGET_OBJECTS:kiln_cuda_device>
)
kiln_cuda_min_architecture("${CMAKE_CUDA_ARCHITECTURES}" kiln_cuda_min_arch)
string(REPLACE ";" "," kiln_cuda_arch_text "${CMAKE_CUDA_ARCHITECTURES}")  # a ';' would end the compile command
target_compile_definitions(kiln_cuda PRIVATE KILN_CUDA_ARCHITECTURES="${kiln_cuda_arch_text}"
                                             KILN_CUDA_MIN_COMPUTE_CAPABILITY=${kiln_cuda_min_arch})
target_include_directories(kiln_cuda PRIVATE ${PROJECT_SOURCE_DIR})
target_include_directories(kiln_cuda SYSTEM PRIVATE ${CUDAToolkit_INCLUDE_DIRS} ${KILN_CUDNN_INCLUDE_DIR})
target_link_libraries(kiln_cuda PRIVATE kiln_warnings CUDA::cudart_static CUDA::cublasLt ${KILN_CUDNN_LIBRARY} ${CMAKE_DL_LIBS})
target_link_options(kiln_cuda PRIVATE -Wl,--no-undefined)
set_target_properties(kiln_cuda PROPERTIES
  PREFIX "lib" OUTPUT_NAME kiln_cuda
  CXX_VISIBILITY_PRESET hidden VISIBILITY_INLINES_HIDDEN ON
  # Beside build/kiln and build/kiln-runtime, where the loader looks first.
  LIBRARY_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR})
