# Reference kernels: Gemm, MatMul, normalizations, Softmax/LogSoftmax, reductions. Paths relative to kernels/.
set(KILN_REF_NN_SOURCES
  reference/epilogue.cpp
  reference/gemm_matmul.cpp
  reference/normalization.cpp
  reference/reduce.cpp
  reference/softmax.cpp
)
