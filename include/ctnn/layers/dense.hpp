#pragma once
// Dense<N>: fully connected, y = W·x + b over the flattened input (C,H,W order, as PyTorch).
// Weight [N][In], bias [N].
#include <cstddef>
#include <string>
#include <vector>

#include "../core/layer.hpp"

namespace ctnn {

// A Dense with at least this many weights (N·I) is large: on the device its backward at batches of
// several chunks goes through cuBLAS's GEMM and its weight gradient may run on the fused backward's
// second stream (kernels/dense.cuh), and the fusion planner keeps it out of dense chains
// (network/fusion.hpp). A CIFAR head, 4096 -> 256, is large; LeNet-5's layers are not.
inline constexpr std::size_t dense_large_weights = std::size_t(1) << 18;

template <int N>
struct Dense : layer_tag {
  static constexpr const char* name = "Dense";
  static constexpr int units = N;

  static std::string label() { return "Dense " + std::to_string(N); }

  template <class In>
  static constexpr bool check() {
    static_assert(N > 0, "ctnn: Dense needs at least one output unit (N > 0)");
    return N > 0;
  }

  template <class In>
  struct bind {
    static constexpr int I = int(In::size);  // flattened input length
    using input_shape = In;
    using output_shape = Shape<N>;
    using weight_shape = Shape<N, I>;
    using bias_shape = Shape<N>;
    static constexpr std::size_t in_size = I, out_size = N;
    static constexpr std::size_t weight_count = std::size_t(N) * I, bias_count = N;
    static constexpr std::size_t flops = 2 * std::size_t(N) * I;

    template <class T>
    static void forward(const T* w, const T* b, const T* x, T* y, int batch) {
      for (int n = 0; n < batch; ++n)
        for (int o = 0; o < N; ++o) {
          double acc = b[o];
          for (int i = 0; i < I; ++i) acc += double(w[std::size_t(o) * I + i]) * double(x[std::size_t(n) * I + i]);
          y[std::size_t(n) * N + o] = T(acc);
        }
    }

    template <class T>
    static void backward(const T* w, const T* x, const T*, const T* dy, T* dx, T* dw, T* db,
                         int batch) {
      for (int o = 0; o < N; ++o) {
        double gb = 0;
        for (int n = 0; n < batch; ++n) gb += dy[std::size_t(n) * N + o];
        db[o] = T(gb);
        for (int i = 0; i < I; ++i) {
          double g = 0;
          for (int n = 0; n < batch; ++n)
            g += double(dy[std::size_t(n) * N + o]) * double(x[std::size_t(n) * I + i]);
          dw[std::size_t(o) * I + i] = T(g);
        }
      }
      if (!dx) return;
      for (int n = 0; n < batch; ++n)
        for (int i = 0; i < I; ++i) {
          double g = 0;
          for (int o = 0; o < N; ++o) g += double(w[std::size_t(o) * I + i]) * double(dy[std::size_t(n) * N + o]);
          dx[std::size_t(n) * I + i] = T(g);
        }
    }
  };
};

}  // namespace ctnn

// Under nvcc the layer's CUDA implementation (its cuda_layer specialisation) comes with it.
#ifdef __CUDACC__
#include "../kernels/dense.cuh"  // nvcc only
#endif
