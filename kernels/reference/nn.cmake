# Reference kernels: Gemm, MatMul, normalizations, Softmax/LogSoftmax, reductions. Paths relative to kernels/.
set(KILN_REF_NN_SOURCES
  reference/pending_nn.cpp
)
