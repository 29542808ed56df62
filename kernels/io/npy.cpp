#include "kernels/io/npy.h"
