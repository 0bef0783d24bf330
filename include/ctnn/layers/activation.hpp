#pragma once
// Element-wise activations ReLU, Sigmoid, Tanh. Their derivatives are written in terms of the output
// y, so backward needs no copy of the input. The math (relu_fn, ...) is written once, for the host
// reference and the device kernels (kernels/activation.cuh) alike.
#include <cmath>
#include <string>

#include "../core/host_device.hpp"
#include "../core/layer.hpp"

namespace ctnn {

template <class Fn>
struct Activation : layer_tag, no_params {
  static constexpr const char* name = Fn::name;
  static std::string label() { return name; }

  template <class In>
  static constexpr bool check() { return true; }

  template <class In>
  struct bind : no_params {
    using input_shape = In;
    using output_shape = In;
    static constexpr std::size_t in_size = In::size, out_size = In::size;
    static constexpr std::size_t flops = In::size;

    template <class T>
    static void forward(const T*, const T*, const T* x, T* y, int batch) {
      for (std::size_t i = 0; i < std::size_t(batch) * in_size; ++i) y[i] = Fn::apply(x[i]);
    }
    template <class T>
    static void backward(const T*, const T*, const T* y, const T* dy, T* dx, T*, T*, int batch) {
      if (!dx) return;
      for (std::size_t i = 0; i < std::size_t(batch) * in_size; ++i) dx[i] = dy[i] * Fn::derivative(y[i]);
    }
  };
};

struct relu_fn {
  static constexpr const char* name = "ReLU";
  template <class T> CTNN_HOST_DEVICE static T apply(T x) { return x > T(0) ? x : T(0); }
  template <class T> CTNN_HOST_DEVICE static T derivative(T y) { return y > T(0) ? T(1) : T(0); }
};
struct sigmoid_fn {
  static constexpr const char* name = "Sigmoid";
  template <class T> CTNN_HOST_DEVICE static T apply(T x) { return T(1) / (T(1) + std::exp(-x)); }
  template <class T> CTNN_HOST_DEVICE static T derivative(T y) { return y * (T(1) - y); }
};
struct tanh_fn {
  static constexpr const char* name = "Tanh";
  template <class T> CTNN_HOST_DEVICE static T apply(T x) { return std::tanh(x); }
  // 1 − y·y with the product rounded on its own, so that host and device agree near |y| = 1.
  template <class T> CTNN_HOST_DEVICE static T derivative(T y) { return T(1) - rn::mul(y, y); }
};

// No activation: what a fused group (network/fusion.hpp) applies where none follows its Conv or Dense.
struct identity_fn {
  static constexpr const char* name = "Identity";
  template <class T> CTNN_HOST_DEVICE static T apply(T x) { return x; }
  template <class T> CTNN_HOST_DEVICE static T derivative(T) { return T(1); }
};

struct ReLU : Activation<relu_fn> {};
struct Sigmoid : Activation<sigmoid_fn> {};
struct Tanh : Activation<tanh_fn> {};

}  // namespace ctnn

// Under nvcc the layer's CUDA implementation (its cuda_layer specialisation) comes with it.
#ifdef __CUDACC__
#include "../kernels/activation.cuh"  // nvcc only
#endif
