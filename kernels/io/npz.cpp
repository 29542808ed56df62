#include "kernels/io/npz.h"
