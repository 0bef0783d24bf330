#pragma once
// GlobalAvgPool: C×H×W → C, the mean of each channel's plane (PyTorch: nn.AdaptiveAvgPool2d(1)
// followed by a flatten, i.e. x.mean((2, 3))). Backward spreads dy / (H·W) over the plane.
#include <string>

#include "../core/layer.hpp"
#include "../core/shape.hpp"

namespace ctnn {

struct GlobalAvgPool : layer_tag, no_params {
  static constexpr const char* name = "GlobalAvgPool";
  static std::string label() { return name; }

  template <class In>
  static constexpr bool check() {
    constexpr bool ok = In::rank == 3;
    static_assert(ok, "ctnn: GlobalAvgPool needs a C x H x W input, but its input is a flat vector");
    return ok;
  }

  template <class In>
  struct bind : no_params {
    static constexpr int C = In::dims[0], HW = In::dims[1] * In::dims[2];
    using input_shape = In;
    using output_shape = Shape<C>;
    static constexpr std::size_t in_size = In::size, out_size = std::size_t(C);
    static constexpr std::size_t flops = In::size;

    template <class T>
    static void forward(const T*, const T*, const T* x, T* y, int batch) {
      for (std::size_t p = 0; p < std::size_t(batch) * C; ++p) {  // p = plane (sample, channel)
        double acc = 0;
        for (int k = 0; k < HW; ++k) acc += double(x[p * HW + std::size_t(k)]);
        y[p] = T(acc / HW);
      }
    }
    template <class T>
    static void backward(const T*, const T*, const T*, const T* dy, T* dx, T*, T*, int batch) {
      if (!dx) return;
      for (std::size_t p = 0; p < std::size_t(batch) * C; ++p) {
        const T g = dy[p] / T(HW);
        for (int k = 0; k < HW; ++k) dx[p * HW + std::size_t(k)] = g;
      }
    }
  };
};

}  // namespace ctnn

#ifdef __CUDACC__
#include "../kernels/global_avg_pool.cuh"  // nvcc only
#endif
