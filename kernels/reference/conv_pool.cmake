# Reference kernels: Conv, ConvTranspose, DepthFirstConv, pooling, LRN. Paths relative to kernels/.
set(KILN_REF_CONV_POOL_SOURCES
  reference/conv.cpp
  reference/conv_transpose.cpp
  reference/depth_first_conv.cpp
  reference/global_pool.cpp
  reference/lrn.cpp
  reference/pool.cpp
  reference/window.cpp
)
