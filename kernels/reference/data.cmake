# Reference kernels: data movement and shape arithmetic. Paths relative to kernels/.
set(KILN_REF_DATA_SOURCES
  reference/pending_data.cpp
  reference/identity.cpp
)
