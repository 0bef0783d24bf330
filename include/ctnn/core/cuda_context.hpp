#pragma once
// What every device launch needs: the stream, the cuBLAS handle bound to it, and the scratch
// workspace (a slice of the arena sized by BufferPlan::workspace_floats).
#include <cstddef>

#include "cuda_check.hpp"

namespace ctnn {

struct CudaContext {
  cudaStream_t stream = nullptr;
  cublasHandle_t blas = nullptr;
  float* workspace = nullptr;          // device
  std::size_t workspace_floats = 0;
};

// The device implementation of Layer applied to input shape In, mirroring the host reference in
// Layer::bind<In> (core/layer.hpp) with device pointers:
//   static void forward(const CudaContext&, const float* w, const float* b, const float* x, float* y,
//                       int batch);
//   static void backward(const CudaContext&, const float* w, const float* x, const float* y,
//                        const float* dy, float* dx, float* dw, float* db, int batch);
// Specialised in kernels/*.cuh. Kernels themselves take plain integers, so two networks with the
// same layer on the same shape share them.
template <class Layer, class In>
struct cuda_layer;

}  // namespace ctnn
