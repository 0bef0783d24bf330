#pragma once
// Every layer's device implementation (the cuda_layer<Layer, In> specialisations), for the CUDA
// network driver. The training-only kernels (softmax cross-entropy, SGD, data pipeline) are in
// softmax.cuh, sgd.cuh and data.cuh.
#include "activation.cuh"
#include "conv.cuh"
#include "dense.cuh"
#include "pool.cuh"
#include "softmax.cuh"
