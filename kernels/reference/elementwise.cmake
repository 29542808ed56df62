# Reference kernels: elementwise unary/binary/variadic ops and Cast. Paths relative to kernels/.
set(KILN_REF_ELEMENTWISE_SOURCES
  reference/pending_elementwise.cpp
)
