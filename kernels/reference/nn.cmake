# Reference kernels: Gemm, MatMul, normalizations (and ConcatAffine, a normalized Concat), Softmax/LogSoftmax,
# reductions. Paths relative to kernels/
set(KILN_REF_NN_SOURCES
  reference/concat_affine.cpp
  reference/epilogue.cpp
  reference/gemm_matmul.cpp
  reference/normalization.cpp
  reference/reduce.cpp
  reference/softmax.cpp
)
