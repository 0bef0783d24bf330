#pragma once
// Seeded deterministic initialisation of the parameters and the layer state, laid out by BufferPlan.
// A layer with an init member initialises itself (core/layer.hpp). Otherwise a Conv or Dense followed
// by ReLU gets He-normal weights (std = sqrt(2 / fan_in)), any other Xavier-uniform
// (±sqrt(6 / (fan_in + fan_out))); biases and state start at zero.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <type_traits>

#include "../core/random.hpp"
#include "../layers/activation.hpp"
#include "plan.hpp"

namespace ctnn {

template <class Net, class T>
void init_parameters(T* params, T* state, std::uint64_t seed) {
  using Plan = BufferPlan<Net>;
  std::fill(params, params + Plan::param_floats, T(0));
  std::fill(state, state + Plan::state_floats, T(0));
  Random rng(seed);
  Net::for_each_layer([&](auto index) {
    constexpr std::size_t i = decltype(index)::value;
    using B = typename Net::template bound_at<i>;
    T* w = params + Plan::weight_offset[i];
    T* b = params + Plan::bias_offset[i];
    if constexpr (requires { B::init(w, b, state, rng); }) {
      B::init(w, b, state + Plan::state_offset[i], rng);
    } else if constexpr (B::weight_count > 0) {
      using WS = typename B::weight_shape;  // [Out][In...]
      constexpr std::size_t fan_out_units = std::size_t(WS::dims[0]);
      constexpr std::size_t fan_in = B::weight_count / fan_out_units;
      constexpr std::size_t receptive = WS::rank == 4 ? std::size_t(WS::dims[2]) * WS::dims[3] : 1;
      constexpr std::size_t fan_out = fan_out_units * receptive;
      constexpr bool before_relu =
          i + 1 < Net::layer_count &&
          std::is_same_v<typename Net::template layer_at<(i + 1 < Net::layer_count ? i + 1 : i)>, ReLU>;
      if constexpr (before_relu) {
        const double stddev = std::sqrt(2.0 / double(fan_in));
        for (std::size_t k = 0; k < B::weight_count; ++k) w[k] = T(stddev * rng.normal());
      } else {
        const double limit = std::sqrt(6.0 / double(fan_in + fan_out));
        for (std::size_t k = 0; k < B::weight_count; ++k) w[k] = T(rng.uniform(-limit, limit));
      }
    }
  });
}

}  // namespace ctnn
