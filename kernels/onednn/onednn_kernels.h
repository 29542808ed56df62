// The oneDNN (libdnnl 2.6, CPU) kernel implementations, in the order registry.cpp lists them.
// Each supports() gives a reason for every case it does not compute exactly like the reference
// kernel; oneDNN-layout (blocked) values flow between these kernels and are converted to plain
// by the engine only where another backend reads them.
#pragma once

#include "kernels/kernel.h"

namespace kiln {

extern const KernelImpl kOneDnnConv;        // Conv (+ bias, residual, fused activation)
extern const KernelImpl kOneDnnGemm;        // Gemm (+ residual, fused activation)
extern const KernelImpl kOneDnnMatMul;      // MatMul, batched with broadcasting (+ residual, activation)
extern const KernelImpl kOneDnnPool;        // MaxPool, AveragePool, GlobalAveragePool, GlobalMaxPool
extern const KernelImpl kOneDnnEltwise;     // Relu, LeakyRelu, Elu, Selu, Sigmoid, HardSigmoid, HardSwish, Tanh,
                                            // Softplus, Exp, Log, Sqrt, Neg, Abs, Clip
extern const KernelImpl kOneDnnBinary;      // Add, Sub, Mul, Div, Max, Min, Sum (two inputs)
extern const KernelImpl kOneDnnSoftmax;     // Softmax, LogSoftmax
extern const KernelImpl kOneDnnBatchNorm;   // BatchNormalization (inference)
extern const KernelImpl kOneDnnLayerNorm;   // LayerNormalization over the last axis
extern const KernelImpl kOneDnnConcat;      // Concat
extern const KernelImpl kOneDnnLrn;         // LRN
extern const KernelImpl kOneDnnTranspose;   // Transpose (plain float32, one strided reorder)
extern const KernelImpl kOneDnnSlice;       // Slice with steps 1 (one reorder from a sub-memory of the source)
extern const KernelImpl kOneDnnReduce;      // ReduceMean/Sum/Max/Min (spatial: pooling; innermost rows: reduction)

// Whether oneDNN's int8 matmul on this CPU is its gemm, which packs the weights again on every
// call (AVX2 without VNNI): the int8 Gemm/MatMul kernels then run as a 1x1 convolution, and the
// kernel sweep keys their points so (kGemmAsConvKeyPrefix).
bool int8_matmul_packs_weights_per_call();

}  // namespace kiln
