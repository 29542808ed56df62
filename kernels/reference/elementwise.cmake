# Reference kernels: elementwise unary/binary/variadic ops and Cast. Paths relative to kernels/.
set(KILN_REF_ELEMENTWISE_SOURCES
  reference/binary.cpp
  reference/cast.cpp
  reference/clip_prelu.cpp
  reference/unary.cpp
)
