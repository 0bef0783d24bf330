#pragma once
// LeakyReLU<Slope> (default 0.01f): y = x for x > 0, Slope·x otherwise (PyTorch's nn.LeakyReLU).
// An Activation (layers/activation.hpp): the derivative is written in terms of the output, which
// needs 0 < Slope (then y > 0 exactly when x > 0). At x = 0 the gradient is Slope, as in PyTorch.
#include <string>

#include "../core/host_device.hpp"
#include "../core/layer.hpp"
#include "activation.hpp"

namespace ctnn {

template <float Slope>
struct leaky_relu_fn {
  static constexpr const char* name = "LeakyReLU";
  static constexpr float slope = Slope;
  template <class T> CTNN_HOST_DEVICE static T apply(T x) { return x > T(0) ? x : T(Slope) * x; }
  template <class T> CTNN_HOST_DEVICE static T derivative(T y) { return y > T(0) ? T(1) : T(Slope); }
};

template <float Slope = 0.01f>
struct LeakyReLU : Activation<leaky_relu_fn<Slope>> {
  static constexpr float slope = Slope;
  // "LeakyReLU 0.01"
  static std::string label() {
    std::string s = std::to_string(Slope);
    s.erase(s.find_last_not_of('0') + 1);
    if (!s.empty() && s.back() == '.') s.pop_back();
    return std::string("LeakyReLU ") + s;
  }
  template <class In>
  static constexpr bool check() {
    constexpr bool ok = Slope > 0.f && Slope < 1.f;
    static_assert(ok, "ctnn: LeakyReLU's slope must be in (0, 1) (0 is ReLU; a negative or larger slope "
                      "would make the layer non-monotonic)");
    return ok;
  }
};

}  // namespace ctnn

#ifdef __CUDACC__
#include "../kernels/leaky_relu.cuh"  // nvcc only
#endif
