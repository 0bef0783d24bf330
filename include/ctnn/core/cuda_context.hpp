#pragma once
// What every device launch needs (the stream, the cuBLAS handle bound to it, the scratch workspace),
// and the mapping from a layer to its CUDA implementation.
#include <cublasLt.h>

#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "cuda_check.hpp"
#include "layer.hpp"

namespace ctnn {

// The arithmetic of matrix products on the device: FP32 (the default; results comparable with the
// host reference to FP32 rounding) or TF32 tensor cores (inputs rounded to a 10-bit mantissa, FP32
// accumulation: several times the throughput, about 3 decimal digits per product).
enum class Math { fp32, tf32 };

struct CudaContext {
  cudaStream_t stream = nullptr;
  cublasHandle_t blas = nullptr;
  float* workspace = nullptr;          // device
  std::size_t workspace_floats = 0;
  // The training step's number, in device memory (null outside training), read by layers that draw
  // random numbers when the step runs: on the device ForwardArgs::rng_key holds layer_key(seed, layer)
  // and such a layer uses step_key(rng_key, *step) (core/random.hpp), so a captured step needs no
  // recapture to draw new numbers.
  const std::uint64_t* step = nullptr;
  // Matrix products in FP32 or TF32 (cuBLAS follows the handle's math mode; ctnn's own kernels read this).
  Math math = Math::fp32;
  // Integer counters for kernels that finish a split reduction themselves (kernels/reduce.cuh,
  // finish_splits): zero between launches, device memory.
  unsigned* tickets = nullptr;
  std::size_t ticket_count = 0;
  // cuBLASLt, for products with the bias and activation in their epilogue (kernels/dense_lt.cuh); null:
  // those layers use cuBLAS and separate bias and activation kernels instead.
  cublasLtHandle_t blas_lt = nullptr;
  // TF32 copies of convolution weights for the wgmma kernels (kernels/conv_wgmma.cuh, sm_90a), made by
  // the network at the start of each forward: the weights at wgmma_params + i (i < wgmma_floats) have
  // their forward-layout copy at wgmma_weights + i and their backward-data copy at wgmma_weights +
  // wgmma_floats + i. Null (the default): no copies; the Conv layers run their other TF32 kernels. Set,
  // it also tells the layers that the program's device code has wgmma: the weight gradients of the layers
  // that fit run on kernels/conv_wgmma_wgrad.cuh (no copy needed there).
  const float* wgmma_params = nullptr;
  std::size_t wgmma_floats = 0;
  const float* wgmma_weights = nullptr;
};

namespace detail {
template <class T> inline constexpr bool no_cuda_layer_v = false;
}

// The device implementation of Layer applied to input shape In: the host reference of
// Layer::bind<In> (core/layer.hpp) with a CudaContext first and device pointers, in either form:
//   static void forward(const CudaContext&, const float* w, const float* b, const float* x, float* y,
//                       int batch);
//   static void backward(const CudaContext&, const float* w, const float* x, const float* y,
//                        const float* dy, float* dx, float* dw, float* db, int batch);
// or
//   static void forward(const CudaContext&, const ForwardArgs<float>&);
//   static void backward(const CudaContext&, const BackwardArgs<float>&);
// plus static constexpr std::size_t workspace_floats(int max_batch) (scratch the network provides).
// Specialised in kernels/*.cuh, which each layer's header includes when compiled by nvcc, so that a
// network's layers bring their device code with them; enqueue only (no allocation, no synchronisation). Kernels take
// plain integers, so two networks with the same layer on the same shape share them.
template <class Layer, class In>
struct cuda_layer {
  static_assert(detail::no_cuda_layer_v<Layer>,
                "ctnn: no CUDA implementation for this layer (the note below names it): specialise "
                "ctnn::cuda_layer<Layer, In> in a header under kernels/ that the layer's header includes under nvcc");
  // Stand-ins, so that the one message above is the only one.
  static constexpr std::size_t workspace_floats(int) { return 0; }
  template <class... A> static void forward(A&&...) {}
  template <class... A> static void backward(A&&...) {}
};

// Calls the device implementation in whichever form it provides.
template <class K>
void cuda_layer_forward(const CudaContext& ctx, const ForwardArgs<float>& a) {
  if constexpr (requires { K::forward(ctx, a); }) K::forward(ctx, a);
  else K::forward(ctx, a.w, a.b, a.x, a.y, a.batch);
}
template <class K>
void cuda_layer_backward(const CudaContext& ctx, const BackwardArgs<float>& a) {
  if constexpr (requires { K::backward(ctx, a); }) K::backward(ctx, a);
  else K::backward(ctx, a.w, a.x, a.y, a.dy, a.dx, a.dw, a.db, a.batch);
}

}  // namespace ctnn
