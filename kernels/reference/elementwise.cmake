# Reference kernels: elementwise unary/binary/variadic ops, Cast, QuantizeLinear/DequantizeLinear and the fused ElementwiseChain. Paths relative to kernels/.
set(KILN_REF_ELEMENTWISE_SOURCES
  reference/binary.cpp
  reference/cast.cpp
  reference/clip_prelu.cpp
  reference/elementwise_chain.cpp
  reference/quantize_linear.cpp
  reference/unary.cpp
)
