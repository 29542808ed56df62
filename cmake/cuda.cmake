# KILN_CUDA=AUTO|ON|OFF: whether to build the CUDA backend plugin (kernels/cuda, libkiln_cuda.so).
# AUTO builds it whenever nvcc, cuBLASLt and cuDNN are found (CI has the toolkit and no GPU, so it
# always compiles and links it); ON fails the configure without them; OFF never looks.
# Sets KILN_CUDA_ENABLED. Included at file scope: enable_language must not run in a function.
set(KILN_CUDA AUTO CACHE STRING "Build the CUDA backend plugin: AUTO, ON or OFF")
set_property(CACHE KILN_CUDA PROPERTY STRINGS AUTO ON OFF)
include(${CMAKE_CURRENT_LIST_DIR}/cuda_option.cmake)

set(kiln_cuda_missing "")
string(TOUPPER "${KILN_CUDA}" kiln_cuda_mode)
# Sanitizer and fuzz builds test kiln's host code; their flags would reach nvcc and the plugin
# would be built three times in CI. AUTO leaves it out of them; ON says why it cannot.
if(_kiln_san_compile)
  list(APPEND kiln_cuda_missing "a build without sanitizers (KILN_SANITIZE/KILN_FUZZ are set)")
  set(kiln_cuda_sanitized ON)
endif()
if((kiln_cuda_mode STREQUAL "AUTO" OR kiln_cuda_mode STREQUAL "ON") AND NOT kiln_cuda_sanitized)
  # The toolkit's default place, for shells whose PATH lacks it.
  if(NOT CMAKE_CUDA_COMPILER AND NOT DEFINED ENV{CUDACXX} AND EXISTS /usr/local/cuda/bin/nvcc)
    set(CMAKE_CUDA_COMPILER /usr/local/cuda/bin/nvcc CACHE FILEPATH "CUDA compiler")
  endif()
  include(CheckLanguage)
  check_language(CUDA)
  if(NOT CMAKE_CUDA_COMPILER OR NOT EXISTS "${CMAKE_CUDA_COMPILER}")
    list(APPEND kiln_cuda_missing "nvcc")
  else()
    if(NOT CUDAToolkit_ROOT)
      get_filename_component(CUDAToolkit_ROOT "${CMAKE_CUDA_COMPILER}/../.." ABSOLUTE)
    endif()
    find_package(CUDAToolkit QUIET)
    if(NOT TARGET CUDA::cublasLt OR NOT TARGET CUDA::cudart_static)
      list(APPEND kiln_cuda_missing "cuBLASLt")
    endif()
    find_library(KILN_CUDNN_LIBRARY cudnn HINTS ${CUDAToolkit_LIBRARY_DIR} "${CUDAToolkit_LIBRARY_ROOT}/lib")
    find_path(KILN_CUDNN_INCLUDE_DIR cudnn.h HINTS ${CUDAToolkit_INCLUDE_DIRS})
    if(NOT KILN_CUDNN_LIBRARY OR NOT KILN_CUDNN_INCLUDE_DIR)
      list(APPEND kiln_cuda_missing "cuDNN")
    endif()
  endif()
endif()

kiln_cuda_decide("${KILN_CUDA}" "${kiln_cuda_missing}" KILN_CUDA_ENABLED kiln_cuda_error)
if(kiln_cuda_error)
  message(FATAL_ERROR "${kiln_cuda_error}")
endif()
if(KILN_CUDA_ENABLED)
  if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES)
    set(CMAKE_CUDA_ARCHITECTURES 80 90)  # A100 and H100: SASS for both, PTX for newer GPUs to JIT
  endif()
  enable_language(CUDA)
  message(STATUS "kiln: CUDA backend ON (nvcc ${CMAKE_CUDA_COMPILER_VERSION}, architectures ${CMAKE_CUDA_ARCHITECTURES})")
else()
  message(STATUS "kiln: CUDA backend OFF (KILN_CUDA=${KILN_CUDA}; not found: ${kiln_cuda_missing})")
endif()
