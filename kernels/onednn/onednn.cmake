# The oneDNN backend (Debian's libdnnl-dev 2.6, OpenMP threading): KILN_ONEDNN_SOURCES.
set(KILN_ONEDNN_SOURCES
  onednn/onednn_common.cpp
  onednn/conv.cpp
  onednn/matmul.cpp
  onednn/pooling.cpp
  onednn/eltwise.cpp
  onednn/binary.cpp
  onednn/softmax.cpp
  onednn/batchnorm.cpp
  onednn/layernorm.cpp
  onednn/concat.cpp
  onednn/lrn.cpp
  onednn/transpose.cpp
  onednn/slice.cpp
  onednn/reduce.cpp
)
