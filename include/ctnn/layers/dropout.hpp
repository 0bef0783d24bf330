#pragma once
// Dropout<P> (default 0.5f): inverted dropout. In training each element is kept with probability
// 1 − P and scaled by 1 / (1 − P), or zeroed; in evaluation the layer is the identity (PyTorch's
// nn.Dropout). Element k of sample m of a step (i = m·size + k, m counted from the step's first
// sample, ForwardArgs::first_sample) is dropped when counter_uniform(key, i) < P, key being the
// layer's stream for the step (core/random.hpp): the mask is a pure function of (seed, step, layer,
// i), the same on the host and the device, however a step's batch is split into shards, and a
// resumed run draws the mask of the step it resumes at. The mask (0 or the scale) is saved for
// backward: dx = dy · mask.
#include <array>
#include <string>

#include "../core/layer.hpp"
#include "../core/random.hpp"

namespace ctnn {

template <float P>
struct dropout_math {
  // The factor of a kept element, computed in T as both backends do.
  template <class T> CTNN_HOST_DEVICE static T scale() { return T(1) / (T(1) - T(P)); }
  template <class T> CTNN_HOST_DEVICE static T mask(std::uint64_t key, std::uint64_t i) {
    return counter_uniform(key, i) < P ? T(0) : scale<T>();
  }
};

template <float P = 0.5f>
struct Dropout : layer_tag, no_params {
  static constexpr const char* name = "Dropout";
  static constexpr float probability = P;
  // "Dropout 0.5"
  static std::string label() {
    std::string s = std::to_string(P);
    s.erase(s.find_last_not_of('0') + 1);
    if (!s.empty() && s.back() == '.') s.pop_back();
    return std::string("Dropout ") + s;
  }

  template <class In>
  static constexpr bool check() {
    constexpr bool ok = P >= 0.f && P < 1.f;
    static_assert(ok, "ctnn: Dropout's probability must be in [0, 1) (the probability of zeroing an element; "
                      "1 would drop everything)");
    return ok;
  }

  template <class In>
  struct bind : no_params {
    using input_shape = In;
    using output_shape = In;
    static constexpr std::size_t in_size = In::size, out_size = In::size, flops = In::size;
    static constexpr std::size_t saved_size = In::size;  // the mask: 0 or 1 / (1 − P)

    template <class T>
    static void forward(const ForwardArgs<T>& a) {
      const std::size_t n = std::size_t(a.batch) * in_size;
      if (a.mode == Mode::eval) {
        for (std::size_t i = 0; i < n; ++i) a.y[i] = a.x[i];
        return;
      }
      const std::size_t first = std::size_t(a.first_sample) * in_size;
      for (std::size_t i = 0; i < n; ++i) {
        a.saved[i] = dropout_math<P>::template mask<T>(a.rng_key, first + i);
        a.y[i] = a.x[i] * a.saved[i];
      }
    }
    template <class T>
    static void backward(const BackwardArgs<T>& a) {
      if (!a.dx) return;
      for (std::size_t i = 0; i < std::size_t(a.batch) * in_size; ++i) a.dx[i] = a.dy[i] * a.saved[i];
    }
  };
};

}  // namespace ctnn

#ifdef __CUDACC__
#include "../kernels/dropout.cuh"  // nvcc only
#endif
