# Reference kernels: Conv, ConvTranspose, pooling, LRN. Paths relative to kernels/.
set(KILN_REF_CONV_POOL_SOURCES
  reference/pending_conv_pool.cpp
)
