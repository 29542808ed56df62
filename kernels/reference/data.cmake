# Reference kernels: data movement and shape arithmetic. Paths relative to kernels/.
set(KILN_REF_DATA_SOURCES
  reference/channel_shuffle.cpp
  reference/concat_split.cpp
  reference/constant.cpp
  reference/data_util.cpp
  reference/expand_tile.cpp
  reference/gather.cpp
  reference/identity.cpp
  reference/pad.cpp
  reference/reshape.cpp
  reference/resize.cpp
  reference/slice.cpp
  reference/transpose.cpp
)
