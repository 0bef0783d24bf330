#pragma once
// Softmax over a flat vector. Must be the network's last layer: training pairs it with cross-entropy
// and uses the fused gradient ŷ − y (train/softmax_cross_entropy.hpp); the general backward below is what the
// finite-difference check verifies.
#include <cmath>
#include <string>

#include "../core/layer.hpp"

namespace ctnn {

struct Softmax : layer_tag, no_params {
  static constexpr const char* name = "Softmax";
  static std::string label() { return name; }

  template <class In>
  static constexpr bool check() {
    static_assert(In::rank == 1,
                  "ctnn: Softmax needs a flat input vector; put a Dense layer before it");
    return In::rank == 1;
  }

  template <class In>
  struct bind : no_params {
    static constexpr int N = int(In::size);
    using input_shape = In;
    using output_shape = In;
    static constexpr std::size_t in_size = N, out_size = N;
    static constexpr std::size_t flops = 3 * std::size_t(N);

    template <class T>
    static void forward(const T*, const T*, const T* x, T* y, int batch) {
      for (int n = 0; n < batch; ++n) {
        const T* xn = x + std::size_t(n) * N;
        T* yn = y + std::size_t(n) * N;
        double top = xn[0], sum = 0;
        for (int i = 1; i < N; ++i) top = xn[i] > top ? double(xn[i]) : top;
        for (int i = 0; i < N; ++i) sum += std::exp(double(xn[i]) - top);
        for (int i = 0; i < N; ++i) yn[i] = T(std::exp(double(xn[i]) - top) / sum);
      }
    }
    // dx = y ⊙ (dy − ⟨dy, y⟩)
    template <class T>
    static void backward(const T*, const T*, const T* y, const T* dy, T* dx, T*, T*, int batch) {
      if (!dx) return;
      for (int n = 0; n < batch; ++n) {
        const std::size_t o = std::size_t(n) * N;
        double dot = 0;
        for (int i = 0; i < N; ++i) dot += double(dy[o + i]) * double(y[o + i]);
        for (int i = 0; i < N; ++i) dx[o + i] = T(double(y[o + i]) * (double(dy[o + i]) - dot));
      }
    }
  };
};

}  // namespace ctnn

// Under nvcc the layer's CUDA implementation (its cuda_layer specialisation) comes with it.
#ifdef __CUDACC__
#include "../kernels/softmax.cuh"  // nvcc only
#endif
